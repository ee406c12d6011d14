"""MemoryExtractor: LLM path, retries on invalid answers and the fallback to rules (fake chat model)."""

from __future__ import annotations

import asyncio
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MessageRole, Turn, TurnMessage
from memory_core.domain.validation import parse_model
from memory_core.errors import PermanentError, TransientError, ValidationError
from memory_core.ports import ChatModel, FixedClock
from memory_core.service.extraction.extractor import (
    ExtractionResult,
    MemoryExtractor,
    expiry_after,
    llm_source,
)
from memory_core.service.prompts.extraction import RECALL_HEADER

T = TypeVar("T", bound=BaseModel)
AT = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


class ScriptedChatModel(ChatModel):
    """Answers from a script: a dict is validated into the schema, an exception is raised."""

    def __init__(self, *answers: Any) -> None:
        self.answers: deque[Any] = deque(answers)
        self.calls: list[dict[str, Any]] = []

    async def complete_json(self, *, system: str, user: str, schema: type[T], temperature: float = 0.0) -> T:
        self.calls.append({"system": system, "user": user, "schema": schema, "temperature": temperature})
        answer = self.answers.popleft()
        if isinstance(answer, Exception):
            raise answer
        return parse_model(schema, answer)


def make_turn(*texts: str, role: str = "user") -> Turn:
    return Turn(
        turn_id="t-9",
        user_id="u1",
        agent_id="travel",
        occurred_at=AT,
        messages=[TurnMessage(role=MessageRole(role), text=t) for t in texts],
    )


def item(**overrides: Any) -> dict[str, Any]:
    base = {
        "kind": "fact",
        "memory": "コーヒーが好き",
        "category": "preference",
        "importance": 0.8,
        "confidence": 0.9,
        "expires_at": None,
        "evidence": "コーヒーが好きです。",
    }
    base.update(overrides)
    return base


def extract(extractor: MemoryExtractor, turn: Turn) -> ExtractionResult:
    return asyncio.run(extractor.extract(turn))


def test_without_a_model_the_rules_run() -> None:
    result = extract(MemoryExtractor(), make_turn("コーヒーが好きです。"))
    assert result.path == "rules"
    assert result.fallback_reason is None
    assert result.attempts == 0
    assert [c.memory for c in result.candidates] == ["コーヒーが好きです"]


def test_llm_answer_becomes_candidates() -> None:
    model = ScriptedChatModel(
        {
            "memories": [
                item(),
                item(
                    kind="fact",
                    memory="来週京都に行く",
                    category="plan",
                    expires_at="2026-12-06",
                    evidence="来週京都に行きます。",
                    importance=0.5,
                ),
                item(kind="forget", memory="紅茶が好き", category="general", evidence=""),
            ]
        }
    )
    result = extract(MemoryExtractor(chat_model=model), make_turn("コーヒーが好きです。来週京都に行きます。"))
    assert result.path == "llm" and result.fallback_reason is None and result.attempts == 1
    first, plan, forget = result.candidates
    assert (first.memory, first.category, first.importance, first.confidence, first.source) == (
        "コーヒーが好き",
        "preference",
        0.8,
        0.9,
        "llm.chat-model",  # the source names the model
    )
    assert first.evidence == "コーヒーが好きです。"
    assert plan.expires_at == expiry_after(datetime(2026, 12, 6).date())
    assert forget.kind is CandidateKind.FORGET
    call = model.calls[0]
    assert call["temperature"] is None  # the model's own default
    assert "2026-11-26" in call["user"]


def test_recall_text_never_reaches_the_model() -> None:
    model = ScriptedChatModel({"memories": []})
    turn = make_turn(f"{RECALL_HEADER}\n- 紅茶が好き\n\nコーヒーが好きです。")
    result = extract(MemoryExtractor(chat_model=model), turn)
    assert result.path == "llm" and result.candidates == []
    assert "紅茶が好き" not in model.calls[0]["user"]


def test_no_user_text_means_no_call() -> None:
    model = ScriptedChatModel()
    result = extract(MemoryExtractor(chat_model=model), make_turn("I am the assistant.", role="assistant"))
    assert result.candidates == [] and result.path == "llm" and model.calls == []


def test_invalid_answer_is_asked_again_with_the_error() -> None:
    model = ScriptedChatModel({"memories": [item(importance=3)]}, {"memories": [item()]})
    result = extract(MemoryExtractor(chat_model=model), make_turn("コーヒーが好きです。"))
    assert result.path == "llm" and result.attempts == 2
    assert "rejected" not in model.calls[0]["user"]
    assert "Your previous answer was rejected: memories.0.importance" in model.calls[1]["user"]


