"""The embedded store's per-scope search indexes: loaded, refreshed, evicted, and kept in the file.

Each scope's index (:class:`~memory_core.adapters.sqlite.scope_index.ScopeIndex`) is loaded on first
use and refreshed incrementally (rows whose change sequence is newer than the cache) when
``scope_versions`` says the scope changed, whichever process wrote it. A scope of
:data:`PERSIST_MIN_DOCUMENTS` memories or more keeps its index in the file (``scope_snapshots``), so a
new process loads it with the vectors instead of rebuilding it from every row; a saved index is
dropped by any write that changes a memory's text (and by purges).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping

from memory_core.adapters.sqlite.ann import ScopeVectorIndexes
from memory_core.adapters.sqlite.connection import StoreConnection
from memory_core.adapters.sqlite.schema import SELECT_LIST
from memory_core.adapters.sqlite.scope_index import ScopeIndex, SnapshotError
from memory_core.errors import StorageFullError

__all__ = [
    "PERSIST_INTERVAL_SECONDS",
    "PERSIST_MIN_DOCUMENTS",
    "ScopeCache",
    "forget_persisted",
    "persist",
]

logger = logging.getLogger(__name__)

#: Scopes with at least this many memories keep their search index in the file between processes.
PERSIST_MIN_DOCUMENTS = 10_000
#: A scope's saved index dropped by a change of text is saved again at most this often per process.
PERSIST_INTERVAL_SECONDS = 60.0

ScopeKey = tuple[str, str]


class ScopeCache(Mapping[ScopeKey, ScopeIndex]):
    """The indexes of recently searched scopes by ``(user_id, agent_id)``, least recently used first.

    Args:
        max_documents: Upper bound on the memories held (the scope used last is always kept).
    """

    def __init__(self, max_documents: int) -> None:
        self._entries: OrderedDict[ScopeKey, ScopeIndex] = OrderedDict()
        self.max_documents = max_documents

    def __getitem__(self, key: ScopeKey) -> ScopeIndex:
        return self._entries[key]

    def __iter__(self) -> Iterator[ScopeKey]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def index(
        self, db: StoreConnection, key: ScopeKey, marker: tuple[int, int], ann: ScopeVectorIndexes
    ) -> ScopeIndex:
        """The scope's index, current as of ``marker`` (loaded, refreshed or taken as it is)."""
        cached = self._entries.get(key)
        if cached is not None and cached.checked_at == marker:
            return cached
        version, epoch = scope_state(db.conn, key)
        index = self._entries.get(key)
        if index is not None and index.epoch == epoch:
            if index.version != version:
                refresh(db.conn, key, index, version)
            self._entries.move_to_end(key)
            index.checked_at = marker
            return index
        index = load_persisted(db, key, version, epoch)
        if index is None:
            rows = db.conn.execute(
                f"SELECT {SELECT_LIST} FROM memories WHERE user_id = ? AND agent_id = ? ORDER BY id",  # noqa: S608
                key,
            ).fetchall()
            index = ScopeIndex.build(version, epoch, rows)
        elif index.version != version:
            changed = refresh(db.conn, key, index, version)
            # Worth persisting again once a good part of the scope is read from the rows at each load.
            index.persisted = changed <= max(PERSIST_MIN_DOCUMENTS // 8, len(index) // 8)
        index.checked_at = marker
        self._entries[key] = index
        self._evict(ann)
        return index

    def _evict(self, ann: ScopeVectorIndexes) -> None:
        """Drop the least recently used scopes past ``max_documents`` (never the last one, nor a scope
        with an approximate vector index: loading it again would mean building the index again)."""
        total = sum(len(i) for i in self._entries.values())
        for key in list(self._entries)[:-1]:  # never the scope just used
            if total <= self.max_documents:
                break
            if ann.holds(key, self._entries[key]):
                continue
            total -= len(self._entries.pop(key))
            ann.forget(key.__eq__)

    def drop(self, matches: Callable[[ScopeKey], bool]) -> None:
        """Forget the indexes of the scopes ``matches`` says."""
        for key in list(self._entries):
            if matches(key):
                self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


def scope_state(conn: sqlite3.Connection, key: ScopeKey) -> tuple[int, int]:
    """The scope's change sequence and epoch (``scope_versions``; (0, 0) for a scope never written)."""
    row = conn.execute(
        "SELECT version, epoch FROM scope_versions WHERE user_id = ? AND agent_id = ?", key
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def refresh(conn: sqlite3.Connection, key: ScopeKey, index: ScopeIndex, version: int) -> int:
    """Apply the scope's rows changed since the index's version; returns how many."""
    rows = conn.execute(
        f"SELECT {SELECT_LIST} FROM memories WHERE user_id = ? AND agent_id = ? AND seq > ? ORDER BY id",  # noqa: S608
        (*key, index.version),
    ).fetchall()
    index.apply(rows)
    index.version = version
    if rows and index.persisted and len(index) >= PERSIST_MIN_DOCUMENTS:
        # A change of text (here or in another process) drops the saved copy: save again, later.
        saved = conn.execute(
            "SELECT epoch FROM scope_snapshots WHERE user_id = ? AND agent_id = ?", key
        ).fetchone()
        index.persisted = saved is not None and int(saved[0]) == index.epoch
    return len(rows)


def load_persisted(db: StoreConnection, key: ScopeKey, version: int, epoch: int) -> ScopeIndex | None:
    """The scope's persisted index with its vectors read from the rows, or ``None`` (none, or unusable)."""
    row = db.conn.execute(
        "SELECT epoch, data FROM scope_snapshots WHERE user_id = ? AND agent_id = ?", key
    ).fetchone()
    if row is None or int(row[0]) != epoch:
        return None
    try:
        index = ScopeIndex.from_bytes(bytes(row[1]), epoch=epoch, dims=db.dimensions())
    except SnapshotError as exc:
        logger.warning("rebuilding the search index of a scope from its rows: its saved copy is %s", exc)
        return None
    if index.version > version:  # cannot be: saved from a later state of the same epoch
        return None
    vectors = db.conn.execute(
        "SELECT pk, embedding FROM memories WHERE user_id = ? AND agent_id = ? AND seq <= ?",
        (*key, index.version),
    ).fetchall()
    if vectors:
        pks, blobs = zip(*vectors, strict=True)
        index.set_vectors_by_pk(pks, blobs)
    return index


def persist(db: StoreConnection, key: ScopeKey, index: ScopeIndex) -> None:
    """Save a large scope's index in the file (best effort: a busy, read-only or damaged file is skipped)."""
    if index.persisted or len(index) < PERSIST_MIN_DOCUMENTS or db.integrity.damaged:
        return
    if index.saved_at is not None and time.monotonic() - index.saved_at < PERSIST_INTERVAL_SECONDS:
        return
    index.persisted = True  # until a check below says otherwise
    try:
        if scope_state(db.conn, key) != (index.version, index.epoch):
            index.persisted = False  # the scope moved on since this search read it: next time
            return
        data = index.to_bytes()
        db.conn.execute("PRAGMA busy_timeout = 250")
        try:
            with db.transaction():
                if scope_state(db.conn, key) != (index.version, index.epoch):  # again, holding the lock
                    index.persisted = False
                    return
                db.conn.execute(
                    "INSERT INTO scope_snapshots (user_id, agent_id, epoch, version, data) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, agent_id) DO UPDATE SET "
                    "epoch = excluded.epoch, version = excluded.version, data = excluded.data",
                    (*key, index.epoch, index.version, data),
                )
                index.saved_at = time.monotonic()
        finally:
            db.conn.execute("PRAGMA busy_timeout = 10000")
    except (sqlite3.Error, SnapshotError, StorageFullError) as exc:
        index.persisted = False  # tried again a minute later at the earliest
        index.saved_at = time.monotonic()
        logger.info("did not save the search index of a large scope (%s); it is rebuilt when loaded", exc)


def forget_persisted(conn: sqlite3.Connection, user_id: str, agent_id: str | None = None) -> None:
    """Drop saved indexes (inside the caller's transaction): they hold the terms of the rows."""
    if agent_id is None:
        conn.execute("DELETE FROM scope_snapshots WHERE user_id = ?", (user_id,))
    else:
        conn.execute("DELETE FROM scope_snapshots WHERE user_id = ? AND agent_id = ?", (user_id, agent_id))
