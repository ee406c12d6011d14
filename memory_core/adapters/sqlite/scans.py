"""The embedded store's reads besides search: batches by id, keyset pages, sorted pages, counts, retention.

Each function validates its arguments before any SQL, then reads under the connection's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memory_core.adapters.sqlite.connection import IN_CHUNK, StoreConnection
from memory_core.adapters.sqlite.filters import filter_sql
from memory_core.adapters.sqlite.schema import AT, COLUMN, SELECT_LIST, row_to_record
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import Listing, OrderBy
from memory_core.domain.validation import (
    ensure_utc,
    validate_category,
    validate_memory_id,
    validate_memory_ids,
    validate_positive_int,
    validate_scope_id,
)
from memory_core.errors import ValidationError
from memory_core.ports import (
    MAX_BROWSE_LIMIT,
    MemoryRef,
    Page,
    RetentionPage,
    SortedPage,
    StatusCounts,
    check_browse_window,
)

__all__ = [
    "agents",
    "browse",
    "checked_scope",
    "count",
    "count_agents",
    "count_users",
    "get_many",
    "memory_refs",
    "scan",
    "scan_retention",
]


def checked_scope(scope: Scope) -> Scope:
    """``scope`` validated (a :class:`Scope` of valid ids).

    Raises:
        ValidationError: Not a :class:`Scope`, or an id that breaks the rules.
    """
    if not isinstance(scope, Scope):
        raise ValidationError("scope", "must be a Scope(user_id, agent_id)")
    return Scope.of(scope.user_id, scope.agent_id)


def _status_clause(statuses: Sequence[MemoryStatus] | None, clauses: list[str], params: list[Any]) -> None:
    """Add ``status IN (...)`` for ``statuses`` (none: any status)."""
    if statuses:
        wanted = [MemoryStatus(s).value for s in statuses]
        clauses.append(f"status IN ({', '.join('?' * len(wanted))})")
        params.extend(wanted)


def _current_clause(at: datetime | None, clauses: list[str], params: list[Any]) -> None:
    """Add "current at ``at``" (nothing superseded by then) for a time (none: current or not)."""
    if at is not None:
        clauses.append("(valid_until IS NULL OR valid_until > ?)")
        params.append(ensure_utc(at).timestamp())


def get_many(db: StoreConnection, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
    """The records of ``scope`` among ``memory_ids`` (any status, with embeddings), by id; one query
    per :data:`~memory_core.adapters.sqlite.connection.IN_CHUNK` ids.

    Raises:
        ValidationError: A bad id (before any query).
    """
    ids = validate_memory_ids(memory_ids, "memory_ids")
    found: dict[str, MemoryRecord] = {}
    with db.lock:
        for start in range(0, len(ids), IN_CHUNK):
            chunk = ids[start : start + IN_CHUNK]
            rows = db.conn.execute(
                f"SELECT {SELECT_LIST} FROM memories WHERE user_id = ? AND agent_id = ? "  # noqa: S608
                f"AND id IN ({', '.join('?' * len(chunk))})",  # constant column list, placeholders
                [scope.user_id, scope.agent_id, *chunk],
            ).fetchall()
            for row in rows:
                found[str(row[AT["id"]])] = row_to_record(row, with_embedding=True)
    return {i: found[i] for i in ids if i in found}


def scan(db: StoreConnection, scope: Scope, request: PageRequest) -> Page:
    """Records of ``scope`` by id after the request's cursor (a keyset page of its ``limit``)."""
    limit = request.limit
    clauses = ["user_id = ?", "agent_id = ?"]
    params: list[Any] = [scope.user_id, scope.agent_id]
    if request.after is not None:
        clauses.append("id > ?")
        params.append(validate_memory_id(request.after, "cursor"))
    _status_clause(request.statuses, clauses, params)
    _current_clause(request.current_at, clauses, params)
    if request.filters is not None:
        sql, values = filter_sql(request.filters)
        clauses.append(sql)
        params.extend(values)
    params.append(limit + 1)
    with db.lock:
        rows = db.conn.execute(
            f"SELECT {SELECT_LIST} FROM memories WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?",  # noqa: S608
            params,
        ).fetchall()
    records = [row_to_record(r, with_embedding=request.with_embedding) for r in rows[:limit]]
    next_cursor = records[-1].id if len(rows) > limit else None
    return Page(records=records, next_cursor=next_cursor)


