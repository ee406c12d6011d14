"""Looking into the embedded queue: waiting messages, dead letters (requeued or purged), a scope's
messages (purge and export), and the queue's counts. Each function takes the connection inside the
caller's lock or transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_core.adapters.sqlite.queue_messages import COLUMNS, QueueMessage, QueueStats, instant, json_body
from memory_core.capabilities import QueuedItem
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import Scope
from memory_core.domain.validation import validate_scope_id
from memory_core.errors import ValidationError

__all__ = [
    "dead_letters",
    "delete",
    "oldest_enqueued_at",
    "peek",
    "purge_dead_letters",
    "queued_items",
    "requeue",
    "scope_rows",
    "stats",
    "waiting_in_session",
]

#: Sequence numbers per ``IN (...)`` list.
_IN_CHUNK = 500


def _by_state(conn: sqlite3.Connection, queue: str, state: str, limit: int, after_seq: int) -> list[QueueMessage]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM queue_messages WHERE queue = ? AND state = ? AND seq > ? "  # noqa: S608
        "ORDER BY seq LIMIT ?",
        (queue, state, after_seq, max(1, limit)),
    ).fetchall()
    return [QueueMessage.from_row(r) for r in rows]


def peek(conn: sqlite3.Connection, queue: str, *, limit: int, after_seq: int) -> list[QueueMessage]:
    """Waiting messages (locked or not), oldest first."""
    return _by_state(conn, queue, "active", limit, after_seq)


def waiting_in_session(
    conn: sqlite3.Connection, queue: str, session_id: str, subject: str | None
) -> list[QueueMessage]:
    """The waiting messages of one session (of one subject, when given), oldest first."""
    sql = f"SELECT {COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'active' AND session_id = ?"  # noqa: S608
    params: list[Any] = [queue, session_id]
    if subject is not None:
        sql += " AND subject = ?"
        params.append(subject)
    return [QueueMessage.from_row(r) for r in conn.execute(sql + " ORDER BY seq", params).fetchall()]


def dead_letters(conn: sqlite3.Connection, queue: str, *, limit: int, after_seq: int) -> list[QueueMessage]:
    """Dead-lettered messages, oldest first."""
    return _by_state(conn, queue, "dead", limit, after_seq)


def _dead_letter_row(conn: sqlite3.Connection, queue: str, key: str | int) -> Sequence[Any] | None:
    """The dead letter whose seq (a number) or message id is ``key``."""
    row: Sequence[Any] | None = None
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        row = conn.execute(
            f"SELECT {COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'dead' AND seq = ?",  # noqa: S608
            (queue, int(key)),
        ).fetchone()
    if row is None:
        row = conn.execute(
            f"SELECT {COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'dead' "  # noqa: S608
            "AND message_id = ? ORDER BY seq LIMIT 1",
            (queue, str(key)),
        ).fetchone()
    return row


def requeue(conn: sqlite3.Connection, queue: str, key: str | int, now: float) -> QueueMessage:
    """Send a dead letter again at the end of its session (a new seq, delivery count reset).

    Raises:
        ValidationError: No dead letter has that seq or message id.
    """
    row = _dead_letter_row(conn, queue, key)
    if row is None:
        raise ValidationError("id", f"no dead-lettered message has seq or message id {str(key)!r}")
    old = QueueMessage.from_row(row)
    conn.execute("DELETE FROM queue_messages WHERE seq = ?", (old.seq,))
    cursor = conn.execute(
        "INSERT INTO queue_messages (queue, message_id, session_id, subject, body, enqueued_at, "
        "visible_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (queue, old.message_id, old.session_id, old.subject, old.body, now, now),
    )
    new_seq = int(cursor.lastrowid or 0)
    fresh = conn.execute(
        f"SELECT {COLUMNS} FROM queue_messages WHERE seq = ?",  # noqa: S608 - constant columns
        (new_seq,),
    ).fetchone()
    return QueueMessage.from_row(fresh)


def purge_dead_letters(conn: sqlite3.Connection, queue: str) -> int:
    """Remove every dead letter of the queue; returns how many."""
    cursor = conn.execute("DELETE FROM queue_messages WHERE queue = ? AND state = 'dead'", (queue,))
    return int(cursor.rowcount)


def scope_rows(conn: sqlite3.Connection, queue: str, user_id: str, agent_id: str | None) -> list[Any]:
    """``(seq, message_id, subject, state, body)`` of every message of a scope (``agent_id``
    ``None``: of every scope of the user), waiting, locked or dead-lettered, oldest first.

    A message is the scope's when its session is the scope's (user-wide: any session ``user|...``),
    or when its JSON body names the user (and the agent): that finds the messages of a hashed
    session (ids too long to join) and any sent on another session. A message with neither (a
    body that is not JSON on a hashed session) cannot be told apart and is left.
    """
    user_id = validate_scope_id(user_id, "user_id")
    columns = "seq, message_id, subject, state, body"
    params: tuple[str, ...]
    if agent_id is None:
        # ``|`` follows every scope-id character and ``}`` follows ``|``: one key range per user.
        own, params = "session_id >= ? AND session_id < ?", (f"{user_id}|", f"{user_id}}}")
    else:
        agent_id = validate_scope_id(agent_id, "agent_id")
        own, params = "session_id = ?", (session_id_for(Scope.of(user_id, agent_id)),)
    rows = conn.execute(
        f"SELECT {columns} FROM queue_messages WHERE queue = ? AND {own}",  # noqa: S608 - fixed clauses
        (queue, *params),
    ).fetchall()
    named = conn.execute(
        f"SELECT {columns} FROM queue_messages WHERE queue = ? AND NOT ({own}) "  # noqa: S608
        "AND instr(body, ?) > 0",
        (queue, *params, user_id.encode("utf-8")),
    ).fetchall()
    for row in named:
        data = json_body(row[4])
        if data.get("user_id") == user_id and (agent_id is None or data.get("agent_id") == agent_id):
            rows.append(row)
    return sorted(rows, key=lambda row: int(row[0]))


def delete(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Remove the messages of these sequence numbers."""
    for start in range(0, len(seqs), _IN_CHUNK):
        chunk = seqs[start : start + _IN_CHUNK]
        conn.execute(
            f"DELETE FROM queue_messages WHERE seq IN ({', '.join('?' * len(chunk))})",  # noqa: S608
            chunk,
        )


