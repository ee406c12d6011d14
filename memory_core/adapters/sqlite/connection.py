"""The embedded store's one SQLite connection: its lock, write transactions, change sequence and markers."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from memory_core.adapters.sqlite.files import disk_full_error, rollback
from memory_core.adapters.sqlite.integrity import FileState, Integrity, is_corrupt
from memory_core.errors import ConflictError, DamagedFileError

__all__ = ["IN_CHUNK", "StoreConnection"]

#: Row keys per ``IN (...)`` list (SQLite's default limit on parameters is 999 in old builds).
IN_CHUNK = 900


class StoreConnection:
    """The connection of one store file, the lock every use of it holds, and its write transactions.

    Args:
        conn: The open connection (autocommit: ``isolation_level=None``).
        path: The file, for messages (``":memory:"`` for a private in-memory store).
    """

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self.lock = threading.RLock()
        #: Transactions this connection committed (other connections' show in ``data_version``).
        self.commits = 0
        #: What the check at open found (or a write since: damaged); a damaged file takes no writes.
        self.file = FileState()

    @property
    def integrity(self) -> Integrity:
        return self.file.integrity

    def refuse_if_damaged(self) -> None:
        """Raise before a write to a file found damaged.

        Raises:
            DamagedFileError: The check at open, or a write since, found the file damaged.
        """
        if self.integrity.damaged:
            raise DamagedFileError(self.path, self.integrity.found)

    def transaction(self) -> Transaction:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the lock (rolled back on any error).

        Raises:
            DamagedFileError: The file is damaged (nothing is begun).
        """
        self.refuse_if_damaged()
        return Transaction(self)

    def change_marker(self) -> tuple[int, int]:
        """Changes by other connections (``data_version``) and by this one (commit count)."""
        row = self.conn.execute("PRAGMA data_version").fetchone()
        return int(row[0]), self.commits

    def next_seq(self) -> int:
        """The next change sequence number (inside the caller's transaction)."""
        self.conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'seq'")
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()
        return int(row[0])

    def bump_scopes(self, scopes: Iterable[tuple[str, str]], seq: int, *, new_epoch: bool = False) -> None:
        """Record that ``scopes`` changed at ``seq`` (a new epoch: rows were removed or re-indexed)."""
        for user_id, agent_id in set(scopes):
            self.conn.execute(
                "INSERT INTO scope_versions (user_id, agent_id, version, epoch) VALUES (?, ?, ?, 0) "
                "ON CONFLICT (user_id, agent_id) DO UPDATE SET version = excluded.version, "
                "epoch = epoch + ?",
                (user_id, agent_id, seq, 1 if new_epoch else 0),
            )

    def meta(self, key: str) -> str | None:
        """A value of the ``meta`` table, or ``None``."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def dimensions(self) -> int | None:
        """The size of the store's embeddings (``None`` before the first one)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'embedding_dimensions'").fetchone()
        return None if row is None else int(row[0])

    def check_dimensions(self, dims: int) -> None:
        """Record the store's embedding size with its first embedding; refuse another size after.

        Raises:
            ConflictError: The store holds embeddings of another size.
        """
        stored = self.dimensions()
        if stored is None:
            self.conn.execute(
                "INSERT INTO meta (key, value) VALUES ('embedding_dimensions', ?)", (str(dims),)
            )
        elif stored != dims:
            raise ConflictError(
                f"this store holds {stored}-dimensional embeddings; got one with {dims} dimensions "
                "(use the same embedder, or a new store file)"
            )

    def rows_by_pk(self, sql: str, keys: Sequence[Any]) -> list[Any]:
        """``sql`` (with one ``IN ({})`` placeholder list) over ``keys`` in chunks SQLite accepts."""
        found: list[Any] = []
        pks = [int(k) for k in keys]
        for start in range(0, len(pks), IN_CHUNK):
            chunk = pks[start : start + IN_CHUNK]
            found += self.conn.execute(sql.format(", ".join("?" * len(chunk))), chunk).fetchall()
        return found


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the connection's lock; rolls back on any error."""

    def __init__(self, connection: StoreConnection) -> None:
        self._connection = connection
        self._conn = connection.conn
        self._lock = connection.lock

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is None:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as error:  # a failed COMMIT may leave the transaction open
                    self._failed(error)
                    raise
                self._connection.commits += 1
            else:
                self._failed(exc)
        finally:
            self._lock.release()

    def _failed(self, exc: BaseException) -> None:
        """Roll back what SQLite has not (never raising over ``exc``); a full disk is said plainly."""
        rollback(self._conn)
        full = disk_full_error(exc, self._connection.path)
        if full is not None:
            raise full from exc
        if is_corrupt(exc):  # from now on no write goes into it
            self._connection.file.mark_damaged(str(exc))
            raise DamagedFileError(self._connection.path, str(exc)) from exc
