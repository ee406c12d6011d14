"""Forget requests and compound memories: which memory a request names, and what is left of a memory
that joins several statements once some of them go."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from memory_core.domain.messages import MemoryCandidate, MemoryEvent
from memory_core.domain.records import MemoryKind
from memory_core.language.sentences import join_sentences, split_sentences
from memory_core.language.text import has_japanese
from memory_core.language.topics import PAST_QUALIFIERS
from memory_core.service.consolidation.decisions import Neighbour, SimilarityThresholds, Verdict
from memory_core.service.consolidation.features import (
    StatementFeatures,
    normalized_statement,
    speaker_of,
    split_speaker,
    statement_features,
)
from memory_core.service.extraction.statements import statement_parts

__all__ = ["decide_forget", "join_clauses", "redact_sentences", "remaining_statements", "statement_clauses"]


#: Words a forget request qualifies what it names with, in time ("my old school nickname", "my
#: previous address", "that I used to live in Berlin", 「昔の」「以前の」): the memory it names need not say them.
_QUALIFIERS = frozenset(PAST_QUALIFIERS) | {"used"}


def statement_clauses(text: str) -> list[str]:
    """The statements one memory joins, each as a statement ("I'm vegetarian and I live in Berlin" →
    two; 「ベジタリアンで、大阪に住んでいます」 → 「ベジタリアンです」, 「大阪に住んでいます」); a memory is split only
    where every part is a statement on its own (see :func:`~memory_core.service.extraction.statements.statement_parts`)."""
    return [statement for _, statement in statement_parts(text)]


def join_clauses(clauses: Sequence[str], japanese: bool) -> str:
    """One text of the statements :func:`statement_clauses` gave (what a forget request leaves)."""
    if japanese:
        return "。".join(clauses)
    return ", and ".join(
        [*clauses[:1], *(c[:1].lower() + c[1:] if c.startswith("My ") else c for c in clauses[1:])]
    )


def _covers(wanted: StatementFeatures, have: StatementFeatures, similar: bool) -> float | None:
    """How much of a forget request a statement covers (see :func:`decide_forget`), or ``None``."""
    if wanted.text and wanted.text == have.text:
        return 2.0
    if not wanted.terms:
        return 0.0 if similar else None
    shared = len(wanted.terms & have.terms)
    coverage = shared / len(wanted.terms)
    inside = bool(have.terms) and shared == len(have.terms)
    if coverage >= 0.75 or (coverage >= 0.5 and inside) or (coverage >= 0.5 and similar):
        return coverage
    return None


def _named(wanted: StatementFeatures, clause: StatementFeatures) -> bool:
    """A forget request names this statement of a memory: it covers the request, or the request covers
    most of it."""
    if _covers(wanted, clause, similar=False) is not None:
        return True
    return bool(clause.terms) and len(wanted.terms & clause.terms) / len(clause.terms) >= 0.75


def remaining_statements(
    memory: str, speaker: str | None, named: Callable[[StatementFeatures], bool]
) -> str | None:
    """What is left of a compound memory once the statements ``named`` picks are taken out, or ``None``
    when it picks all of them, none of them, or the memory is one statement."""
    name, body = split_speaker(memory, speaker)
    clauses = statement_clauses(body)
    if len(clauses) < 2:
        return None
    kept = [c for c in clauses if not named(statement_features(c))]
    if not kept or len(kept) == len(clauses):
        return None
    text = join_clauses(kept, has_japanese(body))
    return f"{name}: {text}" if name else text


def redact_sentences(text: str, forgotten: Sequence[str]) -> tuple[str, bool]:
    """``text`` without what states one of ``forgotten``; and whether anything was removed.

    A sentence that says a forgotten statement goes; when it joins that statement with others ("I'm
    vegetarian and I live in Berlin"), only the forgotten statement goes and the rest of it stays.
    """
    wanted = [w for w in map(normalized_statement, forgotten) if w]

    def says(statement: str) -> bool:
        said = normalized_statement(statement)
        return bool(said) and any(w in said or said in w for w in wanted)

    kept, removed = [], False
    for sentence in split_sentences(text):
        if not says(sentence):
            kept.append(sentence)
            continue
        removed = True
        clauses = statement_clauses(sentence)
        rest = [c for c in clauses if not says(c)]
        if len(clauses) > 1 and rest:
            japanese = has_japanese(sentence)
            kept.append(join_clauses(rest, japanese) + ("。" if japanese else "."))
    return join_sentences(kept), removed


def _forget_in_episode(candidate: MemoryCandidate, wanted: StatementFeatures, n: Neighbour) -> Verdict:
    """A forget request that names what an episode says (no fact holds it): the sentences that say it
    go (UPDATE), or the whole episode when nothing else is left (DELETE)."""
    speaker = speaker_of(n.record)
    name, body = split_speaker(n.record.memory, speaker)
    sentences = split_sentences(body)
    kept = [s for s in sentences if not _named(wanted, statement_features(s, speaker))]
    if kept and len(kept) < len(sentences):
        text = join_sentences(kept)
        return Verdict(
            MemoryEvent.UPDATE,
            n.record,
            f"{name}: {text}" if name else text,
            "forget request: the words of this episode that said it are removed",
            supersedes=True,
        )
    return Verdict(MemoryEvent.DELETE, n.record, None, "forget request: this episode said what is to be forgotten")


def decide_forget(
    candidate: MemoryCandidate, ordered: Sequence[Neighbour], thresholds: SimilarityThresholds
) -> Verdict:
    """DELETE the one memory that best matches a forget request, or NONE.

    A memory matches when it has the same text, or when the request's content words are mostly in it
    (3/4 or more), or half of them are and the memory says nothing beyond the request, or half are and
    the two are near-duplicates by embedding. A partial match must also be related by embedding.
    "京都の紅葉の話は忘れて" therefore leaves "京都に住んでいます" alone.
    """
    wanted = statement_features(candidate.memory, candidate.speaker)
    if wanted.terms - _QUALIFIERS:  # "my old school nickname" names the nickname, old or not
        wanted = replace(wanted, terms=wanted.terms - _QUALIFIERS)
    best: tuple[bool, float, bool, float, Neighbour] | None = None
    for n in ordered:
        have = statement_features(n.record.memory, speaker_of(n.record))
        if wanted.speaker and have.speaker and wanted.speaker != have.speaker:
            continue  # someone else's memory
        coverage = _covers(wanted, have, similar=n.similarity >= thresholds.duplicate)
        if coverage is None:
            continue
        if coverage < 1.0 and n.similarity < thresholds.related:
            continue
        fact = n.record.kind is MemoryKind.FACT  # a fact first: its episodes lose its words with it
        current = not n.record.superseded  # what holds now before what it replaced: its earlier values go with it
        if best is None or (fact, coverage, current, n.similarity) > best[:4]:
            best = (fact, coverage, current, n.similarity, n)
    if best is None:
        return Verdict(
            MemoryEvent.NONE, None, None, "forget request: nothing remembered matches what it names"
        )
    n = best[4]
    if n.record.kind is MemoryKind.EPISODE:
        return _forget_in_episode(candidate, wanted, n)
    remainder = remaining_statements(n.record.memory, speaker_of(n.record), lambda part: _named(wanted, part))
    if remainder is not None:
        return Verdict(
            MemoryEvent.UPDATE,
            n.record,
            remainder,
            "forget request: it names part of this memory; the rest is kept",
            supersedes=True,
        )
    return Verdict(
        MemoryEvent.DELETE,
        n.record,
        None,
        f"forget request: this memory says what is to be forgotten (similarity {n.similarity:.2f})",
    )
