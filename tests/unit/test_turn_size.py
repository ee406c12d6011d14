"""A turn fits the queue: at most MAX_TURN_BYTES of JSON (under the API's 256 KiB body and a Service Bus
Standard message with its headers); the agent provider cuts an oversized one by a fixed rule, newest
messages kept, instead of publishing something that will be refused (regression: 100 x 32,000
characters were accepted by the provider and refused downstream, kept and retried forever)."""

from __future__ import annotations

from datetime import UTC, datetime

import pydantic
import pytest

from memory_core.domain.messages import MAX_TURN_BYTES, Turn, TurnMessage, turn_json_bytes
from memory_core.integrations.turns import TURN_MESSAGES_BUDGET, fit_turn

pytestmark = pytest.mark.fault  # part of the fault suite (issue 16)


def turn(messages: list[TurnMessage]) -> Turn:
    return Turn(
        turn_id="t-1",
        user_id="u1",
        agent_id="a1",
        occurred_at=datetime(2026, 11, 1, tzinfo=UTC),
        messages=[{"role": str(m.role), "text": m.text} for m in messages],
    )


def test_an_oversized_turn_is_refused_with_its_size() -> None:
    big = [TurnMessage(role="user", text="あ" * 30_000) for _ in range(3)]  # 3 bytes a character
    with pytest.raises(pydantic.ValidationError, match=f"the maximum is {MAX_TURN_BYTES}"):
        turn(big)


def test_the_provider_keeps_the_newest_messages_and_the_last_user_message() -> None:
    messages = [
        TurnMessage(role="user" if i % 2 == 0 else "assistant", text=f"{i} " + "x" * 31_000)
        for i in range(100)
    ]
    fitted = fit_turn(messages)
    assert turn_json_bytes([{"role": str(m.role), "text": m.text} for m in fitted]) <= TURN_MESSAGES_BUDGET
    assert fitted == messages[-len(fitted) :]  # the newest, unchanged, in order
    assert any(m.role == "user" for m in fitted)
    turn(fitted)  # and it is a valid turn


def test_the_question_stays_when_the_answers_after_it_are_huge() -> None:
    question = TurnMessage(role="user", text="私はベジタリアンです。おすすめは？")
    first, second, newest = (TurnMessage(role="assistant", text=c * 32_000) for c in "長答案")  # 96 KB each
    assert fit_turn([question, first, second, newest]) == [question, second, newest]  # the oldest answer goes


def test_texts_are_shortened_from_their_end_when_dropping_is_not_enough() -> None:
    question = TurnMessage(role="user", text="私はベジタリアンです。" * 20)
    fitted = fit_turn([question], budget=200)
    assert turn_json_bytes([{"role": "user", "text": fitted[0].text}]) <= 200
    assert fitted[0].text.startswith("私はベジタリアンです。") and fitted[0].text.endswith("…")


def test_a_small_turn_is_left_alone() -> None:
    messages = [TurnMessage(role="user", text="hi"), TurnMessage(role="assistant", text="hello")]
    assert fit_turn(messages) is messages
