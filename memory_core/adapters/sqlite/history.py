"""The decision history and turn journal in SQLite (the embedded mode's :class:`HistoryStore`).

It also keeps named checkpoints (:class:`~memory_core.ports.CheckpointStore`: the scheduled
forgetting run's cursor and next due time) in ``history_meta``.

It lives in its own tables, normally in the same file as the memory store: ``history_entries`` (one
row per decision, keyed deterministically by scope, turn, step and position so a replay stores
nothing twice) and ``turns_journal`` (the candidates a turn's first attempt extracted, and when the
turn was completed). WAL mode; every write is one transaction.

``history_tombstones`` keeps, per purged user (``agent_id`` empty) or scope, when it was purged: ids
and a time, no text; :meth:`SQLiteHistoryStore.purge` leaves them in place, so a replay of a purged
turn is dropped. Its ``settled_at`` says when the last purge of it was over (``""``: one is under
way; :class:`~memory_core.capabilities.PurgeSettlement`). ``secure_delete`` is on (deleted rows are zeroed in
the file), and :meth:`SQLiteHistoryStore.checkpoint_wal` rewrites the file and truncates the
write-ahead log after a purge.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_core.adapters.history_codec import (
    JOURNAL_FIELDS,
    candidates_json,
    entry_fields,
    entry_from_fields,
    iso_time,
    journal_from_fields,
    rewritten_candidates,
)
from memory_core.adapters.sqlite.files import (
    disk_full_error,
    keep_private,
    make_folder,
    refuse_empty_file,
    rollback,
    truncate_wal,
)
from memory_core.adapters.sqlite.integrity import (
    DEFAULT_CHECK_SECONDS,
    FileState,
    Integrity,
    check_integrity,
    is_corrupt,
)
from memory_core.adapters.sqlite.ownership import STORE, check_owner, create_whole, make_tables, new_database
from memory_core.domain.messages import HistoryEntry, MemoryCandidate
from memory_core.domain.records import Scope
from memory_core.domain.validation import ensure_utc, validate_scope_id
from memory_core.errors import DamagedFileError
from memory_core.ports import TurnJournal, TurnStart

__all__ = ["SQLiteHistoryStore", "history_entry_id"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS history_entries (
    entry_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    turn_id TEXT,
    step INTEGER,
    position INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    before_json TEXT,
    after_json TEXT,
    reason TEXT NOT NULL,
    at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS history_entries_memory ON history_entries (user_id, agent_id, memory_id, seq);
CREATE INDEX IF NOT EXISTS history_entries_turn ON history_entries (user_id, agent_id, turn_id, seq);
CREATE TABLE IF NOT EXISTS history_steps (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    PRIMARY KEY (user_id, agent_id, turn_id, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns_journal (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    candidates_json TEXT NOT NULL,
    extraction_path TEXT NOT NULL,
    fallback_reason TEXT,
    started_at TEXT NOT NULL,
    processed_at TEXT,
    PRIMARY KEY (user_id, agent_id, turn_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history_tombstones (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    purged_at TEXT NOT NULL,
    settled_at TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, agent_id)
) WITHOUT ROWID;
"""

_NAMESPACE = uuid.UUID("0b5f2a1e-6c3d-5d0e-9a57-3c1f8e2d7b64")
_CHECKPOINT_PREFIX = "checkpoint:"
#: The ``agent_id`` of a tombstone that covers every agent of its user (no scope id is empty).
_ALL_AGENTS = ""
_COLUMNS = "memory_id, user_id, agent_id, event, before_json, after_json, reason, turn_id, at"
#: The fields of :data:`_COLUMNS` as :func:`~memory_core.adapters.history_codec.entry_from_fields` reads them.
_ENTRY_ROW = ("memory_id", "user_id", "agent_id", "event", "before", "after", "reason", "turn_id", "at")


def history_entry_id(scope: Scope, turn_id: str, step: int, position: int) -> str:
    """The deterministic id of the ``position``-th entry of candidate ``step`` of a turn."""
    return uuid.uuid5(
        _NAMESPACE, f"{scope.user_id}\x1f{scope.agent_id}\x1f{turn_id}\x1f{step}\x1f{position}"
    ).hex


