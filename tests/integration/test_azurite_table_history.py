"""The Azure Table history against Azurite's Table service (npm ``azurite``), beside the fake of
``test_azure_table_history.py``: the real wire format, ETag concurrency, entity-group transactions and
the service's size limits, which the fake only imitates.

Azurite is started once for the module (``azurite.py``); every test works in a table of its own. The
tests are skipped with an install hint when ``azurite-table`` is not found, and fail instead under
``MEMORY_REQUIRE_AZURITE=1`` (``.ci/run``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from azurite import Azurite, running_azurite
from test_azure_table_history import S1, S1B, S2, T0, entry

from memory_core.adapters.azure.retry import RetrySettings
from memory_core.adapters.azure.table_entities import (
    MAX_TRANSACTION_BYTES,
    check_entity,
    entity_bytes,
    request_bytes,
)
from memory_core.adapters.azure.table_history import DEFAULT_TABLE, AzureTableHistoryStore
from memory_core.adapters.azure.table_records import entry_entity
from memory_core.domain.messages import MemoryCandidate, MemoryEvent
from memory_core.errors import PermanentError, ValidationError
from memory_core.ports import DeadLetter, TurnStart

JAPANESE = "記憶は時間とともに薄れるが、大切なことは残る。"
EMOJI = "🍵🗻🌸"  # outside the BMP: two UTF-16 code units each


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    with running_azurite(tmp_path_factory.mktemp("azurite")) as server:
        yield server


@asynccontextmanager
async def history(azurite: Azurite, table: str | None = None) -> AsyncIterator[AzureTableHistoryStore]:
    store = AzureTableHistoryStore.create(
        azurite.connection_string,
        table_name=table or f"t{uuid.uuid4().hex[:24]}",
        retry=RetrySettings(attempts=2, base_delay=0.05, max_delay=0.2),
    )
    try:
        yield store
    finally:
        await store.close()


def on_azurite(
    fn: Callable[[AzureTableHistoryStore], Coroutine[Any, Any, None]],
) -> Callable[[Azurite], None]:
    def test(azurite: Azurite) -> None:
        async def body() -> None:
            async with history(azurite) as store:
                await fn(store)

        asyncio.run(body())

    test.__name__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


def repeat(text: str, units: int) -> str:
    """``text`` repeated to about ``units`` characters."""
    return (text * (units // len(text) + 1))[:units]


# ------------------------------------------------------------------------------------------------
# The history store's contract
# ------------------------------------------------------------------------------------------------


def test_azurite_starts_quickly(azurite: Azurite) -> None:
    assert azurite.started_in < 25, f"Azurite took {azurite.started_in:.1f} s to listen"


@on_azurite
async def test_turn_journal_steps_and_history(store: AzureTableHistoryStore) -> None:
    first = await store.begin_turn(
        TurnStart(
            S1, "t1", candidates=(MemoryCandidate(memory="緑茶が好き"), MemoryCandidate(memory="b")),
            extraction_path="llm", fallback_reason=None, at=T0,
        )
    )  # fmt: skip
    again = await store.begin_turn(
        TurnStart(
            S1,
            "t1",
            candidates=(),
            extraction_path="rules",
            fallback_reason="timeout",
            at=T0 + timedelta(hours=1),
        )
    )
    assert again == first and [c.memory for c in again.candidates] == ["緑茶が好き", "b"]
    assert await store.record_step(S1, "t1", 1, [entry("m2", turn="t1")]) is True
    assert await store.record_step(S1, "t1", 0, [entry("m1", turn="t1", text=JAPANESE + EMOJI)]) is True
    assert await store.record_step(S1, "t1", 1, [entry("m2", turn="t1", text="changed")]) is False
    journal = await store.journal(S1, "t1")
    assert (
        journal is not None and journal.completed_steps == frozenset({0, 1}) and journal.processed_at is None
    )
    entries = await store.for_turn(S1, "t1")
    assert [e.memory_id for e in entries] == ["m1", "m2"]
    assert entries[0].after == {"memory": JAPANESE + EMOJI, "id": "m1"}
    await store.append([entry("m1", event=MemoryEvent.DELETE, minutes=5)])
    assert [e.event for e in await store.for_memory(S1, "m1")] == [MemoryEvent.ADD, MemoryEvent.DELETE]
    assert await store.for_memory(S1B, "m1") == []
    assert not await store.turn_processed(S1, "t1")
    await store.mark_turn_processed(S1, "t1", T0 + timedelta(minutes=3))
    await store.mark_turn_processed(S1, "t1", T0 + timedelta(days=1))
    processed = await store.journal(S1, "t1")
    assert processed is not None and processed.processed_at == T0 + timedelta(minutes=3)
    await store.mark_turn_processed(S2, "recall-1", T0)  # never begun: an empty journal
    recall = await store.journal(S2, "recall-1")
    assert recall is not None and recall.candidates == () and recall.extraction_path == "none"


@on_azurite
async def test_a_journal_split_over_properties_keeps_none_of_what_was_forgotten(store: AzureTableHistoryStore) -> None:
    long = repeat(JAPANESE, 40_000)  # over several string properties
    said = (MemoryCandidate(memory="緑茶が好き", evidence=long), MemoryCandidate(memory="犬を飼っている"))
    await store.begin_turn(TurnStart(S1, "t9", candidates=said, extraction_path="rules", fallback_reason=None, at=T0))
    await store.mark_turn_processed(S1, "t9", T0)

    def without_tea(candidate: MemoryCandidate) -> MemoryCandidate:
        return candidate.forgotten(lambda text: "" if "緑茶" in text or "記憶" in text else text)

    assert await store.rewrite_candidates(S1, ["t9"], without_tea) == 1
    journal = await store.journal(S1, "t9")
    assert journal is not None and journal.processed_at == T0
    assert [(c.memory, c.evidence) for c in journal.candidates] == [("[forgotten on request]", ""), ("犬を飼っている", "")]


@on_azurite
async def test_concurrent_writers_of_one_scope_take_turns_on_the_counter(
    store: AzureTableHistoryStore,
) -> None:
    # Two writers race for the scope's counter; ETags make the loser try again: no lost or doubled entries.
    await asyncio.gather(*(store.append([entry(f"m{i}", minutes=i)]) for i in range(12)))
    ids = sorted(e.memory_id for e in await store.for_scope(S1))
    assert ids == sorted(f"m{i}" for i in range(12))


@on_azurite
async def test_purge_removes_one_agent_or_the_whole_user(store: AzureTableHistoryStore) -> None:
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
    assert await store.record_step(S1, "t1", 0, [entry("m1", turn="t1")]) is True  # starts over cleanly


@on_azurite
async def test_dead_letters_and_checkpoints(store: AzureTableHistoryStore) -> None:
    letter = DeadLetter(
        message_id="turn:abc",
        reason="ValidationError",
        description="user_id: must match ...",
        body=json.dumps({"schema": "memory-core.turn.v1", "text": JAPANESE}, ensure_ascii=False).encode(),
        session_id="u1|a1",
        delivery_count=1,
        enqueued_time=T0,
        at=T0,
    )
    await store.record_dead_letter(letter)
    await store.record_dead_letter(letter)  # recording twice keeps one
    (recorded,) = await store.dead_letters()
    assert recorded["body_complete"] and json.loads(recorded["body"])["text"] == JAPANESE
    assert recorded["session_id"] == "u1|a1" and recorded["body_bytes"] == len(letter.body)
    # Set aside again after it was read: the delete with the old ETag keeps the new record.
    await store.record_dead_letter(letter)
    assert await store.delete_dead_letter("turn:abc", etag=recorded["etag"]) is False
    (newer,) = await store.dead_letters()
    assert await store.delete_dead_letter("turn:abc", etag=newer["etag"]) is True
    assert await store.dead_letters() == []
    assert await store.delete_dead_letter("turn:abc") is True  # already gone
    await store.set_checkpoint("forgetting-cursor", "u1|a1|m9")
    assert await store.get_checkpoint("forgetting-cursor") == "u1|a1|m9"
    await store.set_checkpoint("forgetting-cursor", None)
    assert await store.get_checkpoint("forgetting-cursor") is None


# ------------------------------------------------------------------------------------------------
# The size budget: 2 bytes a UTF-16 code unit, 1 MiB an entity, 4 MiB a transaction
# ------------------------------------------------------------------------------------------------


def largest_fitting(make: Callable[[int], dict[str, Any]], high: int) -> int:
    """The largest ``n`` for which ``make(n)`` passes :func:`check_entity`."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        try:
            check_entity(make(middle), "probe")
            low = middle
        except ValidationError:
            high = middle - 1
    return low


