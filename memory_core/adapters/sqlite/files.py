"""What the embedded SQLite files (store, history, queue) share about opening and failing.

- **An empty file is refused.** A missing file means a new store (or queue) and is created; a file
  that exists but holds 0 bytes where one is expected was truncated (a crash, a failed copy, a full
  disk during a restore) and is refused with a one-line message, instead of silently starting empty
  over it (:func:`refuse_empty_file`).
- **A rollback never hides the error that caused it.** When a statement fails with
  ``SQLITE_FULL``, ``SQLITE_IOERR``, ``SQLITE_BUSY`` or ``SQLITE_NOMEM``, SQLite may already have
  rolled the transaction back; a plain ``ROLLBACK`` then raises "cannot rollback - no transaction is
  active", which would replace the real error. :func:`rollback` rolls back only what is still open,
  and never raises over the caller's error.
- **Only their owner reads them.** A new folder is made 0700 and a new file, with its ``-wal`` and
  ``-shm``, is made 0600 (:func:`make_folder`, :func:`keep_private`); an existing file that others
  can read is left as it is, with a warning that says how to close it.
- **Purged text leaves the file.** ``secure_delete`` zeroes a deleted row where it lies, but SQLite
  leaves copies of rows it moved while rebalancing pages in the free space of the pages they left;
  after a purge :func:`truncate_wal` with ``rebuild`` rewrites the file (``VACUUM``), so only the rows
  that remain are anywhere in it, then truncates the write-ahead log.
- **Disk full is named.** SQLite's "database or disk is full" becomes a
  :class:`~memory_core.errors.StorageFullError` (transient: a queued turn is delivered again once
  space returns) naming the file (:func:`disk_full_error`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from pathlib import Path

from memory_core.errors import ConflictError, InputError, StorageFullError

__all__ = [
    "check_store_folder",
    "disk_full_error",
    "empty_file_message",
    "is_disk_full",
    "keep_private",
    "make_folder",
    "refuse_empty_file",
    "rollback",
    "truncate_wal",
]

logger = logging.getLogger(__name__)

#: SQLite's primary result code for "database or disk is full".
SQLITE_FULL = 13
_FULL_TEXT = "database or disk is full"


def check_store_folder(path: str, given_as: str) -> None:
    """Refuse a store path the caller named whose folder does not exist (a mistyped path never creates
    folders, nor an empty store somewhere unexpected); the command line and the Python API both call it.

    Args:
        path: The store file.
        given_as: How the caller named it (``--db``, ``path``), for the message.

    Raises:
        InputError: ``path`` is a directory, or its folder does not exist.
    """
    if Path(path).is_dir():
        raise InputError(f"{path} is a directory, not a store file (check {given_as} or MEMORY_SQLITE_PATH)")
    folder = Path(path).parent
    if not folder.is_dir():
        raise InputError(
            f"{given_as} {path}: the directory {folder} does not exist; create it first (a store is created "
            "only in an existing directory)"
        )


def empty_file_message(path: str, what: str) -> str:
    """The one-line explanation for an empty file where a ``what`` (``store``, ``queue``) was expected."""
    return (
        f"{path} is empty (0 bytes) but should be a memory-core {what}: it was probably truncated by a crash "
        f"or a failed copy; restore it from a backup, or delete it to start with an empty {what}"
    )


#: Files SQLite keeps beside a database in WAL mode.
_SIDE_FILES = ("-wal", "-shm")


def _a_file(path: str) -> bool:
    """Whether ``path`` names a file (not ``":memory:"`` or a ``file:`` URI, which are not checked)."""
    return path != ":memory:" and not path.startswith("file:")


def make_folder(path: str) -> bool:
    """Make the folder of ``path`` if it is missing (0700: its owner only); return whether the file
    ``path`` exists already (call before connecting, and pass the answer to :func:`keep_private`)."""
    if not _a_file(path):
        return True
    folder = Path(path).parent
    if not folder.exists():
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.name == "posix":
            os.chmod(folder, 0o700)  # (the mode passed to mkdir is masked by the umask)
    return os.path.exists(path)


def keep_private(path: str, existed: bool, what: str) -> None:
    """After the first write to ``path``: a file this process created, and its ``-wal`` and ``-shm``,
    are made 0600 (SQLite makes a side file with its database's mode); an existing one that others can
    read is warned about (named, with the command that closes it), not changed.

    Args:
        path: The database file.
        existed: What :func:`make_folder` answered before connecting.
        what: What it is, for the warning: ``store``, ``history`` or ``queue``.
    """
    if not _a_file(path) or os.name != "posix":
        return
    if existed:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            return
        if mode & 0o077:
            logger.warning(
                "the %s %s can be read by other users of this machine (mode %o): chmod 600 %s", what, path,
                mode, path,
            )
        return
    for name in (path, *(path + side for side in _SIDE_FILES)):
        try:
            os.chmod(name, 0o600)
        except FileNotFoundError:
            continue


def refuse_empty_file(path: str, what: str) -> None:
    """Refuse to open a file that exists but holds 0 bytes (call before connecting: SQLite itself
    leaves a new file empty until its first write, so afterwards the two cannot be told apart).

    Args:
        path: The file (``":memory:"`` and ``file:`` URIs are not checked).
        what: What it should be, for the message: ``store`` or ``queue``.

    Raises:
        ConflictError: The file exists and is empty.
    """
    if not _a_file(path):
        return
    try:
        size = os.stat(path).st_size
    except OSError:  # missing (a new file) or unreadable (SQLite says why when it opens it)
        return
    if size == 0 and os.path.isfile(path):
        raise ConflictError(empty_file_message(path, what))


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the connection's transaction if SQLite has not already done so; never raises.

    Call it while handling the error that ended the transaction, then re-raise that error: a failed
    ``ROLLBACK`` is logged, never raised over it.
    """
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        logger.warning("rolling back after an error failed too: %s: %s", type(exc).__name__, exc)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database or disk is full" (``SQLITE_FULL``)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == SQLITE_FULL:
        return True
    return _FULL_TEXT in str(exc)


def disk_full_error(exc: BaseException, path: str) -> StorageFullError | None:
    """The :class:`StorageFullError` to raise (``from exc``) for a disk-full ``exc``, else ``None``."""
    return StorageFullError(path) if is_disk_full(exc) else None


def truncate_wal(conn: sqlite3.Connection, path: str, *, rebuild: bool = False) -> bool:
    """Copy ``conn``'s write-ahead log into the database file and truncate it (``wal_checkpoint(TRUNCATE)``),
    so text deleted with ``secure_delete`` on leaves the disk. Call it holding the adapter's lock,
    outside a transaction.

    Args:
        conn: A connection to the file.
        path: The file (``":memory:"``: nothing to do).
        rebuild: First rewrite the whole file (``VACUUM``, under the file's write lock, waiting for
            another connection's write like any write), so no free space of a page keeps a copy of a
            deleted row that SQLite moved while rebalancing pages (``secure_delete`` zeroes a row only
            where it lies when deleted). If it cannot (a full disk: it needs room for a copy of the
            file), the log is still truncated and a warning says so.

    Returns:
        ``False`` when another connection's open read kept part of the log (it leaves at the next
        checkpoint) or the file could not be rebuilt; ``True`` otherwise, and always for an
        in-memory database.
    """
    if path == ":memory:":
        return True
    rebuilt = True
    if rebuild:
        try:
            conn.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            rebuilt = False
            logger.warning(
                "could not rewrite %s after a purge (%s): the deleted rows are zeroed, but copies that "
                "pages kept in their free space stay until the file is rewritten (the next purge, or "
                "sqlite3 %s VACUUM)",
                path,
                exc,
                path,
            )
    busy = int(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
    return busy == 0 and rebuilt
