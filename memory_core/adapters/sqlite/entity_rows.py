"""The embedded store's entity index: the ``entities`` of each scope and the ``entity_mentions`` that link
them to the memories that name them, written in the same transaction as the memory.

Every write of a memory re-reads its text (:func:`index_memory`), with the names the scope already
knows (so "Luis" alone is the Luis of "my brother Luis"): its old mentions go, the entities its
text names are resolved against the scope's (:func:`~memory_core.domain.entities.resolve`) and linked;
a deleted memory names nothing. An entity no memory names any more is removed with its last mention,
so a forgotten person leaves no name behind.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from memory_core.domain.entities import Entity, known_names, matching, resolve
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.language.entities import Mention, may_name, mentions

__all__ = [
    "ENTITY_TABLES",
    "backfill",
    "entities",
    "entity_memories",
    "index_memory",
    "memories_of",
    "purge_entities",
]

#: The tables of the entity index (created with the store's other tables).
ENTITY_TABLES = """
CREATE TABLE IF NOT EXISTS entities (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT,
    relation TEXT,
    aliases TEXT NOT NULL,
    first_mentioned REAL NOT NULL,
    last_mentioned REAL NOT NULL,
    PRIMARY KEY (user_id, agent_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entity_mentions (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (user_id, agent_id, entity_id, memory_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entity_mentions_memory ON entity_mentions (user_id, agent_id, memory_id);
"""

_COLUMNS = "id, user_id, agent_id, kind, name, relation, aliases, first_mentioned, last_mentioned"


def _entity(row: Sequence[object]) -> Entity:
    return Entity(
        id=str(row[0]),
        user_id=str(row[1]),
        agent_id=str(row[2]),
        kind=str(row[3]),
        name=None if row[4] is None else str(row[4]),
        relation=None if row[5] is None else str(row[5]),
        aliases=tuple(json.loads(str(row[6]))),
        first_mentioned=datetime.fromtimestamp(float(row[7]), tz=UTC),  # type: ignore[arg-type]
        last_mentioned=datetime.fromtimestamp(float(row[8]), tz=UTC),  # type: ignore[arg-type]
    )


def entities(conn: sqlite3.Connection, scope: Scope) -> list[Entity]:
    """The entities of ``scope``, by id."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM entities WHERE user_id = ? AND agent_id = ? ORDER BY id",  # noqa: S608
        (scope.user_id, scope.agent_id),
    ).fetchall()
    return [_entity(r) for r in rows]


def index_memory(conn: sqlite3.Connection, record: MemoryRecord) -> None:
    """Link ``record`` to the entities its text names (none when it is deleted), inside the caller's
    transaction; entities left without a memory are removed."""
    scope = record.scope
    where = "user_id = ? AND agent_id = ? AND memory_id = ?"
    key = (scope.user_id, scope.agent_id, record.id)
    before = {str(r[0]) for r in conn.execute(f"SELECT entity_id FROM entity_mentions WHERE {where}", key)}  # noqa: S608
    conn.execute(f"DELETE FROM entity_mentions WHERE {where}", key)  # noqa: S608
    named: list[Mention] = []
    known: list[Entity] | None = None
    if record.status is not MemoryStatus.DELETED:
        # the scope's names matter only to a text that may name one (as the Azure store reads them)
        known = entities(conn, scope) if may_name(record.memory) else None
        named = mentions(record.memory, known_names(known or []))
    if named:
        changed, ids = resolve(scope, named, entities(conn, scope) if known is None else known, record.updated_at)
        conn.executemany(
            f"INSERT OR REPLACE INTO entities ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            [_row(e) for e in changed],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO entity_mentions (user_id, agent_id, entity_id, memory_id) VALUES (?, ?, ?, ?)",
            [(scope.user_id, scope.agent_id, entity_id, record.id) for entity_id in ids],
        )
        before -= set(ids)
    _drop_unnamed(conn, scope, before)


def _row(entity: Entity) -> tuple[object, ...]:
    return (
        entity.id,
        entity.user_id,
        entity.agent_id,
        entity.kind,
        entity.name,
        entity.relation,
        json.dumps(list(entity.aliases), ensure_ascii=False),
        entity.first_mentioned.timestamp(),
        entity.last_mentioned.timestamp(),
    )


def _drop_unnamed(conn: sqlite3.Connection, scope: Scope, entity_ids: Iterable[str]) -> None:
    for entity_id in entity_ids:
        conn.execute(
            "DELETE FROM entities WHERE user_id = ? AND agent_id = ? AND id = ? AND NOT EXISTS ("
            "SELECT 1 FROM entity_mentions m WHERE m.user_id = entities.user_id AND m.agent_id = entities.agent_id "
            "AND m.entity_id = entities.id)",
            (scope.user_id, scope.agent_id, entity_id),
        )


def entity_memories(conn: sqlite3.Connection, scope: Scope, asked: Sequence[Mention]) -> dict[str, list[str]]:
    """The ids of the memories of each entity of ``scope`` the mentions ``asked`` may mean
    (:func:`~memory_core.domain.entities.matching`), by entity id."""
    known = entities(conn, scope)
    found: dict[str, list[str]] = {}
    for mention in asked:
        for entity in matching(mention, known):
            rows = conn.execute(
                "SELECT memory_id FROM entity_mentions WHERE user_id = ? AND agent_id = ? AND entity_id = ? "
                "ORDER BY memory_id",
                (scope.user_id, scope.agent_id, entity.id),
            ).fetchall()
            found.setdefault(entity.id, [str(r[0]) for r in rows])
    return found


def memories_of(conn: sqlite3.Connection, scope: Scope, entity_ids: Sequence[str]) -> dict[str, list[str]]:
    """The ids of the memories of each of ``entity_ids`` that is an entity of ``scope``, by entity id, in
    the order asked (a deleted memory names nothing, so none is listed; unknown ids are absent)."""
    found: dict[str, list[str]] = {}
    for entity_id in dict.fromkeys(entity_ids):
        known = conn.execute(
            "SELECT 1 FROM entities WHERE user_id = ? AND agent_id = ? AND id = ?",
            (scope.user_id, scope.agent_id, entity_id),
        ).fetchone()
        if known is None:
            continue
        rows = conn.execute(
            "SELECT memory_id FROM entity_mentions WHERE user_id = ? AND agent_id = ? AND entity_id = ? "
            "ORDER BY memory_id",
            (scope.user_id, scope.agent_id, entity_id),
        ).fetchall()
        found[entity_id] = [str(r[0]) for r in rows]
    return found


def purge_entities(conn: sqlite3.Connection, user_id: str, agent_id: str | None) -> None:
    """Remove the entities and mentions of a user (of one agent, or all), inside the caller's transaction."""
    where, params = ("user_id = ?", (user_id,)) if agent_id is None else ("user_id = ? AND agent_id = ?", (user_id, agent_id))
    conn.execute(f"DELETE FROM entity_mentions WHERE {where}", params)  # noqa: S608 - fixed clauses
    conn.execute(f"DELETE FROM entities WHERE {where}", params)  # noqa: S608


def backfill(conn: sqlite3.Connection, records: Iterable[MemoryRecord]) -> None:
    """Index the entities of memories written before the entity index (an older store's upgrade)."""
    for record in records:
        index_memory(conn, record)