@pytest.mark.parametrize("alphabet", ["ascii", "japanese", "emoji"])
def test_an_entity_at_the_budget_is_accepted_and_one_character_more_is_refused(
    azurite: Azurite, alphabet: str
) -> None:
    """The budget is never looser than the service: the largest entity it allows is stored whole."""
    text = {"ascii": "memory ", "japanese": JAPANESE, "emoji": EMOJI}[alphabet]

    def make(n: int) -> dict[str, Any]:
        return entry_entity("u1|a1", 1, entry("m1", text=repeat(text, n)), "t1", 0, 0)

    n = largest_fitting(make, 600_000)
    assert n > {"ascii": 500_000, "japanese": 150_000, "emoji": 70_000}[alphabet]
    assert entity_bytes(make(n)) <= 1024 * 1024 and request_bytes(make(n)) <= 1024 * 1024

    async def body() -> None:
        async with history(azurite) as store:
            big = entry("m1", turn="t1", text=repeat(text, n))
            assert await store.record_step(S1, "t1", 0, [big]) is True
            (back,) = await store.for_turn(S1, "t1")
            assert back.after == big.after
            with pytest.raises(ValidationError, match="after") as refused:
                await store.record_step(S1, "t1", 1, [entry("m2", turn="t1", text=repeat(text, n + 40))])
            assert isinstance(refused.value, PermanentError) and refused.value.field == "after"
            assert [e.memory_id for e in await store.for_scope(S1)] == ["m1"]  # nothing half-written

    asyncio.run(body())


