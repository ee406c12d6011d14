"""History entries and turn journals as the history stores keep them (text fields) and back.

The SQLite and the Azure Table history stores share this form: the same checks before an entry is
written, the same JSON for its before/after records and a turn's candidates, the same times.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memory_core.domain.messages import HistoryEntry, MemoryCandidate, MemoryEvent
from memory_core.domain.records import Scope
from memory_core.domain.validation import ensure_utc, validate_scope_id
from memory_core.ports import TurnJournal

__all__ = [
    "JOURNAL_FIELDS",
    "NO_CANDIDATES",
    "NO_EXTRACTION",
    "candidates_json",
    "entry_fields",
    "entry_from_fields",
    "iso_time",
    "journal_from_fields",
    "parse_candidates",
    "rewritten_candidates",
]

#: The fields of a stored journal that :func:`journal_from_fields` reads.
JOURNAL_FIELDS = ("candidates", "extraction_path", "fallback_reason", "started_at", "processed_at")
#: The candidates and extraction path of the journal of a turn marked processed without beginning.
NO_CANDIDATES = "[]"
NO_EXTRACTION = "none"


def iso_time(value: datetime) -> str:
    """A time as stored: ISO 8601 in UTC."""
    return ensure_utc(value).isoformat()


def _record_json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _record(text: str | None) -> dict[str, Any] | None:
    return None if text is None else json.loads(text)


def candidates_json(candidates: Sequence[MemoryCandidate]) -> str:
    """A turn's candidates as stored in its journal."""
    return json.dumps([c.model_dump(mode="json") for c in candidates], ensure_ascii=False)


def parse_candidates(text: str) -> list[MemoryCandidate]:
    """A turn's candidates from the text its journal stores (:func:`candidates_json`)."""
    return [MemoryCandidate.model_validate(c) for c in json.loads(text)]


def rewritten_candidates(text: str, rewrite: Callable[[MemoryCandidate], MemoryCandidate]) -> str | None:
    """The stored candidates ``text`` with each candidate ``rewrite(candidate)``; ``None`` when that
    changes none of them (nothing to write)."""
    candidates = parse_candidates(text)
    kept = [rewrite(c) for c in candidates]
    return None if kept == candidates else candidates_json(kept)


def entry_fields(entry: HistoryEntry) -> dict[str, Any]:
    """The stored fields of ``entry``: ids, event, reason, time (ISO text) and its before/after records
    (JSON text or ``None``), its scope ids and event checked.

    Raises:
        ValidationError: A scope id is not one.
        ValueError: The event is not a :class:`MemoryEvent`.
    """
    return {
        "memory_id": entry.memory_id,
        "user_id": validate_scope_id(entry.user_id, "user_id"),
        "agent_id": validate_scope_id(entry.agent_id, "agent_id"),
        "event": MemoryEvent(entry.event).value,
        "reason": entry.reason,
        "at": iso_time(entry.at),
        "before": _record_json(entry.before),
        "after": _record_json(entry.after),
    }


def entry_from_fields(fields: Mapping[str, Any]) -> HistoryEntry:
    """The entry :func:`entry_fields` stored (``turn_id`` read too, when there is one)."""
    return HistoryEntry(
        memory_id=fields["memory_id"],
        user_id=fields["user_id"],
        agent_id=fields["agent_id"],
        event=MemoryEvent(fields["event"]),
        before=_record(fields["before"]),
        after=_record(fields["after"]),
        reason=fields["reason"],
        turn_id=fields.get("turn_id"),
        at=datetime.fromisoformat(fields["at"]),
    )


def journal_from_fields(
    scope: Scope, turn_id: str, fields: Mapping[str, Any], completed_steps: Iterable[int]
) -> TurnJournal:
    """The journal of a turn from its stored fields (:data:`JOURNAL_FIELDS`; candidates as JSON text,
    times as ISO text, ``fallback_reason`` and ``processed_at`` optional) and its recorded steps."""
    processed = fields.get("processed_at")
    return TurnJournal(
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        turn_id=turn_id,
        candidates=tuple(parse_candidates(fields["candidates"])),
        extraction_path=fields["extraction_path"],
        fallback_reason=fields.get("fallback_reason"),
        started_at=datetime.fromisoformat(fields["started_at"]),
        completed_steps=frozenset(completed_steps),
        processed_at=None if not processed else datetime.fromisoformat(processed),
    )
