"""Arguments several command groups share: whole-number types and a memory's scope (user, agent)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

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


def add_scope(parser: argparse.ArgumentParser, *, agent_required: bool = True) -> None:
    """``--user`` (required) and ``--agent`` (required unless ``agent_required`` is false)."""
    parser.add_argument("--user", required=True, help="user id")
    parser.add_argument("--agent", required=agent_required, help="agent id")
