"""Ingestion: one turn through extraction, consolidation and the store, in one scope, in order.

Also the queue side of it: :func:`decode_message` validates a queue body (a ``turn.v1`` or a
``recall.v1``) and :class:`ProcessOutcome` says what processing one message did.

Delivery is at least once, so :func:`ingest_turn` is idempotent and crash-safe:

* A turn already marked processed is skipped (nothing is extracted or written again).
* The first attempt records the extracted candidates in the turn journal; a redelivery consolidates
  those same candidates (a chat model may extract differently the second time).
* Each candidate is one *step*: decide, record the decision in the history (atomically with the
  step's "done" mark), then write the records. A redelivery re-applies the recorded states of the
  steps already decided (the write may not have happened) and decides only the remaining ones.
* Every write is a whole record with a deterministic id (uuid5 of scope, turn id and candidate
  index) and times taken from the turn (``occurred_at``), so a replay writes identical records.
* The turn is marked processed only after all its writes returned (are durable).

Purges hold (:func:`purged_before`): a turn whose ``occurred_at`` is at or before its scope's
tombstone (the time of the last purge of the scope or of its user, :meth:`HistoryStore.tombstone`) is
dropped with the status ``purged`` and nothing is written, whether it comes from the queue, a
redelivery, an outbox replay or ``memory-core ingest`` of an old file. The turn's own time is what
counts (the client's clock). A turn whose ingestion was under way when the purge came (its scope was
not tombstoned when it began, and is when it ends) removes what it wrote: the scope's memories and
history are purged again, and it is dropped too.

Scopes must be ingested one turn at a time, in order (the queue's sessions guarantee it in Azure; the
local worker and ``memory-core ingest`` do it by construction).

Several turns can be *prepared* together first (:func:`prepare_turns`): each is extracted and the
candidates of all of them are embedded in one call, which the local model does far more cheaply per
passage than one call per turn. Rule extraction depends only on the turn and a vector only on its
text, so a prepared turn is ingested exactly as it would have been on its own; it is still
consolidated and written one turn at a time, in order. (The service does not prepare turns ahead for
a chat model's extraction: see :meth:`~memory_core.service.MemoryService.prepare`.)
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memory_core.domain.messages import (
    RECALL_SCHEMA,
    TURN_SCHEMA,
    CandidateKind,
    Decision,
    HistoryEntry,
    MemoryCandidate,
    MemoryEvent,
    MessageRole,
    RecallUpdate,
    Turn,
)
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Provenance, Scope, status_note
from memory_core.domain.validation import CONTROL_CHARACTERS, MAX_MEMORY_CHARS, parse_model
from memory_core.errors import ValidationError
from memory_core.language.sentences import split_sentences
from memory_core.language.text import has_japanese
from memory_core.ports import Clock, Embedder, EmbedderWrapper, HistoryStore, MemoryStore
from memory_core.service.consolidation.consolidator import Consolidation, MemoryConsolidator
from memory_core.service.consolidation.features import normalized_statement, speaker_of, split_speaker
from memory_core.service.consolidation.forget import join_clauses, statement_clauses
from memory_core.service.prompts import strip_recalled_memories

__all__ = [
    "MAX_MESSAGE_BYTES",
    "CandidateExtractor",
    "EpisodePolicy",
    "IngestResult",
    "PreparedTurn",
    "ProcessOutcome",
    "StepResult",
    "TimedEmbedder",
    "decision_as_dict",
    "decode_message",
    "episode_candidates",
    "episode_id_for",
    "forget_in_episodes",
    "format_decision",
    "ingest_turn",
    "memory_id_for",
    "parse_turns",
    "prepare_turns",
    "provenance_of",
    "purged_before",
    "read_turns",
]

logger = logging.getLogger(__name__)

_NAMESPACE = uuid.UUID("6f1d3c2a-9b8e-5f47-a0d1-2c3b4e5f6a7b")

#: Largest queue message body accepted (the Service Bus standard-tier limit).
MAX_MESSAGE_BYTES = 256 * 1024


class _Extraction(Protocol):
    @property
    def candidates(self) -> Sequence[MemoryCandidate]: ...

    @property
    def path(self) -> str: ...

    @property
    def fallback_reason(self) -> str | None: ...


class CandidateExtractor(Protocol):
    """What ingestion needs from an extractor (``MemoryExtractor`` is one)."""

    async def extract(self, turn: Turn) -> _Extraction: ...


def episode_id_for(scope: Scope, turn_id: str, message: int) -> str:
    """The id of the episode of message ``message`` of a turn (deterministic, 32 hex digits): a fact's
    provenance (turn and message) names the episode that states it."""
    return uuid.uuid5(_NAMESPACE, f"{scope.user_id}\x1f{scope.agent_id}\x1f{turn_id}\x1fepisode\x1f{message}").hex


def memory_id_for(scope: Scope, turn_id: str, step: int) -> str:
    """The id a memory added by candidate ``step`` of a turn gets (deterministic, 32 hex digits)."""
    return uuid.uuid5(_NAMESPACE, f"{scope.user_id}\x1f{scope.agent_id}\x1f{turn_id}\x1f{step}").hex


@dataclass(frozen=True, slots=True)
class EpisodePolicy:
    """Whether each user message is also kept as an episode, and how important episodes start out.

    Attributes:
        enabled: Keep episodes (``MEMORY_EPISODES``).
        importance: Their importance (``MEMORY_EPISODE_IMPORTANCE``); below a fact's, so a fact
            outranks the episode it came from and episodes fade sooner under the same policy.
    """

    enabled: bool = True
    importance: float = 0.3


def episode_candidates(
    turn: Turn, facts: Sequence[MemoryCandidate], policy: EpisodePolicy
) -> list[MemoryCandidate]:
    """The episodes of a turn: each user message, in the user's own words, with its speaker.

    Recalled-memory blocks are left out (they are not the user's words), and so is a message that asked
    to forget something (keeping its words would keep what was to be forgotten).
    """
    if not policy.enabled:
        return []
    forgetting = {c.message for c in facts if c.kind is CandidateKind.FORGET}
    episodes = []
    for index, message in enumerate(turn.messages):
        if message.role is not MessageRole.USER or index in forgetting:
            continue
        # The user's words as stored memory text: control characters (other than line breaks and tabs)
        # cannot be stored, so they are dropped rather than losing the episode.
        text = CONTROL_CHARACTERS.sub("", strip_recalled_memories(message.text)).strip()
        if not text:
            continue
        memory = f"{message.name}: {text}" if message.name else text
        episodes.append(
            MemoryCandidate(
                kind=CandidateKind.EPISODE,
                memory=memory[:MAX_MEMORY_CHARS],
                category="episode",
                importance=policy.importance,
                confidence=1.0,
                source="episode",
                evidence=text,
                message=index,
                speaker=message.name,
            )
        )
    return episodes


def provenance_of(turn: Turn, candidate: MemoryCandidate) -> Provenance:
    """Where in ``turn`` a candidate came from: its message and the span of its evidence there."""
    index = candidate.message
    if candidate.evidence and not (
        index < len(turn.messages) and candidate.evidence in turn.messages[index].text
    ):  # a model's candidate: find the message that says it
        found = turn.user_message_with(candidate.evidence)
        index = index if found is None else found
    message = turn.messages[index] if index < len(turn.messages) else None
    start = end = 0
    if message is not None and candidate.evidence:
        found = message.text.find(candidate.evidence)
        if found >= 0:
            start, end = found, found + len(candidate.evidence)
    speaker = None if message is None else (message.name or message.role.value)
    return Provenance(turn_id=turn.turn_id, message=index if message else 0, start=start, end=end, speaker=speaker)


@dataclass(frozen=True, slots=True)
class StepResult:
    """One candidate's decision.

    Attributes:
        step: Index of the candidate in the turn.
        decision: The decision (``after`` carries the embedding only when freshly decided).
        path: How it was decided: ``rules``, ``llm``, ``rules-fallback`` or ``recorded`` (a replay
            read it from the history).
        fallback_reason: Why a model answer was rejected, if one was.
    """

    step: int
    decision: Decision
    path: str
    fallback_reason: str | None = None


@dataclass(slots=True)
class IngestResult:
    """What one ingestion of a turn did.

    Attributes:
        turn_id: The turn.
        scope: Its scope.
        status: ``ingested``, ``resumed`` (an earlier attempt stopped midway), ``duplicate`` (already
            processed; nothing was done) or ``purged`` (dated at or before its scope's last purge:
            dropped, nothing was written).
        extraction_path: ``rules`` or ``llm`` (as recorded by the first attempt).
        fallback_reason: Why extraction fell back to rules, if it did.
        steps: The decisions, in order.
        seconds: Wall time of the call.
        embed_seconds: Time spent embedding candidates.
    """

    turn_id: str
    scope: Scope
    status: str
    extraction_path: str
    fallback_reason: str | None = None
    steps: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0

    @property
    def decisions(self) -> list[Decision]:
        return [s.decision for s in self.steps]

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "user_id": self.scope.user_id,
            "agent_id": self.scope.agent_id,
            "status": self.status,
            "extraction_path": self.extraction_path,
            "fallback_reason": self.fallback_reason,
            "decisions": [decision_as_dict(s) for s in self.steps],
        }


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


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """One turn worked out ahead of its ingestion (:func:`prepare_turns`).

    Attributes:
        turn: The turn it was prepared for.
        extraction: What the extractor made of it.
        vectors: Passage vectors by text: its candidates' (facts and episodes), or none when the
            embedding failed (ingestion embeds them itself then).
    """

    turn: Turn
    extraction: _Extraction
    vectors: Mapping[str, np.ndarray]

    @property
    def turn_id(self) -> str:
        """The turn's id."""
        return self.turn.turn_id

    def is_for(self, turn: Turn) -> bool:
        """Whether this was prepared for ``turn`` (the same turn: scope, id, time and messages)."""
        return self.turn == turn


async def prepare_turns(
    turns: Sequence[Turn],
    *,
    history: HistoryStore,
    extractor: CandidateExtractor,
    embedder: Embedder,
    episodes: EpisodePolicy | None = None,
) -> list[PreparedTurn | None]:
    """Extract several turns and embed all their candidates in one call, ahead of ingesting them.

    Best effort, never raises: nothing is written, and a turn that is not prepared is simply ingested
    the usual way (:func:`ingest_turn` extracts and embeds it then, and raises what there is to raise).
    Not prepared: a turn already ingested or begun (its candidates are in its journal), one its scope's
    purge drops, and every turn from the first whose extraction failed on. The turns are extracted one
    after another, as they would be when ingested one at a time.

    Args:
        turns: Validated turns (of any scopes; each scope's still to be ingested in order).
        history: The turn journal (to skip turns already begun).
        extractor: Turns a turn into candidates.
        embedder: Embeds the passages (one call for all of them).
        episodes: Also embed each user message kept as an episode (as :func:`ingest_turn` does).

    Returns:
        One entry per turn, in order: its preparation, or ``None``.
    """
    extracted: list[tuple[Turn, _Extraction, list[MemoryCandidate]] | None] = []
    failed = False
    for turn in turns:
        if failed:
            extracted.append(None)
            continue
        scope = turn.scope
        try:
            if (
                purged_before(turn.occurred_at, await history.tombstone(scope))
                or await history.turn_processed(scope, turn.turn_id)
                or await history.journal(scope, turn.turn_id)
            ):
                extracted.append(None)
                continue
            extraction = await extractor.extract(turn)
            facts = list(extraction.candidates)
            kept = episode_candidates(turn, facts, episodes) if episodes is not None else []
        except Exception as exc:  # ingesting the turn raises it again, where it is handled
            logger.info("turn %s not prepared ahead: %s: %s", turn.turn_id, type(exc).__name__, exc)
            failed = True
            extracted.append(None)
            continue
        extracted.append((turn, extraction, facts + kept))
    texts = list(dict.fromkeys(c.memory for item in extracted if item is not None for c in item[2]))
    vectors: dict[str, np.ndarray] = {}
    if texts:
        try:
            matrix = await embedder.embed_passages(texts)
            if len(matrix) != len(texts):
                raise ValueError(f"{len(matrix)} vectors for {len(texts)} passages")
            vectors = {text: np.array(matrix[i]) for i, text in enumerate(texts)}
        except Exception as exc:  # each turn embeds its own candidates when it is ingested
            logger.info("candidates of %s turns not embedded ahead: %s: %s", len(turns), type(exc).__name__, exc)
    prepared: list[PreparedTurn | None] = []
    for item in extracted:
        if item is None:
            prepared.append(None)
            continue
        turn, extraction, candidates = item
        own = {c.memory: vectors[c.memory] for c in candidates if c.memory in vectors}
        prepared.append(PreparedTurn(turn, extraction, own))
    return prepared


def _entry(decision: Decision, scope: Scope, turn: Turn, path: str, model: str | None = None) -> HistoryEntry:
    """The history entry of one step; a decision not made by the rules says how (``[llm gpt-4.1-mini]``)."""
    how = f"{path} {model}" if model else path
    reason = decision.reason if path in ("rules", "recorded") else f"[{how}] {decision.reason}"
    return HistoryEntry.of_change(
        decision.event,
        scope,
        decision.memory_id or "",
        decision.before,
        decision.after,
        reason=reason,
        at=turn.occurred_at,
        turn_id=turn.turn_id,
    )


def _decision_from_entry(entry: HistoryEntry, candidate: MemoryCandidate) -> Decision:
    return Decision(
        event=entry.event,
        candidate=candidate,
        memory_id=entry.memory_id or None,
        before=None if entry.before is None else MemoryRecord.model_validate(entry.before),
        after=None if entry.after is None else MemoryRecord.model_validate(entry.after),
        reason=entry.reason,
    )


async def _write(store: MemoryStore, decision: Decision) -> None:
    after = decision.after
    if after is None:
        return
    if decision.before is not None and decision.before == after.without_embedding():
        return  # nothing changed (a restatement at the same moment)
    await store.upsert([after])


async def _reapply(
    store: MemoryStore,
    embedder: Embedder,
    scope: Scope,
    entries: Sequence[HistoryEntry],
    history: HistoryStore | None = None,
    turn: Turn | None = None,
) -> None:
    """Bring the store to the recorded after-states of a turn's decided steps (idempotent)."""
    last: dict[str, dict[str, Any]] = {}
    first: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.after is not None and entry.memory_id:
            last[entry.memory_id] = entry.after
            if entry.before is not None:
                first.setdefault(entry.memory_id, entry.before)
    for memory_id, state in last.items():
        wanted = MemoryRecord.model_validate(state)
        if wanted.status is MemoryStatus.DELETED and wanted.kind is MemoryKind.FACT and turn is not None:
            # A forgotten fact's episodes are redacted after its write; a crash in between is caught up
            # here (redacting twice changes nothing).
            await forget_in_episodes(store, history, embedder, wanted, turn)
        elif turn is not None and wanted.metadata.get("partly_forgotten_by_turn") == turn.turn_id and memory_id in first:
            # the same for the part of a compound memory a forget request named
            before = MemoryRecord.model_validate(first[memory_id])
            await forget_in_episodes(store, history, embedder, wanted, turn, forgotten_parts(before, wanted))
        current = await store.get(scope, memory_id)
        if current is not None and current.to_json_dict(include_embedding=False) == wanted.to_json_dict(
            include_embedding=False
        ):
            continue
        if current is not None and current.memory == wanted.memory and current.embedding is not None:
            embedding = current.embedding
        else:
            embedding = [float(x) for x in (await embedder.embed_passages([wanted.memory]))[0]]
        logger.info("re-applying recorded state of memory %s (turn redelivered)", memory_id)
        await store.upsert([wanted.model_copy(update={"embedding": embedding})])


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


def _partly_forgotten(candidate: MemoryCandidate, decision: Decision) -> bool:
    return candidate.kind is CandidateKind.FORGET and decision.event is MemoryEvent.UPDATE


def forgotten_parts(before: MemoryRecord, after: MemoryRecord) -> list[str]:
    """The statements of a compound memory that a partial forget took out (those of ``before`` that
    ``after`` no longer says)."""
    speaker = speaker_of(before)
    left = {normalized_statement(c) for c in statement_clauses(split_speaker(after.memory, speaker)[1])}
    return [c for c in statement_clauses(split_speaker(before.memory, speaker)[1]) if normalized_statement(c) not in left]


def _redact(text: str, forgotten: Sequence[str]) -> tuple[str, bool]:
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
    return "".join(s if s.endswith(("。", "！", "？")) else s + " " for s in kept).strip(), removed


async def forget_in_episodes(
    store: MemoryStore,
    history: HistoryStore | None,
    embedder: Embedder,
    fact: MemoryRecord,
    turn: Turn,
    forgotten: Sequence[str] | None = None,
) -> int:
    """Forget a deleted fact in the episodes that state it (DESIGN section 7): in each episode of the
    fact's provenance, the sentences that say it are removed; an episode with nothing left is deleted.
    The rest of what the user said stays. Returns how many episodes changed.

    Each change is recorded in the history before it is written, so a crash between the two leaves
    the record and a replay (the turn redelivered) only writes: idempotent, and no change goes
    unrecorded."""
    scope = fact.scope
    if forgotten is None:  # the whole fact was forgotten: its text and the sentence it came from
        forgotten = [split_speaker(fact.memory, speaker_of(fact))[1], str(fact.metadata.get("evidence") or "")]
        reason = f"forgotten on request (turn {turn.turn_id}): {fact.memory[:80]}"
    else:  # part of a compound memory: the reason does not quote what was to be forgotten
        reason = f"part of memory {fact.id} forgotten on request (turn {turn.turn_id})"
    changed = 0
    for source in fact.provenance:
        episode = await store.get(scope, episode_id_for(scope, source.turn_id, source.message))
        if episode is None or episode.kind is not MemoryKind.EPISODE or episode.status is MemoryStatus.DELETED:
            continue
        prefix = f"{source.speaker}: " if source.speaker and episode.memory.startswith(f"{source.speaker}: ") else ""
        remaining, removed = _redact(episode.memory[len(prefix) :], forgotten)
        if not removed:
            continue
        metadata = {**episode.metadata, "redacted_by_turn": turn.turn_id}
        if remaining:
            text = prefix + remaining
            vector = (await embedder.embed_passages([text]))[0]
            after = episode.model_copy(
                update={"memory": text, "metadata": metadata, "embedding": [float(x) for x in vector]}
            )
            event = MemoryEvent.UPDATE
        else:
            metadata = status_note(metadata, reason, turn.occurred_at)
            after = episode.model_copy(update={"status": MemoryStatus.DELETED, "metadata": metadata})
            event = MemoryEvent.DELETE
        if history is not None:
            # Not a step of the turn (no turn id): the turn's steps are its candidates' decisions.
            entry = HistoryEntry.of_change(event, scope, episode.id, episode, after, reason=reason, at=turn.occurred_at)
            if not await _recorded(history, entry):
                await history.append([entry])
        await store.upsert([after])
        changed += 1
    return changed


def purged_before(moment: datetime, tombstone: datetime | None) -> bool:
    """Whether something dated ``moment`` (a turn's ``occurred_at``, a recall update's ``at``) is
    covered by a purge at ``tombstone``: at or before it. ``None``: never purged."""
    return tombstone is not None and moment <= tombstone


def _dropped(turn: Turn, started: float) -> IngestResult:
    return IngestResult(
        turn_id=turn.turn_id,
        scope=turn.scope,
        status="purged",
        extraction_path="none",
        seconds=time.perf_counter() - started,
    )


async def _recorded(history: HistoryStore, entry: HistoryEntry) -> bool:
    """Whether ``entry`` is already its memory's last recorded change (recorded, then a crash before
    the write)."""
    entries = await history.for_memory(Scope.of(entry.user_id, entry.agent_id), entry.memory_id)
    return bool(entries) and entries[-1].event is entry.event and entries[-1].after == entry.after


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
    """Extract, consolidate and apply one turn (idempotent; see the module docstring).

    Args:
        turn: The turn (a :class:`Turn` or its JSON dict, validated here).
        store: Where memories live.
        history: The decision history and turn journal.
        extractor: Turns the turn into candidates.
        consolidator: Decides for each candidate.
        embedder: Embeds candidates (and stored text).
        clock: Stamps when a turn was begun and completed (records use the turn's own time).
        episodes: Also keep each user message as an episode (after the facts; ``None``: no episodes).
        prepared: This turn's extraction and vectors worked out ahead (:func:`prepare_turns`), used
            only if it is for this very turn: its extraction when the turn has no journal yet, its
            vectors for the candidates whose text they are for.

    Returns:
        What was decided, in order; status ``purged`` (nothing written) for a turn dated at or before
        its scope's last purge.

    Raises:
        ValidationError: The turn is malformed (permanent; dead-letter it).
        TransientError: A dependency is unavailable (retry; the replay converges).
    """
    started = time.perf_counter()
    turn = parse_model(Turn, turn)
    scope = turn.scope
    tombstone = await history.tombstone(scope)
    if purged_before(turn.occurred_at, tombstone):
        logger.info(
            "turn %s occurred at %s, not after its scope's purge at %s: dropped",
            turn.turn_id,
            turn.occurred_at.isoformat(),
            tombstone.isoformat() if tombstone else None,
        )
        return _dropped(turn, started)
    timed = TimedEmbedder(embedder)
    if await history.turn_processed(scope, turn.turn_id):
        journal = await history.journal(scope, turn.turn_id)
        recorded = await history.for_turn(scope, turn.turn_id)
        candidates = list(journal.candidates) if journal else []
        steps = [
            StepResult(
                i,
                _decision_from_entry(e, candidates[i] if i < len(candidates) else _placeholder(e)),
                "recorded",
            )
            for i, e in enumerate(recorded)
        ]
        logger.info("turn %s was already ingested; nothing to do", turn.turn_id)
        return IngestResult(
            turn_id=turn.turn_id,
            scope=scope,
            status="duplicate",
            extraction_path=journal.extraction_path if journal else "none",
            fallback_reason=journal.fallback_reason if journal else None,
            steps=steps,
            seconds=time.perf_counter() - started,
        )

    journal = await history.journal(scope, turn.turn_id)
    status = "ingested"
    if prepared is not None and not prepared.is_for(turn):
        prepared = None
    if journal is None:
        extraction = prepared.extraction if prepared is not None else await extractor.extract(turn)
        facts = list(extraction.candidates)
        kept = episode_candidates(turn, facts, episodes) if episodes is not None else []
        journal = await history.begin_turn(
            scope,
            turn.turn_id,
            candidates=facts + kept,
            extraction_path=str(extraction.path),
            fallback_reason=extraction.fallback_reason,
            at=clock.now(),
        )
    result = IngestResult(
        turn_id=turn.turn_id,
        scope=scope,
        status=status,
        extraction_path=journal.extraction_path,
        fallback_reason=journal.fallback_reason,
    )
    if journal.completed_steps:
        result.status = "resumed"
        recorded = await history.for_turn(scope, turn.turn_id)
        await _reapply(store, timed, scope, recorded, history, turn)
        for entry, step in zip(recorded, sorted(journal.completed_steps), strict=False):
            result.steps.append(
                StepResult(step, _decision_from_entry(entry, journal.candidates[step]), "recorded")
            )

    pending = [step for step in range(len(journal.candidates)) if step not in journal.completed_steps]
    vectors: dict[int, np.ndarray] = {}
    if pending:  # one batch for the turn: a candidate's vector does not depend on the store
        known = prepared.vectors if prepared is not None else {}
        missing = list(dict.fromkeys(t for t in (journal.candidates[s].memory for s in pending) if t not in known))
        fresh = await timed.embed_passages(missing) if missing else None
        by_text = {**known, **{text: fresh[i] for i, text in enumerate(missing)}} if fresh is not None else known
        vectors = {step: by_text[journal.candidates[step].memory] for step in pending}
    for step in pending:
        candidate = journal.candidates[step]
        outcome: Consolidation = await consolidator.consolidate(
            candidate,
            scope=scope,
            store=store,
            embedder=timed,
            now=turn.occurred_at,
            new_memory_id=(
                episode_id_for(scope, turn.turn_id, candidate.message)
                if candidate.kind is CandidateKind.EPISODE
                else memory_id_for(scope, turn.turn_id, step)
            ),
            turn_id=turn.turn_id,
            vector=vectors[step],
            provenance=provenance_of(turn, candidate),
        )
        decision = _with_turn_metadata(outcome.decision, candidate, turn)
        await history.record_step(scope, turn.turn_id, step, [_entry(decision, scope, turn, outcome.path, outcome.model)])
        await _write(store, decision)
        if decision.event is MemoryEvent.DELETE and decision.after is not None:
            await forget_in_episodes(store, history, timed, decision.after, turn)
        elif _partly_forgotten(candidate, decision) and decision.before and decision.after:
            # part of a compound memory forgotten: the episodes lose that part only
            gone = forgotten_parts(decision.before, decision.after)
            await forget_in_episodes(store, history, timed, decision.after, turn, gone)
        result.steps.append(StepResult(step, decision, outcome.path, outcome.fallback_reason))
        logger.debug("turn %s step %s: %s %s", turn.turn_id, step, decision.event.value, decision.memory_id)

    later = await history.tombstone(scope)
    if later != tombstone and purged_before(turn.occurred_at, later):
        # Purged while this turn was being ingested: what it wrote may have landed after the purge
        # deleted the scope. Only this turn of the scope can be in flight (one at a time, in order),
        # so purging the scope again removes exactly what the purge meant to remove.
        await store.purge(scope.user_id, scope.agent_id)
        await history.purge(scope.user_id, scope.agent_id)
        logger.warning("turn %s: its scope was purged while it was being ingested; its writes were removed", turn.turn_id)
        return _dropped(turn, started)
    await history.mark_turn_processed(scope, turn.turn_id, clock.now())
    result.seconds = time.perf_counter() - started
    result.embed_seconds = timed.seconds
    return result


def _placeholder(entry: HistoryEntry) -> MemoryCandidate:
    text = (entry.after or entry.before or {}).get("memory") or "?"
    return MemoryCandidate(memory=str(text))


# --------------------------------------------------------------------------------------------
# Presentation and files (the CLI's `ingest`)
# --------------------------------------------------------------------------------------------


def decision_as_dict(step: StepResult) -> dict[str, Any]:
    """One decision as JSON-ready values (records without embeddings)."""
    d = step.decision
    return {
        "step": step.step,
        "event": d.event.value,
        "memory_id": d.memory_id,
        "kind": d.candidate.kind.value,
        "candidate": d.candidate.memory,
        "category": d.candidate.category,
        "before": None if d.before is None else d.before.to_json_dict(include_embedding=False),
        "after": None if d.after is None else d.after.to_json_dict(include_embedding=False),
        "reason": d.reason,
        "path": step.path,
        "fallback_reason": step.fallback_reason,
    }


def format_decision(step: StepResult) -> str:
    """One decision as a readable line (or two, for an UPDATE that changes the text)."""
    d = step.decision
    short = (d.memory_id or "-")[:8]
    label = f"{d.event.value:<6} {short:<8}"
    if d.event is MemoryEvent.ADD and d.after is not None:
        line = f"{label} [{d.after.category}] {d.after.memory}"
    elif d.event is MemoryEvent.UPDATE and d.before is not None and d.after is not None:
        if d.before.memory != d.after.memory:
            line = f"{label} {d.before.memory} → {d.after.memory}"
        else:
            line = f"{label} {d.after.memory} (importance {d.after.importance:.2f}, confidence {d.after.confidence:.2f})"
    elif d.event is MemoryEvent.DELETE and d.before is not None:
        line = f"{label} {d.before.memory}"
    elif d.before is not None:
        line = f"{label} {d.candidate.memory} (already known: {d.before.memory})"
    else:
        line = f"{label} {d.candidate.memory}"
    suffix = "" if step.path in ("rules", "recorded") else f" [{step.path}]"
    return f"{line}\n         ↳ {d.reason}{suffix}"


def read_turns(path: str | Path) -> list[Turn]:
    """Read ``turn.v1`` messages, one JSON object a line (blank lines ignored), all validated first.

    Raises:
        ValidationError: A line is not JSON or not a valid turn (names the line and the field).
    """
    with open(path, encoding="utf-8") as handle:
        return parse_turns(handle)


def parse_turns(lines: Iterable[str]) -> list[Turn]:
    """Parse ``turn.v1`` messages, one JSON object a line (blank lines ignored), all validated first.

    Raises:
        ValidationError: A line is not JSON or not a valid turn (names the line and the field).
    """
    turns: list[Turn] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}", f"is not JSON: {exc.msg}") from None
        try:
            turns.append(parse_model(Turn, data))
        except ValidationError as exc:
            raise ValidationError(f"line {number}: {exc.field}", exc.message) from None
    return turns


