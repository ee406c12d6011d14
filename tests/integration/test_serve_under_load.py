"""``memory-core serve`` under load and under a foreign lock: recall updates folded, the loop never frozen."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from runtime_helpers import running, turn_body

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.domain.messages import MAX_RECALL_IDS, RecallUpdate, session_id_for
from memory_core.domain.records import Scope
from memory_core.tools.bench.serve import measure

AT = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
SCOPE = Scope.of("u1", "a1")


def _recall(ids: list[str], minutes: int = 0, user: str = "u1") -> RecallUpdate:
    return RecallUpdate(user_id=user, agent_id="a1", memory_ids=ids, at=AT + timedelta(minutes=minutes))


def _publish(queue: SQLiteQueue, update: RecallUpdate) -> None:
    asyncio.run(queue.publish_recall(update))


def _bodies(queue: SQLiteQueue) -> list[tuple[str, RecallUpdate | None]]:
    out: list[tuple[str, RecallUpdate | None]] = []
    for message in queue.peek(limit=100):
        update = RecallUpdate.model_validate_json(message.body) if message.subject == "recall" else None
        out.append((message.subject, update))
    return out


# -- the queue folds a recall update into a waiting one ----------------------------------------------
def test_a_recall_update_folds_into_the_one_waiting_in_its_session(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.queue")
    try:
        _publish(queue, _recall(["m1", "m2"]))
        _publish(queue, _recall(["m2", "m3"], minutes=3))
        _publish(queue, _recall(["x"], user="u2"))  # another scope: its own message
        messages = _bodies(queue)
        assert [subject for subject, _ in messages] == ["recall", "recall"]
        first = messages[0][1]
        assert first is not None and first.memory_ids == ["m1", "m2", "m3"] and first.at == AT + timedelta(minutes=3)
        assert queue.coalesced_recalls == 1
    finally:
        queue.close_sync()


def test_a_recall_update_held_by_a_worker_or_full_is_not_changed(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.queue")
    try:
        _publish(queue, _recall(["m1"]))
        held = queue.receive()
        assert held is not None
        _publish(queue, _recall(["m2"]))  # the first is in a worker's hands
        _publish(queue, _recall([f"n{i}" for i in range(MAX_RECALL_IDS - 1)]))  # folds into m2's
        _publish(queue, _recall(["last-1", "last-2"]))  # would pass the limit: queued anew
        updates = [u for _, u in _bodies(queue) if u is not None]
        assert [len(u.memory_ids) for u in updates] == [1, MAX_RECALL_IDS, 2]
        assert updates[0].memory_ids == ["m1"] and updates[1].memory_ids[0] == "m2"
    finally:
        queue.close_sync()


def test_folding_can_be_switched_off(tmp_path: Path) -> None:
    queue = SQLiteQueue(tmp_path / "q.queue", coalesce_recalls=False)
    try:
        _publish(queue, _recall(["m1"]))
        _publish(queue, _recall(["m1"]))
        assert len(queue.peek()) == 2
    finally:
        queue.close_sync()


# -- the runtime ---------------------------------------------------------------------------------------
def test_many_searches_reinforce_a_memory_once_per_window(tmp_path: Path) -> None:
    with running(tmp_path / "memory.db", recall_window_seconds=0.3) as rt:
        client = rt.client
        assert client.post("/api/turns", turn_body(0, "I like green tea.")).status == 202
        rt.drain()
        for _ in range(5):
            reply = client.post("/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "green tea"})
            assert reply.status == 200 and reply.body["hits"]
        memory_id = reply.body["hits"][0]["memory"]["id"]
        time.sleep(1.0)  # the window passes; the gathered update is queued
        rt.drain()
        detail = client.get(f"/api/memories/{memory_id}?user_id=u1&agent_id=a1").body
        assert detail["access_count"] == 1  # five searches within the window: one rehearsal
        health = client.get("/api/health").body
        assert health["status"] == "ok"


@pytest.mark.fault
@pytest.mark.parametrize("held", ["queue", "store"])
def test_a_foreign_write_lock_stalls_no_request_but_the_ones_that_must_write(tmp_path: Path, held: str) -> None:
    """Issue 16 case 3: a write lock held by another process froze the whole server (health took 10 s)."""
    db = tmp_path / "memory.db"
    with running(db) as rt:
        client = rt.client
        assert client.post("/api/turns", turn_body(0, "I like green tea.")).status == 202
        rt.drain()
        path = f"{db}.queue" if held == "queue" else str(db)
        with closing(sqlite3.connect(path, timeout=1, isolation_level=None)) as foreign:
            foreign.execute("BEGIN IMMEDIATE")  # another process holds the file's write lock
            results: dict[str, int] = {}

            def post() -> None:  # needs the lock (queue) or is processed later (store)
                results["post"] = client.post("/api/turns", turn_body(1, "I live in Kyoto.")).status

            poster = threading.Thread(target=post)
            poster.start()
            time.sleep(0.3)  # the post (queue) or its processing (store) now waits on the lock
            started = time.monotonic()
            health = client.get("/api/health")
            search = client.post(
                "/api/memories/search",
                {"user_id": "u1", "agent_id": "a1", "query": "green tea", "recall": False},
            )
            answered = time.monotonic() - started
            foreign.execute("ROLLBACK")
        poster.join(timeout=30)
        # Both answered while the lock was held, well before the 10 s busy timeout of the writers.
        assert health.status == 200 and search.status == 200 and search.body["hits"]
        assert answered < 5, answered
        assert results["post"] == 202  # the write waited for the lock, then went through
        rt.drain()
        listed = client.get("/api/memories?user_id=u1&agent_id=a1").body["memories"]
        assert any("Kyoto" in m["memory"] for m in listed)


# -- the benchmark itself ------------------------------------------------------------------------------
@pytest.mark.slow
def test_bench_serve_runs_the_load_and_checks_every_turn() -> None:
    figures = measure(searchers=2, seconds=1.0, turns=30, users=3, seed_turns=1, embedder="hash", drain_timeout=60)
    result = figures.as_dict()
    assert result["errors"] == 0, result["error_samples"]
    assert result["turns_accepted"] == 30 and result["processed"] == 30
    assert result["lost"] == 0 and result["duplicated"] == 0 and result["queue_left"] == 0
    assert result["dead_letters"] == 0 and result["searches"] > 0
    assert figures.episodes >= 33  # every user message kept in an episode (a repeat in the one it repeats)


def test_the_local_queue_refuses_a_message_over_the_service_bus_limit(tmp_path: Path) -> None:
    from memory_core.adapters.sqlite.queue import MAX_MESSAGE_BYTES
    from memory_core.errors import ValidationError

    queue = SQLiteQueue(tmp_path / "q.queue")
    try:
        with pytest.raises(ValidationError, match=f"at most {MAX_MESSAGE_BYTES}"):
            queue.send(b"x" * (MAX_MESSAGE_BYTES + 1), message_id="big", session_id="s")
        assert queue.send(b"x" * MAX_MESSAGE_BYTES, message_id="fits", session_id="s")
        assert [m.message_id for m in queue.peek()] == ["fits"]
    finally:
        queue.close_sync()


def test_a_recall_folds_only_into_a_recent_one_and_never_past_a_turn(tmp_path: Path) -> None:
    now = [1_000_000.0]
    queue = SQLiteQueue(tmp_path / "q.queue", clock=lambda: now[0])
    try:
        _publish(queue, _recall(["m1"]))
        now[0] += 1.5
        _publish(queue, _recall(["m2"]))  # 1.5 s later: massed, folded
        now[0] += 2.5
        _publish(queue, _recall(["m3"]))  # 4 s after the first was queued: spaced, its own message
        queue.send(b"{}", message_id="turn-1", session_id=session_id_for(SCOPE), subject="turn")
        _publish(queue, _recall(["m4"]))  # a turn ends the session now: queued behind it
        kinds = [(subject, update.memory_ids if update else None) for subject, update in _bodies(queue)]
        assert kinds == [("recall", ["m1", "m2"]), ("recall", ["m3"]), ("turn", None), ("recall", ["m4"])]
    finally:
        queue.close_sync()
