"""``memory-core``: the memory operations for people and scripts.

Global options (``--db PATH``, ``--json``, ``-v``, ``--debug``) go before or after the command.
``--json`` prints exactly one JSON document on standard output (the JSON the HTTP API returns where
there is one); logs, progress and text for people go to standard error. A file argument takes ``-``
for standard input, and a memory id may be shortened to any start that is unique in its scope.

Errors print one line on standard error (with ``--json`` also an ``{"error": {...}}`` document on
standard output) and exit with a distinct status (:data:`EXIT_OK`, :data:`EXIT_FAILURE`,
:data:`EXIT_USAGE`, :data:`EXIT_NOT_FOUND`). Commands that only read never create a store: on a
missing one they say so and exit with :data:`EXIT_NOT_FOUND`; ``import``, ``ingest``, ``serve`` and
``demo --db`` create it, in a directory that must exist when ``--db`` names it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import json
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from memory_core.contract.admin_views import export_response, forgetting_response, purge_response
from memory_core.contract.views import memory_detail, memory_list_response, memory_view, search_response
from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode
from memory_core.domain.validation import utcnow
from memory_core.errors import (
    ConfigurationError,
    ConflictError,
    InputError,
    MemoryCoreError,
    NotFoundError,
    PermanentError,
    TransientError,
    ValidationError,
)
from memory_core.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.sqlite.queue import SQLiteQueue
    from memory_core.config import Settings
    from memory_core.entrypoints.embedded.host import EmbeddedRuntime
    from memory_core.service import MemoryService
    from memory_core.tools.progress import Progress

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXTRAS",
    "SEARCH_FLAGS",
    "build_parser",
    "main",
]

#: Exit statuses: done; failed (a configuration, a service, a check, a replay, a missing extra);
#: usage or bad input (arguments, input files, invalid or damaged store files); not found (a memory,
#: a dead letter, no store at the path); interrupted.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_INTERRUPTED = 130
#: Standard output was closed before everything was written (``| head``), as a shell reports SIGPIPE.
EXIT_BROKEN_PIPE = 141

#: The optional extra that brings each optional top-level package (``pip install 'memory-core[EXTRA]'``).
EXTRAS: dict[str, str] = {
    "agent_framework": "agent",
    "httpx": "agent",
    "azure": "azure",
    "aiohttp": "azure",
    "jwt": "azure",
    "opentelemetry": "azure",
    "openai": "llm",
    "mcp": "mcp",
    "matplotlib": "bench",
    "usearch": "ann",
}

#: One example per command (``--help`` shows it); the key is the command's words after ``memory-core``.
EXAMPLES: dict[str, str] = {
    "": 'memory-core --db my.db search "window seat" --user u1 --agent travel',
    "demo": "memory-core demo",
    "ingest": "cat turns.jsonl | memory-core --db my.db ingest -",
    "index": "memory-core index ensure",
    "index ensure": "memory-core index ensure",
    "import": "memory-core --db my.db import records.jsonl   # again: nothing is stored twice",
    "export": "memory-core --db my.db export --user u1 > u1.jsonl",
    "search": 'memory-core --db my.db search "window seat" --user u1 --agent travel --order-by importance desc',
    "list": "memory-core --db my.db list --user u1 --agent travel --status active",
    "get": "memory-core --db my.db get 7a0edcc1 --user u1 --agent travel",
    "delete": "memory-core --db my.db delete 7a0edcc1 --user u1 --agent travel",
    "forget": "memory-core --db my.db forget --apply",
    "purge": "memory-core --db my.db purge --user u1 --yes",
    "bench": "memory-core bench search --store-size 10000",
    "bench search": "memory-core bench search --store-size 10000 --queries 100",
    "bench ingest": "memory-core bench ingest --turns 50",
    "bench forget": "memory-core bench forget --store-size 100000 --in-process",
    "bench provider": "memory-core bench provider --runs 50 --embedder hash",
    "bench serve": "memory-core bench serve --seconds 10 --turns 200",
    "bench inspector": "memory-core bench inspector --memories 1000 --runs 5",
    "bench ann": "memory-core bench ann --sizes 10000 --derived --k 50 --threads 1",
    "eval": "memory-core eval japanese",
    "eval locomo": "memory-core eval locomo --data locomo10.json --output locomo.json",
    "eval japanese": "memory-core eval japanese --output ja.json",
    "eval pipeline": "memory-core eval pipeline --data locomo10.json",
    "serve": "memory-core --db my.db serve --port 7071",
    "mcp": "memory-core --db my.db mcp --user u1",
    "doctor": "memory-core --db my.db doctor --full",
    "queue": "memory-core --db my.db queue list",
    "queue list": "memory-core --db my.db queue list --limit 20",
    "queue dead-letters": "memory-core --db my.db queue dead-letters --body",
    "queue requeue": "memory-core --db my.db queue requeue 12",
    "queue purge-dead-letters": "memory-core --db my.db queue purge-dead-letters",
    "deadletters": "memory-core --db my.db deadletters list",
    "deadletters list": "memory-core deadletters list --source azure --reason AuthenticationError",
    "deadletters replay": "memory-core --db my.db deadletters replay --all",
}

_EPILOG = """\
Global options (--db, --json, -v, --debug) go before or after the command. A FILE argument takes -
for standard input. A memory id may be shortened to any start that is unique for the user and agent.
--json prints exactly one JSON document on standard output (errors too: {"error": {...}}); logs and
progress go to standard error. Commands that only read never create a store.

exit status:
  0    ok
  1    failure (configuration, a service, a failed check or replay, a missing extra)
  2    usage or bad input (arguments, input files, a damaged or foreign store file)
  3    not found (a memory, a dead letter, no store at --db)
  130  interrupted
