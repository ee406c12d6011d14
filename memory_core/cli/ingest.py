"""``memory-core ingest``: turns through extraction and consolidation, as the queue workers take them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from memory_core.cli.arguments import positive_int
from memory_core.cli.context import progress_for, service_for
from memory_core.cli.inputs import input_name, read_lines
from memory_core.cli.output import EXIT_OK, print_json
from memory_core.errors import ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands
    from memory_core.domain.messages import Turn
    from memory_core.service.results import IngestResult

__all__ = ["EXAMPLES", "add_arguments", "cmd_ingest"]

#: The example ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {"ingest": "cat turns.jsonl | memory-core --db my.db ingest -"}


def add_arguments(commands: Commands) -> None:
    """Add ``ingest``."""
    p = commands.add_parser("ingest", help="turn messages (turn.v1 JSON lines) through extraction and consolidation")
    p.add_argument("file", help="JSON lines file, one memory-core.turn.v1 per line, or - for standard input")
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="turns of different scopes (user, agent) in flight at once, each scope's in the file's order, "
        "their passages embedded together; output stays in the file's order (1: one turn after another)",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=8,
        metavar="N",
        help="turns of one scope prepared together: extracted, and their passages embedded in one call, "
        "then consolidated one by one; the result is the same (default 8; 1: each turn on its own)",
    )
    p.set_defaults(handler=cmd_ingest)


def _write_result(turn: Turn, result: IngestResult, out: TextIO) -> None:
    """One turn's result, for people."""
    from memory_core.service.results import format_decision

    header = f"turn {turn.turn_id} ({turn.user_id}/{turn.agent_id})"
    if result.status == "duplicate":
        out.write(f"{header}: already ingested, skipped\n")
    elif result.status == "purged":
        out.write(f"{header}: dated at or before the purge of its scope, dropped\n")
    else:
        note = f", extraction fell back to rules: {result.fallback_reason}" if result.fallback_reason else ""
        out.write(f"{header}: {len(result.steps)} decision(s){note}\n")
        for step in result.steps:
            out.write("  " + format_decision(step) + "\n")


async def cmd_ingest(args: argparse.Namespace, out: TextIO) -> int:
    """Ingest every turn of the file, showing each one's decisions in the file's order."""
    from memory_core.runtime.lanes import ingest_in_lanes
    from memory_core.service.messages import parse_turns

    try:  # every line is validated before anything is ingested (or the store created)
        turns = parse_turns(read_lines(args.file))
    except ValidationError as exc:
        raise ValidationError(f"{input_name(args.file)}: {exc.field}", exc.message) from None
    concurrency = args.concurrency  # at least 1 (the parser's type)
    results: list[dict[str, Any]] = []
    # --concurrency N > 1: turns of different scopes in flight together (each scope's in the file's
    # order), their passages embedded in one call when they meet at the model, as serve's workers do
    service = service_for(args, create=True, batch_embeddings=concurrency > 1)
    async with service, progress_for(args).bar("ingesting", len(turns), unit="turns") as bar:

        def show(done: int, turn: Turn, result: IngestResult) -> None:
            """One turn's result, in the file's order (``done`` turns came before it)."""
            bar.clear()  # the turn's lines may go to the terminal the bar is drawn on
            if args.json:
                results.append(result.as_dict())
            else:
                _write_result(turn, result, out)
            bar.update(done + 1)

        bar.update(0)
        # A failure stops the run as a loop would: the turns before it are ingested and shown, no turn
        # after it starts once it has failed (turns of other scopes already in flight finish, unshown:
        # a second run skips them as already ingested), and the earliest failure is raised
        # (see memory_core.runtime.lanes).
        await ingest_in_lanes(service, turns, concurrency=concurrency, batch=args.batch, deliver=show)
        bar.update(len(turns))
    if args.json:  # one document: the results of the turns, in order
        print_json(results, out)
    return EXIT_OK