def test_the_service_agrees_an_oversized_entity_is_too_large(azurite: Azurite) -> None:
    """What the budget refuses, Azurite refuses too (so the budget is not merely conservative guesswork).

    Azurite (3.35) applies its entity limit to updates and upserts, measured on the request body: the
    JSON the SDK sends, where each Japanese character takes six bytes."""
    from azure.core.exceptions import HttpResponseError
    from azure.data.tables import TableClient

    table = TableClient.from_connection_string(azurite.connection_string, f"t{uuid.uuid4().hex[:24]}")
    table.create_table()
    try:
        entity = entry_entity("u1|a1", 1, entry("m1"), None, None, 0)
        entity.update({f"after_{i}": JAPANESE * 640 for i in range(40)})  # 16,000 characters each
        entity["after_n"] = 40
        with pytest.raises(ValidationError):
            check_entity(entity, "probe")
        with pytest.raises(HttpResponseError, match="larger than the maximum"):
            table.upsert_entity(entity)
    finally:
        table.delete_table()
        table.close()


@on_azurite
async def test_journal_candidates_over_the_budget_are_refused_naming_the_field(
    store: AzureTableHistoryStore,
) -> None:
    candidates = tuple(MemoryCandidate(memory=repeat(JAPANESE + EMOJI, 4000)) for _ in range(60))
    with pytest.raises(ValidationError, match="candidates") as refused:
        await store.begin_turn(
            TurnStart(S1, "t1", candidates=candidates, extraction_path="llm", fallback_reason=None, at=T0)
        )
    assert refused.value.field == "candidates"
    assert await store.journal(S1, "t1") is None
    # Within the budget, the same long Japanese and emoji text round-trips whole.
    journal = await store.begin_turn(
        TurnStart(S1, "t1", candidates=candidates[:12], extraction_path="llm", fallback_reason=None, at=T0)
    )
    assert [c.memory for c in journal.candidates] == [c.memory for c in candidates[:12]]


@on_azurite
async def test_appends_are_split_into_transactions_within_4_mib(store: AzureTableHistoryStore) -> None:
    # 14 entries of about 300 KB of JSON each (Japanese escapes to 6 bytes a character): over 4 MiB together.
    entries = [entry(f"m{i}", text=repeat(JAPANESE, 50_000), minutes=i) for i in range(14)]
    total = sum(
        request_bytes(entry_entity("u1|a1", 1, e, None, None, 0)) for e in entries
    )
    assert total > MAX_TRANSACTION_BYTES
    await store.append(entries)
    back = await store.for_scope(S1)
    assert [e.memory_id for e in back] == [f"m{i}" for i in range(14)]
    assert back[13].after == entries[13].after


