"""``memory-core doctor``: check an embedded store, its history and its queue, read-only.

Each check gives ``ok``, ``warn`` (works, but look at it) or ``fail`` (serve or the CLI will refuse it,
or data is damaged), with one line saying why and the numbers behind it:

- ``store.file`` / ``queue.file``: the file exists and is not empty (a missing store is a failure,
  never created here; a missing queue only means nothing is queued; a 0-byte file is refused at start,
  see :func:`memory_core.adapters.sqlite.files.refuse_empty_file`);
- ``store.integrity`` / ``queue.integrity``: SQLite's ``PRAGMA integrity_check`` (``quick_check`` for
  files above :data:`QUICK_CHECK_ABOVE_BYTES` unless ``full``);
- ``store.format``: a memory-core store (:func:`~memory_core.adapters.sqlite.schema.check_file`: its
  application id, no foreign tables, not written by a newer version) and its schema version against
  :data:`~memory_core.adapters.sqlite.schema.SCHEMA_VERSION` (older: upgraded when next opened);
- ``store.analyzer``: the text analyzer the index terms were made with (another one: re-indexed when
  next opened);
- ``store.embedder``: the embedder the settings build (name, dimensions) against the one recorded in
  the store and the sizes of the stored vectors;
- ``store.memories`` / ``store.history``: memories by status and kind, scopes, history entries and
  journaled turns;
- ``queue.format`` / ``queue.messages``: a memory-core queue (:func:`~memory_core.adapters.sqlite.ownership.check_owner`:
  its application id, or, for an older file, only queue tables); messages waiting, locked, dead-lettered,
  sessions and the oldest message's age (dead letters warn);
- ``store.wal`` / ``queue.wal``: the size of the write-ahead log beside each file; ``disk``: free space
  on the disk holding the store (a full disk stops every write).

Files are opened read-only (SQLite may create its empty ``-wal``/``-shm`` side files); nothing is
written, migrated or created.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memory_core.adapters.sqlite.files import empty_file_message
from memory_core.adapters.sqlite.ownership import QUEUE, check_owner, is_marked
from memory_core.adapters.sqlite.queue import default_queue_path
from memory_core.adapters.sqlite.schema import SCHEMA_VERSION, check_file
from memory_core.config import Settings
from memory_core.errors import MemoryCoreError
from memory_core.language.text import ANALYZER_VERSION

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "FREE_SPACE_WARN_BYTES",
    "QUICK_CHECK_ABOVE_BYTES",
    "WAL_WARN_BYTES",
    "Check",
    "CheckStatus",
    "DoctorReport",
    "EmbedderIdentity",
    "check_disk",
    "check_queue",
    "check_store",
    "configured_embedder",
    "diagnose",
]

#: What a check found: ``ok``, ``warn`` (works, but look at it) or ``fail``.
CheckStatus = Literal["ok", "warn", "fail"]
_RANK: dict[CheckStatus, int] = {"ok": 0, "warn": 1, "fail": 2}

#: Files larger than this get ``PRAGMA quick_check`` instead of the full ``integrity_check`` (unless
#: asked for the full one): quick_check skips the index-to-table cross-check, the slow part.
QUICK_CHECK_ABOVE_BYTES = 128 * 1024 * 1024
#: A write-ahead log larger than this is worth a warning (a reader keeps it from being checkpointed).
WAL_WARN_BYTES = 64 * 1024 * 1024
#: Less free space than this on the store's disk is worth a warning.
FREE_SPACE_WARN_BYTES = 256 * 1024 * 1024
#: How long a read waits for another process's lock before the check gives up with a warning.
BUSY_TIMEOUT_SECONDS = 2.0
#: Integrity problems quoted in a check's message (all are in its facts, up to SQLite's 100).
_QUOTED_PROBLEMS = 3


@dataclass(frozen=True, slots=True)
class Check:
    """One finding.

    Attributes:
        name: What was checked (``store.integrity``, ``queue.messages``, ...).
        status: ``ok``, ``warn`` or ``fail``.
        message: One line saying what was found and, when not ok, what to do.
        facts: The numbers behind it (counts, sizes, versions), for ``--json``.
    """

    name: str
    status: CheckStatus
    message: str
    facts: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message, "facts": dict(self.facts)}


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Every check of one store and its queue.

    Attributes:
        store: The store file checked.
        queue: The queue file checked.
        checks: The findings, in the order they were made.
    """

    store: str
    queue: str
    checks: tuple[Check, ...]

    @property
    def status(self) -> CheckStatus:
        """The worst status of any check."""
        worst: CheckStatus = "ok"
        for check in self.checks:
            if _RANK[check.status] > _RANK[worst]:
                worst = check.status
        return worst

    @property
    def failed(self) -> bool:
        """Whether any check failed (``memory-core doctor`` then exits non-zero)."""
        return self.status == "fail"

    def check(self, name: str) -> Check:
        """The check called ``name``.

        Raises:
            KeyError: No check has that name.
        """
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "store": self.store,
            "queue": self.queue,
            "checks": [c.as_dict() for c in self.checks],
        }

    def lines(self) -> list[str]:
        """One line per check, then a summary line."""
        width = max((len(c.name) for c in self.checks), default=0)
        lines = [f"{c.status:<4}  {c.name:<{width}}  {c.message}" for c in self.checks]
        counts = {s: sum(1 for c in self.checks if c.status == s) for s in ("warn", "fail")}
        lines.append(
            f"doctor: {self.status} ({len(self.checks)} checks, {counts['warn']} warning(s), "
            f"{counts['fail']} failure(s))"
        )
        return lines