"""


# -- output ---------------------------------------------------------------------------------------
def _print_json(data: Any, out: TextIO) -> None:
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


class _Output(io.TextIOBase):
    """Standard output under ``--json``: remembers whether the command wrote anything, so an error
    adds its JSON document only where there is none yet."""

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self._target = target
        self.written = False

    def write(self, text: str) -> int:
        self.written = self.written or bool(text)
        return self._target.write(text)

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()


def _short(text: str, width: int = 72) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- input ----------------------------------------------------------------------------------------
def _input_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _read_lines(path: str) -> list[str]:
    """Every line of the text file ``path`` (``-``: standard input), read as UTF-8.

    Raises:
        PermanentError: The file cannot be read or is not UTF-8 text (one line saying which and why).
    """
    name = _input_name(path)
    try:
        if path == "-":
            buffer = getattr(sys.stdin, "buffer", None)
            text = buffer.read().decode("utf-8-sig") if buffer is not None else sys.stdin.read()
        else:
            text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"cannot read {name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"cannot read {name}: it is a directory") from None
    except PermissionError:
        raise InputError(f"cannot read {name}: permission denied") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {name}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}") from None
    return text.splitlines()


def _jsonl(path: str, numbers: list[int] | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a JSON lines file (``-``: standard input); blank lines are skipped.

    Args:
        path: The file, or ``-``.
        numbers: Filled with the line number of each object, if given.

    Raises:
        PermanentError: The file cannot be read, or a line is not a JSON object (names the line).
    """
    name = _input_name(path)
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}:{number}: not valid JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise InputError(f"{name}:{number}: each line must be a JSON object")
        rows.append(value)
        if numbers is not None:
            numbers.append(number)
    return rows


def _spool_stdin(args: argparse.Namespace, names: Sequence[str], folder: str) -> None:
    """Replace a ``-`` among the file arguments ``names`` with a file in ``folder`` holding standard input."""
    dashes = [name for name in names if getattr(args, name, None) == "-"]
    if len(dashes) > 1:
        raise InputError(f"only one of {', '.join('--' + n for n in dashes)} can read standard input")
    for name in dashes:
        target = Path(folder) / f"{name}.json"
        target.write_text("\n".join(_read_lines("-")) + "\n", encoding="utf-8")
        setattr(args, name, str(target))


# -- the store ------------------------------------------------------------------------------------
def _settings(args: argparse.Namespace) -> Settings:
    from memory_core.bootstrap import load_settings

    return load_settings(sqlite_path=args.db)


def _store_file(settings: Settings) -> str | None:
    """The embedded store's file, or ``None`` where there is no file (Azure, ``:memory:``, a URI)."""
    path = settings.sqlite_path
    if settings.store == "azure_search" or path == ":memory:" or path.startswith("file:"):
        return None
    return path


def _require_store(settings: Settings, *, or_queue: bool = False) -> None:
    """Refuse a missing store (a command that only reads or changes memories never creates one).

    Args:
        settings: Name the store.
        or_queue: Its queue file alone is enough (commands on the queue).

    Raises:
        PermanentError: The path is a directory.
        NotFoundError: Neither the store file (nor, with ``or_queue``, its queue) exists.
    """
    from memory_core.bootstrap import local_queue_path

    path = _store_file(settings)
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


def _check_new_store(args: argparse.Namespace, settings: Settings) -> None:
    """Before a command that creates the store: a ``--db`` given on the command line must name a file
    in an existing directory (a mistyped path never creates directories).

    Raises:
        PermanentError: The path is a directory, or ``--db``'s directory does not exist.
    """
    path = _store_file(settings)
    if path is None:
        return
    if Path(path).is_dir():
        raise InputError(f"{path} is a directory, not a store file (check --db or MEMORY_SQLITE_PATH)")
    folder = Path(path).parent
    if args.db is not None and not folder.is_dir():
        raise InputError(
            f"--db {path}: the directory {folder} does not exist; create it first (a store is created "
            "only in an existing directory)"
        )


def _service(args: argparse.Namespace, *, create: bool = False, batch_embeddings: bool = False) -> MemoryService:
    """The service on the configured store; ``create``: the store may be created, else it must exist;
    ``batch_embeddings``: passages asked for while the embedder is busy go in one call."""
    from memory_core.bootstrap import build_service

    settings = _settings(args)
    if create:
        _check_new_store(args, settings)
    else:
        _require_store(settings)
    return build_service(settings, batch_embeddings=batch_embeddings)


def _service_with_queue(settings: Settings, queue: SQLiteQueue | None) -> MemoryService:
    """The service, with the embedded queue as its publisher (closed with it, or here if building fails)."""
    from memory_core.bootstrap import build_service

    try:
        return build_service(settings, publisher=queue)
    except BaseException:
        if queue is not None:
            queue.close_sync()
        raise


def _existing_queue_settings(settings: Settings) -> Settings:
    """``settings`` for a command that reads the embedded queue: unchanged when the queue file exists;
    an empty in-memory queue when only the store does (nothing was ever queued; nothing is created).

    Raises:
        NotFoundError: Neither the store nor its queue exists.
    """
    from memory_core.bootstrap import local_queue_path

    _require_store(settings, or_queue=True)
    if _store_file(settings) is None or Path(local_queue_path(settings)).exists():
        return settings
    return dataclasses.replace(settings, sqlite_path=":memory:")


def _progress(args: argparse.Namespace) -> Progress:
    """Bars on standard error for people: none with ``--json`` or when standard error is not a terminal."""
    from memory_core.tools.progress import terminal_progress

    return terminal_progress(quiet=args.json)


