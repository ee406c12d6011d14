"""Which SQLite files are memory-core's: a store or a queue, told apart before anything is written.

- **A file memory-core makes is whole from the start.** It is built under a temporary name beside
  the path (its tables and ``PRAGMA application_id`` in one transaction) and then linked into place
  (:func:`create_whole`), so the path holds a complete file or none. A 0-byte file, or an SQLite
  database without tables, is therefore never one memory-core left: it is another program's new
  database or a truncated copy, and it is refused.
- **Its application id says what it is** (:data:`STORE_APPLICATION_ID` ``memc``: memories and their
  history; :data:`QUEUE_APPLICATION_ID` ``memq``: the embedded queue). Any other id is another
  program's file, or the other kind of memory-core file, and is refused naming it.
- **Files written before the ids** (application id 0) are recognised by their tables: every table is
  one of the kind's, and the table that defines the kind holds what it should (a store's ``meta``
  has a schema version; a queue has ``queue_messages``). They get their id when next opened for
  writing. Everything else is refused, untouched: :func:`check_owner` only reads.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from memory_core.adapters.sqlite.files import rollback
from memory_core.errors import ConflictError

__all__ = [
    "QUEUE",
    "QUEUE_APPLICATION_ID",
    "STORE",
    "STORE_APPLICATION_ID",
    "FileKind",
    "check_owner",
    "create_whole",
    "is_marked",
    "make_tables",
    "new_database",
    "stamp",
]

#: ``PRAGMA application_id`` of a memory-core store file ("memc").
STORE_APPLICATION_ID = 0x6D656D63
#: ``PRAGMA application_id`` of a memory-core queue file ("memq").
QUEUE_APPLICATION_ID = 0x6D656D71


@dataclass(frozen=True, slots=True)
class FileKind:
    """One kind of memory-core file.

    Attributes:
        what: ``store`` or ``queue``, for messages.
        application_id: Its ``PRAGMA application_id``.
        tables: Every table memory-core puts in it.
        defines: The table an unmarked (older) file of this kind holds.
        remedy: What to do instead, for the message.
    """

    what: str
    application_id: int
    tables: frozenset[str]
    defines: str
    remedy: str


#: Tables of a store file: the memories and, beside them, the decision history.
_STORE_TABLES = frozenset(
    {
        "meta",
        "memories",
        "scope_versions",
        "term_stats",
        "field_stats",
        "scope_snapshots",
        "entities",
        "entity_mentions",
        "history_entries",
        "history_steps",
        "turns_journal",
        "history_meta",
        "history_tombstones",
    }
)
STORE = FileKind("store", STORE_APPLICATION_ID, _STORE_TABLES, "meta", "pick another MEMORY_SQLITE_PATH / --db")
QUEUE = FileKind(
    "queue",
    QUEUE_APPLICATION_ID,
    frozenset({"queue_messages", "queue_dedup", "queue_state"}),
    "queue_messages",
    "move it aside, or pick another store file (MEMORY_SQLITE_PATH / --db; its queue is <store file>.queue)",
)
_KINDS = {kind.application_id: kind for kind in (STORE, QUEUE)}
#: The tables a file that holds only decision history has (history kept in a file of its own).
_HISTORY_TABLES = frozenset({"history_entries", "history_steps", "turns_journal", "history_meta", "history_tombstones"})


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(r[0]) for r in rows if not str(r[0]).startswith("sqlite_")}


def _listed(names: set[str]) -> str:
    ordered = sorted(names)
    return ", ".join(ordered[:5]) + (", ..." if len(ordered) > 5 else "")


def _unmarked_problem(conn: sqlite3.Connection, path: str, kind: FileKind, tables: set[str]) -> str | None:
    """Why a file without an application id is not an older file of ``kind`` (``None``: it is one)."""
    if not tables and (path == ":memory:" or path.startswith("file:")):
        return None  # a new in-memory database (or one named by a URI: made by its caller)
    if not tables:
        return (
            "it is an SQLite database without tables, which memory-core never leaves: "
            "another program's new database?"
        )
    foreign = tables - kind.tables
    if foreign:
        return f"it holds other tables: {_listed(foreign)}"
    if kind is STORE and tables <= _HISTORY_TABLES:
        return None  # decision history kept in a file of its own
    if kind.defines not in tables:
        return f"it has no {kind.defines} table"
    if kind is STORE and conn.execute("SELECT 1 FROM meta WHERE key = 'schema_version'").fetchone() is None:
        return "it holds a meta table without a schema version"
    user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if user_version:
        return f"its SQLite user_version is {user_version}, which memory-core never sets"
    return None


def check_owner(conn: sqlite3.Connection, path: str, kind: FileKind) -> None:
    """Refuse, by reading only, a file that is not a memory-core file of ``kind``.

    Args:
        conn: A connection to the file, before anything was written through it.
        path: The file, for the message.
        kind: :data:`STORE` or :data:`QUEUE`.

    Raises:
        ConflictError: One line naming the file and what is wrong with it.
    """
    try:
        application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        tables = _tables(conn)
        problem = None if application_id else _unmarked_problem(conn, path, kind, tables)
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        raise ConflictError(
            f"{path} is not a readable SQLite database ({exc}): it is damaged or not a memory-core {kind.what}; "
            f"restore it from a backup, or {kind.remedy}"
        ) from None
    if application_id == kind.application_id or (not application_id and problem is None):
        return
    other = _KINDS.get(application_id)
    if other is not None:
        raise ConflictError(
            f"{path} is a memory-core {other.what}, not a {kind.what}; it was left untouched: {kind.remedy}"
        )
    if application_id:
        problem = f"its SQLite application id is {application_id:#x}"
    raise ConflictError(
        f"{path} is not a memory-core {kind.what} ({problem}); it was left untouched: "
        f"{kind.remedy}"
    )


def is_marked(conn: sqlite3.Connection, kind: FileKind) -> bool:
    """Whether the file is marked as ``kind`` (its ``PRAGMA application_id``)."""
    return int(conn.execute("PRAGMA application_id").fetchone()[0]) == kind.application_id


def stamp(conn: sqlite3.Connection, kind: FileKind) -> None:
    """Mark a file as ``kind`` (inside the caller's write transaction; nothing is written if it is)."""
    if not is_marked(conn, kind):
        conn.execute(f"PRAGMA application_id = {kind.application_id}")


def make_tables(conn: sqlite3.Connection, kind: FileKind, schema: str) -> None:
    """``schema`` (``CREATE ... IF NOT EXISTS`` statements) and ``kind``'s mark, in one transaction."""
    mark = "" if is_marked(conn, kind) else f"PRAGMA application_id = {kind.application_id};"
    try:
        conn.executescript(f"BEGIN; {mark} {schema} COMMIT;")
    except BaseException:
        rollback(conn)
        raise


def new_database(path: str, kind: FileKind, schema: str) -> None:
    """Make a new ``kind`` file at ``path`` holding ``schema`` (a ``build`` of :func:`create_whole`)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        make_tables(conn, kind, schema)
    finally:
        conn.close()


#: Files SQLite may keep beside a database.
_SIDE_FILES = ("-wal", "-shm", "-journal")


def create_whole(path: str, build: Callable[[str], None]) -> None:
    """Make a new database file at ``path`` complete or not at all.

    ``build`` makes the file at the temporary path it is given (tables, application id) and closes
    it; the result is then linked to ``path`` (0600). When another process made ``path`` meanwhile,
    its file is kept and this one dropped. A crash leaves at most a ``.new`` file beside ``path``.

    Args:
        path: The file to make (its folder exists; the file does not).
        build: Makes and closes the database at the path it is given.
    """
    temporary = f"{path}.{os.getpid()}-{secrets.token_hex(4)}.new"
    try:
        build(temporary)
        if os.name == "posix":
            os.chmod(temporary, 0o600)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it first: that one is used
        except OSError:  # a file system without hard links
            if not os.path.exists(path):
                os.replace(temporary, path)
    finally:
        for name in (temporary, *(temporary + side for side in _SIDE_FILES)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(name)
