"""The embedded store's file format: columns derived from :class:`~memory_core.domain.records.MemoryRecord`,
the schema version, and the in-place migrations between versions.

One list of columns, built from the model's fields, gives the table definition, the ``SELECT`` list,
the ``INSERT``/``UPDATE`` statements, the fields a merge may change and the row <-> record
conversion, so adding a field to ``MemoryRecord`` needs no list edited here: a store file opened by
a version with more fields gets the new columns (``ALTER TABLE ... ADD COLUMN`` with the field's
default) when it is opened.

Versions (``meta.schema_version``):

1. The first format.
2. The file is marked as a memory-core store (``PRAGMA application_id``), so a store never writes
   its tables into another program's database (a mistyped ``--db``).
3. Episodic and semantic memory: ``kind`` (``fact`` or ``episode``) and ``provenance`` (the turns and
   spans a memory came from) columns; a memory's source turns move from its metadata into
   ``provenance``.
4. ``scope_snapshots``: the search index of a large scope, saved so that loading the scope reads it
   instead of rebuilding it from every row (a cache: dropped whenever it could hold text the rows no
   longer hold, and rebuilt from the rows when missing or unusable).
5. Event time: ``event_at`` and ``event_until`` columns (when what a memory says happened, as stated;
   ``NULL`` in the rows of an older file, which stated none that was resolved).
6. The entity index: ``entities`` and ``entity_mentions`` (:mod:`memory_core.adapters.sqlite.entity_rows`);
   the memories of an older file are indexed when it is upgraded.

Opening a file upgrades it in place, in one transaction, from its version to :data:`SCHEMA_VERSION`;
a file written by a newer memory-core is refused rather than misread.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import numpy as np
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from memory_core.adapters.sqlite.entity_rows import ENTITY_TABLES, backfill
from memory_core.adapters.sqlite.ownership import STORE, STORE_APPLICATION_ID, check_owner
from memory_core.domain.records import IMMUTABLE_FIELDS, MemoryRecord
from memory_core.domain.validation import field_type
from memory_core.errors import ConflictError

__all__ = [
    "APPLICATION_ID",
    "AT",
    "COLUMN",
    "COLUMNS",
    "MERGEABLE",
    "RECORD_COLUMNS",
    "SCHEMA_VERSION",
    "SELECT_LIST",
    "Column",
    "check_file",
    "insert_sql",
    "prepare_schema",
    "row_to_record",
    "update_sql",
]

#: The current file format.
SCHEMA_VERSION = 6
#: ``PRAGMA application_id`` of a memory-core store file ("memc").
APPLICATION_ID = STORE_APPLICATION_ID
#: Tables memory-core puts into a store file (memories and, beside them, the decision history).
KNOWN_TABLES = STORE.tables


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the ``memories`` table that holds a :class:`MemoryRecord` field.

    Attributes:
        name: The field (and column) name.
        kind: How the value is stored: ``text``, ``real``, ``integer``, ``time`` (epoch seconds as
            REAL), ``enum`` (its value as TEXT), ``json`` (TEXT) or ``vector`` (float32 BLOB).
        nullable: The field may be ``None``.
        default: The field's default (used when the column is added to an existing file).
    """

    name: str
    kind: str
    nullable: bool
    default: Any

    @property
    def sql_type(self) -> str:
        return {
            "text": "TEXT",
            "enum": "TEXT",
            "json": "TEXT",
            "real": "REAL",
            "time": "REAL",
            "integer": "INTEGER",
            "vector": "BLOB",
        }[self.kind]

    def ddl(self) -> str:
        if self.name == "id":
            return "id TEXT NOT NULL UNIQUE"
        return f"{self.name} {self.sql_type}" + ("" if self.nullable else " NOT NULL")

    def add_column_ddl(self) -> str:
        """``ALTER TABLE ... ADD COLUMN`` clause: a NOT NULL column needs a constant default."""
        if self.nullable:
            return f"{self.name} {self.sql_type}"
        default = self.encode(self.default)
        if default is None:
            raise ConflictError(f"cannot add the required column {self.name!r} to an existing store")
        return f"{self.name} {self.sql_type} NOT NULL DEFAULT {_sql_literal(default)}"

    def encode(self, value: Any) -> Any:
        """The stored form of a field value (the vector's normalisation is the store's business)."""
        if value is None:
            return None
        if self.kind == "time":
            return value.timestamp()
        if self.kind == "enum":
            return value.value if isinstance(value, Enum) else str(value)
        if self.kind == "json":
            return json.dumps(to_jsonable_python(value), ensure_ascii=False, sort_keys=True)
        if self.kind == "vector":
            return np.asarray(value, dtype=np.float32).tobytes()
        return value

    def decode(self, value: Any) -> Any:
        """The field value of a stored one."""
        if value is None:
            return None
        if self.kind == "time":
            return datetime.fromtimestamp(value, tz=UTC)
        if self.kind == "enum":
            return _enum(self.name)(value)
        if self.kind == "json":
            return _adapter(self.name).validate_python(json.loads(value))
        if self.kind == "vector":
            return np.frombuffer(value, dtype=np.float32).tolist()
        return value


