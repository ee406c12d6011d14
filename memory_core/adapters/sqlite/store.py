"""The embedded memory store: one SQLite file, ranked the way the Azure AI Search index ranks.

Storage: one row per memory (numbers and times as columns, epoch seconds for times, the embedding as a
float32 blob, per-field term frequencies as JSON), plus index-wide BM25 statistics (document frequency
per field and term, document count and total length per field) kept exact in the same transactions
(:mod:`memory_core.adapters.sqlite.writes`). WAL mode: one process writes, many read; every write is
one transaction, so a crash never leaves a half-written memory or statistics that disagree with the rows.

Search: each scope's memories are held in memory as numpy columns, an inverted index and a matrix of
unit vectors (:mod:`memory_core.adapters.sqlite.scope_index`), cached and kept in the file for large
scopes (:mod:`memory_core.adapters.sqlite.scope_cache`). A search runs the legs of its
:class:`~memory_core.domain.search_plan.SearchPlan` (:mod:`memory_core.adapters.sqlite.legs`) and
fuses and ranks them (:mod:`memory_core.adapters.sqlite.search`):

- keyword: BM25 over terms from :func:`memory_core.language.text.index_terms` (queries:
  :func:`~memory_core.language.text.query_terms`, which also drops English function words); a store
  written by another analyzer version is re-indexed once when opened;
- vector: exact cosine nearest neighbours, score ``1 / (2 - cos)``;
- hybrid: Reciprocal Rank Fusion ``sum(w / (60 + rank))``, 0-based ranks, text leg top 1000 (w = 1),
  vector leg ``options.vector_k`` (w = ``options.vector_weight``, else the query language's); the
  query language also says whether the text leg counts a memory with any query word or only with
  all of them (:mod:`memory_core.domain.fusion`: a Japanese query, all);
- semantic: hybrid, and the result says the semantic ranker is not available locally;
- ranking profiles from :mod:`memory_core.domain.ranking`, applied to the relevance (after fusion).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core.adapters.sqlite import backfill, entity_rows, scans, writes
from memory_core.adapters.sqlite.ann import ScopeVectorIndexes
from memory_core.adapters.sqlite.connection import StoreConnection
from memory_core.adapters.sqlite.files import (
    disk_full_error,
    keep_private,
    make_folder,
    refuse_empty_file,
    rollback,
    truncate_wal,
)
from memory_core.adapters.sqlite.integrity import DEFAULT_CHECK_SECONDS, FileState, Integrity, check_integrity
from memory_core.adapters.sqlite.legs import CorpusStatistics
from memory_core.adapters.sqlite.ownership import STORE, create_whole, stamp
from memory_core.adapters.sqlite.scans import checked_scope
from memory_core.adapters.sqlite.schema import SCHEMA_VERSION, check_file, prepare_schema, row_to_record
from memory_core.adapters.sqlite.scope_cache import ScopeCache, persist
from memory_core.adapters.sqlite.search import SEMANTIC_NOTE, ScopeSearch, query_vector
from memory_core.capabilities import MissingVector
from memory_core.domain.entities import Entity
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import Listing, MemorySearchOptions, SearchResult
from memory_core.domain.search_plan import plan_for
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.validation import parse_model, validate_entity_id
from memory_core.errors import ValidationError
from memory_core.language.entities import Mention
from memory_core.ports import (
    Clock,
    MemoryRef,
    Page,
    RetentionPage,
    RetentionWrite,
    SortedPage,
    StatusCounts,
    SystemClock,
)

__all__ = ["SQLiteMemoryStore"]

logger = logging.getLogger(__name__)


class SQLiteMemoryStore:
    """Memories in one SQLite file, searched and ranked like the Azure AI Search index.

    Args:
        path: The database file (created with its folder if missing); ``":memory:"`` for a private
            in-memory store.
        clock: Source of "now" for expiry filters, freshness and recall.
        policy: How retention is computed: search ranks and filters by the retention at the query's
            time, from the stored inputs (default: the design's policy).
        cache_documents: Upper bound on memories held in the per-scope search caches.
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` survives a killed process in WAL mode;
            ``FULL`` also survives power loss).
        vector_index_min_scope: Scopes of at least this many memories get an approximate vector index
            (``MEMORY_VECTOR_INDEX_MIN_SCOPE``; 0, the default: every scope is searched exactly; see
            :mod:`memory_core.adapters.sqlite.ann`).
        check_seconds: The budget of the integrity check at open (``MEMORY_SQLITE_CHECK_SECONDS``; 0:
            none; see :mod:`memory_core.adapters.sqlite.integrity`). A file found damaged is opened
            for reading only: every write raises :class:`~memory_core.errors.DamagedFileError`.
        file_state: Where the check's finding is kept, shared with the history on the same file and
            with whoever watches it (default: the store's own).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        policy: HumanMemoryPolicy | None = None,
        cache_documents: int = 200_000,
        synchronous: str = "NORMAL",
        vector_index_min_scope: int = 0,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
        file_state: FileState | None = None,
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValidationError("synchronous", "must be OFF, NORMAL, FULL or EXTRA")
        self._path = str(path)
        existed = make_folder(self._path)
        self._clock: Clock = clock or SystemClock()
        self._policy = policy or HumanMemoryPolicy()
        refuse_empty_file(self._path, "store")  # a missing file is a new store; an empty one is not
        if not existed:
            create_whole(self._path, _new_store)  # the path holds a whole store, or nothing
        self._db = StoreConnection(
            sqlite3.connect(self._path, check_same_thread=False, isolation_level=None), self._path
        )
        self._db.file = file_state if file_state is not None else FileState()
        self._conn = self._db.conn
        self._lock = self._db.lock
        found = self._open(synchronous, check_seconds)
        keep_private(self._path, existed, "store")
        if 0 < found < SCHEMA_VERSION:
            logger.info("upgraded %s from store schema %s to %s", self._path, found, SCHEMA_VERSION)
        self._cache = ScopeCache(cache_documents)
        self._statistics = CorpusStatistics()
        self._ann = ScopeVectorIndexes(vector_index_min_scope, lock=self._lock)
        self._closed = False

    def _open(self, synchronous: str, check_seconds: float) -> int:
        """Set the connection up and bring the file to the current schema; returns the schema found
        (a damaged file is left as it is: read only)."""
        try:
            self._conn.execute("PRAGMA busy_timeout = 10000")
            check_file(self._conn, self._path)  # before the first write, even of a pragma
            self._db.file.record(check_integrity(self._path, check_seconds))
            if self._db.integrity.damaged:
                logger.info("%s is damaged, opened for reading only: %s", self._path, self._db.integrity.found)
                return SCHEMA_VERSION
            if self._path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA secure_delete = ON")  # deleted rows are zeroed, not left in free space
            with self._db.transaction():
                found = prepare_schema(self._conn, self._path)
                writes.reindex_if_needed(self._db)
        except BaseException as exc:
            self._conn.close()
            full = disk_full_error(exc, self._path)
            if full is not None:
                raise full from exc
            raise
        return found

    @property
    def path(self) -> str:
        return self._path

    @property
    def integrity(self) -> Integrity:
        """What the integrity check at open found (``damaged`` also after a write SQLite failed so)."""
        return self._db.integrity

    def embedding_dimensions(self) -> int | None:
        with self._lock:
            return self._db.dimensions()

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            return self._db.meta(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._db.transaction():
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- writes ---------------------------------------------------------------------------------
    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace whole records, all in one transaction.

        Raises:
            ConflictError: A record's id belongs to another scope, or its embedding has another size.
        """
        writes.upsert(self._db, records)

    async def merge(self, scope: Scope, memory_id: str, changes: Mapping[str, Any]) -> MemoryRecord:
        return writes.merge(self._db, checked_scope(scope), memory_id, changes).without_embedding()

    async def mark_status(
        self, scope: Scope, memory_id: str, status: MemoryStatus, *, reason: str
    ) -> MemoryRecord:
        scope = checked_scope(scope)
        status = MemoryStatus(status)
        record = writes.mark_status(self._db, scope, memory_id, status, reason, self._clock.now())
        return record.without_embedding()

    async def recall(
        self, scope: Scope, memory_ids: Sequence[str], policy: HumanMemoryPolicy
    ) -> list[MemoryRecord]:
        return writes.recall(self._db, checked_scope(scope), memory_ids, policy, self._clock.now())

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        purged = writes.purge(self._db, user_id, agent_id)

        def purged_scope(key: tuple[str, str]) -> bool:
            return key[0] == user_id and (agent_id is None or key[1] == agent_id)

        self._cache.drop(purged_scope)
        self._ann.forget(purged_scope)
        return purged

    # -- reads ----------------------------------------------------------------------------------
    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        scope = checked_scope(scope)
        with self._lock:
            row = writes.row_in_scope(self._db, scope, memory_id)
        return None if row is None else row_to_record(row, with_embedding=True)

    async def get_many(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The records of ``scope`` among ``memory_ids`` (any status, with embeddings, as :meth:`get`
        returns them), by id; ids missing or of another scope are absent. One query per 900 ids
        (:class:`~memory_core.capabilities.BatchReader`).

        Raises:
            ValidationError: A bad id (before any query).
        """
        return scans.get_many(self._db, checked_scope(scope), memory_ids)

    async def entities(self, scope: Scope) -> list[Entity]:
        """The entities of ``scope`` (:class:`~memory_core.capabilities.EntityIndex`)."""
        scope = checked_scope(scope)
        with self._lock:
            return entity_rows.entities(self._conn, scope)

    async def entity_memories(self, scope: Scope, asked: Sequence[Mention]) -> dict[str, list[str]]:
        """The memory ids of each entity the mentions ``asked`` may mean (:class:`~memory_core.capabilities.EntityIndex`)."""
        scope = checked_scope(scope)
        with self._lock:
            return entity_rows.entity_memories(self._conn, scope, asked)

    async def memories_of(self, scope: Scope, entity_ids: Sequence[str]) -> dict[str, list[str]]:
        """The memory ids of each of ``entity_ids`` that is an entity of ``scope``
        (:class:`~memory_core.capabilities.EntityIndex`).

        Raises:
            ValidationError: An id is not an entity id (before anything is read).
        """
        scope = checked_scope(scope)
        ids = [validate_entity_id(i, "entity_id") for i in entity_ids]
        with self._lock:
            return entity_rows.memories_of(self._conn, scope, ids)

    async def scan(self, scope: Scope, request: PageRequest) -> Page:
        return scans.scan(self._db, checked_scope(scope), request)

    async def agents(self, user_id: str) -> list[str]:
        return scans.agents(self._db, user_id)

    async def browse(self, scope: Scope, listing: Listing) -> SortedPage:
        """A filtered, sorted page of ``scope`` (``ORDER BY field, id LIMIT … OFFSET …``) and the count."""
        return scans.browse(self._db, checked_scope(scope), listing)

    async def count_agents(self, user_id: str) -> list[StatusCounts]:
        return scans.count_agents(self._db, user_id)

    async def count_users(self, *, after: str | None = None, limit: int = 100) -> list[StatusCounts]:
        """Users by id after ``after`` (at most ``limit``, 1 to one more than a page of 1,000, so a caller
        can tell whether another page follows) with their counts by status."""
        return scans.count_users(self._db, after=after, limit=limit)

    async def count(self, scope: Scope | None = None) -> int:
        return scans.count(self._db, scope)

    # -- vectors computed after the records were stored (VectorBackfill) --------------------------
    async def count_missing_vectors(self) -> int:
        """How many live memories have no embedding (deleted ones never get one; index ``memories_vector_missing``)."""
        return backfill.count_missing(self._db)

    async def missing_vectors(self, *, after: int | None = None, limit: int) -> list[MissingVector]:
        """Live memories without an embedding (not deleted ones), by row key (``pk``), after ``after``."""
        return backfill.missing(self._db, after=after, limit=limit)

    async def fill_vectors(self, vectors: Sequence[tuple[MissingVector, Sequence[float]]]) -> int:
        """Each memory's vector where it still has none and the same text, in one transaction."""
        return backfill.fill(self._db, vectors)

    # -- search ---------------------------------------------------------------------------------
    async def search(self, request: SearchRequest) -> SearchResult:
        """Ranked memories of one scope: filters, candidate legs, fusion, profile, order, breakdown.

        See the module docstring for the scoring.
        """
        scope = checked_scope(request.scope)
        options = parse_model(MemorySearchOptions, request.options)
        query = request.query
        plan = plan_for(options, query)
        unit_vector = query_vector(request.vector, plan)
        now_epoch = self._clock.now().timestamp()
        search = ScopeSearch(self._db, self._cache, self._ann, self._statistics, self._policy)
        with self._lock:
            self._conn.execute("BEGIN")  # one read snapshot: the index and the rows of its hits agree
            try:
                hits, index = search.run(scope, query, unit_vector, options, plan, now_epoch, request.window)
            except BaseException:
                rollback(self._conn)  # if SQLite has not already (the original error is what is raised)
                raise
            self._conn.execute("COMMIT")
            persist(self._db, (scope.user_id, scope.agent_id), index)
        return SearchResult(
            hits=hits,
            mode=options.mode,
            ranking_profile=options.ranking_profile,
            semantic_ranker_available=False,
            notes=[SEMANTIC_NOTE] if plan.semantic else [],
        )

    # -- forgetting (the policy is applied in memory_core.service.forgetting) --------------------
    async def scan_retention(self, *, after: str | None = None, limit: int) -> RetentionPage:
        """Retention inputs of up to ``limit`` memories that are not deleted, by row key (``pk``),
        from the covering index ``memories_forget`` alone (numbers only)."""
        return scans.scan_retention(self._db, after=after, limit=limit)

    async def memory_refs(self, keys: Sequence[Any]) -> list[MemoryRef | None]:
        """Id and scope of scanned rows (by ``pk``), in the order of ``keys`` (``None``: purged since)."""
        return scans.memory_refs(self._db, keys)

    async def write_retention(self, write: RetentionWrite) -> int:
        """New retention and status for scanned rows, in one transaction (deleted rows are left alone)."""
        return writes.write_retention(self._db, write)

    # -- maintenance ----------------------------------------------------------------------------
    async def checkpoint_wal(self, *, rebuild: bool = False) -> bool:
        """Copy the write-ahead log into the file and truncate it, so purged text leaves the disk
        (``secure_delete`` has zeroed the deleted rows in the pages the log carries); with ``rebuild``,
        first rewrite the file (``VACUUM``: no free space of a page keeps a copy of a deleted row).

        Returns:
            ``False`` when another connection's read kept part of the log or the file could not be
            rewritten; ``True`` otherwise (always for an in-memory store).
        """
        with self._lock:
            return truncate_wal(self._conn, self._path, rebuild=rebuild)

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


def _new_store(path: str) -> None:
    """Make a new store file at ``path``: its tables and application id in one transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        db = StoreConnection(conn, path)
        with db.transaction():
            stamp(conn, STORE)
            prepare_schema(conn, path)
            writes.reindex_if_needed(db)
    finally:
        conn.close()
