"""Benchmarks behind ``memory-core bench``: each prints a table and can write its figures as JSON."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any, TextIO

__all__ = ["machine_context", "run_benchmark", "write_json"]


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
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


async def run_benchmark(args: argparse.Namespace, out: TextIO) -> int:
    """Dispatch ``memory-core bench NAME`` to ``memory_core.bench.NAME.main(args, out)``."""
    module = importlib.import_module(f"{__name__}.{args.bench}")
    code: int = await module.main(args, out)
    return code
