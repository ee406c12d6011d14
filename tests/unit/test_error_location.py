"""Errors name a field briefly and never carry a long input (memory_core.domain.validation)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, JsonValue

from memory_core.domain.validation import (
    MAX_ERROR_FIELD_CHARS,
    MAX_METADATA_DEPTH,
    check_metadata_depth,
    error_location,
    error_message,
    parse_model,
    validate_caller_metadata,
)
from memory_core.errors import ValidationError


def nested(depth: int, inner: Any = "x") -> Any:
    for index in range(depth):
        inner = {"k": inner} if index % 2 else [inner]
    return inner


def test_a_short_location_is_kept_and_a_long_one_cut_at_a_dot() -> None:
    assert error_location(("messages", 0, "text")) == "messages.0.text"
    long = error_location(("metadata", *["k", "dict"] * 400))
    assert long.startswith("metadata.k.dict.") and long.endswith(".…") and len(long) <= MAX_ERROR_FIELD_CHARS
    assert len(error_location(("x" * 500,))) == MAX_ERROR_FIELD_CHARS
    assert error_location(()) == ""


def test_a_long_message_is_cut() -> None:
    assert error_message("short") == "short"
    assert len(error_message("y" * 5000)) == 300


def test_metadata_depth_is_counted_over_objects_and_lists() -> None:
    check_metadata_depth(nested(MAX_METADATA_DEPTH))
    check_metadata_depth({"wide": list(range(10_000))})
    for depth in (MAX_METADATA_DEPTH + 1, 100_000):
        with pytest.raises(ValidationError) as refused:
            check_metadata_depth(nested(depth))
        assert refused.value.field == "metadata" and str(MAX_METADATA_DEPTH) in refused.value.message
    with pytest.raises(ValidationError, match="metadata"):
        validate_caller_metadata({"a": nested(MAX_METADATA_DEPTH)})  # the metadata object is a level


class Deep(BaseModel):
    value: dict[str, JsonValue]


def test_a_pydantic_error_deep_in_a_value_names_a_short_field() -> None:
    with pytest.raises(ValidationError) as refused:
        parse_model(Deep, {"value": {"k": nested(600)}})  # past pydantic's own depth limit
    assert refused.value.field.startswith("value.") and len(refused.value.field) <= MAX_ERROR_FIELD_CHARS