def test_invalid_answers_after_the_retries_fall_back_to_rules() -> None:
    model = ScriptedChatModel(ValidationError("answer", "is not valid JSON"), {"memories": [{"kind": "?"}]})
    result = extract(MemoryExtractor(chat_model=model, max_attempts=2), make_turn("コーヒーが好きです。"))
    assert result.path == "rules"
    assert result.attempts == 2
    assert result.fallback_reason is not None and "invalid answer after 2 attempts" in result.fallback_reason
    assert [(c.memory, c.source) for c in result.candidates] == [("コーヒーが好きです", "rule-fallback")]


def test_a_translated_memory_is_an_invalid_answer() -> None:
    english = item(memory="I like coffee")
    model = ScriptedChatModel({"memories": [english]}, {"memories": [english]})
    result = extract(MemoryExtractor(chat_model=model), make_turn("コーヒーが好きです。"))
    assert result.path == "rules"
    assert "language" in (result.fallback_reason or "")
    assert result.candidates[0].memory == "コーヒーが好きです"


def test_japanese_memory_for_an_english_turn_is_invalid() -> None:
    model = ScriptedChatModel({"memories": [item(evidence="made up")]})
    result = extract(MemoryExtractor(chat_model=model, max_attempts=1), make_turn("I like coffee."))
    assert result.path == "rules" and [c.memory for c in result.candidates] == ["I like coffee"]


def test_transient_errors_fall_back_to_rules_by_default() -> None:
    model = ScriptedChatModel(TransientError("HTTP 429 after retries"))
    result = extract(MemoryExtractor(chat_model=model), make_turn("I live in Osaka."))
    assert result.path == "rules" and result.attempts == 1
    assert result.fallback_reason == "chat model unavailable: HTTP 429 after retries"
    assert [c.memory for c in result.candidates] == ["I live in Osaka"]


def test_transient_errors_can_be_raised_for_redelivery() -> None:
    model = ScriptedChatModel(TransientError("timed out"))
    with pytest.raises(TransientError):
        extract(MemoryExtractor(chat_model=model, on_transient="raise"), make_turn("I live in Osaka."))


def test_permanent_errors_fall_back_to_rules() -> None:
    model = ScriptedChatModel(PermanentError("HTTP 400: content filter"))
    result = extract(MemoryExtractor(chat_model=model), make_turn("I live in Osaka."))
    assert result.path == "rules" and "HTTP 400" in (result.fallback_reason or "")


def test_a_plan_replayed_after_its_day_is_kept_as_a_dated_record() -> None:
    clock = FixedClock(datetime(2027, 3, 1, tzinfo=UTC))
    turn = make_turn("明日、歯医者に行く予定です。コーヒーが好き。")
    result = extract(MemoryExtractor(clock=clock), turn)
    day = turn.occurred_at.date() + timedelta(days=1)
    assert [c.memory for c in result.candidates] == [
        f"明日（{day.year}年{day.month}月{day.day}日）、歯医者に行く予定です",
        "コーヒーが好き",
    ]
    assert all(c.expires_at is None for c in result.candidates)


def test_configuration_is_checked() -> None:
    with pytest.raises(ValueError):
        MemoryExtractor(max_attempts=0)
    with pytest.raises(ValueError):
        MemoryExtractor(on_transient="ignore")  # type: ignore[arg-type]
    assert MemoryExtractor(chat_model=ScriptedChatModel()).uses_llm
    assert not MemoryExtractor().uses_llm


def test_the_source_names_the_model_within_what_a_source_may_hold() -> None:
    assert llm_source("gpt-4.1-mini") == "llm.gpt-4.1-mini"
    assert llm_source("llama3:8b") == "llm.llama3-8b"
    assert llm_source("meta-llama/Llama-3.3-70B-Instruct") == "llm.meta-llama-Llama-3.3-70B-Instruct"
    long = llm_source("x" * 200)
    assert len(long) == 64 and long.startswith("llm.")
    MemoryCandidate(memory="m", source=long)  # a valid source


def test_llm_facts_carry_the_event_time_the_users_words_state() -> None:
    # AT is Thursday 2026-11-26: the user's 先週の金曜日 is 2026-11-20, whatever the model wrote
    answer = {
        "memories": [
            item(memory="2026年11月20日に京都に行った", category="event", evidence="先週の金曜日に京都に行きました。"),
            item(),
        ]
    }
    extractor = MemoryExtractor(chat_model=ScriptedChatModel(answer), clock=FixedClock(AT))
    result = extract(extractor, make_turn("先週の金曜日に京都に行きました。コーヒーが好きです。"))
    assert result.path == "llm"
    kyoto, coffee = result.candidates
    assert (kyoto.event_at, kyoto.event_until) == (datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, tzinfo=UTC))
    assert coffee.event_at is None and coffee.event_until is None