@dataclass(frozen=True, slots=True)
class EmbedderIdentity:
    """The embedder the settings build, or why it could not be built.

    Attributes:
        setting: ``MEMORY_EMBEDDER``.
        name: The embedder's name (recorded in a store on first use).
        dimensions: The size of its vectors.
        error: Why it could not be built (then ``name`` and ``dimensions`` are ``None``).
    """

    setting: str
    name: str | None = None
    dimensions: int | None = None
    error: str | None = None


# -- helpers --------------------------------------------------------------------------------------
def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"  # pragma: no cover - the loop always returns


def _open_read_only(path: str) -> sqlite3.Connection:
    """A read-only connection (SQLite never creates the database through it)."""
    uri = Path(path).absolute().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    return conn


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(r[0]) for r in rows if not str(r[0]).startswith("sqlite_")}


def _guarded(name: str, run: Callable[[], Check]) -> Check:
    """Run one check; a file SQLite cannot read (or a refusal) is that check's failure, a file another
    process keeps locked a warning (the facts carry ``error``: the checks after it are skipped)."""
    try:
        return run()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return Check(
                name,
                "warn",
                f"could not read it: {exc} (another process holds it; try again)",
                {"error": str(exc)},
            )
        return Check(name, "fail", f"cannot read it: {exc}", {"error": str(exc)})
    except sqlite3.DatabaseError as exc:
        return Check(
            name, "fail", f"cannot read it: {exc} (damaged? restore it from a backup)", {"error": str(exc)}
        )
    except MemoryCoreError as exc:
        return Check(name, "fail", str(exc), {"error": str(exc)})


def _file_check(name: str, path: str, what: str, *, missing: Check) -> Check:
    """The file exists, is a regular file and is not empty."""
    if path == ":memory:":
        return Check(name, "fail", "an in-memory database (:memory:) has nothing on disk to check")
    target = Path(path)
    if not target.exists():
        return missing
    if not target.is_file():
        return Check(name, "fail", f"{path} is not a regular file")
    size = target.stat().st_size
    if size == 0:
        return Check(name, "fail", empty_file_message(path, what), {"bytes": 0})
    return Check(name, "ok", f"{path} ({_size(size)})", {"bytes": size})


def _integrity(name: str, conn: sqlite3.Connection, path: str, *, full: bool) -> Check:
    size = Path(path).stat().st_size
    pragma = "integrity_check" if full or size <= QUICK_CHECK_ABOVE_BYTES else "quick_check"
    started = time.monotonic()
    problems = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}").fetchall()]
    facts = {"pragma": pragma, "seconds": round(time.monotonic() - started, 3)}
    if problems == ["ok"]:
        note = "" if pragma == "integrity_check" else " (a large file: --full runs integrity_check)"
        return Check(name, "ok", f"{pragma}: ok{note}", facts)
    quoted = "; ".join(problems[:_QUOTED_PROBLEMS]) + ("; ..." if len(problems) > _QUOTED_PROBLEMS else "")
    return Check(
        name,
        "fail",
        f"{pragma} found {len(problems)} problem(s): {quoted}; the file is damaged: restore it from a backup",
        {**facts, "problems": problems},
    )


