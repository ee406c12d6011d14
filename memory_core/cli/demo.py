"""``memory-core demo``: a scripted conversation through the whole local pipeline."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from memory_core.cli.context import check_new_store, settings_for
from memory_core.cli.output import print_json

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_demo"]

#: The example ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {"demo": "memory-core demo"}


def add_arguments(commands: Commands) -> None:
    """Add ``demo``."""
    p = commands.add_parser("demo", help="a scripted conversation through the whole local pipeline")
    p.add_argument(
        "--llm",
        action="store_true",
        help="extract and consolidate with the chat model MEMORY_LLM_PROVIDER configures (default: rules)",
    )
    p.add_argument(
        "--lang", choices=["ja", "en"], default="ja", help="the conversation's language (default ja: Japanese)"
    )
    p.set_defaults(handler=cmd_demo)


async def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """Run the demo (``--json``: its events as one JSON document); its exit status."""
    from memory_core.tools.demo import run_demo

    if args.db is not None:
        check_new_store(args, settings_for(args))
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
    print_json(events, out)
    return code
