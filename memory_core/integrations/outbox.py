"""A durable local outbox for turns that could not be published in time.

One SQLite file (WAL) holds each undelivered turn once, keyed by ``turn_id``: putting the same turn
twice keeps one row, and a row is removed only after a publish succeeded, so a turn leaves the outbox
exactly once. Downstream, the scope and ``turn_id`` make the Service Bus message id
(:func:`memory_core.domain.records.message_id_for`) and the pipeline's idempotency key, so even a publish whose
acknowledgement was lost is applied once.

Failed deliveries are retried with exponential backoff (``base_delay`` doubling up to ``max_delay``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from memory_core.adapters.sqlite.files import keep_private, make_folder
from memory_core.domain.messages import Turn
from memory_core.domain.validation import parse_model

__all__ = ["DEFAULT_OUTBOX_PATH", "MAX_PERMANENT_FAILURES", "OutboxEntry", "TurnOutbox"]

#: The outbox file of a provider that is not given one.
DEFAULT_OUTBOX_PATH = ".memory-core/outbox.db"
#: Deliveries a turn may fail permanently (the receiver refused it: too large, invalid, forbidden)
#: before it is set aside in the outbox's dead letters instead of being retried forever.
MAX_PERMANENT_FAILURES = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    turn_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_error TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox_dead (
    turn_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    reason TEXT NOT NULL,
    set_aside_at REAL NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """One undelivered turn."""

    turn: Turn
    attempts: int
    last_error: str | None


class TurnOutbox:
    """Undelivered turns in a local SQLite file.

    Args:
        path: The outbox file (created, with its folder, on first use).
        base_delay: Seconds before the first retry of a failed delivery.
        max_delay: Longest wait between retries.
    """

    def __init__(self, path: str | Path, *, base_delay: float = 2.0, max_delay: float = 300.0) -> None:
        self.path = Path(path)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def open(cls, where: str | Path | TurnOutbox | None) -> TurnOutbox | None:
        """The outbox at ``where`` (a file), ``where`` itself when it is one, or ``None``."""
        return where if where is None or isinstance(where, TurnOutbox) else cls(where)

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            existed = make_folder(str(self.path))
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            keep_private(str(self.path), existed, "outbox")  # it holds turns not yet sent
            self._conn = conn
        return self._conn

    def exists(self) -> bool:
        """True when the outbox file has been created (so it may hold turns)."""
        return self._conn is not None or self.path.exists()

    def put(self, turn: Turn, *, error: str | None = None) -> bool:
        """Keep ``turn`` for a later delivery; ``False`` if it was already waiting."""
        now = time.time()
        body = json.dumps(turn.to_json_dict(), ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            cursor = self._connect().execute(
                "INSERT OR IGNORE INTO outbox (turn_id, body, attempts, next_attempt_at, last_error, created_at) "
                "VALUES (?, ?, 0, ?, ?, ?)",
                (turn.turn_id, body, now + self.base_delay, error, now),
            )
            return cursor.rowcount == 1

    def due(
        self, *, limit: int = 50, now: float | None = None, ignore_schedule: bool = False
    ) -> list[OutboxEntry]:
        """Turns whose next attempt is due (oldest first); every waiting turn if ``ignore_schedule``."""
        if not self.exists():
            return []
        at = time.time() if now is None else now
        with self._lock:
            if ignore_schedule:
                rows = (
                    self._connect()
                    .execute(
                        "SELECT body, attempts, last_error FROM outbox ORDER BY created_at, turn_id LIMIT ?",
                        (limit,),
                    )
                    .fetchall()
                )
            else:
                rows = (
                    self._connect()
                    .execute(
                        "SELECT body, attempts, last_error FROM outbox WHERE next_attempt_at <= ? "
                        "ORDER BY created_at, turn_id LIMIT ?",
                        (at, limit),
                    )
                    .fetchall()
                )
        return [
            OutboxEntry(parse_model(Turn, json.loads(body)), attempts, error)
            for body, attempts, error in rows
        ]

    def delivered(self, turn_id: str) -> bool:
        """Remove a delivered turn; ``False`` if it was not (or no longer) waiting."""
        if not self.exists():
            return False
        with self._lock:
            cursor = self._connect().execute("DELETE FROM outbox WHERE turn_id = ?", (turn_id,))
            return cursor.rowcount == 1

    def contains(self, turn_id: str) -> bool:
        """True while the turn waits for delivery."""
        if not self.exists():
            return False
        with self._lock:
            row = self._connect().execute("SELECT 1 FROM outbox WHERE turn_id = ?", (turn_id,)).fetchone()
        return row is not None

    def failed(self, turn_id: str, error: str) -> None:
        """Record a failed delivery and schedule the next attempt (exponential backoff)."""
        now = time.time()
        with self._lock:
            conn = self._connect()
            row = conn.execute("SELECT attempts FROM outbox WHERE turn_id = ?", (turn_id,)).fetchone()
            if row is None:
                return
            attempts = int(row[0]) + 1
            delay = min(self.max_delay, self.base_delay * (2 ** min(attempts, 30)))
            conn.execute(
                "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE turn_id = ?",
                (attempts, now + delay, error[:500], turn_id),
            )

    def set_aside(self, turn_id: str, reason: str) -> bool:
        """Move a turn the receiver keeps refusing to the dead letters (kept, never retried); ``False``
        if it was not waiting."""
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT body, attempts FROM outbox WHERE turn_id = ?", (turn_id,)).fetchone()
                if row is None:
                    conn.execute("COMMIT")
                    return False
                conn.execute(
                    "INSERT OR REPLACE INTO outbox_dead (turn_id, body, attempts, reason, set_aside_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (turn_id, row[0], int(row[1]) + 1, reason[:500], time.time()),
                )
                conn.execute("DELETE FROM outbox WHERE turn_id = ?", (turn_id,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return True

    def dead_letters(self) -> list[tuple[Turn, str]]:
        """Turns set aside, oldest first, with the reason."""
        if not self.exists():
            return []
        with self._lock:
            rows = self._connect().execute(
                "SELECT body, reason FROM outbox_dead ORDER BY set_aside_at, turn_id"
            ).fetchall()
        return [(parse_model(Turn, json.loads(body)), str(reason)) for body, reason in rows]

    def pending(self) -> int:
        """How many turns are waiting."""
        if not self.exists():
            return 0
        with self._lock:
            row = self._connect().execute("SELECT COUNT(*) FROM outbox").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
