"""Helpers shared by the evaluations and the benchmarks: tables, percentiles, charts and reports.

Charts need matplotlib, which is an optional extra (``pip install 'memory-core[bench]'``); it is
imported only when a chart is drawn, with the Agg backend, so nothing needs a display.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

__all__ = [
    "MATPLOTLIB_HINT",
    "add_report_arguments",
    "file_sha256",
    "grouped_bars",
    "machine_context",
    "markdown_table",
    "percentile",
    "print_json",
    "publish",
    "publish_charts",
    "publish_report",
    "pyplot",
    "save_chart",
    "write_json",
]

logger = logging.getLogger(__name__)

MATPLOTLIB_HINT = (
    "charts need matplotlib: pip install 'memory-core[bench]' (or pip install matplotlib); "
    "the tables and JSON were written without them"
)


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``--output JSON`` and ``--charts DIR`` (what :func:`publish_report` reads)."""
    parser.add_argument("--output", metavar="JSON", help="also write the report to this file")
    parser.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); NaN for no values."""
    if not len(values):
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table; floats are printed with ``digits`` decimals."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.{digits}f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def save_chart(plt: Any, fig: Any, directory: str | Path, name: str) -> str:
    """Lay ``fig`` out, write it as ``directory/name`` (PNG, 120 dpi; the folder made if missing), close it."""
    fig.tight_layout()
    target = Path(directory) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return str(target)


def grouped_bars(ax: Any, series: Sequence[tuple[str, Sequence[float] | None]], positions: int) -> None:
    """Bars of several series side by side at each of ``positions`` x positions, one label per series.

    A series whose values are None keeps its place (the others do not move) but draws nothing.
    """
    width = 0.8 / max(len(series), 1)
    for j, (label, values) in enumerate(series):
        if values is None:
            continue
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(positions)]
        ax.bar(xs, values, width=width, label=label)


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend, or None (with a warning) if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("%s", MATPLOTLIB_HINT)
        return None
    return plt


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def publish_report(
    report: dict[str, Any],
    args: Any,
    out: TextIO,
    render: Callable[[Mapping[str, Any]], str],
    draw: Callable[[dict[str, Any], str], list[str]],
) -> None:
    """Finish an evaluation: add the machine, print the result, write ``--output`` and ``--charts``.

    The result is the Markdown, or with ``--json`` the report itself as one JSON document (then
    ``out`` holds nothing else: the charts line goes to standard error).
    """
    report["machine"] = machine_context()
    publish(report, args, out, "\n" + render(report), draw=draw)


def machine_context() -> dict[str, Any]:
    """What the figures were measured on (so they are read with their context)."""
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
    }


def write_json(path: str | None, data: dict[str, Any]) -> None:
    """Write ``data`` as a JSON file at ``path`` (nothing when ``path`` is empty)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def print_json(data: dict[str, Any], out: TextIO) -> None:
    """``data`` as one JSON document on ``out`` (what ``--json`` prints: the same as ``--output`` writes)."""
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def publish(
    report: dict[str, Any],
    args: argparse.Namespace,
    out: TextIO,
    table: str,
    *,
    draw: Callable[[dict[str, Any], str], list[str]] | None = None,
) -> None:
    """Print a benchmark's result, its ``table`` or with ``--json`` its ``report``, write ``--output``,
    and with ``--charts`` the charts ``draw`` makes of the report."""
    if getattr(args, "json", False):
        print_json(report, out)
    else:
        out.write(table)
    write_json(getattr(args, "output", None), report)
    charts = getattr(args, "charts", None)
    if draw is not None and charts:
        publish_charts(draw(report, charts), args, out)


def publish_charts(written: list[str], args: argparse.Namespace, out: TextIO) -> None:
    """Say which charts were drawn (or how to get matplotlib): on ``out``, or with ``--json`` on standard error."""
    line = ("charts: " + ", ".join(written)) if written else MATPLOTLIB_HINT
    (sys.stderr if getattr(args, "json", False) else out).write(line + "\n")