# -- arguments ------------------------------------------------------------------------------------
def _non_negative_int(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive_int(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    value = _non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


_DIRECTIONS = ("asc", "desc")


def _order_by(text: str) -> str:
    """An argparse type: ``FIELD DIR`` (one argument, or two joined by :func:`_join_order_by`)."""
    value = " ".join(text.split()).lower()
    if value in {o.value for o in OrderBy}:
        return value
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a sort order; give FIELD DIR, one of: {', '.join(o.value for o in OrderBy)}"
    )


def _join_order_by(argv: Sequence[str]) -> list[str]:
    """``--order-by FIELD DIR`` as two arguments becomes one (``--order-by=FIELD DIR``); the quoted
    form ``--order-by "FIELD DIR"`` is left as it is."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            joined.extend(argv[i:])
            break
        following = argv[i + 1 : i + 3]
        if (
            arg == "--order-by"
            and len(following) == 2
            and following[1].lower() in _DIRECTIONS
            and len(following[0].split()) == 1
        ):
            joined.append(f"--order-by={following[0]} {following[1]}")
            i += 3
            continue
        if (
            arg.startswith("--order-by=")
            and following
            and following[0].lower() in _DIRECTIONS
            and len(arg.partition("=")[2].split()) == 1
        ):
            joined.append(f"{arg} {following[0]}")
            i += 2
            continue
        joined.append(arg)
        i += 1
    return joined


#: The ``search`` flag of every search option (the argparse destination is the option's name, so
#: :meth:`MemorySearchOptions.from_values` reads them all; a test checks every option has one).
SEARCH_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "mode": ("--mode", {"choices": [m.value for m in SearchMode], "default": SearchMode.HYBRID.value}),
    "ranking_profile": (
        "--profile",
        {"choices": [r.value for r in RankingProfile], "default": RankingProfile.IMPORTANT.value},
    ),
    "top": ("--top", {"type": int, "default": 5, "help": "how many memories"}),
    "order_by": (
        "--order-by",
        {
            "type": _order_by,
            "default": None,
            "metavar": "FIELD DIR",
            "help": "sort by a field instead of relevance (relevance breaks ties): "
            + ", ".join(o.value for o in OrderBy),
        },
    ),
    "category": ("--category", {}),
    "include_archived": ("--include-archived", {"action": "store_true"}),
    "min_importance": ("--min-importance", {"type": float}),
    "min_retention_score": ("--min-retention", {"type": float}),
    "kind": ("--kind", {"choices": [k.value for k in MemoryKind], "help": "only facts or only episodes"}),
    "vector_k": ("--vector-k", {"type": int, "help": "nearest neighbours of the vector leg (default 50)"}),
    "vector_weight": (
        "--vector-weight",
        {"type": float, "help": "weight of the vector leg in hybrid fusion (default: by the query's language)"},
    ),
}


# -- commands -------------------------------------------------------------------------------------
async def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.service.admin import prepare_record

    lines: list[int] = []
    rows = _jsonl(args.file, lines)
    settings = _settings(args)
    policy, now = settings.policy(), utcnow()
    for number, row in zip(lines, rows, strict=True):  # every record checked before the store is touched
        try:
            prepare_record(row, policy, now)
        except ValidationError as exc:
            raise ValidationError(f"{_input_name(args.file)}:{number}: {exc.field}", exc.message) from None
    async with _service(args, create=True) as service:
        with _progress(args).bar("importing", unit="records") as bar:
            report = await service.import_records(rows, dedupe=not args.allow_duplicates, progress=bar.update)
    if args.json:
        _print_json(
            {
                "imported": report.imported,
                "updated": report.updated,
                "skipped": report.skipped,
                "embedded": report.embedded,
            },
            out,
        )
    else:
        out.write(
            f"imported {report.imported} memories, updated {report.updated}, skipped {report.skipped} "
            f"(already stored or repeated); {report.embedded} embeddings computed\n"
        )
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.bootstrap import existing_local_queue

    settings = _settings(args)
    _require_store(settings)
    async with _service_with_queue(settings, existing_local_queue(settings) if args.json else None) as service:
        if args.json:  # exactly what GET /api/users/{user_id}/export answers
            records = [record async for record in service.export(args.user, args.agent)]
            history = await service.export_history(args.user, args.agent)
            queued = await service.queued_messages(args.user, args.agent)
            _print_json(export_response(args.user, args.agent, records, history, queued).model_dump(mode="json"), out)
            return EXIT_OK
        async for record in service.export(args.user, args.agent):
            out.write(json.dumps(record.to_json_dict(), ensure_ascii=False) + "\n")
        if args.history:
            entries = await service.export_history(args.user, args.agent)
            try:
                with Path(args.history).open("w", encoding="utf-8") as handle:
                    for entry in entries:
                        handle.write(json.dumps(entry.model_dump(mode="json"), ensure_ascii=False) + "\n")
            except OSError as exc:
                raise InputError(f"cannot write {args.history}: {exc.strerror or exc}") from None
    return EXIT_OK


async def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    options = MemorySearchOptions.from_values(vars(args))
    async with _service(args) as service:
        result = await service.search(Scope.of(args.user, args.agent), args.query, options, recall=args.recall)
    if args.json:
        _print_json(search_response(result).model_dump(mode="json"), out)
        return EXIT_OK
    for note in result.notes:
        out.write(f"note: {note}\n")
    if not result.hits:
        out.write("no memories found\n")
    for rank, hit in enumerate(result.hits, start=1):
        r = hit.record
        out.write(
            f"{rank:>2}. {hit.score:10.4f}  [{r.category}; importance={r.importance:.2f}; "
            f"retention={r.retention_score:.2f}; recalls={r.access_count}; "
            f"updated={r.updated_at.date().isoformat()}] {_short(r.memory)}  ({r.id})\n"
        )
    return EXIT_OK


async def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    statuses = [MemoryStatus(args.status)] if args.status else None
    async with _service(args) as service:
        page = await service.list(
            Scope.of(args.user, args.agent), statuses=statuses, cursor=args.cursor, limit=args.limit
        )
    if args.json:
        _print_json(memory_list_response(page).model_dump(mode="json"), out)
        return EXIT_OK
    for r in page.records:
        out.write(
            f"{r.id}  {r.status.value:<8} [{r.category}; importance={r.importance:.2f}; "
            f"retention={r.retention_score:.2f}] {_short(r.memory)}\n"
        )
    if page.next_cursor:
        out.write(f"more: --cursor {page.next_cursor}\n")
    return EXIT_OK


async def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    scope = Scope.of(args.user, args.agent)
    async with _service(args) as service:
        memory_id = await service.resolve_id(scope, args.id)
        record = await service.get(scope, memory_id)
        history = await service.history_of(scope, memory_id)
    detail = memory_detail(record, history).model_dump(mode="json")
    if args.json:
        _print_json(detail, out)
        return EXIT_OK
    entries = detail.pop("history")
    for key, value in detail.items():
        out.write(f"{key:>17}: {value}\n")
    for entry in entries:
        out.write(
            f"  {entry['at']}  {entry['event']:<6} {entry.get('reason', '')}  (turn {entry.get('turn_id')})\n"
        )
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    scope = Scope.of(args.user, args.agent)
    async with _service(args) as service:
        memory_id = await service.resolve_id(scope, args.id)
        record = await service.delete(scope, memory_id, reason=args.reason)
    if args.json:  # what DELETE /api/memories/{memory_id} answers
        _print_json(memory_view(record).model_dump(mode="json"), out)
    else:
        out.write(f"deleted {record.id}: {_short(record.memory)}\n")
    return EXIT_OK


async def cmd_forget(args: argparse.Namespace, out: TextIO) -> int:
    async with _service(args) as service:
        with _progress(args).bar("forgetting", args.limit, unit="memories") as bar:
            report = await service.apply_forgetting(
                dry_run=not args.apply, limit=args.limit, cursor=args.cursor, progress=bar.update
            )
    if args.json:
        _print_json(forgetting_response(report).model_dump(mode="json"), out)
        return EXIT_OK
    verb = "would change" if report.dry_run else "changed"
    out.write(
        f"{'dry run: ' if report.dry_run else ''}scanned {report.scanned}; {verb}: archived {report.archived} "
        f"(expired {report.expired}), reactivated {report.reactivated}, rescored {report.rescored}; "
        f"unchanged {report.unchanged}; written {report.written}\n"
    )
    for change in report.changes[:50]:
        out.write(
            f"  {change.id}  {change.old_status.value} -> {change.new_status.value}  "
            f"retention {change.old_retention:.3f} -> {change.new_retention:.3f}"
            f"{'  (expired)' if change.expired else ''}\n"
        )
    if report.next_cursor:
        out.write(f"more: --cursor {report.next_cursor}\n")
    if report.dry_run:
        out.write("nothing was written; run with --apply to apply\n")
    return EXIT_OK


async def cmd_purge(args: argparse.Namespace, out: TextIO) -> int:
    if not args.yes:
        raise InputError("purge removes memories physically and cannot be undone; add --yes to confirm")
    from memory_core.bootstrap import existing_local_queue

    settings = _settings(args)
    _require_store(settings, or_queue=True)
    # The embedded queue (if any) loses the scope's messages too, even while `serve` runs.
    async with _service_with_queue(settings, existing_local_queue(settings)) as service:
        report = await service.purge(args.user, args.agent)
    if args.json:
        _print_json(purge_response(report).model_dump(mode="json"), out)
        return EXIT_OK
    out.write(
        f"purged {report.memories} memories, {report.history} history entries and "
        f"{report.queued} queued message(s)\n"
    )
    if report.purged_at is not None:
        out.write(
            f"turns and recall updates of this {'user' if args.agent is None else 'agent'} dated at or before "
            f"{report.purged_at.isoformat()} are dropped from now on\n"
        )
    return EXIT_OK


async def cmd_ingest(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.domain.messages import Turn
    from memory_core.runtime.lanes import ingest_in_lanes
    from memory_core.service.ingest import IngestResult, format_decision, parse_turns

    try:  # every line is validated before anything is ingested (or the store created)
        turns = parse_turns(_read_lines(args.file))
    except ValidationError as exc:
        raise ValidationError(f"{_input_name(args.file)}: {exc.field}", exc.message) from None
    concurrency = args.concurrency  # at least 1 (the parser's type)
    results: list[dict[str, Any]] = []
    # --concurrency N > 1: turns of different scopes in flight together (each scope's in the file's
    # order), their passages embedded in one call when they meet at the model, as serve's workers do
    service = _service(args, create=True, batch_embeddings=concurrency > 1)
    async with service, _progress(args).bar("ingesting", len(turns), unit="turns") as bar:

        def show(done: int, turn: Turn, result: IngestResult) -> None:
            """One turn's result, in the file's order (``done`` turns came before it)."""
            bar.clear()  # the turn's lines may go to the terminal the bar is drawn on
            if args.json:
                results.append(result.as_dict())
            else:
                header = f"turn {turn.turn_id} ({turn.user_id}/{turn.agent_id})"
                if result.status == "duplicate":
                    out.write(f"{header}: already ingested, skipped\n")
                elif result.status == "purged":
                    out.write(f"{header}: dated at or before the purge of its scope, dropped\n")
                else:
                    note = (
                        f", extraction fell back to rules: {result.fallback_reason}" if result.fallback_reason else ""
                    )
                    out.write(f"{header}: {len(result.steps)} decision(s){note}\n")
                    for step in result.steps:
                        out.write("  " + format_decision(step) + "\n")
            bar.update(done + 1)

        bar.update(0)
        # A failure stops the run as a loop would: the turns before it are ingested and shown, no turn
        # after it starts once it has failed (turns of other scopes already in flight finish, unshown:
        # a second run skips them as already ingested), and the earliest failure is raised
        # (see memory_core.runtime.lanes).
        await ingest_in_lanes(service, turns, concurrency=concurrency, batch=args.batch, deliver=show)
        bar.update(len(turns))
    if args.json:  # one document: the results of the turns, in order
        _print_json(results, out)
    return EXIT_OK


async def cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.bootstrap import ensure_search_index

    outcome = await ensure_search_index(_settings(args))
    if args.json:
        _print_json({"index": outcome}, out)
    else:
        out.write(f"index {outcome}\n")
    return EXIT_OK


async def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.tools.demo import run_demo

    if args.db is not None:
        _check_new_store(args, _settings(args))
    if not args.json:
        code: int = await run_demo(
            db_path=args.db, out=lambda line="": out.write(f"{line}\n"), llm=args.llm, lang=args.lang
        )
        return code
    events: list[Any] = []  # the demo's JSON lines, as one document
    code = await run_demo(
        db_path=args.db,
        out=lambda line="": events.append(json.loads(line)),
        json_output=True,
        llm=args.llm,
        lang=args.lang,
    )
    _print_json(events, out)
    return code


async def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.tools.bench import run_benchmark

    return await run_benchmark(args, out, _progress(args))


async def cmd_eval(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.tools.evaluation import run_evaluation

    with tempfile.TemporaryDirectory(prefix="memory-core-") as folder:
        _spool_stdin(args, ("data", "set", "distractors"), folder)  # --data - reads standard input
        return await run_evaluation(args, out, _progress(args))


class _ServeAnnouncer(io.TextIOBase):
    """``serve --json``: the runtime's lines go to standard error; once it listens, one JSON line on
    standard output says where (and nothing else is written there)."""

    def __init__(self, out: TextIO, settings: Settings, workers: int) -> None:
        super().__init__()
        self._out = out
        self._settings = settings
        self._workers = workers
        self.runtime: EmbeddedRuntime | None = None
        self.announced = False

    def write(self, text: str) -> int:
        sys.stderr.write(text)
        server = None if self.runtime is None else self.runtime.server
        if not self.announced and self.runtime is not None and server is not None:
            self.announced = True
            facts = {
                "status": "listening",
                "url": server.url,
                "store": self._settings.sqlite_path,
                "queue": self.runtime.queue_path,
                "workers": self._workers,
                "pid": os.getpid(),
            }
            self._out.write(json.dumps(facts, ensure_ascii=False) + "\n")
            self._out.flush()
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


async def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.entrypoints.embedded.host import RuntimeOptions, serve_async

    options = RuntimeOptions(
        host=args.host,
        port=args.port,
        workers=args.workers,
        batch=args.batch,
        lock_seconds=args.lock_seconds,
        max_deliveries=args.max_deliveries,
        scheduler=not args.no_scheduler,
        token=args.token or None,  # an empty --token does not switch MEMORY_API_TOKEN off
        request_concurrency=args.request_concurrency or None,
        recall_window_seconds=args.recall_window,
    )
    settings = _settings(args)
    _check_new_store(args, settings)
    announcer: _ServeAnnouncer | None = None
    if args.json:
        announcer = _ServeAnnouncer(out, settings, args.workers)

    def ready(runtime: EmbeddedRuntime) -> None:
        if announcer is not None:
            announcer.runtime = runtime

    try:
        return await serve_async(
            settings, options, out=out if announcer is None else cast(TextIO, announcer), ready=ready
        )
    except OSError as exc:
        raise MemoryCoreError(f"cannot serve on {args.host}:{args.port}: {exc}") from exc


async def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.entrypoints.mcp.server import McpOptions, run_mcp

    options = McpOptions(
        user_id=args.user,
        agent_id=args.agent,
        transport=args.transport,
        host=args.host,
        port=args.port,
        token=args.token or None,  # an empty --token does not switch MEMORY_API_TOKEN off
        recall=args.recall,
    )
    return await run_mcp(_settings(args), options, out=out)


async def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.tools.doctor import diagnose

    settings = _settings(args)
    report = await diagnose(settings, full=args.full, queue_path=args.queue)
    if args.json:
        _print_json(report.as_dict(), out)
    else:
        out.write("\n".join(report.lines()) + "\n")
    path = _store_file(settings)
    if path is not None and not Path(path).exists():
        return EXIT_NOT_FOUND  # the report says so; doctor never creates a store
    return EXIT_FAILURE if report.failed else EXIT_OK


async def cmd_queue(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.bootstrap import build_local_queue

    queue = build_local_queue(_existing_queue_settings(_settings(args)))
    try:
        if args.queue_command == "list":
            messages = queue.peek(limit=args.limit)
        elif args.queue_command == "dead-letters":
            messages = queue.dead_letters(limit=args.limit)
        elif args.queue_command == "requeue":
            try:
                message = queue.requeue(args.id)
            except ValidationError as exc:
                if exc.field != "id":
                    raise
                raise NotFoundError(exc.message) from None
            if args.json:
                _print_json(message.as_dict(), out)
            else:
                out.write(f"requeued {message.message_id} (session {message.session_id}) as seq {message.seq}\n")
            return EXIT_OK
        else:
            removed = queue.purge_dead_letters()
            if args.json:
                _print_json({"purged": removed}, out)
            else:
                out.write(f"purged {removed} dead-lettered message(s)\n")
            return EXIT_OK
        stats = queue.stats()
    finally:
        queue.close_sync()
    if args.json:
        _print_json({"stats": stats.as_dict(), "messages": [m.as_dict(include_body=args.body) for m in messages]}, out)
        return EXIT_OK
    out.write(
        f"{stats.active} waiting ({stats.locked} locked) in {stats.sessions} session(s); "
        f"{stats.dead_letters} dead-lettered\n"
    )
    for m in messages:
        line = f"{m.seq:>6}  {m.subject or '-':<6} {m.message_id}  session={m.session_id}  deliveries={m.delivery_count}"
        if m.state == "dead":
            line += f"  reason={m.dead_letter_reason}: {_short(m.dead_letter_description or '', 120)}"
        elif m.last_error:
            line += f"  last_error={_short(m.last_error, 80)}"
        out.write(line + "\n")
        if args.body:
            out.write(f"        {_short(m.body.decode('utf-8', errors='replace'), 200)}\n")
    return EXIT_OK


async def cmd_deadletters(args: argparse.Namespace, out: TextIO) -> int:
    from memory_core.tools.deadletters import run_command, source_name

    settings = _settings(args)
    if args.deadletters_command == "replay" and bool(args.ids) == args.every:
        raise InputError("name the dead letters to replay (their ids) or --all, not both")
    if source_name(settings, args.source) == "local":
        settings = _existing_queue_settings(settings)
    return await run_command(args, settings, out)


# -- parser ---------------------------------------------------------------------------------------
class _UsageError(Exception):
    """What argparse would print before exiting with status 2 (raised instead, so ``main`` returns)."""

    def __init__(self, usage: str, message: str) -> None:
        super().__init__(message)
        self.usage = usage
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`_UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.format_usage(), f"{self.prog}: error: {message}")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps examples as written and shows each option's default (unless its help names it)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or "default" in text.lower()
        ):
            return action.help
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command parser under ``parser`` (depth first), with its words after the program name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) in seen:
                    continue
                seen.add(id(child))
                words = child.prog.split(" ", 1)[1] if " " in child.prog else name
                yield words, child
                yield from _subparsers(child)


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``--db``, ``--json``, ``-v`` and ``--debug`` on ``parser`` (on a command: without defaults, so
    the value given before the command stays unless it is given again after it)."""

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    group = parser.add_argument_group("global options" + ("" if top else " (also before the command)"))
    present = parser._option_string_actions
    if "--db" not in present:
        group.add_argument(
            "--db",
            metavar="PATH",
            default=default(None),
            help="embedded store file (env MEMORY_SQLITE_PATH, default .memory-core/memory.db)",
        )
    if "--json" not in present:
        group.add_argument(
            "--json",
            action="store_true",
            default=default(False),
            help="print exactly one JSON document on standard output",
        )
    if "--verbose" not in present:
        group.add_argument(
            "-v", "--verbose", action="store_true", default=default(False), help="log what happens (standard error)"
        )
    if "--debug" not in present:
        group.add_argument(
            "--debug", action="store_true", default=default(False), help="print the traceback of an error"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memory-core",
        description="Long-term, human-like memory for AI agents.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memory-core {__version__}")
    _global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def scope(p: argparse.ArgumentParser, *, agent_required: bool = True) -> None:
        p.add_argument("--user", required=True, help="user id")
        p.add_argument("--agent", required=agent_required, help="agent id")

    def memory_id(p: argparse.ArgumentParser) -> None:
        p.add_argument("id", help="memory id, or a start of it that is unique for the user and agent")

    p = sub.add_parser("demo", help="a scripted conversation through the whole local pipeline")
    p.add_argument(
        "--llm",
        action="store_true",
        help="extract and consolidate with the chat model MEMORY_LLM_PROVIDER configures (default: rules)",
    )
    p.add_argument(
        "--lang", choices=["ja", "en"], default="ja", help="the conversation's language (default ja: Japanese)"
    )
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("ingest", help="turn messages (turn.v1 JSON lines) through extraction and consolidation")
    p.add_argument("file", help="JSON lines file, one memory-core.turn.v1 per line, or - for standard input")
    p.add_argument(
        "--concurrency",
        type=_positive_int,
        default=4,
        metavar="N",
        help="turns of different scopes (user, agent) in flight at once, each scope's in the file's order, "
        "their passages embedded together; output stays in the file's order (1: one turn after another)",
    )
    p.add_argument(
        "--batch",
        type=_positive_int,
        default=8,
        metavar="N",
        help="turns of one scope prepared together: extracted, and their passages embedded in one call, "
        "then consolidated one by one; the result is the same (default 8; 1: each turn on its own)",
    )
    p.set_defaults(handler=cmd_ingest)

    p = sub.add_parser("index", help="the Azure AI Search index")
    index = p.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    index.add_parser("ensure", help="create or update the index (idempotent)")
    p.set_defaults(handler=cmd_index)

    p = sub.add_parser(
        "import",
        help="memory records as JSON lines (a missing embedding is computed; nothing is stored twice)",
    )
    p.add_argument("file", help="JSON lines file, or - for standard input")
    p.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="store every record again: a record without an id gets a new random one (by default it gets "
        "an id derived from its user, agent, kind and text, and a record already stored is skipped)",
    )
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser(
        "export",
        help="a user's memory records as JSON lines, every field (--json: the API's export, with history)",
    )
    scope(p, agent_required=False)
    p.add_argument("--history", metavar="FILE", help="also write the decision history, as JSON lines, to FILE")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("search", help="ranked memories for a query (read-only unless --recall)")
    p.add_argument("query")
    scope(p)
    for name, (flag, options) in SEARCH_FLAGS.items():
        p.add_argument(flag, dest=name, **options)
    p.add_argument(
        "--recall",
        action="store_true",
        help="count the memories found as recalled (reinforces them, as an agent's search does: writes to the store)",
    )
    p.add_argument("--no-recall", action="store_true", help=argparse.SUPPRESS)  # the old default's opt-out
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("list", help="memories of a user and agent, by id")
    scope(p)
    p.add_argument("--status", choices=[s.value for s in MemoryStatus])
    p.add_argument("--cursor", help="resume where an earlier page stopped")
    p.add_argument("--limit", type=int, default=100, help="memories per page")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("get", help="one memory (and its history)")
    memory_id(p)
    scope(p)
    p.set_defaults(handler=cmd_get)

    p = sub.add_parser("delete", help="soft-delete one memory (kept, with its history, but never found again)")
    memory_id(p)
    scope(p)
    p.add_argument("--reason", default="deleted on request", help="why, for the memory's history")
    p.set_defaults(handler=cmd_delete)

    p = sub.add_parser("forget", help="apply the forgetting policy (dry run unless --apply)")
    p.add_argument("--apply", action="store_true", help="write the changes")
    p.add_argument("--limit", type=int, help="scan at most this many memories")
    p.add_argument("--cursor", help="resume where an earlier run stopped")
    p.set_defaults(handler=cmd_forget)

    p = sub.add_parser("purge", help="physically remove a user's memories")
    scope(p, agent_required=False)
    p.add_argument("--yes", action="store_true", help="confirm")
    p.set_defaults(handler=cmd_purge)

    p = sub.add_parser("bench", help="speed reports (--json: the figures as one JSON document)")
    bench = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    b = bench.add_parser("search", help="search latency on a scope inside a large store")
    b.add_argument("--store-size", type=int, default=100_000)
    b.add_argument("--scope-size", type=int, default=1_000)
    b.add_argument("--queries", type=int, default=500)
    b.add_argument("--dimensions", type=int, default=384)
    b.add_argument("--keep", metavar="PATH", help="build (or reuse) the benchmark store at PATH")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    b.add_argument("--growth", type=int, nargs="+", metavar="N", help="growth series over these store sizes")
    b.add_argument("--growing-max", type=int, default=100_000, help="largest single growing scope")
    b.add_argument("--keep-dir", metavar="DIR", help="build (or reuse) the growth series stores in DIR")
    b.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")
    b = bench.add_parser("ingest", help="turns per second through the rule path with the local embedder")
    b.add_argument("--turns", type=int, default=200)
    b.add_argument("--scopes", type=int, default=8)
    b.add_argument("--seed", type=int, default=7)
    b.add_argument("--threads", type=int, default=2, help="threads of the local embedder")
    b.add_argument(
        "--concurrency",
        type=_positive_int,
        nargs="+",
        default=None,
        metavar="N",
        help="turns of different scopes in flight at once, their passages embedded together, like serve's "
        "workers (default: 4, serve's default; several values: one run each, a table and a chart)",
    )
    b.add_argument(
        "--batch",
        type=_positive_int,
        default=None,
        metavar="N",
        help="turns of one scope prepared together, their passages embedded in one call, like serve's "
        "workers taking several messages of a session (default: 8, serve's default; 1: none ahead)",
    )
    b.add_argument("--charts", metavar="DIR", help="draw ingest.png into DIR (needs matplotlib)")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b = bench.add_parser("forget", help="forgetting throughput and peak memory over a large store")
    b.add_argument("--store-size", type=int, default=1_000_000)
    b.add_argument("--scope-size", type=int, default=1_000)
    b.add_argument("--dimensions", type=int, default=384)
    b.add_argument("--tolerance", type=float, default=0.01, help="retention drift that is written back")
    b.add_argument("--page-size", type=int, default=20_000)
    b.add_argument("--keep", metavar="PATH", help="build (or reuse) the benchmark store at PATH")
    b.add_argument("--tracemalloc", action="store_true", help="add a dry run under tracemalloc (Python heap peak)")
    b.add_argument("--in-process", action="store_true", help="run the jobs in this process (no fresh process each)")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")
    b.add_argument("--seed", type=int, default=7)
    b = bench.add_parser("provider", help="latency the memory provider adds to an agent run")
    b.add_argument("--runs", type=int, default=200)
    b.add_argument("--memories", type=int, default=200, help="memories in the benchmark scope")
    b.add_argument("--embedder", choices=["e5-local", "hash"], default="e5-local")
    b.add_argument("--threads", type=int, default=2, help="threads of the local embedder")
    b.add_argument(
        "--query-cache-size",
        type=_non_negative_int,
        default=0,
        help="query embeddings cached (the questions repeat: above 0, repeats skip the model)",
    )
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    b = bench.add_parser("inspector", help="the inspector's requests on a scope of 10,000 memories")
    b.add_argument("--memories", type=int, default=10_000, help="memories of the inspected user")
    b.add_argument("--other-users", type=int, default=20, help="other users (100 memories each)")
    b.add_argument("--runs", type=int, default=20, help="timed passes over every view")
    b.add_argument("--keep", metavar="PATH", help="build (or reuse) the benchmark store at PATH")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    b = bench.add_parser("ann", help="an approximate vector index (HNSW) against exact search: recall, speed, size")
    from memory_core.tools.bench.ann import add_arguments as ann_arguments

    ann_arguments(b)
    b = bench.add_parser("serve", help="the embedded server under search load while turns are posted")
    b.add_argument("--searchers", type=int, default=20, help="concurrent searchers")
    b.add_argument("--seconds", type=float, default=30.0, help="how long the searchers run")
    b.add_argument("--turns", type=int, default=2000, help="turns posted during the load")
    b.add_argument("--users", type=int, default=50, help="users (one agent each) the turns and searches spread over")
    b.add_argument("--seed-turns", type=int, default=4, help="turns per user processed before the load")
    b.add_argument("--embedder", choices=["e5-local", "hash"], default="e5-local")
    b.add_argument("--workers", type=int, default=4, help="queue workers of the server (serve's default)")
    b.add_argument(
        "--batch", type=_positive_int, default=8, help="messages of a session a worker takes at once (serve's default)"
    )
    b.add_argument("--threads", type=int, default=2, help="threads of the local embedder")
    b.add_argument("--drain-timeout", type=float, default=600.0, help="longest wait for the rest to be processed")
    b.add_argument(
        "--request-concurrency", type=_non_negative_int, default=2, help="the server's --request-concurrency"
    )
    b.add_argument(
        "--query-cache-size",
        type=_non_negative_int,
        default=1024,
        help="the server's MEMORY_QUERY_CACHE_SIZE (the searchers' 10 questions repeat: 0 embeds every one)",
    )
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser(
        "eval", help="quality reports (retrieval on LoCoMo, the Japanese set; --json: the report as JSON)"
    )
    evals = p.add_subparsers(dest="evaluation", required=True, metavar="EVAL")
    from memory_core.tools.evaluation import japanese as eval_japanese
    from memory_core.tools.evaluation import locomo as eval_locomo
    from memory_core.tools.evaluation import pipeline as eval_pipeline

    eval_locomo.add_arguments(evals.add_parser("locomo", help="turn-level retrieval on LoCoMo (no LLM)"))
    eval_japanese.add_arguments(
        evals.add_parser("japanese", help="the Japanese set: retrieval and rule-path consolidation")
    )
    eval_pipeline.add_arguments(
        evals.add_parser("pipeline", help="end to end: turns through the real ingest path, then questions")
    )
    p.set_defaults(handler=cmd_eval)

    p = sub.add_parser(
        "serve",
        help="the embedded runtime: HTTP API + queue workers + nightly forgetting "
        "(--json: one JSON line with the URL once it listens)",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7071, help="port (default 7071; 0 picks a free one)")
    p.add_argument(
        "--workers",
        type=int,
        default=4,
        help="queue workers: turns of as many scopes in flight, their passages embedded together (default 4)",
    )
    p.add_argument(
        "--batch",
        type=_positive_int,
        default=8,
        metavar="N",
        help="messages of one scope a worker takes at once: their turns extracted and their passages "
        "embedded in one call, then processed and settled one by one, in order (default 8; 1: one at a time)",
    )
    p.add_argument("--lock-seconds", type=float, default=60.0, help="peek-lock duration (default 60)")
    p.add_argument("--max-deliveries", type=int, default=10, help="deliveries before dead-lettering (default 10)")
    p.add_argument("--no-scheduler", action="store_true", help="do not run the nightly forgetting job")
    p.add_argument(
        "--token",
        help="bearer token every route but health requires (default MEMORY_API_TOKEN; prefer the variable: "
        "arguments are visible to other users of the machine); required for a non-loopback --host",
    )
    p.add_argument(
        "--request-concurrency",
        type=_non_negative_int,
        default=2,
        help="requests served at once, the others wait their turn so queue workers keep their share "
        "(default 2; 0: no limit; health and POST /turns never wait)",
    )
    p.add_argument(
        "--recall-window",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long a scope's recall updates are gathered into one before they are queued (default 2; 0: none)",
    )
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser(
        "mcp", help="a Model Context Protocol server over one user's memories (stdio, or HTTP on 127.0.0.1)"
    )
    p.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help="embedded store file (as the global --db)")
    p.add_argument("--user", help="the one user whose memories are served (default MEMORY_MCP_USER_ID; required)")
    p.add_argument("--agent", help="the agent id (default MEMORY_MCP_AGENT_ID, which defaults to 'default')")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP")
    p.add_argument("--host", default="127.0.0.1", help="HTTP interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7072, help="HTTP port (default 7072; 0 picks a free one)")
    p.add_argument(
        "--token",
        help="bearer token every HTTP request needs (default MEMORY_API_TOKEN; prefer the variable); "
        "required for a non-loopback --host",
    )
    p.add_argument("--recall", action="store_true", help="count searches as recalls (default: searches are read-only)")
    p.set_defaults(handler=cmd_mcp)

    p = sub.add_parser("doctor", help="check the store, its history and queue, read-only")
    p.add_argument("--full", action="store_true", help="full integrity_check even of large files (slower)")
    p.add_argument("--queue", metavar="PATH", help="the queue file (default <db>.queue)")
    p.set_defaults(handler=cmd_doctor)

    p = sub.add_parser("queue", help="inspect the embedded queue (<db>.queue)")
    queue = p.add_subparsers(dest="queue_command", required=True, metavar="ACTION")
    for name, text in (("list", "waiting messages, oldest first"), ("dead-letters", "dead-lettered messages with reasons")):
        q = queue.add_parser(name, help=text)
        q.add_argument("--limit", type=int, default=100, help="messages shown at most")
        q.add_argument("--body", action="store_true", help="show message bodies")
    q = queue.add_parser("requeue", help="send a dead letter again (by seq or message id)")
    q.add_argument("id")
    queue.add_parser("purge-dead-letters", help="remove every dead letter")
    p.set_defaults(handler=cmd_queue)

    from memory_core.tools.deadletters import add_arguments as deadletter_arguments

    p = sub.add_parser("deadletters", help="list or replay dead letters (the embedded queue or the Azure table)")
    deadletter_arguments(p)
    p.set_defaults(handler=cmd_deadletters)

    parser.epilog = f"{_EPILOG}\nexample:\n  {EXAMPLES['']}\n"
    for words, child in _subparsers(parser):
        child.formatter_class = _HelpFormatter
        _global_options(child, top=False)
        if words in EXAMPLES:
            child.epilog = f"example:\n  {EXAMPLES[words]}\n"
        for action in child._actions:  # argparse shows no help line, so no default, for an option without help
            if action.help is None and action.option_strings and action.default not in (None, False):
                action.help = "default: %(default)s"
    return parser


# -- running a command ----------------------------------------------------------------------------
def _missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that brings the missing module, if it is one of memory-core's optional packages."""
    name = (exc.name or "").split(".", 1)[0]
    return EXTRAS.get(name)


def _failure(exc: BaseException) -> tuple[int, str, str, str | None]:
    """Exit status, JSON error code, the line for standard error, and the field, for an error."""
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND, "not_found", f"not found: {exc}", None
    if isinstance(exc, ValidationError):
        return EXIT_USAGE, "validation_error", f"error: {exc}", exc.field
    if isinstance(exc, ConflictError):
        return EXIT_USAGE, "conflict", f"error: {exc}", None
    if isinstance(exc, InputError):
        return EXIT_USAGE, "bad_request", f"error: {exc}", None
    if isinstance(exc, PermanentError):  # the service failed for good (a refusal, an Azure 403, ...)
        return EXIT_FAILURE, "failed", f"error: {exc}", None
    if isinstance(exc, ConfigurationError):
        return EXIT_FAILURE, "configuration_error", f"error: {exc}", None
    if isinstance(exc, TransientError):
        return EXIT_FAILURE, "unavailable", f"error: {exc}", None
    if isinstance(exc, MemoryCoreError):
        return EXIT_FAILURE, "error", f"error: {exc}", None
    if isinstance(exc, ModuleNotFoundError) and (extra := _missing_extra(exc)) is not None:
        return (
            EXIT_FAILURE,
            "missing_dependency",
            f"error: this needs the optional package {exc.name!r}, which is not installed: "
            f"pip install 'memory-core[{extra}]'",
            None,
        )
    if isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError | PermissionError) and (
        exc.filename is not None
    ):
        return EXIT_USAGE, "bad_request", f"error: {exc.strerror or exc}: {exc.filename}", None
    return (
        EXIT_FAILURE,
        "internal_error",
        f"error: unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
        None,
    )


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _report(code: str, message: str, field: str | None, out: TextIO) -> None:
    _print_json({"error": {"code": code, "message": message, "field": field}}, out)


