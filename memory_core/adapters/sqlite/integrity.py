"""The integrity check of an embedded file when it is opened, bounded in time.

SQLite reports damage inside a page only when a statement reads that page, so a store with one bad
page opens and answers until a search, a listing or a turn touches it. Opening a store, its history
or its queue therefore runs ``PRAGMA quick_check`` on a read-only connection of its own
(:func:`check_integrity`), interrupted after a budget (``MEMORY_SQLITE_CHECK_SECONDS``) so a very
large file is never waited on forever: it is then reported *not checked in time* and opened as usual
(``memory-core doctor`` checks it fully). The result is an :class:`Integrity`:

- ``ok``: no problem found;
- ``damaged``: SQLite found problems (the store and history then refuse every write with a
  :class:`~memory_core.errors.DamagedFileError`; ``memory-core serve``'s health says so);
- ``unchecked``: not checked (over the budget, busy, checks turned off, or an in-memory database).

A write that SQLite fails with ``SQLITE_CORRUPT`` or ``SQLITE_NOTADB`` (:func:`is_corrupt`) marks the
file damaged as well.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "DEFAULT_CHECK_SECONDS",
    "FileState",
    "Integrity",
    "check_integrity",
    "damaged",
    "is_corrupt",
    "unchecked",
]

#: How long the check at open may take by default.
DEFAULT_CHECK_SECONDS = 5.0
#: SQLite's primary result codes for a damaged file.
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_CORRUPT_TEXT = ("database disk image is malformed", "file is not a database")
#: Problems kept from the check's answer (SQLite lists up to 100).
_KEPT = 3


@dataclass(frozen=True, slots=True)
class Integrity:
    """What the check of one file found.

    Attributes:
        state: ``ok``, ``damaged`` or ``unchecked``.
        found: One line: the first problems, or why it was not checked.
        seconds: How long the check took.
    """

    state: Literal["ok", "damaged", "unchecked"]
    found: str = ""
    seconds: float = 0.0

    @property
    def damaged(self) -> bool:
        return self.state == "damaged"


class FileState:
    """The integrity of one file as this process knows it, shared by every adapter on that file (the
    store and its history) and whoever watches it (``serve``'s health): recorded by the check at open,
    marked damaged by a write SQLite fails so.

    Attributes:
        integrity: The latest finding.
        checked: Whether the file was checked (or found damaged) in this process.
    """

    def __init__(self) -> None:
        self.integrity: Integrity = Integrity("unchecked", "not checked yet")
        self.checked = False

    @property
    def damaged(self) -> bool:
        return self.integrity.damaged

    def record(self, integrity: Integrity) -> None:
        """Keep what a check found."""
        self.integrity = integrity
        self.checked = True

    def mark_damaged(self, found: str) -> None:
        """A statement found the file damaged: from now on it takes no writes."""
        self.record(damaged(found))


def unchecked(why: str) -> Integrity:
    """A file that was not checked, and why."""
    return Integrity("unchecked", why)


def damaged(found: str) -> Integrity:
    """A file found damaged (by a failed statement rather than by the check)."""
    return Integrity("damaged", found)


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the file is damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _CORRUPT_CODES:
        return True
    return any(text in str(exc) for text in _CORRUPT_TEXT)


def check_integrity(path: str, budget_seconds: float) -> Integrity:
    """``PRAGMA quick_check`` of ``path`` on a read-only connection, interrupted after ``budget_seconds``.

    Args:
        path: The file (``":memory:"``, a ``file:`` URI or a missing file: not checked).
        budget_seconds: The longest the check may take (0: no check).
    """
    if budget_seconds <= 0:
        return unchecked("not checked (MEMORY_SQLITE_CHECK_SECONDS is 0)")
    if path == ":memory:" or path.startswith("file:") or not Path(path).is_file():
        return unchecked("not checked (no file)")
    started = time.monotonic()
    conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    guard = threading.Lock()
    open_ = [True]

    def interrupt() -> None:
        with guard:
            if open_[0]:
                conn.interrupt()

    timer = threading.Timer(budget_seconds, interrupt)
    timer.daemon = True
    try:
        conn.execute("PRAGMA busy_timeout = 1000")
        timer.start()
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.OperationalError as exc:
        if "interrupt" in str(exc):
            return unchecked(
                f"not checked in time (over {budget_seconds:g}s; MEMORY_SQLITE_CHECK_SECONDS): "
                "run `memory-core doctor` to check it"
            )
        if not is_corrupt(exc):
            return unchecked(f"not checked ({exc})")  # locked or busy: another process holds it
        problems = [str(exc)]
    except sqlite3.DatabaseError as exc:
        problems = [str(exc)]
    finally:
        timer.cancel()
        with guard:
            open_[0] = False
            conn.close()
    seconds = round(time.monotonic() - started, 3)
    if problems == ["ok"]:
        return Integrity("ok", "quick_check: ok", seconds)
    quoted = "; ".join(problems[:_KEPT]) + ("; ..." if len(problems) > _KEPT else "")
    return Integrity("damaged", f"quick_check found {len(problems)} problem(s): {quoted}", seconds)