def _wal_check(name: str, path: str) -> Check:
    wal = Path(f"{path}-wal")
    size = wal.stat().st_size if wal.is_file() else 0
    facts = {"bytes": size}
    if size > WAL_WARN_BYTES:
        return Check(
            name,
            "warn",
            f"the write-ahead log is {_size(size)}: a long-lived reader keeps it from being checkpointed; "
            "it is folded back and truncated when the last connection closes",
            facts,
        )
    return Check(name, "ok", f"write-ahead log {_size(size)}", facts)


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    if "meta" not in _tables(conn):
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _counts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    return {str(key): int(count) for key, count in rows}


# -- the store ------------------------------------------------------------------------------------
def _store_format(conn: sqlite3.Connection, path: str) -> Check:
    check_file(conn, path)  # another program's database, or a newer memory-core's: ConflictError
    tables = _tables(conn)
    version = _meta(conn, "schema_version")
    facts = {
        "schema_version": None if version is None else int(version),
        "code_schema_version": SCHEMA_VERSION,
    }
    if version is None:
        if "memories" in tables:
            return Check(
                "store.format",
                "fail",
                f"{path} holds a memories table but no schema version: it is not a memory-core store",
                facts,
            )
        return Check(
            "store.format", "warn", "no memory-core tables yet (they are made when it is next opened)", facts
        )
    if int(version) < SCHEMA_VERSION:
        return Check(
            "store.format",
            "warn",
            f"schema {version}: this memory-core upgrades it to {SCHEMA_VERSION} in place when it next "
            "opens it (take a backup first if you may go back to the older version)",
            facts,
        )
    return Check("store.format", "ok", f"a memory-core store, schema {version}", facts)


def _store_analyzer(conn: sqlite3.Connection) -> Check:
    analyzer = _meta(conn, "analyzer")
    facts = {"analyzer": analyzer, "code_analyzer": ANALYZER_VERSION}
    if analyzer == ANALYZER_VERSION:
        return Check("store.analyzer", "ok", f"analyzer {analyzer}", facts)
    found = "none recorded" if analyzer is None else f"analyzer {analyzer}"
    return Check(
        "store.analyzer",
        "warn",
        f"{found}; this memory-core re-indexes the store with analyzer {ANALYZER_VERSION} "
        "when it next opens it",
        facts,
    )


