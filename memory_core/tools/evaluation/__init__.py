"""Quality evaluations behind ``memory-core eval``: LoCoMo retrieval and the Japanese set.

``run_evaluation`` dispatches ``memory-core eval NAME`` to
``memory_core.tools.evaluation.NAME.main(args, out, progress)``: the report on ``out``, progress to ``progress``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TextIO

from memory_core.tools.progress import NO_PROGRESS, Progress

__all__ = ["run_evaluation"]


async def run_evaluation(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """Dispatch ``memory-core eval NAME`` to ``memory_core.tools.evaluation.NAME.main(args, out, progress)``.

    Args:
        args: The parsed command line.
        out: Where the report goes: Markdown, or with ``--json`` one JSON document (standard output).
        progress: Where progress goes (the CLI passes :func:`~memory_core.tools.progress.terminal_progress`).
    """
    module = importlib.import_module(f"{__name__}.{args.evaluation}")
    code: int = await module.main(args, out, progress)
    return code