def _wants(flag: str, argv: Sequence[str]) -> bool:
    """Whether ``flag`` is among the options of ``argv`` (before a ``--``)."""
    return flag in (argv[: argv.index("--")] if "--" in argv else argv)


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run one command; returns the exit status (``EXIT_*``)."""
    out = out or sys.stdout
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(_join_order_by(raw))
    except _UsageError as exc:
        sys.stderr.write(exc.usage + exc.message + "\n")
        if _wants("--json", raw):
            _report("usage_error", exc.message, None, out)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_USAGE
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.json and args.command == "mcp":
        message = "memory-core mcp: error: --json does not apply: mcp speaks the Model Context Protocol"
        sys.stderr.write(message + "\n")
        _report("usage_error", message, None, out)
        return EXIT_USAGE
    sink = _Output(out) if args.json else None
    handler: Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]] = args.handler
    try:
        return asyncio.run(handler(args, out if sink is None else cast(TextIO, sink)))
    except KeyboardInterrupt:
        sys.stderr.write("memory-core: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as other tools do
        with open(os.devnull, "w", encoding="utf-8") as devnull, contextlib.suppress(OSError, ValueError):
            os.dup2(devnull.fileno(), sys.stdout.fileno())  # so the exit's flush finds no pipe to fail on
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        status, code, line, field = _failure(exc)
        if args.debug:
            traceback.print_exception(exc, file=sys.stderr)
        message = _one_line(line)
        sys.stderr.write(f"memory-core: {message}\n")
        if sink is not None and not sink.written:
            _report(code, message.removeprefix("error: ").removeprefix("not found: "), field, out)
        return status


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