def _vector_sizes(conn: sqlite3.Connection) -> tuple[dict[int, int], int]:
    """How many stored vectors have each size (in dimensions), and how many memories have none."""
    sizes: dict[int, int] = {}
    without = 0
    if "memories" in _tables(conn):
        for length, count in conn.execute(
            "SELECT length(embedding), COUNT(*) FROM memories GROUP BY length(embedding)"
        ).fetchall():
            if length is None:
                without += int(count)
            else:
                sizes[int(length) // 4] = int(count)  # float32
    return sizes, without


def _stored_problems(recorded_dims: str | None, sizes: Mapping[int, int]) -> list[str]:
    """What is wrong with the stored vectors themselves."""
    problems: list[str] = []
    if len(sizes) > 1:
        listed = ", ".join(f"{n} of {d}" for d, n in sorted(sizes.items()))
        problems.append(f"vectors of several sizes ({listed}): search compares only one size")
    if recorded_dims is not None and sizes and set(sizes) != {int(recorded_dims)}:
        problems.append(f"the store records {recorded_dims} dimensions but holds vectors of {sorted(sizes)}")
    return problems


def _configured_problems(
    recorded: str | None, recorded_dims: str | None, sizes: Mapping[int, int], embedder: EmbedderIdentity
) -> list[str]:
    """Why the settings' embedder does not fit the store (or cannot be built)."""
    if embedder.error is not None:
        return [f"the settings' embedder (MEMORY_EMBEDDER={embedder.setting}) cannot be built: {embedder.error}"]
    problems: list[str] = []
    if recorded is not None and recorded != embedder.name:
        problems.append(
            f"the store was built with the embedder {recorded!r}, the settings build {embedder.name!r} "
            f"(MEMORY_EMBEDDER={embedder.setting}): serve and the CLI refuse it; use the same embedder"
        )
    if recorded_dims is not None:
        stored: int | None = int(recorded_dims)
    else:
        stored = next(iter(sizes)) if len(sizes) == 1 else None
    if stored is not None and embedder.dimensions != stored:
        problems.append(
            f"stored vectors have {stored} dimensions, the settings' embedder makes {embedder.dimensions}"
        )
    return problems


def _store_embedder(conn: sqlite3.Connection, embedder: EmbedderIdentity | None) -> Check:
    name = "store.embedder"
    recorded = _meta(conn, "embedder")
    recorded_dims = _meta(conn, "embedding_dimensions")
    sizes, without = _vector_sizes(conn)
    facts: dict[str, Any] = {
        "recorded": recorded,
        "recorded_dimensions": None if recorded_dims is None else int(recorded_dims),
        "vector_dimensions": {str(k): v for k, v in sorted(sizes.items())},
        "memories_without_vector": without,
    }
    if embedder is not None:
        facts.update(
            setting=embedder.setting, configured=embedder.name, configured_dimensions=embedder.dimensions
        )
    problems = _stored_problems(recorded_dims, sizes)
    if embedder is not None:
        problems.extend(_configured_problems(recorded, recorded_dims, sizes, embedder))
    if problems:
        return Check(name, "fail", "; ".join(problems), facts)
    stored_text = (
        ", ".join(f"{n} vector(s) of {d} dimensions" for d, n in sorted(sizes.items())) or "no vectors yet"
    )
    who = f"{recorded!r}" if recorded is not None else "no embedder recorded yet"
    configured = "" if embedder is None else f"; the settings build {embedder.name!r} ({embedder.dimensions})"
    return Check(name, "ok", f"{who}: {stored_text}{configured}", facts)


def _store_memories(conn: sqlite3.Connection) -> Check:
    if "memories" not in _tables(conn):
        return Check("store.memories", "ok", "no memories yet", {"memories": 0})
    by_status = _counts(conn.execute("SELECT status, COUNT(*) FROM memories GROUP BY status").fetchall())
    by_kind = _counts(conn.execute("SELECT kind, COUNT(*) FROM memories GROUP BY kind").fetchall())
    scopes = int(
        conn.execute("SELECT COUNT(*) FROM (SELECT DISTINCT user_id, agent_id FROM memories)").fetchone()[0]
    )
    total = sum(by_status.values())
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())) or "none"
    return Check(
        "store.memories",
        "ok",
        f"{total} memories ({statuses}) in {scopes} scope(s)",
        {"memories": total, "by_status": by_status, "by_kind": by_kind, "scopes": scopes},
    )


def _store_history(conn: sqlite3.Connection) -> Check:
    tables = _tables(conn)
    if "history_entries" not in tables:
        return Check("store.history", "ok", "no history yet", {"entries": 0, "turns": 0})
    entries = int(conn.execute("SELECT COUNT(*) FROM history_entries").fetchone()[0])
    turns = unfinished = 0
    if "turns_journal" in tables:
        turns, unfinished = (
            int(v or 0)
            for v in conn.execute("SELECT COUNT(*), SUM(processed_at IS NULL) FROM turns_journal").fetchone()
        )
    facts = {"entries": entries, "turns": turns, "turns_unfinished": unfinished}
    note = (
        f"; {unfinished} begun but not finished (finished when their message is delivered again)"
        if unfinished
        else ""
    )
    return Check("store.history", "ok", f"{entries} history entries, {turns} journaled turn(s){note}", facts)


#: Checks of a file's contents: they append to the list and say whether the checks after them (the
#: write-ahead log's) are made.
_Contents = Callable[[sqlite3.Connection, list[Check]], bool]


