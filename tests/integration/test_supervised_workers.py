"""Supervised workers: queue faults do not stop ingestion, and ``/health`` tells the truth.

Regression (issue 16, item 2): an error while receiving or settling a message (disk full, the queue
file locked by another process beyond the busy timeout) ended the worker task for good while
``GET /api/health`` still said ok; accepted turns waited until the next restart.

Each test runs ``EmbeddedRuntime`` on real SQLite files and a real socket. Faults come from a
``SQLiteQueue`` subclass that fails on demand and records every delivery, or from a second ``sqlite3``
connection holding the queue file's write lock. The workers' state durations use a clock the test
advances, so the health thresholds are crossed on purpose, never by waiting.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import RunningRuntime, turn_body

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.queue_messages import QueueMessage
from memory_core.domain.messages import message_id_for, session_id_for
from memory_core.domain.records import Scope
from memory_core.entrypoints.embedded.host import EmbeddedRuntime
from memory_core.runtime.backoff import exponential_backoff
from memory_core.runtime.worker import QueueWorker

pytestmark = pytest.mark.fault  # part of the fault suite (issue 16)

FULL = "database or disk is full"
TOKEN = "a-token-of-at-least-16-characters"
FOODS = ["green tea", "coffee", "sushi", "ramen", "chocolate", "miso soup"]


class FakeClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FaultyQueue(SQLiteQueue):
    """A real queue whose receive, complete and dead-letter fail on demand; it records deliveries.

    ``receive_broken`` fails every receive while set (a disk-full episode); ``failures`` fails the next
    N calls of an operation. The failures are what SQLite raises when the disk is full.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receive_broken = threading.Event()
        self.failures: Counter[str] = Counter()
        self.received: list[str] = []
        self._faults = threading.Lock()

    def _fault(self, operation: str) -> None:
        with self._faults:
            if self.failures[operation] > 0:
                self.failures[operation] -= 1
                raise sqlite3.OperationalError(FULL)

    def receive_batch(self, *, max_messages: int, lock_seconds: float | None = None) -> list[QueueMessage]:
        if self.receive_broken.is_set():
            raise sqlite3.OperationalError(FULL)
        self._fault("receive")
        messages = super().receive_batch(max_messages=max_messages, lock_seconds=lock_seconds)
        self.received.extend(m.message_id for m in messages)
        return messages

    def complete(self, message: QueueMessage) -> None:
        self._fault("complete")
        super().complete(message)

    def dead_letter(self, message: QueueMessage, *, reason: str, description: str = "") -> None:
        self._fault("dead_letter")
        super().dead_letter(message, reason=reason, description=description)


class FaultyRuntime(EmbeddedRuntime):
    """The embedded runtime on a :class:`FaultyQueue` with a short busy timeout."""

    def build_queue(self) -> FaultyQueue:
        return FaultyQueue(
            self.queue_path,
            queue=self.settings.turns_queue,
            lock_seconds=self.options.lock_seconds,
            max_deliveries=self.options.max_deliveries,
            busy_timeout_seconds=0.05,
        )