def queued_items(rows: Sequence[Sequence[Any]]) -> list[QueuedItem]:
    """What :func:`scope_rows` found, by ids and time only (export)."""
    items = []
    for _, message_id, subject, state, body in rows:
        data = json_body(body)
        item_id = data.get("turn_id", data.get("recall_id"))
        items.append(
            QueuedItem(
                message_id=str(message_id),
                kind=str(subject),
                agent_id=data["agent_id"] if isinstance(data.get("agent_id"), str) else None,
                item_id=item_id if isinstance(item_id, str) else None,
                occurred_at=instant(data.get("occurred_at", data.get("at"))),
                dead_lettered=state == "dead",
            )
        )
    return items


def stats(conn: sqlite3.Connection, queue: str, now: float) -> QueueStats:
    """How many messages wait, are locked, are dead-lettered, and in how many sessions."""
    row = conn.execute(
        "SELECT "
        "COALESCE(SUM(state = 'active'), 0), "
        "COALESCE(SUM(state = 'active' AND locked_until IS NOT NULL AND locked_until > ?), 0), "
        "COALESCE(SUM(state = 'dead'), 0), "
        "COUNT(DISTINCT CASE WHEN state = 'active' THEN session_id END) "
        "FROM queue_messages WHERE queue = ?",
        (now, queue),
    ).fetchall()[0]
    return QueueStats(active=int(row[0]), locked=int(row[1]), dead_letters=int(row[2]), sessions=int(row[3]))


def oldest_enqueued_at(conn: sqlite3.Connection, queue: str) -> float | None:
    """When the oldest waiting message (locked or not) was sent; ``None``: none waits."""
    # The lowest seq is the oldest (a requeued message gets a new seq and a new time): one index step.
    rows = conn.execute(
        "SELECT enqueued_at FROM queue_messages WHERE queue = ? AND state = 'active' ORDER BY seq LIMIT 1",
        (queue,),
    ).fetchall()
    return None if not rows else float(rows[0][0])
