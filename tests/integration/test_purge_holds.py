"""A purge that holds: tombstones in both histories, the embedded queue's scope purge, the drop rule
in every ingestion path, purged text leaving the SQLite files, and an export with history.

The fault cases (replays after a purge, turns queued at purge time, SIGKILL during a purge) are in
``test_purge_faults.py``.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_table_service import FakeTableService
from functions_env import history_store

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.queue_messages import LockLostError
from memory_core.bootstrap import build_service
from memory_core.capabilities import QueuedLister, ScopePurger, WalCheckpointer, supports
from memory_core.cli.main import main
from memory_core.config import Settings
from memory_core.domain.messages import HistoryEntry, RecallUpdate, Turn, session_id_for
from memory_core.domain.records import MemoryKind, Scope
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.ports import DeadLetter, FixedClock, TurnStart
from memory_core.runtime.worker import QueueWorker
from memory_core.service import MemoryService
from memory_core.service.journal import wait_for_purge

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BEFORE = NOW - timedelta(hours=1)
S1 = Scope.of("u1", "a1")
S1B = Scope.of("u1", "a2")
S2 = Scope.of("u2", "a1")
LONG = Scope.of("u1", "agent-" + "x" * 122)  # the pair is longer than a session id: its session is hashed


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def turn(
    turn_id: str, text: str, *, scope: Scope = S1, at: datetime = BEFORE, messages: int = 1
) -> dict[str, Any]:
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": turn_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "occurred_at": at.isoformat(),
        "messages": [{"role": "user", "text": text}] * messages,
    }


@dataclass
class Env:
    service: MemoryService
    queue: SQLiteQueue | None
    clock: FixedClock
    db: Path

    async def drain(self) -> int:
        assert self.queue is not None
        return await QueueWorker(self.queue, self.service, renew_locks=False).drain()

    async def memories(self, scope: Scope = S1) -> list[str]:
        return sorted(r.memory for r in (await self.service.list(scope)).records)


@asynccontextmanager
async def open_env(tmp_path: Path, *, queue: bool = True, history: Any = None) -> AsyncIterator[Env]:
    db = tmp_path / "memory.db"
    settings = Settings(store="sqlite", sqlite_path=str(db), embedder="hash")
    clock = FixedClock(NOW)
    q = SQLiteQueue(default_queue_path(db)) if queue else None
    service = build_service(settings, clock=clock, publisher=q, recall_via_queue=q is not None, history=history)
    try:
        yield Env(service, q, clock, db)
    finally:
        await service.close()


# ------------------------------------------------------------------------------------------------
# Tombstones, on both history stores
# ------------------------------------------------------------------------------------------------


@asynccontextmanager
async def open_history(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    store: Any = SQLiteHistoryStore(tmp_path / "history.db") if kind == "sqlite" else history_store(FakeTableService())
    try:
        yield store
    finally:
        await store.close()


def both(fn: Callable[[Any], Coroutine[Any, Any, None]]) -> Callable[[str, Path], None]:
    @pytest.mark.parametrize("kind", ["sqlite", "azure_table"])
    def test(kind: str, tmp_path: Path) -> None:
        async def body() -> None:
            async with open_history(kind, tmp_path) as store:
                await fn(store)

        run(body())

    test.__name__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


@both
async def test_a_tombstone_covers_its_scope_or_every_agent_of_its_user_and_only_moves_forward(store: Any) -> None:
    assert await store.tombstone(S1) is None
    assert await store.record_tombstone("u1", "a1", NOW) == NOW
    assert await store.tombstone(S1) == NOW
    assert await store.tombstone(S1B) is None and await store.tombstone(S2) is None
    assert await store.record_tombstone("u1", "a1", BEFORE) == NOW  # an earlier purge changes nothing
    assert await store.tombstone(S1) == NOW
    later = NOW + timedelta(minutes=5)
    assert await store.record_tombstone("u1", None, later) == later  # the whole user
    assert await store.tombstone(S1) == later and await store.tombstone(S1B) == later
    assert await store.tombstone(Scope.of("u10", "a1")) is None  # a prefix of another user is not it
    assert await store.tombstone(S2) is None
    # Purging the history leaves the tombstones: they are what drops a replay.
    await store.purge("u1")
    await store.purge("u1", "a1")
    assert await store.tombstone(S1) == later


@both
async def test_a_purge_is_under_way_from_its_tombstone_until_it_settles(store: Any) -> None:
    later = NOW + timedelta(hours=1)
    assert await store.purge_settled(S1)  # never purged
    await store.record_tombstone("u1", None, NOW)
    assert not await store.purge_settled(S1) and not await store.purge_settled(S1B)
    assert await store.purge_settled(S2)
    await store.settle_tombstone("u1", None, NOW)
    assert await store.purge_settled(S1) and await store.purge_settled(S1B)
    await store.record_tombstone("u1", "a1", later)  # a later purge of one scope: under way again
    assert not await store.purge_settled(S1) and await store.purge_settled(S1B)
    await store.settle_tombstone("u1", "a1", NOW)  # an earlier purge's end does not end it
    assert not await store.purge_settled(S1)
    await store.settle_tombstone("u1", "a1", later)
    assert await store.purge_settled(S1)
    await store.record_tombstone("u1", "a1", NOW)  # an earlier time changes nothing
    assert await store.purge_settled(S1) and await store.tombstone(S1) == later


def test_tombstones_recorded_before_purges_were_settled_count_as_settled(tmp_path: Path) -> None:
    async def body() -> None:
        path = tmp_path / "old.db"
        with closing(sqlite3.connect(path)) as conn:  # a history file of the previous schema
            conn.execute(
                "CREATE TABLE history_tombstones (user_id TEXT NOT NULL, agent_id TEXT NOT NULL, "
                "purged_at TEXT NOT NULL, PRIMARY KEY (user_id, agent_id)) WITHOUT ROWID"
            )
            conn.execute("INSERT INTO history_tombstones VALUES ('u1', '', ?)", (NOW.isoformat(),))
            conn.commit()
        sqlite_history = SQLiteHistoryStore(path)
        assert await sqlite_history.tombstone(S1) == NOW and await sqlite_history.purge_settled(S1)
        await sqlite_history.record_tombstone("u1", None, NOW + timedelta(hours=1))
        assert not await sqlite_history.purge_settled(S1)
        await sqlite_history.close()
        assert not await SQLiteHistoryStore(path).purge_settled(S1)  # opening again settles nothing

        service = FakeTableService()
        table = history_store(service)
        await table.record_tombstone("u1", None, NOW)
        del service.rows()[("~tombstone", "u1|*")]["settled_at"]  # an entity written before
        assert await table.purge_settled(S1)
        await table.record_tombstone("u1", None, NOW + timedelta(hours=1))
        assert not await table.purge_settled(S1)
        await table.close()

    run(body())


def test_a_turn_caught_by_a_purge_killed_midway_stops_waiting_after_its_budget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        store = SQLiteHistoryStore(tmp_path / "history.db")
        await store.record_tombstone("u1", None, NOW)  # and the purge never settles
        assert await wait_for_purge(store, S2, budget=0.0) is True
        assert await wait_for_purge(store, S1, budget=0.05) is False
        await store.settle_tombstone("u1", None, NOW)
        assert await wait_for_purge(store, S1, budget=0.0) is True
        await store.close()

    run(body())
    assert "still under way" in caplog.text


def test_the_table_tombstone_is_ids_and_a_time_in_its_own_partition() -> None:
    async def body() -> None:
        service = FakeTableService()
        store = history_store(service)
        await store.begin_turn(
            TurnStart(S1, "t1", candidates=(), extraction_path="rules", fallback_reason=None, at=NOW)
        )
        await store.record_step(
            S1,
            "t1",
            0,
            [HistoryEntry(memory_id="m1", user_id="u1", agent_id="a1", event="ADD", reason="new", turn_id="t1", at=NOW)],
        )
        await store.mark_turn_processed(S1, "t1", NOW)
        await store.record_tombstone("u1", None, NOW)
        await store.record_tombstone("u1", "a1", NOW)
        assert await store.purge("u1") == 1
        rows = service.rows()
        # The scope's partition is gone whole: entries, step markers, the journal and the counter.
        assert not [key for key in rows if key[0].startswith("u1|")]
        user = rows[("~tombstone", "u1|*")]
        scope = rows[("~tombstone", "u1|a1")]
        assert {k: v for k, v in user.items() if k not in ("PartitionKey", "RowKey", "Timestamp")} == {
            "user_id": "u1",
            "agent_id": "",
            "purged_at": NOW.isoformat(),
            "settled_at": "",  # recorded, not settled: this test never ends the purge
        }
        assert scope["agent_id"] == "a1" and scope["purged_at"] == NOW.isoformat()
        # Reading a scope's tombstone is one query over its user's tombstones.
        before = len(service.requests)
        assert await store.tombstone(S1) == NOW
        assert len(service.requests) == before + 1
        await store.close()

    run(body())


def test_purging_a_user_removes_their_set_aside_messages_found_by_session_or_body() -> None:
    async def body() -> None:
        store = history_store(FakeTableService())

        async def letter(message_id: str, session: str | None, body: dict[str, Any] | bytes) -> None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            await store.record_dead_letter(
                DeadLetter(message_id=message_id, reason="ValidationError", description="x", body=raw, session_id=session, at=NOW)
            )

        await letter("by-session", "u1|a1", b"{")
        await letter("hashed", session_id_for(LONG), turn("t1", "x", scope=LONG))
        await letter("no-session", None, turn("t2", "x", scope=S1B))
        await letter("other-user", session_id_for(Scope.of("u2", "b" * 128)), turn("t3", "x", scope=S2))
        await letter("not-json", "h:0123", b"\xff")
        await store.purge("u1", "a2")
        assert sorted(d["message_id"] for d in await store.dead_letters()) == [
            "by-session",
            "hashed",
            "not-json",
            "other-user",
        ]
        await store.purge("u1")
        assert sorted(d["message_id"] for d in await store.dead_letters()) == ["not-json", "other-user"]
        await store.close()

    run(body())


# ------------------------------------------------------------------------------------------------
# The embedded queue: a scope's messages, in one transaction
# ------------------------------------------------------------------------------------------------


def test_the_queue_removes_a_scopes_waiting_locked_and_dead_lettered_messages(tmp_path: Path) -> None:
    async def body() -> None:
        queue = SQLiteQueue(tmp_path / "q.db")
        for scope, turn_id in [(S1, "a"), (S1, "b"), (S1, "c"), (S1B, "d"), (S2, "e"), (LONG, "f")]:
            await queue.publish_turn(Turn.model_validate(turn(turn_id, "I like tea.", scope=scope)))
        await queue.publish_recall(RecallUpdate(user_id="u1", agent_id="a1", memory_ids=["m1"], at=NOW))
        queue.send(json.dumps(turn("g", "x", scope=S1)), message_id="elsewhere", session_id="another-session", subject="turn")
        locked = queue.receive()  # S1's head, in a worker's hands
        assert locked is not None and locked.session_id == session_id_for(S1)
        dead = queue.receive()  # S1B's head, set aside
        assert dead is not None
        queue.dead_letter(dead, reason="ValidationError", description="x")

        listed = await queue.queued_for("u1", "a1")
        assert [(q.kind, q.item_id, q.dead_lettered) for q in listed] == [
            ("turn", "a", False),
            ("turn", "b", False),
            ("turn", "c", False),
            ("recall", listed[3].item_id, False),
            ("turn", "g", False),
        ]
        assert listed[0].occurred_at == BEFORE and listed[0].agent_id == "a1" and listed[3].occurred_at == NOW

        assert await queue.purge_scope("u1", "a1") == 5
        with pytest.raises(LockLostError):
            queue.complete(locked)  # its receiver cannot complete what was purged
        assert [q.item_id for q in await queue.queued_for("u1")] == ["d", "f"]
        assert [q.dead_lettered for q in await queue.queued_for("u1")] == [True, False]
        assert await queue.purge_scope("u1") == 2  # every agent, the hashed session included
        assert await queue.queued_for("u1") == []
        assert [m.message_id for m in queue.peek()] == [m.message_id for m in queue.peek() if "u2" in m.session_id]
        assert queue.stats().active == 1 and queue.stats().dead_letters == 0
        assert await queue.purge_scope("u1") == 0
        assert await queue.checkpoint_wal() is True
        queue.close_sync()

    run(body())


def test_capabilities_are_seen_through_a_forwarding_wrapper(tmp_path: Path) -> None:
    class Forwarding:  # as ``memory-core serve`` wraps its adapters (Python 3.12 isinstance misses these)
        def __init__(self, target: Any) -> None:
            self._target = target

        def __getattr__(self, name: str) -> Any:
            return getattr(self._target, name)

    queue = SQLiteQueue(tmp_path / "q.db")
    for resource in (queue, Forwarding(queue)):
        assert supports(resource, ScopePurger) and supports(resource, QueuedLister)
        assert supports(resource, WalCheckpointer)
    assert not supports(object(), ScopePurger) and not supports(None, WalCheckpointer)
    queue.close_sync()


# ------------------------------------------------------------------------------------------------
# The drop rule, in the service
# ------------------------------------------------------------------------------------------------


def test_a_turn_at_or_before_the_purge_is_dropped_and_a_later_one_ingested(tmp_path: Path) -> None:
    async def body() -> None:
        async with open_env(tmp_path, queue=False) as env:
            first = await env.service.ingest(turn("t1", "I like green tea."))
            assert first.status == "ingested" and await env.memories()
            report = await env.service.purge("u1", "a1")
            assert report.purged_at == NOW and report.memories == 2 and report.queued == 0
            assert await env.memories() == []
            again = await env.service.ingest(turn("t1", "I like green tea."))
            assert again.status == "purged" and again.steps == [] and again.as_dict()["status"] == "purged"
            assert await env.service.ingest(turn("t2", "I like coffee.", at=NOW)) is not None
            assert await env.memories() == []  # at the purge time exactly: dropped too
            assert await env.service.publish_turn(turn("t3", "I like sushi.")) == "purged"
            newer = await env.service.ingest(turn("t4", "I like ramen.", at=NOW + timedelta(seconds=1)))
            assert newer.status == "ingested"
            assert await env.memories() == ["I like ramen", "I like ramen."]
            # Another agent of the user was not purged.
            assert (await env.service.ingest(turn("t1", "I like tea.", scope=S1B))).status == "ingested"

    run(body())


def test_a_user_purge_drops_every_agents_turns_and_recall_updates(tmp_path: Path) -> None:
    async def body() -> None:
        async with open_env(tmp_path) as env:
            await env.service.publish_turn(turn("t1", "I like green tea."))
            await env.drain()
            (fact,) = [r for r in (await env.service.list(S1)).records if r.kind is MemoryKind.FACT]
            report = await env.service.purge("u1")
            assert report.purged_at == NOW and report.agent_id is None
            # Old messages of any agent of the user, however they arrive, are dropped and completed.
            for scope in (S1, S1B):
                outcome = await env.service.process_message(json.dumps(turn("t1", "I like tea.", scope=scope)))
                assert (outcome.kind, outcome.status) == ("turn", "purged")
            recall = RecallUpdate(user_id="u1", agent_id="a1", memory_ids=[fact.id], at=NOW)
            outcome = await env.service.process_message(json.dumps(recall.to_json_dict()))
            assert (outcome.kind, outcome.status, outcome.recalled) == ("recall", "purged", 0)
            assert await env.service.apply_recall(recall) == 0
            assert await env.service.publish_turn(turn("t2", "I like tea.", scope=S1B)) == "purged"
            assert env.queue is not None and env.queue.stats().active == 0  # not even queued
            env.clock.advance(minutes=1)
            assert await env.service.publish_turn(turn("t3", "I like coffee.", at=NOW + timedelta(seconds=30))) == "queued"
            await env.drain()
            assert await env.memories() == ["I like coffee", "I like coffee."]

    run(body())


class _PurgedMidway(SQLiteHistoryStore):
    """A history whose first recorded step is followed by a purge of the user (as if the purge ran
    while the turn was being ingested)."""

    hook: Callable[[], Coroutine[Any, Any, Any]] | None = None

    async def record_step(self, scope: Scope, turn_id: str, step: int, entries: Sequence[HistoryEntry]) -> bool:
        fresh = await super().record_step(scope, turn_id, step, entries)
        hook, type(self).hook = type(self).hook, None
        if hook is not None:
            await hook()
        return fresh


def test_a_turn_ingested_while_its_scope_is_purged_removes_what_it_wrote(tmp_path: Path) -> None:
    async def body() -> None:
        history = _PurgedMidway(tmp_path / "memory.db")
        async with open_env(tmp_path, queue=False, history=history) as env:
            _PurgedMidway.hook = lambda: env.service.purge("u1")
            result = await env.service.ingest(turn("t1", "I like green tea. I am allergic to peanuts."))
            assert result.status == "purged"
            assert await env.memories() == []
            assert await history.for_scope(S1) == [] and await history.journal(S1, "t1") is None

    run(body())


# ------------------------------------------------------------------------------------------------
# Purged text leaves the files
# ------------------------------------------------------------------------------------------------


def _files(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.iterdir()) if p.name.startswith(db.name)}


def test_purged_text_leaves_the_store_history_and_queue_files(tmp_path: Path) -> None:
    marker = "Zorblax-7731 likes quokkas"
    needles = [marker.encode(), marker.lower().encode(), b"zorblax"]

    async def body() -> None:
        async with open_env(tmp_path) as env:
            assert env.queue is not None
            await env.service.publish_turn(turn("t1", f"I like {marker}. My name is {marker}."))
            await env.service.publish_turn(turn("t2", "I like green tea.", scope=S2))
            await env.drain()
            await env.service.publish_turn(turn("t3", f"Remember {marker} again.", at=BEFORE + timedelta(minutes=1)))
            env.queue.send(json.dumps(turn("t4", f"{marker} poison", scope=S1)), message_id="poison", session_id="u1|a1")
            poison = env.queue.receive()
            assert poison is not None and poison.message_id != "poison"  # t3 is the head of the session
            env.queue.abandon(poison)
            assert any(n in data for data in _files(env.db).values() for n in needles), "the marker was written"
            report = await env.service.purge("u1")
            assert report.queued == 2 and report.memories >= 2 and report.checkpointed
            files = _files(env.db)
            assert {"memory.db", "memory.db-wal", "memory.db.queue", "memory.db.queue-wal"} <= set(files)
            for name, data in files.items():
                for needle in needles:
                    assert needle not in data, f"{needle!r} is still in {name}"
            # The adapters are still open and the other user is intact.
            assert [r.memory for r in (await env.service.list(S2)).records]
            assert files["memory.db-wal"] == b"" and files["memory.db.queue-wal"] == b""

    run(body())


# ------------------------------------------------------------------------------------------------
# Export: records with provenance, the history, what still waits on the queue
# ------------------------------------------------------------------------------------------------


def test_export_has_the_history_provenance_and_queued_messages(tmp_path: Path) -> None:
    async def body() -> None:
        async with open_env(tmp_path) as env:
            await env.service.publish_turn(turn("t1", "I like green tea."))
            await env.service.publish_turn(turn("t1", "I like black tea.", scope=S1B))
            await env.drain()
            await env.service.publish_turn(turn("t2", "I like coffee.", at=BEFORE + timedelta(minutes=1)))
            api = MemoryApi(env.service)
            reply = await api.handle(ApiRequest("GET", "/users/u1/export", {}))
            assert reply.status == 200
            data = reply.body
            assert data["count"] == len(data["memories"]) == 4
            assert all(m["provenance"][0]["turn_id"] == "t1" for m in data["memories"])
            assert {h["agent_id"] for h in data["history"]} == {"a1", "a2"}
            assert {h["event"] for h in data["history"]} == {"ADD"}
            assert [(q["kind"], q["item_id"], q["agent_id"]) for q in data["queued"]] == [("turn", "t2", "a1")]
            assert data["queued"][0]["occurred_at"].startswith((BEFORE + timedelta(minutes=1)).isoformat()[:19])
            one = (await api.handle(ApiRequest("GET", "/users/u1/export", {"agent_id": "a2"}))).body
            assert {h["agent_id"] for h in one["history"]} == {"a2"} and one["queued"] == []
            purge = await api.handle(ApiRequest("DELETE", "/users/u1", {"confirm": "true"}))
            assert purge.body["purged_queued"] == 1 and purge.body["purged_at"].startswith("2026-06-01T12:00:00")
            after = (await api.handle(ApiRequest("GET", "/users/u1/export", {}))).body
            assert (after["memories"], after["history"], after["queued"]) == ([], [], [])

    run(body())


def test_the_cli_exports_history_and_purges_the_local_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db = tmp_path / "memory.db"

    def cli(*args: str) -> tuple[int, str]:
        out = io.StringIO()
        code = main(["--db", str(db), *args], out=out)
        return code, out.getvalue()

    now = datetime.now(UTC)
    lines = [turn("t1", "I like green tea.", at=now - timedelta(minutes=5))]
    (tmp_path / "turns.jsonl").write_text("\n".join(json.dumps(t) for t in lines) + "\n", encoding="utf-8")
    assert cli("ingest", str(tmp_path / "turns.jsonl"))[0] == 0
    queue = SQLiteQueue(default_queue_path(db))
    run(queue.publish_turn(Turn.model_validate(turn("t2", "I like coffee.", at=now - timedelta(minutes=4)))))
    queue.close_sync()

    code, out = cli("--json", "export", "--user", "u1")
    exported = json.loads(out)
    assert code == 0 and exported["count"] == 2 and len(exported["history"]) == 2
    assert [q["item_id"] for q in exported["queued"]] == ["t2"]
    code, out = cli("export", "--user", "u1", "--history", str(tmp_path / "history.jsonl"))
    assert code == 0 and len(out.splitlines()) == 2  # records stay JSON lines (import reads them back)
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [h["turn_id"] for h in history] == ["t1", "t1"]

    code, out = cli("purge", "--user", "u1", "--yes")
    assert code == 0 and "purged 2 memories, 2 history entries and 1 queued message(s)" in out
    assert "dated at or before" in out
    code, out = cli("ingest", str(tmp_path / "turns.jsonl"))  # an old file fed again
    assert code == 0 and "dropped" in out
    assert json.loads(cli("--json", "export", "--user", "u1")[1])["memories"] == []
