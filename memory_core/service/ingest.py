"""Ingestion: one turn through extraction, consolidation and the store, in its named phases
(:func:`ingest_turn`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memory_core.domain.messages import CandidateKind, Decision, MemoryCandidate, MemoryEvent, Turn
from memory_core.domain.records import Scope
from memory_core.domain.validation import parse_model
from memory_core.ports import (
    Clock,
    Embedder,
    EmbedderWrapper,
    HistoryStore,
    MemoryStore,
    TurnJournal,
    TurnStart,
)
from memory_core.service.admin import rewrite_files
from memory_core.service.consolidation.consolidator import Consolidation, MemoryConsolidator
from memory_core.service.earlier_values import keep_earlier_value
from memory_core.service.episodes import (
    EpisodePolicy,
    close_superseded_episodes,
    forgotten_by,
    forgotten_words,
    provenance_of,
    redact_episodes,
    supersede_with_episode,
    withhold_forgotten,
)
from memory_core.service.forget_sweep import reported, sweep_forgotten, swept_by
from memory_core.service.journal import (
    dropped_by_purge,
    purged_before,
    step_entry,
    step_memory_id,
    wait_for_purge,
)
from memory_core.service.preparation import CandidateExtractor, PreparedTurn, turn_candidates
from memory_core.service.replay import already_ingested, resume
from memory_core.service.results import IngestResult, StepResult

__all__ = ["TimedEmbedder", "ingest_turn"]

logger = logging.getLogger(__name__)


async def ingest_turn(
    turn: Turn | dict[str, Any],
    *,
    store: MemoryStore,
    history: HistoryStore,
    extractor: CandidateExtractor,
    consolidator: MemoryConsolidator,
    embedder: Embedder,
    clock: Clock,
    episodes: EpisodePolicy | None = None,
    prepared: PreparedTurn | None = None,
) -> IngestResult:
    """Extract, consolidate and apply one turn, in its scope, in order.

    Delivery is at least once, so this is idempotent and crash-safe:

    * A turn already marked processed is skipped (nothing is extracted or written again).
    * The first attempt records the extracted candidates in the turn journal; a redelivery consolidates
      those same candidates (a chat model may extract differently the second time).
    * Each candidate is one *step*: decide, record the decision in the history (atomically with the
      step's "done" mark), then write the records. A redelivery re-applies the recorded states of the
      steps already decided (the write may not have happened) and decides only the remaining ones.
    * Every write is a whole record with a deterministic id (uuid5 of scope, turn id and candidate
      index) and times taken from the turn (``occurred_at``), so a replay writes identical records.
    * The turn is marked processed only after all its writes returned (are durable).

    Purges hold (:func:`~memory_core.service.journal.purged_before`): a turn whose ``occurred_at`` is
    at or before its scope's tombstone (the time of the last purge of the scope or of its user,
    :meth:`HistoryStore.tombstone`) is dropped with the status ``purged`` and nothing is written,
    whether it comes from the queue, a redelivery, an outbox replay or ``memory-core ingest`` of an old
    file. The turn's own time is what counts (the client's clock). A turn whose ingestion was under way
    when the purge came (its scope was not tombstoned when it began, and is when it ends) removes what
    it wrote: the scope's memories and history are purged again, and it is dropped too.

    Scopes must be ingested one turn at a time, in order (the queue's sessions guarantee it in Azure;
    the local worker and ``memory-core ingest`` do it by construction).

    Args:
        turn: The turn (a :class:`Turn` or its JSON dict, validated here).
        store: Where memories live.
        history: The decision history and turn journal.
        extractor: Turns the turn into candidates.
        consolidator: Decides for each candidate.
        embedder: Embeds candidates (and stored text).
        clock: Stamps when a turn was begun and completed (records use the turn's own time).
        episodes: Also keep each user message as an episode (after the facts; ``None``: no episodes).
        prepared: This turn's extraction and vectors worked out ahead
            (:func:`~memory_core.service.preparation.prepare_turns`), used only if it is for this very
            turn: its extraction when the turn has no journal yet, its vectors for the candidates whose
            text they are for.

    Returns:
        What was decided, in order; status ``purged`` (nothing written) for a turn dated at or before
        its scope's last purge.

    Raises:
        ValidationError: The turn is malformed (permanent; dead-letter it).
        TransientError: A dependency is unavailable (retry; the replay converges).
    """
    started = time.perf_counter()
    turn = parse_model(Turn, turn)
    tombstone = await history.tombstone(turn.scope)
    if dropped_by_purge(f"turn {turn.turn_id} occurred", turn.occurred_at, tombstone):
        return _dropped(turn, started)
    if await history.turn_processed(turn.scope, turn.turn_id):
        return await already_ingested(history, turn, started)
    prepared = prepared if prepared is not None and prepared.is_for(turn) else None
    journal = await _begin(history, turn, extractor, clock, episodes, prepared)
    run = _Run(turn, store, history, TimedEmbedder(embedder))
    result = IngestResult(
        turn_id=turn.turn_id,
        scope=turn.scope,
        status="resumed" if journal.completed_steps else "ingested",
        extraction_path=journal.extraction_path,
        fallback_reason=journal.fallback_reason,
    )
    if journal.completed_steps:
        thresholds = consolidator.thresholds(run.embedder.name)
        result.steps.extend(await resume(store, history, run.embedder, turn, journal, thresholds))
    result.steps.extend(await _decide_pending(run, journal, consolidator, prepared))
    if await _purged_meanwhile(run, tombstone):
        return _dropped(turn, started)
    if any(c.kind is CandidateKind.FORGET for c in journal.candidates):  # carried out: what it named goes
        await history.rewrite_candidates(turn.scope, [turn.turn_id], _carried_out)
    await history.mark_turn_processed(turn.scope, turn.turn_id, clock.now())
    result.seconds = time.perf_counter() - started
    result.embed_seconds = run.embedder.seconds
    return result


def _carried_out(candidate: MemoryCandidate) -> MemoryCandidate:
    """A candidate of a turn done, as its journal keeps it: a forget request without what it named."""
    return candidate.forgotten() if candidate.kind is CandidateKind.FORGET else candidate


@dataclass(frozen=True, slots=True)
class _Run:
    """One ingestion of a turn: the turn and what its phases read and write."""

    turn: Turn
    store: MemoryStore
    history: HistoryStore
    embedder: TimedEmbedder

    @property
    def scope(self) -> Scope:
        return self.turn.scope


def _dropped(turn: Turn, started: float) -> IngestResult:
    return IngestResult(
        turn_id=turn.turn_id,
        scope=turn.scope,
        status="purged",
        extraction_path="none",
        seconds=time.perf_counter() - started,
    )


async def _begin(
    history: HistoryStore,
    turn: Turn,
    extractor: CandidateExtractor,
    clock: Clock,
    episodes: EpisodePolicy | None,
    prepared: PreparedTurn | None,
) -> TurnJournal:
    """The turn's journal: the one an earlier attempt began, or a new one recording the candidates
    extracted now (or ahead, ``prepared``)."""
    journal = await history.journal(turn.scope, turn.turn_id)
    if journal is not None:
        return journal
    extraction = prepared.extraction if prepared is not None else await extractor.extract(turn)
    return await history.begin_turn(
        TurnStart(
            turn.scope,
            turn.turn_id,
            candidates=tuple(turn_candidates(turn, extraction, episodes)),
            extraction_path=str(extraction.path),
            fallback_reason=extraction.fallback_reason,
            at=clock.now(),
        )
    )


async def _decide_pending(
    run: _Run, journal: TurnJournal, consolidator: MemoryConsolidator, prepared: PreparedTurn | None
) -> list[StepResult]:
    """Decide, record and write each step not decided yet, in order."""
    pending = [step for step in range(len(journal.candidates)) if step not in journal.completed_steps]
    if not pending:
        return []
    # one batch for the turn: a candidate's vector does not depend on the store
    known = prepared.vectors if prepared is not None else {}
    vectors = await _vectors(run.embedder, [journal.candidates[step].memory for step in pending], known)
    steps = []
    for step in pending:
        candidate = journal.candidates[step]
        steps.append(await _decide(run, consolidator, step, candidate, vectors[candidate.memory]))
    return steps


async def _vectors(
    embedder: Embedder, texts: Sequence[str], known: Mapping[str, np.ndarray]
) -> Mapping[str, np.ndarray]:
    """The vectors of ``texts`` by text: those ``known``, and the others embedded in one call."""
    missing = list(dict.fromkeys(text for text in texts if text not in known))
    if not missing:
        return known
    fresh = await embedder.embed_passages(missing)
    return {**known, **{text: fresh[i] for i, text in enumerate(missing)}}


async def _decide(
    run: _Run, consolidator: MemoryConsolidator, step: int, candidate: MemoryCandidate, vector: np.ndarray
) -> StepResult:
    """One step: consolidate the candidate, record the decision (with the step's done mark), write
    it, and forget in the episodes what it forgot."""
    turn, scope = run.turn, run.scope
    outcome: Consolidation = await consolidator.consolidate(
        candidate,
        scope=scope,
        store=run.store,
        embedder=run.embedder,
        now=turn.occurred_at,
        new_memory_id=step_memory_id(scope, turn.turn_id, step, candidate),
        turn_id=turn.turn_id,
        vector=vector,
        provenance=provenance_of(turn, candidate),
    )
    decision = reported(_with_turn_metadata(outcome.decision, candidate, turn), await swept_by(run.store, candidate, turn))
    entry = step_entry(decision, scope, turn, outcome.path, outcome.model)
    await run.history.record_step(scope, turn.turn_id, step, [entry])
    await _write(run.store, decision)
    await redact_episodes(run.store, run.history, run.embedder, candidate, decision, turn)
    await keep_earlier_value(run.store, run.history, run.embedder, decision.before, decision.after, turn)
    await close_superseded_episodes(run.store, run.history, decision.before, decision.after, turn)
    if candidate.kind is CandidateKind.EPISODE and decision.event is MemoryEvent.ADD:
        thresholds = consolidator.thresholds(run.embedder.name)
        await supersede_with_episode(run.store, run.history, thresholds, decision.after, turn)
    await sweep_forgotten(run.store, run.history, run.embedder, candidate, turn)
    if candidate.kind is CandidateKind.FORGET and decision.after is not None and forgotten_by(decision.after, turn):
        words = forgotten_words(decision.before, decision.after)
        await withhold_forgotten(run.store, run.history, decision.after, words, turn)
    logger.debug("turn %s step %s: %s %s", turn.turn_id, step, decision.event.value, decision.memory_id)
    return StepResult(step, decision, outcome.path, outcome.fallback_reason)


def _with_turn_metadata(decision: Decision, candidate: MemoryCandidate, turn: Turn) -> Decision:
    """``decision`` with the turn's caller metadata merged into the memory it adds or updates (not
    into one it deletes, reinforces or partly forgets). Recorded with the decision, so a replay
    writes the same record."""
    after = decision.after
    if not turn.metadata or after is None or candidate.kind is CandidateKind.FORGET:
        return decision
    if decision.event not in (MemoryEvent.ADD, MemoryEvent.UPDATE):
        return decision
    merged = after.model_copy(update={"metadata": {**after.metadata, **turn.metadata}})
    return decision.model_copy(update={"after": merged})


async def _write(store: MemoryStore, decision: Decision) -> None:
    after = decision.after
    if after is None:
        return
    if decision.before is not None and decision.before == after.without_embedding():
        return  # nothing changed (a restatement at the same moment)
    await store.upsert([after])


async def _purged_meanwhile(run: _Run, tombstone: datetime | None) -> bool:
    """Whether the scope was purged while this turn was being ingested; what the turn wrote is removed then.

    What it wrote may have landed after the purge deleted the scope. Only this turn of the scope can
    be in flight (one at a time, in order), so purging the scope again removes exactly what the purge
    meant to remove. It first waits for the purge to be over (:func:`wait_for_purge`): purging while
    the purge is under way would delete rows the purge was about to delete, and the purge would
    not count them. Then, as the purge does, it rewrites the files and truncates their logs, so
    what it wrote after the purge leaves the disk too.
    """
    later = await run.history.tombstone(run.scope)
    if later == tombstone or not purged_before(run.turn.occurred_at, later):
        return False
    await wait_for_purge(run.history, run.scope)
    await run.store.purge(run.scope.user_id, run.scope.agent_id)
    await run.history.purge(run.scope.user_id, run.scope.agent_id)
    await rewrite_files([run.store, run.history], rebuild=True)
    logger.warning(
        "turn %s: its scope was purged while it was being ingested; its writes were removed", run.turn.turn_id
    )
    return True


class TimedEmbedder(EmbedderWrapper):
    """Wraps an embedder to measure the time spent in it (``seconds``, queries and passages)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.seconds = 0.0

    async def embed_query(self, text: str) -> np.ndarray:
        started = time.perf_counter()
        try:
            return await self.inner.embed_query(text)
        finally:
            self.seconds += time.perf_counter() - started

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        try:
            return await self.inner.embed_passages(texts)
        finally:
            self.seconds += time.perf_counter() - started
