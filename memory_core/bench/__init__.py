"""Benchmarks behind ``memory-core bench``: each prints a table and can write its figures as JSON.

The table (or, with ``--json``, the figures as one JSON document) is the only thing on standard
output; progress goes to the :class:`~memory_core.progress.Progress` the command passes (standard
error, and only on a terminal).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..progress import NO_PROGRESS, Progress

__all__ = ["machine_context", "print_json", "publish", "publish_charts", "run_benchmark", "write_json"]


def machine_context() -> dict[str, Any]:
    """What the figures were measured on (so they are read with their context)."""
    import os
    import platform

    import numpy as np

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "sqlite": __import__("sqlite3").sqlite_version,
    }


def write_json(path: str | None, data: dict[str, Any]) -> None:
    """Write ``data`` as a JSON file at ``path`` (nothing when ``path`` is empty)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def print_json(data: dict[str, Any], out: TextIO) -> None:
    """``data`` as one JSON document on ``out`` (what ``--json`` prints: the same as ``--output`` writes)."""
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def publish(report: dict[str, Any], args: argparse.Namespace, out: TextIO, table: str) -> None:
    """Print a benchmark's result, its ``table`` or with ``--json`` its ``report``, and write ``--output``."""
    if getattr(args, "json", False):
        print_json(report, out)
    else:
        out.write(table)
    write_json(getattr(args, "output", None), report)


def publish_charts(written: list[str], args: argparse.Namespace, out: TextIO) -> None:
    """Say which charts were drawn (or how to get matplotlib): on ``out``, or with ``--json`` on standard error."""
    from ..evaluation.common import MATPLOTLIB_HINT

    line = ("charts: " + ", ".join(written)) if written else MATPLOTLIB_HINT
    (sys.stderr if getattr(args, "json", False) else out).write(line + "\n")


async def run_benchmark(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """Dispatch ``memory-core bench NAME`` to ``memory_core.bench.NAME.main(args, out, progress)``.

    Args:
        args: The parsed command line.
        out: Where the result goes (standard output).
        progress: Where progress goes (the CLI passes :func:`~memory_core.progress.terminal_progress`).
    """
    module = importlib.import_module(f"{__name__}.{args.bench}")
    code: int = await module.main(args, out, progress)
    return code
