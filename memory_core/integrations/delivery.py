"""Publishing a run's turn within a deadline; a turn that misses it waits in the outbox and goes later.

A publish that outlives ``publish_timeout`` keeps running in the background (up to
:data:`LINGER_SECONDS`) with a copy in the outbox: if it finishes, the copy is removed, so the turn is
delivered once. The outbox is flushed after runs and, while the provider is open, every
``flush_interval`` seconds; a turn the receiver keeps refusing is set aside after
:data:`~memory_core.integrations.outbox.MAX_PERMANENT_FAILURES` deliveries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from memory_core.client.base import MemoryClient
from memory_core.domain.log_ids import redact
from memory_core.domain.messages import Turn
from memory_core.errors import PermanentError, TransientError, ValidationError
from memory_core.integrations.outbox import MAX_PERMANENT_FAILURES, OutboxEntry, TurnOutbox

__all__ = ["LINGER_SECONDS", "TurnDelivery"]

logger = logging.getLogger(__name__)

#: How long a publish that outlived ``publish_timeout`` may keep running in the background before it
#: is abandoned to the outbox.
LINGER_SECONDS = 30.0


class TurnDelivery:
    """Delivers turns to ``client``, through ``outbox`` when publishing fails or takes too long.

    Args:
        client: Where turns are published.
        outbox: The durable outbox (``None``: a turn that cannot be published is logged and lost).
        publish_timeout: Seconds a publish is waited for before the turn is left to the outbox.

    Attributes:
        in_flight: The ids of the turns being published now (a flush leaves them alone).
    """

    def __init__(self, client: MemoryClient, outbox: TurnOutbox | None, *, publish_timeout: float) -> None:
        self.client = client
        self.outbox = outbox
        self.publish_timeout = publish_timeout
        self.in_flight: set[str] = set()
        self._maybe_waiting = outbox is not None and outbox.exists()
        self._flush_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flush_task: asyncio.Task[Any] | None = None
        self._flusher: asyncio.Task[Any] | None = None

    # -- publishing -----------------------------------------------------------------------------
    async def publish(self, turn: Turn) -> None:
        """Publish ``turn``, waiting at most ``publish_timeout``; on failure or timeout it is kept in
        the outbox (a turn the receiver rejects as invalid is dropped)."""
        task = asyncio.ensure_future(self._publish_lingering(turn))
        self.in_flight.add(turn.turn_id)
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=self.publish_timeout)
        except TimeoutError:
            logger.warning(
                "publishing turn %s took longer than %.2fs; it is kept in the outbox",
                turn.turn_id,
                self.publish_timeout,
            )
            self._keep(turn, "publish timed out")
            self._tasks.add(task)
            task.add_done_callback(self._lingering_done)
        except asyncio.CancelledError:
            self._keep(turn, "the run was cancelled while publishing")
            raise
        except ValidationError as exc:
            logger.error(
                "turn %s was rejected and is dropped: %s", turn.turn_id, redact(exc, turn.user_id, turn.agent_id)
            )
        except Exception as exc:
            logger.warning(
                "publishing turn %s failed (%s: %s); it is kept in the outbox",
                turn.turn_id,
                type(exc).__name__,
                redact(exc, turn.user_id, turn.agent_id),
            )
            self._keep(turn, f"{type(exc).__name__}: {exc}")

    async def _publish_lingering(self, turn: Turn) -> None:
        """Publish once; if this outlives the caller's timeout, it may finish (and clear the outbox) later."""
        try:
            await asyncio.wait_for(
                self.client.publish_turn(turn), timeout=max(LINGER_SECONDS, self.publish_timeout)
            )
        finally:
            self.in_flight.discard(turn.turn_id)
        # Delivered: if the caller gave up waiting, the outbox holds a copy that must not be sent again.
        if self.outbox is not None and self.outbox.delivered(turn.turn_id):
            logger.info("turn %s was delivered late; removed from the outbox", turn.turn_id)

    def _lingering_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.info("a late publish failed (%s); the turn stays in the outbox", redact(task.exception()))

    def _keep(self, turn: Turn, error: str) -> None:
        if self.outbox is None:
            logger.error("turn %s could not be published and there is no outbox; it is lost", turn.turn_id)
            return
        try:
            self.outbox.put(turn, error=error)
            self._maybe_waiting = True
        except Exception as exc:
            logger.error(
                "turn %s could not be written to the outbox (%s); it is lost",
                turn.turn_id,
                redact(exc, turn.user_id, turn.agent_id),
            )

    # -- the outbox -----------------------------------------------------------------------------
    async def flush(self, *, force: bool = False, limit: int = 100) -> int:
        """Deliver the turns waiting in the outbox, oldest first; returns how many were delivered.

        Args:
            force: Try every waiting turn now, ignoring the retry schedule.
            limit: Deliver at most this many turns.
        """
        outbox = self.outbox
        if outbox is None:
            return 0
        delivered = 0
        async with self._flush_lock:  # one flush at a time
            for entry in outbox.due(limit=limit, ignore_schedule=force):
                turn_id = entry.turn.turn_id
                # A publish still running owns the turn; one that finished since due() removed it.
                if turn_id in self.in_flight or not outbox.contains(turn_id):
                    continue
                if await self._redeliver(outbox, entry):
                    delivered += 1
        if outbox.pending() == 0:
            self._maybe_waiting = False
        if delivered:
            logger.info("outbox: delivered %s turn(s)", delivered)
        return delivered

    async def _redeliver(self, outbox: TurnOutbox, entry: OutboxEntry) -> bool:
        """Publish one turn of the outbox; whether it left the outbox delivered."""
        turn_id = entry.turn.turn_id
        self.in_flight.add(turn_id)
        try:
            await asyncio.wait_for(self.client.publish_turn(entry.turn), timeout=self.publish_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _not_delivered(outbox, entry, exc)
            return False
        finally:
            self.in_flight.discard(turn_id)
        return outbox.delivered(turn_id)

    def flush_soon(self) -> None:
        """Flush the outbox in the background if turns may wait there and no flush is running."""
        if self._maybe_waiting and self._flush_task is None:
            self._flush_task = self.run_in_background(self._flush_in_background())

    async def _flush_in_background(self) -> None:
        try:
            await self.flush()
        except Exception as exc:
            logger.warning("outbox flush failed: %s", redact(exc))
        finally:
            self._flush_task = None

    def start_flushing(self, interval: float) -> None:
        """Flush the outbox every ``interval`` seconds (when it may hold turns) until :meth:`stop`."""
        if self.outbox is not None and self._flusher is None:
            self._flusher = asyncio.ensure_future(self._flush_periodically(interval))

    async def _flush_periodically(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.flush_soon()

    # -- background work ------------------------------------------------------------------------
    def run_in_background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task that :meth:`stop` waits for (at most ``publish_timeout``)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        """Stop the periodic flush, then wait at most ``publish_timeout`` for the background work
        (late publishes, flushes), cancelling what is still running."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._flusher
            self._flusher = None
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still_running = await asyncio.wait(pending, timeout=self.publish_timeout)
            for task in still_running:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*still_running, return_exceptions=True)

    def close_outbox(self) -> None:
        """Close the outbox file (after :meth:`stop`)."""
        if self.outbox is not None:
            self.outbox.close()


def _not_delivered(outbox: TurnOutbox, entry: OutboxEntry, exc: Exception) -> None:
    """Schedule another delivery of the turn, or set it aside when the receiver keeps refusing it."""
    turn_id = entry.turn.turn_id
    reason = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
    refused = isinstance(exc, PermanentError) and not isinstance(exc, TransientError)
    if refused and entry.attempts + 1 >= MAX_PERMANENT_FAILURES:
        outbox.set_aside(turn_id, reason)
        logger.error(
            "outbox: turn %s was refused on %s deliveries from the outbox and is set aside in %s (%s)",
            turn_id,
            MAX_PERMANENT_FAILURES,
            outbox.path,
            redact(reason, entry.turn.user_id, entry.turn.agent_id),
        )
        return
    outbox.failed(turn_id, reason)
    logger.info(
        "outbox: turn %s not delivered yet (%s)", turn_id, redact(reason, entry.turn.user_id, entry.turn.agent_id)
    )
