"""Benchmarks behind ``memory-core bench``: each prints a table and can write its figures as JSON.

The table (or, with ``--json``, the figures as one JSON document) is the only thing on standard
output; progress goes to the :class:`~memory_core.tools.progress.Progress` the command passes (standard
error, and only on a terminal).
"""

from __future__ import annotations

import argparse
import importlib
from typing import TextIO

from memory_core.tools.progress import NO_PROGRESS, Progress

__all__ = [
    "run_benchmark",
]

#: Benchmarks whose module is named otherwise (``import`` is a Python keyword).
_MODULES = {"import": "import_records"}


async def run_benchmark(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """Dispatch ``memory-core bench NAME`` to ``memory_core.tools.bench.NAME.main(args, out, progress)``.

    Args:
        args: The parsed command line.
        out: Where the result goes (standard output).
        progress: Where progress goes (the CLI passes :func:`~memory_core.tools.progress.terminal_progress`).
    """
    module = importlib.import_module(f"{__name__}.{_MODULES.get(args.bench, args.bench)}")
    code: int = await module.main(args, out, progress)
    return code