@functools.cache
def _enum(name: str) -> Callable[[Any], Any]:
    """The enum class of an enum column's field."""
    enum: Callable[[Any], Any] = field_type(MemoryRecord, name)[0]
    return enum


@functools.cache
def _adapter(name: str) -> TypeAdapter[Any]:
    """Validates a JSON column's value into the field's type (lists of models become models)."""
    annotation: Any = MemoryRecord.model_fields[name].annotation
    return TypeAdapter(annotation)


def _sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    raise ConflictError(f"no SQL literal for {value!r}")


def _kind(name: str, base: Any) -> str:
    origin = typing.get_origin(base)
    if base is datetime:
        return "time"
    if isinstance(base, type) and issubclass(base, Enum):
        return "enum"
    if base is str:
        return "text"
    if base is float:
        return "real"
    if base is int or base is bool:
        return "integer"
    if origin is dict:
        return "json"
    if origin is list and all(isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(base)):
        return "json"
    if origin is list and typing.get_args(base) == (float,):
        return "vector"
    raise TypeError(
        f"MemoryRecord.{name}: no SQLite column kind for {base!r}; add one in sqlite_schema"
    )


def _columns() -> tuple[Column, ...]:
    result = []
    for name, info in MemoryRecord.model_fields.items():
        base, nullable = field_type(MemoryRecord, name)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        if name == "id":
            default = None
        result.append(Column(name, _kind(name, base), nullable, default))
    return tuple(result)


#: One column per :class:`MemoryRecord` field, in the model's order.
RECORD_COLUMNS: tuple[Column, ...] = _columns()
#: Every column a store query selects: the row key, the record's fields, then the index terms
#: (per-field term counts, JSON) and the change sequence.
COLUMNS: tuple[str, ...] = ("pk", *(c.name for c in RECORD_COLUMNS), "terms", "seq")
#: The column of each field, by name.
COLUMN: dict[str, Column] = {c.name: c for c in RECORD_COLUMNS}
#: Position of each column in a selected row.
AT: dict[str, int] = {name: i for i, name in enumerate(COLUMNS)}
#: The ``SELECT`` list for :data:`COLUMNS`.
SELECT_LIST = ", ".join(COLUMNS)
#: Fields a partial update (merge) may change.
MERGEABLE = frozenset(c.name for c in RECORD_COLUMNS) - IMMUTABLE_FIELDS

_WRITTEN = (*(c.name for c in RECORD_COLUMNS), "terms", "seq")


def insert_sql() -> str:
    """``INSERT`` of one row: the record's columns, then ``terms`` and ``seq``."""
    return f"INSERT INTO memories ({', '.join(_WRITTEN)}) VALUES ({', '.join('?' * len(_WRITTEN))})"  # noqa: S608


def update_sql() -> str:
    """``UPDATE`` of one whole row by ``pk`` (parameters as :func:`insert_sql`, then the pk)."""
    return f"UPDATE memories SET {', '.join(f'{n} = ?' for n in _WRITTEN)} WHERE pk = ?"  # noqa: S608


def row_to_record(row: Sequence[Any], *, with_embedding: bool) -> MemoryRecord:
    """The record held by a selected row (see :data:`COLUMNS`); the row is trusted (written validated)."""
    values: dict[str, Any] = {}
    for column in RECORD_COLUMNS:
        if column.kind == "vector" and not with_embedding:
            values[column.name] = None
        else:
            values[column.name] = column.decode(row[AT[column.name]])
    return MemoryRecord.model_construct(**values)


