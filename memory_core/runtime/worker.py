"""The queue worker of the embedded runtime: drains the SQLite queue into the memory service.

Each message goes to :meth:`MemoryService.process_message
<memory_core.service.MemoryService.process_message>` and is settled as the Service Bus trigger does
in Azure: completed after the service returned; dead-lettered for a
:class:`~memory_core.errors.PermanentError` (a malformed message); otherwise abandoned for redelivery
after a back-off, until the queue dead-letters it after ``max_deliveries``. The queue hands a session
to one receiver at a time, so a scope's messages are applied in order however many workers drain it;
with ``batch`` > 1 a worker prepares a session's next messages together, then settles them one by
one. A queue fault never ends :meth:`QueueWorker.run`: the worker backs off and tries again (a failed
settlement in place, its lock kept), and :meth:`QueueWorker.health` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from memory_core import telemetry
from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.adapters.sqlite.queue_messages import LockLostError, QueueMessage
from memory_core.domain.log_ids import redact, session_tag
from memory_core.errors import DamagedFileError, PermanentError, StorageFullError, TransientError
from memory_core.runtime.backoff import default_backoff, default_retry_delay
from memory_core.runtime.locks import give_back, locks_kept
from memory_core.runtime.offload import StorageThread
from memory_core.runtime.sharing import background_work
from memory_core.runtime.worker_state import WorkerStatus
from memory_core.service.messages import ProcessOutcome

__all__ = ["MessageProcessor", "QueueWorker"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Errors of the queue's storage that are worth retrying in place (locked, busy, disk full, I/O).
_STORAGE_ERRORS: tuple[type[BaseException], ...] = (TransientError, sqlite3.OperationalError, OSError)


class MessageProcessor(Protocol):
    """What the worker needs of the memory service."""

    async def process_message(self, body: bytes | str | Mapping[str, Any]) -> ProcessOutcome: ...

    async def prepare_messages(self, bodies: Sequence[bytes | str | Mapping[str, Any]]) -> Sequence[Any]:
        """What to pass to ``process_message`` as ``prepared`` for each body, worked out together
        ahead (``None``: nothing; the default prepares nothing). Never raises."""
        return [None] * len(bodies)


class QueueWorker(WorkerStatus):
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

    Its state, counts and health are those of :class:`~memory_core.runtime.worker_state.WorkerStatus`.
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
        super().__init__(name=name, clock=clock)
        self.batch = int(batch)
        self.queue = queue
        self.thread = thread
        self.processor = processor
        self.idle_seconds = idle_seconds
        self.backoff = backoff
        self.renew_locks = renew_locks
        self.retry_delay = retry_delay
        self._stop: asyncio.Event | None = None
        self._woken: asyncio.Event | None = None  # made by run(), in the loop it runs in

    # -- state ------------------------------------------------------------------------------------
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
        async with self._holding(held):
            try:
                await self._run_batch(messages, held, waiting)
            except asyncio.CancelledError:  # give the rest back now, on the loop: nothing may wait here
                self._give_back_now(waiting, head)
                raise
            except BaseException:  # a full disk, a storage error outside run(), a bug
                for message in waiting:
                    await self._queue_call(self._give_back, message, head)
                waiting.clear()
                raise
        try:
            while waiting:
                await self._queue_call(self._give_back, waiting[0], head)
                waiting.pop(0)
        except asyncio.CancelledError:
            self._give_back_now(waiting, head)
            raise

    async def _run_batch(
        self, messages: list[QueueMessage], held: list[QueueMessage], waiting: list[QueueMessage]
    ) -> None:
        """Handle the batch's messages in order until one does not settle (see :meth:`_handle_batch`);
        each leaves ``waiting`` as it is started and ``held`` as it is settled."""
        head = messages[0]
        prepared = await self._prepare(messages)
        for message, ahead in zip(messages, prepared, strict=True):
            if self._stop is not None and self._stop.is_set():
                break
            started = message if message is head else await self._begin(message)
            waiting.remove(message)  # _handle settles it, whatever happens
            if started is None:
                held.remove(message)
                break
            outcome = await self._handle(started, ahead, renew=False)
            held.remove(message)
            if outcome not in ("completed", "dead_lettered"):
                break

    async def _begin(self, message: QueueMessage) -> QueueMessage | None:
        """Start a message behind a batch's head; ``None`` when another receiver has it (and the session)."""
        try:
            return await self._queue_call(self.queue.begin, message)
        except LockLostError as exc:
            self.stats.lock_lost += 1
            logger.warning(
                "%s: %s; the rest of its batch is given back", self.name, redact(exc, session_id=message.session_id)
            )
            return None

    def _give_back_now(self, waiting: list[QueueMessage], head: QueueMessage) -> None:
        """Give back the batch's unstarted messages here, on the loop (when cancelled)."""
        for message in waiting:
            self._give_back(message, head)
        waiting.clear()

    def _give_back(self, message: QueueMessage, head: QueueMessage) -> None:
        give_back(self.queue, message, counted=message is head, name=self.name)

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
            logger.warning(
                "%s: %s preparations for %s messages; ignored", self.name, len(prepared), len(messages)
            )
            return [None] * len(messages)
        return prepared

    async def _handle(self, message: QueueMessage, prepared: Any = None, *, renew: bool = True) -> str:
        """Process and settle one message; returns ``completed``, ``dead_lettered``, ``abandoned`` or
        ``unsettled`` (its lock was lost, or settling it could not finish)."""
        async with self._holding([message], renew=renew):
            try:
                await self._process(message, prepared)
            except asyncio.CancelledError:
                self._release_on_shutdown(message)
                raise
            except (StorageFullError, DamagedFileError) as exc:  # the machine's fault: never the message's
                await self._wait_for_disk(message, exc)
                raise
            except PermanentError as exc:
                return await self._dead_letter(message, exc)
            except Exception as exc:
                return await self._retry_later(message, exc)
            if await self._settle(self.queue.complete, message):
                self.stats.completed += 1
                return "completed"
            return "unsettled"

    async def _process(self, message: QueueMessage, prepared: Any) -> None:
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

    def _release_on_shutdown(self, message: QueueMessage) -> None:
        """Abandon a message whose processing was cancelled, here and now (it is delivered again)."""
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
                session_tag(message.session_id),
            )

    async def _wait_for_disk(self, message: QueueMessage, exc: StorageFullError | DamagedFileError) -> None:
        """Give a message back without counting its delivery when the disk is full (or the store file
        is damaged: it waits until the file is restored).

        The machine's fault, not the message's: a long disk-full episode never dead-letters a turn, and
        run() backs off as after a queue error (growing delays; health shows the worker backing off).
        """
        logger.warning(
            "%s: message %s (session %s) waits for disk space: %s: %s",
            self.name,
            message.message_id,
            session_tag(message.session_id),
            type(exc).__name__,
            redact(exc, session_id=message.session_id),
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

    async def _dead_letter(self, message: QueueMessage, exc: PermanentError) -> str:
        reason = type(exc).__name__
        logger.warning(
            "%s: dead-lettered message %s (session %s, delivery %s): %s: %s",
            self.name,
            message.message_id,
            session_tag(message.session_id),
            message.delivery_count,
            reason,
            redact(exc, session_id=message.session_id),
        )
        if await self._settle(self.queue.dead_letter, message, reason=reason, description=str(exc)):
            self.stats.dead_lettered += 1
            telemetry.record_dead_letter(reason, message_id=message.message_id)
            return "dead_lettered"
        return "unsettled"

    async def _retry_later(self, message: QueueMessage, exc: Exception) -> str:
        delay = self.backoff(message.delivery_count)
        logger.warning(
            "%s: message %s (session %s) failed on delivery %s/%s, retrying in %.1fs: %s: %s",
            self.name,
            message.message_id,
            session_tag(message.session_id),
            message.delivery_count,
            self.queue.max_deliveries,
            delay,
            type(exc).__name__,
            redact(exc, session_id=message.session_id),
        )
        if await self._settle(
            self.queue.abandon, message, error=f"{type(exc).__name__}: {exc}", delay_seconds=delay
        ):
            self.stats.abandoned += 1
        return "abandoned"

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

    def _holding(self, held: list[QueueMessage], *, renew: bool = True) -> AbstractAsyncContextManager[None]:
        """Keep the locks of ``held`` while the block runs (when the worker renews locks)."""
        return locks_kept(
            self.queue, held, call=self._queue_call, name=self.name, renew=self.renew_locks and renew
        )