def agents(db: StoreConnection, user_id: str) -> list[str]:
    """The agents holding memories of ``user_id``, sorted."""
    user_id = validate_scope_id(user_id, "user_id")
    with db.lock:
        rows = db.conn.execute(
            "SELECT DISTINCT agent_id FROM memories WHERE user_id = ? ORDER BY agent_id", (user_id,)
        ).fetchall()
    return [str(r[0]) for r in rows]


def browse(db: StoreConnection, scope: Scope, listing: Listing) -> SortedPage:
    """A filtered, sorted page of ``scope`` (``ORDER BY field, id LIMIT … OFFSET …``) and the count."""
    statuses, category, kind, order_by = listing.statuses, listing.category, listing.kind, listing.order_by
    offset, limit = listing.offset, listing.limit
    check_browse_window(offset, limit)
    clauses = ["user_id = ?", "agent_id = ?"]
    params: list[Any] = [scope.user_id, scope.agent_id]
    _status_clause(statuses, clauses, params)
    _current_clause(listing.current_at, clauses, params)
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
    with db.lock:
        counted = db.conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", params)  # noqa: S608
        total = int(counted.fetchone()[0])
        rows = db.conn.execute(
            f"SELECT {SELECT_LIST} FROM memories WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",  # noqa: S608
            [*params, limit, offset],
        ).fetchall()
    return SortedPage(records=[row_to_record(r, with_embedding=False) for r in rows], total=total)


def _status_counts(rows: Iterable[Sequence[Any]]) -> list[StatusCounts]:
    """``(id, status, count)`` rows added up per id, sorted by id."""
    counts: dict[str, StatusCounts] = {}
    for key, status, number in rows:
        counts[str(key)] = counts.get(str(key), StatusCounts(str(key))).add(status, number)
    return [counts[key] for key in sorted(counts)]


def count_agents(db: StoreConnection, user_id: str) -> list[StatusCounts]:
    """The agents of ``user_id`` with their counts by status."""
    user_id = validate_scope_id(user_id, "user_id")
    with db.lock:
        rows = db.conn.execute(
            "SELECT agent_id, status, COUNT(*) FROM memories WHERE user_id = ? GROUP BY agent_id, status",
            (user_id,),
        ).fetchall()
    return _status_counts(rows)


def count_users(db: StoreConnection, *, after: str | None, limit: int) -> list[StatusCounts]:
    """Users by id after ``after`` (at most ``limit``, 1 to one more than a page of 1,000, so a caller
    can tell whether another page follows) with their counts by status."""
    if after is not None:
        after = validate_scope_id(after, "cursor")
    most = MAX_BROWSE_LIMIT + 1
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise ValidationError("limit", f"must be an integer between 1 and {most}")
    with db.lock:
        rows = db.conn.execute(
            "SELECT user_id, status, COUNT(*) FROM memories WHERE user_id IN ("
            "SELECT DISTINCT user_id FROM memories WHERE user_id > ? ORDER BY user_id LIMIT ?"
            ") GROUP BY user_id, status",
            (after or "", limit),
        ).fetchall()
    return _status_counts(rows)


def count(db: StoreConnection, scope: Scope | None) -> int:
    """How many memories (of any status) the store, or ``scope``, holds."""
    with db.lock:
        if scope is None:
            row = db.conn.execute("SELECT COUNT(*) FROM memories").fetchone()
        else:
            scope = checked_scope(scope)
            row = db.conn.execute(
                "SELECT COUNT(*) FROM memories WHERE user_id = ? AND agent_id = ?",
                (scope.user_id, scope.agent_id),
            ).fetchone()
    return int(row[0])


def scan_retention(db: StoreConnection, *, after: str | None, limit: int) -> RetentionPage:
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
    with db.lock:
        rows = db.conn.execute(
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


def memory_refs(db: StoreConnection, keys: Sequence[Any]) -> list[MemoryRef | None]:
    """Id and scope of scanned rows (by ``pk``), in the order of ``keys`` (``None``: purged since)."""
    if not keys:
        return []
    with db.lock:
        rows = db.rows_by_pk("SELECT pk, id, user_id, agent_id FROM memories WHERE pk IN ({})", keys)
    found = {int(pk): MemoryRef(str(i), str(u), str(a)) for pk, i, u, a in rows}
    return [found.get(int(k)) for k in keys]
