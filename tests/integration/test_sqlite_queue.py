"""The embedded SQLite queue: duplicate detection, per-session FIFO, peek-lock, dead-lettering, workers."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.adapters.sqlite.queue_delivery import MAX_DELIVERY_REASON
from memory_core.adapters.sqlite.queue_messages import LockLostError
from memory_core.domain.messages import RecallUpdate, Turn, message_id_for, session_id_for
from memory_core.domain.records import Scope
from memory_core.errors import TransientError, ValidationError
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
    return SQLiteQueue(
        tmp_path / "q.db", lock_seconds=10, max_deliveries=3, duplicate_window_seconds=60, clock=clock
    )


def test_duplicate_ids_are_dropped_within_the_window(queue: SQLiteQueue, clock: FakeTime) -> None:
    assert queue.send(b"one", message_id="m1", session_id="s")
    assert not queue.send(b"again", message_id="m1", session_id="s")
    message = queue.receive()
    assert message is not None and message.body == b"one"
    queue.complete(message)
    assert not queue.send(b"after completion", message_id="m1", session_id="s")  # still remembered
    clock.now += 61
    assert queue.send(b"later", message_id="m1", session_id="s")  # the window has passed
    assert queue.stats().active == 1


def test_one_session_is_fifo_and_one_at_a_time_while_others_proceed(queue: SQLiteQueue) -> None:
    for i in range(3):
        queue.send(f"a{i}", message_id=f"a{i}", session_id="A")
    queue.send("b0", message_id="b0", session_id="B")
    first = queue.receive()
    second = queue.receive()
    assert (first and first.message_id, second and second.message_id) == ("a0", "b0")
    assert queue.receive() is None  # a1 waits for a0; B is empty
    assert first is not None
    queue.complete(first)
    nxt = queue.receive()
    assert nxt is not None and nxt.message_id == "a1"
    queue.abandon(nxt, error="try again")
    again = queue.receive()
    assert again is not None and again.message_id == "a1" and again.delivery_count == 2  # still the head
    assert again.last_error == "try again"


def test_lock_timeout_redelivers_with_the_delivery_count(queue: SQLiteQueue, clock: FakeTime) -> None:
    queue.send("x", message_id="x", session_id="S")
    queue.send("y", message_id="y", session_id="S")
    first = queue.receive()
    assert first is not None and first.delivery_count == 1
    clock.now += 5
    assert queue.receive() is None  # locked, and y is behind it
    clock.now += 5.01
    second = queue.receive()
    assert second is not None and second.message_id == "x" and second.delivery_count == 2
    with pytest.raises(LockLostError):
        queue.complete(first)  # the old receiver lost its lock
    renewed = queue.renew_lock(second)
    assert renewed.locked_until == pytest.approx(clock.now + 10)
    queue.complete(second)
    third = queue.receive()
    assert third is not None and third.message_id == "y"


def test_dead_letter_after_max_deliveries_with_the_reason(queue: SQLiteQueue, clock: FakeTime) -> None:
    queue.send("poison", message_id="p", session_id="S")
    queue.send("next", message_id="n", session_id="S")
    for attempt in range(1, 4):
        message = queue.receive()
        assert message is not None and message.message_id == "p" and message.delivery_count == attempt
        queue.abandon(message, error=f"TransientError: attempt {attempt}")
    message = queue.receive()
    assert message is not None and message.message_id == "n"  # p was moved aside, n is free
    [dead] = queue.dead_letters()
    assert dead.message_id == "p" and dead.dead_letter_reason == MAX_DELIVERY_REASON
    assert dead.delivery_count == 3 and "attempt 3" in (dead.dead_letter_description or "")
    assert queue.stats().as_dict() == {"active": 1, "locked": 1, "dead_letters": 1, "sessions": 1}


def test_explicit_dead_letter_requeue_and_purge(queue: SQLiteQueue) -> None:
    queue.send("bad", message_id="bad", session_id="S")
    queue.send("good", message_id="good", session_id="S")
    bad = queue.receive()
    assert bad is not None
    queue.dead_letter(bad, reason="ValidationError", description="schema: unsupported")
    [dead] = queue.dead_letters()
    assert (dead.dead_letter_reason, dead.dead_letter_description) == (
        "ValidationError",
        "schema: unsupported",
    )
    with pytest.raises(LockLostError):
        queue.complete(bad)
    requeued = queue.requeue("bad")
    assert requeued.delivery_count == 0 and requeued.state == "active" and requeued.seq > dead.seq
    assert [m.message_id for m in queue.peek()] == ["good", "bad"]  # at the end of its session
    with pytest.raises(ValidationError):
        queue.requeue("bad")  # no longer a dead letter
    good = queue.receive()
    assert good is not None
    queue.complete(good)
    again = queue.receive()
    assert again is not None
    queue.dead_letter(again, reason="ValidationError", description="still bad")
    assert queue.purge_dead_letters() == 1 and queue.dead_letters() == []


def test_messages_and_locks_survive_reopening(tmp_path: Path, clock: FakeTime) -> None:
    path = tmp_path / "q.db"
    first = SQLiteQueue(path, lock_seconds=10, clock=clock)
    first.send("a", message_id="a", session_id="S")
    first.send("b", message_id="b", session_id="S")
    assert first.receive() is not None
    first.close_sync()  # as if the process died holding the lock
    second = SQLiteQueue(path, lock_seconds=10, clock=clock)
    assert second.receive() is None
    clock.now += 11
    message = second.receive()
    assert message is not None and message.message_id == "a" and message.delivery_count == 2


def test_publisher_port_uses_turn_and_recall_ids_and_the_scope_session(queue: SQLiteQueue) -> None:
    turn = Turn(
        turn_id="t-1",
        user_id="u1",
        agent_id="a1",
        occurred_at="2026-05-01T09:00:00Z",
        messages=[{"role": "user", "text": "hi"}],
    )
    recall = RecallUpdate(user_id="u1", agent_id="a1", memory_ids=["m1"], at="2026-05-01T09:00:00Z")

    other_user = turn.model_copy(update={"user_id": "u2"})

    async def publish() -> list[bool]:
        sent = [await queue.publish_turn(turn), await queue.publish_turn(turn)]  # a retry is a duplicate
        sent.append(await queue.publish_turn(other_user))  # the same id in another scope is not
        await queue.publish_recall(recall)
        return sent

    assert asyncio.run(publish()) == [True, False, True]
    messages = queue.peek()
    scope = Scope.of("u1", "a1")
    session = session_id_for(scope)
    assert [(m.message_id, m.session_id, m.subject) for m in messages] == [
        (message_id_for(scope, "turn", "t-1"), session, "turn"),
        (message_id_for(Scope.of("u2", "a1"), "turn", "t-1"), session_id_for(Scope.of("u2", "a1")), "turn"),
        (message_id_for(scope, "recall", recall.recall_id), session, "recall"),
    ]
    assert json.loads(messages[0].body)["schema"] == "memory-core.turn.v1"


def test_concurrent_receivers_never_overlap_a_session_and_run_sessions_in_parallel(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    producer = SQLiteQueue(path)
    sessions, per_session = 8, 15
    for i in range(per_session):
        for s in range(sessions):
            producer.send(f"{s}:{i}", message_id=f"m{s}-{i}", session_id=f"s{s}")
    spans: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    guard = threading.Lock()
    busy = {"now": 0, "max": 0}

    def consume() -> None:
        q = SQLiteQueue(path)  # one connection per receiver, like separate processes
        idle = 0
        while idle < 20:
            message = q.receive()
            if message is None:
                idle += 1
                time.sleep(0.005)
                continue
            idle = 0
            session, index = message.body.decode().split(":")
            with guard:
                busy["now"] += 1
                busy["max"] = max(busy["max"], busy["now"])
            start = time.monotonic()
            time.sleep(0.004)
            end = time.monotonic()
            with guard:
                busy["now"] -= 1
                spans[session].append((int(index), start, end))
            q.complete(message)
        q.close_sync()

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert producer.stats().active == 0
    for session, items in spans.items():
        assert [i for i, _, _ in items] == list(range(per_session)), session  # in order, each once
        for (_, _, end), (_, start, _) in itertools.pairwise(items):
            assert start >= end, f"two messages of session {session} overlapped"
    assert busy["max"] >= 2  # different sessions were processed at the same time


# -- the worker ---------------------------------------------------------------------------------
class FakeProcessor(MessageProcessor):
    """The memory service as the worker sees it: records what it processed; scripted failures;
    async sleeps to make overlap visible."""

    def __init__(self, fail: dict[str, list[BaseException]] | None = None, delay: float = 0.0) -> None:
        self.fail = fail or {}
        self.delay = delay
        self.log: list[tuple[str, str, float, float]] = []
        self.active: dict[str, int] = defaultdict(int)
        self.overlap_in_session = False
        self.max_parallel = 0
        self._running = 0

    async def process_message(self, body: Any) -> ProcessOutcome:
        data = json.loads(body)
        if data.get("schema") != "memory-core.turn.v1":
            raise ValidationError(
                "schema", f"{data.get('schema')!r} is not a message this pipeline understands"
            )
        key, session = data["turn_id"], data["user_id"]
        if self.fail.get(key):
            raise self.fail[key].pop(0)
        self.active[session] += 1
        self._running += 1
        self.max_parallel = max(self.max_parallel, self._running)
        self.overlap_in_session |= self.active[session] > 1
        start = time.monotonic()
        await asyncio.sleep(self.delay)
        self._running -= 1
        self.active[session] -= 1
        self.log.append((session, key, start, time.monotonic()))
        return ProcessOutcome("turn", key, "ingested")


def _send_turn(queue: SQLiteQueue, user: str, turn_id: str) -> None:
    body = {"schema": "memory-core.turn.v1", "turn_id": turn_id, "user_id": user}
    queue.send(json.dumps(body), message_id=turn_id, session_id=user)


def test_worker_completes_dead_letters_permanent_errors_and_retries_transient_ones(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db", max_deliveries=5)
    _send_turn(queue, "u1", "t1")
    _send_turn(queue, "u1", "t2")
    queue.send(b'{"schema": "memory-core.unknown"}', message_id="poison", session_id="u2")
    processor = FakeProcessor(fail={"t1": [TransientError("throttled"), TransientError("throttled")]})
    worker = QueueWorker(queue, processor, backoff=lambda n: 0.0)

    async def run() -> None:
        await worker.drain()

    asyncio.run(run())
    assert [key for _, key, _, _ in processor.log] == ["t1", "t2"]  # t2 waited for t1's retries
    [dead] = queue.dead_letters()
    assert dead.message_id == "poison" and dead.dead_letter_reason == "ValidationError"
    assert "memory-core.unknown" in (dead.dead_letter_description or "")
    assert worker.stats.as_dict() == {"completed": 2, "dead_lettered": 1, "abandoned": 2, "lock_lost": 0}


def test_worker_gives_up_after_max_deliveries(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db", max_deliveries=3)
    _send_turn(queue, "u1", "t1")
    processor = FakeProcessor(fail={"t1": [RuntimeError("bug") for _ in range(10)]})
    asyncio.run(QueueWorker(queue, processor, backoff=lambda n: 0.0).drain())
    [dead] = queue.dead_letters()
    assert dead.dead_letter_reason == MAX_DELIVERY_REASON and "RuntimeError: bug" in (
        dead.dead_letter_description or ""
    )


def test_several_workers_keep_each_scope_in_order_and_scopes_in_parallel(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db")
    users = [f"u{i}" for i in range(4)]
    for n in range(6):
        for user in users:
            _send_turn(queue, user, f"{user}-t{n}")
    processor = FakeProcessor(delay=0.01)

    async def run() -> None:
        stop = asyncio.Event()
        workers = [QueueWorker(queue, processor, name=f"w{i}", idle_seconds=0.01) for i in range(4)]
        tasks = [asyncio.create_task(w.run(stop)) for w in workers]
        while queue.stats().active:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())
    for user in users:
        assert [key for session, key, _, _ in processor.log if session == user] == [
            f"{user}-t{n}" for n in range(6)
        ]
    assert not processor.overlap_in_session
    assert processor.max_parallel >= 2  # different scopes progressed at the same time


def test_a_cancelled_worker_releases_its_message(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.db")
    _send_turn(queue, "u1", "t1")
    processor = FakeProcessor(delay=5)

    async def run() -> None:
        task = asyncio.create_task(QueueWorker(queue, processor).run_once())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    message = queue.receive()  # released at once, not after the lock expires
    assert message is not None and message.delivery_count == 2
