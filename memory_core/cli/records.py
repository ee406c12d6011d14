"""``memory-core import``, ``export`` and ``embed``: memory records as JSON lines, in and out, and the
vectors an import left for later."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from memory_core.cli.arguments import add_scope
from memory_core.cli.context import progress_for, require_store, service_for, service_with_queue, settings_for
from memory_core.cli.inputs import input_name, jsonl
from memory_core.cli.output import EXIT_OK, print_json
from memory_core.contract.admin_views import export_response
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.records import DEFAULT_AGENT_ID, Scope
from memory_core.domain.validation import utcnow
from memory_core.errors import InputError, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_embed", "cmd_export", "cmd_import"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "import": "memory-core --db my.db import records.jsonl   # again: nothing is stored twice",
    "export": "memory-core --db my.db export --user u1 > u1.jsonl   # --entity ID: one entity's memories",
    "embed": "memory-core --db my.db embed   # after import --defer-vectors, or an interrupted import",
}


def add_arguments(commands: Commands) -> None:
    """Add ``import`` and ``export``."""
    p = commands.add_parser(
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
    p.add_argument(
        "--defer-vectors",
        action="store_true",
        help="store the records and stop: they are listed and found by keyword search at once, and "
        "`memory-core embed`, or a running `memory-core serve` on the same store, computes the vectors they "
        "lack later (the embedded store)",
    )
    p.set_defaults(handler=cmd_import)

    p = commands.add_parser(
        "embed",
        help="compute the vectors of memories stored without one (an import with --defer-vectors, or one "
        "interrupted while computing them)",
    )
    p.set_defaults(handler=cmd_embed)

    p = commands.add_parser(
        "export",
        help="a user's memory records as JSON lines, every field but the embedding (--json: the API's "
        "export, with history)",
    )
    add_scope(p, every_agent=True)
    p.add_argument(
        "--entity",
        metavar="ID",
        help="only the memories of this entity (its id from `memory-core entities`, or a unique start of it) "
        f"of --agent (default {DEFAULT_AGENT_ID!r} with --entity)",
    )
    p.add_argument("--history", metavar="FILE", help="also write the decision history, as JSON lines, to FILE")
    p.add_argument(
        "--include-vectors",
        action="store_true",
        help="keep each memory's embedding (left out by default: import computes missing embeddings)",
    )
    p.set_defaults(handler=cmd_export)


async def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    """Import the file's records (every one checked first); say how many were stored."""
    from memory_core.service.import_export import prepare_record

    lines: list[int] = []
    rows = jsonl(args.file, lines)
    settings = settings_for(args)
    policy, now = settings.policy(), utcnow()
    for number, row in zip(lines, rows, strict=True):  # every record checked before the store is touched
        try:
            prepare_record(row, policy, now)
        except ValidationError as exc:
            raise ValidationError(f"{input_name(args.file)}:{number}: {exc.field}", exc.message) from None
    async with service_for(args, create=True) as service:
        progress = progress_for(args)
        with progress.bar("storing", unit="records") as bar:
            report = await service.import_records(
                rows, dedupe=not args.allow_duplicates, progress=bar.update, defer_vectors=True
            )
        missing, filled = report.vectors_missing, None
        if missing and not args.defer_vectors:
            if not args.json:  # what is already true, should the vectors be interrupted
                out.write(
                    f"stored {report.imported + report.updated} memories (listed and found by keyword search "
                    f"now); computing {missing} vectors (if stopped, memory-core embed computes the rest)\n"
                )
                out.flush()
            with progress.bar("computing vectors", unit="memories") as bar:
                filled = await service.fill_vectors(progress=bar.update)
            missing = filled.missing
    embedded = report.embedded + (filled.filled if filled is not None else 0)
    if args.json:
        print_json(
            {
                "imported": report.imported,
                "updated": report.updated,
                "skipped": report.skipped,
                "embedded": embedded,
                "vectors_missing": missing,
            },
            out,
        )
        return EXIT_OK
    out.write(
        f"imported {report.imported} memories, updated {report.updated}, skipped {report.skipped} "
        f"(already stored or repeated); {embedded} embeddings computed\n"
    )
    if missing:
        out.write(
            f"{missing} memories have no vector yet (found by keyword search, not by meaning): "
            "memory-core embed computes them, and so does a memory-core serve running on this store\n"
        )
    return EXIT_OK


async def cmd_embed(args: argparse.Namespace, out: TextIO) -> int:
    """Compute the vectors of the memories stored without one; say how many."""
    async with service_for(args) as service:
        with progress_for(args).bar("computing vectors", unit="memories") as bar:
            report = await service.fill_vectors(progress=bar.update)
    if args.json:
        print_json({"filled": report.filled, "embedded": report.embedded, "missing": report.missing}, out)
    else:
        out.write(
            f"{report.filled} memories got their vector ({report.embedded} distinct texts embedded); "
            f"{report.missing} without one\n"
        )
    return EXIT_OK


def _write_history(path: str, entries: Iterable[HistoryEntry]) -> None:
    try:
        with Path(path).open("w", encoding="utf-8") as handle:
            for entry in entries:
                handle.write(json.dumps(entry.model_dump(mode="json"), ensure_ascii=False) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


async def _export_entity(args: argparse.Namespace, out: TextIO) -> int:
    """Write one entity's records as JSON lines (``--json``: the document ``GET
    /api/entities/{entity_id}/export`` answers)."""
    scope = Scope.of(args.user, args.agent or DEFAULT_AGENT_ID)
    async with service_for(args) as service:
        entity_id = await service.resolve_entity_id(scope, args.entity)
        found = await service.export_entity(scope, entity_id, include_vectors=args.include_vectors)
    if args.json:
        view = export_response(scope.user_id, scope.agent_id, found.records, found.history, [])
        print_json(view.model_dump(mode="json"), out)
        return EXIT_OK
    for record in found.records:
        out.write(json.dumps(record.to_json_dict(), ensure_ascii=False) + "\n")
    if args.history:
        _write_history(args.history, found.history)
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """Write the scope's records as JSON lines (``--json``: the API's export document); with
    ``--entity``, one entity's."""
    from memory_core.bootstrap import existing_local_queue

    settings = settings_for(args)
    require_store(settings)
    if args.entity is not None:
        return await _export_entity(args, out)
    async with service_with_queue(settings, existing_local_queue(settings) if args.json else None) as service:
        vectors = args.include_vectors
        if args.json:  # what every page of GET /api/users/{user_id}/export answers, in one
            records = [r async for r in service.export(args.user, args.agent, include_vectors=vectors)]
            history = await service.export_history(args.user, args.agent)
            queued = await service.queued_messages(args.user, args.agent)
            print_json(export_response(args.user, args.agent, records, history, queued).model_dump(mode="json"), out)
            return EXIT_OK
        async for record in service.export(args.user, args.agent, include_vectors=vectors):
            out.write(json.dumps(record.to_json_dict(), ensure_ascii=False) + "\n")
        if args.history:
            _write_history(args.history, await service.export_history(args.user, args.agent))
    return EXIT_OK
