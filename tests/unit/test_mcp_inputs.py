"""The MCP tools' inputs: text stays text, a long conversation is cut into turns, errors in plain words."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from memory_core.domain.messages import MAX_TURN_BYTES, MessageRole, TurnMessage
from memory_core.domain.records import Scope
from memory_core.domain.search import SearchMode
from memory_core.entrypoints.mcp.arguments import decode_json_strings, plain_errors, takes_text
from memory_core.entrypoints.mcp.models import ChatMessage
from memory_core.entrypoints.mcp.transcript import (
    CHUNK_BYTES,
    CHUNK_MESSAGES,
    MAX_TRANSCRIPT_BYTES,
    MAX_TRANSCRIPT_MESSAGES,
    chunk_id,
    chunks,
    exchanges,
)
from memory_core.errors import ValidationError

SCOPE = Scope.of("alice", "default")


def talk(count: int, *, size: int = 10) -> list[TurnMessage]:
    """``count`` messages, the user first, then turn and turn about."""
    roles = (MessageRole.USER, MessageRole.ASSISTANT)
    return [TurnMessage(role=roles[i % 2], text=f"{i:04d} " + "x" * size) for i in range(count)]


# -- text stays text ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, True),
        (str | None, True),
        (Literal["active", "archived"] | None, True),
        (SearchMode | None, True),
        (datetime | None, True),
        (int, False),
        (list[ChatMessage] | None, False),
        (dict[str, Any] | None, False),
        (bool, False),
    ],
)
def test_a_parameter_takes_text_when_a_string_can_be_its_value(annotation: Any, expected: bool) -> None:
    assert takes_text(annotation) is expected


class Arguments(BaseModel):
    text: str | None = None
    messages: list[ChatMessage] | None = None
    filters: dict[str, Any] | None = None
    top: Annotated[int, Field(ge=1, le=50)] = 5
    status: Literal["active", "archived"] | None = None


@pytest.mark.parametrize("value", ['{"a": 1}', "[1, 2]", "null", "42", "true", '"quoted"'])
def test_a_json_looking_string_for_a_text_parameter_stays_that_string(value: str) -> None:
    decoded = decode_json_strings({"text": value, "status": "null"}, Arguments.model_fields)
    assert decoded == {"text": value, "status": "null"}
    assert Arguments.model_validate({"text": decoded["text"]}).text == value


def test_a_string_for_a_list_or_object_parameter_is_read_as_json() -> None:
    given = {"messages": '[{"role": "user", "content": "hi"}]', "filters": '{"category": "diet"}', "top": "3"}
    decoded = decode_json_strings(given, Arguments.model_fields)
    assert decoded["messages"] == [{"role": "user", "content": "hi"}]
    assert decoded["filters"] == {"category": "diet"}
    assert decoded["top"] == "3"  # a number stays for validation to read
    assert decode_json_strings({"filters": "not json"}, Arguments.model_fields) == {"filters": "not json"}


# -- errors in plain words ------------------------------------------------------------------------
def rejected(data: dict[str, Any]) -> str:
    with pytest.raises(PydanticValidationError) as caught:
        Arguments.model_validate(data)
    return plain_errors(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": {"a": 1}}, "text: must be text (a string), not an object"),
        ({"text": 42}, "text: must be text (a string), not a number"),
        (
            {"messages": [{"role": "user", "content": "a"}] * 3 + [{"role": "bot", "content": "b"}]},
            "messages.3.role: 'bot' is not a role; use user, assistant, system, tool or developer",
        ),
        ({"messages": [{"content": "hi"}]}, "messages.0.role: is required"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content: must be text (a string) or a list, not a number"),
        ({"messages": {"role": "user"}}, "messages: must be a list, not an object"),
        ({"top": 0}, "top: must be at least 1, not 0"),
        ({"top": 99}, "top: must be at most 50, not 99"),
        ({"top": "many"}, "top: must be a whole number, not 'many'"),
        ({"status": "gone"}, "status: 'gone' is not a status; use active or archived"),
        ({"filters": [1]}, "filters: must be an object, not a list"),
    ],
)
def test_each_rejected_argument_is_named_in_plain_words(data: dict[str, Any], message: str) -> None:
    said = rejected(data)
    assert said == message
    assert "type=" not in said and "Input should" not in said and "validation error" not in said


def test_several_problems_are_named_and_the_rest_counted() -> None:
    said = rejected({"top": 0, "status": "x", "text": 1, "filters": 2, "messages": 3})
    assert said.count(";") >= 2 and said.endswith("(and 2 more problem(s))"), said


# -- a long conversation as several turns ---------------------------------------------------------
def test_a_user_message_stays_with_the_message_it_answers() -> None:
    said = [
        TurnMessage(role=MessageRole.SYSTEM, text="be brief"),
        TurnMessage(role=MessageRole.USER, text="hi"),
        TurnMessage(role=MessageRole.ASSISTANT, text="Where do you live?"),
        TurnMessage(role=MessageRole.USER, text="Osaka."),
        TurnMessage(role=MessageRole.USER, text="Since May."),
        TurnMessage(role=MessageRole.ASSISTANT, text="Noted."),
    ]
    assert [[m.text for m in piece] for piece in exchanges(said)] == [
        ["be brief", "hi"],
        ["Where do you live?", "Osaka.", "Since May."],
        ["Noted."],
    ]


def test_a_long_conversation_is_cut_between_exchanges_within_the_turn_limits() -> None:
    said = talk(95)
    turns = chunks(said)
    assert [m for turn in turns for m in turn] == said  # every message once, in order
    assert len(turns) == 5 and all(len(turn) <= CHUNK_MESSAGES for turn in turns)
    for turn in turns[1:]:
        assert turn[0].role is MessageRole.ASSISTANT  # a turn opens with the question its user answers
    assert chunks(said) == turns  # the same cuts every time


def test_big_messages_make_smaller_turns_and_no_turn_exceeds_the_size_a_turn_takes() -> None:
    said = talk(12, size=30000)
    turns = chunks(said)
    assert [m for turn in turns for m in turn] == said
    for turn in turns:
        size = sum(len(m.text.encode()) for m in turn)
        assert size <= CHUNK_BYTES < MAX_TURN_BYTES
    assert [len(turn) for turn in turns] == [1, 2, 2, 2, 2, 2, 1]  # the user's opening alone, then pairs


def test_a_short_conversation_is_one_turn() -> None:
    assert len(chunks(talk(3))) == 1
    assert len(chunks([TurnMessage(role=MessageRole.USER, text="I like tea")])) == 1


def test_a_conversation_sent_again_with_more_messages_keeps_its_earlier_full_turns() -> None:
    first = [chunk_id(SCOPE, turn) for turn in chunks(talk(60))]
    longer = [chunk_id(SCOPE, turn) for turn in chunks(talk(90))]
    assert longer[:2] == first[:2] and len(set(longer)) == len(longer)


def test_a_turn_id_comes_from_the_scope_and_the_words() -> None:
    turn = talk(4)
    assert chunk_id(SCOPE, turn) == chunk_id(SCOPE, list(turn))
    assert chunk_id(SCOPE, turn) != chunk_id(Scope.of("bob", "default"), turn)
    assert chunk_id(SCOPE, turn) != chunk_id(SCOPE, turn[:3])
    swapped = [TurnMessage(role=MessageRole.ASSISTANT, text=turn[0].text), *turn[1:]]
    assert chunk_id(SCOPE, turn) != chunk_id(SCOPE, swapped)
    assert len(chunk_id(SCOPE, turn)) <= 128 and chunk_id(SCOPE, turn).startswith("turn-")


def test_a_conversation_beyond_the_call_limits_is_refused_in_plain_words() -> None:
    with pytest.raises(ValidationError) as caught:
        chunks(talk(MAX_TRANSCRIPT_MESSAGES + 1))
    assert caught.value.field == "messages" and f"the most is {MAX_TRANSCRIPT_MESSAGES}" in caught.value.message
    most = chunks(talk(MAX_TRANSCRIPT_MESSAGES))
    assert sum(map(len, most)) == MAX_TRANSCRIPT_MESSAGES and all(len(t) <= CHUNK_MESSAGES for t in most)
    with pytest.raises(ValidationError) as caught:
        chunks(talk(40, size=MAX_TRANSCRIPT_BYTES // 39))
    assert "send the conversation in parts" in caught.value.message


def test_the_mcp_page_states_the_limits_the_code_enforces() -> None:
    import re
    from pathlib import Path

    from memory_core.domain.messages import MAX_MESSAGE_CHARS

    page = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")

    def documented(what: str) -> str:
        match = re.search(rf"^\| {re.escape(what)} \| ([^|]+) \|$", page, re.M)
        assert match, f"docs/mcp.md has no limit {what!r}"
        return match.group(1).strip()

    assert documented("messages in one call") == f"{MAX_TRANSCRIPT_MESSAGES:,}"
    assert documented("text in one call (UTF-8)") == f"{MAX_TRANSCRIPT_BYTES // (1024 * 1024)} MiB"
    assert documented("characters in one message") == f"{MAX_MESSAGE_CHARS:,}"
    assert documented("messages in one recorded part") == f"{CHUNK_MESSAGES:,}"
    assert documented("text in one recorded part (UTF-8)") == f"{CHUNK_BYTES // 1024} KiB"
