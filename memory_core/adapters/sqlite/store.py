"""The embedded memory store: one SQLite file, ranked the way the Azure AI Search index ranks.

Storage: one row per memory (numbers and times as columns, epoch seconds for times, the embedding as a
float32 blob, per-field term frequencies as JSON), plus index-wide BM25 statistics (document frequency
per field and term, document count and total length per field) kept exact in the same transactions.
WAL mode: one process writes, many read; every write is one transaction, so a crash never leaves a
half-written memory or statistics that disagree with the rows.

Search: each scope's memories are held in memory as numpy columns, an inverted index and a matrix of
unit vectors (:mod:`memory_core.adapters.sqlite.scope_index`), loaded on first use and refreshed
incrementally (rows whose change sequence is newer than the cache) when ``scope_versions`` says the
scope changed, whichever process wrote it. A scope of :data:`PERSIST_MIN_DOCUMENTS` memories or more
keeps its index in the file (``scope_snapshots``), so a new process loads it with the vectors instead
of rebuilding it from every row; a saved index is dropped by any write that changes a memory's text
(and by purges), so it never holds text the rows no longer hold.

- keyword: terms from :func:`memory_core.language.text.index_terms` (queries: :func:`~memory_core.language.text.query_terms`,
  which also drops English function words); a store written by another analyzer version is
  re-indexed once when opened. BM25 as Lucene computes it (k1 1.2, b 0.75, ``idf = ln(1 + (N - n + 0.5) / (n + 0.5))``,
  per-field statistics over the whole index, summed over the fields ``memory``, ``summary``,
  ``category`` and over query terms);
- vector: exact cosine nearest neighbours, score ``1 / (2 - cos)``;
- hybrid: Reciprocal Rank Fusion ``sum(w / (60 + rank))``, 0-based ranks, text leg top 1000 (w = 1),
  vector leg ``options.vector_k`` (w = ``options.vector_weight``, else the query language's); the
  query language also says whether the text leg counts a memory with any query word or only with
  all of them (:mod:`memory_core.domain.fusion`: a Japanese query, all);
- semantic: hybrid, and the result says the semantic ranker is not available locally;
- ranking profiles from :mod:`memory_core.domain.ranking`, applied to the relevance (after fusion).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.adapters.sqlite.ann import ScopeVectorIndexes
from memory_core.adapters.sqlite.files import disk_full_error, refuse_empty_file, rollback, truncate_wal
from memory_core.adapters.sqlite.schema import (
    AT,
    COLUMN,
    MERGEABLE,
    RECORD_COLUMNS,
    SCHEMA_VERSION,
    SELECT_LIST,
    check_file,
    insert_sql,
    prepare_schema,
    row_to_record,
    update_sql,
)
from memory_core.adapters.sqlite.scope_index import SEARCH_FIELDS, STATUS_CODES, ScopeIndex, SnapshotError
from memory_core.domain.fusion import fusion_for
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.ranking import apply_profile, profile_for
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope, status_note
from memory_core.domain.search import (
    MemorySearchOptions,
    OrderBy,
    ScoreBreakdown,
    SearchHit,
    SearchMode,
    SearchResult,
)
from memory_core.domain.validation import (
    parse_model,
    validate_category,
    validate_memory_id,
    validate_memory_ids,
    validate_positive_int,
    validate_scope_id,
)
from memory_core.errors import ConflictError, NotFoundError, StorageFullError, ValidationError
from memory_core.language.text import ANALYZER_VERSION, index_terms, query_terms
from memory_core.ports import (
    MAX_BROWSE_LIMIT,
    Clock,
    MemoryRef,
    Page,
    RetentionPage,
    RetentionWrite,
    SortedPage,
    StatusCounts,
    SystemClock,
    check_browse_window,
)

__all__ = ["BM25_B", "BM25_K1", "RRF_K", "SCHEMA_VERSION", "SEARCH_FIELDS", "TEXT_LEG_TOP", "SQLiteMemoryStore"]

logger = logging.getLogger(__name__)

BM25_K1 = 1.2
BM25_B = 0.75
RRF_K = 60
TEXT_LEG_TOP = 1000
SEMANTIC_NOTE = (
    "semantic ranker is not available in the embedded store; results are hybrid (BM25 + vector, RRF)"
)

#: Row keys per ``IN (...)`` list (SQLite's default limit on parameters is 999 in old builds).
_IN_CHUNK = 900
_TEXT_MODES = (SearchMode.KEYWORD, SearchMode.HYBRID, SearchMode.SEMANTIC)
_VECTOR_MODES = (SearchMode.VECTOR, SearchMode.HYBRID, SearchMode.SEMANTIC)
_STATUS_CODES = STATUS_CODES
_INSERT = insert_sql()
#: Cosines within this much of the k-th best are scored again exactly (a float32 product's rounding
#: is far smaller: about 1e-6 for 384 dimensions).
_RESCORE_MARGIN = 1e-4
#: Scopes with at least this many memories keep their search index in the file between processes.
PERSIST_MIN_DOCUMENTS = 10_000
#: A scope's saved index dropped by a change of text is saved again at most this often per process.
PERSIST_INTERVAL_SECONDS = 60.0
_UPDATE = update_sql()


def _counts(terms: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = counts.get(term, 0) + 1
    return counts


def _field_terms(record: MemoryRecord) -> dict[str, dict[str, int]]:
    terms: dict[str, dict[str, int]] = {}
    for name in SEARCH_FIELDS:
        counts: dict[str, int] = {}
        for term in index_terms(getattr(record, name)):
            counts[term] = counts.get(term, 0) + 1
        terms[name] = counts
    return terms


@dataclass(frozen=True, slots=True)
class _Leg:
    """One candidate leg of a search: a score per document and a 0-based rank (-1: not in the leg)."""

    scores: np.ndarray
    ranks: np.ndarray

    def at(self, position: int) -> tuple[float | None, int | None]:
        """(score, rank) of one document, or (None, None) when it is not in this leg."""
        rank = int(self.ranks[position])
        return (None, None) if rank < 0 else (float(self.scores[position]), rank)


class SQLiteMemoryStore:
    """Memories in one SQLite file, searched and ranked like the Azure AI Search index.

    Args:
        path: The database file (created with its folder if missing); ``":memory:"`` for a private
            in-memory store.
        clock: Source of "now" for expiry filters, freshness and recall.
        cache_documents: Upper bound on memories held in the per-scope search caches.
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` survives a killed process in WAL mode;
            ``FULL`` also survives power loss).
        vector_index_min_scope: Scopes of at least this many memories get an approximate vector index
            (``MEMORY_VECTOR_INDEX_MIN_SCOPE``; 0, the default: every scope is searched exactly; see
            :mod:`memory_core.adapters.sqlite.ann`).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        cache_documents: int = 200_000,
        synchronous: str = "NORMAL",
        vector_index_min_scope: int = 0,
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValidationError("synchronous", "must be OFF, NORMAL, FULL or EXTRA")
        self._path = str(path)
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._own_commits = 0
        refuse_empty_file(self._path, "store")  # a missing file is a new store; an empty one is not
        self._conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute("PRAGMA busy_timeout = 10000")
            check_file(self._conn, self._path)  # before the first write, even of a pragma
            if self._path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA secure_delete = ON")  # deleted rows are zeroed, not left in free space
            with self._transaction():
                found = prepare_schema(self._conn, self._path)
                self._reindex_if_needed()
        except BaseException as exc:
            self._conn.close()
            full = disk_full_error(exc, self._path)
            if full is not None:
                raise full from exc
            raise
        if 0 < found < SCHEMA_VERSION:
            logger.info("upgraded %s from store schema %s to %s", self._path, found, SCHEMA_VERSION)
        self._cache: OrderedDict[tuple[str, str], ScopeIndex] = OrderedDict()
        self._stats_cache: (
            tuple[tuple[int, int], dict[str, tuple[int, float]], dict[tuple[str, str], int]] | None
        ) = None
        self._cache_documents = cache_documents
        self._ann = ScopeVectorIndexes(vector_index_min_scope, lock=self._lock)
        self._closed = False

    def _reindex_if_needed(self) -> None:
        """Re-derive every memory's index terms and the BM25 statistics when the analyzer changed.

        Runs inside the constructor's transaction, once per analyzer version (``meta.analyzer``).
        """
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
        if row is not None and row[0] == ANALYZER_VERSION:
            return
        count = int(self._conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
        if count:
            logger.info("re-indexing %s memories for analyzer version %s", count, ANALYZER_VERSION)
            seq = self._next_seq()
            stats = _StatsDelta()
            last = 0
            while True:
                rows = self._conn.execute(
                    "SELECT pk, memory, summary, category FROM memories WHERE pk > ? ORDER BY pk LIMIT 5000",
                    (last,),
                ).fetchall()
                if not rows:
                    break
                updates = []
                for pk, *values in rows:
                    terms = {
                        name: _counts(index_terms(value)) for name, value in zip(SEARCH_FIELDS, values, strict=True)
                    }
                    stats.add(terms, +1)
                    updates.append((json.dumps(terms, ensure_ascii=False, sort_keys=True), seq, pk))
                self._conn.executemany("UPDATE memories SET terms = ?, seq = ? WHERE pk = ?", updates)
                last = int(rows[-1][0])
            self._conn.execute("DELETE FROM term_stats")
            self._conn.execute("DELETE FROM scope_snapshots")
            self._conn.execute("DELETE FROM field_stats")
            self._flush_stats(stats)
            scopes = self._conn.execute("SELECT DISTINCT user_id, agent_id FROM memories").fetchall()
            self._bump_scopes(((str(u), str(a)) for u, a in scopes), seq, new_epoch=True)
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES ('analyzer', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (ANALYZER_VERSION,),
        )

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    def _transaction(self) -> _Transaction:
        return _Transaction(self)

    def _change_marker(self) -> tuple[int, int]:
        """Changes by other connections (``data_version``) and by this one (commit count)."""
        row = self._conn.execute("PRAGMA data_version").fetchone()
        return int(row[0]), self._own_commits

    def _next_seq(self) -> int:
        self._conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'seq'")
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()
        return int(row[0])

    def _bump_scopes(self, scopes: Iterable[tuple[str, str]], seq: int, *, new_epoch: bool = False) -> None:
        for user_id, agent_id in set(scopes):
            self._conn.execute(
                "INSERT INTO scope_versions (user_id, agent_id, version, epoch) VALUES (?, ?, ?, 0) "
                "ON CONFLICT (user_id, agent_id) DO UPDATE SET version = excluded.version, "
                "epoch = epoch + ?",
                (user_id, agent_id, seq, 1 if new_epoch else 0),
            )

    def _check_dimensions(self, dims: int) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'embedding_dimensions'").fetchone()
        if row is None:
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES ('embedding_dimensions', ?)", (str(dims),)
            )
        elif int(row[0]) != dims:
            raise ConflictError(
                f"this store holds {row[0]}-dimensional embeddings; got one with {dims} dimensions "
                "(use the same embedder, or a new store file)"
            )

    def embedding_dimensions(self) -> int | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'embedding_dimensions'").fetchone()
        return None if row is None else int(row[0])

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction():
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def _select_one(self, memory_id: str) -> Sequence[Any] | None:
        row: Sequence[Any] | None = self._conn.execute(
            f"SELECT {SELECT_LIST} FROM memories WHERE id = ?",  # noqa: S608 - constant column list
            (memory_id,),
        ).fetchone()
        return row

    # -- writes ---------------------------------------------------------------------------------
    def _write(self, record: MemoryRecord, seq: int, old: Sequence[Any] | None, stats: _StatsDelta) -> None:
        """Insert or replace one validated record; its BM25 statistics go into ``stats``."""
        terms = _field_terms(record)
        encoded = json.dumps(terms, ensure_ascii=False, sort_keys=True)
        if old is not None:
            stats.add(json.loads(old[AT["terms"]]), -1)
            if old[AT["terms"]] != encoded:  # a saved index must never hold text the rows no longer do
                self._forget_persisted(record.user_id, record.agent_id)
        stats.add(terms, +1)
        embedding = None
        if record.embedding is not None:
            vector = np.asarray(record.embedding, dtype=np.float32)
            self._check_dimensions(int(vector.shape[0]))
            norm = float(np.linalg.norm(vector))
            if norm == 0.0:
                raise ValidationError("embedding", "must not be the zero vector")
            if not math.isfinite(norm) or not np.isfinite(vector).all():
                raise ValidationError("embedding", "must hold finite numbers of a finite length")
            embedding = vector / norm
        values = [
            embedding if column.kind == "vector" else column.encode(getattr(record, column.name))
            for column in RECORD_COLUMNS
        ]
        values += [encoded, seq]
        if old is None:
            self._conn.execute(_INSERT, values)
        else:
            self._conn.execute(_UPDATE, (*values, old[AT["pk"]]))

    def _flush_stats(self, stats: _StatsDelta) -> None:
        """Apply accumulated statistics changes (inside the caller's transaction)."""
        for name, (docs, length) in stats.fields.items():
            if docs or length:
                self._conn.execute(
                    "INSERT INTO field_stats (field, doc_count, total_length) VALUES (?, ?, ?) "
                    "ON CONFLICT (field) DO UPDATE SET doc_count = doc_count + excluded.doc_count, "
                    "total_length = total_length + excluded.total_length",
                    (name, docs, length),
                )
        changes = [(name, term, df) for (name, term), df in stats.terms.items() if df]
        self._conn.executemany(
            "INSERT INTO term_stats (field, term, df) VALUES (?, ?, ?) "
            "ON CONFLICT (field, term) DO UPDATE SET df = df + excluded.df",
            changes,
        )
        if any(df < 0 for _, _, df in changes):
            self._conn.executemany(
                "DELETE FROM term_stats WHERE field = ? AND term = ? AND df <= 0",
                [(name, term) for name, term, df in changes if df < 0],
            )

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace whole records, all in one transaction.

        Raises:
            ConflictError: A record's id belongs to another scope, or its embedding has another size.
        """
        validated = [parse_model(MemoryRecord, r) for r in records]
        if not validated:
            return
        ids = [r.id for r in validated]
        if len(set(ids)) != len(ids):
            raise ValidationError("records", "the same id appears more than once in one upsert")
        with self._transaction():
            seq = self._next_seq()
            stats = _StatsDelta()
            for record in validated:
                old = self._select_one(record.id)
                if old is not None and (old[2], old[3]) != (record.user_id, record.agent_id):
                    raise ConflictError(f"memory id {record.id!r} already belongs to another scope")
                self._write(record, seq, old, stats)
            self._flush_stats(stats)
            self._bump_scopes(((r.user_id, r.agent_id) for r in validated), seq)

    def _get_in_scope(self, scope: Scope, memory_id: str) -> Sequence[Any] | None:
        validate_memory_id(memory_id)
        row = self._select_one(memory_id)
        if row is None or (row[AT["user_id"]], row[AT["agent_id"]]) != (scope.user_id, scope.agent_id):
            return None
        return row

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        scope = _checked(scope)
        with self._lock:
            row = self._get_in_scope(scope, memory_id)
        return None if row is None else row_to_record(row, with_embedding=True)

    async def get_many(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The records of ``scope`` among ``memory_ids`` (any status, with embeddings, as :meth:`get`
        returns them), by id; ids missing or of another scope are absent. One query per
        :data:`_IN_CHUNK` ids (:class:`~memory_core.ports.BatchReader`).

        Raises:
            ValidationError: A bad id (before any query).
        """
        scope = _checked(scope)
        ids = validate_memory_ids(memory_ids, "memory_ids")
        found: dict[str, MemoryRecord] = {}
        with self._lock:
            for start in range(0, len(ids), _IN_CHUNK):
                chunk = ids[start : start + _IN_CHUNK]
                rows = self._conn.execute(
                    f"SELECT {SELECT_LIST} FROM memories WHERE user_id = ? AND agent_id = ? "  # noqa: S608
                    f"AND id IN ({', '.join('?' * len(chunk))})",  # constant column list, placeholders
                    [scope.user_id, scope.agent_id, *chunk],
                ).fetchall()
                for row in rows:
                    found[str(row[AT["id"]])] = row_to_record(row, with_embedding=True)
        return {i: found[i] for i in ids if i in found}

    def _merge_locked(
        self, scope: Scope, memory_id: str, changes: Mapping[str, Any], seq: int
    ) -> MemoryRecord:
        unknown = set(changes) - MERGEABLE
        if unknown:
            raise ValidationError(
                sorted(unknown)[0], "cannot be changed by a merge (id, scope and created_at are fixed)"
            )
        row = self._get_in_scope(scope, memory_id)
        if row is None:
            raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
        current = row_to_record(row, with_embedding=True).model_dump()
        current.update(changes)
        record = parse_model(MemoryRecord, current)
        stats = _StatsDelta()
        self._write(record, seq, row, stats)
        self._flush_stats(stats)
        return record

    async def merge(self, scope: Scope, memory_id: str, changes: Mapping[str, Any]) -> MemoryRecord:
        scope = _checked(scope)
        with self._transaction():
            seq = self._next_seq()
            record = self._merge_locked(scope, memory_id, changes, seq)
            self._bump_scopes([(scope.user_id, scope.agent_id)], seq)
        return record.without_embedding()

    async def mark_status(
        self, scope: Scope, memory_id: str, status: MemoryStatus, *, reason: str
    ) -> MemoryRecord:
        scope = _checked(scope)
        status = MemoryStatus(status)
        now = self._clock.now()
        with self._transaction():
            row = self._get_in_scope(scope, memory_id)
            if row is None:
                raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
            metadata = status_note(json.loads(row[AT["metadata"]]), reason, now)
            seq = self._next_seq()
            record = self._merge_locked(scope, memory_id, {"status": status, "metadata": metadata}, seq)
            self._bump_scopes([(scope.user_id, scope.agent_id)], seq)
        return record.without_embedding()

    async def recall(
        self, scope: Scope, memory_ids: Sequence[str], policy: HumanMemoryPolicy
    ) -> list[MemoryRecord]:
        scope = _checked(scope)
        now = self._clock.now()
        touched: list[MemoryRecord] = []
        with self._transaction():
            seq = self._next_seq()
            for memory_id in dict.fromkeys(memory_ids):
                row = self._get_in_scope(scope, memory_id)
                if row is None or row[AT["status"]] == MemoryStatus.DELETED.value:
                    continue
                record = policy.recall(row_to_record(row, with_embedding=False), now)
                self._conn.execute(
                    "UPDATE memories SET last_accessed_at = ?, access_count = ?, retention_score = ?, "
                    "status = ?, seq = ? WHERE pk = ?",
                    (
                        COLUMN["last_accessed_at"].encode(record.last_accessed_at),
                        record.access_count,
                        record.retention_score,
                        record.status.value,
                        seq,
                        row[AT["pk"]],
                    ),
                )
                touched.append(record)
            if touched:
                self._bump_scopes([(scope.user_id, scope.agent_id)], seq)
        return touched

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        user_id = validate_scope_id(user_id, "user_id")
        if agent_id is not None:
            agent_id = validate_scope_id(agent_id, "agent_id")
        where, params = "user_id = ?", [user_id]
        if agent_id is not None:
            where, params = "user_id = ? AND agent_id = ?", [user_id, agent_id]
        with self._transaction():
            rows = self._conn.execute(
                f"SELECT agent_id, terms FROM memories WHERE {where}",  # noqa: S608 - fixed clauses
                params,
            ).fetchall()
            stats = _StatsDelta()
            for _, terms in rows:
                stats.add(json.loads(terms), -1)
            self._flush_stats(stats)
            self._conn.execute(f"DELETE FROM memories WHERE {where}", params)  # noqa: S608
            self._forget_persisted(user_id, agent_id)
            seq = self._next_seq()
            scopes = {(user_id, agent) for agent, _ in rows}
            self._bump_scopes(scopes, seq, new_epoch=True)
        for key in list(self._cache):
            if key[0] == user_id and (agent_id is None or key[1] == agent_id):
                self._cache.pop(key, None)
        self._ann.forget(lambda key: key[0] == user_id and (agent_id is None or key[1] == agent_id))
        return len(rows)

    # -- reads ----------------------------------------------------------------------------------
    async def scan(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        after: str | None = None,
        limit: int = 100,
        with_embedding: bool = False,
    ) -> Page:
        scope = _checked(scope)
        if not 1 <= limit <= 10_000:
            raise ValidationError("limit", "must be between 1 and 10000")
        clauses = ["user_id = ?", "agent_id = ?"]
        params: list[Any] = [scope.user_id, scope.agent_id]
        if after is not None:
            clauses.append("id > ?")
            params.append(validate_memory_id(after, "cursor"))
        if statuses:
            wanted = [MemoryStatus(s).value for s in statuses]
            clauses.append(f"status IN ({', '.join('?' * len(wanted))})")
            params.extend(wanted)
        params.append(limit + 1)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {SELECT_LIST} FROM memories WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?",  # noqa: S608
                params,
            ).fetchall()
        records = [row_to_record(r, with_embedding=with_embedding) for r in rows[:limit]]
        next_cursor = records[-1].id if len(rows) > limit else None
        return Page(records=records, next_cursor=next_cursor)

    async def agents(self, user_id: str) -> list[str]:
        user_id = validate_scope_id(user_id, "user_id")
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT agent_id FROM memories WHERE user_id = ? ORDER BY agent_id", (user_id,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    async def browse(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        category: str | None = None,
        kind: MemoryKind | None = None,
        order_by: OrderBy | None = None,
        offset: int = 0,
        limit: int = 100,
    ) -> SortedPage:
        """A filtered, sorted page of ``scope`` (``ORDER BY field, id LIMIT … OFFSET …``) and the count."""
        scope = _checked(scope)
        check_browse_window(offset, limit)
        clauses = ["user_id = ?", "agent_id = ?"]
        params: list[Any] = [scope.user_id, scope.agent_id]
        if statuses:
            wanted = [MemoryStatus(s).value for s in statuses]
            clauses.append(f"status IN ({', '.join('?' * len(wanted))})")
            params.extend(wanted)
        if category is not None:
            clauses.append("category = ?")
            params.append(validate_category(category))
        if kind is not None:
            clauses.append("kind = ?")
            params.append(MemoryKind(kind).value)
        order = "id"
        if order_by is not None:
            order_by = OrderBy(order_by)
            order = f"{COLUMN[order_by.field].name} {'DESC' if order_by.descending else 'ASC'}, id"
        where = " AND ".join(clauses)
        with self._lock:
            counted = self._conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", params)  # noqa: S608
            total = int(counted.fetchone()[0])
            rows = self._conn.execute(
                f"SELECT {SELECT_LIST} FROM memories WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",  # noqa: S608
                [*params, limit, offset],
            ).fetchall()
        return SortedPage(records=[row_to_record(r, with_embedding=False) for r in rows], total=total)

    async def count_agents(self, user_id: str) -> list[StatusCounts]:
        user_id = validate_scope_id(user_id, "user_id")
        with self._lock:
            rows = self._conn.execute(
                "SELECT agent_id, status, COUNT(*) FROM memories WHERE user_id = ? GROUP BY agent_id, status",
                (user_id,),
            ).fetchall()
        return _status_counts(rows)

    async def count_users(self, *, after: str | None = None, limit: int = 100) -> list[StatusCounts]:
        """Users by id after ``after`` (at most ``limit``, 1 to one more than a page of 1,000, so a caller
        can tell whether another page follows) with their counts by status."""
        if after is not None:
            after = validate_scope_id(after, "cursor")
        most = MAX_BROWSE_LIMIT + 1
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
            raise ValidationError("limit", f"must be an integer between 1 and {most}")
        with self._lock:
            rows = self._conn.execute(
                "SELECT user_id, status, COUNT(*) FROM memories WHERE user_id IN ("
                "SELECT DISTINCT user_id FROM memories WHERE user_id > ? ORDER BY user_id LIMIT ?"
                ") GROUP BY user_id, status",
                (after or "", limit),
            ).fetchall()
        return _status_counts(rows)

    async def count(self, scope: Scope | None = None) -> int:
        with self._lock:
            if scope is None:
                row = self._conn.execute("SELECT COUNT(*) FROM memories").fetchone()
            else:
                scope = _checked(scope)
                row = self._conn.execute(
                    "SELECT COUNT(*) FROM memories WHERE user_id = ? AND agent_id = ?",
                    (scope.user_id, scope.agent_id),
                ).fetchone()
        return int(row[0])

    # -- the per-scope search cache -------------------------------------------------------------
    def _scope_index(self, scope: Scope, marker: tuple[int, int]) -> ScopeIndex:
        key = (scope.user_id, scope.agent_id)
        cached = self._cache.get(key)
        if cached is not None and cached.checked_at == marker:
            return cached
        version, epoch = self._scope_state(key)
        index = self._cache.get(key)
        if index is not None and index.epoch == epoch:
            if index.version != version:
                self._refresh(key, index, version)
            self._cache.move_to_end(key)
            index.checked_at = marker
            return index
        index = self._load_persisted(key, version, epoch)
        if index is None:
            rows = self._conn.execute(
                f"SELECT {SELECT_LIST} FROM memories WHERE user_id = ? AND agent_id = ? ORDER BY id",  # noqa: S608
                key,
            ).fetchall()
            index = ScopeIndex.build(version, epoch, rows)
        elif index.version != version:
            changed = self._refresh(key, index, version)
            # Worth persisting again once a good part of the scope is read from the rows at each load.
            index.persisted = changed <= max(PERSIST_MIN_DOCUMENTS // 8, len(index) // 8)
        index.checked_at = marker
        self._cache[key] = index
        self._evict()
        return index

    def _scope_state(self, key: tuple[str, str]) -> tuple[int, int]:
        """The scope's change sequence and epoch (``scope_versions``; (0, 0) for a scope never written)."""
        row = self._conn.execute(
            "SELECT version, epoch FROM scope_versions WHERE user_id = ? AND agent_id = ?", key
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _evict(self) -> None:
        """Drop the least recently used scopes past ``cache_documents`` (never the last one, nor a scope
        with an approximate vector index: loading it again would mean building the index again)."""
        total = sum(len(i) for i in self._cache.values())
        for key in list(self._cache)[:-1]:  # never the scope just used
            if total <= self._cache_documents:
                break
            if self._ann.holds(key, self._cache[key]):
                continue
            total -= len(self._cache.pop(key))
            self._ann.forget(key.__eq__)

    def _refresh(self, key: tuple[str, str], index: ScopeIndex, version: int) -> int:
        """Apply the scope's rows changed since the index's version; returns how many."""
        rows = self._conn.execute(
            f"SELECT {SELECT_LIST} FROM memories WHERE user_id = ? AND agent_id = ? AND seq > ? ORDER BY id",  # noqa: S608
            (*key, index.version),
        ).fetchall()
        index.apply(rows)
        index.version = version
        if rows and index.persisted and len(index) >= PERSIST_MIN_DOCUMENTS:
            # A change of text (here or in another process) drops the saved copy: save again, later.
            saved = self._conn.execute(
                "SELECT epoch FROM scope_snapshots WHERE user_id = ? AND agent_id = ?", key
            ).fetchone()
            index.persisted = saved is not None and int(saved[0]) == index.epoch
        return len(rows)

    def _load_persisted(self, key: tuple[str, str], version: int, epoch: int) -> ScopeIndex | None:
        """The scope's persisted index with its vectors read from the rows, or ``None`` (none, or unusable)."""
        row = self._conn.execute(
            "SELECT epoch, data FROM scope_snapshots WHERE user_id = ? AND agent_id = ?", key
        ).fetchone()
        if row is None or int(row[0]) != epoch:
            return None
        dims = self._conn.execute("SELECT value FROM meta WHERE key = 'embedding_dimensions'").fetchone()
        try:
            index = ScopeIndex.from_bytes(bytes(row[1]), epoch=epoch, dims=None if dims is None else int(dims[0]))
        except SnapshotError as exc:
            logger.warning("rebuilding the search index of a scope from its rows: its saved copy is %s", exc)
            return None
        if index.version > version:  # cannot be: saved from a later state of the same epoch
            return None
        vectors = self._conn.execute(
            "SELECT pk, embedding FROM memories WHERE user_id = ? AND agent_id = ? AND seq <= ?",
            (*key, index.version),
        ).fetchall()
        if vectors:
            pks, blobs = zip(*vectors, strict=True)
            index.set_vectors_by_pk(pks, blobs)
        return index

    def _persist(self, key: tuple[str, str], index: ScopeIndex) -> None:
        """Save a large scope's index in the file (best effort: a busy or read-only file is skipped)."""
        if index.persisted or len(index) < PERSIST_MIN_DOCUMENTS:
            return
        if index.saved_at is not None and time.monotonic() - index.saved_at < PERSIST_INTERVAL_SECONDS:
            return
        index.persisted = True  # until a check below says otherwise
        try:
            if self._scope_state(key) != (index.version, index.epoch):
                index.persisted = False  # the scope moved on since this search read it: next time
                return
            data = index.to_bytes()
            self._conn.execute("PRAGMA busy_timeout = 250")
            try:
                with self._transaction():
                    if self._scope_state(key) != (index.version, index.epoch):  # again, holding the lock
                        index.persisted = False
                        return
                    self._conn.execute(
                        "INSERT INTO scope_snapshots (user_id, agent_id, epoch, version, data) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, agent_id) DO UPDATE SET "
                        "epoch = excluded.epoch, version = excluded.version, data = excluded.data",
                        (*key, index.epoch, index.version, data),
                    )
                    index.saved_at = time.monotonic()
            finally:
                self._conn.execute("PRAGMA busy_timeout = 10000")
        except (sqlite3.Error, SnapshotError, StorageFullError) as exc:
            index.persisted = False  # tried again a minute later at the earliest
            index.saved_at = time.monotonic()
            logger.info("did not save the search index of a large scope (%s); it is rebuilt when loaded", exc)

    def _forget_persisted(self, user_id: str, agent_id: str | None = None) -> None:
        """Drop saved indexes (inside the caller's transaction): they hold the terms of the rows."""
        if agent_id is None:
            self._conn.execute("DELETE FROM scope_snapshots WHERE user_id = ?", (user_id,))
        else:
            self._conn.execute(
                "DELETE FROM scope_snapshots WHERE user_id = ? AND agent_id = ?", (user_id, agent_id)
            )

    # -- search ---------------------------------------------------------------------------------
    def _global_stats(
        self, terms: Sequence[str], marker: tuple[int, int]
    ) -> tuple[dict[str, tuple[int, float]], dict[tuple[str, str], int]]:
        """Index-wide field statistics and document frequencies, cached until the database changes."""
        if self._stats_cache is None or self._stats_cache[0] != marker:
            self._stats_cache = (marker, self._field_stats(), {})
        _, fields_, dfs = self._stats_cache
        missing = sorted({t for t in terms if (SEARCH_FIELDS[0], t) not in dfs})
        if missing:
            found = self._term_stats(missing)
            for name in SEARCH_FIELDS:
                for term in missing:
                    dfs[(name, term)] = found.get((name, term), 0)
        return fields_, dfs

    def _field_stats(self) -> dict[str, tuple[int, float]]:
        return {
            str(name): (int(count), float(total))
            for name, count, total in self._conn.execute(
                "SELECT field, doc_count, total_length FROM field_stats"
            ).fetchall()
        }

    def _term_stats(self, unique: Sequence[str]) -> dict[tuple[str, str], int]:
        dfs: dict[tuple[str, str], int] = {}
        if unique:
            marks = ", ".join("?" * len(unique))
            for name, term, df in self._conn.execute(
                f"SELECT field, term, df FROM term_stats WHERE term IN ({marks})",  # noqa: S608
                unique,
            ).fetchall():
                dfs[(str(name), str(term))] = int(df)
        return dfs

    def _bm25(self, index: ScopeIndex, terms: Sequence[str], marker: tuple[int, int]) -> np.ndarray:
        scores = np.zeros(len(index), dtype=np.float64)
        if not terms or not len(index):
            return scores
        field_stats, dfs = self._global_stats(terms, marker)
        for name in SEARCH_FIELDS:
            doc_count, total = field_stats.get(name, (0, 0.0))
            if doc_count <= 0:
                continue
            avgdl = total / doc_count
            # Per-posting term weights depend on avgdl only; cache them until the statistics change.
            cache = index.weights.get(name)
            if cache is None or cache[0] != avgdl:
                cache = (avgdl, {})
                index.weights[name] = cache
            norms: np.ndarray | None = None
            for term in terms:
                weights = cache[1].get(term)
                if weights is None:
                    posting = index.posting(name, term)
                    if posting is None:
                        continue
                    if norms is None:
                        norms = BM25_K1 * (1.0 - BM25_B + BM25_B * index.lengths[name] / avgdl)
                    docs, tfs = posting
                    weights = cache[1][term] = (docs, tfs / (tfs + norms[docs]))
                n = dfs.get((name, term), 0)
                idf = math.log(1.0 + (doc_count - n + 0.5) / (n + 0.5))
                scores[weights[0]] += idf * weights[1]
        return scores

    @staticmethod
    def _holding_all(index: ScopeIndex, terms: Sequence[str]) -> np.ndarray:
        """Documents that hold every one of ``terms`` in some searchable field (Azure's ``searchMode=all``)."""
        holding = np.ones(len(index), dtype=bool)
        for term in dict.fromkeys(terms):
            has = np.zeros(len(index), dtype=bool)
            for name in SEARCH_FIELDS:
                posting = index.posting(name, term)
                if posting is not None:
                    has[posting[0]] = True
            holding &= has
        return holding

    def _filter_mask(self, index: ScopeIndex, options: MemorySearchOptions, now_epoch: float) -> np.ndarray:
        cols = index.columns
        status = cols["status"]
        mask = status == _STATUS_CODES[MemoryStatus.ACTIVE]
        if options.include_archived:
            mask |= status == _STATUS_CODES[MemoryStatus.ARCHIVED]
        expires = cols["expires_at"]
        mask &= np.isnan(expires) | (expires > now_epoch)
        if options.category is not None:
            mask &= cols["_category"] == options.category
        if options.kind is not None:
            mask &= cols["_kind"] == options.kind.value
        if options.min_importance is not None:
            mask &= cols["importance"] >= options.min_importance
        if options.min_retention_score is not None:
            mask &= cols["retention_score"] >= options.min_retention_score
        result: np.ndarray = mask
        return result

    def _query_vector(self, vector: Sequence[float] | None, mode: SearchMode) -> np.ndarray | None:
        """The query vector as a unit float32 array (``None`` in keyword mode)."""
        if mode in _VECTOR_MODES and vector is None:
            raise ValidationError("vector", f"{mode.value} search needs a query vector")
        if vector is None or mode == SearchMode.KEYWORD:
            return None
        query_vector = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query_vector))
        if not math.isfinite(norm) or norm == 0.0:
            raise ValidationError("vector", "must be a non-zero vector of finite numbers")
        result: np.ndarray = query_vector / norm
        return result

    @staticmethod
    def _check_query_dimensions(index: ScopeIndex, query_vector: np.ndarray | None) -> None:
        if query_vector is None or index.vectors is None:
            return
        stored = index.vectors.shape[1]
        if stored not in (0, query_vector.shape[0]):
            raise ValidationError(
                "vector",
                f"has {query_vector.shape[0]} dimensions; this store's embeddings have {stored}",
            )

    def _keyword_leg(
        self, index: ScopeIndex, terms: Sequence[str], mask: np.ndarray, marker: tuple[int, int], *, match_all: bool
    ) -> _Leg:
        """BM25 scores and ranks (top :data:`TEXT_LEG_TOP`); ``match_all`` is Azure's ``*``."""
        if match_all:
            scores = np.where(mask, 1.0, 0.0)
            matched = mask.copy()
        else:
            scores = self._bm25(index, terms, marker)
            matched = mask & (scores > 0.0)
        return _Leg(scores, _ranks(scores, matched, TEXT_LEG_TOP, index.id_ranks))

    def _vector_leg(
        self, key: tuple[str, str], index: ScopeIndex, query_vector: np.ndarray, mask: np.ndarray, k: int
    ) -> _Leg:
        """Cosine scores ``1 / (2 - cos)`` and ranks (top ``k``) of documents that have a vector.

        One float32 matrix-vector product finds the candidates (or, in a scope large enough for one, an
        approximate index: :mod:`memory_core.adapters.sqlite.ann`); the top ``k`` (and every document
        within rounding of the k-th) are scored again row by row in float64, so a document's score does
        not depend on where its row sits in the matrix or how many rows there are (a BLAS product's
        last bits do), and an index updated in place ranks exactly as one rebuilt from the rows.
        """
        usable = mask & index.has_vector
        if not index.dims or not usable.any():
            return _Leg(np.zeros(len(index), dtype=np.float64), np.full(len(index), -1, dtype=np.int64))
        positions = None
        if self._ann.enabled:
            try:
                positions = self._ann.candidates(key, index, query_vector, usable, k)
            except Exception as exc:  # a broken index never fails a search: exact search, for good
                self._ann.fail(key, index, exc)
        if positions is None:
            return self._scored(index, query_vector, self._exact_candidates(index, query_vector, usable, k), k)
        leg = self._scored(index, query_vector, positions, k)
        if self._ann.wants_check(key):
            exact = self._scored(index, query_vector, self._exact_candidates(index, query_vector, usable, k), k)
            try:
                self._ann.record_check(key, index, np.flatnonzero(leg.ranks >= 0), np.flatnonzero(exact.ranks >= 0))
            except Exception as exc:
                self._ann.fail(key, index, exc)
            return exact  # the same or better, and computed anyway
        return leg

    @staticmethod
    def _exact_candidates(index: ScopeIndex, query_vector: np.ndarray, usable: np.ndarray, k: int) -> np.ndarray:
        """The usable documents whose float32 cosine is within rounding of the k-th best (all of them
        when there are no more than ``k``)."""
        positions = np.flatnonzero(usable)
        rough = (index.vectors @ query_vector)[positions]
        if 0 < k < len(positions):
            cut = np.partition(rough, len(rough) - k)[len(rough) - k]
            positions = positions[rough >= cut - _RESCORE_MARGIN]
        return positions

    @staticmethod
    def _scored(index: ScopeIndex, query_vector: np.ndarray, positions: np.ndarray, k: int) -> _Leg:
        """The leg from candidates scored row by row in float64, ranked (top ``k``)."""
        scores = np.zeros(len(index), dtype=np.float64)
        eligible = np.zeros(len(index), dtype=bool)
        cosines = (index.vectors[positions].astype(np.float64) * query_vector.astype(np.float64)).sum(axis=1)
        scores[positions] = 1.0 / (2.0 - np.clip(cosines, -1.0, 1.0))
        eligible[positions] = True
        return _Leg(scores, _ranks(scores, eligible, k, index.id_ranks))

    @staticmethod
    def _fuse(
        mode: SearchMode, keyword: _Leg | None, vector: _Leg | None, vector_weight: float, size: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Relevance and selection: one leg's scores, or Reciprocal Rank Fusion of both."""
        if mode == SearchMode.KEYWORD or mode == SearchMode.VECTOR:
            leg = keyword if mode == SearchMode.KEYWORD else vector
            assert leg is not None
            selected = leg.ranks >= 0
            return np.where(selected, leg.scores, 0.0), selected
        assert keyword is not None and vector is not None
        relevance = np.zeros(size, dtype=np.float64)
        selected = np.zeros(size, dtype=bool)
        for ranks, weight in ((keyword.ranks, 1.0), (vector.ranks, vector_weight)):
            in_leg = ranks >= 0
            relevance[in_leg] += weight / (RRF_K + ranks[in_leg])
            selected |= in_leg
        return relevance, selected

    @staticmethod
    def _hits(
        index: ScopeIndex,
        candidates: np.ndarray,
        order: np.ndarray,
        ranked: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]],
        relevance: np.ndarray,
        keyword: _Leg | None,
        vector: _Leg | None,
        profile_name: str | None,
    ) -> list[SearchHit]:
        """The hits in ``order``, each with its score breakdown (leg scores and ranks, boosts)."""
        final, multiplier, per_function = ranked
        hits = []
        for position in order:
            at = int(candidates[position])
            record = index.record(at)
            if record is None:  # its row was read in the same snapshot as the index: cannot happen
                logger.warning("a search hit's row was not found; left out")
                continue
            kw = keyword.at(at) if keyword is not None else (None, None)
            vec = vector.at(at) if vector is not None else (None, None)
            hits.append(
                SearchHit.model_construct(
                    record=record,
                    score=float(final[position]),
                    reranker_score=None,
                    breakdown=ScoreBreakdown.model_construct(
                        keyword_score=kw[0],
                        keyword_rank=kw[1],
                        vector_score=vec[0],
                        vector_rank=vec[1],
                        relevance=float(relevance[at]),
                        profile=profile_name,
                        boost=float(multiplier[position]),
                        functions={k: float(v[position]) for k, v in per_function.items()},
                    ),
                )
            )
        return hits

    async def search(
        self,
        scope: Scope,
        query: str,
        vector: Sequence[float] | None,
        options: MemorySearchOptions,
    ) -> SearchResult:
        """Ranked memories of one scope: filters, candidate legs, fusion, profile, order, breakdown.

        See the module docstring for the scoring.
        """
        scope = _checked(scope)
        options = parse_model(MemorySearchOptions, options)
        mode = options.mode
        query_vector = self._query_vector(vector, mode)
        now_epoch = self._clock.now().timestamp()
        with self._lock:
            self._conn.execute("BEGIN")  # one read snapshot: the index and the rows of its hits agree
            try:
                hits, index = self._search_locked(scope, query, query_vector, options, now_epoch)
            except BaseException:
                rollback(self._conn)  # if SQLite has not already (the original error is what is raised)
                raise
            self._conn.execute("COMMIT")
            self._persist((scope.user_id, scope.agent_id), index)
        return SearchResult(
            hits=hits,
            mode=mode,
            ranking_profile=options.ranking_profile,
            semantic_ranker_available=False,
            notes=[SEMANTIC_NOTE] if mode == SearchMode.SEMANTIC else [],
        )

    def _search_locked(
        self,
        scope: Scope,
        query: str,
        query_vector: np.ndarray | None,
        options: MemorySearchOptions,
        now_epoch: float,
    ) -> tuple[list[SearchHit], ScopeIndex]:
        mode = options.mode
        marker = self._change_marker()
        index = self._scope_index(scope, marker)
        self._check_query_dimensions(index, query_vector)
        mask = self._filter_mask(index, options, now_epoch)
        keyword = vector_leg = None
        fusion = fusion_for(query, options.vector_weight)
        if mode in _TEXT_MODES:
            terms = query_terms(query)
            every_word = fusion.text_match == "all" and mode != SearchMode.KEYWORD
            keyword = self._keyword_leg(
                index,
                terms,
                mask & self._holding_all(index, terms) if every_word and terms else mask,
                marker,
                match_all=mode == SearchMode.KEYWORD and not terms,
            )
        if mode in _VECTOR_MODES and query_vector is not None:
            vector_leg = self._vector_leg(
                (scope.user_id, scope.agent_id), index, query_vector, mask, options.vector_k
            )
        relevance, selected = self._fuse(mode, keyword, vector_leg, fusion.vector_weight, len(index))
        candidates = np.flatnonzero(selected)
        profile = profile_for(options.ranking_profile)
        cols = {} if profile is None else {f: index.columns[f][candidates] for f in profile.fields}
        ranked = apply_profile(relevance[candidates], profile, cols, now_epoch=now_epoch)
        order = _order(candidates, ranked[0], index, options.order_by, options.top)
        missing = index.missing_rows(int(candidates[p]) for p in order)
        if missing:
            index.add_rows(self._rows_by_pk(f"SELECT {SELECT_LIST} FROM memories WHERE pk IN ({{}})", missing))  # noqa: S608
        hits = self._hits(
            index, candidates, order, ranked, relevance, keyword, vector_leg, profile.name if profile else None
        )
        return hits, index

    # -- forgetting (the policy is applied in memory_core.service.forgetting) --------------------
    async def scan_retention(self, *, after: str | None = None, limit: int) -> RetentionPage:
        """Retention inputs of up to ``limit`` memories that are not deleted, by row key (``pk``).

        Answered from the covering index ``memories_forget`` alone, and only numbers come back (the
        status as 1/0): no texts, embeddings, ids or scope strings, which would cost a Python object per
        row each.
        """
        validate_positive_int(limit, "limit")
        # A row key this store issued: ASCII digits within SQLite's 64-bit integers.
        if after is not None and not (after.isascii() and after.isdigit() and int(after) < 2**63):
            raise ValidationError("cursor", "is not a cursor this store returned")
        last_pk = int(after) if after is not None else 0
        with self._lock:
            rows = self._conn.execute(
                "SELECT pk, status = ?, retention_score, importance, access_count, updated_at, "
                "last_accessed_at, expires_at FROM memories "
                "WHERE pk > ? AND status != ? ORDER BY pk LIMIT ?",
                (MemoryStatus.ACTIVE.value, last_pk, MemoryStatus.DELETED.value, limit),
            ).fetchall()
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [()] * 8

        def floats(i: int) -> np.ndarray:
            return np.array(columns[i], dtype=np.float64)  # None becomes NaN

        return RetentionPage(
            keys=columns[0],
            active=np.array(columns[1], dtype=bool),
            retention=floats(2),
            importance=floats(3),
            access_count=floats(4),
            updated_at=floats(5),
            last_accessed_at=floats(6),
            expires_at=floats(7),
            next_cursor=str(rows[-1][0]) if len(rows) == limit else None,
        )

    def _rows_by_pk(self, sql: str, keys: Sequence[Any]) -> list[Any]:
        """``sql`` (with one ``IN ({})`` placeholder list) over ``keys`` in chunks SQLite accepts."""
        found: list[Any] = []
        pks = [int(k) for k in keys]
        for start in range(0, len(pks), _IN_CHUNK):
            chunk = pks[start : start + _IN_CHUNK]
            found += self._conn.execute(sql.format(", ".join("?" * len(chunk))), chunk).fetchall()
        return found

    async def memory_refs(self, keys: Sequence[Any]) -> list[MemoryRef | None]:
        """Id and scope of scanned rows (by ``pk``), in the order of ``keys`` (``None``: purged since)."""
        if not keys:
            return []
        with self._lock:
            rows = self._rows_by_pk("SELECT pk, id, user_id, agent_id FROM memories WHERE pk IN ({})", keys)
        found = {int(pk): MemoryRef(str(i), str(u), str(a)) for pk, i, u, a in rows}
        return [found.get(int(k)) for k in keys]

    async def write_retention(self, write: RetentionWrite) -> int:
        """New retention and status for scanned rows, in one transaction (deleted rows are left alone)."""
        if not len(write):
            return 0
        page = write.page
        active, archived = MemoryStatus.ACTIVE.value, MemoryStatus.ARCHIVED.value
        keys = [page.keys[int(at)] for at in write.rows]
        with self._transaction():
            seq = self._next_seq()
            written = self._conn.executemany(
                "UPDATE memories SET retention_score = ?, status = ?, seq = ? WHERE pk = ? AND status != ?",
                [
                    (float(retention), active if now_active else archived, seq, key, MemoryStatus.DELETED.value)
                    for key, now_active, retention in zip(keys, write.active, write.retention, strict=True)
                ],
            ).rowcount
            scopes = self._rows_by_pk("SELECT DISTINCT user_id, agent_id FROM memories WHERE pk IN ({})", keys)
            self._bump_scopes(((str(u), str(a)) for u, a in scopes), seq)
        return written

    async def checkpoint_wal(self) -> bool:
        """Copy the write-ahead log into the file and truncate it, so purged text leaves the disk
        (``secure_delete`` has zeroed the deleted rows in the pages the log carries).

        Returns:
            ``False`` when another connection's read kept part of the log; ``True`` otherwise
            (always for an in-memory store).
        """
        with self._lock:
            return truncate_wal(self._conn, self._path)

    def approximate_indexes(self) -> list[dict[str, Any]]:
        """What the approximate vector indexes of large scopes did (:meth:`ScopeVectorIndexes.stats`)."""
        with self._lock:
            return self._ann.stats()

    def close_sync(self) -> None:
        """Close the connection (synchronous callers)."""
        with self._lock:
            if not self._closed:
                self._conn.close()
                self._closed = True
                self._cache.clear()
        self._ann.close()  # not under the lock: a build about to copy its vectors waits for it

    async def close(self) -> None:
        self.close_sync()

    async def __aenter__(self) -> SQLiteMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


@dataclass(slots=True)
class _StatsDelta:
    """BM25 statistics changes of one transaction, applied in one pass at its end."""

    fields: dict[str, list[int]] = field(default_factory=dict)
    terms: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, terms: Mapping[str, Mapping[str, int]], sign: int) -> None:
        for name in SEARCH_FIELDS:
            counts = terms.get(name, {})
            if not counts:
                continue
            entry = self.fields.setdefault(name, [0, 0])
            entry[0] += sign
            entry[1] += sign * sum(counts.values())
            for term in counts:
                key = (name, term)
                self.terms[key] = self.terms.get(key, 0) + sign


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the store's lock; rolls back on any error."""

    def __init__(self, store: SQLiteMemoryStore) -> None:
        self._store = store
        self._conn = store._conn
        self._lock = store._lock

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
                self._store._own_commits += 1
            else:
                self._failed(exc)
        finally:
            self._lock.release()

    def _failed(self, exc: BaseException) -> None:
        """Roll back what SQLite has not (never raising over ``exc``); a full disk is said plainly."""
        rollback(self._conn)
        full = disk_full_error(exc, self._store._path)
        if full is not None:
            raise full from exc


def _status_counts(rows: Iterable[Sequence[Any]]) -> list[StatusCounts]:
    """``(id, status, count)`` rows added up per id, sorted by id."""
    counts: dict[str, StatusCounts] = {}
    for key, status, count in rows:
        counts[str(key)] = counts.get(str(key), StatusCounts(str(key))).add(status, count)
    return [counts[key] for key in sorted(counts)]


def _checked(scope: Scope) -> Scope:
    if not isinstance(scope, Scope):
        raise ValidationError("scope", "must be a Scope(user_id, agent_id)")
    return Scope.of(scope.user_id, scope.agent_id)


def _ranks(
    scores: np.ndarray,
    eligible: np.ndarray,
    top: int,
    id_ranks: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """0-based rank of each eligible document by score, -1 outside the top.

    Ties are broken by id (``id_ranks`` of the positions: what orders them by id), or by position
    without it.
    """
    ranks = np.full(scores.shape[0], -1, dtype=np.int64)
    positions = np.flatnonzero(eligible)
    if not len(positions):
        return ranks
    eligible_scores = scores[positions]
    if 0 < top < len(positions) and not np.isnan(eligible_scores).any():
        # Only documents scoring at least the top-th best can rank (all ties at that score kept, so
        # the stable sort below still breaks ties by position): select them in linear time.
        threshold = np.partition(eligible_scores, len(positions) - top)[len(positions) - top]
        keep = np.flatnonzero(eligible_scores >= threshold)
        positions, eligible_scores = positions[keep], eligible_scores[keep]
    if id_ranks is None:
        order = positions[np.argsort(-eligible_scores, kind="stable")][:top]
    else:
        order = positions[np.lexsort((id_ranks(positions), -eligible_scores))][:top]
    ranks[order] = np.arange(len(order))
    return ranks


def _order(
    candidates: np.ndarray, final: np.ndarray, index: ScopeIndex, order_by: OrderBy | None, top: int
) -> np.ndarray:
    """The first ``top`` positions into ``candidates``: by score (ties by id), or by ``order_by`` then score."""
    if not len(candidates):
        return np.zeros(0, dtype=np.int64)
    keep = np.arange(len(candidates))
    if order_by is None and len(candidates) > top:
        # Only documents scoring at least the top-th best can be in the answer (ties included).
        threshold = np.partition(final, len(final) - top)[len(final) - top]
        keep = np.flatnonzero(final >= threshold)
    keys: list[np.ndarray] = [index.id_ranks(candidates[keep]), -final[keep]]
    if order_by is not None:
        column = index.columns[order_by.field][candidates].astype(np.float64)
        column = np.where(np.isnan(column), -np.inf, column)
        keys.append(-column if order_by.descending else column)
    result: np.ndarray = keep[np.lexsort(tuple(keys))][:top]
    return result
