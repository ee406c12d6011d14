"""``memory-core bench search``: search latency on one scope inside a large embedded store.

A synthetic store (random sentences from a mixed English/Japanese vocabulary, random unit vectors of
the embedder's size) of ``store_size`` memories split into scopes of ``scope_size``. Measured: the
store's own search (hybrid + IMPORTANT, top 5, query embedding excluded, recall off) on warm scopes,
next to the exact-cosine lower bound (one matrix-vector product over the scope's vectors plus a top-k
selection, in numpy) measured in the same run, and the first (cold) search of a scope.

With ``--growth 1000 10000 100000 1000000`` it runs the growth series instead (:func:`growth`): the
same measurement as the store grows, with the scope size fixed and with one scope growing with the
store, built by the bulk builder (:mod:`memory_core.tools.bench.bulk`), as a table, JSON and a PNG chart.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.ports import FixedClock
from memory_core.tools.bench.synthetic import random_sentence, synthetic_memory, unit_vectors
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import (
    machine_context,
    markdown_table,
    percentile,
    publish,
    pyplot,
    save_chart,
)

__all__ = [
    "build_store",
    "draw_growth_chart",
    "growth",
    "main",
    "measure",
]


async def build_store(
    path: str,
    *,
    store_size: int,
    scope_size: int,
    dims: int,
    seed: int,
    clock: FixedClock,
    progress: Progress = NO_PROGRESS,
) -> SQLiteMemoryStore:
    """Create (or reuse, if it already has ``store_size`` memories) the synthetic benchmark store."""
    store = SQLiteMemoryStore(path, clock=clock)
    if await store.count() == store_size:
        return store
    if await store.count():
        raise SystemExit(f"{path} holds another store; remove it or pick another --keep path")
    rng = np.random.default_rng(seed)
    now = clock.now()
    scopes = max(1, store_size // scope_size)
    bar = progress.bar("building store", scopes * scope_size, unit="memories")
    written = 0
    batch: list[MemoryRecord] = []
    for s in range(scopes):
        vectors = unit_vectors(rng, scope_size, dims)
        for i in range(scope_size):
            age = float(rng.uniform(0, 365))
            updated = now - timedelta(days=age)
            batch.append(
                synthetic_memory(
                    rng,
                    memory_id=f"m{s:05d}x{i:05d}",
                    scope=(f"user{s:05d}", "bench"),
                    updated=updated,
                    embedding=vectors[i].tolist(),
                )
            )
            if len(batch) == 2000:
                await store.upsert(batch)
                written += len(batch)
                batch = []
                bar.update(written)
    if batch:
        await store.upsert(batch)
        written += len(batch)
    bar.update(written)
    bar.finish()
    return store


def _exact_floor_ms(matrix: np.ndarray, vector: np.ndarray) -> float:
    """Milliseconds of the exact-cosine lower bound: one matrix-vector product and a top-5 selection."""
    started = time.perf_counter()
    sims = matrix @ vector
    top = np.argpartition(-sims, 5)[:5]
    top[np.argsort(-sims[top])]
    return (time.perf_counter() - started) * 1000


async def measure(
    store: SQLiteMemoryStore, *, scopes: int, queries: int, dims: int, seed: int, progress: Progress = NO_PROGRESS
) -> dict[str, Any]:
    """Latency figures (milliseconds) of the store's search and of the exact-cosine lower bound."""
    rng = np.random.default_rng(seed + 1)
    options = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.IMPORTANT, top=5)
    used_scopes = min(scopes, 20)
    cold: list[float] = []
    for s in range(used_scopes):
        scope = Scope.of(f"user{s:05d}", "bench")
        vector = unit_vectors(rng, 1, dims)[0].tolist()
        t0 = time.perf_counter()
        await store.search(SearchRequest(scope, random_sentence(rng), vector, options))
        cold.append((time.perf_counter() - t0) * 1000)
    warm: list[float] = []
    lower: list[float] = []
    matrices = {}
    for s in range(used_scopes):
        # Every vector of the scope (pages of 10,000), so the floor of a larger scope covers all of it.
        embeddings: list[list[float] | None] = []
        cursor: str | None = None
        while True:
            request = PageRequest(after=cursor, limit=10_000, with_embedding=True)
            page = await store.scan(Scope.of(f"user{s:05d}", "bench"), request)
            embeddings.extend(r.embedding for r in page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        matrices[s] = np.asarray(embeddings, dtype=np.float32)
    bar = progress.bar("searching", queries, unit="queries")
    for q in range(queries):
        s = q % used_scopes
        scope = Scope.of(f"user{s:05d}", "bench")
        text = random_sentence(rng)
        vector = unit_vectors(rng, 1, dims)[0]
        t0 = time.perf_counter()
        result = await store.search(SearchRequest(scope, text, vector.tolist(), options))
        warm.append((time.perf_counter() - t0) * 1000)
        assert len(result.hits) == 5
        lower.append(_exact_floor_ms(matrices[s], vector))
        bar.update(q + 1)
    bar.finish()
    return {
        "search_ms": {
            "p50": percentile(warm, 50),
            "p90": percentile(warm, 90),
            "p99": percentile(warm, 99),
            "mean": statistics.fmean(warm),
        },
        "exact_cosine_lower_bound_ms": {"p50": percentile(lower, 50), "p99": percentile(lower, 99)},
        "cold_first_search_ms": {"p50": percentile(cold, 50), "max": max(cold)},
        "ratio_p50_to_lower_bound": percentile(warm, 50) / max(percentile(lower, 50), 1e-9),
    }


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench search``: one configuration, or the growth series with ``--growth``."""
    if getattr(args, "growth", None):
        return await growth(args, out, progress)
    clock = FixedClock(datetime(2026, 11, 1, tzinfo=UTC))
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or str(Path(tmp) / "bench.db")
        store = await build_store(
            path,
            store_size=args.store_size,
            scope_size=args.scope_size,
            dims=args.dimensions,
            seed=args.seed,
            clock=clock,
            progress=progress,
        )
        try:
            figures = await measure(
                store,
                scopes=max(1, args.store_size // args.scope_size),
                queries=args.queries,
                dims=args.dimensions,
                seed=args.seed,
                progress=progress,
            )
        finally:
            await store.close()
    report = {
        "benchmark": "search",
        "configuration": {
            "mode": "hybrid",
            "ranking_profile": "important",
            "top": 5,
            "store_size": args.store_size,
            "scope_size": args.scope_size,
            "dimensions": args.dimensions,
            "queries": args.queries,
            "query_embedding": "excluded",
        },
        "machine": machine_context(),
        **figures,
    }
    s, lb, cold = report["search_ms"], report["exact_cosine_lower_bound_ms"], report["cold_first_search_ms"]
    publish(
        report,
        args,
        out,
        "\n| measure (ms) | p50 | p99 |\n|---|---|---|\n"
        f"| search (hybrid + IMPORTANT, top 5) | {s['p50']:.3f} | {s['p99']:.3f} |\n"
        f"| exact-cosine lower bound | {lb['p50']:.3f} | {lb['p99']:.3f} |\n"
        f"| first search of a scope (cold load) | {cold['p50']:.3f} | max {cold['max']:.3f} |\n"
        f"\nsearch p50 is {report['ratio_p50_to_lower_bound']:.1f}x the lower bound "
        f"({args.scope_size} memories in the scope, {args.store_size} in the store, "
        f"{report['machine']['cpus']} CPUs)\n",
    )
    return 0


# -- the growth series ---------------------------------------------------------------------------
def _scope_name(s: int) -> Scope:
    return Scope.of(f"user{s:06d}", "bench")


async def _measure_growth_point(
    path: str,
    *,
    scopes: int,
    scope_size: int,
    queries: int,
    dims: int,
    seed: int,
    clock: FixedClock,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Warm/cold latency of hybrid + IMPORTANT top 5 on the store at ``path`` (built by the bulk builder)."""
    store = SQLiteMemoryStore(path, clock=clock, cache_documents=max(200_000, scope_size))
    rng = np.random.default_rng(seed + 1)
    options = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.IMPORTANT, top=5)
    used = min(scopes, 20)
    try:
        cold: list[float] = []
        for s in range(used):
            t0 = time.perf_counter()
            await store.search(
                SearchRequest(_scope_name(s), random_sentence(rng), unit_vectors(rng, 1, dims)[0].tolist(), options)
            )
            cold.append((time.perf_counter() - t0) * 1000)
        warm: list[float] = []
        bar = progress.bar(f"searching ({scopes} scope(s) of {scope_size:,})", queries, unit="queries")
        for q in range(queries):
            scope = _scope_name(q % used)
            text, vector = random_sentence(rng), unit_vectors(rng, 1, dims)[0].tolist()
            t0 = time.perf_counter()
            await store.search(SearchRequest(scope, text, vector, options))
            warm.append((time.perf_counter() - t0) * 1000)
            bar.update(q + 1)
        bar.finish()
    finally:
        await store.close()
    # A new process on the same file: large scopes load the index the first one saved.
    store = SQLiteMemoryStore(path, clock=clock, cache_documents=max(200_000, scope_size))
    reload: list[float] = []
    try:
        for s in range(min(used, 5)):
            t0 = time.perf_counter()
            await store.search(
                SearchRequest(_scope_name(s), random_sentence(rng), unit_vectors(rng, 1, dims)[0].tolist(), options)
            )
            reload.append((time.perf_counter() - t0) * 1000)
    finally:
        await store.close()
    matrix = unit_vectors(rng, scope_size, dims)
    lower: list[float] = []
    for _ in range(min(queries, 50)):
        lower.append(_exact_floor_ms(matrix, unit_vectors(rng, 1, dims)[0]))
    return {
        "search_ms": {"p50": percentile(warm, 50), "p95": percentile(warm, 95), "p99": percentile(warm, 99)},
        "cold_first_search_ms": {"p50": percentile(cold, 50), "max": max(cold)},
        "cold_new_process_ms": {"p50": percentile(reload, 50), "max": max(reload)},
        "exact_cosine_lower_bound_ms": {"p50": percentile(lower, 50)},
    }