@on_azurite
async def test_a_step_over_4_mib_is_refused_whole(store: AzureTableHistoryStore) -> None:
    step = [entry(f"m{i}", turn="t1", text=repeat(JAPANESE, 50_000)) for i in range(14)]
    with pytest.raises(ValidationError, match="transaction") as refused:
        await store.record_step(S1, "t1", 0, step)
    assert refused.value.field == "entries"
    assert await store.for_scope(S1) == []


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("control", b"\x01" * 250_000),  # JSON escapes each as \u0001: six times the text
        ("emoji", b"x" + ("🍵" * 70_000).encode()),  # over the 256 KiB cap, which falls inside a character
        ("latin1", "café".encode("latin-1") * 1000),  # not UTF-8
    ],
)
def test_a_dead_letter_too_large_or_not_utf8_is_kept_cut_and_marked(
    azurite: Azurite, name: str, body: bytes
) -> None:
    async def run() -> None:
        async with history(azurite) as store:
            await store.record_dead_letter(
                DeadLetter(
                    message_id=name, reason="X", description="d" * 9000, body=body, session_id="u1|a1", at=T0
                )
            )
            (recorded,) = await store.dead_letters()
            assert recorded["body_complete"] is False and recorded["body_bytes"] == len(body)
            kept = recorded["body"].rstrip("\ufffd")
            assert body.decode("utf-8", "replace").startswith(kept) and len(kept) > 1000
            assert len(recorded["description"]) == 8000

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------
# memory-core deadletters --source azure, end to end (the Service Bus client is a recorder)
# ------------------------------------------------------------------------------------------------


class RecordingSender:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send_messages(self, message: Any, *, timeout: float | None = None) -> None:
        self.sent.append(message)

    async def close(self) -> None:
        pass


class RecordingClient:
    def __init__(self) -> None:
        self.sender = RecordingSender()

    def get_queue_sender(self, queue_name: str) -> RecordingSender:
        assert queue_name == "memory-turns"
        return self.sender

    async def close(self) -> None:
        pass


def test_deadletters_command_lists_and_replays_the_azure_table(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memory_core import bootstrap
    from memory_core.adapters.azure.service_bus import ServiceBusTurnPublisher
    from memory_core.cli.main import main

    table = DEFAULT_TABLE  # what the command opens; the other tests use tables of their own
    client = RecordingClient()
    monkeypatch.setattr(
        bootstrap,
        "build_publisher",
        lambda settings: ServiceBusTurnPublisher("ns", "memory-turns", client=client),
    )
    monkeypatch.setenv("MEMORY_HISTORY_TABLE_ENDPOINT", azurite.connection_string)
    turn = {"schema": "memory-core.turn.v1", "turn_id": "turn-9", "user_id": "u1", "agent_id": "a1"}
    old, fresh = datetime.now(UTC) - timedelta(hours=3), datetime.now(UTC) - timedelta(minutes=5)

    async def seed() -> None:
        async with history(azurite, table) as store:
            for message_id, enqueued, reason in (
                ("turn:old", old, "AuthenticationError"),
                ("turn:new", fresh, "X"),
            ):
                await store.record_dead_letter(
                    DeadLetter(
                        message_id=message_id,
                        reason=reason,
                        description="HTTP 403 while role assignments propagate",
                        body=json.dumps(turn).encode(),
                        session_id="u1|a1",
                        delivery_count=1,
                        enqueued_time=enqueued,
                        at=enqueued,
                    )
                )

    asyncio.run(seed())
    db = str(tmp_path / "memory.db")
    out = StringIO()
    assert main(["--db", db, "deadletters", "list", "--source", "azure"], out=out) == 0
    text = out.getvalue()
    assert "2 dead letter(s) in azure" in text and "turn:old" in text and "AuthenticationError" in text
    out = StringIO()
    assert main(["--db", db, "deadletters", "replay", "--all", "--source", "azure", "--json"], out=out) == 1
    report = json.loads(out.getvalue())
    status = {r["id"]: r["status"] for r in report["results"]}
    assert status == {"turn:old": "replayed", "turn:new": "skipped"}  # inside the duplicate detection window
    (message,) = client.sender.sent
    assert message.message_id == "turn:old" and message.session_id == "u1|a1"
    assert b"".join(message.body) == json.dumps(turn).encode() and message.subject == "memory-core.turn.v1"
    out = StringIO()
    assert main(["--db", db, "--json", "deadletters", "list", "--source", "azure"], out=out) == 0
    assert [d["id"] for d in json.loads(out.getvalue())["dead_letters"]] == ["turn:new"]
