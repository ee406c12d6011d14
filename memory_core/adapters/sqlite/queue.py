"""A durable queue in SQLite with the Service Bus semantics the pipeline relies on (embedded mode).

What it keeps from a Service Bus queue with sessions and duplicate detection:

- **Duplicate detection.** Every message has a ``message_id`` (derived from the scope and the turn or
  recall id, :func:`memory_core.domain.records.message_id_for`); a message whose id was sent within the
  duplicate detection window is dropped.
- **Sessions.** Every message has a ``session_id`` (the scope's, :func:`~memory_core.domain.records.session_id_for`).
  Only the oldest waiting message of a session can be received, and only while no other message of
  that session is locked, so one session is processed in order, one message at a time, while
  different sessions are processed in parallel. :meth:`SQLiteQueue.receive_batch` locks the oldest
  and the ones right behind it for one receiver, which processes them in order.
- **Peek-lock.** :meth:`SQLiteQueue.receive` locks a message for ``lock_seconds`` and counts the
  delivery; :meth:`~SQLiteQueue.complete` removes it, :meth:`~SQLiteQueue.abandon` releases it for
  redelivery, :meth:`~SQLiteQueue.dead_letter` moves it aside with a reason. A consumer that dies
  (even by ``SIGKILL``) loses nothing: its lock expires and the message is delivered again.
- **Dead-lettering.** A message received ``max_deliveries`` times without being completed is moved to
  the dead-letter queue (reason ``MaxDeliveryCountExceeded``, with the last error); consumers
  dead-letter permanent failures themselves with their own reason. Dead letters stay until they are
  requeued (sent again, at the end of their session, with a fresh delivery count) or purged.
- **Purging a scope.** :meth:`SQLiteQueue.purge_scope` removes every message of a user or scope
  (waiting, locked, dead-lettered) in one transaction, for ``memory-core purge``; ``secure_delete`` is
  on, so removed bodies are zeroed in the file, and :meth:`SQLiteQueue.checkpoint_wal` truncates the
  write-ahead log afterwards.

Storage: tables prefixed ``queue_`` (``queue_messages``, ``queue_dedup``, ``queue_state``) in one
SQLite file in WAL mode, by default ``<store file>.queue`` beside the memory store (see
:func:`default_queue_path`), so queue traffic never contends with the store's writer. Every operation
is one ``BEGIN IMMEDIATE`` transaction, safe across threads and processes. Times are wall-clock epoch
seconds (a clock can be injected for tests).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_core.adapters.sqlite.files import disk_full_error, refuse_empty_file, rollback, truncate_wal
from memory_core.domain.messages import MAX_RECALL_IDS, RecallUpdate, Turn, message_id_for, session_id_for
from memory_core.domain.records import Scope
from memory_core.domain.validation import parse_model, validate_scope_id
from memory_core.errors import ConflictError, PermanentError, TransientError, ValidationError
from memory_core.ports import QueuedItem

__all__ = [
    "DEFAULT_QUEUE",
    "MAX_DELIVERY_REASON",
    "MAX_MESSAGE_BYTES",
    "LockLostError",
    "QueueMessage",
    "QueueStats",
    "SQLiteQueue",
    "default_queue_path",
]

DEFAULT_QUEUE = "memory-turns"
#: The largest message body accepted (Service Bus Standard's message limit).
MAX_MESSAGE_BYTES = 256 * 1024
MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
_MAX_ID = 128
_MAX_REASON = 4096
#: Sequence numbers per ``IN (...)`` list.
_IN_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    message_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    body BLOB NOT NULL,
    enqueued_at REAL NOT NULL,
    visible_at REAL NOT NULL,
    delivery_count INTEGER NOT NULL DEFAULT 0,
    lock_token TEXT,
    locked_until REAL,
    state TEXT NOT NULL DEFAULT 'active',
    last_error TEXT,
    dead_letter_reason TEXT,
    dead_letter_description TEXT,
    dead_lettered_at REAL
);
CREATE INDEX IF NOT EXISTS queue_messages_session ON queue_messages (queue, state, session_id, seq);
CREATE INDEX IF NOT EXISTS queue_messages_order ON queue_messages (queue, state, seq);
CREATE TABLE IF NOT EXISTS queue_dedup (
    queue TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (queue, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS queue_dedup_seen ON queue_dedup (queue, seen_at);
CREATE TABLE IF NOT EXISTS queue_state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""

_COLUMNS = (
    "seq, queue, message_id, session_id, subject, body, enqueued_at, visible_at, delivery_count, "
    "lock_token, locked_until, state, last_error, dead_letter_reason, dead_letter_description, "
    "dead_lettered_at"
)

# The head of every session that is neither locked nor delayed, oldest first.
_RECEIVABLE = f"""
SELECT {_COLUMNS} FROM queue_messages AS m
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