def _read_file(kind: str, path: str, first: Check, *, full: bool, contents: _Contents) -> list[Check]:
    """``first`` (the file's check), then, when the file opens read-only: its integrity, the checks of
    its ``contents`` and of its write-ahead log (``kind`` is ``store`` or ``queue``)."""
    checks = [first]
    try:
        conn = _open_read_only(path)
    except sqlite3.Error as exc:
        return [*checks, Check(f"{kind}.integrity", "fail", f"cannot open {path} read-only: {exc}")]
    try:
        name = f"{kind}.integrity"
        integrity = _guarded(name, lambda: _integrity(name, conn, path, full=full))
        checks.append(integrity)
        if "error" in integrity.facts:  # not even readable: nothing more to learn
            return checks
        if not contents(conn, checks):
            return checks
    finally:
        conn.close()
    checks.append(_wal_check(f"{kind}.wal", path))
    return checks


def _store_contents(
    conn: sqlite3.Connection, checks: list[Check], path: str, embedder: EmbedderIdentity | None
) -> bool:
    checks.append(_guarded("store.format", lambda: _store_format(conn, path)))
    if "error" in checks[-1].facts:  # not ours, or a newer version's: its tables mean something else
        return False
    checks.append(_guarded("store.analyzer", lambda: _store_analyzer(conn)))
    checks.append(_guarded("store.embedder", lambda: _store_embedder(conn, embedder)))
    checks.append(_guarded("store.memories", lambda: _store_memories(conn)))
    checks.append(_guarded("store.history", lambda: _store_history(conn)))
    return True


def check_store(path: str, *, full: bool = False, embedder: EmbedderIdentity | None = None) -> list[Check]:
    """Check a store file (and the history in it), read-only.

    Args:
        path: The store file.
        full: Run the full ``integrity_check`` even on a large file.
        embedder: The embedder the settings build (``None``: its name and size are not compared).

    Returns:
        ``store.file``, then (when it can be read) integrity, format, analyzer, embedder, memories,
        history and WAL checks.
    """
    missing = Check(
        "store.file",
        "fail",
        f"{path} does not exist (doctor never creates a store): check --db or MEMORY_SQLITE_PATH",
    )
    first = _file_check("store.file", path, "store", missing=missing)
    if first.status == "fail":
        return [first]
    return _read_file(
        "store",
        path,
        first,
        full=full,
        contents=lambda conn, checks: _store_contents(conn, checks, path, embedder),
    )


# -- the queue ------------------------------------------------------------------------------------
def _queue_messages(conn: sqlite3.Connection, queue: str, now: float) -> Check:
    name = "queue.messages"
    row = conn.execute(
        "SELECT COALESCE(SUM(state = 'active'), 0), "
        "COALESCE(SUM(state = 'active' AND locked_until IS NOT NULL AND locked_until > ?), 0), "
        "COALESCE(SUM(state = 'dead'), 0), "
        "COUNT(DISTINCT CASE WHEN state = 'active' THEN session_id END), "
        "MIN(CASE WHEN state = 'active' THEN enqueued_at END) "
        "FROM queue_messages WHERE queue = ?",
        (now, queue),
    ).fetchone()
    active, locked, dead, sessions = (int(v) for v in row[:4])
    oldest = None if row[4] is None else round(max(0.0, now - float(row[4])), 3)
    others = _counts(
        conn.execute(
            "SELECT queue, COUNT(*) FROM queue_messages WHERE queue != ? GROUP BY queue", (queue,)
        ).fetchall()
    )
    facts: dict[str, Any] = {
        "queue": queue,
        "active": active,
        "locked": locked,
        "dead_letters": dead,
        "sessions": sessions,
        "oldest_age_seconds": oldest,
        "other_queues": others,
    }
    age = "" if oldest is None else f", the oldest waiting {oldest:.0f}s"
    text = f"{queue}: {active} waiting ({locked} locked) in {sessions} session(s){age}; {dead} dead-lettered"
    if dead:
        return Check(
            name,
            "warn",
            f"{text}: see `memory-core queue dead-letters`, then requeue or purge them",
            facts,
        )
    return Check(name, "ok", text, facts)


