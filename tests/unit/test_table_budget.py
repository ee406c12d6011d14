"""The Azure Table entity budget, measured the service's way: 2 bytes a UTF-16 code unit (an emoji
outside the BMP is two units) plus per-property overhead, at most 1 MiB an entity; the JSON the SDK
sends (non-ASCII escaped) within 1 MiB too. Pure functions; the store against Azurite is in
``tests/integration/test_azurite_table_history.py``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory_core.adapters.azure.table_entities import (
    CHUNK_CHARS,
    ENTITY_BUDGET,
    MAX_ENTITY_BYTES,
    REQUEST_BUDGET,
    check_entity,
    entity_bytes,
    put_text,
    request_bytes,
)
from memory_core.adapters.azure.table_records import entry_entity
from memory_core.domain.messages import HistoryEntry, MemoryEvent
from memory_core.errors import PermanentError, ValidationError

JAPANESE = "記憶は時間とともに薄れる"
EMOJI = "🍵🌸"


def history_entry(text: str, before: str | None = None) -> HistoryEntry:
    return HistoryEntry(
        memory_id="m1",
        user_id="u1",
        agent_id="a1",
        event=MemoryEvent.UPDATE,
        before=None if before is None else {"memory": before},
        after={"memory": text},
        reason="update",
        turn_id="t1",
        at=datetime(2026, 11, 1, tzinfo=UTC),
    )


def build(text: str, before: str | None = None) -> dict[str, object]:
    return entry_entity("u1|a1", 1, history_entry(text, before), "t1", 0, 0)


def test_the_size_counts_two_bytes_a_utf16_code_unit_and_the_overheads() -> None:
    base = {"PartitionKey": "p", "RowKey": "r"}
    empty = entity_bytes(base)
    assert empty == 4 + 34 + 2 * 2  # 4, the service's Timestamp, two key characters
    # A string property: 8 + 2 a character of its name + 4 + 2 a UTF-16 code unit of its value.
    assert entity_bytes({**base, "ab": "x" * 10}) - empty == 8 + 4 + 4 + 20
    assert entity_bytes({**base, "ab": "記" * 10}) - empty == 8 + 4 + 4 + 20  # a BMP character: one unit
    assert entity_bytes({**base, "ab": "🍵" * 10}) - empty == 8 + 4 + 4 + 40  # outside the BMP: two units
    assert (
        entity_bytes({**base, "n": 7}) - empty == 8 + 2 + 8
        and entity_bytes({**base, "b": True}) - empty == 11
    )
    # The JSON the SDK sends escapes non-ASCII: six bytes a BMP character, twelve an emoji.
    assert request_bytes({"a": "記" * 10}) == len(json.dumps({"a": "記" * 10})) == len('{"a": ""}') + 60
    assert request_bytes({"a": "🍵" * 10}) == len('{"a": ""}') + 120


def test_chunks_fit_a_property_even_when_every_character_is_an_emoji() -> None:
    entity: dict[str, object] = {}
    put_text(entity, "body", "🍵" * (CHUNK_CHARS + 5))
    assert entity["body_n"] == 2
    assert all(len(str(entity[f"body_{i}"]).encode("utf-16-le")) <= 64 * 1024 for i in range(2))
    put_text(entity, "none", None)
    assert entity["none_n"] == -1


@pytest.mark.parametrize(
    ("text", "fits_up_to", "refused_at"),
    [
        ("memory ", 500_000, 530_000),  # ASCII: the service's 2 bytes a character decide
        (JAPANESE, 150_000, 180_000),  # Japanese: its 6-byte JSON escapes decide (Azurite's 1 MiB body)
        (EMOJI, 70_000, 90_000),  # emoji: 12 bytes of JSON, 4 bytes stored, a character
    ],
)
def test_long_japanese_and_emoji_text_fits_up_to_the_budget(
    text: str, fits_up_to: int, refused_at: int
) -> None:
    def of(n: int) -> str:
        return (text * (n // len(text) + 1))[:n]

    entity = build(of(fits_up_to))
    check_entity(entity, "history entry")
    assert (
        entity_bytes(entity) <= ENTITY_BUDGET <= MAX_ENTITY_BYTES and request_bytes(entity) <= REQUEST_BUDGET
    )
    with pytest.raises(ValidationError) as refused:
        check_entity(build(of(refused_at)), "history entry of memory 'm1'")
    error = refused.value
    assert isinstance(error, PermanentError) and error.field == "after"
    assert "history entry of memory 'm1'" in str(error) and "1,048,576" in str(error)


def test_the_largest_text_field_is_named() -> None:
    with pytest.raises(ValidationError) as refused:
        check_entity(build("short", before=JAPANESE * 20_000), "history entry")
    assert refused.value.field == "before"
