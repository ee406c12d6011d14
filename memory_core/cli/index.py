"""``memory-core index ensure``: create or update the Azure AI Search index."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from memory_core.cli.context import settings_for
from memory_core.cli.output import EXIT_OK, print_json

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_index"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "index": "memory-core index ensure",
    "index ensure": "memory-core index ensure",
}


def add_arguments(commands: Commands) -> None:
    """Add ``index ensure``."""
    p = commands.add_parser("index", help="the Azure AI Search index")
    index = p.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    index.add_parser("ensure", help="create or update the index (idempotent)")
    p.set_defaults(handler=cmd_index)


async def cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    """Ensure the index; say whether it was created, updated or unchanged."""
    from memory_core.bootstrap import ensure_search_index

    outcome = await ensure_search_index(settings_for(args))
    if args.json:
        print_json({"index": outcome}, out)
    else:
        out.write(f"index {outcome}\n")
    return EXIT_OK
