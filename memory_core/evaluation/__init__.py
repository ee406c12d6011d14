"""Quality evaluations behind ``memory-core eval``: LoCoMo retrieval and the Japanese set.

``run_evaluation`` dispatches ``memory-core eval NAME`` to ``memory_core.evaluation.NAME.main(args, out)``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TextIO

__all__ = ["run_evaluation"]


async def run_evaluation(args: argparse.Namespace, out: TextIO) -> int:
    """Dispatch ``memory-core eval NAME`` to ``memory_core.evaluation.NAME.main(args, out)``."""
    module = importlib.import_module(f"{__name__}.{args.evaluation}")
    code: int = await module.main(args, out)
    return code
