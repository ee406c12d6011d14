"""What one ingestion of a turn did: its steps' decisions, as JSON-ready values and as readable lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_core.domain.messages import Decision, MemoryEvent
from memory_core.domain.records import Scope

__all__ = ["IngestResult", "StepResult", "decision_as_dict", "format_decision"]


@dataclass(frozen=True, slots=True)
class StepResult:
    """One candidate's decision.

    Attributes:
        step: Index of the candidate in the turn.
        decision: The decision (``after`` carries the embedding only when freshly decided).
        path: How it was decided: ``rules``, ``llm``, ``rules-fallback`` or ``recorded`` (a replay
            read it from the history).
        fallback_reason: Why a model answer was rejected, if one was.
    """

    step: int
    decision: Decision
    path: str
    fallback_reason: str | None = None


@dataclass(slots=True)
class IngestResult:
    """What one ingestion of a turn did.

    Attributes:
        turn_id: The turn.
        scope: Its scope.
        status: ``ingested``, ``resumed`` (an earlier attempt stopped midway), ``duplicate`` (already
            processed; nothing was done) or ``purged`` (dated at or before its scope's last purge:
            dropped, nothing was written).
        extraction_path: ``rules`` or ``llm`` (as recorded by the first attempt).
        fallback_reason: Why extraction fell back to rules, if it did.
        steps: The decisions, in order.
        seconds: Wall time of the call.
        embed_seconds: Time spent embedding candidates.
    """

    turn_id: str
    scope: Scope
    status: str
    extraction_path: str
    fallback_reason: str | None = None
    steps: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0

    @property
    def decisions(self) -> list[Decision]:
        return [s.decision for s in self.steps]

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "user_id": self.scope.user_id,
            "agent_id": self.scope.agent_id,
            "status": self.status,
            "extraction_path": self.extraction_path,
            "fallback_reason": self.fallback_reason,
            "decisions": [decision_as_dict(s) for s in self.steps],
        }


def decision_as_dict(step: StepResult) -> dict[str, Any]:
    """One decision as JSON-ready values (records without embeddings)."""
    d = step.decision
    return {
        "step": step.step,
        "event": d.event.value,
        "memory_id": d.memory_id,
        "kind": d.candidate.kind.value,
        "candidate": d.candidate.memory,
        "category": d.candidate.category,
        "before": None if d.before is None else d.before.to_json_dict(include_embedding=False),
        "after": None if d.after is None else d.after.to_json_dict(include_embedding=False),
        "reason": d.reason,
        "path": step.path,
        "fallback_reason": step.fallback_reason,
    }


def format_decision(step: StepResult) -> str:
    """One decision as a readable line (or two, for an UPDATE that changes the text)."""
    d = step.decision
    short = (d.memory_id or "-")[:8]
    label = f"{d.event.value:<6} {short:<8}"
    if d.event is MemoryEvent.ADD and d.after is not None:
        line = f"{label} [{d.after.category}] {d.after.memory}"
    elif d.event is MemoryEvent.UPDATE and d.before is not None and d.after is not None:
        if d.before.memory != d.after.memory:
            line = f"{label} {d.before.memory} → {d.after.memory}"
        else:
            line = f"{label} {d.after.memory} (importance {d.after.importance:.2f}, confidence {d.after.confidence:.2f})"
    elif d.event is MemoryEvent.DELETE and d.before is not None:
        line = f"{label} {d.before.memory}"
    elif d.before is not None:
        line = f"{label} {d.candidate.memory} (already known: {d.before.memory})"
    else:
        line = f"{label} {d.candidate.memory}"
    suffix = "" if step.path in ("rules", "recorded") else f" [{step.path}]"
    return f"{line}\n         ↳ {d.reason}{suffix}"
