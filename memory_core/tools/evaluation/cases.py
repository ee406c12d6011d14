"""The conversations ``eval pipeline`` ingests, as cases: LoCoMo's conversations and the Japanese
set's users."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memory_core.domain.records import Scope
from memory_core.tools.evaluation.japanese_data import load_japanese_set
from memory_core.tools.evaluation.locomo_data import (
    CATEGORY_NAMES,
    EVALUATED_CATEGORIES,
    LocomoData,
    load_locomo,
    turn_text,
)

__all__ = ["PipelineCase", "japanese_cases", "locomo_cases"]


@dataclass(frozen=True, slots=True)
class PipelineCase:
    """One conversation: its turns (``turn.v1`` bodies, in order), its questions (text, evidence turn
    ids, group) and when they are asked."""

    name: str
    scope: Scope
    turns: list[dict[str, Any]]
    questions: list[tuple[str, set[str], str]]
    asked_at: datetime


def locomo_cases(path: str, audit: str | None, limit: int | None) -> tuple[list[PipelineCase], LocomoData]:
    """The LoCoMo conversations as cases (a turn's ``occurred_at`` its session's date plus its position)."""
    data = load_locomo(path, audit).first(limit)
    cases = []
    for c in data.conversations():
        scope = Scope.of(f"conv{c}", "locomo")
        turns, last = [], None
        offsets: dict[datetime, int] = {}
        for t in (t for t in data.turns if t.conversation == c):
            offsets[t.date] = offsets.get(t.date, -1) + 1
            at = t.date + timedelta(seconds=offsets[t.date])
            text = turn_text(t, "plain")
            if not text:
                continue
            turns.append(
                {
                    "turn_id": t.dia_id,
                    "user_id": scope.user_id,
                    "agent_id": scope.agent_id,
                    "occurred_at": at.isoformat(),
                    "messages": [{"role": "user", "text": text[:32000], "name": t.speaker[:64] or None}],
                }
            )
            last = at if last is None or at > last else last
        questions = [
            (q.question, set(q.evidence), f"{q.category}-{CATEGORY_NAMES.get(q.category, '?')}")
            for q in data.questions
            if q.conversation == c and q.category in EVALUATED_CATEGORIES and q.evidence
        ]
        assert last is not None
        cases.append(PipelineCase(f"locomo-{c}", scope, turns, questions, last + timedelta(days=1)))
    return cases, data


def japanese_cases(path: str | None = None) -> list[PipelineCase]:
    """The Japanese set's users as cases."""
    data = load_japanese_set(path)
    cases = []
    for user in data.users:
        scope = Scope.of(user.user_id, "ja")
        turns = [
            {
                "turn_id": f"t{i}",
                "user_id": scope.user_id,
                "agent_id": scope.agent_id,
                "occurred_at": when.isoformat(),
                "messages": [{"role": "user", "text": text}],
            }
            for i, (when, text) in enumerate(user.turns)
        ]
        questions = [(q.question, {f"t{e}" for e in q.evidence}, q.kind) for q in user.questions]
        cases.append(
            PipelineCase(f"ja-{user.user_id}", scope, turns, questions, user.turns[-1][0] + timedelta(days=1))
        )
    return cases
