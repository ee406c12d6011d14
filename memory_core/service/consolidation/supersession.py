"""Which earlier episodes a new one supersedes (pure): what the user said before, compared statement by
statement with the contradiction rules, and a correction with the statement it corrects (DESIGN
section 7). An episode is what was said then; once superseded it stays, dated, but is not shown as what
holds now."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.domain.records import MemoryRecord
from memory_core.language.corrections import says_correction
from memory_core.language.sentences import split_sentences
from memory_core.service.consolidation.comparison import compare_statements
from memory_core.service.consolidation.decisions import Neighbour, SimilarityThresholds
from memory_core.service.consolidation.features import speaker_of, split_speaker
from memory_core.service.consolidation.forget import statement_clauses
from memory_core.service.consolidation.rules import contradiction

__all__ = ["Supersession", "statements_in", "statements_of", "superseded_episodes"]


@dataclass(frozen=True, slots=True)
class Supersession:
    """An episode said earlier that a later one replaces, and why."""

    earlier: MemoryRecord
    later: MemoryRecord
    reason: str


#: Where a sentence turns to another statement ("I gave up on French, but Japanese is going well";
#: 「ドラムはやめたけど、ギターは続けてる」).
_TURN = re.compile(r"[,;]\s*(?:but|though|although|yet|while)\s+|;\s+|(?:けど|けれど|けれども)、?|、(?:でも|だけど)")
#: A Japanese clause is also read piece by piece (「辛いのはもう無理になった、胃が弱くて」).
_PIECE_JA = re.compile(r"、")


def statements_of(record: MemoryRecord) -> list[str]:
    """The statements of a memory (its speaker's name left out): :func:`statements_in`."""
    return statements_in(split_speaker(record.memory, speaker_of(record))[1])


def statements_in(text: str) -> list[str]:
    """The statements of a text: its sentences, each split where its clauses are statements on their
    own and where it turns to another ("I gave up on French, but Japanese is going well" → two)."""
    return [
        part.strip()
        for sentence in split_sentences(text)
        for clause in statement_clauses(sentence)
        for part in _TURN.split(clause)
        if part.strip()
    ]


def _readings(statement: str) -> list[str]:
    """A later statement as the contradiction rules read it: whole, and a Japanese one also piece by piece."""
    pieces = [p.strip() for p in _PIECE_JA.split(statement) if p.strip()]
    return [statement, *pieces] if len(pieces) > 1 else [statement]


def _said_before(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Whether ``a`` was said before ``b`` (when each was said, not when its turn arrived)."""
    return (a.valid_from or a.created_at, a.id) < (b.valid_from or b.created_at, b.id)


def _same_speaker(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Whether two episodes are one person's words (or do not say whose): what one person says never
    replaces what another said ("Caroline: I live in Boston" leaves "Melanie: I live in Denver")."""
    one, other = speaker_of(a), speaker_of(b)
    return one is None or other is None or one == other


def _contradicted(earlier: MemoryRecord, later: MemoryRecord) -> str | None:
    """Why what ``later`` says replaces the one statement of ``earlier``, or ``None``. An earlier episode
    of several statements is never replaced whole: the others still hold."""
    old = statements_of(earlier)
    if len(old) != 1 or not _same_speaker(earlier, later):
        return None
    old_speaker, new_speaker = speaker_of(earlier), speaker_of(later)
    for statement in (r for s in statements_of(later) for r in _readings(s)):
        reason = contradiction(
            compare_statements(old[0], statement, old_speaker=old_speaker, new_speaker=new_speaker)
        )
        if reason is not None:
            return reason
    return None


def _corrected(episode: MemoryRecord, earlier: Sequence[Neighbour], thresholds: SimilarityThresholds) -> Supersession | None:
    """A correction that does not repeat the wrong value ("My mistake, it's at 5 pm", 「訂正します、火曜日でし
    た」) replaces the closest one-statement episode said before it that it speaks of: one that shares a
    content word or names another date, time or number, or is as close as related memories are."""
    text = split_speaker(episode.memory, speaker_of(episode))[1]
    if not says_correction(text):
        return None
    for n in sorted(earlier, key=lambda n: (-n.similarity, n.record.id)):
        old = statements_of(n.record)
        if len(old) != 1 or not _said_before(n.record, episode) or not _same_speaker(n.record, episode):
            continue
        c = compare_statements(old[0], text, old_speaker=speaker_of(n.record), new_speaker=speaker_of(episode))
        if c.same_text:
            continue
        if c.old.terms & c.new.terms or c.when_conflict or c.numbers_conflict or n.similarity >= thresholds.related:
            return Supersession(n.record, episode, "corrected: the new statement says the earlier one was wrong")
    return None


def superseded_episodes(
    episode: MemoryRecord, neighbours: Sequence[Neighbour], thresholds: SimilarityThresholds
) -> list[Supersession]:
    """The episodes a new ``episode`` and its nearest current episodes replace, in either direction: the
    one said earlier is replaced by the one said later, so a turn that arrives late (said before what is
    stored) is itself the one replaced.

    Checked, for each neighbour of one statement: the contradiction rules
    (:data:`~memory_core.service.consolidation.rules.CONTRADICTION_RULES`) between its statement and each
    of the later one's; then, when nothing contradicts, a correction (:func:`_corrected`).
    """
    found: list[Supersession] = []
    others = [n for n in neighbours if n.record.id != episode.id and not n.record.superseded]
    for n in others:
        if _said_before(n.record, episode):
            reason = _contradicted(n.record, episode)
            if reason is not None:
                found.append(Supersession(n.record, episode, reason))
        else:
            reason = _contradicted(episode, n.record)
            if reason is not None:
                return [Supersession(episode, n.record, reason)]
    if not found:
        corrected = _corrected(episode, others, thresholds)
        if corrected is not None:
            found.append(corrected)
    return found
