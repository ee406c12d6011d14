"""One turn format on every face: chat-API messages, optional turn_id and occurred_at, every problem listed
(memory_core.domain.chat.read_turn, memory_core.service.messages.parse_turns)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory_core.domain.chat import read_turn
from memory_core.domain.messages import Turn
from memory_core.domain.records import DEFAULT_AGENT_ID
from memory_core.domain.validation import parse_model
from memory_core.errors import ValidationError
from memory_core.service.messages import parse_turns

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = [
    {"role": "user", "content": "I moved to Lisbon last month."},
    {"role": "assistant", "content": [{"type": "output_text", "text": "Nice, how is it?"}]},
]


def test_chat_messages_without_id_or_date_are_read_dated_now_with_a_derived_id() -> None:
    turn = read_turn({"user_id": "ana", "agent_id": "coach", "messages": CHAT}, NOW)
    assert [(m.role.value, m.text) for m in turn.messages] == [
        ("user", "I moved to Lisbon last month."),
        ("assistant", "Nice, how is it?"),
    ]
    assert turn.occurred_at == NOW and turn.turn_id.startswith("turn-") and len(turn.turn_id) == 37


def test_the_derived_id_is_the_same_for_a_replay_and_differs_for_other_content() -> None:
    body = {"user_id": "ana", "agent_id": "coach", "messages": CHAT}
    first = read_turn(body, NOW)
    assert read_turn(body, datetime(2026, 3, 2, tzinfo=UTC)).turn_id == first.turn_id  # replayed a day later
    assert read_turn({**body, "user_id": "bo"}, NOW).turn_id != first.turn_id
    assert read_turn({**body, "messages": CHAT[:1]}, NOW).turn_id != first.turn_id
    dated = read_turn({**body, "occurred_at": "2026-02-01T00:00:00Z"}, NOW)
    assert dated.turn_id != first.turn_id and dated.occurred_at == datetime(2026, 2, 1, tzinfo=UTC)


def test_a_turn_v1_message_is_read_exactly_as_before() -> None:
    body = {
        "turn_id": "t-1",
        "user_id": "ana",
        "agent_id": "coach",
        "occurred_at": "2026-02-01T00:00:00Z",
        "messages": [{"role": "tool", "text": ""}],
    }
    assert read_turn(body, NOW) == parse_model(Turn, body)


def test_every_problem_is_listed_with_its_path() -> None:
    body = {"user_id": "a b", "agent_id": "", "messages": [{"role": "robot", "content": "hi"}], "colour": "red"}
    with pytest.raises(ValidationError) as caught:
        read_turn(body, NOW)
    fields = [field for field, _ in caught.value.problems]
    assert fields == ["messages.0.role", "user_id", "agent_id", "colour"], caught.value.problems
    assert caught.value.field == "messages.0.role"
    assert "also user_id:" in caught.value.message and "colour:" in caught.value.message


def test_a_turn_without_an_agent_is_the_default_agents() -> None:
    turn = read_turn({"user_id": "ana", "messages": CHAT}, NOW)
    assert turn.agent_id == DEFAULT_AGENT_ID
    assert turn == read_turn({"user_id": "ana", "agent_id": DEFAULT_AGENT_ID, "messages": CHAT}, NOW)


def test_parse_turns_names_the_line_of_every_problem() -> None:
    good = json.dumps({"user_id": "ana", "agent_id": "coach", "messages": CHAT})
    turns = parse_turns([good, "", good], NOW)
    assert len(turns) == 2 and turns[0] == turns[1]
    with pytest.raises(ValidationError) as caught:
        parse_turns([good, json.dumps({"agent_id": "a/b", "messages": "hello"})], NOW)
    assert [field for field, _ in caught.value.problems] == ["line 2: user_id", "line 2: agent_id"]
