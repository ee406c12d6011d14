"""The embedded store's memories without an embedding: found by row key, and given their vectors later.

An import may store its records first and compute their vectors afterwards
(:class:`~memory_core.capabilities.VectorBackfill`). The rows without one are found through the partial
index ``memories_vector_missing`` (rows whose ``embedding`` is NULL and whose status is not
``deleted``: a forgotten memory keeps no vector), so the search for them never reads the store's other
rows. A vector is written only where the row still has none and still says
the text it was computed from, in one transaction per call, with a new change sequence number, so
every process's search cache reads the rows again; nothing else of the row changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.adapters.sqlite.connection import StoreConnection
from memory_core.adapters.sqlite.writes import unit_vector
from memory_core.capabilities import MissingVector
from memory_core.domain.records import Scope
from memory_core.domain.validation import validate_positive_int
from memory_core.errors import ValidationError

__all__ = ["count_missing", "fill", "missing"]


def count_missing(db: StoreConnection) -> int:
    """How many live (not deleted) rows have no embedding."""
    with db.lock:
        row = db.conn.execute(
            "SELECT COUNT(*) FROM memories INDEXED BY memories_vector_missing "
            "WHERE embedding IS NULL AND status <> 'deleted'"
        ).fetchone()
    return int(row[0])


def missing(db: StoreConnection, *, after: int | None, limit: int) -> list[MissingVector]:
    """Up to ``limit`` live rows without an embedding, by ``pk``, after ``after``."""
    validate_positive_int(limit, "limit")
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**63):
        raise ValidationError("after", "is not a row key this store returned")
    with db.lock:
        rows = db.conn.execute(
            "SELECT pk, user_id, agent_id, id, memory FROM memories INDEXED BY memories_vector_missing "
            "WHERE embedding IS NULL AND status <> 'deleted' AND pk > ? ORDER BY pk LIMIT ?",
            (after or 0, limit),
        ).fetchall()
    return [
        MissingVector(key=int(pk), scope=Scope.of(str(u), str(a)), memory_id=str(i), text=str(text))
        for pk, u, a, i, text in rows
    ]


def fill(db: StoreConnection, vectors: Sequence[tuple[MissingVector, Sequence[float]]]) -> int:
    """Write each vector where its row is still live, with no embedding and the same text; one transaction.

    Returns:
        How many rows got their vector.

    Raises:
        ConflictError: A vector has another size than the store's (nothing is written).
        ValidationError: A vector is zero or not finite (nothing is written).
    """
    if not vectors:
        return 0
    written = 0
    changed: set[tuple[str, str]] = set()
    with db.transaction():
        seq = db.next_seq()
        for item, values in vectors:
            blob = unit_vector(db, values)
            cursor = db.conn.execute(
                "UPDATE memories SET embedding = ?, seq = ? "
                "WHERE pk = ? AND id = ? AND embedding IS NULL AND status <> 'deleted' AND memory = ?",
                (blob, seq, item.key, item.memory_id, item.text),
            )
            if cursor.rowcount:
                written += 1
                changed.add((item.scope.user_id, item.scope.agent_id))
        db.bump_scopes(changed, seq)
    return written
