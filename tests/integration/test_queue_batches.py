"""A worker takes several messages of one session at once (``serve --batch N``): the queue locks the
session's head and the messages right behind it, the worker prepares their turns together, then
processes and settles them one by one, in order; whatever stops the batch gives the rest back
unprocessed, without counting a delivery, so the session keeps its order and nothing is lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.adapters.sqlite.queue_messages import LockLostError
from memory_core.errors import DamagedFileError, StorageFullError, TransientError, ValidationError
from memory_core.runtime.worker import MessageProcessor, QueueWorker
from memory_core.service import ProcessOutcome


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


@pytest.fixture
def queue(tmp_path: Path, clock: FakeTime) -> SQLiteQueue:
    return SQLiteQueue(tmp_path / "q.db", lock_seconds=10, max_deliveries=3, clock=clock)


def send(queue: SQLiteQueue, session: str, key: str) -> None:
    body = {"schema": "memory-core.turn.v1", "turn_id": key, "user_id": session}
    queue.send(json.dumps(body), message_id=key, session_id=session)


def keys(messages: Sequence[Any]) -> list[str]:
    return [m.message_id for m in messages]


# -- the queue ------------------------------------------------------------------------------------
def test_a_batch_is_the_sessions_head_and_the_messages_behind_it(queue: SQLiteQueue) -> None:
    for i in range(5):
        send(queue, "A", f"a{i}")
    send(queue, "B", "b0")
    batch = queue.receive_batch(max_messages=3)
    assert keys(batch) == ["a0", "a1", "a2"]
    assert all(m.lock_token for m in batch) and len({m.lock_token for m in batch}) == 3  # settled one by one
    # only the head counts its delivery now; the others when they are begun
    assert [m.delivery_count for m in batch] == [1, 0, 0]
    # the session is held while any of them is: another receiver gets the next session
    assert keys(queue.receive_batch(max_messages=3)) == ["b0"]
    assert queue.receive_batch(max_messages=3) == []
    queue.complete(batch[0])
    begun = queue.begin(batch[1])
    assert begun.delivery_count == 1 and [m.delivery_count for m in queue.peek()[:2]] == [1, 0]
    queue.complete(begun)
    assert queue.receive() is None  # a2 still locked: a3 waits behind it
    queue.complete(queue.begin(batch[2]))
    assert keys(queue.receive_batch(max_messages=10)) == ["a3", "a4"]


def test_a_batch_stops_before_a_delayed_or_locked_message(queue: SQLiteQueue, clock: FakeTime) -> None:
    for i in range(4):
        send(queue, "A", f"a{i}")
    first = queue.receive_batch(max_messages=4)
    queue.abandon(first[0], count_delivery=False)  # the head given back unstarted
    queue.release(first[1])  # the others too, their counts as they were
    queue.release(first[3])
    # a2 is still locked (a receiver holds it): a batch from a0 stops before it
    assert keys(again := queue.receive_batch(max_messages=4)) == ["a0", "a1"]
    assert [m.delivery_count for m in again] == [1, 0]
    clock.now += 11  # every lock has expired
    again = queue.receive_batch(max_messages=4)
    assert keys(again) == ["a0", "a1", "a2", "a3"]
    assert [m.delivery_count for m in again] == [2, 0, 0, 0]
    # a message given back with a delay holds the batch behind it
    queue.complete(again[0])
    queue.complete(queue.begin(again[1]))
    queue.abandon(queue.begin(again[2]), error="throttled", delay_seconds=5)
    queue.release(again[3])
    assert queue.receive_batch(max_messages=4) == []  # a2 waits out its delay; a3 behind it
    clock.now += 6
    assert keys(queue.receive_batch(max_messages=4)) == ["a2", "a3"]


def test_a_receiver_that_dies_holding_a_batch_costs_the_unstarted_messages_nothing(
    queue: SQLiteQueue, clock: FakeTime
) -> None:
    for i in range(4):
        send(queue, "A", f"a{i}")
    for _ in range(3):  # killed three times while on a0 (max_deliveries 3): the locks expire
        assert keys(queue.receive_batch(max_messages=4)) == ["a0", "a1", "a2", "a3"]
        clock.now += 11
    # a0 goes to the dead-letter queue; the messages behind it were never started and go on
    again = queue.receive_batch(max_messages=4)
    assert keys(again) == ["a1", "a2", "a3"] and [m.delivery_count for m in again] == [1, 0, 0]
    assert [d.message_id for d in queue.dead_letters()] == ["a0"]


def test_a_message_whose_lock_was_lost_cannot_be_begun_or_released(queue: SQLiteQueue, clock: FakeTime) -> None:
    for i in range(3):
        send(queue, "A", f"a{i}")
    batch = queue.receive_batch(max_messages=3)
    queue.complete(batch[0])
    clock.now += 11  # the receiver stalled: its locks expired and another receiver took the session
    other = queue.receive_batch(max_messages=3)
    assert keys(other) == ["a1", "a2"]
    with pytest.raises(LockLostError):
        queue.begin(batch[1])
    with pytest.raises(LockLostError):
        queue.release(batch[2])
    assert [m.delivery_count for m in queue.peek()] == [1, 0]  # the other receiver's


def test_a_head_due_for_the_dead_letter_queue_goes_there_and_the_batch_starts_behind_it(
    queue: SQLiteQueue,
) -> None:
    send(queue, "A", "a0")
    for _ in range(3):  # a0 is received and fails three times (max_deliveries 3)
        [head] = queue.receive_batch(max_messages=4)
        queue.abandon(head)
    send(queue, "A", "a1")
    send(queue, "A", "a2")
    assert keys(queue.receive_batch(max_messages=4)) == ["a1", "a2"]
    [dead] = queue.dead_letters()
    assert dead.message_id == "a0"


def test_a_batch_size_below_one_is_refused(queue: SQLiteQueue) -> None:
    with pytest.raises(ValidationError, match="max_messages"):
        queue.receive_batch(max_messages=0)
    with pytest.raises(ValueError, match="batch"):
        QueueWorker(queue, Recorder(), batch=0)


# -- the worker -----------------------------------------------------------------------------------
class Recorder(MessageProcessor):
    """Records what was prepared together and what was processed (with what was prepared for it);
    scripted failures; a delay per message to make a stop or a cancellation land mid-batch."""

    def __init__(self, fail: dict[str, list[BaseException]] | None = None, delay: float = 0.0) -> None:
        self.fail = fail or {}
        self.delay = delay
        self.prepared: list[list[str]] = []
        self.processed: list[tuple[str, Any]] = []
        self.started = asyncio.Event()

    async def prepare_messages(self, bodies: Sequence[bytes | str | Mapping[str, Any]]) -> list[Any]:
        names = [json.loads(b)["turn_id"] for b in bodies]  # type: ignore[arg-type]
        self.prepared.append(names)
        return [f"ahead:{name}" for name in names]

    async def process_message(self, body: Any, prepared: Any = None) -> ProcessOutcome:
        key = json.loads(body)["turn_id"]
        self.started.set()
        if self.fail.get(key):
            raise self.fail[key].pop(0)
        await asyncio.sleep(self.delay)
        self.processed.append((key, prepared))
        return ProcessOutcome("turn", key, "ingested")


def test_a_worker_prepares_a_sessions_messages_together_and_processes_them_in_order(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db")
    for i in range(5):
        send(queue, "A", f"a{i}")
    send(queue, "B", "b0")
    recorder = Recorder()
    worker = QueueWorker(queue, recorder, batch=3, renew_locks=False)
    assert asyncio.run(worker.drain()) == 3  # three receptions: a0-a2, a3-a4, b0
    assert recorder.prepared == [["a0", "a1", "a2"], ["a3", "a4"]]  # b0 came alone: nothing to prepare
    assert recorder.processed == [
        ("a0", "ahead:a0"),
        ("a1", "ahead:a1"),
        ("a2", "ahead:a2"),
        ("a3", "ahead:a3"),
        ("a4", "ahead:a4"),
        ("b0", None),
    ]
    assert queue.stats().active == 0 and worker.stats.completed == 6


def test_a_failure_mid_batch_gives_the_rest_back_and_the_session_keeps_its_order(
    tmp_path: Path,
) -> None:
    queue = SQLiteQueue(tmp_path / "q.db", max_deliveries=5)
    for i in range(4):
        send(queue, "A", f"a{i}")
    send(queue, "A", "poison")
    queue.send(b'{"schema": "memory-core.turn.v1", "turn_id": "a5", "user_id": "A"}', message_id="a5", session_id="A")
    recorder = Recorder(
        fail={"a1": [TransientError("throttled")], "poison": [ValidationError("body", "is poison")]}
    )
    worker = QueueWorker(queue, recorder, batch=8, backoff=lambda n: 0.0, renew_locks=False)
    asyncio.run(worker.drain())
    # a1 failed: a2 and a3 were given back unprocessed and came after a1's retry, in order; the poison
    # message was dead-lettered and the batch went on past it
    assert [key for key, _ in recorder.processed] == ["a0", "a1", "a2", "a3", "a5"]
    assert recorder.prepared[0] == ["a0", "a1", "a2", "a3", "poison", "a5"]
    [dead] = queue.dead_letters()
    assert dead.message_id == "poison" and dead.delivery_count == 1
    assert worker.stats.as_dict() == {"completed": 5, "dead_lettered": 1, "abandoned": 1, "lock_lost": 0}
    assert queue.stats().active == 0


def test_stopping_mid_batch_finishes_the_message_in_hand_and_gives_the_rest_back(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db")
    for i in range(4):
        send(queue, "A", f"a{i}")
    recorder = Recorder(delay=0.2)

    async def run() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(QueueWorker(queue, recorder, batch=4, idle_seconds=0.01).run(stop))
        await recorder.started.wait()
        stop.set()
        await task

    asyncio.run(run())
    assert [key for key, _ in recorder.processed] == ["a0"]
    rest = queue.peek()
    assert keys(rest) == ["a1", "a2", "a3"]
    assert all(m.locked_until is None and m.delivery_count == 0 for m in rest)  # not counted as delivered


def test_a_cancelled_worker_gives_its_batch_back(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db")
    for i in range(3):
        send(queue, "A", f"a{i}")
    recorder = Recorder(delay=5)

    async def run() -> None:
        task = asyncio.create_task(QueueWorker(queue, recorder, batch=3).run_once())
        await recorder.started.wait()
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    again = queue.receive_batch(max_messages=3)  # released at once, not after the locks expire
    assert keys(again) == ["a0", "a1", "a2"]
    assert [m.delivery_count for m in again] == [2, 0, 0]  # only a0 was being processed


def test_a_failed_preparation_still_processes_every_message(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db")
    for i in range(3):
        send(queue, "A", f"a{i}")

    class Broken(Recorder):
        async def prepare_messages(self, bodies: Sequence[bytes | str | Mapping[str, Any]]) -> list[Any]:
            raise RuntimeError("a bug in preparing")

    recorder = Broken()
    asyncio.run(QueueWorker(queue, recorder, batch=3, renew_locks=False).drain())
    assert recorder.processed == [("a0", None), ("a1", None), ("a2", None)]


def test_the_locks_of_a_batch_are_renewed_until_each_is_settled(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db", lock_seconds=0.2)
    for i in range(3):
        send(queue, "A", f"a{i}")
    recorder = Recorder(delay=0.3)  # each message outlives the lock; the batch three times over
    worker = QueueWorker(queue, recorder, batch=3)
    stolen: list[str] = []

    async def run() -> None:
        async def another_receiver() -> None:  # gets a message only if its lock was let expire
            while True:
                await asyncio.sleep(0.03)
                if (message := queue.receive()) is not None:
                    stolen.append(message.message_id)
                    queue.abandon(message, count_delivery=False)

        thief = asyncio.create_task(another_receiver())
        try:
            await worker.drain()
        finally:
            thief.cancel()

    asyncio.run(run())
    assert stolen == []
    assert [key for key, _ in recorder.processed] == ["a0", "a1", "a2"]
    assert worker.stats.as_dict() == {"completed": 3, "dead_lettered": 0, "abandoned": 0, "lock_lost": 0}


def test_a_message_taken_by_another_receiver_is_not_processed_nor_what_follows(tmp_path: Path) -> None:
    class Stalled(SQLiteQueue):
        """a1's lock was lost while a0 was processed (the worker stalled; another receiver took it)."""

        def begin(self, message: Any, *, lock_seconds: float | None = None) -> Any:
            if message.message_id == "a1":
                raise LockLostError("message 'a1' is no longer locked by this receiver")
            return super().begin(message, lock_seconds=lock_seconds)

    queue = Stalled(tmp_path / "q.db")
    for i in range(3):
        send(queue, "A", f"a{i}")
    recorder = Recorder()
    worker = QueueWorker(queue, recorder, batch=3, renew_locks=False)
    asyncio.run(worker.run_once())
    assert [key for key, _ in recorder.processed] == ["a0"]
    assert worker.stats.lock_lost == 1
    rest = queue.peek()
    assert keys(rest) == ["a1", "a2"]
    assert rest[1].locked_until is None and rest[1].delivery_count == 0  # a2 given back unstarted


@pytest.mark.parametrize(
    "error",
    [StorageFullError("q.db"), DamagedFileError("m.db", "database disk image is malformed")],
    ids=["disk-full", "damaged-store"],
)
def test_a_full_disk_mid_batch_gives_everything_back_without_counting(tmp_path: Path, error: Exception) -> None:
    """A full disk, or a store found damaged by a write: the machine's fault, never the turn's."""
    queue = SQLiteQueue(tmp_path / "q.db")
    for i in range(4):
        send(queue, "A", f"a{i}")
    recorder = Recorder(fail={"a1": [error]})
    worker = QueueWorker(queue, recorder, batch=4, renew_locks=False)
    with pytest.raises(type(error)):  # run() backs off on it; drain() raises it
        asyncio.run(worker.run_once())
    assert [key for key, _ in recorder.processed] == ["a0"]
    rest = queue.peek()
    assert keys(rest) == ["a1", "a2", "a3"]
    assert all(m.locked_until is None for m in rest)
    assert [m.delivery_count for m in rest] == [0, 0, 0]  # a1 waits for space; no delivery counted
