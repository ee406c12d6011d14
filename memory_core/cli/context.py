"""What a command works on: the settings, the store (refused when missing), the service and progress."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from memory_core.errors import InputError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.sqlite.queue import SQLiteQueue
    from memory_core.config import Settings
    from memory_core.service import MemoryService
    from memory_core.tools.progress import Progress

__all__ = [
    "check_new_store",
    "existing_queue_settings",
    "progress_for",
    "require_store",
    "service_for",
    "service_with_queue",
    "settings_for",
    "store_file",
]


def settings_for(args: argparse.Namespace) -> Settings:
    """The settings from the environment, with the store file ``--db`` names."""
    from memory_core.bootstrap import load_settings

    return load_settings(sqlite_path=args.db)


def store_file(settings: Settings) -> str | None:
    """The embedded store's file, or ``None`` where there is no file (Azure, ``:memory:``, a URI)."""
    path = settings.sqlite_path
    if settings.store == "azure_search" or path == ":memory:" or path.startswith("file:"):
        return None
    return path


def require_store(settings: Settings, *, or_queue: bool = False) -> None:
    """Refuse a missing store (a command that only reads or changes memories never creates one).

    Args:
        settings: Name the store.
        or_queue: Its queue file alone is enough (commands on the queue).

    Raises:
        PermanentError: The path is a directory.
        NotFoundError: Neither the store file (nor, with ``or_queue``, its queue) exists.
    """
    from memory_core.bootstrap import local_queue_path

    path = store_file(settings)
    if path is None:
        return
    if Path(path).is_dir():
        raise InputError(f"{path} is a directory, not a store file (check --db or MEMORY_SQLITE_PATH)")
    if Path(path).exists() or (or_queue and Path(local_queue_path(settings)).exists()):
        return
    raise NotFoundError(
        f"no store at {path}: nothing was stored there yet (check --db or MEMORY_SQLITE_PATH; "
        "import, ingest and serve create a store)"
    )


def check_new_store(args: argparse.Namespace, settings: Settings) -> None:
    """Before a command that creates the store: a ``--db`` given on the command line must name a file
    in an existing directory (a mistyped path never creates directories).

    Raises:
        PermanentError: The path is a directory, or ``--db``'s directory does not exist.
    """
    path = store_file(settings)
    if path is None:
        return
    if args.db is not None:
        from memory_core.adapters.sqlite.files import check_store_folder

        check_store_folder(path, "--db")
    elif Path(path).is_dir():
        raise InputError(f"{path} is a directory, not a store file (check --db or MEMORY_SQLITE_PATH)")


def service_for(args: argparse.Namespace, *, create: bool = False, batch_embeddings: bool = False) -> MemoryService:
    """The service on the configured store; ``create``: the store may be created, else it must exist;
    ``batch_embeddings``: passages asked for while the embedder is busy go in one call."""
    from memory_core.bootstrap import build_service

    settings = settings_for(args)
    if create:
        check_new_store(args, settings)
    else:
        require_store(settings)
    return build_service(settings, batch_embeddings=batch_embeddings)


def service_with_queue(settings: Settings, queue: SQLiteQueue | None) -> MemoryService:
    """The service, with the embedded queue as its publisher (closed with it, or here if building fails)."""
    from memory_core.bootstrap import build_service

    try:
        return build_service(settings, publisher=queue)
    except BaseException:
        if queue is not None:
            queue.close_sync()
        raise


def existing_queue_settings(settings: Settings) -> Settings:
    """``settings`` for a command that reads the embedded queue: unchanged when the queue file exists;
    an empty in-memory queue when only the store does (nothing was ever queued; nothing is created).

    Raises:
        NotFoundError: Neither the store nor its queue exists.
    """
    from memory_core.bootstrap import local_queue_path

    require_store(settings, or_queue=True)
    if store_file(settings) is None or Path(local_queue_path(settings)).exists():
        return settings
    return dataclasses.replace(settings, sqlite_path=":memory:")


def progress_for(args: argparse.Namespace) -> Progress:
    """Bars on standard error for people: none with ``--json`` or when standard error is not a terminal."""
    from memory_core.tools.progress import terminal_progress

    return terminal_progress(quiet=args.json)
