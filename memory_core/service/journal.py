"""What ingestion records and reads back: the deterministic ids of what a turn writes, the history
entry of a step and the decision it holds, whether a purge covers something dated, and waiting for
a purge under way to be over (:func:`wait_for_purge`)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import datetime
from typing import cast

from memory_core.capabilities import PurgeSettlement, supports
from memory_core.domain.messages import CandidateKind, Decision, HistoryEntry, MemoryCandidate, Turn
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.ports import HistoryStore

__all__ = [
    "decision_from_entry",
    "dropped_by_purge",
    "earlier_value_id",
    "episode_id_for",
    "memory_id_for",
    "purged_before",
    "record_once",
    "step_entry",
    "step_memory_id",
    "wait_for_purge",
]

logger = logging.getLogger(__name__)

_NAMESPACE = uuid.UUID("6f1d3c2a-9b8e-5f47-a0d1-2c3b4e5f6a7b")


def episode_id_for(scope: Scope, turn_id: str, message: int) -> str:
    """The id of the episode of message ``message`` of a turn (deterministic, 32 hex digits): a fact's
    provenance (turn and message) names the episode that states it."""
    return uuid.uuid5(_NAMESPACE, f"{scope.user_id}\x1f{scope.agent_id}\x1f{turn_id}\x1fepisode\x1f{message}").hex


def memory_id_for(scope: Scope, turn_id: str, step: int) -> str:
    """The id a memory added by candidate ``step`` of a turn gets (deterministic, 32 hex digits)."""
    return uuid.uuid5(_NAMESPACE, f"{scope.user_id}\x1f{scope.agent_id}\x1f{turn_id}\x1f{step}").hex


def earlier_value_id(scope: Scope, fact_id: str, turn_id: str) -> str:
    """The id of the record that keeps what fact ``fact_id`` held before turn ``turn_id`` superseded it
    (deterministic, 32 hex digits: a redelivered turn keeps the same record)."""
    return uuid.uuid5(_NAMESPACE, f"{scope.user_id}\x1f{scope.agent_id}\x1f{turn_id}\x1fearlier\x1f{fact_id}").hex


def step_memory_id(scope: Scope, turn_id: str, step: int, candidate: MemoryCandidate) -> str:
    """The id a memory added by a step gets: an episode's names its message, a fact's its step."""
    if candidate.kind is CandidateKind.EPISODE:
        return episode_id_for(scope, turn_id, candidate.message)
    return memory_id_for(scope, turn_id, step)


def step_entry(decision: Decision, scope: Scope, turn: Turn, path: str, model: str | None = None) -> HistoryEntry:
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


def decision_from_entry(entry: HistoryEntry, candidate: MemoryCandidate) -> Decision:
    """The decision a step's history entry records, for ``candidate`` (a replay reads it back)."""
    return Decision(
        event=entry.event,
        candidate=candidate,
        memory_id=entry.memory_id or None,
        before=None if entry.before is None else MemoryRecord.model_validate(entry.before),
        after=None if entry.after is None else MemoryRecord.model_validate(entry.after),
        reason=entry.reason,
    )


def purged_before(moment: datetime, tombstone: datetime | None) -> bool:
    """Whether something dated ``moment`` (a turn's ``occurred_at``, a recall update's ``at``) is
    covered by a purge at ``tombstone``: at or before it. ``None``: never purged."""
    return tombstone is not None and moment <= tombstone


def dropped_by_purge(what: str, moment: datetime, tombstone: datetime | None) -> bool:
    """Whether something arriving, dated ``moment``, is dropped by its scope's purge at ``tombstone``
    (:func:`purged_before`); logs it when it is.

    Args:
        what: What arrives and how it is dated (``turn t1 occurred``, ``recall update r1 made``).
    """
    if not purged_before(moment, tombstone):
        return False
    logger.info(
        "%s at %s, not after its scope's purge at %s: dropped",
        what,
        moment.isoformat(),
        tombstone.isoformat() if tombstone else None,
    )
    return True


#: How long a turn caught in a purge waits for that purge to be over (one killed midway never is),
#: and its first and longest pause between looks.
PURGE_WAIT_SECONDS = 30.0
_FIRST_PAUSE, _LONGEST_PAUSE = 0.02, 0.5


async def wait_for_purge(history: HistoryStore, scope: Scope, *, budget: float = PURGE_WAIT_SECONDS) -> bool:
    """Wait until every purge covering ``scope`` is over (:class:`~memory_core.capabilities.PurgeSettlement`),
    at most ``budget`` seconds; at once for a history that does not record it.

    Returns:
        ``False`` when the budget ran out (the purge was killed midway, or is very slow); a warning
        says so.
    """
    if not supports(history, PurgeSettlement):
        return True
    settlement = cast(PurgeSettlement, history)
    deadline, pause = time.monotonic() + budget, _FIRST_PAUSE
    while not await settlement.purge_settled(scope):
        if time.monotonic() >= deadline:
            logger.warning("a purge of a scope was still under way after %.0fs; not waiting longer", budget)
            return False
        await asyncio.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)
    return True


async def record_once(history: HistoryStore | None, entry: HistoryEntry) -> None:
    """Append ``entry`` to the history unless it is already its memory's last recorded change (a
    change recorded, then a crash before its write, then the turn again)."""
    if history is not None and not await _recorded(history, entry):
        await history.append([entry])


async def _recorded(history: HistoryStore, entry: HistoryEntry) -> bool:
    """Whether ``entry`` is already its memory's last recorded change (recorded, then a crash before
    the write)."""
    entries = await history.for_memory(Scope.of(entry.user_id, entry.agent_id), entry.memory_id)
    return bool(entries) and entries[-1].event is entry.event and entries[-1].after == entry.after
