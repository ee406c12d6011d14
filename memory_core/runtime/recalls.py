"""Recall updates gathered per scope before they are queued (``memory-core serve``).

Every search that returns memories reinforces them through a recall update on the scope's ordered
queue path. Under a crowd of searches that is one message per search, and the queue workers would
spend their time on reinforcement instead of on what users said. :class:`CoalescingPublisher` holds
a scope's recall updates for ``window_seconds`` and then queues one update for all of them (memory ids
united in order, ``at`` the latest), so a scope adds at most one recall message per window however
often it is searched. Recalls of a memory gathered together count as one recall, much as a file
system records one access time for many reads (``relatime``): massed recall is one rehearsal (see
:meth:`memory_core.domain.policy.HumanMemoryPolicy.recall`).

What is held is only reinforcement, never what a user said: turns pass straight through. Closing the
publisher (a normal stop) queues everything held first; a killed process loses at most the last
window's reinforcement. An update the queue refuses is held again for the next window (merged with
what came meanwhile), not dropped; only at the stop, or when that would pass the size of one update,
is it lost, with a warning. Purging a user drops what is held for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core.domain.log_ids import redact
from memory_core.domain.messages import MAX_RECALL_IDS, RecallUpdate, Turn
from memory_core.domain.records import Scope
from memory_core.ports import TurnPublisher

__all__ = ["CoalescingPublisher"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    update: RecallUpdate
    ids: dict[str, None] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None


class CoalescingPublisher:
    """A :class:`TurnPublisher` that gathers each scope's recall updates for a window.

    Args:
        inner: Where turns and gathered recall updates go (closed with this publisher).
        window_seconds: How long a scope's first recall update waits for others (0: none held).

    Attributes:
        received: Recall updates handed to this publisher.
        published: Recall updates it queued (the rest were folded into those).
    """

    def __init__(self, inner: TurnPublisher, *, window_seconds: float = 2.0) -> None:
        if window_seconds < 0:
            raise ValueError("window_seconds must not be negative")
        self.inner = inner
        self.window_seconds = float(window_seconds)
        self.received = 0
        self.published = 0
        self._held: dict[Scope, _Held] = {}
        self._flushing: set[asyncio.Task[None]] = set()
        self._closed = False

    def __getattr__(self, name: str) -> Any:
        """Whatever else the inner publisher offers (removing a purged scope's messages, ...)."""
        if name == "inner":  # not set yet (during construction): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def publish_turn(self, turn: Turn) -> bool | None:
        return await self.inner.publish_turn(turn)

    async def publish_recall(self, update: RecallUpdate) -> None:
        self.received += 1
        if self._closed or self.window_seconds == 0:
            await self._publish(update)
            return
        scope = update.scope
        held = self._held.get(scope)
        if held is None:
            self._hold(update)
            return
        if len(held.ids.keys() | dict.fromkeys(update.memory_ids).keys()) > MAX_RECALL_IDS:
            # Full: this update starts the scope's next gathering before what is held is queued, so
            # an update arriving while that is sent joins the new one instead of being overwritten.
            full = self._take(scope)
            self._hold(update)
            if full is not None:
                await self._send(full)
            return
        self._merge(held, update.memory_ids, update.at)

    def _hold(self, update: RecallUpdate) -> _Held:
        held = self._held[update.scope] = _Held(update, dict.fromkeys(update.memory_ids))
        held.timer = asyncio.get_running_loop().call_later(self.window_seconds, self._due, update.scope)
        return held

    @staticmethod
    def _merge(held: _Held, memory_ids: Sequence[str], at: datetime) -> None:
        held.ids.update(dict.fromkeys(memory_ids))
        if at > held.update.at:
            held.update = held.update.model_copy(update={"at": at})

    def _take(self, scope: Scope) -> _Held | None:
        """Remove what is held for ``scope`` (its timer cancelled)."""
        held = self._held.pop(scope, None)
        if held is not None and held.timer is not None:
            held.timer.cancel()
        return held

    def _due(self, scope: Scope) -> None:
        task = asyncio.get_running_loop().create_task(self._flush(scope))
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _flush(self, scope: Scope) -> None:
        held = self._take(scope)
        if held is not None:
            await self._send(held)

    async def _send(self, held: _Held) -> None:
        """Queue one gathered update; if the queue refuses it, hold it again for the next window."""
        update = held.update.model_copy(update={"memory_ids": list(held.ids)})
        try:
            await self._publish(update)
        except Exception as exc:  # reinforcement only: never fail a search over it
            again = not self._closed
            if again:
                current = self._held.get(update.scope)
                if current is None:
                    self._hold(update)
                elif len(current.ids.keys() | held.ids.keys()) <= MAX_RECALL_IDS:
                    self._merge(current, update.memory_ids, update.at)
                else:
                    again = False
            logger.warning(
                "queuing a recall update of %s memories failed (%s): %s: %s",
                len(update.memory_ids),
                f"tried again in {self.window_seconds:g}s" if again else "that reinforcement is lost",
                type(exc).__name__,
                redact(exc, update.user_id, update.agent_id),
            )

    async def purge_scope(self, user_id: str, agent_id: str | None = None) -> int:
        """Drop what is held for the user (one agent's, or all), then let the inner publisher remove
        the queued messages when it can (the embedded queue); returns how many messages it removed."""
        for scope in [s for s in self._held if s.user_id == user_id and agent_id in (None, s.agent_id)]:
            self._take(scope)
        purge = getattr(self.inner, "purge_scope", None)
        return int(await purge(user_id, agent_id)) if callable(purge) else 0

    async def _publish(self, update: RecallUpdate) -> None:
        self.published += 1
        await self.inner.publish_recall(update)

    async def flush(self) -> None:
        """Queue every held recall update now."""
        for scope in list(self._held):
            await self._flush(scope)
        if self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)

    async def close(self) -> None:
        """Queue what is held, then close the inner publisher."""
        self._closed = True
        try:
            await self.flush()
        finally:
            await self.inner.close()
