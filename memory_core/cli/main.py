"""``memory-core``: the memory operations for people and scripts.

Global options (``--db PATH``, ``--json``, ``-v``, ``--debug``) go before or after the command.
``--json`` prints exactly one JSON document on standard output (the JSON the HTTP API returns where
there is one); logs, progress and text for people go to standard error. A file argument takes ``-``
for standard input, and a memory id may be shortened to any start that is unique in its scope.

Errors print one line on standard error (with ``--json`` also an ``{"error": {...}}`` document on
standard output) and exit with a distinct status (the ``EXIT_*`` of :mod:`memory_core.cli.output`).
Commands that only read never create a store: on a missing one they say so and exit with
``EXIT_NOT_FOUND``; ``import``, ``ingest``, ``serve`` and ``demo --db`` create it, in a directory that
must exist when ``--db`` names it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO, cast

from memory_core.cli.memories import join_order_by
from memory_core.cli.output import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    TrackedOutput,
    print_json,
)
from memory_core.cli.parser import UsageError, build_parser
from memory_core.errors import (
    ConfigurationError,
    ConflictError,
    DamagedFileError,
    InputError,
    MemoryCoreError,
    NotFoundError,
    PermanentError,
    TransientError,
    ValidationError,
)

__all__ = ["EXTRAS", "main"]

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

#: memory-core's errors, the first that matches: the exit status, the JSON error code and the word
#: that starts the line on standard error.
_FAILURES: tuple[tuple[type[MemoryCoreError], int, str, str], ...] = (
    (NotFoundError, EXIT_NOT_FOUND, "not_found", "not found"),
    (ValidationError, EXIT_USAGE, "validation_error", "error"),
    (ConflictError, EXIT_USAGE, "conflict", "error"),
    (DamagedFileError, EXIT_USAGE, "damaged", "error"),  # (nothing was written; the line says how to recover)
    (InputError, EXIT_USAGE, "bad_request", "error"),
    (PermanentError, EXIT_FAILURE, "failed", "error"),  # the service failed for good (a refusal, an Azure 403, ...)
    (ConfigurationError, EXIT_FAILURE, "configuration_error", "error"),
    (TransientError, EXIT_FAILURE, "unavailable", "error"),
    (MemoryCoreError, EXIT_FAILURE, "error", "error"),
)
#: Errors about a file the command was given, which say its name (bad input, not a failure).
_FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)

#: A command: runs the parsed arguments, writing to ``out``; returns the exit status.
Handler = Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]]


def _missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that brings the missing module, if it is one of memory-core's optional packages."""
    name = (exc.name or "").split(".", 1)[0]
    return EXTRAS.get(name)


def _damaged(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying a file is damaged (read from a page that is)."""
    from memory_core.adapters.sqlite.integrity import is_corrupt

    return is_corrupt(exc)


def _failure(exc: BaseException) -> tuple[int, str, str, str | None]:
    """Exit status, JSON error code, the line for standard error, and the field, for an error."""
    for kind, status, code, word in _FAILURES:
        if isinstance(exc, kind):
            return status, code, f"{word}: {exc}", exc.field if isinstance(exc, ValidationError) else None
    if isinstance(exc, ModuleNotFoundError) and (extra := _missing_extra(exc)) is not None:
        return (
            EXIT_FAILURE,
            "missing_dependency",
            f"error: this needs the optional package {exc.name!r}, which is not installed: "
            f"pip install 'memory-core[{extra}]'",
            None,
        )
    if _damaged(exc):
        return (
            EXIT_USAGE,
            "damaged",
            f"error: a memory-core file is damaged ({exc}): run `memory-core doctor`, then restore it from a "
            "backup or rebuild it from an export (see docs/operations.md, \"A damaged file\")",
            None,
        )
    if isinstance(exc, _FILE_ERRORS) and exc.filename is not None:
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
    print_json({"error": {"code": code, "message": message, "field": field}}, out)


def _wants(flag: str, argv: Sequence[str]) -> bool:
    """Whether ``flag`` is among the options of ``argv`` (before a ``--``)."""
    return flag in (argv[: argv.index("--")] if "--" in argv else argv)


def _parse(raw: list[str], out: TextIO) -> argparse.Namespace | int:
    """The parsed command line, or the exit status when there is nothing to run (help, a usage error)."""
    try:
        return build_parser().parse_args(join_order_by(raw))
    except UsageError as exc:
        sys.stderr.write(exc.usage + exc.message + "\n")
        if _wants("--json", raw):
            _report("usage_error", exc.message, None, out)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_USAGE


def _fail(exc: Exception, args: argparse.Namespace, sink: TrackedOutput | None, out: TextIO) -> int:
    """Say what failed (one line on standard error; ``--json``: the error document); its exit status."""
    status, code, line, field = _failure(exc)
    if args.debug:
        traceback.print_exception(exc, file=sys.stderr)
    message = _one_line(line)
    sys.stderr.write(f"memory-core: {message}\n")
    if sink is not None and not sink.written:
        _report(code, message.removeprefix("error: ").removeprefix("not found: "), field, out)
    return status


def _run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the parsed command; its exit status, or the status of what stopped it."""
    sink = TrackedOutput(out) if args.json else None
    handler: Handler = args.handler
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
        return _fail(exc, args, sink, out)


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run one command; returns the exit status (``EXIT_*``)."""
    out = out or sys.stdout
    raw = list(sys.argv[1:] if argv is None else argv)
    args = _parse(raw, out)
    if isinstance(args, int):
        return args
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
    return _run(args, out)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
