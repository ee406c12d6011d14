"""The ``memory-core`` argument parser, built from the command groups' ``add_arguments``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast

from memory_core.cli import (
    demo,
    entities,
    forgetting,
    index,
    ingest,
    maintenance,
    memories,
    records,
    reports,
    serve,
)
from memory_core.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = [
    "COMMAND_GROUPS",
    "CommandGroup",
    "UsageError",
    "build_parser",
    "subparsers",
]


class CommandGroup(Protocol):
    """A module of commands: it adds them (each with its ``handler``) and names their examples."""

    #: The example ``--help`` shows, by the command's words after ``memory-core``.
    EXAMPLES: dict[str, str]

    def add_arguments(self, commands: Commands) -> None:
        """Add the group's commands to ``commands``."""


#: The command groups, in the order ``memory-core --help`` lists their commands.
COMMAND_GROUPS: tuple[CommandGroup, ...] = (
    demo,
    ingest,
    index,
    records,
    memories,
    entities,
    forgetting,
    reports,
    serve,
    maintenance,
)

_EXAMPLE = 'memory-core --db my.db search "window seat" --user u1 --agent travel'

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


class UsageError(Exception):
    """What argparse would print before exiting with status 2 (raised instead, so ``main`` returns)."""

    def __init__(self, usage: str, message: str) -> None:
        super().__init__(message)
        self.usage = usage
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.format_usage(), f"{self.prog}: error: {message}")


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


def subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
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
                yield from subparsers(child)


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


def _finish_commands(parser: argparse.ArgumentParser) -> None:
    """Give every command the help formatter, the global options and its example, and show the default
    of an option without help (argparse shows no help line, so no default, for one)."""
    examples = {words: text for group in COMMAND_GROUPS for words, text in group.EXAMPLES.items()}
    for words, child in subparsers(parser):
        child.formatter_class = _HelpFormatter
        _global_options(child, top=False)
        if words in examples:
            child.epilog = f"example:\n  {examples[words]}\n"
        for action in child._actions:
            if action.help is None and action.option_strings and action.default not in (None, False):
                action.help = "default: %(default)s"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each parsed command's ``handler`` runs it."""
    parser = _Parser(
        prog="memory-core",
        description="Long-term, human-like memory for AI agents.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memory-core {__version__}")
    _global_options(parser, top=True)
    # The commands' parsers are _Parsers too (argparse makes them of the top parser's class).
    commands = cast("Commands", parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    for group in COMMAND_GROUPS:
        group.add_arguments(commands)
    parser.epilog = f"{_EPILOG}\nexample:\n  {_EXAMPLE}\n"
    _finish_commands(parser)
    return parser