class SQLiteHistoryStore:
    """History entries and turn journals in SQLite.

    Args:
        path: The database file (usually the memory store's file); ``":memory:"`` for a private one.
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` survives a killed process in WAL mode).
        file_state: The state of the file shared with the memory store on it (``None``, or not
            checked yet: the file is checked here, within ``check_seconds``). A damaged file is opened
            for reading only: every write raises :class:`~memory_core.errors.DamagedFileError`.
        check_seconds: The budget of that check (``MEMORY_SQLITE_CHECK_SECONDS``; 0: none).

    Raises:
        ConflictError: The file is another program's, or not a database.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "NORMAL",
        file_state: FileState | None = None,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError("synchronous must be OFF, NORMAL, FULL or EXTRA")
        self._path = str(path)
        existed = make_folder(self._path)
        self._lock = threading.RLock()
        refuse_empty_file(self._path, "store")  # a missing file is new; an empty one is not
        if not existed:
            # the path holds whole tables, or nothing
            create_whole(self._path, functools.partial(new_database, kind=STORE, schema=_SCHEMA))
        self._conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute("PRAGMA busy_timeout = 10000")
            check_owner(self._conn, self._path, STORE)  # before the first write, even of a pragma
            self._file = file_state if file_state is not None else FileState()
            if not self._file.checked:
                self._file.record(check_integrity(self._path, check_seconds))
            if not self.integrity.damaged:
                self._conn.execute("PRAGMA secure_delete = ON")  # deleted rows are zeroed, not left in free space
                if self._path != ":memory:":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
                with self._lock:
                    make_tables(self._conn, STORE, _SCHEMA)
                    self._add_settlement()
        except BaseException:
            self._conn.close()
            raise
        keep_private(self._path, existed, "history")

    def _add_settlement(self) -> None:
        """Give a file made before purges were settled its ``settled_at`` column; the purges it
        recorded are over (each settled at its own time)."""
        if "settled_at" in self._tombstone_columns():
            return
        self._begin()
        try:
            if "settled_at" not in self._tombstone_columns():  # another process may have just added it
                self._conn.execute("ALTER TABLE history_tombstones ADD COLUMN settled_at TEXT NOT NULL DEFAULT ''")
                self._conn.execute("UPDATE history_tombstones SET settled_at = purged_at")
            self._conn.execute("COMMIT")
        except BaseException as exc:
            self._abort(exc)
            raise

    def _tombstone_columns(self) -> set[str]:
        return {str(row[1]) for row in self._conn.execute("PRAGMA table_info(history_tombstones)")}

    @property
    def path(self) -> str:
        return self._path

    @property
    def integrity(self) -> Integrity:
        """What the check at open found (``damaged`` also after a write SQLite failed so)."""
        return self._file.integrity

    # -- plumbing -------------------------------------------------------------------------------
    def _begin(self) -> None:
        if self.integrity.damaged:
            raise DamagedFileError(self._path, self.integrity.found)
        self._conn.execute("BEGIN IMMEDIATE")

    def _abort(self, exc: BaseException) -> None:
        """End a failed write transaction: roll back what SQLite has not already rolled back (never
        raising over ``exc``, which the caller re-raises); a full disk raises a ``StorageFullError``."""
        rollback(self._conn)
        full = disk_full_error(exc, self._path)
        if full is not None:
            raise full from exc
        if is_corrupt(exc):  # from now on no write goes into it
            self._file.mark_damaged(str(exc))
            raise DamagedFileError(self._path, str(exc)) from exc

    def _next_seq(self) -> int:
        row = self._conn.execute("SELECT value FROM history_meta WHERE key = 'seq'").fetchone()
        seq = (int(row[0]) if row else 0) + 1
        self._put_meta("seq", str(seq))
        return seq

    def _put_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO history_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _insert(self, entry_id: str, entry: HistoryEntry, step: int | None, position: int, seq: int) -> None:
        fields = entry_fields(entry)
        self._conn.execute(
            "INSERT OR IGNORE INTO history_entries (entry_id, user_id, agent_id, memory_id, turn_id, step, "
            "position, seq, event, before_json, after_json, reason, at) "
            "VALUES (:entry_id, :user_id, :agent_id, :memory_id, :turn_id, :step, "
            ":position, :seq, :event, :before, :after, :reason, :at)",
            {
                **fields,
                "entry_id": entry_id,
                "turn_id": entry.turn_id,
                "step": step,
                "position": position,
                "seq": seq,
            },
        )

    @staticmethod
    def _entry(row: Sequence[Any]) -> HistoryEntry:
        return entry_from_fields(dict(zip(_ENTRY_ROW, row, strict=True)))

    def _entries(self, scope: Scope, rest: str, args: tuple[str | int, ...]) -> list[HistoryEntry]:
        """The scope's entries that ``rest`` (a constant SQL tail: more conditions, the order) selects."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM history_entries "  # noqa: S608 - constant column list and tail
                f"WHERE user_id = ? AND agent_id = ? {rest}",
                (scope.user_id, scope.agent_id, *args),
            ).fetchall()
        return [self._entry(r) for r in rows]

    def _journal(self, scope: Scope, turn_id: str) -> TurnJournal | None:
        row = self._conn.execute(
            "SELECT candidates_json, extraction_path, fallback_reason, started_at, processed_at "
            "FROM turns_journal WHERE user_id = ? AND agent_id = ? AND turn_id = ?",
            (scope.user_id, scope.agent_id, turn_id),
        ).fetchone()
        if row is None:
            return None
        steps = self._conn.execute(
            "SELECT step FROM history_steps WHERE user_id = ? AND agent_id = ? AND turn_id = ?",
            (scope.user_id, scope.agent_id, turn_id),
        ).fetchall()
        fields = dict(zip(JOURNAL_FIELDS, row, strict=True))
        return journal_from_fields(scope, turn_id, fields, (int(s[0]) for s in steps))

    # -- the port -------------------------------------------------------------------------------
    async def append(self, entries: Sequence[HistoryEntry]) -> None:
        """Append entries outside any turn step, in one transaction."""
        if not entries:
            return
        with self._lock:
            self._begin()
            try:
                for position, entry in enumerate(entries):
                    seq = self._next_seq()
                    self._insert(uuid.uuid4().hex, entry, None, position, seq)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise

    async def begin_turn(self, start: TurnStart) -> TurnJournal:
        """Record the turn's start unless an earlier attempt did; return what is recorded."""
        scope = start.scope
        payload = candidates_json(start.candidates)
        with self._lock:
            self._begin()
            try:
                self._conn.execute(
                    "INSERT OR IGNORE INTO turns_journal (user_id, agent_id, turn_id, candidates_json, "
                    "extraction_path, fallback_reason, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        scope.user_id,
                        scope.agent_id,
                        start.turn_id,
                        payload,
                        start.extraction_path,
                        start.fallback_reason,
                        iso_time(start.at),
                    ),
                )
                journal = self._journal(scope, start.turn_id)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise
        assert journal is not None
        return journal

    async def journal(self, scope: Scope, turn_id: str) -> TurnJournal | None:
        with self._lock:
            return self._journal(scope, turn_id)

    async def record_step(
        self, scope: Scope, turn_id: str, step: int, entries: Sequence[HistoryEntry]
    ) -> bool:
        """Store the entries of one candidate and mark the step done, atomically."""
        with self._lock:
            self._begin()
            try:
                cursor = self._conn.execute(
                    "INSERT OR IGNORE INTO history_steps (user_id, agent_id, turn_id, step) VALUES (?, ?, ?, ?)",
                    (scope.user_id, scope.agent_id, turn_id, step),
                )
                fresh = cursor.rowcount == 1
                if fresh:
                    for position, entry in enumerate(entries):
                        seq = self._next_seq()
                        self._insert(
                            history_entry_id(scope, turn_id, step, position), entry, step, position, seq
                        )
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise
        return fresh

    async def for_memory(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        return self._entries(scope, "AND memory_id = ? ORDER BY seq", (memory_id,))

    async def rewrite_entries(
        self, scope: Scope, memory_ids: Sequence[str], rewrite: Callable[[HistoryEntry], HistoryEntry]
    ) -> int:
        changed = 0
        with self._lock:
            self._begin()
            try:
                for memory_id in memory_ids:
                    rows = self._conn.execute(
                        f"SELECT entry_id, {_COLUMNS} FROM history_entries "  # noqa: S608 - constant columns
                        "WHERE user_id = ? AND agent_id = ? AND memory_id = ?",
                        (scope.user_id, scope.agent_id, memory_id),
                    ).fetchall()
                    for entry_id, *row in rows:
                        entry = self._entry(row)
                        forgotten = rewrite(entry)
                        if forgotten == entry:
                            continue
                        fields = entry_fields(forgotten)
                        self._conn.execute(
                            "UPDATE history_entries SET before_json = ?, after_json = ?, reason = ? WHERE entry_id = ?",
                            (fields["before"], fields["after"], fields["reason"], entry_id),
                        )
                        changed += 1
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise
        return changed

    async def rewrite_candidates(
        self, scope: Scope, turn_ids: Sequence[str], rewrite: Callable[[MemoryCandidate], MemoryCandidate]
    ) -> int:
        changed = 0
        with self._lock:
            self._begin()
            try:
                for turn_id in dict.fromkeys(turn_ids):
                    row = self._conn.execute(
                        "SELECT candidates_json FROM turns_journal WHERE user_id = ? AND agent_id = ? AND turn_id = ?",
                        (scope.user_id, scope.agent_id, turn_id),
                    ).fetchone()
                    if row is None:
                        continue
                    fresh = rewritten_candidates(row[0], rewrite)
                    if fresh is None:
                        continue
                    self._conn.execute(
                        "UPDATE turns_journal SET candidates_json = ? WHERE user_id = ? AND agent_id = ? AND turn_id = ?",
                        (fresh, scope.user_id, scope.agent_id, turn_id),
                    )
                    changed += 1
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise
        return changed

    async def for_turn(self, scope: Scope, turn_id: str) -> list[HistoryEntry]:
        return self._entries(scope, "AND turn_id = ? ORDER BY step, position, seq", (turn_id,))

    async def for_scope(self, scope: Scope) -> list[HistoryEntry]:
        """Every entry of a scope, oldest first (export)."""
        return self._entries(scope, "ORDER BY seq", ())

    async def scope_page(self, scope: Scope, offset: int, limit: int) -> list[HistoryEntry]:
        """At most ``limit`` entries of a scope after the first ``offset``, oldest first (a paged export)."""
        return self._entries(scope, "ORDER BY seq LIMIT ? OFFSET ?", (limit, offset))

    async def turn_processed(self, scope: Scope, turn_id: str) -> bool:
        with self._lock:
            row = self._conn.execute(
                "SELECT processed_at FROM turns_journal WHERE user_id = ? AND agent_id = ? AND turn_id = ?",
                (scope.user_id, scope.agent_id, turn_id),
            ).fetchone()
        return row is not None and row[0] is not None

    async def mark_turn_processed(self, scope: Scope, turn_id: str, at: datetime) -> None:
        """Mark a turn done; a turn that never began gets an empty journal."""
        stamp = iso_time(at)
        with self._lock:
            self._begin()
            try:
                self._conn.execute(
                    "INSERT OR IGNORE INTO turns_journal (user_id, agent_id, turn_id, candidates_json, "
                    "extraction_path, fallback_reason, started_at) VALUES (?, ?, ?, '[]', 'none', NULL, ?)",
                    (scope.user_id, scope.agent_id, turn_id, stamp),
                )
                self._conn.execute(
                    "UPDATE turns_journal SET processed_at = ? "
                    "WHERE user_id = ? AND agent_id = ? AND turn_id = ? AND processed_at IS NULL",
                    (stamp, scope.user_id, scope.agent_id, turn_id),
                )
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Remove a user's (or one agent's) entries, steps and journals; returns the entries removed."""
        validate_scope_id(user_id, "user_id")
        where = "user_id = ?"
        args: tuple[str, ...] = (user_id,)
        if agent_id is not None:
            validate_scope_id(agent_id, "agent_id")
            where += " AND agent_id = ?"
            args = (user_id, agent_id)
        with self._lock:
            self._begin()
            try:
                removed = self._conn.execute(f"DELETE FROM history_entries WHERE {where}", args).rowcount  # noqa: S608
                self._conn.execute(f"DELETE FROM history_steps WHERE {where}", args)  # noqa: S608
                self._conn.execute(f"DELETE FROM turns_journal WHERE {where}", args)  # noqa: S608
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise
        return int(removed)

    async def record_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> datetime:
        """Record that a user (``agent_id`` ``None``) or a scope was purged at ``at`` (only moves forward)."""
        validate_scope_id(user_id, "user_id")
        agent = _ALL_AGENTS if agent_id is None else validate_scope_id(agent_id, "agent_id")
        at = ensure_utc(at)
        with self._lock:
            self._begin()
            try:
                row = self._conn.execute(
                    "SELECT purged_at FROM history_tombstones WHERE user_id = ? AND agent_id = ?",
                    (user_id, agent),
                ).fetchone()
                kept = at if row is None else max(at, datetime.fromisoformat(row[0]))
                self._conn.execute(
                    "INSERT INTO history_tombstones (user_id, agent_id, purged_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (user_id, agent_id) DO UPDATE SET purged_at = excluded.purged_at",
                    (user_id, agent, iso_time(kept)),
                )
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise
        return kept

    async def settle_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> None:
        """Record that the purge of a user (``agent_id`` ``None``) or scope at ``at`` is over (only
        moves forward; a purge recorded later than ``at`` stays under way until it settles itself)."""
        validate_scope_id(user_id, "user_id")
        agent = _ALL_AGENTS if agent_id is None else validate_scope_id(agent_id, "agent_id")
        at = ensure_utc(at)
        with self._lock:
            self._begin()
            try:
                row = self._conn.execute(
                    "SELECT settled_at FROM history_tombstones WHERE user_id = ? AND agent_id = ?",
                    (user_id, agent),
                ).fetchone()
                if row is not None and (not row[0] or datetime.fromisoformat(row[0]) < at):
                    self._conn.execute(
                        "UPDATE history_tombstones SET settled_at = ? WHERE user_id = ? AND agent_id = ?",
                        (iso_time(at), user_id, agent),
                    )
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(exc)
                raise

    async def purge_settled(self, scope: Scope) -> bool:
        """Whether every purge covering ``scope`` (its own tombstone and its user's) is over."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT purged_at, settled_at FROM history_tombstones WHERE user_id = ? AND agent_id IN (?, ?)",
                (scope.user_id, _ALL_AGENTS, scope.agent_id),
            ).fetchall()
        return all(
            settled and datetime.fromisoformat(settled) >= datetime.fromisoformat(purged) for purged, settled in rows
        )

    async def tombstone(self, scope: Scope) -> datetime | None:
        """When ``scope`` was last purged (its own tombstone or its user's, the later), or ``None``."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT purged_at FROM history_tombstones WHERE user_id = ? AND agent_id IN (?, ?)",
                (scope.user_id, _ALL_AGENTS, scope.agent_id),
            ).fetchall()
        return max((datetime.fromisoformat(r[0]) for r in rows), default=None)

    async def checkpoint_wal(self, *, rebuild: bool = False) -> bool:
        """Copy the write-ahead log into the file and truncate it, so deleted text leaves the disk;
        with ``rebuild``, first rewrite the file (``VACUUM``: no free space of a page keeps a copy of a
        deleted row).

        Returns:
            ``False`` when another connection's read kept part of the log or the file could not be
            rewritten; ``True`` otherwise (always for an in-memory history).
        """
        with self._lock:
            return truncate_wal(self._conn, self._path, rebuild=rebuild)

    # -- checkpoints (the forgetting job's bookmark) ----------------------------------------------
    async def get_checkpoint(self, name: str) -> str | None:
        """A saved position (for example the scheduled forgetting cursor), or ``None``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM history_meta WHERE key = ?", (_CHECKPOINT_PREFIX + name,)
            ).fetchone()
        return None if row is None else str(row[0])

    async def set_checkpoint(self, name: str, value: str | None) -> None:
        """Save a position; ``None`` removes it."""
        key = _CHECKPOINT_PREFIX + name
        with self._lock:
            if value is None:
                self._conn.execute("DELETE FROM history_meta WHERE key = ?", (key,))
            else:
                self._put_meta(key, value)

    async def close(self) -> None:
        with self._lock:
            self._conn.close()

    async def __aenter__(self) -> SQLiteHistoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
