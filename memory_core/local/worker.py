"""The queue worker of the embedded runtime: drains the SQLite queue into the memory service.

For each received message it calls :meth:`MemoryService.process_message
<memory_core.service.MemoryService.process_message>` and settles the message the way the Service
Bus trigger does in Azure:

- success: complete (only after the service returned, so every write is durable first);
- :class:`~memory_core.errors.PermanentError` (a malformed message): dead-letter it with the error's
  name as the reason and its message as the description, and log a warning saying what was wrong;
- anything else (a :class:`~memory_core.errors.TransientError`, a bug): abandon it for redelivery
  after a short back-off; after ``max_deliveries`` the queue dead-letters it with the last error.

Several workers may drain one queue (in one process or several): the queue hands out one message per
session at a time, so a scope's messages are still applied one by one, in order. A worker that is
stopped finishes its message; one that is cancelled releases it; one that is killed leaves it locked
until the lock expires, then it is delivered again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .. import telemetry
from ..adapters.sqlite_queue import LockLostError, QueueMessage, SQLiteQueue
from ..errors import PermanentError
from ..service.ingest import ProcessOutcome

__all__ = ["MessageProcessor", "QueueWorker", "WorkerStats", "default_backoff"]

logger = logging.getLogger(__name__)


class MessageProcessor(Protocol):
    """What the worker needs of the memory service."""

    async def process_message(self, body: bytes | str | Mapping[str, Any]) -> ProcessOutcome: ...


def default_backoff(delivery_count: int) -> float:
    """Seconds a failed message waits before its next delivery: 0.5, 1, 2, ... up to 30."""
    return float(min(30.0, 0.5 * 2 ** max(0, delivery_count - 1)))


@dataclass(slots=True)
class WorkerStats:
    """What one worker did since it started."""

    completed: int = 0
    dead_lettered: int = 0
    abandoned: int = 0
    lock_lost: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "completed": self.completed,
            "dead_lettered": self.dead_lettered,
            "abandoned": self.abandoned,
            "lock_lost": self.lock_lost,
        }


class QueueWorker:
    """Receives messages from a :class:`SQLiteQueue` and hands them to the memory service.

    Args:
        queue: The queue to drain.
        processor: The memory service (anything with ``process_message``).
        name: Shown in log lines.
        idle_seconds: How long to wait before polling again when nothing could be received.
        backoff: Delay before a failed message is delivered again, from its delivery count.
        renew_locks: Renew the lock of a message while it is processed (for long extractions).
    """

    def __init__(
        self,
        queue: SQLiteQueue,
        processor: MessageProcessor,
        *,
        name: str = "worker",
        idle_seconds: float = 0.2,
        backoff: Callable[[int], float] = default_backoff,
        renew_locks: bool = True,
    ) -> None:
        self.queue = queue
        self.processor = processor
        self.name = name
        self.idle_seconds = idle_seconds
        self.backoff = backoff
        self.renew_locks = renew_locks
        self.stats = WorkerStats()

    async def run(self, stop: asyncio.Event) -> None:
        """Process messages until ``stop`` is set; the message in hand is finished first."""
        logger.info("%s: started", self.name)
        while not stop.is_set():
            handled = await self.run_once()
            if not handled:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.idle_seconds)
            else:
                await asyncio.sleep(0)  # let the other workers and the HTTP requests in
        logger.info("%s: stopped (%s)", self.name, self.stats.as_dict())

    async def run_once(self) -> bool:
        """Receive and settle one message; ``False`` when there was nothing to receive."""
        message = self.queue.receive()
        if message is None:
            return False
        await self._handle(message)
        return True

    async def drain(self, *, max_messages: int | None = None) -> int:
        """Process messages until none can be received now; returns how many were handled."""
        handled = 0
        while max_messages is None or handled < max_messages:
            if not await self.run_once():
                break
            handled += 1
        return handled

    async def _handle(self, message: QueueMessage) -> None:
        renewer = asyncio.create_task(self._renew(message)) if self.renew_locks else None
        try:
            try:
                with telemetry.operation("memory.ingest", **{"messaging.message.id": message.message_id}) as op:
                    outcome = await self.processor.process_message(message.body)
                    if outcome.ingest is not None:
                        telemetry.record_ingest(outcome.ingest, op.elapsed)
            except asyncio.CancelledError:
                self._settle(self.queue.abandon, message, error="processing was cancelled (shutdown)")
                logger.info(
                    "%s: released message %s (session %s) on shutdown",
                    self.name,
                    message.message_id,
                    message.session_id,
                )
                raise
            except PermanentError as exc:
                reason = type(exc).__name__
                logger.warning(
                    "%s: dead-lettered message %s (session %s, delivery %s): %s: %s",
                    self.name,
                    message.message_id,
                    message.session_id,
                    message.delivery_count,
                    reason,
                    exc,
                )
                if self._settle(self.queue.dead_letter, message, reason=reason, description=str(exc)):
                    self.stats.dead_lettered += 1
                    telemetry.record_dead_letter(reason, message_id=message.message_id)
                return
            except Exception as exc:
                delay = self.backoff(message.delivery_count)
                logger.warning(
                    "%s: message %s (session %s) failed on delivery %s/%s, retrying in %.1fs: %s: %s",
                    self.name,
                    message.message_id,
                    message.session_id,
                    message.delivery_count,
                    self.queue.max_deliveries,
                    delay,
                    type(exc).__name__,
                    exc,
                )
                if self._settle(
                    self.queue.abandon, message, error=f"{type(exc).__name__}: {exc}", delay_seconds=delay
                ):
                    self.stats.abandoned += 1
                return
            if self._settle(self.queue.complete, message):
                self.stats.completed += 1
        finally:
            if renewer is not None:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer

    def _settle(self, action: Callable[..., Any], message: QueueMessage, **kwargs: Any) -> bool:
        try:
            action(message, **kwargs)
        except LockLostError as exc:
            # Another receiver has it now; ingestion is idempotent, so the effect is the same.
            self.stats.lock_lost += 1
            logger.warning("%s: %s", self.name, exc)
            return False
        return True

    async def _renew(self, message: QueueMessage) -> None:
        interval = max(0.05, self.queue.lock_seconds / 2)
        while True:
            await asyncio.sleep(interval)
            try:
                message = self.queue.renew_lock(message)
            except LockLostError:
                return
            except Exception as exc:  # keep processing; the lock may expire
                logger.warning("%s: renewing the lock of %s failed: %s", self.name, message.message_id, exc)
