"""What the command line reads: text and JSON lines files, ``-`` meaning standard input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_core.errors import InputError

__all__ = ["input_name", "jsonl", "read_lines", "spool_stdin"]


def input_name(path: str) -> str:
    """The name of the input ``path`` in messages (``<stdin>`` for ``-``)."""
    return "<stdin>" if path == "-" else path


def read_lines(path: str) -> list[str]:
    """Every line of the text file ``path`` (``-``: standard input), read as UTF-8.

    Raises:
        PermanentError: The file cannot be read or is not UTF-8 text (one line saying which and why).
    """
    name = input_name(path)
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


def jsonl(path: str, numbers: list[int] | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a JSON lines file (``-``: standard input); blank lines are skipped.

    Args:
        path: The file, or ``-``.
        numbers: Filled with the line number of each object, if given.

    Raises:
        PermanentError: The file cannot be read, or a line is not a JSON object (names the line).
    """
    name = input_name(path)
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(read_lines(path), start=1):
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


def spool_stdin(args: argparse.Namespace, names: Sequence[str], folder: str) -> None:
    """Replace a ``-`` among the file arguments ``names`` with a file in ``folder`` holding standard input."""
    dashes = [name for name in names if getattr(args, name, None) == "-"]
    if len(dashes) > 1:
        raise InputError(f"only one of {', '.join('--' + n for n in dashes)} can read standard input")
    for name in dashes:
        target = Path(folder) / f"{name}.json"
        target.write_text("\n".join(read_lines("-")) + "\n", encoding="utf-8")
        setattr(args, name, str(target))
