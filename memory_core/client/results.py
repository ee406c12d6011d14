"""What a memory client answers beyond search: the decisions about a turn and a user's export."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, SupportsIndex, cast, overload

from memory_core.domain.messages import CandidateKind, HistoryEntry, MemoryEvent
from memory_core.domain.records import MemoryRecord
from memory_core.domain.search import record_item

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import IngestResult

__all__ = ["AddResult", "AddStatus", "MemoryDecision", "MemoryExport", "MemoryList", "add_result", "bare"]

#: What happened to the turn :meth:`~memory_core.entrypoints.python_api.async_memory.AsyncMemory.add`
#: handed over: ``ingested`` (extracted and consolidated now), ``resumed`` (an earlier attempt with the
#: same ``turn_id`` stopped midway and was completed), ``duplicate`` (this ``turn_id`` was already
#: ingested; the recorded decisions are returned), ``purged`` (dated at or before the last purge of the
#: user: dropped), or ``queued`` (remote: the server's workers will ingest it).
AddStatus = Literal["ingested", "resumed", "duplicate", "purged", "queued"]


@dataclass(frozen=True, slots=True)
class MemoryDecision:
    """What consolidation decided for one thing said in a turn.

    Attributes:
        event: ``ADD`` (a new memory), ``UPDATE`` (an existing memory changed: restated, refined,
            superseded or partly forgotten), ``DELETE`` (forgotten on request: soft-deleted) or
            ``NONE`` (already known: the memory was reinforced, or a forget request matched nothing).
        memory: The memory's text after the decision (before it, for ``DELETE``; what was said, when
            no memory is involved).
        memory_id: The memory decided about (``None`` when there is none).
        previous: The memory's text before the decision (``None`` for ``ADD``).
        kind: What extraction found: ``fact`` (a durable statement), ``episode`` (the user's own
            words of one message) or ``forget`` (a request to forget something).
        category: The candidate's category (``preference``, ``constraint``, ``episode``...).
        reason: Why, in words (also recorded in the memory's history).
        record: The memory after the decision, without its embedding (``None`` when there is none).
    """

    event: MemoryEvent
    memory: str
    memory_id: str | None
    previous: str | None
    kind: CandidateKind
    category: str
    reason: str
    record: MemoryRecord | None


@dataclass(frozen=True, slots=True)
class AddResult:
    """What adding one turn did.

    Attributes:
        turn_id: The turn's id (generated unless given): adding the same ``turn_id`` again changes
            nothing.
        status: See :data:`AddStatus`.
        decisions: The decisions, in order (empty when ``status`` is ``queued`` or ``purged``).
    """

    turn_id: str
    status: AddStatus
    decisions: tuple[MemoryDecision, ...] = ()

    @property
    def results(self) -> list[dict[str, Any]]:
        """The decisions as Mem0's result items: ``id``, ``memory``, ``event`` (and ``previous_memory``
        for an update); a decision about no memory (``NONE`` of a forget request) is left out."""
        items = []
        for d in self.decisions:
            if d.memory_id is None:
                continue
            item: dict[str, Any] = {"id": d.memory_id, "memory": d.memory, "event": d.event.value}
            if d.previous is not None and d.previous != d.memory:
                item["previous_memory"] = d.previous
            items.append(item)
        return items

    def __getitem__(self, key: str) -> Any:
        """``result["results"]``: :attr:`results` (Mem0's shape of an add)."""
        if key == "results":
            return self.results
        raise KeyError(f"{key!r}: an add result reads as {{'results': [...]}} (or use .decisions)")


class MemoryList(list[MemoryRecord]):
    """The memories of a listing: a list of records, which also reads as Mem0's answer
    (``memories["results"]``: the records as dictionaries)."""

    @property
    def results(self) -> list[dict[str, Any]]:
        """The records as Mem0's result items (``id``, ``memory``, ``metadata``, the scope, times)."""
        return [record_item(r) for r in self]

    @overload
    def __getitem__(self, key: SupportsIndex) -> MemoryRecord: ...

    @overload
    def __getitem__(self, key: slice) -> list[MemoryRecord]: ...

    @overload
    def __getitem__(self, key: str) -> list[dict[str, Any]]: ...

    def __getitem__(self, key: SupportsIndex | slice | str) -> Any:
        if isinstance(key, str):
            if key == "results":
                return self.results
            raise KeyError(f"{key!r}: a listing reads as {{'results': [...]}} (or as a list)")
        return super().__getitem__(key)


@dataclass(frozen=True, slots=True)
class MemoryExport:
    """Everything kept about a user.

    Attributes:
        user_id: The user.
        agent_id: The agent (``None``: every agent of the user).
        memories: Every memory, every status, every field (provenance included; the embedding when
            asked for with ``include_vectors``); each ``record.to_json_dict()`` is a line
            ``memory-core import`` takes back (computing a missing embedding).
        history: Every recorded decision about those memories, oldest first per agent.
    """

    user_id: str
    agent_id: str | None
    memories: tuple[MemoryRecord, ...]
    history: tuple[HistoryEntry, ...]


def bare(record: MemoryRecord) -> MemoryRecord:
    """``record`` without its embedding."""
    return record if record.embedding is None else record.without_embedding()


def add_result(result: IngestResult) -> AddResult:
    """The :class:`AddResult` of one ingestion: its status and every decision, in order."""
    decisions = []
    for step in result.steps:
        d = step.decision
        subject = d.before if d.event is MemoryEvent.DELETE or d.after is None else d.after
        decisions.append(
            MemoryDecision(
                event=d.event,
                memory=subject.memory if subject is not None else d.candidate.memory,
                memory_id=d.memory_id,
                previous=None if d.before is None else d.before.memory,
                kind=d.candidate.kind,
                category=d.candidate.category,
                reason=d.reason,
                record=None if d.after is None else bare(d.after),
            )
        )
    return AddResult(turn_id=result.turn_id, status=cast(AddStatus, result.status), decisions=tuple(decisions))
