"""The record a verdict writes over an existing memory: deleted, partly forgotten, updated or rehearsed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memory_core.domain.messages import MemoryCandidate
from memory_core.domain.records import MAX_PROVENANCE, MemoryRecord, MemoryStatus, Provenance, status_note
from memory_core.service.consolidation.decisions import Verdict
from memory_core.service.journal import earlier_value_id

__all__ = [
    "REHEARSAL_CAP",
    "REHEARSAL_CONFIDENCE",
    "REHEARSAL_IMPORTANCE",
    "RecordChange",
    "rehearsed_importance",
]


#: A restatement (NONE) is rehearsal: the memory's importance and confidence grow by these amounts
#: (capped at 1) and its decay restarts from the restatement.
REHEARSAL_IMPORTANCE = 0.05
REHEARSAL_CONFIDENCE = 0.1
#: Restatement alone never lifts importance past this (only an explicit importance can); each
#: restatement adds less, the closer the memory already is (diminishing returns).
REHEARSAL_CAP = 0.9


def rehearsed_importance(current: float, stated: float) -> float:
    """Importance after a restatement: ``REHEARSAL_IMPORTANCE`` scaled by the room left below
    :data:`REHEARSAL_CAP`, never above the cap unless the memory already was (explicit importance)."""
    base = max(current, stated)
    if base >= REHEARSAL_CAP:
        return base
    return min(REHEARSAL_CAP, base + REHEARSAL_IMPORTANCE * (REHEARSAL_CAP - base) / REHEARSAL_CAP)


def _with_sources(known: Sequence[Provenance], new: Sequence[Provenance]) -> list[Provenance]:
    """``known`` plus ``new`` (a turn counted once, at its latest place), the most recent last, capped."""
    merged = [p for p in known if all(p.turn_id != n.turn_id for n in new)] + list(new)
    return merged[-MAX_PROVENANCE:]


@dataclass(frozen=True, slots=True)
class RecordChange:
    """An existing memory that a verdict changes, and what the new record is."""

    candidate: MemoryCandidate
    verdict: Verdict
    target: MemoryRecord
    stamp: datetime
    turn_id: str | None
    vector: np.ndarray
    sources: list[Provenance]

    def deleted(self) -> MemoryRecord:
        """DELETE: the status changes, with a note of why and by which turn."""
        metadata = status_note(
            {**self.target.metadata, "deleted_by_turn": self.turn_id}, self.verdict.reason, self.stamp
        )
        return self.target.model_copy(
            update={"status": MemoryStatus.DELETED, "updated_at": self.stamp, "metadata": metadata}
        )

    def partly_forgotten(self) -> MemoryRecord:
        """Part of a compound memory forgotten: the rest stays as it was (its importance, category, sources
        and age); the words that said the forgotten part go (the evidence quoted them)."""
        metadata = dict(self.target.metadata)
        metadata.pop("evidence", None)
        metadata["partly_forgotten_by_turn"] = self.turn_id
        text = self.verdict.text or self.target.memory
        return self.target.model_copy(
            update={"memory": text, "metadata": metadata, "embedding": [float(x) for x in self.vector]}
        )

    def updated(self) -> MemoryRecord:
        """UPDATE: the new text, the larger importance and confidence; a superseded memory or one replaced
        by the candidate's words takes the candidate's category, expiry and source, and the candidate's
        event time whenever it states one (or the memory now holds its words)."""
        target, candidate = self.target, self.candidate
        text = self.verdict.text or target.memory
        metadata = dict(target.metadata)
        if self.turn_id:
            metadata["updated_by_turn"] = self.turn_id
        changes: dict[str, Any] = {
            "provenance": _with_sources(target.provenance, self.sources),
            "memory": text,
            "importance": max(target.importance, candidate.importance),
            "confidence": max(target.confidence, candidate.confidence),
            "updated_at": self.stamp,
            "metadata": metadata,
            "embedding": [float(x) for x in self.vector] if text != target.memory else target.embedding,
        }
        if self.verdict.supersedes or text == candidate.memory:
            changes["category"] = candidate.category
            changes["expires_at"] = candidate.expires_at
            changes["source"] = candidate.source
        if candidate.event_at is not None or self.verdict.supersedes or text == candidate.memory:
            # the memory now says what the new statement says, and when it says it happened
            changes["event_at"] = candidate.event_at
            changes["event_until"] = candidate.event_until
        if self.verdict.supersedes:
            changes.update(self._superseding(metadata))
        return MemoryRecord.model_validate({**target.model_dump(), **changes})

    def _superseding(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """What a superseding UPDATE changes besides the text: the memory now says what holds since the
        new statement (its sources are the new statement's), and the sources of the value it replaced
        are kept aside (their episodes are closed, and a forget request still reaches them). The value it
        replaced is kept as a record of its own, named in ``earlier_values`` (oldest first;
        :mod:`memory_core.service.earlier_values` writes it)."""
        replaced = [[p.turn_id, p.message] for p in self.target.provenance]
        known = [s for s in metadata.get("superseded_sources", []) if s not in replaced]
        metadata["superseded_sources"] = (known + replaced)[-MAX_PROVENANCE:]
        if self.turn_id:
            metadata["superseded_by_turn"] = self.turn_id
            earlier = earlier_value_id(self.target.scope, self.target.id, self.turn_id)
            kept = [i for i in metadata.get("earlier_values", []) if i != earlier]
            metadata["earlier_values"] = [*kept, earlier]  # every one: a forget request takes them all
        return {"provenance": list(self.sources), "valid_from": self.stamp, "metadata": metadata}

    def rehearsed(self) -> MemoryRecord:
        """NONE: a restatement reinforces the memory (decay restarts), its text stays."""
        target, candidate = self.target, self.candidate
        return target.model_copy(
            update={
                "provenance": _with_sources(target.provenance, self.sources),
                "updated_at": self.stamp,
                "importance": rehearsed_importance(target.importance, candidate.importance),
                "confidence": min(1.0, max(target.confidence, candidate.confidence) + REHEARSAL_CONFIDENCE),
            }
        )
