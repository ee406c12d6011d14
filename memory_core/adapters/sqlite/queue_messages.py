"""What the embedded queue holds: a message as received or inspected, and a queue's counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_core.errors import TransientError

__all__ = ["COLUMNS", "LockLostError", "QueueMessage", "QueueStats", "instant", "json_body"]

#: The columns of ``queue_messages`` in :class:`QueueMessage`'s order.
COLUMNS = (
    "seq, queue, message_id, session_id, subject, body, enqueued_at, visible_at, delivery_count, "
    "lock_token, locked_until, state, last_error, dead_letter_reason, dead_letter_description, "
    "dead_lettered_at"
)


def json_body(body: bytes) -> dict[str, Any]:
    """A message body as a JSON object, or ``{}`` when it is not one."""
    try:
        data = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def instant(value: Any) -> datetime | None:
    """An ISO 8601 time from a message body (UTC when it has no offset), or ``None``."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class LockLostError(TransientError):
    """The message's lock expired and another consumer received it (or it is gone)."""


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One message as received or inspected.

    Attributes:
        seq: Position in the queue (the ordering key; a requeued message gets a new one).
        message_id: The producer's id (duplicate detection).
        session_id: The ordered session it belongs to.
        subject: What it is (``turn``, ``recall`` or what the producer said).
        body: The payload (UTF-8 JSON for the pipeline's messages).
        enqueued_at: When it was sent (epoch seconds).
        delivery_count: How many times it has been received.
        lock_token: The current lock's token (``None`` when not locked).
        locked_until: When the current lock expires (epoch seconds).
        state: ``active`` or ``dead`` (dead-lettered).
        last_error: What the last consumer reported when abandoning it.
        dead_letter_reason: Why it was dead-lettered (short code).
        dead_letter_description: The longer explanation.
        dead_lettered_at: When it was dead-lettered (epoch seconds).
    """

    seq: int
    queue: str
    message_id: str
    session_id: str
    subject: str
    body: bytes
    enqueued_at: float
    visible_at: float
    delivery_count: int
    lock_token: str | None
    locked_until: float | None
    state: str
    last_error: str | None
    dead_letter_reason: str | None
    dead_letter_description: str | None
    dead_lettered_at: float | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> QueueMessage:
        return cls(
            seq=int(row[0]),
            queue=str(row[1]),
            message_id=str(row[2]),
            session_id=str(row[3]),
            subject=str(row[4]),
            body=bytes(row[5]),
            enqueued_at=float(row[6]),
            visible_at=float(row[7]),
            delivery_count=int(row[8]),
            lock_token=row[9],
            locked_until=row[10],
            state=str(row[11]),
            last_error=row[12],
            dead_letter_reason=row[13],
            dead_letter_description=row[14],
            dead_lettered_at=row[15],
        )

    def as_dict(self, *, include_body: bool = False) -> dict[str, Any]:
        """The message as JSON-ready values (the body as text when asked)."""
        data: dict[str, Any] = {
            "seq": self.seq,
            "message_id": self.message_id,
            "session_id": self.session_id,
            "subject": self.subject,
            "state": self.state,
            "delivery_count": self.delivery_count,
            "enqueued_at": self.enqueued_at,
            "locked_until": self.locked_until,
            "last_error": self.last_error,
            "dead_letter_reason": self.dead_letter_reason,
            "dead_letter_description": self.dead_letter_description,
            "dead_lettered_at": self.dead_lettered_at,
            "size": len(self.body),
        }
        if include_body:
            data["body"] = self.body.decode("utf-8", errors="replace")
        return data


@dataclass(frozen=True, slots=True)
class QueueStats:
    """Counts of one queue: waiting (including locked), locked, dead-lettered, and sessions waiting."""

    active: int
    locked: int
    dead_letters: int
    sessions: int

    def as_dict(self) -> dict[str, int]:
        return {
            "active": self.active,
            "locked": self.locked,
            "dead_letters": self.dead_letters,
            "sessions": self.sessions,
        }
