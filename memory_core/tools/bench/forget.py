"""``memory-core bench forget``: the nightly forgetting job over a large embedded store.

A synthetic store (default 1M memories with 384-dimensional embeddings, built by
:mod:`memory_core.tools.bench.bulk`) whose stored retention scores and statuses are what the policy gave
one day before the run, as if the job had run the night before. Then, each in a fresh process (so its
peak resident memory is its own):

1. ``dry run``: scan everything, write nothing;
2. ``apply``: the night's real run; it writes only memories whose status changes or whose stored
   retention drifted past the tolerance;
3. ``apply again`` at the same moment: nothing is left to write;
4. ``next night``: one day later.

Reported per run: seconds, memories scanned per second, how many were written / archived /
reactivated / rescored, and peak RSS (``VmHWM`` on Linux, else ``ru_maxrss``) next to the RSS before the run; with
``--tracemalloc``, an extra dry run measures the Python heap peak (slower, timed separately).
``--keep PATH`` builds the store once at PATH and reuses it; the runs work on a temporary copy, so
every invocation starts from the same "night before".
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from memory_core.tools.progress import NO_PROGRESS, Progress, terminal_progress
from memory_core.tools.reporting import (
    machine_context,
    markdown_table,
    publish,
    pyplot,
    save_chart,
)

__all__ = ["forgetting_figures", "main", "measure_job"]

_BUILD_AT = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)


def _rss_mb() -> float:
    """Current resident set size in MiB (Linux ``/proc``; falls back to the peak elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as stream:
            pages = int(stream.read().split()[1])
        import os

        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return _peak_mb()


def _peak_mb() -> float:
    """Peak resident set size in MiB: ``VmHWM`` on Linux (reset by exec, unlike ``ru_maxrss``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def measure_job(
    path: str,
    at: str,
    *,
    dry_run: bool,
    tolerance: float,
    page_size: int,
    progress: bool,
    tracemalloc_on: bool = False,
    label: str = "forgetting",
) -> dict[str, Any]:
    """One forgetting job over the store at ``path`` at moment ``at`` (ISO); its figures.

    Runs in the calling process (with its own event loop); :func:`main` calls it in a fresh process per
    run. ``progress``: draw a bar labelled ``label`` on this process's standard error if it is a terminal.
    """
    import asyncio

    return asyncio.run(
        forgetting_figures(
            path,
            at,
            dry_run=dry_run,
            tolerance=tolerance,
            page_size=page_size,
            progress=terminal_progress(quiet=not progress),
            tracemalloc_on=tracemalloc_on,
            label=label,
        )
    )


async def forgetting_figures(
    path: str,
    at: str,
    *,
    dry_run: bool,
    tolerance: float,
    page_size: int,
    progress: Progress = NO_PROGRESS,
    tracemalloc_on: bool = False,
    label: str = "forgetting",
) -> dict[str, Any]:
    """The figures of one forgetting job (see :func:`measure_job`), in the running event loop."""
    from memory_core.adapters.sqlite.store import SQLiteMemoryStore
    from memory_core.domain.policy import COUNTERS, HumanMemoryPolicy
    from memory_core.ports import FixedClock
    from memory_core.service.forgetting import apply_forgetting

    now = datetime.fromisoformat(at)
    store = SQLiteMemoryStore(path, clock=FixedClock(now))
    total = await store.count()
    rss_before = _rss_mb()
    if tracemalloc_on:
        import tracemalloc

        tracemalloc.start()
    bar = progress.bar(label, total, unit="memories")
    started, cpu_started = time.perf_counter(), time.process_time()
    cursor = None
    totals: dict[str, int] = dict.fromkeys(COUNTERS, 0)
    policy = HumanMemoryPolicy()
    while True:
        report = await apply_forgetting(
            store,
            policy,
            now,
            dry_run=dry_run,
            limit=page_size * 5,
            cursor=cursor,
            tolerance=tolerance,
            page_size=page_size,
        )
        for name in totals:
            totals[name] += int(getattr(report, name))
        bar.update(totals["scanned"])
        cursor = report.next_cursor
        if cursor is None:
            break
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    bar.finish()
    heap_peak = None
    if tracemalloc_on:
        import tracemalloc

        heap_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    await store.close()
    return {
        **totals,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "scanned_per_second": totals["scanned"] / seconds if seconds else 0.0,
        "rss_before_mb": rss_before,
        "peak_rss_mb": _peak_mb(),
        "tracemalloc_peak_mb": heap_peak,
    }


def _in_child(kwargs: dict[str, Any]) -> dict[str, Any]:
    return measure_job(**kwargs)


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench forget``: the table (or ``--json``) on ``out``, progress to ``progress``."""
    from memory_core.tools.bench.bulk import BulkSpec, bulk_build

    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or str(Path(tmp) / "forget.db")
        spec = BulkSpec(
            store_size=args.store_size,
            scope_size=args.scope_size,
            dimensions=args.dimensions,
            now=_BUILD_AT,
            seed=args.seed,
            retention_at=_BUILD_AT,
        )
        started = time.perf_counter()
        built = False
        if not Path(path).exists():
            bulk_build(path, spec, progress=progress)
            built = True
        build_seconds = time.perf_counter() - started
        if args.keep:
            # Runs change the store: work on a copy, so the kept store stays "the night before".
            work = str(Path(tmp) / "forget-work.db")
            shutil.copyfile(path, work)
            path = work
        night = _BUILD_AT + timedelta(days=1)
        plan = [
            ("dry run", night, True, False),
            ("apply", night, False, False),
            ("apply again", night, False, False),
            ("next night", night + timedelta(days=1), False, False),
        ]
        if args.tracemalloc:
            plan.append(("dry run, tracemalloc", night + timedelta(days=1), True, True))
        runs = []
        ctx = multiprocessing.get_context("spawn")
        for name, at, dry, traced in plan:
            kwargs = {
                "path": path,
                "at": at.isoformat(),
                "dry_run": dry,
                "tolerance": args.tolerance,
                "page_size": args.page_size,
                "tracemalloc_on": traced,
                "label": f"forgetting: {name}",
            }
            if args.in_process:
                figures = await forgetting_figures(**kwargs, progress=progress)
            else:
                with ctx.Pool(1) as pool:  # the child draws on the same standard error when it is a terminal
                    figures = pool.apply(_in_child, ({**kwargs, "progress": progress.enabled},))
            runs.append({"run": name, "at": at.isoformat(), "dry_run": dry, **figures})
        size_mb = Path(path).stat().st_size / 2**20
    report = {
        "benchmark": "forget",
        "configuration": {
            "store_size": args.store_size,
            "scope_size": args.scope_size,
            "dimensions": args.dimensions,
            "tolerance": args.tolerance,
            "page_size": args.page_size,
            "store_file_mb": size_mb,
            "build_seconds": build_seconds if built else None,
            "separate_processes": not args.in_process,
        },
        "machine": machine_context(),
        "runs": runs,
    }
    rows = [
        [
            r["run"],
            r["scanned"],
            r["written"],
            r["archived"],
            r["reactivated"],
            r["rescored"],
            r["seconds"],
            r["cpu_seconds"],
            f"{r['scanned_per_second']:,.0f}",
            f"{r['rss_before_mb']:.0f} -> {r['peak_rss_mb']:.0f}",
            "" if r["tracemalloc_peak_mb"] is None else f"{r['tracemalloc_peak_mb']:.1f}",
        ]
        for r in runs
    ]
    table = (
        "\n"
        + markdown_table(
            [
                "run",
                "scanned",
                "written",
                "archived",
                "reactivated",
                "rescored",
                "seconds",
                "CPU s",
                "scanned/s",
                "RSS MiB (before -> peak)",
                "heap peak MiB",
            ],
            rows,
            digits=2,
        )
        + f"\n{args.store_size:,} memories ({args.dimensions}-d embeddings, {size_mb:,.0f} MiB file), "
        f"tolerance {args.tolerance}, pages of {args.page_size:,}"
        + (f"; built in {build_seconds:.1f}s" if built else "")
        + "\n"
    )
    publish(report, args, out, table, draw=draw_chart)
    return 0


def draw_chart(report: dict[str, Any], directory: str | Path) -> list[str]:
    """``forget.png``: seconds and records written per run. Returns the files written."""
    plt = pyplot()
    if plt is None:
        return []
    runs = [r for r in report["runs"] if r["tracemalloc_peak_mb"] is None]
    names = [r["run"] for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.bar(names, [r["seconds"] for r in runs], color="#4472c4")
    left.axhline(60, color="#c00000", linestyle="--", linewidth=1, label="60 s budget")
    left.set_ylabel("seconds")
    left.set_title(f"forgetting over {report['configuration']['store_size']:,} memories", fontsize=9)
    left.legend(fontsize=8)
    right.bar(names, [r["written"] for r in runs], color="#70ad47", label="written")
    right.set_ylabel("records written")
    right.set_title("records written (only status changes and drift past tolerance)", fontsize=9)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8, rotation=20)
        ax.grid(axis="y", alpha=0.3)
    return [save_chart(plt, fig, directory, "forget.png")]