async def growth(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench search --growth N ...``: latency as the store grows.

    Two series over the same store sizes: the scope size fixed (``--scope-size``) while the store
    grows, and one scope growing with the store (up to ``--growing-max``). Stores are built with the
    bulk builder and kept in ``--keep-dir`` when given (reused by later runs).
    """
    from memory_core.tools.bench.bulk import BulkSpec, bulk_build
    clock = FixedClock(datetime(2026, 11, 1, tzinfo=UTC))
    points: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep_dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in sorted(set(args.growth)):
            for series, scope_size in (("fixed scope", min(args.scope_size, size)), ("growing scope", size)):
                if series == "growing scope" and size > args.growing_max:
                    continue
                path = folder / f"search-{size}-{scope_size}-{args.dimensions}-{args.seed}.db"
                progress.note(f"{series}: {size:,} memories, scopes of {scope_size:,}")
                if not path.exists():
                    spec = BulkSpec(
                        store_size=size, scope_size=scope_size, dimensions=args.dimensions, now=clock.now(), seed=args.seed
                    )
                    try:
                        bulk_build(path, spec, progress=progress)
                    except BaseException:
                        for leftover in folder.glob(path.name + "*"):
                            leftover.unlink()
                        raise
                figures = await _measure_growth_point(
                    str(path),
                    scopes=-(-size // scope_size),
                    scope_size=scope_size,
                    queries=args.queries,
                    dims=args.dimensions,
                    seed=args.seed,
                    clock=clock,
                    progress=progress,
                )
                points.append({"series": series, "store_size": size, "scope_size": scope_size, **figures})
                if not args.keep_dir:
                    for leftover in folder.glob(path.name + "*"):
                        leftover.unlink()
    report = {
        "benchmark": "search-growth",
        "configuration": {
            "mode": "hybrid",
            "ranking_profile": "important",
            "top": 5,
            "sizes": sorted(set(args.growth)),
            "scope_size": args.scope_size,
            "growing_max": args.growing_max,
            "dimensions": args.dimensions,
            "queries": args.queries,
            "query_embedding": "excluded",
        },
        "machine": machine_context(),
        "points": points,
    }
    rows = [
        [
            p["series"],
            f"{p['store_size']:,}",
            f"{p['scope_size']:,}",
            p["search_ms"]["p50"],
            p["search_ms"]["p95"],
            p["cold_first_search_ms"]["p50"],
            p["cold_new_process_ms"]["p50"],
            p["exact_cosine_lower_bound_ms"]["p50"],
        ]
        for p in points
    ]
    publish(
        report,
        args,
        out,
        "\n"
        + markdown_table(
            [
                "series",
                "store",
                "scope",
                "search p50 ms",
                "search p95 ms",
                "cold first search ms",
                "cold, next process ms",
                "exact-cosine p50 ms",
            ],
            rows,
        ),
        draw=draw_growth_chart,
    )
    return 0


def draw_growth_chart(report: dict[str, Any], directory: str | Path) -> list[str]:
    """``search_growth.png``: p50/p95 search latency against store size, one line per series."""
    plt = pyplot()
    if plt is None:
        return []
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for series, color in (("fixed scope", "#4472c4"), ("growing scope", "#ed7d31")):
        pts = [p for p in report["points"] if p["series"] == series]
        if not pts:
            continue
        xs = [p["store_size"] for p in pts]
        ax.plot(xs, [p["search_ms"]["p50"] for p in pts], marker="o", color=color, label=f"{series} p50")
        ax.plot(xs, [p["search_ms"]["p95"] for p in pts], marker="^", linestyle="--", color=color, label=f"{series} p95")
        floor = [p["exact_cosine_lower_bound_ms"]["p50"] for p in pts]
        ax.plot(xs, floor, marker=".", linestyle=":", color=color, label=f"{series}: exact-cosine floor p50")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories in the store")
    ax.set_ylabel("search latency (ms)")
    ax.set_title(
        f"hybrid + IMPORTANT, top 5; fixed scope = {report['configuration']['scope_size']:,} memories", fontsize=9
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return [save_chart(plt, fig, directory, "search_growth.png")]
