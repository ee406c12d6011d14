"""Forget requests and compound memories: which memory a request names, and what is left of a memory
that joins several statements once some of them go."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memory_core.domain.messages import MemoryCandidate, MemoryEvent
from memory_core.language.text import has_japanese
from memory_core.service.consolidation.decisions import Neighbour, SimilarityThresholds, Verdict, shortened
from memory_core.service.consolidation.features import (
    StatementFeatures,
    speaker_of,
    split_speaker,
    statement_features,
)
from memory_core.service.extraction.statements import statement_parts

__all__ = ["decide_forget", "join_clauses", "remaining_statements", "statement_clauses"]


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
    best: tuple[float, float, Neighbour] | None = None
    for n in ordered:
        have = statement_features(n.record.memory, speaker_of(n.record))
        if wanted.speaker and have.speaker and wanted.speaker != have.speaker:
            continue  # someone else's memory
        coverage = _covers(wanted, have, similar=n.similarity >= thresholds.duplicate)
        if coverage is None:
            continue
        if coverage < 1.0 and n.similarity < thresholds.related:
            continue
        if best is None or (coverage, n.similarity) > best[:2]:
            best = (coverage, n.similarity, n)
    if best is None:
        return Verdict(
            MemoryEvent.NONE, None, None, f"forget request matched no memory: {shortened(candidate.memory)!r}"
        )
    n = best[2]
    remainder = remaining_statements(n.record.memory, speaker_of(n.record), lambda part: _named(wanted, part))
    if remainder is not None:
        return Verdict(
            MemoryEvent.UPDATE,
            n.record,
            remainder,
            f"forget request {shortened(candidate.memory)!r} names part of this memory: the rest is kept",
            supersedes=True,
        )
    return Verdict(
        MemoryEvent.DELETE,
        n.record,
        None,
        f"forget request {shortened(candidate.memory)!r} matches this memory (similarity {n.similarity:.2f})",
    )
