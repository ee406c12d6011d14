"""A turn that comes again: the result of one ingested before, and the steps an earlier attempt
decided brought back to their recorded states."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from memory_core.domain.messages import HistoryEntry, MemoryCandidate, Turn
from memory_core.domain.records import FORGOTTEN_TEXT, MemoryKind, MemoryRecord, Scope
from memory_core.ports import Embedder, HistoryStore, MemoryStore, TurnJournal
from memory_core.service.consolidation.decisions import SimilarityThresholds
from memory_core.service.episodes import (
    catch_up_redactions,
    forgotten_by,
    forgotten_words,
    supersede_with_episode,
    withhold_forgotten,
)
from memory_core.service.forget_sweep import sweep_forgotten
from memory_core.service.journal import decision_from_entry
from memory_core.service.results import IngestResult, StepResult

__all__ = ["already_ingested", "resume"]

logger = logging.getLogger(__name__)


async def already_ingested(history: HistoryStore, turn: Turn, started: float) -> IngestResult:
    """The result of a turn ingested before: its recorded decisions, and nothing done."""
    journal = await history.journal(turn.scope, turn.turn_id)
    recorded = await history.for_turn(turn.scope, turn.turn_id)
    candidates = list(journal.candidates) if journal else []
    steps = [
        StepResult(i, decision_from_entry(e, candidates[i] if i < len(candidates) else _placeholder(e)), "recorded")
        for i, e in enumerate(recorded)
    ]
    logger.info("turn %s was already ingested; nothing to do", turn.turn_id)
    return IngestResult(
        turn_id=turn.turn_id,
        scope=turn.scope,
        status="duplicate",
        extraction_path=journal.extraction_path if journal else "none",
        fallback_reason=journal.fallback_reason if journal else None,
        steps=steps,
        seconds=time.perf_counter() - started,
    )


def _placeholder(entry: HistoryEntry) -> MemoryCandidate:
    text = (entry.after or entry.before or {}).get("memory") or "?"
    return MemoryCandidate(memory=str(text))


async def resume(
    store: MemoryStore,
    history: HistoryStore,
    embedder: Embedder,
    turn: Turn,
    journal: TurnJournal,
    thresholds: SimilarityThresholds,
) -> list[StepResult]:
    """Re-apply the steps an earlier attempt at ``turn`` decided (their writes may not have happened),
    and what followed them (``thresholds``: the consolidator's, for the episodes a new one supersedes).

    Returns:
        Their recorded decisions, in order.
    """
    recorded = await history.for_turn(turn.scope, turn.turn_id)
    await _reapply(store, history, embedder, turn, recorded, thresholds)
    for step in sorted(journal.completed_steps):  # a broad forget request's sweep may have stopped midway
        await sweep_forgotten(store, history, embedder, journal.candidates[step], turn)
    return [
        StepResult(step, decision_from_entry(entry, journal.candidates[step]), "recorded")
        for entry, step in zip(recorded, sorted(journal.completed_steps), strict=False)
    ]


async def _reapply(
    store: MemoryStore,
    history: HistoryStore,
    embedder: Embedder,
    turn: Turn,
    entries: Sequence[HistoryEntry],
    thresholds: SimilarityThresholds,
) -> None:
    """Bring the store to the recorded after-states of a turn's decided steps (idempotent)."""
    first, last = _recorded_states(entries)
    for memory_id, state in last.items():
        wanted = MemoryRecord.model_validate(state)
        await catch_up_redactions(store, history, embedder, wanted, first.get(memory_id), turn)
        if forgotten_by(wanted, turn) and wanted.memory != FORGOTTEN_TEXT:
            before = first.get(memory_id)
            words = forgotten_words(None if before is None else MemoryRecord.model_validate(before), wanted)
            wanted = await withhold_forgotten(store, history, wanted, words, turn)
        await _restore(store, embedder, turn.scope, memory_id, wanted)
        if memory_id not in first and wanted.kind is MemoryKind.EPISODE:  # an episode the turn added
            await supersede_with_episode(store, history, thresholds, await store.get(turn.scope, memory_id), turn)


def _recorded_states(entries: Sequence[HistoryEntry]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The first recorded before-state and the last recorded after-state of each memory ``entries`` change."""
    first: dict[str, dict[str, Any]] = {}
    last: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.after is not None and entry.memory_id:
            last[entry.memory_id] = entry.after
            if entry.before is not None:
                first.setdefault(entry.memory_id, entry.before)
    return first, last


async def _restore(store: MemoryStore, embedder: Embedder, scope: Scope, memory_id: str, wanted: MemoryRecord) -> None:
    """Write ``wanted`` unless the store holds it already (keeping the stored vector of the same text)."""
    current = await store.get(scope, memory_id)
    if current is not None and current.to_json_dict(include_embedding=False) == wanted.to_json_dict(
        include_embedding=False
    ):
        return
    if wanted.memory == FORGOTTEN_TEXT:
        embedding = None  # a tombstone has no vector
    elif current is not None and current.memory == wanted.memory and current.embedding is not None:
        embedding = current.embedding
    else:
        embedding = [float(x) for x in (await embedder.embed_passages([wanted.memory]))[0]]
    logger.info("re-applying recorded state of memory %s (turn redelivered)", memory_id)
    await store.upsert([wanted.model_copy(update={"embedding": embedding})])
