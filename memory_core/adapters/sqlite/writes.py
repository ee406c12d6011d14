"""The embedded store's writes: rows and the BM25 statistics kept exact with them, one transaction each.

Every write runs inside :meth:`~memory_core.adapters.sqlite.connection.StoreConnection.transaction`,
takes a new change sequence number, and records which scopes it changed (``scope_versions``), so
every process's search cache knows what to read again. A write that changes a memory's text drops
the scope's saved index (:func:`~memory_core.adapters.sqlite.scope_cache.forget_persisted`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memory_core.adapters.sqlite.connection import StoreConnection
from memory_core.adapters.sqlite.entity_rows import index_memory, purge_entities
from memory_core.adapters.sqlite.schema import (
    AT,
    COLUMN,
    MERGEABLE,
    RECORD_COLUMNS,
    SELECT_LIST,
    insert_sql,
    row_to_record,
    update_sql,
)
from memory_core.adapters.sqlite.scope_cache import forget_persisted
from memory_core.adapters.sqlite.scope_index import SEARCH_FIELDS
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope, status_note
from memory_core.domain.validation import parse_model, validate_memory_id, validate_scope_id
from memory_core.errors import ConflictError, NotFoundError, ValidationError
from memory_core.language.text import ANALYZER_VERSION, index_terms
from memory_core.ports import RetentionWrite

__all__ = [
    "StatsDelta",
    "mark_status",
    "merge",
    "purge",
    "recall",
    "reindex_if_needed",
    "row_in_scope",
    "unit_vector",
    "upsert",
    "write_retention",
]

logger = logging.getLogger(__name__)

_INSERT = insert_sql()
_UPDATE = update_sql()


@dataclass(slots=True)
class StatsDelta:
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


def _counts(terms: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = counts.get(term, 0) + 1
    return counts


def _field_terms(record: MemoryRecord) -> dict[str, dict[str, int]]:
    return {name: _counts(index_terms(getattr(record, name))) for name in SEARCH_FIELDS}


def _flush_stats(db: StoreConnection, stats: StatsDelta) -> None:
    """Apply accumulated statistics changes (inside the caller's transaction)."""
    for name, (docs, length) in stats.fields.items():
        if docs or length:
            db.conn.execute(
                "INSERT INTO field_stats (field, doc_count, total_length) VALUES (?, ?, ?) "
                "ON CONFLICT (field) DO UPDATE SET doc_count = doc_count + excluded.doc_count, "
                "total_length = total_length + excluded.total_length",
                (name, docs, length),
            )
    changes = [(name, term, df) for (name, term), df in stats.terms.items() if df]
    db.conn.executemany(
        "INSERT INTO term_stats (field, term, df) VALUES (?, ?, ?) "
        "ON CONFLICT (field, term) DO UPDATE SET df = df + excluded.df",
        changes,
    )
    if any(df < 0 for _, _, df in changes):
        db.conn.executemany(
            "DELETE FROM term_stats WHERE field = ? AND term = ? AND df <= 0",
            [(name, term) for name, term, df in changes if df < 0],
        )


def reindex_if_needed(db: StoreConnection) -> None:
    """Re-derive every memory's index terms and the BM25 statistics when the analyzer changed.

    Runs inside the opening transaction, once per analyzer version (``meta.analyzer``).
    """
    row = db.conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
    if row is not None and row[0] == ANALYZER_VERSION:
        return
    count = int(db.conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    if count:
        logger.info("re-indexing %s memories for analyzer version %s", count, ANALYZER_VERSION)
        _reindex(db)
    db.conn.execute(
        "INSERT INTO meta (key, value) VALUES ('analyzer', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (ANALYZER_VERSION,),
    )


def _reindex(db: StoreConnection) -> None:
    """Every row's terms again, in pages by row key; the statistics and saved indexes from scratch."""
    seq = db.next_seq()
    stats = StatsDelta()
    last = 0
    while True:
        rows = db.conn.execute(
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
        db.conn.executemany("UPDATE memories SET terms = ?, seq = ? WHERE pk = ?", updates)
        last = int(rows[-1][0])
    db.conn.execute("DELETE FROM term_stats")
    db.conn.execute("DELETE FROM scope_snapshots")
    db.conn.execute("DELETE FROM field_stats")
    _flush_stats(db, stats)
    scopes = db.conn.execute("SELECT DISTINCT user_id, agent_id FROM memories").fetchall()
    db.bump_scopes(((str(u), str(a)) for u, a in scopes), seq, new_epoch=True)


def _unit_embedding(db: StoreConnection, record: MemoryRecord) -> np.ndarray | None:
    """The record's embedding scaled to length 1 (its size checked against the store's)."""
    if record.embedding is None:
        return None
    return unit_vector(db, record.embedding)


def unit_vector(db: StoreConnection, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """An embedding scaled to length 1, as the store keeps it (its size checked against the store's).

    Raises:
        ConflictError: The store holds embeddings of another size.
        ValidationError: The vector is zero, or not finite.
    """
    vector = np.asarray(values, dtype=np.float32)
    db.check_dimensions(int(vector.shape[0]))
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise ValidationError("embedding", "must not be the zero vector")
    if not math.isfinite(norm) or not np.isfinite(vector).all():
        raise ValidationError("embedding", "must hold finite numbers of a finite length")
    result: np.ndarray = vector / norm
    return result


def _write(
    db: StoreConnection, record: MemoryRecord, seq: int, old: Sequence[Any] | None, stats: StatsDelta
) -> None:
    """Insert or replace one validated record; its BM25 statistics go into ``stats``."""
    terms = _field_terms(record)
    encoded = json.dumps(terms, ensure_ascii=False, sort_keys=True)
    if old is not None:
        stats.add(json.loads(old[AT["terms"]]), -1)
        if old[AT["terms"]] != encoded:  # a saved index must never hold text the rows no longer do
            forget_persisted(db.conn, record.user_id, record.agent_id)
    stats.add(terms, +1)
    embedding = _unit_embedding(db, record)
    values = [
        embedding if column.kind == "vector" else column.encode(getattr(record, column.name))
        for column in RECORD_COLUMNS
    ]
    values += [encoded, seq]
    if old is None:
        db.conn.execute(_INSERT, values)
    else:
        db.conn.execute(_UPDATE, (*values, old[AT["pk"]]))
    if old is None or old[AT["memory"]] != record.memory or old[AT["status"]] != record.status.value:
        index_memory(db.conn, record)


def _select_one(db: StoreConnection, memory_id: str) -> Sequence[Any] | None:
    row: Sequence[Any] | None = db.conn.execute(
        f"SELECT {SELECT_LIST} FROM memories WHERE id = ?",  # noqa: S608 - constant column list
        (memory_id,),
    ).fetchone()
    return row


def row_in_scope(db: StoreConnection, scope: Scope, memory_id: str) -> Sequence[Any] | None:
    """The row of ``memory_id`` when it belongs to ``scope`` (any status), else ``None``."""
    validate_memory_id(memory_id)
    row = _select_one(db, memory_id)
    if row is None or (row[AT["user_id"]], row[AT["agent_id"]]) != (scope.user_id, scope.agent_id):
        return None
    return row


def upsert(db: StoreConnection, records: Sequence[MemoryRecord]) -> None:
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
    with db.transaction():
        seq = db.next_seq()
        stats = StatsDelta()
        for record in validated:
            old = _select_one(db, record.id)
            if old is not None and (old[2], old[3]) != (record.user_id, record.agent_id):
                raise ConflictError(f"memory id {record.id!r} already belongs to another scope")
            _write(db, record, seq, old, stats)
        _flush_stats(db, stats)
        db.bump_scopes(((r.user_id, r.agent_id) for r in validated), seq)


def _merge_locked(
    db: StoreConnection, scope: Scope, memory_id: str, changes: Mapping[str, Any], seq: int
) -> MemoryRecord:
    unknown = set(changes) - MERGEABLE
    if unknown:
        raise ValidationError(
            sorted(unknown)[0], "cannot be changed by a merge (id, scope and created_at are fixed)"
        )
    row = row_in_scope(db, scope, memory_id)
    if row is None:
        raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
    current = row_to_record(row, with_embedding=True).model_dump()
    current.update(changes)
    record = parse_model(MemoryRecord, current)
    stats = StatsDelta()
    _write(db, record, seq, row, stats)
    _flush_stats(db, stats)
    return record


def merge(db: StoreConnection, scope: Scope, memory_id: str, changes: Mapping[str, Any]) -> MemoryRecord:
    """Change some fields of one record of ``scope``; returns it (with its embedding)."""
    with db.transaction():
        seq = db.next_seq()
        record = _merge_locked(db, scope, memory_id, changes, seq)
        db.bump_scopes([(scope.user_id, scope.agent_id)], seq)
    return record


def mark_status(
    db: StoreConnection, scope: Scope, memory_id: str, status: MemoryStatus, reason: str, now: datetime
) -> MemoryRecord:
    """Set a record's status, noting the reason and the moment in its metadata."""
    with db.transaction():
        row = row_in_scope(db, scope, memory_id)
        if row is None:
            raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
        metadata = status_note(json.loads(row[AT["metadata"]]), reason, now)
        seq = db.next_seq()
        record = _merge_locked(db, scope, memory_id, {"status": status, "metadata": metadata}, seq)
        db.bump_scopes([(scope.user_id, scope.agent_id)], seq)
    return record


def recall(
    db: StoreConnection, scope: Scope, memory_ids: Sequence[str], policy: HumanMemoryPolicy, now: datetime
) -> list[MemoryRecord]:
    """Apply ``policy.recall`` to the records of ``scope`` among ``memory_ids`` (deleted ones skipped)."""
    touched: list[MemoryRecord] = []
    with db.transaction():
        seq = db.next_seq()
        for memory_id in dict.fromkeys(memory_ids):
            row = row_in_scope(db, scope, memory_id)
            if row is None or row[AT["status"]] == MemoryStatus.DELETED.value:
                continue
            record = policy.recall(row_to_record(row, with_embedding=False), now)
            db.conn.execute(
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
            db.bump_scopes([(scope.user_id, scope.agent_id)], seq)
    return touched


def purge(db: StoreConnection, user_id: str, agent_id: str | None) -> int:
    """Delete the rows of a user (of one agent, or all) and their statistics; returns how many rows
    the delete removed (in its own transaction)."""
    user_id = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        agent_id = validate_scope_id(agent_id, "agent_id")
    where, params = "user_id = ?", [user_id]
    if agent_id is not None:
        where, params = "user_id = ? AND agent_id = ?", [user_id, agent_id]
    with db.transaction():
        rows = db.conn.execute(
            f"SELECT agent_id, terms FROM memories WHERE {where}",  # noqa: S608 - fixed clauses
            params,
        ).fetchall()
        stats = StatsDelta()
        for _, terms in rows:
            stats.add(json.loads(terms), -1)
        _flush_stats(db, stats)
        removed = db.conn.execute(f"DELETE FROM memories WHERE {where}", params).rowcount  # noqa: S608
        forget_persisted(db.conn, user_id, agent_id)
        purge_entities(db.conn, user_id, agent_id)
        seq = db.next_seq()
        scopes = {(user_id, agent) for agent, _ in rows}
        db.bump_scopes(scopes, seq, new_epoch=True)
    return int(removed)


def write_retention(db: StoreConnection, write: RetentionWrite) -> int:
    """New retention and status for scanned rows, in one transaction (deleted rows are left alone)."""
    if not len(write):
        return 0
    page = write.page
    active, archived = MemoryStatus.ACTIVE.value, MemoryStatus.ARCHIVED.value
    keys = [page.keys[int(at)] for at in write.rows]
    with db.transaction():
        seq = db.next_seq()
        written = db.conn.executemany(
            "UPDATE memories SET retention_score = ?, status = ?, seq = ? WHERE pk = ? AND status != ?",
            [
                (float(retention), active if now_active else archived, seq, key, MemoryStatus.DELETED.value)
                for key, now_active, retention in zip(keys, write.active, write.retention, strict=True)
            ],
        ).rowcount
        scopes = db.rows_by_pk("SELECT DISTINCT user_id, agent_id FROM memories WHERE pk IN ({})", keys)
        db.bump_scopes(((str(u), str(a)) for u, a in scopes), seq)
    return written
