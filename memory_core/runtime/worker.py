"""The queue worker of the embedded runtime: drains the SQLite queue into the memory service.

For each received message it calls :meth:`MemoryService.process_message
<memory_core.service.MemoryService.process_message>` and settles the message the way the Service
Bus trigger does in Azure:

- success: complete (only after the service returned, so every write is durable first);
- :class:`~memory_core.errors.PermanentError` (a malformed message): dead-letter it with the error's
  name as the reason and its message as the description, and log a warning saying what was wrong;
- anything else (a :class:`~memory_core.errors.TransientError`, a bug): abandon it for redelivery
  after a short back-off; after ``max_deliveries`` the queue dead-letters it with the last error.

Several workers may drain one queue (in one process or several): the queue hands a session to one
receiver at a time, so a scope's messages are still applied one by one, in order. With ``batch`` > 1 a
worker takes up to that many of a session's messages at once, prepares their turns together
(extracted, their passages embedded in one call), then processes and settles them one by one. A
worker that is stopped finishes its message (and gives back the rest of its batch); one that is
cancelled releases them; one that is killed leaves them locked until the locks expire, then they are
delivered again (only a message it had started counts a delivery).

Queue faults do not end :meth:`QueueWorker.run`: an error while receiving (disk full, the queue file
locked by another process beyond the busy timeout) is logged and counted, and the worker backs off
(``retry_delay``: 0.2 s doubling to 30 s by default, reset by the next success) and tries again. A
settlement (complete, abandon, dead-letter) that fails with a storage error is retried in place the same
way, while the message's lock is renewed, so a processed message is not delivered and processed again.
:meth:`QueueWorker.health` tells what the worker is doing (``running``, ``backing_off`` since when and
why, ``stopped``) for ``GET /health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeVar

from memory_core import telemetry
from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.adapters.sqlite.queue_messages import LockLostError, QueueMessage
from memory_core.errors import PermanentError, StorageFullError, TransientError
from memory_core.runtime.offload import StorageThread
from memory_core.runtime.sharing import background_work
from memory_core.service.messages import ProcessOutcome

__all__ = [
    "MessageProcessor",
    "QueueWorker",
    "WorkerState",
    "WorkerStats",
    "default_backoff",
    "default_retry_delay",
    "exponential_backoff",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: What a worker is doing: ``starting`` (not yet received once), ``running``, ``backing_off`` (waiting
#: to retry after a queue error or a crash), ``stopped``.
WorkerState = Literal["starting", "running", "backing_off", "stopped"]

#: Errors of the queue's storage that are worth retrying in place (locked, busy, disk full, I/O).
_STORAGE_ERRORS: tuple[type[BaseException], ...] = (TransientError, sqlite3.OperationalError, OSError)


class MessageProcessor(Protocol):
    """What the worker needs of the memory service."""

    async def process_message(self, body: bytes | str | Mapping[str, Any]) -> ProcessOutcome: ...

    async def prepare_messages(self, bodies: Sequence[bytes | str | Mapping[str, Any]]) -> Sequence[Any]:
        """What to pass to ``process_message`` as ``prepared`` for each body, worked out together
        ahead (``None``: nothing; the default prepares nothing). Never raises."""
        return [None] * len(bodies)


def default_backoff(delivery_count: int) -> float:
    """Seconds a failed message waits before its next delivery: 0.5, 1, 2, ... up to 30."""
    return float(min(30.0, 0.5 * 2 ** max(0, delivery_count - 1)))


def exponential_backoff(attempt: int, *, initial: float = 0.2, maximum: float = 30.0) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): ``initial`` doubling up to ``maximum``.

    Args:
        attempt: How many attempts in a row have failed (values below 1 count as 1).
        initial: The first delay.
        maximum: The largest delay.
    """
    exponent = min(max(0, attempt - 1), 64)  # 2**64 * initial is past any maximum; no float overflow
    return float(min(maximum, initial * 2.0**exponent))