def _queue_format(conn: sqlite3.Connection, path: str) -> Check:
    check_owner(conn, path, QUEUE)  # another program's file (even one whose tables were added): ConflictError
    marked = is_marked(conn, QUEUE)
    note = "" if marked else " (written before queue files were marked; marked when it is next opened)"
    return Check("queue.format", "ok", f"a memory-core queue{note}", {"marked": marked})


def _queue_contents(
    conn: sqlite3.Connection, checks: list[Check], path: str, queue: str, now: float | None
) -> bool:
    checks.append(_guarded("queue.format", lambda: _queue_format(conn, path)))
    if "error" in checks[-1].facts:  # not ours: its tables mean something else
        return False
    stamp = time.time() if now is None else now
    checks.append(_guarded("queue.messages", lambda: _queue_messages(conn, queue, stamp)))
    return True


def check_queue(path: str, *, queue: str, full: bool = False, now: float | None = None) -> list[Check]:
    """Check a queue file, read-only.

    Args:
        path: The queue file (``<store file>.queue`` by default).
        queue: The queue inside it (``MEMORY_TURNS_QUEUE``).
        full: Run the full ``integrity_check`` even on a large file.
        now: Epoch seconds for message ages and expired locks (default: the wall clock).

    Returns:
        ``queue.file``, then (when it exists and can be read) integrity, format, messages and WAL checks.
    """
    missing = Check(
        "queue.file",
        "ok",
        f"{path} does not exist: nothing is queued (`memory-core serve` creates it)",
        {"bytes": None},
    )
    first = _file_check("queue.file", path, "queue", missing=missing)
    if first.status == "fail" or first is missing:
        return [first]
    return _read_file(
        "queue",
        path,
        first,
        full=full,
        contents=lambda conn, checks: _queue_contents(conn, checks, path, queue, now),
    )


def check_disk(path: str) -> Check:
    """Free space on the disk holding ``path`` (a full disk stops every write; see the operations doc)."""
    folder = Path(path).absolute().parent
    try:
        usage = shutil.disk_usage(folder)
    except OSError as exc:
        return Check("disk", "warn", f"cannot tell the free space of {folder}: {exc}")
    facts = {"free_bytes": usage.free, "total_bytes": usage.total}
    if usage.free < FREE_SPACE_WARN_BYTES:
        return Check(
            "disk",
            "warn",
            f"only {_size(usage.free)} free on the disk holding {path}: when it is full every write fails "
            "(turns wait in the queue and are retried once space is freed)",
            facts,
        )
    return Check("disk", "ok", f"{_size(usage.free)} free of {_size(usage.total)}", facts)


# -- everything -----------------------------------------------------------------------------------
async def configured_embedder(settings: Settings) -> EmbedderIdentity:
    """The name and size of the embedder the settings build (built, read and closed; no model loaded)."""
    from memory_core.bootstrap import build_embedder

    try:
        embedder = build_embedder(settings)
    except (MemoryCoreError, ImportError, ValueError) as exc:
        return EmbedderIdentity(settings.embedder, error=str(exc))
    try:
        return EmbedderIdentity(settings.embedder, embedder.name, int(embedder.dimensions))
    finally:
        await embedder.close()


async def diagnose(settings: Settings, *, full: bool = False, queue_path: str | None = None) -> DoctorReport:
    """Check the embedded store the settings name, its history and its queue.

    Args:
        settings: ``MEMORY_SQLITE_PATH`` (the store), ``MEMORY_EMBEDDER`` and ``MEMORY_TURNS_QUEUE``.
        full: Run the full ``integrity_check`` even on large files.
        queue_path: The queue file (default ``<store file>.queue``).

    Returns:
        The report; :attr:`DoctorReport.failed` says whether anything failed.
    """
    store = settings.sqlite_path
    queue = queue_path or default_queue_path(store)
    if settings.store != "sqlite":
        note = Check(
            "store",
            "warn",
            f"MEMORY_STORE={settings.store}: doctor checks the embedded SQLite files only; nothing to check",
        )
        return DoctorReport(store, queue, (note,))
    checks = check_store(store, full=full, embedder=await configured_embedder(settings))
    if os.path.exists(store):
        checks.append(check_disk(store))
    checks.extend(check_queue(queue, queue=settings.turns_queue, full=full))
    return DoctorReport(store, queue, tuple(checks))