_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memories (
    pk INTEGER PRIMARY KEY,
    {columns},
    terms TEXT NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_scope_id ON memories (user_id, agent_id, id);
CREATE INDEX IF NOT EXISTS memories_scope_seq ON memories (user_id, agent_id, seq);
-- Covers the forgetting scan, so the nightly job never reads the wide rows (texts, embeddings).
CREATE INDEX IF NOT EXISTS memories_forget ON memories (
    pk, status, retention_score, importance, access_count, updated_at, last_accessed_at, expires_at,
    user_id, agent_id
);
-- The live memories stored without an embedding (an import computes their vectors after storing
-- them). A deleted memory never gets one: forgetting clears its text and its vector.
DROP INDEX IF EXISTS memories_missing_vector;
CREATE INDEX IF NOT EXISTS memories_vector_missing ON memories (pk)
    WHERE embedding IS NULL AND status <> 'deleted';
CREATE TABLE IF NOT EXISTS scope_versions (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    PRIMARY KEY (user_id, agent_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS term_stats (
    field TEXT NOT NULL,
    term TEXT NOT NULL,
    df INTEGER NOT NULL,
    PRIMARY KEY (field, term)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scope_snapshots (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    version INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (user_id, agent_id)
);
CREATE TABLE IF NOT EXISTS field_stats (
    field TEXT PRIMARY KEY,
    doc_count INTEGER NOT NULL,
    total_length INTEGER NOT NULL
) WITHOUT ROWID;
""" + ENTITY_TABLES


def _v2_application_id(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _v3_kind_and_provenance(conn: sqlite3.Connection) -> None:
    """``kind`` and ``provenance`` columns; the turns a memory came from move from its metadata
    (``turn_id``, ``updated_by_turn``) into ``provenance``."""
    _add_missing_columns(conn)
    rows = conn.execute(
        "SELECT pk, metadata FROM memories WHERE metadata LIKE '%\"turn_id\"%' OR metadata LIKE '%updated_by_turn%'"
    ).fetchall()
    updates = []
    for pk, metadata in rows:
        data = json.loads(metadata)
        turns = [t for t in (data.get("turn_id"), data.get("updated_by_turn")) if isinstance(t, str) and t]
        provenance = [{"turn_id": t, "message": 0, "start": 0, "end": 0, "speaker": None} for t in dict.fromkeys(turns)]
        if provenance:
            updates.append((json.dumps(provenance, ensure_ascii=False, sort_keys=True), pk))
    conn.executemany("UPDATE memories SET provenance = ? WHERE pk = ?", updates)


def _v6_entities(conn: sqlite3.Connection) -> None:
    """The entity index of the memories already in the file (its tables are created with the others)."""
    _add_missing_columns(conn)
    rows = conn.execute(f"SELECT {SELECT_LIST} FROM memories ORDER BY updated_at, pk").fetchall()  # noqa: S608
    backfill(conn, (row_to_record(row, with_embedding=False) for row in rows))


#: In-place upgrades: ``MIGRATIONS[v]`` turns a version ``v - 1`` file into a version ``v`` one.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    2: _v2_application_id,
    3: _v3_kind_and_provenance,
    4: lambda conn: None,  # scope_snapshots: created with the other tables
    5: lambda conn: _add_missing_columns(conn),  # event_at, event_until
    6: lambda conn: _v6_entities(conn),
}


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(r[0]) for r in rows if not str(r[0]).startswith("sqlite_")}


def check_ownership(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a database that belongs to another program, or a file that is no database at all (before
    anything is written to it; see :mod:`memory_core.adapters.sqlite.ownership`)."""
    check_owner(conn, path, STORE)


def check_file(conn: sqlite3.Connection, path: str) -> None:
    """Refuse, before anything is written, a file that is not ours or that a newer version wrote."""
    check_ownership(conn, path)
    if "meta" not in _tables(conn):
        return
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise ConflictError(
            f"{path} has store schema {row[0]}, written by a newer memory-core; this version reads up to "
            f"{SCHEMA_VERSION} (upgrade memory-core)"
        )


def prepare_schema(conn: sqlite3.Connection, path: str) -> int:
    """Create or upgrade the store schema in place (inside the caller's transaction).

    Returns:
        The version the file had before (0 for a new file).

    Raises:
        ConflictError: The file is another program's database, or was written by a newer version.
    """
    check_file(conn, path)  # again, inside the transaction: another process may have changed it since
    fresh = "memories" not in _tables(conn)
    for statement in _split(_TABLES.format(columns=",\n    ".join(c.ddl() for c in RECORD_COLUMNS))):
        conn.execute(statement)
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        if not fresh:
            raise ConflictError(
                f"{path} holds a memories table but no schema version; it is not a memory-core store"
            )
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1'), ('seq', '0')")
        found = 0
    else:
        found = int(row[0])
    for version in range(max(found, 1) + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version](conn)
    _add_missing_columns(conn)
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'",
        (str(SCHEMA_VERSION),),
    )
    return found


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Add a column for every ``MemoryRecord`` field the table lacks (a field added since)."""
    have = {str(r[1]) for r in conn.execute("PRAGMA table_info(memories)").fetchall()}
    for column in RECORD_COLUMNS:
        if column.name not in have:
            conn.execute(f"ALTER TABLE memories ADD COLUMN {column.add_column_ddl()}")


def _split(script: str) -> list[str]:
    """The statements of a DDL script (no string literals contain ';')."""
    lines = [line for line in script.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