def default_retry_delay(failures: int) -> float:
    """Seconds a worker waits after ``failures`` queue errors in a row: 0.2, 0.4, ... up to 30."""
    return exponential_backoff(failures)


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
        retry_delay: Delay before the worker tries the queue again, from the number of queue errors in
            a row (receive or settle).
        clock: Monotonic seconds, for how long the worker has been in its state (tests inject theirs).
        thread: Where the queue's calls run (``None``: on the event loop). The runtime gives each
            worker the queue's :class:`~memory_core.runtime.offload.StorageThread`, so a queue file held
            by another process stalls the worker, never the loop.
        batch: Messages of one session received at once (the session's next ones, in order): their
            turns are prepared together (``prepare_messages``: extracted, and their passages embedded
            in one call), then processed and settled one by one. 1: one message at a time.

    Attributes:
        state: What the worker is doing (:data:`WorkerState`).
        errors: Queue errors (receive or settle) since it was created.
        consecutive_errors: Queue errors since the last success.
        last_error: The last queue error or crash, as ``"<type>: <message>"``.
        restarts: How often its task was restarted after dying (counted by the runtime).
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
        retry_delay: Callable[[int], float] = default_retry_delay,
        clock: Callable[[], float] = time.monotonic,
        thread: StorageThread | None = None,
        batch: int = 1,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.batch = int(batch)
        self.queue = queue
        self.thread = thread
        self.processor = processor
        self.name = name
        self.idle_seconds = idle_seconds
        self.backoff = backoff
        self.renew_locks = renew_locks
        self.retry_delay = retry_delay
        self.clock = clock
        self.stats = WorkerStats()
        self.state: WorkerState = "starting"
        self.errors = 0
        self.consecutive_errors = 0
        self.last_error: str | None = None
        self.restarts = 0
        self._since = clock()
        self._since_utc = datetime.now(UTC)
        self._stop: asyncio.Event | None = None
        self._woken: asyncio.Event | None = None  # made by run(), in the loop it runs in

    # -- state and health -----------------------------------------------------------------------
    @property
    def state_seconds(self) -> float:
        """How long the worker has been in its current state (a back-off counts from its first error)."""
        return max(0.0, self.clock() - self._since)

    def is_stalled(self, after_seconds: float) -> bool:
        """Whether the worker is not draining: stopped, or backing off for at least ``after_seconds``."""
        if self.state == "stopped":
            return True
        return self.state == "backing_off" and self.state_seconds >= after_seconds

    def health(self) -> dict[str, Any]:
        """The worker for ``GET /health``: state, since when, last error, restarts and counts."""
        return {
            "name": self.name,
            "state": self.state,
            "since": self._since_utc.isoformat().replace("+00:00", "Z"),
            "state_seconds": round(self.state_seconds, 3),
            "last_error": self.last_error,
            "consecutive_errors": self.consecutive_errors,
            "restarts": self.restarts,
            "processed": self.stats.completed,
            "failed": self.stats.dead_lettered + self.stats.abandoned,
            "errors": self.errors,
        }

    def note_crash(self, exc: BaseException) -> None:
        """Record that the worker's task died with ``exc`` (the runtime restarts it)."""
        self.last_error = f"crashed: {type(exc).__name__}: {exc}"
        self._enter("backing_off")

    def _enter(self, state: WorkerState) -> None:
        if state != self.state:
            self.state = state
            self._since = self.clock()
            self._since_utc = datetime.now(UTC)

    def _succeeded(self) -> None:
        if self.consecutive_errors:
            logger.info(
                "%s: the queue works again after %s error(s) in %.1fs",
                self.name,
                self.consecutive_errors,
                self.state_seconds,
            )
            self.consecutive_errors = 0
        self._enter("running")

    def _failed(self, exc: BaseException, doing: str) -> float:
        """Count and log a queue error; returns how long to back off."""
        self.errors += 1
        self.consecutive_errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._enter("backing_off")
        delay = self.retry_delay(self.consecutive_errors)
        logger.warning(
            "%s: %s failed (error %s in a row), retrying in %.1fs: %s: %s",
            self.name,
            doing,
            self.consecutive_errors,
            delay,
            type(exc).__name__,
            exc,
            exc_info=not isinstance(exc, _STORAGE_ERRORS),  # a bug: show where
        )
        return delay

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the worker is asked to stop."""
        if self._stop is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    def wake(self) -> None:
        """Look at the queue now rather than at the end of the idle wait (a message was just sent)."""
        if self._woken is not None:
            self._woken.set()

    async def _idle(self, stop: asyncio.Event, woken: asyncio.Event) -> None:
        """Wait ``idle_seconds``, or less if the worker is stopped or woken."""
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(woken.wait())]
        try:
            await asyncio.wait(waiters, timeout=self.idle_seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)

    async def run(self, stop: asyncio.Event) -> None:
        """Process messages until ``stop`` is set; the message in hand is finished first.

        A queue error does not end the loop: it is logged and counted, and the worker backs off
        (``retry_delay``) and tries again; the next success resets the back-off. When idle it polls
        the queue every ``idle_seconds``, or at once after :meth:`wake`.
        """
        logger.info("%s: started", self.name)
        self._stop = stop
        woken = self._woken = asyncio.Event()
        try:
            while not stop.is_set():
                woken.clear()  # a wake from now on is seen by the idle wait below
                try:
                    handled = await self.run_once()
                except Exception as exc:  # receive or settle: the queue's storage, or a bug
                    await self._pause(self._failed(exc, "the queue"))
                    continue
                self._succeeded()
                if not handled:
                    await self._idle(stop, woken)
                else:
                    await asyncio.sleep(0)  # let the other workers and the HTTP requests in
        finally:
            self._stop = None
        self._enter("stopped")
        logger.info("%s: stopped (%s; %s queue error(s))", self.name, self.stats.as_dict(), self.errors)

    async def _queue_call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a queue operation on the worker's storage thread (or here, without one)."""
        if self.thread is None:
            return fn(*args, **kwargs)
        return await self.thread.call(fn, *args, **kwargs)

    async def run_once(self) -> bool:
        """Receive and settle one message (or one batch of a session's messages, see ``batch``);
        ``False`` when there was nothing to receive."""
        if self.batch == 1:
            message = await self._queue_call(self.queue.receive)
            if message is None:
                return False
            await self._handle(message)
            return True
        messages = await self._queue_call(self.queue.receive_batch, max_messages=self.batch)
        if not messages:
            return False
        if len(messages) == 1:  # nothing to prepare together
            await self._handle(messages[0])
        else:
            await self._handle_batch(messages)
        return True

    async def drain(self, *, max_messages: int | None = None) -> int:
        """Process messages until none can be received now; returns how many receptions were handled
        (a reception is one message, or with ``batch`` > 1 a session's batch), at most ``max_messages``."""
        handled = 0
        while max_messages is None or handled < max_messages:
            if not await self.run_once():
                break
            handled += 1
        return handled

    async def _handle_batch(self, messages: list[QueueMessage]) -> None:
        """Prepare a session's messages together, then handle them one by one, in order.

        Each message behind the head is begun first (:meth:`SQLiteQueue.begin`: its delivery counts
        then, and its lock is checked and renewed); one whose lock was lost to another receiver is not
        processed, nor anything after it. A message that is not completed or dead-lettered (it failed
        and waits for a retry, or its lock was lost) stops the batch: the messages after it are given
        back unstarted, their delivery counts as they were, so the session keeps its order. So do a
        stop request (the message in hand is finished first), a cancellation and a full disk.
        """
        head = messages[0]
        held = list(messages)  # locked by this worker and not yet settled: their locks are renewed
        waiting = list(messages)  # not started: given back if the batch stops
        renewer = asyncio.create_task(self._renew(held)) if self.renew_locks else None
        try:
            prepared = await self._prepare(messages)
            for message, ahead in zip(messages, prepared, strict=True):
                if self._stop is not None and self._stop.is_set():
                    break
                started = message
                if message is not head:
                    try:
                        started = await self._queue_call(self.queue.begin, message)
                    except LockLostError as exc:  # another receiver has it (and the session) now
                        self.stats.lock_lost += 1
                        logger.warning("%s: %s; the rest of its batch is given back", self.name, exc)
                        waiting.remove(message)
                        held.remove(message)
                        break
                waiting.remove(message)  # _handle settles it, whatever happens
                outcome = await self._handle(started, ahead, renew=False)
                held.remove(message)
                if outcome not in ("completed", "dead_lettered"):
                    break
        except asyncio.CancelledError:  # give the rest back now, on the loop: nothing may wait here
            for message in waiting:
                self._give_back(message, counted=message is head)
            waiting.clear()
            raise
        except BaseException:  # a full disk, a storage error outside run(), a bug
            for message in waiting:
                await self._queue_call(self._give_back, message, counted=message is head)
            waiting.clear()
            raise
        finally:
            if renewer is not None:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer
        try:
            while waiting:
                await self._queue_call(self._give_back, waiting[0], counted=waiting[0] is head)
                waiting.pop(0)
        except asyncio.CancelledError:
            for message in waiting:
                self._give_back(message, counted=message is head)
            raise

    async def _prepare(self, messages: list[QueueMessage]) -> list[Any]:
        """What the processor prepares for the messages together (``None`` each if it cannot)."""
        prepare = getattr(self.processor, "prepare_messages", None)
        if prepare is None:
            return [None] * len(messages)
        try:
            with background_work():  # the batch's passages are background work, like its ingestion
                prepared = list(await prepare([m.body for m in messages]))
        except Exception as exc:  # a bug: each message is processed on its own instead
            logger.warning(
                "%s: preparing %s messages failed: %s: %s", self.name, len(messages), type(exc).__name__, exc
            )
            return [None] * len(messages)
        if len(prepared) != len(messages):
            logger.warning("%s: %s preparations for %s messages; ignored", self.name, len(prepared), len(messages))
            return [None] * len(messages)
        return prepared

    def _give_back(self, message: QueueMessage, *, counted: bool) -> None:
        """Give back a received message that was not started; its delivery does not count (the head of
        a batch counted one when it was received, the others not)."""
        try:
            if counted:
                self.queue.abandon(message, count_delivery=False)
            else:
                self.queue.release(message)
        except Exception as exc:  # its lock expires; it is delivered again then
            logger.warning(
                "%s: could not give back message %s (delivered again when its lock expires): %s: %s",
                self.name,
                message.message_id,
                type(exc).__name__,
                exc,
            )

    async def _handle(self, message: QueueMessage, prepared: Any = None, *, renew: bool = True) -> str:
        """Process and settle one message; returns ``completed``, ``dead_lettered``, ``abandoned`` or
        ``unsettled`` (its lock was lost, or settling it could not finish)."""
        renewer = asyncio.create_task(self._renew([message])) if self.renew_locks and renew else None
        try:
            try:
                with (
                    telemetry.operation("memory.ingest", **{"messaging.message.id": message.message_id}) as op,
                    background_work(),  # searches and ingestion take turns at shared resources
                ):
                    if prepared is None:
                        outcome = await self.processor.process_message(message.body)
                    else:  # a MemoryService (its prepare_messages made it)
                        outcome = await self.processor.process_message(message.body, prepared=prepared)  # type: ignore[call-arg]
                    if outcome.ingest is not None:
                        telemetry.record_ingest(outcome.ingest, op.elapsed)
            except asyncio.CancelledError:
                try:
                    self._settle_now(self.queue.abandon, message, error="processing was cancelled (shutdown)")
                except Exception as exc:  # the lock expires; the message is delivered again then
                    logger.warning(
                        "%s: could not release message %s on shutdown (delivered again when its lock "
                        "expires): %s: %s",
                        self.name,
                        message.message_id,
                        type(exc).__name__,
                        exc,
                    )
                else:
                    logger.info(
                        "%s: released message %s (session %s) on shutdown",
                        self.name,
                        message.message_id,
                        message.session_id,
                    )
                raise
            except StorageFullError as exc:
                # The machine's fault, not the message's: give the delivery back, so a long disk-full
                # episode never dead-letters a turn, and let run() back off as after a queue error
                # (growing delays; health shows the worker backing off with the error).
                logger.warning(
                    "%s: message %s (session %s) waits for disk space: %s: %s",
                    self.name,
                    message.message_id,
                    message.session_id,
                    type(exc).__name__,
                    exc,
                )
                try:
                    await self._queue_call(
                        self._settle_now,
                        self.queue.abandon,
                        message,
                        error=f"{type(exc).__name__}: {exc}",
                        delay_seconds=self.retry_delay(self.consecutive_errors + 1),
                        count_delivery=False,
                    )
                except _STORAGE_ERRORS:
                    pass  # the queue's disk is full too: its lock expires and it is delivered again
                else:
                    self.stats.abandoned += 1
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
                if await self._settle(self.queue.dead_letter, message, reason=reason, description=str(exc)):
                    self.stats.dead_lettered += 1
                    telemetry.record_dead_letter(reason, message_id=message.message_id)
                    return "dead_lettered"
                return "unsettled"
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
                if await self._settle(
                    self.queue.abandon, message, error=f"{type(exc).__name__}: {exc}", delay_seconds=delay
                ):
                    self.stats.abandoned += 1
                return "abandoned"
            if await self._settle(self.queue.complete, message):
                self.stats.completed += 1
                return "completed"
            return "unsettled"
        finally:
            if renewer is not None:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer

    async def _settle(self, action: Callable[..., Any], message: QueueMessage, **kwargs: Any) -> bool:
        """Settle ``message``; ``False`` when it could not be (lock lost, or stopping mid-retry).

        Inside :meth:`run`, a storage error is retried in place with the worker's back-off (the lock
        renewer keeps the message), so a processed message is not processed again; outside it (as in
        :meth:`drain`) the error is raised.
        """
        doing = f"settling message {message.message_id} ({getattr(action, '__name__', 'settle')})"
        while True:
            try:
                settled = await self._queue_call(self._settle_now, action, message, **kwargs)
            except _STORAGE_ERRORS as exc:
                if self._stop is None:
                    raise
                if self._stop.is_set():
                    logger.warning(
                        "%s: stopping while %s fails; it is delivered again when its lock expires: %s: %s",
                        self.name,
                        doing,
                        type(exc).__name__,
                        exc,
                    )
                    return False
                await self._pause(self._failed(exc, doing))
                continue
            if self.consecutive_errors:
                self._succeeded()
            return settled

    def _settle_now(self, action: Callable[..., Any], message: QueueMessage, **kwargs: Any) -> bool:
        try:
            action(message, **kwargs)
        except LockLostError as exc:
            # Another receiver has it now; ingestion is idempotent, so the effect is the same.
            self.stats.lock_lost += 1
            logger.warning("%s: %s", self.name, exc)
            return False
        return True

    async def _renew(self, held: list[QueueMessage]) -> None:
        """Keep the locks of the messages in ``held`` (a batch's shrinks as they are settled) until
        cancelled; a message whose lock was lost (settled, or taken by another receiver) is let go."""
        interval = max(0.05, self.queue.lock_seconds / 2)
        lost: set[int] = set()
        while True:
            await asyncio.sleep(interval)
            for message in list(held):
                if message.seq in lost:
                    continue
                try:
                    await self._queue_call(self.queue.renew_lock, message)
                except LockLostError:
                    lost.add(message.seq)
                except Exception as exc:  # keep processing; the lock may expire
                    logger.warning("%s: renewing the lock of %s failed: %s", self.name, message.message_id, exc)
