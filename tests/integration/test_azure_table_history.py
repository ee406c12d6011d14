"""The Azure Table history store against a fake Table service, with the SQLite store as the reference.

The semantic tests run on both stores (the SQLite one is the reference implementation of the
``HistoryStore`` protocol); the rest check what goes over the wire (partitions, row keys, ETag
concurrency, transactions), retries, large values, dead letters, checkpoints and construction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import ServiceRequestError
from fake_table_service import FakeTableService, TableFault
from functions_env import Recorder, history_store

from memory_core.adapters.azure.table_history import AzureTableHistoryStore
from memory_core.adapters.azure.table_keys import partition_key
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.config import Settings
from memory_core.domain.messages import HistoryEntry, MemoryCandidate, MemoryEvent
from memory_core.domain.records import Scope
from memory_core.errors import ConfigurationError, TransientError
from memory_core.ports import DeadLetter, TurnStart

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
S1 = Scope.of("u1", "a1")
S1B = Scope.of("u1", "a10")  # shares a prefix with S1's agent: partitions must not mix
S2 = Scope.of("u2", "a1")


def entry(
    memory_id: str,
    scope: Scope = S1,
    *,
    turn: str | None = None,
    event: MemoryEvent = MemoryEvent.ADD,
    minutes: int = 0,
    text: str = "likes tea",
) -> HistoryEntry:
    return HistoryEntry(
        memory_id=memory_id,
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        event=event,
        before=None,
        after={"memory": text, "id": memory_id},
        reason=f"{event.value} {memory_id}",
        turn_id=turn,
        at=T0 + timedelta(minutes=minutes),
    )


@asynccontextmanager
async def open_store(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    if kind == "sqlite":
        store: Any = SQLiteHistoryStore(tmp_path / "history.db")
    else:
        store = history_store(FakeTableService())
    try:
        yield store
    finally:
        await store.close()


def both(fn: Callable[[Any], Coroutine[Any, Any, None]]) -> Callable[[str, Path], None]:
    @pytest.mark.parametrize("kind", ["sqlite", "azure_table"])
    def test(kind: str, tmp_path: Path) -> None:
        async def body() -> None:
            async with open_store(kind, tmp_path) as store:
                await fn(store)

        asyncio.run(body())

    test.__name__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


# ------------------------------------------------------------------------------------------------
# The protocol, on both stores
# ------------------------------------------------------------------------------------------------


@both
async def test_begin_turn_keeps_the_first_attempts_candidates(store: Any) -> None:
    first = await store.begin_turn(
        TurnStart(
            S1,
            "t1",
            candidates=(MemoryCandidate(memory="likes tea"),),
            extraction_path="llm",
            fallback_reason=None,
            at=T0,
        )
    )
    again = await store.begin_turn(
        TurnStart(
            S1,
            "t1",
            candidates=(MemoryCandidate(memory="something else"),),
            extraction_path="rules",
            fallback_reason="timeout",
            at=T0 + timedelta(hours=1),
        )
    )
    assert again == first
    assert [c.memory for c in again.candidates] == ["likes tea"]
    assert again.extraction_path == "llm" and again.started_at == T0 and again.processed_at is None
    assert await store.journal(S1, "t2") is None
    assert await store.journal(S1B, "t1") is None


@both
async def test_record_step_is_atomic_and_idempotent(store: Any) -> None:
    await store.begin_turn(
        TurnStart(
            S1,
            "t1",
            candidates=(MemoryCandidate(memory="a"), MemoryCandidate(memory="b")),
            extraction_path="rules",
            fallback_reason=None,
            at=T0,
        )
    )
    assert await store.record_step(S1, "t1", 1, [entry("m2", turn="t1")]) is True
    assert await store.record_step(S1, "t1", 0, [entry("m1", turn="t1")]) is True
    assert await store.record_step(S1, "t1", 1, [entry("m2", turn="t1", text="changed")]) is False
    journal = await store.journal(S1, "t1")
    assert journal.completed_steps == frozenset({0, 1})
    entries = await store.for_turn(S1, "t1")
    assert [e.memory_id for e in entries] == ["m1", "m2"]  # decision order (step), not write order
    assert entries[1].after == {"memory": "likes tea", "id": "m2"}


@both
async def test_history_of_a_memory_is_oldest_first_across_turns_and_appends(store: Any) -> None:
    await store.record_step(S1, "t1", 0, [entry("m1", turn="t1")])
    await store.append([entry("m1", event=MemoryEvent.DELETE, minutes=5)])
    await store.record_step(S1, "t2", 0, [entry("m1", turn="t2", event=MemoryEvent.UPDATE, minutes=1)])
    await store.record_step(S1B, "t1", 0, [entry("m1", S1B, turn="t1")])
    events = [e.event for e in await store.for_memory(S1, "m1")]
    assert events == [MemoryEvent.ADD, MemoryEvent.DELETE, MemoryEvent.UPDATE]  # the order they were stored
    assert [e.user_id + "/" + e.agent_id for e in await store.for_memory(S1B, "m1")] == ["u1/a10"]
    assert len(await store.for_scope(S1)) == 3


@both
async def test_mark_turn_processed_keeps_the_first_time(store: Any) -> None:
    assert not await store.turn_processed(S1, "recall-1")
    await store.mark_turn_processed(S1, "recall-1", T0)  # never begun: an empty journal
    await store.mark_turn_processed(S1, "recall-1", T0 + timedelta(days=1))
    journal = await store.journal(S1, "recall-1")
    assert journal.processed_at == T0 and journal.candidates == () and journal.extraction_path == "none"
    assert await store.turn_processed(S1, "recall-1")
    assert not await store.turn_processed(S2, "recall-1")
    await store.begin_turn(
        TurnStart(S1, "t1", candidates=(), extraction_path="rules", fallback_reason=None, at=T0)
    )
    await store.mark_turn_processed(S1, "t1", T0 + timedelta(minutes=3))
    assert (await store.journal(S1, "t1")).processed_at == T0 + timedelta(minutes=3)


@both
async def test_a_journal_keeps_none_of_what_a_forget_request_took(store: Any) -> None:
    long = "I live in Berlin. " + "It is a long story about the city, " * 800  # split over properties
    said = (MemoryCandidate(memory="I live in Berlin", evidence=long), MemoryCandidate(memory="I like tea"))
    await store.begin_turn(TurnStart(S1, "t1", candidates=said, extraction_path="rules", fallback_reason=None, at=T0))
    await store.mark_turn_processed(S1, "t1", T0)
    await store.begin_turn(TurnStart(S1B, "t1", candidates=said, extraction_path="rules", fallback_reason=None, at=T0))

    def without_berlin(candidate: MemoryCandidate) -> MemoryCandidate:
        return candidate.forgotten(lambda text: "" if "Berlin" in text else text)

    assert await store.rewrite_candidates(S1, ["t1", "t1", "never-begun"], without_berlin) == 1
    journal = await store.journal(S1, "t1")
    assert [(c.memory, c.evidence) for c in journal.candidates] == [("[forgotten on request]", ""), ("I like tea", "")]
    assert journal.processed_at == T0 and journal.extraction_path == "rules"  # the rest of the journal stays
    assert await store.rewrite_candidates(S1, ["t1"], without_berlin) == 0  # nothing left to take
    other = await store.journal(S1B, "t1")  # another scope's journal is not touched
    assert [c.memory for c in other.candidates] == ["I live in Berlin", "I like tea"]


@both
async def test_purge_removes_one_agent_or_the_whole_user(store: Any) -> None:
    for scope in (S1, S1B, S2):
        await store.begin_turn(
            TurnStart(scope, "t1", candidates=(), extraction_path="rules", fallback_reason=None, at=T0)
        )
        await store.record_step(scope, "t1", 0, [entry("m1", scope, turn="t1")])
        await store.append([entry("m2", scope)])
        await store.mark_turn_processed(scope, "t1", T0)
    assert await store.purge("u1", "a10") == 2
    assert await store.for_scope(S1B) == [] and await store.journal(S1B, "t1") is None
    assert len(await store.for_scope(S1)) == 2
    assert await store.purge("u1") == 2
    assert await store.for_scope(S1) == [] and not await store.turn_processed(S1, "t1")
    assert len(await store.for_scope(S2)) == 2
    # After a purge the scope starts over cleanly.
    assert await store.record_step(S1, "t1", 0, [entry("m1", turn="t1")]) is True


# ------------------------------------------------------------------------------------------------
# The Table service specifics
# ------------------------------------------------------------------------------------------------


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def test_layout_partition_per_scope_and_ordered_row_keys() -> None:
    async def body() -> None:
        service = FakeTableService()
        store = history_store(service)
        await store.begin_turn(
            TurnStart(
                S1,
                "t1",
                candidates=(MemoryCandidate(memory="x"),),
                extraction_path="rules",
                fallback_reason=None,
                at=T0,
            )
        )
        await store.record_step(S1, "t1", 0, [entry("m1", turn="t1")])
        await store.record_step(S1, "t1", 1, [entry("m2", turn="t1")])
        await store.append([entry("m3")])
        keys = sorted(service.rows())
        assert keys == [
            ("u1|a1", "c"),
            ("u1|a1", "e|0000000000000001"),
            ("u1|a1", "e|0000000000000002"),
            ("u1|a1", "e|0000000000000003"),
            ("u1|a1", "j|t1"),
            ("u1|a1", "s|t1|000000"),
            ("u1|a1", "s|t1|000001"),
        ]
        assert service.rows()[("u1|a1", "c")]["seq"] == 3
        assert partition_key(S1) == "u1|a1"
        # A step is one transaction: the counter (ETag-checked after the first), the marker, the entry.
        batches = [r for r in service.requests if r.path.endswith("/$batch")]
        assert len(batches) == 3
        step_ops = [r for r in service.requests if r.batch][3:6]
        assert [op.method for op in step_ops] == ["PUT", "POST", "POST"]
        assert step_ops[0].headers["If-Match"].startswith('W/"')
        assert (
            step_ops[1].body["RowKey"] == "s|t1|000001" and step_ops[2].body["RowKey"] == "e|0000000000000002"
        )
        # Queries are bounded to the scope's partition and a row-key range.
        await store.for_memory(S1, "m1")
        query = [r for r in service.requests if r.method == "GET" and "$filter" in r.query][-1]
        assert query.query["$filter"] == [
            "PartitionKey eq 'u1|a1' and RowKey ge 'e|' and RowKey lt 'e}' and memory_id eq 'm1'"
        ]
        await store.close()

    run(body())


def test_a_concurrent_writer_makes_the_loser_retry_without_losing_or_doubling() -> None:
    async def body() -> None:
        service = FakeTableService()
        store = history_store(service)
        other = history_store(service)
        await store.append([entry("m0")])
        original = store._get

        raced = False

        async def get_then_race(pk: str, rk: str) -> Any:
            nonlocal raced
            result = await original(pk, rk)
            if rk == "c" and not raced:
                raced = True
                await other.append([entry("m-other")])
            return result

        store._get = get_then_race  # type: ignore[method-assign]
        assert await store.record_step(S1, "t1", 0, [entry("m1", turn="t1")]) is True
        ids = [e.memory_id for e in await other.for_scope(S1)]
        assert ids == ["m0", "m-other", "m1"]
        assert service.rows()[("u1|a1", "c")]["seq"] == 3

    run(body())


def test_throttling_is_retried_with_back_off_then_surfaces_as_transient() -> None:
    async def body() -> None:
        service = FakeTableService()
        sleep = Recorder()
        store = history_store(service, sleep=sleep, attempts=3)
        await store.append([entry("m0")])
        service.fail_next(
            TableFault(503, "ServerBusy"), TableFault(429, "TooManyRequests", {"Retry-After": "2"})
        )
        assert await store.turn_processed(S1, "t1") is False
        assert sleep.calls == [0.5, 2.0]
        service.fail_next(*[TableFault(exception=ServiceRequestError("connection reset"))] * 3)
        with pytest.raises(TransientError, match="after 3 attempts"):
            await store.for_memory(S1, "m0")

    run(body())


def test_long_records_are_split_over_properties_and_read_back_whole() -> None:
    async def body() -> None:
        service = FakeTableService()
        store = history_store(service)
        text = "記憶" * 20_000  # 40,000 characters: three chunks, each under the 64 KiB property limit
        long_entry = entry("m1", turn="t1", text=text)
        await store.begin_turn(
            TurnStart(
                S1,
                "t1",
                candidates=(MemoryCandidate(memory="記" * 3000),) * 12,
                extraction_path="llm",
                fallback_reason=None,
                at=T0,
            )
        )
        await store.record_step(S1, "t1", 0, [long_entry])
        (back,) = await store.for_turn(S1, "t1")
        assert back.after == long_entry.after
        assert len((await store.journal(S1, "t1")).candidates) == 12
        row = service.rows()[("u1|a1", "e|0000000000000001")]
        assert row["after_n"] == 3 and row["before_n"] == -1

    run(body())


def test_dead_letters_and_checkpoints() -> None:
    async def body() -> None:
        store = history_store(FakeTableService())
        for _ in range(2):  # recording twice keeps one
            await store.record_dead_letter(
                DeadLetter(
                    message_id="bad/id#1",
                    reason="ValidationError",
                    description="user_id: must match ...",
                    body=b'{"schema": "x"}',
                    session_id="u1|a1",
                    delivery_count=1,
                    enqueued_time=T0,
                    at=T0,
                )
            )
        (letter,) = await store.dead_letters()
        assert letter["message_id"] == "bad/id#1" and letter["reason"] == "ValidationError"
        assert letter["body"] == '{"schema": "x"}' and letter["session_id"] == "u1|a1"
        assert await store.get_checkpoint("forgetting-cursor") is None
        await store.set_checkpoint("forgetting-cursor", "u1|a1|m9")
        assert await store.get_checkpoint("forgetting-cursor") == "u1|a1|m9"
        await store.set_checkpoint("forgetting-cursor", None)
        assert await store.get_checkpoint("forgetting-cursor") is None
        # Purging a user removes their set-aside messages too (found by session), nobody else's.
        await store.record_dead_letter(
            DeadLetter(
                message_id="other",
                reason="ValidationError",
                description="...",
                body=b"{}",
                session_id="u2|a1",
                at=T0,
            )
        )
        await store.record_dead_letter(
            DeadLetter(message_id="anon", reason="ValidationError", description="...", body=b"", at=T0)
        )
        assert await store.purge("u1") == 0
        assert sorted(d["message_id"] for d in await store.dead_letters()) == ["anon", "other"]
        assert await store.purge("u2", "a1") == 0
        assert [d["message_id"] for d in await store.dead_letters()] == ["anon"]

    run(body())


def test_the_table_is_created_on_first_use_once() -> None:
    async def body() -> None:
        service = FakeTableService()
        store = history_store(service)
        assert "memoryhistory" not in service.tables
        await store.turn_processed(S1, "t1")
        await store.turn_processed(S1, "t2")
        creates = [r for r in service.requests if r.path.endswith("/Tables")]
        assert len(creates) == 1 and creates[0].body == {"TableName": "memoryhistory"}
        second = history_store(service)
        await second.turn_processed(S1, "t1")  # exists already: 409 is fine

    run(body())


def test_construction_by_the_composition_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_core import bootstrap

    assert bootstrap.build_history(Settings(store="azure_search", azure_search_endpoint="https://s.example")) is None
    with pytest.raises(ConfigurationError, match="MEMORY_HISTORY_TABLE_ENDPOINT"):
        AzureTableHistoryStore.create("")
    with pytest.raises(ConfigurationError, match="neither"):
        AzureTableHistoryStore.create("ftp://nope")

    created: list[dict[str, Any]] = []

    class Credential:
        def __init__(self, **kwargs: Any) -> None:
            created.append(kwargs)
            self.closed = False

        async def get_token(
            self, *scopes: str, **kwargs: Any
        ) -> Any:  # pragma: no cover - no request is made
            raise AssertionError("no request expected")

        async def close(self) -> None:
            self.closed = True

    import azure.identity.aio

    monkeypatch.setattr(azure.identity.aio, "DefaultAzureCredential", Credential)
    settings = Settings(
        store="azure_search",
        azure_search_endpoint="https://s.example",
        history_table_endpoint="https://acct.table.core.windows.net",
        azure_client_id="client-123",
    )
    store = bootstrap.build_history(settings)
    assert isinstance(store, AzureTableHistoryStore)
    assert created == [{"managed_identity_client_id": "client-123"}]
    assert store._client.url.startswith("https://acct.table.core.windows.net")
    credential = store._owned[-1]
    run(store.close())
    assert credential.closed
    azurite = AzureTableHistoryStore.create("UseDevelopmentStorage=true")
    assert "127.0.0.1:10002" in azurite._client.url
    run(azurite.close())