class CrashingWorker(QueueWorker):
    """A worker whose loop has a bug: each of its next ``crashes`` runs dies at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.crashes = 2

    async def run(self, stop: asyncio.Event) -> None:
        if self.crashes > 0:
            self.crashes -= 1
            raise RuntimeError("a bug in the worker loop")
        await super().run(stop)


class CrashingRuntime(FaultyRuntime):
    worker_class = CrashingWorker


class Harness(RunningRuntime):
    """``RunningRuntime`` with another runtime class, a test clock and fast back-offs."""

    def __init__(
        self, db: Path, runtime_class: type[EmbeddedRuntime] = FaultyRuntime, **options: Any
    ) -> None:
        fast = {"retry_initial_seconds": 0.01, "retry_max_seconds": 0.05, "lock_seconds": 30.0}
        super().__init__(db, **{**fast, **options})
        self.clock = FakeClock()
        self.runtime = runtime_class(self.runtime.settings, self.runtime.options, clock=self.clock)

    @property
    def queue(self) -> FaultyQueue:
        queue = self.runtime.queue
        assert isinstance(queue, FaultyQueue)
        return queue

    def health(self, *, anonymous: bool = False) -> tuple[int, dict[str, Any]]:
        """``GET /api/health`` with the token (every fact), or without (the verdict): status code and body."""
        headers = {} if anonymous else {"Authorization": f"Bearer {TOKEN}"}
        reply = self.client.get("/api/health", headers=headers)
        return reply.status, reply.body

    def post_turn(self, body: dict[str, Any]) -> int:
        return self.client.post("/api/turns", body, headers={"Authorization": f"Bearer {TOKEN}"}).status


@contextmanager
def harness(
    db: Path, runtime_class: type[EmbeddedRuntime] = FaultyRuntime, **options: Any
) -> Iterator[Harness]:
    rt = Harness(db, runtime_class, **{"token": TOKEN, **options}).start()
    try:
        yield rt
    finally:
        rt.stop()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise TimeoutError(f"waited {timeout}s for {what}")


def make_turns(count: int) -> list[dict[str, Any]]:
    return [
        turn_body(i, f"I like {FOODS[i % len(FOODS)]}.", user=f"user{i % 2}", prefix="turn-")
        for i in range(count)
    ]


def turn_message_id(turn: dict[str, Any]) -> str:
    return message_id_for(Scope.of(turn["user_id"], turn["agent_id"]), "turn", turn["turn_id"])


def unprocessed(db: Path, turns: list[dict[str, Any]]) -> list[str]:
    """The turn ids the store's journal does not mark processed."""

    async def check() -> list[str]:
        history = SQLiteHistoryStore(db)
        try:
            return [
                t["turn_id"]
                for t in turns
                if not await history.turn_processed(Scope.of(t["user_id"], t["agent_id"]), t["turn_id"])
            ]
        finally:
            await history.close()

    return asyncio.run(check())


def test_the_retry_back_off_doubles_up_to_its_cap() -> None:
    delays = [exponential_backoff(n, initial=0.2, maximum=30.0) for n in range(1, 11)]
    assert delays == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0])
    assert exponential_backoff(0) == exponential_backoff(1) == 0.2
    assert exponential_backoff(10_000) == 30.0


def test_receive_errors_back_off_and_every_turn_accepted_meanwhile_is_processed_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memory_core.runtime.worker")
    db = tmp_path / "m.db"
    turns = make_turns(6)
    with harness(db) as rt:
        queue = rt.queue
        queue.receive_broken.set()  # the disk fills up
        wait_for(lambda: all(w.errors >= 2 for w in rt.runtime.workers), "both workers to retry the queue")
        for turn in turns:
            assert rt.post_turn(turn) == 202  # sending still works; only receiving fails

        status, body = rt.health()
        assert status == 200 and body["status"] == "ok"  # backing off, but not yet for long
        details = body["details"]
        assert details["ingestion"] == "ok"
        assert details["queue"]["active"] == len(turns) and details["queue"]["oldest_age_seconds"] >= 0
        for worker in details["workers"]:
            assert worker["state"] == "backing_off" and FULL in worker["last_error"]
            assert worker["errors"] >= 2 and worker["restarts"] == 0 and worker["processed"] == 0

        queue.receive_broken.clear()  # space again
        rt.drain()
        wait_for(lambda: all(w.state == "running" for w in rt.runtime.workers), "the workers to recover")
        status, body = rt.health()
        workers = body["details"]["workers"]
        assert status == 200 and body["details"]["ingestion"] == "ok"
        assert sum(w["processed"] for w in workers) == len(turns)
        assert all(w["consecutive_errors"] == 0 and w["last_error"] and w["failed"] == 0 for w in workers)
        assert body["details"]["queue"] == {
            "active": 0,
            "locked": 0,
            "dead_letters": 0,
            "sessions": 0,
            "oldest_age_seconds": None,
        }
        received = list(queue.received)
    assert Counter(received) == Counter(turn_message_id(t) for t in turns)  # each delivered once
    assert unprocessed(db, turns) == []
    assert f"the queue failed (error 1 in a row), retrying in 0.0s: OperationalError: {FULL}" in caplog.text
    assert "the queue works again after" in caplog.text


