"""A refused value gets a short error naming its field, never an echo of the input: deeply nested
metadata over HTTP (``memory-core serve``'s runtime on a socket) and through the Python API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import running, turn_body

from memory_core import Memory
from memory_core.domain.validation import MAX_METADATA_DEPTH
from memory_core.errors import ValidationError

#: What an error may take in all (message and field), whatever the input.
SHORT = 200


def nested(depth: int) -> dict[str, Any]:
    """``{"k": {"k": ... "x"}}``: ``depth`` levels of objects."""
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


def raw_turn(depth: int) -> bytes:
    """A turn whose metadata nests ``depth`` objects, as bytes (deeper than ``json.dumps`` can write)."""
    head = json.dumps(turn_body(1, "I like green tea.")).encode()[:-1]
    return head + b', "metadata": ' + b'{"k": ' * depth + b'"x"' + b"}" * depth + b"}"


@pytest.mark.parametrize("depth", [MAX_METADATA_DEPTH + 1, 200, 900])
def test_deep_metadata_over_http_is_a_short_422_naming_metadata(tmp_path: Path, depth: int) -> None:
    with running(tmp_path / "memory.db") as runtime:
        reply = runtime.client.post("/api/turns", raw=raw_turn(depth))
        assert reply.status == 422, reply.body
        error = reply.body["error"]
        assert error["field"] == "metadata" and error["code"] == "validation_error"
        assert f"more than {MAX_METADATA_DEPTH} levels deep" in error["message"]
        assert len(error["message"]) + len(error["field"]) <= SHORT
        assert '"k"' not in json.dumps(reply.body) and "k.dict" not in json.dumps(reply.body)
        ok = runtime.client.post("/api/turns", raw=raw_turn(MAX_METADATA_DEPTH))
        assert ok.status == 202, ok.body  # the limit itself is allowed


def test_metadata_too_deep_to_read_is_a_short_400_naming_the_body(tmp_path: Path) -> None:
    with running(tmp_path / "memory.db") as runtime:
        reply = runtime.client.post("/api/turns", raw=raw_turn(20_000))
        assert reply.status == 400 and reply.body["error"]["field"] == "body"
        assert len(reply.body["error"]["message"]) <= SHORT


def test_deep_metadata_through_the_python_api_names_metadata(tmp_path: Path) -> None:
    with Memory(tmp_path / "memory.db") as memory:
        for depth in (MAX_METADATA_DEPTH + 1, 200, 5000):
            with pytest.raises(ValidationError) as refused:
                memory.add("I like green tea.", user_id="u1", metadata=nested(depth))
            assert refused.value.field == "metadata", refused.value
            assert len(str(refused.value)) <= SHORT
        looped: dict[str, Any] = {}
        looped["self"] = looped  # not JSON at all, and never walked forever
        with pytest.raises(ValidationError) as refused:
            memory.add("I like green tea.", user_id="u1", metadata=looped)
        assert refused.value.field == "metadata"
        assert memory.get_all(user_id="u1") == []  # nothing refused was stored
        memory.add("I like green tea.", user_id="u1", metadata=nested(MAX_METADATA_DEPTH))
        stored = memory.get_all(user_id="u1")
        assert stored and all(r.metadata.get("k") for r in stored)


def test_deep_metadata_of_an_update_names_metadata(tmp_path: Path) -> None:
    with Memory(tmp_path / "memory.db") as memory:
        memory.add("I like green tea.", user_id="u1")
        (record, *_) = memory.get_all(user_id="u1")
        with pytest.raises(ValidationError) as refused:
            memory.update(record.id, "I like black tea.", user_id="u1", metadata=nested(200))
        assert refused.value.field == "metadata" and len(str(refused.value)) <= SHORT
