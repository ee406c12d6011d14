"""The pieces of one user turn inside an agent loop: the final answer, the kept memories, their origins."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError as PydanticValidationError

pytest.importorskip("agent_framework")

from agent_framework import Message, SessionContext

from memory_core.domain.records import MemoryRecord, Provenance, Scope
from memory_core.domain.search import ScoreBreakdown, SearchHit
from memory_core.integrations.agent_framework import MemoryContextProvider
from memory_core.integrations.loop import (
    LOOP_MARKER,
    LoopMemories,
    extend_with_origins,
    final_answer,
    loop_token,
    origin_session_ids,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope.of("u1", "a1")


def hit(*sessions: str | None) -> SearchHit:
    provenance = [Provenance(turn_id=f"turn-{i}", session_id=s) for i, s in enumerate(sessions)]
    record = MemoryRecord(
        user_id="u1", agent_id="a1", memory="I like green tea", provenance=provenance, created_at=NOW, updated_at=NOW
    )
    return SearchHit(record=record, score=1.0, breakdown=ScoreBreakdown(relevance=1.0))


def test_the_provider_publishes_once_per_user_turn_inside_a_loop() -> None:
    assert MemoryContextProvider.after_run_once_per_turn is True


def test_a_loop_response_is_cut_to_its_final_answer() -> None:
    aggregated = [
        Message(role="assistant", contents=["step 1"]),
        Message(role="user", contents=["Progress so far:\n- step 1"]),
        Message(role="user", contents=["Continue working on the task."]),
        Message(role="assistant", contents=["step 2"]),
    ]
    assert [m.text for m in final_answer(aggregated)] == ["step 2"]
    plain = [Message(role="assistant", contents=["a"]), Message(role="tool", contents=["b"])]
    assert final_answer(plain) == plain


def test_the_loop_token_comes_from_the_run_options() -> None:
    token = object()
    assert loop_token(SessionContext(input_messages=[], options={LOOP_MARKER: token})) is token
    assert loop_token(SessionContext(input_messages=[])) is None


def test_the_memories_of_at_most_so_many_loops_are_kept_oldest_forgotten_first() -> None:
    kept = LoopMemories(limit=2)
    first, second, third = object(), object(), object()
    kept.put(first, SCOPE, [hit()])
    kept.put(second, SCOPE, [])
    assert kept.get(first, SCOPE) is not None  # first is now the most recently used
    kept.put(third, SCOPE, [])
    assert len(kept) == 2
    assert kept.get(second, SCOPE) is None and kept.get(first, SCOPE) is not None
    assert kept.get(first, Scope.of("u2", "a1")) is None  # another scope is another search


def test_origins_are_the_other_sessions_first_seen_first() -> None:
    hits = [hit("s-2", None, "here"), hit("s-1", "s-2")]
    assert origin_session_ids(hits, "here") == ["s-2", "s-1"]
    assert origin_session_ids([hit("here", None)], "here") == []


class _OldContext(SessionContext):
    """``extend_messages`` as Agent Framework had it before 1.15 (no ``origin_session_ids``)."""

    def extend_messages(self, source: str | object, messages: Sequence[Message]) -> None:  # type: ignore[override]
        super().extend_messages(source, messages)


@pytest.mark.parametrize("context_type", [SessionContext, _OldContext], ids=["1.15+", "older"])
def test_memories_are_injected_with_origins_where_the_framework_takes_them(context_type: Any) -> None:
    context = context_type(input_messages=[])
    extend_with_origins(context, "memory_core", [Message(role="user", contents=["memories"])], ["s-1"])
    (message,) = context.get_messages()
    attribution = message.additional_properties["_attribution"]
    assert attribution.get("origin_session_ids") == (["s-1"] if context_type is SessionContext else None)


def test_a_provenance_without_a_session_reads_and_writes_as_before() -> None:
    old = {"turn_id": "turn-1", "message": 0, "start": 0, "end": 4, "speaker": "user"}
    parsed = Provenance.model_validate(old)
    assert parsed.session_id is None
    assert parsed.model_dump() == old and json.loads(parsed.model_dump_json()) == old
    with_session = Provenance(turn_id="turn-1", session_id="s-1")
    assert Provenance.model_validate_json(with_session.model_dump_json()) == with_session
    with pytest.raises(PydanticValidationError, match="session_id"):
        Provenance(turn_id="turn-1", session_id="not a session id")