def test_settle_errors_are_retried_in_place_so_nothing_is_delivered_twice(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    turns = make_turns(4)
    with harness(db) as rt:
        queue = rt.queue
        queue.failures.update(complete=3, dead_letter=2)
        for turn in turns:
            assert rt.post_turn(turn) == 202
        queue.send(b"{not json", message_id="poison", session_id="elsewhere", subject="turn")
        rt.drain()
        wait_for(lambda: sum(w.stats.dead_lettered for w in rt.runtime.workers) == 1, "the dead letter")
        assert +queue.failures == Counter()  # every planned failure happened
        [dead] = queue.dead_letters()
        assert dead.message_id == "poison" and dead.delivery_count == 1
        workers = rt.health()[1]["details"]["workers"]
        assert sum(w["errors"] for w in workers) == 5
        assert sum(w["processed"] for w in workers) == len(turns)
        assert sum(w["failed"] for w in workers) == 1
        assert all(w.stats.lock_lost == 0 and w.restarts == 0 for w in rt.runtime.workers)
        received = list(queue.received)
    expected = Counter(turn_message_id(t) for t in turns)
    expected["poison"] = 1
    assert Counter(received) == expected  # completed after the retries, never delivered again
    assert unprocessed(db, turns) == []


def test_a_worker_task_that_dies_is_restarted_and_the_turns_are_processed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memory_core.entrypoints.embedded.host")
    db = tmp_path / "m.db"
    turns = make_turns(4)
    with harness(db, CrashingRuntime, workers=2) as rt:
        for turn in turns:
            assert rt.post_turn(turn) == 202
        rt.drain()
        # A restarted worker is counted before its loop runs again: wait for both.
        wait_for(
            lambda: all(w.restarts == 2 and w.state == "running" for w in rt.runtime.workers),
            "both restarts of each worker, running again",
        )
        workers = rt.health()[1]["details"]["workers"]
        assert [w["restarts"] for w in workers] == [2, 2]
        assert all(w["state"] == "running" for w in workers)
        assert all(w["last_error"] == "crashed: RuntimeError: a bug in the worker loop" for w in workers)
        assert sum(w["processed"] for w in workers) == len(turns)
        received = list(rt.queue.received)
    assert Counter(received) == Counter(turn_message_id(t) for t in turns)
    assert unprocessed(db, turns) == []
    assert "worker-1: the task died (crash 1 in a row)" in caplog.text
    assert "worker-1: the task died (crash 2 in a row)" in caplog.text
    assert "worker-1: restarted after 2 crash(es) in a row" in caplog.text


def test_a_crash_loop_makes_health_unhealthy_until_the_worker_runs_again(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with harness(db, CrashingRuntime, workers=1, stalled_after_seconds=60) as rt:
        [worker] = rt.runtime.workers
        assert isinstance(worker, CrashingWorker)
        worker.crashes = 10**9  # crashes every time it starts
        wait_for(lambda: worker.restarts >= 3, "a few restarts")
        assert rt.post_turn(make_turns(1)[0]) == 202
        rt.clock.advance(61)
        status, body = rt.health()
        assert status == 503 and body["status"] == "unhealthy"
        assert body["details"]["workers"][0]["state"] == "backing_off"
        assert "crashed: RuntimeError" in body["details"]["problem"]
        worker.crashes = 0  # the next restart works
        rt.drain()
        wait_for(lambda: rt.health()[0] == 200, "health to recover")
        assert rt.health()[1]["details"]["workers"][0]["state"] == "running"


def test_health_turns_503_when_ingestion_has_stopped_and_200_after_recovery(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with harness(db, workers=2, stalled_after_seconds=60) as rt:
        queue = rt.queue
        queue.receive_broken.set()
        wait_for(
            lambda: all(w.state == "backing_off" for w in rt.runtime.workers), "both workers to back off"
        )
        rt.clock.advance(61)

        # Backing off for longer than the threshold, but nothing waits: nothing is stalled.
        status, body = rt.health()
        assert status == 200 and body["details"]["ingestion"] == "ok"
        assert all(w["state_seconds"] >= 61 for w in body["details"]["workers"])

        turn = make_turns(1)[0]
        assert rt.post_turn(turn) == 202
        status, body = rt.health(anonymous=True)  # no token: health stays open, with the verdict only
        assert status == 503 and body["status"] == "unhealthy" and body["details"] == {"ingestion": "stopped"}
        status, body = rt.health()
        assert status == 503 and body["status"] == "unhealthy"
        details = body["details"]
        assert details["ingestion"] == "stopped"
        assert "1 message(s) wait" in details["problem"] and FULL in details["problem"]
        assert details["queue"]["active"] == 1 and details["queue"]["oldest_age_seconds"] >= 0
        assert [w["state"] for w in details["workers"]] == ["backing_off", "backing_off"]
        assert all(FULL in w["last_error"] and w["since"].endswith("Z") for w in details["workers"])
        assert rt.client.get("/api/memories?user_id=user0&agent_id=a1").status == 401  # the rest is guarded

        queue.receive_broken.clear()
        rt.drain()
        wait_for(lambda: rt.health()[0] == 200, "health to recover")
        status, body = rt.health()
        assert body["status"] == "ok" and body["details"]["ingestion"] == "ok"
        assert sum(w["processed"] for w in body["details"]["workers"]) == 1
        received = list(queue.received)
    assert received == [turn_message_id(turn)]
    assert unprocessed(db, [turn]) == []


def test_a_foreign_write_lock_held_past_the_busy_timeout_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    turns = make_turns(6)
    early, late = turns[:5], turns[5]
    producer = SQLiteQueue(default_queue_path(db))
    for turn in early:  # accepted before the lock: waiting when the workers start
        scope = Scope.of(turn["user_id"], turn["agent_id"])
        producer.send(
            json.dumps(turn),
            message_id=turn_message_id(turn),
            session_id=session_id_for(scope),
            subject="turn",
        )
    producer.close_sync()
    foreign = sqlite3.connect(default_queue_path(db), isolation_level=None)
    try:
        foreign.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with harness(db, workers=2) as rt:
            wait_for(lambda: all(w.errors >= 2 for w in rt.runtime.workers), "both workers to hit the lock")
            status, body = rt.health()
            assert status == 200
            for worker in body["details"]["workers"]:
                assert worker["state"] == "backing_off" and "database is locked" in worker["last_error"]
            assert body["details"]["queue"]["active"] == len(early)

            reply = rt.client.post("/api/turns", late, headers={"Authorization": f"Bearer {TOKEN}"})
            assert reply.status == 503 and reply.headers.get("retry-after")  # the client retries later

            foreign.execute("ROLLBACK")  # the lock is released
            assert rt.post_turn(late) == 202
            rt.drain()
            wait_for(lambda: all(w.state == "running" for w in rt.runtime.workers), "the workers to recover")
            # A message leaves the queue before its worker counts it: wait for the count, not just the queue.
            wait_for(lambda: sum(w.stats.completed for w in rt.runtime.workers) == len(turns), "every turn counted")
            assert all(w.restarts == 0 for w in rt.runtime.workers)
            received = list(rt.queue.received)
    finally:
        foreign.close()
    assert Counter(received) == Counter(turn_message_id(t) for t in turns)
    assert unprocessed(db, turns) == []
