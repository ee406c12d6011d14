"""Fault suite: a purge holds against replays, queued turns and being killed midway.

- Purge, then replay: the same old turns posted again (the remote client's outbox), redelivered by
  the queue, redelivered by Service Bus to the Functions trigger, or fed again with ``memory-core
  ingest``, bring nothing back; a turn newer than the purge is ingested.
- Turns queued but not processed at purge time (and the user's dead letters) are removed from the
  embedded queue and never processed.
- SIGKILL during a purge: killed right after its tombstone is durable, and killed at whatever point
  a real ``memory-core purge`` of a large store has reached; replays are dropped at once, and running
  the purge again completes it.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from functions_env import NOW as FUNCTIONS_NOW
from functions_env import functions_env
from functions_env import turn_body as functions_turn
from runtime_helpers import RunningRuntime, running, turn_body

import function_app
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.messages import message_id_for, session_id_for
from memory_core.domain.records import Scope

pytestmark = [
    pytest.mark.fault,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

U1A1 = Scope.of("u1", "a1")
U2A1 = Scope.of("u2", "a1")
TEXTS = ["I like green tea.", "I am allergic to peanuts.", "My favorite city is Kyoto.", "I like sushi."]


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def _memories(rt: RunningRuntime, user: str = "u1", agent: str = "a1") -> list[dict[str, Any]]:
    reply = rt.client.get(f"/api/memories?user_id={user}&agent_id={agent}")
    assert reply.status == 200, reply.body
    return list(reply.body["memories"])


def _settings(db: Path) -> Any:
    return load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))


def _cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], out=out)
    return code, out.getvalue()


# ------------------------------------------------------------------------------------------------
# Purge, then replay
# ------------------------------------------------------------------------------------------------


def test_replayed_turns_after_a_purge_bring_nothing_back(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    turns = [turn_body(i, text) for i, text in enumerate(TEXTS)]
    (tmp_path / "old.jsonl").write_text("\n".join(json.dumps(t) for t in turns) + "\n", encoding="utf-8")
    with running(db) as rt:
        client = rt.client
        for body in turns:
            assert client.post("/api/turns", body).body["status"] == "queued"
        client.post("/api/turns", turn_body(0, "I like black tea.", user="u2"))
        rt.drain()
        assert len(_memories(rt)) == 2 * len(TEXTS)  # a fact and an episode each
        purged = client.delete("/api/users/u1?confirm=true").body
        assert purged["purged_memories"] == 2 * len(TEXTS) and purged["purged_history"] > 0
        assert _memories(rt) == []

        # 1. The outbox sends the same turns again: answered, dropped, never queued.
        for body in turns:
            reply = client.post("/api/turns", body)
            assert (reply.status, reply.body["status"]) == (202, "purged")
        assert rt.runtime.queue is not None and rt.runtime.queue.stats().active == 0
        # 2. The queue delivers old turns anyway (sent before the purge by another process, say).
        queue = SQLiteQueue(default_queue_path(db))
        for body in turns:
            queue.send(
                json.dumps(body),
                message_id=f"replay-{body['turn_id']}",
                session_id=session_id_for(U1A1),
                subject="turn",
            )
        queue.close_sync()
        rt.drain()
        assert _memories(rt) == []
        assert rt.runtime.queue.stats().dead_letters == 0  # dropped and completed, not failed
        # 3. A turn newer than the purge is ingested as usual.
        fresh = turn_body(0, "I like coffee.", prefix="new", start=datetime.now(UTC))
        assert client.post("/api/turns", fresh).body["status"] == "queued"
        rt.drain()
        assert sorted(m["memory"] for m in _memories(rt)) == ["I like coffee", "I like coffee."]
        assert len(_memories(rt, "u2")) == 2  # the other user was never touched

    # 4. ``memory-core ingest`` of the old file, after the server stopped.
    code, out = _cli(db, "ingest", str(tmp_path / "old.jsonl"))
    assert code == 0 and out.count("dropped") == len(TEXTS)
    code, out = _cli(db, "--json", "list", "--user", "u1", "--agent", "a1")
    assert sorted(m["memory"] for m in json.loads(out)["memories"]) == ["I like coffee", "I like coffee."]


def test_service_bus_redelivery_after_a_purge_is_dropped_by_the_trigger(tmp_path: Path) -> None:
    async def deliver(body: dict[str, Any], delivery: int = 1) -> None:
        from azure.functions.servicebus import ServiceBusMessage

        await function_app.ingest_turns(
            ServiceBusMessage(
                body=json.dumps(body).encode(),
                message_id=message_id_for(U1A1, "turn", body["turn_id"]),
                session_id=session_id_for(U1A1),
                content_type="application/json",
                delivery_count=delivery,
                enqueued_time_utc=FUNCTIONS_NOW,
                sequence_number=1,
                application_properties={},
                user_properties={},
            )
        )

    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            try:
                old = functions_turn("turn-1", "I love green tea.", at=FUNCTIONS_NOW - timedelta(minutes=10))
                await deliver(old)
                assert len((await env.service.list(U1A1)).records) == 2
                report = await env.service.purge("u1")
                assert report.purged_at == FUNCTIONS_NOW and report.memories == 2
                partitions = {pk for pk, _ in env.tables.rows()}
                assert partitions == {"~tombstone"}  # the history table keeps the tombstone only
                await deliver(old, delivery=2)  # Service Bus redelivers the turn
                assert (await env.service.list(U1A1)).records == []
                assert await env.history.journal(U1A1, "turn-1") is None
                assert {pk for pk, _ in env.tables.rows()} == {"~tombstone"}
                await deliver(functions_turn("turn-2", "I love coffee.", at=FUNCTIONS_NOW + timedelta(seconds=1)))
                assert len((await env.service.list(U1A1)).records) == 2
            finally:
                function_app.runtime.use(None)  # type: ignore[arg-type]

    asyncio.run(body())


# ------------------------------------------------------------------------------------------------
# Queued at purge time
# ------------------------------------------------------------------------------------------------


def test_turns_queued_at_purge_time_are_removed_and_never_processed(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    queue = SQLiteQueue(default_queue_path(db))
    raw = {**turn_body(9, "Raw text of a poison turn.", prefix="poison"), "schema": "memory-core.turn.v9"}
    queue.send(json.dumps(raw), message_id="poison", session_id=session_id_for(U1A1), subject="turn")
    poison = queue.receive()
    assert poison is not None
    queue.dead_letter(poison, reason="ValidationError", description="schema: unsupported")
    queue.close_sync()
    with running(db, workers=0) as rt:  # nothing drains: the turns wait on the queue
        for i, text in enumerate(TEXTS):
            assert rt.client.post("/api/turns", turn_body(i, text, agent=f"a{i % 2}")).body["status"] == "queued"
        rt.client.post("/api/turns", turn_body(0, "I like black tea.", user="u2"))
        assert rt.runtime.queue is not None
        assert rt.runtime.queue.stats().active == len(TEXTS) + 1 and rt.runtime.queue.stats().dead_letters == 1
        export = rt.client.get("/api/users/u1/export").body
        assert len(export["queued"]) == len(TEXTS) + 1 and [q["dead_lettered"] for q in export["queued"]].count(True) == 1
        purged = rt.client.delete("/api/users/u1?confirm=true").body
        assert purged["purged_queued"] == len(TEXTS) + 1  # waiting turns of both agents and the dead letter
        assert rt.runtime.queue.stats().active == 1 and rt.runtime.queue.stats().dead_letters == 0
    with running(db, workers=2) as rt:
        rt.drain()
        assert _memories(rt, "u1", "a0") == [] and _memories(rt, "u1", "a1") == []
        assert len(_memories(rt, "u2")) == 2
    # The raw text of the purged turns is gone from the queue file.
    for path in db.parent.iterdir():
        if path.name.startswith(db.name):
            data = path.read_bytes()
            assert b"poison turn" not in data and b"allergic to peanuts" not in data, path.name


# ------------------------------------------------------------------------------------------------
# SIGKILL during a purge
# ------------------------------------------------------------------------------------------------

#: A purge whose process stops (for the parent to kill) as soon as its tombstone is durable.
_STOP_AFTER_TOMBSTONE = textwrap.dedent(
    """
    import asyncio, sys, time
    from memory_core.adapters.sqlite.history import SQLiteHistoryStore
    from memory_core.bootstrap import build_service, load_settings

    class Stops(SQLiteHistoryStore):
        async def record_tombstone(self, user_id, agent_id, at):
            kept = await super().record_tombstone(user_id, agent_id, at)
            print("tombstone", flush=True)
            time.sleep(120)  # killed here, before anything is deleted
            return kept

    async def main():
        db = sys.argv[1]
        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=db)
        service = build_service(settings, history=Stops(db))
        await service.purge("u1")

    asyncio.run(main())
    """
)


def _populate(db: Path, records: int) -> list[dict[str, Any]]:
    """Turns of u1 and u2 ingested, plus ``records`` imported memories of u1 over three agents."""
    turns = [turn_body(i, text) for i, text in enumerate(TEXTS)]

    async def body() -> None:
        service = build_service(_settings(db))
        try:
            for turn in [*turns, turn_body(0, "I like black tea.", user="u2")]:
                await service.process_message(json.dumps(turn))
            rows = [
                {
                    "id": f"bulk{i:06d}",
                    "user_id": "u1",
                    "agent_id": f"agent{i % 3}",
                    "memory": f"bulk memory number {i} about topic {i % 97}",
                    "created_at": "2026-04-01T00:00:00+00:00",
                }
                for i in range(records)
            ]
            await service.import_records(rows)
        finally:
            await service.close()

    asyncio.run(body())
    return turns


async def _state(db: Path) -> dict[str, int]:
    store, history = SQLiteMemoryStore(db), SQLiteHistoryStore(db)
    try:
        u1 = sum([await store.count(Scope.of("u1", agent)) for agent in ("a1", "agent0", "agent1", "agent2")])
        return {
            "u1_memories": u1,
            "u1_history": len(await history.for_scope(U1A1)),
            "u2_memories": await store.count(U2A1),
            "u2_history": len(await history.for_scope(U2A1)),
        }
    finally:
        await store.close()
        await history.close()


def _replay_is_dropped(db: Path, turns: list[dict[str, Any]]) -> None:
    async def body() -> None:
        service = build_service(_settings(db))
        try:
            for turn in turns:
                outcome = await service.process_message(json.dumps(turn))
                assert outcome.status == "purged", outcome
        finally:
            await service.close()

    asyncio.run(body())


def _purge_process(db: Path, *argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "MEMORY_EMBEDDER": "hash", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_purge_killed_after_its_tombstone_drops_replays_and_completes_when_run_again(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    turns = _populate(db, records=300)
    before = asyncio.run(_state(db))
    assert before["u1_memories"] == 300 + 2 * len(TEXTS) and before["u1_history"] > 0
    proc = _purge_process(db, "-c", _STOP_AFTER_TOMBSTONE, str(db))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "tombstone", proc.stderr.read() if proc.stderr else line
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert asyncio.run(_state(db)) == before  # killed before anything was deleted
    _replay_is_dropped(db, turns)  # ... and yet nothing purged can come back
    assert asyncio.run(_state(db)) == before
    code, out = _cli(db, "purge", "--user", "u1", "--yes")  # running it again completes it
    assert code == 0 and f"purged {before['u1_memories']} memories" in out
    after = asyncio.run(_state(db))
    assert after == {"u1_memories": 0, "u1_history": 0, "u2_memories": 2, "u2_history": before["u2_history"]}
    _replay_is_dropped(db, turns)
    assert asyncio.run(_state(db)) == after


@pytest.mark.parametrize("delay", [0.0, 0.03, 0.08])
def test_a_purge_killed_midway_completes_when_run_again(tmp_path: Path, populated: Path, delay: float) -> None:
    """``memory-core purge`` of a large store, killed ``delay`` seconds after its tombstone is durable
    (the deletes that follow are not begun, under way or done: the store's takes ~0.1 s here)."""
    db = tmp_path / "memory.db"
    shutil.copy(populated, db)
    turns = [turn_body(i, text) for i, text in enumerate(TEXTS)]
    before = asyncio.run(_state(db))
    proc = _purge_process(db, "-m", "memory_core.cli.main", "--db", str(db), "purge", "--user", "u1", "--yes")
    watcher = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                found = watcher.execute("SELECT COUNT(*) FROM history_tombstones").fetchone()[0]
            except sqlite3.OperationalError:  # the table is created by the purging process
                found = 0
            if found:
                break
            time.sleep(0.001)
    finally:
        watcher.close()
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    midway = asyncio.run(_state(db))
    assert midway["u2_memories"] == before["u2_memories"] and midway["u2_history"] == before["u2_history"]
    _replay_is_dropped(db, turns)  # whatever the purge had reached
    code, _ = _cli(db, "purge", "--user", "u1", "--yes")
    assert code == 0
    after = asyncio.run(_state(db))
    assert after == {"u1_memories": 0, "u1_history": 0, "u2_memories": 2, "u2_history": before["u2_history"]}
    _replay_is_dropped(db, turns)
    assert asyncio.run(_state(db)) == after


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with 4,000 memories of u1 (and its turns' history), built once, copied by each test."""
    db = tmp_path_factory.mktemp("populated") / "memory.db"
    _populate(db, records=4000)
    return db
