"""The embedded runtime under faults and concurrency.

- Fault test: 200 turns (plus poison messages) flow through ``memory-core serve`` processes that are
  SIGKILLed at seeded points; after a final restart the store equals a clean, sequential run, every
  turn is marked processed, and only the poison messages sit in the dead-letter queue, with reasons.
- Ordering test: with several workers the turns of one scope are applied in order; a scope whose
  head message is held does not hold up the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import RunningRuntime, running, turn_body

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.messages import session_id_for
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import Scope

SEED = 20261129
FOODS = ["green tea", "coffee", "sushi", "ramen", "chocolate"]
CITIES = ["Kyoto", "Osaka", "Paris"]
ALLERGIES = ["peanuts", "shellfish"]
pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.fault,  # part of the fault suite (issue 16)
]


def make_turns(rng: random.Random, scopes: int, per_scope: int) -> list[dict[str, Any]]:
    """Turns whose effect depends on their order (likes, forget requests, changing favourites).

    Each scope uses at most seven distinct statements, so its memories all fit in the
    consolidator's neighbour window and decisions depend on the scope alone.
    """
    by_scope: list[list[dict[str, Any]]] = []
    for s in range(scopes):
        user = f"user{s}"
        foods = rng.sample(FOODS, 2)
        turns = []
        for i in range(per_scope):
            roll = rng.random()
            food = rng.choice(foods)
            if roll < 0.4:
                text = f"I like {food}."
            elif roll < 0.6:
                text = f"Forget that I like {food}."
            elif roll < 0.8:
                text = f"My favorite city is {rng.choice(CITIES)}."
            elif roll < 0.92:
                text = f"I am allergic to {rng.choice(ALLERGIES)}."
            else:
                text = "What a nice day."
            turns.append(turn_body(i, text, user=user, agent="agent", prefix=f"{user}-t"))
        by_scope.append(turns)
    # round-robin across scopes: each scope's order is kept, scopes interleave
    return [scope_turns[i] for i in range(per_scope) for scope_turns in by_scope]


def poison_messages() -> list[tuple[bytes, str, str, str]]:
    """(body, message id, session id, the field the dead-letter description must name)."""
    wrong_schema = {
        **turn_body(0, "x", user="user0", agent="agent", prefix="poison-schema"),
        "schema": "memory-core.turn.v9",
    }
    bad_user = {**turn_body(0, "x", prefix="poison-user"), "user_id": "bad user"}
    return [
        (b"{not json", "poison-json", session_id_for(Scope.of("user0", "agent")), "body"),
        (
            json.dumps(wrong_schema).encode(),
            "poison-schema",
            session_id_for(Scope.of("user1", "agent")),
            "schema",
        ),
        (json.dumps(bad_user).encode(), "poison-user", "elsewhere", "user_id"),
    ]


def _settings(db: Path) -> Any:
    return load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))


async def _snapshot(db: Path, users: list[str]) -> dict[str, Any]:
    """Every record (all statuses, with embeddings) and every history entry, per scope."""
    store, history = SQLiteMemoryStore(db), SQLiteHistoryStore(db)
    try:
        out: dict[str, Any] = {}
        for user in users:
            scope = Scope.of(user, "agent")
            page = await store.scan(scope, PageRequest(limit=10_000, with_embedding=True))
            entries = await history.for_scope(scope)
            out[user] = {
                "records": [r.to_json_dict() for r in page.records],
                "history": [e.model_dump(mode="json") for e in entries],
            }
        return out
    finally:
        await store.close()
        await history.close()


async def _clean_run(db: Path, turns: list[dict[str, Any]]) -> None:
    service = build_service(_settings(db))
    try:
        for turn in turns:
            await service.process_message(json.dumps(turn))
    finally:
        await service.close()


class ServeProcess:
    """``memory-core serve`` in a child process (HTTP on a free port, workers, no scheduler)."""

    def __init__(self, db: Path, log: Path, *, workers: int, lock_seconds: float) -> None:
        env = {**os.environ, "MEMORY_EMBEDDER": "hash", "OMP_NUM_THREADS": "1"}
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memory_core.cli.main",
                "-v",
                "--db",
                str(db),
                "serve",
                "--port",
                "0",
                "--workers",
                str(workers),
                "--lock-seconds",
                str(lock_seconds),
                "--no-scheduler",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.ready = threading.Event()
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "worker(s)" in line:
                self.ready.set()

    def wait_ready(self) -> None:
        if not self.ready.wait(timeout=60):
            raise TimeoutError(f"serve did not start: {self.lines}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.log.close()

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.log.close()
        return code


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise TimeoutError(what)


def test_sigkilled_workers_lose_nothing_and_apply_each_turn_once(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    turns = make_turns(rng, scopes=10, per_scope=20)
    assert len(turns) == 200
    users = sorted({t["user_id"] for t in turns})
    asyncio.run(_clean_run(tmp_path / "clean.db", turns))
    expected = asyncio.run(_snapshot(tmp_path / "clean.db", users))

    db = tmp_path / "faulty.db"
    asyncio.run(build_service(_settings(db)).close())  # create the store file with its embedder recorded
    queue = SQLiteQueue(default_queue_path(db))
    poison = poison_messages()
    for i, turn in enumerate(turns):
        queue.send(
            json.dumps(turn),
            message_id=turn["turn_id"],
            session_id=session_id_for(Scope.of(turn["user_id"], "agent")),
            subject="turn",
        )
        if i in (3, 50, 120):  # poison interleaved with the valid traffic, inside valid sessions too
            body, message_id, session, _ = poison[(3, 50, 120).index(i)]
            queue.send(body, message_id=message_id, session_id=session, subject="turn")
    total = len(turns) + len(poison)
    assert queue.stats().active == total

    # Kill when this many messages remain (seeded), a seeded moment later, with work in flight.
    thresholds = sorted(rng.sample(range(15, total - 15), 5), reverse=True)
    kills = 0
    for number, remaining in enumerate(thresholds):
        serve = ServeProcess(db, tmp_path / f"serve-{number}.log", workers=3, lock_seconds=1.5)
        serve.wait_ready()
        _wait(lambda remaining=remaining: queue.stats().active <= remaining, 120, f"progress to {remaining}")
        time.sleep(rng.uniform(0, 0.02))
        _wait(lambda: queue.stats().locked > 0 or queue.stats().active == 0, 10, "work in flight")
        serve.kill()
        kills += 1
    assert kills == 5

    final = ServeProcess(db, tmp_path / "serve-final.log", workers=3, lock_seconds=1.5)
    final.wait_ready()
    _wait(lambda: queue.stats().active == 0, 120, "the queue to drain after the last restart")
    assert final.terminate() == 0  # a graceful stop

    # Only the poison is dead-lettered, each with the reason and what was wrong.
    dead = {m.message_id: m for m in queue.dead_letters()}
    assert set(dead) == {p[1] for p in poison}
    for _, message_id, _, field in poison:
        assert dead[message_id].dead_letter_reason == "ValidationError"
        assert field in (dead[message_id].dead_letter_description or "")
    logs = "".join(p.read_text() for p in tmp_path.glob("serve-*.log"))
    assert "dead-lettered message poison-json" in logs

    # The store is exactly what one clean delivery of each turn produces.
    actual = asyncio.run(_snapshot(db, users))
    for user in users:
        assert actual[user]["records"] == expected[user]["records"], user
        assert actual[user]["history"] == expected[user]["history"], user

    async def processed() -> list[str]:
        history = SQLiteHistoryStore(db)
        try:
            return [
                t["turn_id"]
                for t in turns
                if not await history.turn_processed(Scope.of(t["user_id"], "agent"), t["turn_id"])
            ]
        finally:
            await history.close()

    assert asyncio.run(processed()) == []
    queue.close_sync()


def test_several_workers_apply_each_scope_in_order_and_a_held_scope_does_not_block_others(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED + 1)
    turns = make_turns(rng, scopes=4, per_scope=12)
    users = sorted({t["user_id"] for t in turns})
    asyncio.run(_clean_run(tmp_path / "clean.db", turns))
    expected = asyncio.run(_snapshot(tmp_path / "clean.db", users))

    db = tmp_path / "ordered.db"
    first, rest = turns[0], turns[1:]
    assert first["user_id"] == "user0"
    session = session_id_for(Scope.of("user0", "agent"))
    # Hold the head of user0's session, as a slow worker in another process would.
    holder = SQLiteQueue(default_queue_path(db), lock_seconds=60)
    holder.send(json.dumps(first), message_id=first["turn_id"], session_id=session, subject="turn")
    held = holder.receive()
    assert held is not None
    with running(db, workers=4) as rt:
        queue = rt.runtime.queue
        assert queue is not None
        for turn in rest:
            assert rt.client.post("/api/turns", turn).status == 202
        # every other scope drains while user0 waits behind its held head
        _wait(lambda: all(m.session_id == session for m in queue.peek(limit=1000)), 60, "the other scopes")
        assert len(queue.peek(limit=1000)) == 12  # user0's 12 turns: none applied out of order
        holder.abandon(held)
        rt.drain()
    holder.close_sync()
    actual = asyncio.run(_snapshot(db, users))
    for user in users:
        assert actual[user]["records"] == expected[user]["records"], user
        assert actual[user]["history"] == expected[user]["history"], user


@pytest.mark.parametrize(
    ("work_seconds", "grace_seconds", "finished"), [(0.3, 10.0, True), (30.0, 0.2, False)]
)
def test_stopping_finishes_or_releases_in_flight_work(
    tmp_path: Path, work_seconds: float, grace_seconds: float, finished: bool
) -> None:
    db = tmp_path / "stop.db"
    rt = RunningRuntime(db, workers=1, grace_seconds=grace_seconds).start()
    service = rt.runtime.service
    assert service is not None
    original = service.process_message

    async def slow(body: Any, **options: Any) -> Any:
        await asyncio.sleep(work_seconds)
        return await original(body, **options)

    service.process_message = slow  # type: ignore[method-assign]
    assert rt.client.post("/api/turns", turn_body(0, "I like green tea.")).status == 202
    queue = rt.runtime.queue
    assert queue is not None
    _wait(lambda: queue.stats().locked == 1, 10, "the turn to be in flight")
    started = time.monotonic()
    rt.stop()
    assert time.monotonic() - started < grace_seconds + 5
    after = SQLiteQueue(default_queue_path(db))
    if finished:  # the worker finished its message before stopping
        assert after.stats().active == 0
    else:  # released at once: waiting, unlocked, delivered again at the next start
        [message] = after.peek()
        assert message.locked_until is None and message.delivery_count == 1
        assert "cancelled" in (message.last_error or "")
    after.close_sync()
