"""What the command line writes: its exit statuses, JSON documents and shortened text."""

from __future__ import annotations

import io
import json
from typing import Any, TextIO

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "TrackedOutput",
    "print_json",
    "short",
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


def print_json(data: Any, out: TextIO) -> None:
    """Write ``data`` as one indented JSON document."""
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


class TrackedOutput(io.TextIOBase):
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


def short(text: str, width: int = 72) -> str:
    """``text`` on one line, cut to ``width`` characters (the cut marked with an ellipsis)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
