"""Receiving, locking and settling the embedded queue's messages (inside the caller's transaction).

Only the oldest waiting message of a session can be received, and only while no other message of that
session is locked; a batch is that head and the messages right behind it. Receiving locks each with a
token; settling (complete, abandon, dead-letter, release) checks the token first, so a receiver whose
lock expired and was taken by another cannot settle the message (:class:`LockLostError`).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from typing import Any

from memory_core.adapters.sqlite.queue_messages import COLUMNS, LockLostError, QueueMessage

__all__ = [
    "MAX_DELIVERY_REASON",
    "MAX_REASON",
    "abandon",
    "begin",
    "complete",
    "dead_letter",
    "dead_letter_received",
    "has_receivable",
    "receive_batch",
    "release",
    "renew_lock",
]

MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
#: Longest reason, description or error kept with a message.
MAX_REASON = 4096

# The head of every session that is neither locked nor delayed, oldest first.
_RECEIVABLE = f"""
SELECT {COLUMNS} FROM queue_messages AS m
WHERE m.queue = ? AND m.state = 'active'
  AND m.seq = (
    SELECT MIN(h.seq) FROM queue_messages AS h
    WHERE h.queue = m.queue AND h.state = 'active' AND h.session_id = m.session_id
  )
  AND (m.locked_until IS NULL OR m.locked_until <= ?)
  AND m.visible_at <= ?
ORDER BY m.seq
LIMIT ?
"""  # noqa: S608 - constant column list


def has_receivable(conn: sqlite3.Connection, queue: str, now: float) -> bool:
    """Whether a message can be received now (a read: idle polling never takes the write lock)."""
    return bool(conn.execute(_RECEIVABLE, (queue, now, now, 1)).fetchall())


def dead_letter(conn: sqlite3.Connection, seq: int, reason: str, description: str, now: float) -> None:
    """Move a message to the dead-letter queue with a reason (its lock dropped)."""
    conn.execute(
        "UPDATE queue_messages SET state = 'dead', lock_token = NULL, locked_until = NULL, "
        "dead_letter_reason = ?, dead_letter_description = ?, dead_lettered_at = ? WHERE seq = ?",
        (reason[:MAX_REASON], description[:MAX_REASON], now, seq),
    )


def receive_batch(
    conn: sqlite3.Connection, queue: str, now: float, *, max_messages: int, max_deliveries: int, until: float
) -> list[QueueMessage]:
    """Lock the oldest receivable message and up to ``max_messages - 1`` of those right behind it in its
    session until ``until``; only the head counts a delivery. Heads delivered ``max_deliveries`` times
    are dead-lettered on the way."""
    row = _head(conn, queue, now, max_deliveries)
    if row is None:
        return []
    rows = [row]
    if max_messages > 1:
        rows += _followers(conn, queue, QueueMessage.from_row(row), now, max_messages - 1, max_deliveries)
    return _locked(conn, rows, until)


def _head(conn: sqlite3.Connection, queue: str, now: float, max_deliveries: int) -> Sequence[Any] | None:
    """The row of the oldest receivable message, dead-lettering heads delivered too often first."""
    while True:
        row: Sequence[Any] | None = conn.execute(_RECEIVABLE, (queue, now, now, 1)).fetchone()
        if row is None:
            return None
        head = QueueMessage.from_row(row)
        if head.delivery_count < max_deliveries:
            return row
        dead_letter(
            conn,
            head.seq,
            MAX_DELIVERY_REASON,
            f"delivered {head.delivery_count} time(s) without being completed; "
            f"last error: {head.last_error or 'none reported (lock expired)'}",
            now,
        )


def _followers(
    conn: sqlite3.Connection, queue: str, head: QueueMessage, now: float, most: int, max_deliveries: int
) -> list[Sequence[Any]]:
    """The rows right behind ``head`` in its session, up to the first that is delayed, locked or due
    for the dead-letter queue (at most ``most``)."""
    following = conn.execute(
        f"SELECT {COLUMNS} FROM queue_messages "  # noqa: S608 - constant column list
        "WHERE queue = ? AND state = 'active' AND session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (queue, head.session_id, head.seq, most),
    ).fetchall()
    taken: list[Sequence[Any]] = []
    for candidate in following:
        message = QueueMessage.from_row(candidate)
        if (
            message.delivery_count >= max_deliveries
            or message.visible_at > now
            or (message.locked_until is not None and message.locked_until > now)
        ):
            break
        taken.append(candidate)
    return taken


def _locked(conn: sqlite3.Connection, rows: Sequence[Sequence[Any]], until: float) -> list[QueueMessage]:
    """Lock each row (its own token, the same expiry); the first counts its delivery."""
    received = []
    for position, taken in enumerate(rows):
        message = QueueMessage.from_row(taken)
        token = uuid.uuid4().hex
        counted = 1 if position == 0 else 0  # the others count when they are begun
        conn.execute(
            "UPDATE queue_messages SET lock_token = ?, locked_until = ?, "
            "delivery_count = delivery_count + ? WHERE seq = ?",
            (token, until, counted, message.seq),
        )
        received.append(
            QueueMessage.from_row((*taken[:8], message.delivery_count + counted, token, until, *taken[11:]))
        )
    return received


def _check_locked(conn: sqlite3.Connection, message: QueueMessage) -> None:
    """Raise unless ``message`` is still active and locked with its token.

    Raises:
        LockLostError: Its lock expired and another receiver took it, or it was settled.
    """
    row = conn.execute(
        "SELECT seq, lock_token, state FROM queue_messages WHERE seq = ?", (message.seq,)
    ).fetchone()
    if row is None or row[2] != "active" or row[1] is None or row[1] != message.lock_token:
        raise LockLostError(
            f"message {message.message_id!r} (seq {message.seq}) is no longer locked by this receiver"
        )


def begin(conn: sqlite3.Connection, message: QueueMessage, until: float) -> None:
    """Count the delivery of a message behind a batch's head and renew its lock."""
    _check_locked(conn, message)
    conn.execute(
        "UPDATE queue_messages SET locked_until = ?, delivery_count = delivery_count + 1 WHERE seq = ?",
        (until, message.seq),
    )