def default_queue_path(store_path: str | Path) -> str:
    """Where the embedded queue lives for a store file: ``<store file>.queue``.

    Args:
        store_path: The memory store's SQLite file (``":memory:"`` gives a private in-memory queue).
    """
    text = str(store_path)
    return ":memory:" if text == ":memory:" else f"{text}.queue"


def _json_body(body: bytes) -> dict[str, Any]:
    """A message body as a JSON object, or ``{}`` when it is not one."""
    try:
        data = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _instant(value: Any) -> datetime | None:
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
    def _from_row(cls, row: Sequence[Any]) -> QueueMessage:
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


def _check_id(value: str, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_ID:
        raise ValidationError(field, f"must be a string of 1-{_MAX_ID} characters")
    return value


class SQLiteQueue:
    """A durable, session-ordered, peek-lock queue in one SQLite file; also a ``TurnPublisher``.

    Args:
        path: The queue file (created with its folder); ``":memory:"`` for a private in-memory queue.
        queue: Name of the queue inside the file (one file can hold several).
        lock_seconds: How long a received message stays locked before it is delivered again.
        max_deliveries: Deliveries after which a message is dead-lettered instead of delivered again.
        duplicate_window_seconds: How long a message id is remembered for duplicate detection.
        clock: Source of wall-clock epoch seconds (tests inject their own).
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` survives a killed process in WAL mode).
        busy_timeout_seconds: How long an operation waits for another connection's write lock before
            it fails with a :class:`~memory_core.errors.TransientError`.
        coalesce_recalls: Fold a recall update into the one waiting at the end of its session
            (:meth:`publish_recall`).
        recall_merge_seconds: How recent that one must be (queued at most this long ago).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        queue: str = DEFAULT_QUEUE,
        lock_seconds: float = 60.0,
        max_deliveries: int = 10,
        duplicate_window_seconds: float = 600.0,
        clock: Callable[[], float] = time.time,
        synchronous: str = "NORMAL",
        busy_timeout_seconds: float = 10.0,
        coalesce_recalls: bool = True,
        recall_merge_seconds: float = 2.0,
    ) -> None:
        if lock_seconds <= 0:
            raise ValidationError("lock_seconds", "must be positive")
        if max_deliveries < 1:
            raise ValidationError("max_deliveries", "must be at least 1")
        if duplicate_window_seconds < 0:
            raise ValidationError("duplicate_window_seconds", "must not be negative")
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValidationError("synchronous", "must be OFF, NORMAL, FULL or EXTRA")
        if busy_timeout_seconds < 0:
            raise ValidationError("busy_timeout_seconds", "must not be negative")
        self._path = str(path)
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        self.queue = _check_id(queue, "queue")
        self.lock_seconds = float(lock_seconds)
        self.max_deliveries = int(max_deliveries)
        self.duplicate_window_seconds = float(duplicate_window_seconds)
        self._clock = clock
        self.coalesce_recalls = coalesce_recalls
        self.recall_merge_seconds = float(recall_merge_seconds)
        #: Recall updates folded into a waiting one since the queue was opened.
        self.coalesced_recalls = 0
        self._lock = threading.RLock()
        self._closed = False
        self._busy_timeout = float(busy_timeout_seconds)
        refuse_empty_file(self._path, "queue")  # a missing file is a new queue; an empty one is not
        self._conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_seconds * 1000)}")
            if self._path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA secure_delete = ON")  # a settled message's body is zeroed in the file
            with self._lock:
                self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            self._conn.close()
            full = disk_full_error(exc, self._path)
            if full is not None:
                raise full from exc
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise TransientError(f"the queue file {self._path} is busy: {exc}") from exc
            raise ConflictError(
                f"{self._path} is not a readable queue file ({exc}): it is damaged or not a memory-core "
                "queue; move it aside (its messages are lost unless restored from a backup) and start again"
            ) from None

    @property
    def path(self) -> str:
        return self._path

    @property
    def busy_timeout_seconds(self) -> float:
        """How long an operation waits for another connection's write lock (settable)."""
        return self._busy_timeout

    @busy_timeout_seconds.setter
    def busy_timeout_seconds(self, seconds: float) -> None:
        if seconds < 0:
            raise ValidationError("busy_timeout_seconds", "must not be negative")
        with self._lock:
            if self._closed:
                raise PermanentError("the queue is closed")
            self._conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
            self._busy_timeout = float(seconds)

    # -- plumbing -------------------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise PermanentError("the queue is closed")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # busy beyond the timeout
                raise TransientError(f"the queue file is busy: {exc}") from exc
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as exc:
                rollback(self._conn)  # only what SQLite has not rolled back itself; never over ``exc``
                full = disk_full_error(exc, self._path)
                if full is not None:
                    raise full from exc
                if isinstance(exc, sqlite3.OperationalError):  # locked, busy, I/O: worth a retry
                    raise TransientError(f"the queue file is unavailable: {exc}") from exc
                raise

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            if self._closed:
                raise PermanentError("the queue is closed")
            return self._conn.execute(sql, params).fetchall()

    def _dead_letter_locked(
        self, conn: sqlite3.Connection, seq: int, reason: str, description: str, now: float
    ) -> None:
        conn.execute(
            "UPDATE queue_messages SET state = 'dead', lock_token = NULL, locked_until = NULL, "
            "dead_letter_reason = ?, dead_letter_description = ?, dead_lettered_at = ? WHERE seq = ?",
            (reason[:_MAX_REASON], description[:_MAX_REASON], now, seq),
        )

    # -- sending --------------------------------------------------------------------------------
    def send(self, body: bytes | str, *, message_id: str, session_id: str, subject: str = "") -> bool:
        """Enqueue one message at the end of its session.

        Args:
            body: The payload (text is stored as UTF-8).
            message_id: The producer's id; a repeat within the duplicate detection window is dropped.
            session_id: The ordered session (at most 128 characters, like Service Bus).
            subject: A label for inspection (``turn``, ``recall``).

        Returns:
            ``True`` if the message was enqueued, ``False`` if it was dropped as a duplicate.

        Raises:
            ValidationError: The body is over :data:`MAX_MESSAGE_BYTES`.
        """
        _check_id(message_id, "message_id")
        _check_id(session_id, "session_id")
        payload = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        if len(payload) > MAX_MESSAGE_BYTES:
            raise ValidationError(
                "body",
                f"is {len(payload)} bytes; a queue message holds at most {MAX_MESSAGE_BYTES} (as on Service Bus "
                "Standard), so it is refused here instead of dead-lettered later",
            )
        now = self._clock()
        with self._transaction() as conn:
            if self.duplicate_window_seconds > 0:
                conn.execute(
                    "DELETE FROM queue_dedup WHERE queue = ? AND seen_at < ?",
                    (self.queue, now - self.duplicate_window_seconds),
                )
                seen = conn.execute(
                    "SELECT 1 FROM queue_dedup WHERE queue = ? AND message_id = ?", (self.queue, message_id)
                ).fetchone()
                if seen is not None:
                    return False
                conn.execute(
                    "INSERT INTO queue_dedup (queue, message_id, seen_at) VALUES (?, ?, ?)",
                    (self.queue, message_id, now),
                )
            conn.execute(
                "INSERT INTO queue_messages (queue, message_id, session_id, subject, body, enqueued_at, "
                "visible_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.queue, message_id, session_id, subject[:64], payload, now, now),
            )
        return True

    # -- receiving ------------------------------------------------------------------------------
    def receive(self, *, lock_seconds: float | None = None) -> QueueMessage | None:
        """Lock and return the oldest receivable message, or ``None`` when nothing can be received.

        A message can be received when it is the oldest waiting message of its session and no message
        of that session is locked. Receiving counts a delivery; a message that has already been
        delivered ``max_deliveries`` times is dead-lettered (``MaxDeliveryCountExceeded``) instead.
        """
        received = self.receive_batch(max_messages=1, lock_seconds=lock_seconds)
        return received[0] if received else None

    def receive_batch(self, *, max_messages: int, lock_seconds: float | None = None) -> list[QueueMessage]:
        """Lock the oldest receivable message and up to ``max_messages - 1`` of the messages after it in
        its session, as Service Bus hands a session receiver several messages at once.

        The batch is the session's head (as :meth:`receive`) and the messages right behind it, in order,
        up to the first that is delayed (abandoned with a back-off), still locked, or due for the
        dead-letter queue. Each is locked (its own lock, the same expiry) and settled on its own. Only
        the head counts a delivery here; each message behind it counts one when its processing starts
        (:meth:`begin`), so a receiver that dies holding a batch costs the messages it never started
        nothing, and one it gives back unstarted goes with :meth:`release`. Process them in order: the
        session stays blocked until the last is settled.

        Returns:
            The messages, oldest first; empty when nothing can be received.
        """
        seconds = self.lock_seconds if lock_seconds is None else float(lock_seconds)
        if seconds <= 0:
            raise ValidationError("lock_seconds", "must be positive")
        if max_messages < 1:
            raise ValidationError("max_messages", "must be at least 1")
        now = self._clock()
        if not self._read(_RECEIVABLE, (self.queue, now, now, 1)):
            return []  # idle polling never takes the write lock
        with self._transaction() as conn:
            while True:
                row = conn.execute(_RECEIVABLE, (self.queue, now, now, 1)).fetchone()
                if row is None:
                    return []
                head = QueueMessage._from_row(row)
                if head.delivery_count >= self.max_deliveries:
                    self._dead_letter_locked(
                        conn,
                        head.seq,
                        MAX_DELIVERY_REASON,
                        f"delivered {head.delivery_count} time(s) without being completed; "
                        f"last error: {head.last_error or 'none reported (lock expired)'}",
                        now,
                    )
                    continue
                break
            rows = [row]
            if max_messages > 1:
                following = conn.execute(
                    f"SELECT {_COLUMNS} FROM queue_messages "  # noqa: S608 - constant column list
                    "WHERE queue = ? AND state = 'active' AND session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                    (self.queue, head.session_id, head.seq, max_messages - 1),
                ).fetchall()
                for candidate in following:
                    message = QueueMessage._from_row(candidate)
                    if (
                        message.delivery_count >= self.max_deliveries
                        or message.visible_at > now
                        or (message.locked_until is not None and message.locked_until > now)
                    ):
                        break
                    rows.append(candidate)
            until = now + seconds
            received = []
            for position, taken in enumerate(rows):
                message = QueueMessage._from_row(taken)
                token = uuid.uuid4().hex
                counted = 1 if position == 0 else 0  # the others count when they are begun
                conn.execute(
                    "UPDATE queue_messages SET lock_token = ?, locked_until = ?, "
                    "delivery_count = delivery_count + ? WHERE seq = ?",
                    (token, until, counted, message.seq),
                )
                received.append(
                    QueueMessage._from_row((*taken[:8], message.delivery_count + counted, token, until, *taken[11:]))
                )
            return received

    def begin(self, message: QueueMessage, *, lock_seconds: float | None = None) -> QueueMessage:
        """Start processing a message that came behind the head of a batch: it counts its delivery now
        and its lock is renewed; returns it with both.

        Raises:
            LockLostError: It is no longer locked by this receiver (its lock expired and another
                receiver took it): do not process it, nor the rest of the batch.
        """
        seconds = self.lock_seconds if lock_seconds is None else float(lock_seconds)
        until = self._clock() + seconds
        with self._transaction() as conn:
            self._locked_row(conn, message)
            conn.execute(
                "UPDATE queue_messages SET locked_until = ?, delivery_count = delivery_count + 1 WHERE seq = ?",
                (until, message.seq),
            )
        return dataclasses.replace(message, locked_until=until, delivery_count=message.delivery_count + 1)

    def release(self, message: QueueMessage) -> None:
        """Give back a message of a batch that was never begun: unlocked, its delivery count as it was.

        Raises:
            LockLostError: It is no longer locked by this receiver.
        """
        with self._transaction() as conn:
            self._locked_row(conn, message)
            conn.execute("UPDATE queue_messages SET lock_token = NULL, locked_until = NULL WHERE seq = ?", (message.seq,))

    def _locked_row(self, conn: sqlite3.Connection, message: QueueMessage) -> Sequence[Any]:
        row = conn.execute(
            "SELECT seq, lock_token, state FROM queue_messages WHERE seq = ?", (message.seq,)
        ).fetchone()
        if row is None or row[2] != "active" or row[1] is None or row[1] != message.lock_token:
            raise LockLostError(
                f"message {message.message_id!r} (seq {message.seq}) is no longer locked by this receiver"
            )
        return row  # type: ignore[no-any-return]

    def complete(self, message: QueueMessage) -> None:
        """Remove a received message for good (call only once its effects are durable).

        Raises:
            LockLostError: The lock was lost (expired and taken by another receiver, or settled).
        """
        with self._transaction() as conn:
            self._locked_row(conn, message)
            conn.execute("DELETE FROM queue_messages WHERE seq = ?", (message.seq,))

    def abandon(
        self,
        message: QueueMessage,
        *,
        error: str | None = None,
        delay_seconds: float = 0.0,
        count_delivery: bool = True,
    ) -> None:
        """Release a received message for redelivery (it stays the head of its session).

        Args:
            message: The received message.
            error: What went wrong (kept as ``last_error``, shown when it is dead-lettered).
            delay_seconds: Keep it (and so its session) invisible this long (a retry back-off).
            count_delivery: ``False`` gives the delivery back: the failure was the machine's (a full
                disk), not the message's, so waiting it out must not bring it closer to the
                dead-letter queue.
        """
        now = self._clock()
        with self._transaction() as conn:
            self._locked_row(conn, message)
            conn.execute(
                "UPDATE queue_messages SET lock_token = NULL, locked_until = NULL, visible_at = ?, "
                "last_error = COALESCE(?, last_error), delivery_count = MAX(delivery_count - ?, 0) "
                "WHERE seq = ?",
                (
                    now + max(0.0, delay_seconds),
                    None if error is None else error[:_MAX_REASON],
                    0 if count_delivery else 1,
                    message.seq,
                ),
            )

    def renew_lock(self, message: QueueMessage, *, lock_seconds: float | None = None) -> QueueMessage:
        """Extend the lock of a message still being processed; returns the message with its new expiry."""
        seconds = self.lock_seconds if lock_seconds is None else float(lock_seconds)
        until = self._clock() + seconds
        with self._transaction() as conn:
            self._locked_row(conn, message)
            conn.execute("UPDATE queue_messages SET locked_until = ? WHERE seq = ?", (until, message.seq))
        return dataclasses.replace(message, locked_until=until)

    def dead_letter(self, message: QueueMessage, *, reason: str, description: str = "") -> None:
        """Move a received message to the dead-letter queue with a reason (a permanent failure)."""
        if not reason:
            raise ValidationError("reason", "is required")
        now = self._clock()
        with self._transaction() as conn:
            self._locked_row(conn, message)
            self._dead_letter_locked(conn, message.seq, reason, description, now)

    # -- inspection and maintenance -------------------------------------------------------------
    def peek(self, *, limit: int = 100, after_seq: int = 0) -> list[QueueMessage]:
        """Waiting messages (locked or not), oldest first, without locking anything."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'active' AND seq > ? "  # noqa: S608
            "ORDER BY seq LIMIT ?",
            (self.queue, after_seq, max(1, limit)),
        )
        return [QueueMessage._from_row(r) for r in rows]

    def waiting_in_session(self, session_id: str, *, subject: str | None = None) -> list[QueueMessage]:
        """The waiting messages (locked or not, not dead-lettered) of one session, oldest first.

        Args:
            session_id: The session (a scope's: :func:`~memory_core.domain.records.session_id_for`).
            subject: Only messages with this subject (``turn``, ``recall``).
        """
        sql = f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'active' AND session_id = ?"  # noqa: S608
        params: list[Any] = [self.queue, session_id]
        if subject is not None:
            sql += " AND subject = ?"
            params.append(subject)
        return [QueueMessage._from_row(r) for r in self._read(sql + " ORDER BY seq", params)]

    def dead_letters(self, *, limit: int = 100, after_seq: int = 0) -> list[QueueMessage]:
        """Dead-lettered messages, oldest first."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'dead' AND seq > ? "  # noqa: S608
            "ORDER BY seq LIMIT ?",
            (self.queue, after_seq, max(1, limit)),
        )
        return [QueueMessage._from_row(r) for r in rows]

    def requeue(self, key: str | int) -> QueueMessage:
        """Send a dead letter again: at the end of its session, delivery count reset, reason cleared.

        Args:
            key: The dead letter's ``seq`` (a number) or its ``message_id``.

        Raises:
            ValidationError: No dead letter has that seq or message id.
        """
        now = self._clock()
        with self._transaction() as conn:
            if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'dead' AND seq = ?",  # noqa: S608
                    (self.queue, int(key)),
                ).fetchone()
            else:
                row = None
            if row is None:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM queue_messages WHERE queue = ? AND state = 'dead' "  # noqa: S608
                    "AND message_id = ? ORDER BY seq LIMIT 1",
                    (self.queue, str(key)),
                ).fetchone()
            if row is None:
                raise ValidationError("id", f"no dead-lettered message has seq or message id {str(key)!r}")
            old = QueueMessage._from_row(row)
            conn.execute("DELETE FROM queue_messages WHERE seq = ?", (old.seq,))
            cursor = conn.execute(
                "INSERT INTO queue_messages (queue, message_id, session_id, subject, body, enqueued_at, "
                "visible_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.queue, old.message_id, old.session_id, old.subject, old.body, now, now),
            )
            new_seq = int(cursor.lastrowid or 0)
            fresh = conn.execute(
                f"SELECT {_COLUMNS} FROM queue_messages WHERE seq = ?",  # noqa: S608 - constant columns
                (new_seq,),
            ).fetchone()
        return QueueMessage._from_row(fresh)

    def purge_dead_letters(self) -> int:
        """Remove every dead letter of the queue; returns how many."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM queue_messages WHERE queue = ? AND state = 'dead'", (self.queue,)
            )
            return int(cursor.rowcount)

    # -- a user's messages (purge and export) ----------------------------------------------------
    def _scope_rows(self, conn: sqlite3.Connection, user_id: str, agent_id: str | None) -> list[Any]:
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
            (self.queue, *params),
        ).fetchall()
        named = conn.execute(
            f"SELECT {columns} FROM queue_messages WHERE queue = ? AND NOT ({own}) "  # noqa: S608
            "AND instr(body, ?) > 0",
            (self.queue, *params, user_id.encode("utf-8")),
        ).fetchall()
        for row in named:
            data = _json_body(row[4])
            if data.get("user_id") == user_id and (agent_id is None or data.get("agent_id") == agent_id):
                rows.append(row)
        return sorted(rows, key=lambda row: int(row[0]))

    async def purge_scope(self, user_id: str, agent_id: str | None = None) -> int:
        """Remove every message of a scope (``agent_id`` ``None``: of every scope of the user) in one
        transaction: waiting, locked (its receiver loses the lock; it cannot complete it) and
        dead-lettered. With ``secure_delete`` on, the bodies are zeroed in the file.

        Returns:
            How many messages were removed.
        """
        with self._transaction() as conn:
            seqs = [int(row[0]) for row in self._scope_rows(conn, user_id, agent_id)]
            for start in range(0, len(seqs), _IN_CHUNK):
                chunk = seqs[start : start + _IN_CHUNK]
                conn.execute(
                    f"DELETE FROM queue_messages WHERE seq IN ({', '.join('?' * len(chunk))})",  # noqa: S608
                    chunk,
                )
        return len(seqs)

    async def queued_for(self, user_id: str, agent_id: str | None = None) -> list[QueuedItem]:
        """The messages of a scope (``agent_id`` ``None``: of every scope of the user) still held, by
        ids and time only, oldest first (export)."""
        with self._lock:
            if self._closed:
                raise PermanentError("the queue is closed")
            rows = self._scope_rows(self._conn, user_id, agent_id)
        items = []
        for _, message_id, subject, state, body in rows:
            data = _json_body(body)
            item_id = data.get("turn_id", data.get("recall_id"))
            items.append(
                QueuedItem(
                    message_id=str(message_id),
                    kind=str(subject),
                    agent_id=data["agent_id"] if isinstance(data.get("agent_id"), str) else None,
                    item_id=item_id if isinstance(item_id, str) else None,
                    occurred_at=_instant(data.get("occurred_at", data.get("at"))),
                    dead_lettered=state == "dead",
                )
            )
        return items

    async def checkpoint_wal(self) -> bool:
        """Copy the write-ahead log into the file and truncate it, so removed bodies leave the disk.

        Returns:
            ``False`` when another connection's read kept part of the log; ``True`` otherwise
            (always for an in-memory queue).
        """
        with self._lock:
            if self._closed:
                raise PermanentError("the queue is closed")
            return truncate_wal(self._conn, self._path)

    def stats(self) -> QueueStats:
        """How many messages wait, are locked, are dead-lettered, and in how many sessions."""
        now = self._clock()
        row = self._read(
            "SELECT "
            "COALESCE(SUM(state = 'active'), 0), "
            "COALESCE(SUM(state = 'active' AND locked_until IS NOT NULL AND locked_until > ?), 0), "
            "COALESCE(SUM(state = 'dead'), 0), "
            "COUNT(DISTINCT CASE WHEN state = 'active' THEN session_id END) "
            "FROM queue_messages WHERE queue = ?",
            (now, self.queue),
        )[0]
        return QueueStats(
            active=int(row[0]), locked=int(row[1]), dead_letters=int(row[2]), sessions=int(row[3])
        )

    def oldest_age_seconds(self) -> float | None:
        """How long the oldest waiting message (locked or not) has been in the queue; ``None``: none waits."""
        # The lowest seq is the oldest (a requeued message gets a new seq and a new time): one index step.
        rows = self._read(
            "SELECT enqueued_at FROM queue_messages WHERE queue = ? AND state = 'active' ORDER BY seq LIMIT 1",
            (self.queue,),
        )
        return None if not rows else max(0.0, self._clock() - float(rows[0][0]))

    def get_state(self, key: str) -> str | None:
        """A small persisted value (the scheduler keeps its bookmark here)."""
        rows = self._read("SELECT value FROM queue_state WHERE key = ?", (key,))
        return None if not rows else str(rows[0][0])

    def set_state(self, key: str, value: str | None) -> None:
        """Store (or with ``None`` remove) a small persisted value."""
        with self._transaction() as conn:
            if value is None:
                conn.execute("DELETE FROM queue_state WHERE key = ?", (key,))
            else:
                conn.execute(
                    "INSERT INTO queue_state (key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )

    # -- the TurnPublisher port -----------------------------------------------------------------
    async def publish_turn(self, turn: Turn) -> bool:
        """Enqueue a turn on its scope's session (message id from scope and ``turn_id``).

        Returns:
            ``False`` when duplicate detection dropped it (the same scope sent this turn id within the
            window).
        """
        body = json.dumps(turn.to_json_dict(), ensure_ascii=False).encode("utf-8")
        return self.send(
            body,
            message_id=message_id_for(turn.scope, "turn", turn.turn_id),
            session_id=session_id_for(turn.scope),
            subject="turn",
        )

    async def publish_recall(self, update: RecallUpdate) -> None:
        """Enqueue a recall update on its scope's session (message id from scope and ``recall_id``),
        or fold it into the recall update that ends the session, when that one is recent.

        Coalescing: when the last message of the scope's session is a recall update no worker has
        taken, queued less than ``recall_merge_seconds`` ago, the new one is merged into it (memory ids
        united in order, ``at`` the later of the two) instead of queued behind it. Recalls of a memory
        folded together count as one recall: they are massed, seconds apart, not spaced (see
        :meth:`memory_core.domain.policy.HumanMemoryPolicy.recall`). A merge never passes a turn (the order
        of the session is kept) and never makes an update longer than a recall message may be.
        """
        body = json.dumps(update.to_json_dict(), ensure_ascii=False).encode("utf-8")
        session_id = session_id_for(update.scope)
        if self.coalesce_recalls and self._merge_recall(session_id, update):
            return
        self.send(
            body,
            message_id=message_id_for(update.scope, "recall", update.recall_id),
            session_id=session_id,
            subject="recall",
        )

    def _merge_recall(self, session_id: str, update: RecallUpdate) -> bool:
        """Fold ``update`` into the recent recall update that ends its session; ``False`` if there is none."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT seq, subject, body, lock_token, enqueued_at FROM queue_messages "
                "WHERE queue = ? AND state = 'active' AND session_id = ? ORDER BY seq DESC LIMIT 1",
                (self.queue, session_id),
            ).fetchone()
            if row is None or row[1] != "recall" or row[3] is not None:
                return False  # nothing waiting, a turn last (order is kept), or a worker holds it
            if self._clock() - float(row[4]) > self.recall_merge_seconds:
                return False  # spaced, not massed: a recall of its own
            try:
                pending = parse_model(RecallUpdate, json.loads(bytes(row[2]).decode("utf-8")))
            except (ValueError, UnicodeDecodeError):
                return False  # not ours to rewrite: queue the new one behind it
            if pending.scope != update.scope:
                return False
            ids = list(dict.fromkeys([*pending.memory_ids, *update.memory_ids]))
            if len(ids) > MAX_RECALL_IDS:
                return False
            merged = pending.model_copy(update={"memory_ids": ids, "at": max(pending.at, update.at)})
            body = json.dumps(merged.to_json_dict(), ensure_ascii=False).encode("utf-8")
            conn.execute("UPDATE queue_messages SET body = ? WHERE seq = ?", (body, row[0]))
            self.coalesced_recalls += 1
        return True

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
