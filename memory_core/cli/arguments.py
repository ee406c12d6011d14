"""Arguments several command groups share: whole-number types and a memory's scope (user, agent)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from memory_core.domain.records import DEFAULT_AGENT_ID

if TYPE_CHECKING:  # pragma: no cover
    from typing import TypeAlias

    #: What a command group adds its commands to (``ArgumentParser.add_subparsers``).
    Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

__all__ = ["add_scope", "non_negative_int", "positive_int"]


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def add_scope(parser: argparse.ArgumentParser, *, every_agent: bool = False) -> None:
    """``--user`` (required) and ``--agent``.

    Args:
        parser: The command's parser.
        every_agent: When true, no ``--agent`` means every agent of the user; otherwise it means
            :data:`~memory_core.domain.records.DEFAULT_AGENT_ID`, as in the Python API.
    """
    parser.add_argument("--user", required=True, help="user id")
    if every_agent:
        parser.add_argument("--agent", help="agent id (default: every agent of the user)")
    else:
        parser.add_argument(
            "--agent", default=DEFAULT_AGENT_ID, help=f"agent id (default {DEFAULT_AGENT_ID!r}, as in the Python API)"
        )