# --------------------------------------------------------------------------------------------
# Queue messages
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What processing one queue message did."""

    kind: str
    message_id: str
    status: str
    ingest: IngestResult | None = None
    recalled: int = 0

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "message_id": self.message_id,
            "status": self.status,
            "recalled": self.recalled,
        }
        if self.ingest is not None:
            data["ingest"] = self.ingest.as_dict()
        return data


def decode_message(body: bytes | str | Mapping[str, Any]) -> Turn | RecallUpdate:
    """Parse and validate a queue message body; raises :class:`ValidationError` saying what is wrong."""
    if isinstance(body, Mapping):
        data: Any = dict(body)
    else:
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        if len(raw) > MAX_MESSAGE_BYTES:
            raise ValidationError("body", f"is {len(raw)} bytes; the maximum is {MAX_MESSAGE_BYTES}")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValidationError("body", f"is not UTF-8 JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValidationError("body", "must be a JSON object")
    schema = data.get("schema")
    if schema == TURN_SCHEMA:
        return parse_model(Turn, data)
    if schema == RECALL_SCHEMA:
        return parse_model(RecallUpdate, data)
    raise ValidationError(
        "schema", f"{schema!r} is not a message this pipeline understands ({TURN_SCHEMA}, {RECALL_SCHEMA})"
    )
