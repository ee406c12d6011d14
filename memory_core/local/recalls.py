"""Recall updates gathered per scope before they are queued (``memory-core serve``).

Every search that returns memories reinforces them through a recall update on the scope's ordered
queue path. Under a crowd of searches that is one message per search, and the queue workers would
spend their time on reinforcement instead of on what users said. :class:`CoalescingPublisher` holds
a scope's recall updates for ``window_seconds`` and then queues one update for all of them (memory ids
united in order, ``at`` the latest), so a scope adds at most one recall message per window however
often it is searched. Recalls of a memory gathered together count as one recall, much as a file
system records one access time for many reads (``relatime``): massed recall is one rehearsal (see
:meth:`memory_core.policy.HumanMemoryPolicy.recall`).

What is held is only reinforcement, never what a user said: turns pass straight through. Closing the
publisher (a normal stop) queues everything held first; a killed process loses at most the last
window's reinforcement.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..models import MAX_RECALL_IDS, RecallUpdate, Scope, Turn
from ..ports import TurnPublisher

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
        if held is not None and len(held.ids.keys() | dict.fromkeys(update.memory_ids).keys()) > MAX_RECALL_IDS:
            await self._flush(scope)  # full: queue what is held, start again with this one
            held = None
        if held is None:
            held = self._held[scope] = _Held(update, dict.fromkeys(update.memory_ids))
            held.timer = asyncio.get_running_loop().call_later(self.window_seconds, self._due, scope)
            return
        held.ids.update(dict.fromkeys(update.memory_ids))
        if update.at > held.update.at:
            held.update = held.update.model_copy(update={"at": update.at})

    def _due(self, scope: Scope) -> None:
        task = asyncio.get_running_loop().create_task(self._flush(scope))
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _flush(self, scope: Scope) -> None:
        held = self._held.pop(scope, None)
        if held is None:
            return
        if held.timer is not None:
            held.timer.cancel()
        update = held.update.model_copy(update={"memory_ids": list(held.ids)})
        try:
            await self._publish(update)
        except Exception as exc:  # reinforcement only: never fail a search, never lose a turn over it
            logger.warning(
                "queuing a recall update of %s memories failed; that reinforcement is lost: %s: %s",
                len(update.memory_ids),
                type(exc).__name__,
                exc,
            )

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
