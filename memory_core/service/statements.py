"""One place for one statement: an episode and the facts distilled from it take one place in a search
result (:func:`facts_first`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.domain.records import MemoryKind
from memory_core.domain.search import SearchHit
from memory_core.language.text import analyze

__all__ = ["STATEMENT_COVER", "facts_first"]

#: How much of an episode's words the facts from it must say for them to stand for it. LoCoMo end to
#: end any@5: 0.6 0.669, **0.8 0.668**, 0.95 0.665 (docs/evaluation.md).
STATEMENT_COVER = 0.8


def facts_first(hits: Sequence[SearchHit], top: int) -> list[SearchHit]:
    """The first ``top`` hits, an episode and the facts distilled from it counting as one.

    A fact distilled from what was said points to the episode of the same words (its provenance); its
    *statements* are the facts from its message whose words it says (:data:`STATEMENT_COVER`). An
    episode and its statements take one place in the result, the best of theirs, and the next memory
    gets the place freed (an agent handed "I live in Bristol" and "I live in Bristol." learns nothing
    twice):

    * the facts stand (each at its own place) when they say all the episode says and the episode is
      not more relevant than each of them: facts outrank the episode they came from;
    * the episode stands otherwise: it says more than the facts (「メールアドレスを変えました。これからは
      taro.k@mail.example.comでお願いします。」 over the fact 「メールアドレスを変えました」), or it is more
      relevant to the question than they are.

    An episode standing at a fact's place shows that place's score. A fact that says something its
    episode does not (a date it gave, or another message it also came from) keeps its place, and the
    episode goes after it unless it is more relevant; everything else keeps its rank. LoCoMo end to
    end any@5: 0.655 with each episode kept below its facts, 0.668 with one place for both
    (docs/evaluation.md).
    """
    statements = _statements(hits)
    place = [float(at) for at in range(len(hits))]
    standing: dict[int, float] = {}  # an episode standing for its facts -> the score of its place
    for episode, facts in statements.items():
        said = [hits[f] for f in facts]
        if _covered(hits[episode], said) and not all(_more_relevant(hits[episode], f) for f in said):
            place[episode] = -1.0
            continue
        for fact in facts:
            place[fact] = -1.0
        place[episode] = min([episode, *facts])
        standing[episode] = max(hits[i].score for i in (episode, *facts))
    _below_its_facts(hits, place, statements)
    order = sorted((i for i in range(len(hits)) if place[i] >= 0), key=lambda i: place[i])
    return [hits[i].model_copy(update={"score": standing[i]}) if i in standing else hits[i] for i in order][:top]


def _statements(hits: Sequence[SearchHit]) -> dict[int, list[int]]:
    """Each episode among ``hits`` (by position) with the facts among them that are its statements:
    from its message alone, and saying nothing it does not say."""
    episode_of: dict[tuple[str, int], int] = {}
    for at, hit in enumerate(hits):
        if hit.record.kind is MemoryKind.EPISODE:
            episode_of.update({(s.turn_id, s.message): at for s in hit.record.provenance})
    statements: dict[int, list[int]] = {}
    for at, hit in enumerate(hits):
        if hit.record.kind is not MemoryKind.FACT:
            continue
        sources = {episode_of.get((s.turn_id, s.message)) for s in hit.record.provenance}
        episode = sources.pop() if len(sources) == 1 else None
        if episode is not None and _covered(hit, [hits[episode]]):
            statements.setdefault(episode, []).append(at)
    return statements


def _below_its_facts(hits: Sequence[SearchHit], place: list[float], statements: Mapping[int, list[int]]) -> None:
    """Place each other episode after the facts from its message that say something it does not ("I
    moved to Munich last month" after "I moved to Munich last month (November 2026)"), unless it is more
    relevant than they are: facts outrank the episode they came from."""
    cited: dict[tuple[str, int], list[int]] = {}
    for at, hit in enumerate(hits):
        if hit.record.kind is MemoryKind.FACT:
            for source in hit.record.provenance:
                cited.setdefault((source.turn_id, source.message), []).append(at)
    for at, hit in enumerate(hits):
        if hit.record.kind is not MemoryKind.EPISODE or at in statements:
            continue
        citing = [
            fact
            for s in hit.record.provenance
            for fact in cited.get((s.turn_id, s.message), ())
            if not _more_relevant(hit, hits[fact])
        ]
        if citing and max(citing) > at:
            place[at] = max(citing) + 0.5


def _covered(memory: SearchHit, by: Sequence[SearchHit]) -> bool:
    """Whether the memories ``by`` say what ``memory`` says: at least :data:`STATEMENT_COVER` of its words."""
    words = set(analyze(memory.record.memory))
    if not words:
        return True
    said = {w for other in by for w in analyze(other.record.memory)}
    return len(words & said) >= STATEMENT_COVER * len(words)


def _more_relevant(episode: SearchHit, fact: SearchHit) -> bool:
    return episode.relevance is not None and fact.relevance is not None and episode.relevance > fact.relevance
