"""The embedded queue's SQLite file: its tables, its one connection and lock, and its transactions.

Storage: tables prefixed ``queue_`` (``queue_messages``, ``queue_dedup``, ``queue_state``) in one
SQLite file in WAL mode, marked as a queue (``PRAGMA application_id``, see
:mod:`memory_core.adapters.sqlite.ownership`: another program's file is refused untouched).
The file is checked at open (:mod:`memory_core.adapters.sqlite.integrity`); a damaged one still
opens, and :attr:`QueueFile.integrity` says it is damaged (as does any statement SQLite fails so). Every operation is one ``BEGIN IMMEDIATE`` transaction, safe across threads
and processes; a file that is busy beyond the timeout, locked or failing raises
:class:`~memory_core.errors.TransientError`, a full disk :class:`~memory_core.errors.StorageFullError`.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memory_core.adapters.sqlite.files import disk_full_error, refuse_empty_file, rollback, truncate_wal
from memory_core.adapters.sqlite.integrity import (
    DEFAULT_CHECK_SECONDS,
    Integrity,
    check_integrity,
    damaged,
    is_corrupt,
)
from memory_core.adapters.sqlite.ownership import QUEUE, check_owner, create_whole, make_tables, new_database
from memory_core.errors import ConflictError, PermanentError, TransientError, ValidationError

__all__ = ["QueueFile"]

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


class QueueFile:
    """The queue file's connection (opened, set up and its tables created), its lock and transactions.

    Args:
        path: The file (``":memory:"`` for a private in-memory queue); its folder must exist.
        synchronous: SQLite ``synchronous`` pragma (validated by the caller).
        busy_timeout_seconds: How long an operation waits for another connection's write lock.
        check_seconds: The budget of the integrity check at open (0: none).

    Raises:
        StorageFullError: The disk is full.
        TransientError: Another connection holds the file locked.
        ConflictError: The file is damaged or not a queue file.
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: str,
        busy_timeout_seconds: float,
        existed: bool = True,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
    ) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.closed = False
        self._busy_timeout = float(busy_timeout_seconds)
        refuse_empty_file(path, "queue")  # a missing file is a new queue; an empty one is not
        if not existed:
            # the path holds a whole queue file, or nothing
            create_whole(path, functools.partial(new_database, kind=QUEUE, schema=_SCHEMA))
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_seconds * 1000)}")
            check_owner(self._conn, path, QUEUE)  # before the first write, even of a pragma
            #: What the check at open found, or ``damaged`` once a statement failed so.
            self.integrity: Integrity = check_integrity(path, check_seconds)
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA secure_delete = ON")  # a settled message's body is zeroed in the file
            with self.lock:
                make_tables(self._conn, QUEUE, _SCHEMA)
        except ConflictError:
            self._conn.close()
            raise
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            self._conn.close()
            full = disk_full_error(exc, path)
            if full is not None:
                raise full from exc
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise TransientError(f"the queue file {path} is busy: {exc}") from exc
            raise ConflictError(
                f"{path} is not a readable queue file ({exc}): it is damaged or not a memory-core "
                "queue; move it aside (its messages are lost unless restored from a backup) and start again"
            ) from None

    @property
    def busy_timeout_seconds(self) -> float:
        return self._busy_timeout

    @busy_timeout_seconds.setter
    def busy_timeout_seconds(self, seconds: float) -> None:
        if seconds < 0:
            raise ValidationError("busy_timeout_seconds", "must not be negative")
        with self.connection() as conn:
            conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
            self._busy_timeout = float(seconds)

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, outside any transaction.

        Raises:
            PermanentError: The queue is closed.
        """
        with self.lock:
            if self.closed:
                raise PermanentError("the queue is closed")
            try:
                yield self._conn
            except sqlite3.DatabaseError as exc:
                self.notice(exc)
                raise

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the lock; rolled back on any error.

        Raises:
            PermanentError: The queue is closed.
            TransientError: The file is busy, locked or failing (worth a retry).
            StorageFullError: The disk is full.
        """
        with self.lock:
            if self.closed:
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
                full = disk_full_error(exc, self.path)
                if full is not None:
                    raise full from exc
                self.notice(exc)
                if isinstance(exc, sqlite3.OperationalError):  # locked, busy, I/O: worth a retry
                    raise TransientError(f"the queue file is unavailable: {exc}") from exc
                raise

    def notice(self, exc: BaseException) -> None:
        """Record that the file is damaged when ``exc`` is SQLite saying so."""
        if is_corrupt(exc) and not self.integrity.damaged:
            self.integrity = damaged(str(exc))

    def read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of one statement, outside any transaction."""
        with self.connection() as conn:
            return conn.execute(sql, params).fetchall()

    def checkpoint_wal(self, *, rebuild: bool = False) -> bool:
        """Copy the write-ahead log into the file and truncate it, first rewriting the file with
        ``rebuild`` (see :func:`truncate_wal`)."""
        with self.connection() as conn:
            return truncate_wal(conn, self.path, rebuild=rebuild)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if not self.closed:
                self.closed = True
                self._conn.close()
