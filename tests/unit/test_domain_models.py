"""Validation of the domain model: every bad input names its field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core.domain.messages import Turn
from memory_core.domain.paging import MAX_SCAN_LIMIT, PageRequest
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.validation import parse_model, validate_category
from memory_core.errors import ValidationError

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def base(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "user_id": "user-1",
        "agent_id": "agent-1",
        "memory": "I like tea",
        "created_at": NOW.isoformat(),
        "updated_at": NOW.isoformat(),
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"user_id": "x' or 1=1"}, "user_id"),
        ({"agent_id": ""}, "agent_id"),
        ({"memory": "   "}, "memory"),
        ({"memory": "x" * 4001}, "memory"),
        ({"memory": "bell\x07"}, "memory"),
        ({"importance": 1.5}, "importance"),
        ({"confidence": -0.1}, "confidence"),
        ({"retention_score": float("nan")}, "retention_score"),
        ({"access_count": -1}, "access_count"),
        ({"status": "gone"}, "status"),
        ({"id": "a b"}, "id"),
        ({"category": "a'b"}, "category"),
        ({"embedding": [0.1, float("inf")]}, "embedding"),
        ({"unknown": 1}, "unknown"),
        ({"created_at": "yesterday"}, "created_at"),
    ],
)
def test_bad_records_name_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_model(MemoryRecord, base(**changes))
    assert info.value.field.split(".")[0] == field, info.value


def test_updated_before_created_is_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_model(MemoryRecord, base(updated_at=(NOW - timedelta(days=1)).isoformat()))


def test_timestamps_become_utc_and_categories_lowercase() -> None:
    record = parse_model(
        MemoryRecord,
        base(
            created_at="2026-11-01T09:00:00+09:00",
            updated_at="2026-11-01T09:00:00+09:00",
            category=" Preference ",
        ),
    )
    assert record.created_at == datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
    assert record.category == "preference"
    assert validate_category("食事") == "食事"


def test_scope_accepts_documented_characters() -> None:
    scope = Scope.of("alice@example.com", "travel-agent_v2.1:prod")
    assert scope.user_id == "alice@example.com"
    with pytest.raises(ValidationError) as info:
        Scope.of("a" * 129, "x")
    assert info.value.field == "user_id" and "128" in info.value.message


def test_a_rule_of_the_whole_model_names_its_own_field() -> None:
    """A model validator has no location in pydantic's error; the field it names is kept."""
    with pytest.raises(ValidationError) as info:
        parse_model(MemorySearchOptions, {"mode": "semantic", "order_by": "importance desc"})
    assert info.value.field == "order_by", info.value
    # A model rule that raises a plain ValueError still names the model.
    with pytest.raises(ValidationError) as info:
        parse_model(MemoryRecord, base(updated_at=(NOW - timedelta(days=1)).isoformat()))
    assert info.value.field == "MemoryRecord" and "updated_at" in info.value.message


def test_search_options_bounds() -> None:
    with pytest.raises(ValidationError) as info:
        parse_model(MemorySearchOptions, {"top": 0})
    assert info.value.field == "top"
    with pytest.raises(ValidationError):
        parse_model(MemorySearchOptions, {"mode": "fuzzy"})
    with pytest.raises(ValidationError):
        parse_model(MemorySearchOptions, {"filter": "user_id ne 'x'"})
    assert parse_model(MemorySearchOptions, {"category": "Plan"}).category == "plan"


@pytest.mark.parametrize("limit", [0, MAX_SCAN_LIMIT + 1, True, 2.0, "10"])
def test_a_page_request_refuses_a_limit_out_of_range(limit: object) -> None:
    with pytest.raises(ValidationError) as info:
        PageRequest(limit=limit)  # type: ignore[arg-type]
    assert (info.value.field, info.value.message) == ("limit", f"must be an integer between 1 and {MAX_SCAN_LIMIT}")
    assert PageRequest(limit=MAX_SCAN_LIMIT).limit == MAX_SCAN_LIMIT and PageRequest().limit == 100


def test_a_search_request_keeps_what_it_is_given() -> None:
    scope = Scope.of("u", "a")
    keyword = SearchRequest(scope, "tea")
    assert (keyword.vector, keyword.options) == (None, MemorySearchOptions())
    vector = [0.6, 0.8]
    options = MemorySearchOptions(mode=SearchMode.VECTOR)
    request = SearchRequest(scope, "tea", vector, options)
    assert request.vector is vector and request.options is options  # never copied
    with pytest.raises(AttributeError):
        request.query = "coffee"  # type: ignore[misc]


def test_turn_schema_and_messages() -> None:
    turn = {
        "schema": "memory-core.turn.v1",
        "turn_id": "t-1",
        "user_id": "u",
        "agent_id": "a",
        "occurred_at": NOW.isoformat(),
        "messages": [{"role": "user", "text": "hi"}],
    }
    assert parse_model(Turn, turn).scope == Scope.of("u", "a")
    with pytest.raises(ValidationError) as info:
        parse_model(Turn, {**turn, "schema": "memory-core.turn.v0"})
    assert info.value.field.startswith("schema")
    with pytest.raises(ValidationError) as info:
        parse_model(Turn, {**turn, "messages": []})
    assert info.value.field == "messages"
    with pytest.raises(ValidationError) as info:
        parse_model(Turn, {**turn, "messages": [{"role": "hacker", "text": "x"}]})
    assert info.value.field.startswith("messages")