def release(conn: sqlite3.Connection, message: QueueMessage) -> None:
    """Unlock a message that was never begun (its delivery count as it was)."""
    _check_locked(conn, message)
    conn.execute(
        "UPDATE queue_messages SET lock_token = NULL, locked_until = NULL WHERE seq = ?", (message.seq,)
    )


def complete(conn: sqlite3.Connection, message: QueueMessage) -> None:
    """Remove a received message."""
    _check_locked(conn, message)
    conn.execute("DELETE FROM queue_messages WHERE seq = ?", (message.seq,))


def abandon(
    conn: sqlite3.Connection,
    message: QueueMessage,
    *,
    visible_at: float,
    error: str | None,
    count_delivery: bool,
) -> None:
    """Unlock a received message for redelivery at ``visible_at`` (its delivery given back when not
    ``count_delivery``)."""
    _check_locked(conn, message)
    conn.execute(
        "UPDATE queue_messages SET lock_token = NULL, locked_until = NULL, visible_at = ?, "
        "last_error = COALESCE(?, last_error), delivery_count = MAX(delivery_count - ?, 0) "
        "WHERE seq = ?",
        (visible_at, None if error is None else error[:MAX_REASON], 0 if count_delivery else 1, message.seq),
    )


def renew_lock(conn: sqlite3.Connection, message: QueueMessage, until: float) -> None:
    """Extend the lock of a message still being processed."""
    _check_locked(conn, message)
    conn.execute("UPDATE queue_messages SET locked_until = ? WHERE seq = ?", (until, message.seq))


def dead_letter_received(
    conn: sqlite3.Connection, message: QueueMessage, reason: str, description: str, now: float
) -> None:
    """Move a received message to the dead-letter queue."""
    _check_locked(conn, message)
    dead_letter(conn, message.seq, reason, description, now)
