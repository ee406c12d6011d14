"""``memory-core bench ann``: the approximate vector index (HNSW, ``usearch``) against exact search.

Two kinds of data:

* real multilingual-e5-small vectors: the turns of LoCoMo (``--locomo``, English) and the utterances
  of JDD (``--jdd``, Japanese), embedded as passages with the project's
  :class:`~memory_core.adapters.models.local_embedder.E5LocalEmbedder`; the queries are LoCoMo's questions
  and a sample of JDD utterances, embedded as queries. The embedded matrices are cached as ``.npy``
  files under ``--cache`` (the data itself is read from where it lies, never copied);
* e5-derived sets at the sizes of ``--derived`` (default 100,000): mixtures of two real passages plus
  a little noise (:func:`~memory_core.tools.bench.ann_vectors.derived_from`), with the real queries: a larger store of sentences;
* random unit vectors at the sizes of ``--sizes`` (default 10,000 and 100,000), queries random too:
  the worst case for a graph index (in 384 dimensions the nearest neighbours of a random query are
  barely nearer than any other vector), kept for the build, size, load and latency figures.

For each set and each ``--threads`` count: build time, serialized size, load time (a copy and a
zero-copy view), query latency p50/p99 at each ``--k`` next to the exact search on the same machine
(one matrix-vector product over the float32 matrix plus a top-k selection, in numpy), and recall@k
against exact. With ``--sweep``, recall and latency for a range of ``expansion_search`` and
``connectivity`` values; with ``--filters``, the oversampling a filtered search needs: the multiple of
``k`` to request from the index so that the top ``k`` of the candidates that pass a random filter
(keeping 90 % / 50 % of the documents) match the exact filtered top ``k`` with recall ≥ 0.99.

With ``--store N`` the index is measured where users meet it: ``N`` e5-derived vectors are written as
one scope of a SQLite store, which is searched (vector, and hybrid + ``important``) by a store with
``MEMORY_VECTOR_INDEX_MIN_SCOPE`` off and by one with it on (:mod:`memory_core.adapters.sqlite.ann`):
the background build's time, latency p50/p99 of both, how often the top 10 agree, and the store's own
checks against exact search.

Pin ``OMP_NUM_THREADS`` (the embedder and numpy) when comparing figures; the exact search is measured
single-threaded when ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.tools.bench.ann_vectors import derived_from, load_real_vectors, random_unit
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import machine_context, publish

__all__ = [
    "add_arguments",
    "exact_top_k",
    "main",
    "measure_set",
    "oversampling",
]


# -- measurement ----------------------------------------------------------------------------------
def exact_top_k(matrix: np.ndarray, query: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Row numbers of the exact top ``k`` of ``matrix @ query`` (best first), among ``mask`` if given."""
    sims = matrix @ query
    if mask is not None:
        sims = np.where(mask, sims, -np.inf)
    k = min(k, sims.shape[0])
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top], kind="stable")]


def _ms(seconds: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000.0, q))


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return len(np.intersect1d(found, truth, assume_unique=False)) / max(len(truth), 1)


def _timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[Any, float]:
    """``fn()``'s result and its best wall time in seconds over ``repeat`` runs."""
    best = math.inf
    result: Any = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return result, best


def _latencies(
    fn: Callable[[np.ndarray], Any], queries: np.ndarray, rounds: int = 3
) -> tuple[list[float], list[Any]]:
    """Per-query wall time of ``fn`` (the best of ``rounds`` passes over all queries) and its results.

    All the queries of one kind run back to back, so each path is measured warm (the exact search's
    pass over the matrix does not evict the graph between two graph searches, nor the reverse);
    the best of several passes drops the noise of other jobs on the machine.
    """
    best = [math.inf] * len(queries)
    results: list[Any] = [None] * len(queries)
    for _ in range(rounds):
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            results[i] = fn(q)
            best[i] = min(best[i], time.perf_counter() - t0)
    return best, results


def _first_keys(index: Any, query: np.ndarray, *, k: int) -> np.ndarray:
    keys: np.ndarray = index.search(query, k)[0]
    return keys


def _search_figures(index: Any, matrix: np.ndarray, queries: np.ndarray, ks: Sequence[int]) -> dict[str, Any]:
    """Latency and recall@k of ``index`` next to exact search, for each k."""
    figures: dict[str, Any] = {}
    for k in ks:
        approx_t, found = _latencies(functools.partial(_first_keys, index, k=k), queries)
        exact_t, truths = _latencies(functools.partial(exact_top_k, matrix, k=k), queries)
        recalls = [_recall(f, t) for f, t in zip(found, truths, strict=True)]
        figures[f"k={k}"] = {
            "approximate_ms": {"p50": _ms(approx_t, 50), "p99": _ms(approx_t, 99)},
            "exact_ms": {"p50": _ms(exact_t, 50), "p99": _ms(exact_t, 99)},
            "speedup_p50": _ms(exact_t, 50) / max(_ms(approx_t, 50), 1e-9),
            "recall_mean": statistics.fmean(recalls),
            "recall_min": min(recalls),
            "queries_below_0_99": sum(r < 0.99 for r in recalls),
        }
    return figures


def measure_set(
    name: str,
    matrix: np.ndarray,
    queries: np.ndarray,
    *,
    ks: Sequence[int] = (10, 50),
    threads: Sequence[int] = (1, 2),
    params: dict[str, Any] | None = None,
    determinism: bool = True,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Build, serialize, load and search one set; every figure next to exact search.

    Args:
        name: Label of the set.
        matrix: ``n x d`` unit float32 rows (keys are the row numbers).
        queries: ``q x d`` unit float32 queries.
        ks: Result counts to measure.
        threads: Build thread counts to time (the searches use the first build).
        params: ``connectivity`` / ``expansion_add`` / ``expansion_search`` (defaults otherwise).
        determinism: Also build a second time with each thread count and compare the searches.
        progress: Where progress goes.

    Returns:
        The figures.
    """
    from memory_core.adapters.sqlite.vector_index import ApproximateVectorIndex

    params = dict(params or {})  # connectivity, expansion_add, expansion_search
    report: dict[str, Any] = {
        "set": name,
        "n": int(matrix.shape[0]),
        "dims": int(matrix.shape[1]),
        "builds": {},
    }
    first: Any = None
    for t in threads:
        index, seconds = _timed(functools.partial(ApproximateVectorIndex.build, matrix, threads=t, **params))
        entry: dict[str, Any] = {
            "seconds": seconds,
            "seconds_per_100k": seconds * 100_000 / max(matrix.shape[0], 1),
            "vectors_per_second": matrix.shape[0] / max(seconds, 1e-9),
        }
        if determinism:
            again = ApproximateVectorIndex.build(matrix, threads=t, **params)
            probe = queries[: min(50, len(queries))]
            same = all(np.array_equal(index.search(q, 50)[0], again.search(q, 50)[0]) for q in probe)
            entry["same_results_when_built_again"] = bool(same)
            entry["same_bytes_when_built_again"] = bool(index.to_bytes() == again.to_bytes())
            del again
        report["builds"][f"threads={t}"] = entry
        progress.bar(f"{name}: built (threads={t})", 1).finish()
        if first is None:
            first = index
        else:
            del index
    data, save_s = _timed(first.to_bytes)
    report["serialized_bytes"] = len(data)
    report["serialized_bytes_per_vector"] = len(data) / max(matrix.shape[0], 1)
    report["matrix_bytes"] = int(matrix.nbytes)
    report["to_bytes_seconds"] = save_s
    _, view_s = _timed(lambda: ApproximateVectorIndex.from_bytes(data, view=True), repeat=3)
    _, copy_s = _timed(lambda: ApproximateVectorIndex.from_bytes(data, view=False), repeat=3)
    report["load_ms"] = {"view": view_s * 1000, "copy": copy_s * 1000}
    viewed = ApproximateVectorIndex.from_bytes(data, view=True)
    report["viewed_search_same_as_built"] = bool(
        all(np.array_equal(viewed.search(q, 50)[0], first.search(q, 50)[0]) for q in queries[:50])
    )
    for q in queries[:20]:  # warm both paths
        first.search(q, max(ks))
        exact_top_k(matrix, q, max(ks))
    report["search"] = _search_figures(first, matrix, queries, ks)
    return report


def sweep(
    matrix: np.ndarray,
    queries: np.ndarray,
    *,
    k: int = 50,
    connectivities: Sequence[int] = (8, 16, 32),
    expansion_adds: Sequence[int] = (128, 256),
    expansions: Sequence[int] = (64, 128, 192, 256, 384, 512),
    dtypes: Sequence[str] = ("f32",),
    threads: int = 1,
) -> list[dict[str, Any]]:
    """Recall@k and latency across ``connectivity`` x ``expansion_add`` x ``expansion_search`` x storage."""
    from memory_core.adapters.sqlite.vector_index import ApproximateVectorIndex

    rows: list[dict[str, Any]] = []
    truths = [exact_top_k(matrix, q, k) for q in queries]
    for dtype in dtypes:
        for m, ea in [(m, ea) for m in connectivities for ea in expansion_adds]:
            index, seconds = _timed(
                functools.partial(
                    ApproximateVectorIndex.build,
                    matrix,
                    threads=threads,
                    connectivity=m,
                    expansion_add=ea,
                    dtype=dtype,
                )
            )
            size = len(index.to_bytes())
            for ef in expansions:
                index.expansion_search = ef
                times, found = _latencies(functools.partial(_first_keys, index, k=k), queries, rounds=2)
                recalls = [_recall(f, t) for f, t in zip(found, truths, strict=True)]
                rows.append(
                    {
                        "dtype": dtype,
                        "connectivity": m,
                        "expansion_add": ea,
                        "expansion_search": ef,
                        "build_seconds": seconds,
                        "build_threads": threads,
                        "serialized_bytes": size,
                        "p50_ms": _ms(times, 50),
                        "recall_mean": statistics.fmean(recalls),
                        "recall_min": min(recalls),
                    }
                )
    return rows


def oversampling(
    index: Any,
    matrix: np.ndarray,
    queries: np.ndarray,
    *,
    k: int = 50,
    kept: Sequence[float] = (0.9, 0.5),
    multiples: Sequence[float] = (1, 1.5, 2, 3, 4, 6, 8, 12),
    seed: int = 7,
) -> list[dict[str, Any]]:
    """Recall@k of "request ``multiple * k``, filter, rescore exactly, keep ``k``" against exact filtered.

    The filter keeps each document with probability ``kept`` (a fresh random mask per query), the
    worst case for a graph index (no correlation between the filter and the vectors).
    """
    from memory_core.adapters.sqlite.vector_index import candidates_to_request

    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    n = matrix.shape[0]
    for fraction in kept:
        masks: list[np.ndarray] = [np.asarray(rng.random((n,)) < fraction) for _ in queries]
        truths = [exact_top_k(matrix, q, k, mask) for q, mask in zip(queries, masks, strict=True)]
        plans: list[tuple[str, int]] = [(f"{m}k", math.ceil(m * k)) for m in multiples]
        plans.append(("candidates_to_request", candidates_to_request(k, fraction, size=n)))
        for label, request in plans:
            recalls: list[float] = []
            fallbacks = 0
            times: list[float] = []
            for q, mask, truth in zip(queries, masks, truths, strict=True):
                t0 = time.perf_counter()
                keys, _ = index.search(q, request)
                keys = keys[mask[keys]]
                if keys.size < k:
                    fallbacks += 1
                    found = exact_top_k(matrix, q, k, mask)
                else:
                    sims = matrix[keys] @ q
                    found = keys[np.argsort(-sims, kind="stable")[:k]]
                times.append(time.perf_counter() - t0)
                recalls.append(_recall(found, truth))
            rows.append(
                {
                    "kept_fraction": fraction,
                    "plan": label,
                    "requested": request,
                    "recall_mean": statistics.fmean(recalls),
                    "recall_min": min(recalls),
                    "exact_fallbacks": fallbacks,
                    "p50_ms": _ms(times, 50),
                }
            )
    return rows


# -- the command ----------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``memory-core bench ann`` (``--json`` is the CLI's global option)."""
    parser.add_argument("--locomo", metavar="PATH", help="locomo10.json (English turns and questions)")
    parser.add_argument("--jdd", metavar="PATH", help="jdd_topic1_dailylife.json (Japanese utterances)")
    parser.add_argument("--cache", metavar="DIR", help="where the embedded real vectors are cached (.npy)")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[10_000, 100_000],
        help="random unit-vector sets (0 or none: skip)",
    )
    parser.add_argument(
        "--derived",
        type=int,
        nargs="*",
        default=[100_000],
        help="sets of this size derived from the real vectors (mixtures of two rows plus noise; needs --locomo/--jdd)",
    )
    parser.add_argument("--dimensions", type=int, default=384, help="dimensions of the random vectors")
    parser.add_argument("--k", type=int, nargs="+", default=[10, 50], help="result counts to measure")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="build thread counts to time")
    parser.add_argument("--queries", type=int, default=200, help="queries per set")
    parser.add_argument("--connectivity", type=int, default=None, help="HNSW edges per node")
    parser.add_argument("--expansion-add", type=int, default=None, help="HNSW candidate list while building")
    parser.add_argument(
        "--expansion-search", type=int, default=None, help="HNSW candidate list while searching"
    )
    parser.add_argument("--sweep", action="store_true", help="recall and latency across the HNSW parameters")
    parser.add_argument("--filters", action="store_true", help="the oversampling random filters need")
    parser.add_argument("--no-determinism", action="store_true", help="skip the second builds")
    parser.add_argument(
        "--store",
        type=int,
        default=0,
        metavar="N",
        help="also measure a SQLite store scope of N e5-derived memories with the approximate index off and on",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", metavar="PATH", help="also write the figures as JSON to PATH")


async def measure_store(
    matrix: np.ndarray, queries: np.ndarray, *, k: int = 50, top: int = 10, progress: Progress = NO_PROGRESS
) -> dict[str, Any]:
    """One scope of ``len(matrix)`` memories in a SQLite store, searched with the approximate index
    off and on (the index built in the background by the store itself; see the module docstring)."""
    import tempfile
    from datetime import UTC, datetime

    from memory_core.adapters.sqlite.store import SQLiteMemoryStore
    from memory_core.domain.records import MemoryRecord, Scope
    from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
    from memory_core.domain.search_request import SearchRequest

    scope = Scope.of("bench-user", "bench-agent")
    written = datetime.now(UTC)
    n = len(matrix)
    with tempfile.TemporaryDirectory(prefix="memory-core-bench-ann-") as tmp:
        path = str(Path(tmp) / "store.db")
        writer = SQLiteMemoryStore(path, cache_documents=max(200_000, n))
        bar = progress.bar("writing", n, unit="memories")
        for start in range(0, n, 5_000):
            rows = [
                MemoryRecord.model_validate(
                    {
                        "id": f"m-{i:07d}",
                        "user_id": scope.user_id,
                        "agent_id": scope.agent_id,
                        "memory": f"memory number {i}",
                        "importance": 0.3 + 0.4 * ((i * 7919) % 100) / 100,
                        "created_at": written,
                        "updated_at": written,
                        "embedding": matrix[i].tolist(),
                    }
                )
                for i in range(start, min(n, start + 5_000))
            ]
            await writer.upsert(rows)
            bar.update(min(n, start + 5_000))
        bar.finish()
        writer.close_sync()
        exact = SQLiteMemoryStore(path, cache_documents=max(200_000, n))
        approximate = SQLiteMemoryStore(path, cache_documents=max(200_000, n), vector_index_min_scope=n)
        modes = {
            "vector": MemorySearchOptions(mode=SearchMode.VECTOR, ranking_profile=RankingProfile.NONE, top=top, vector_k=k),
            "hybrid + important": MemorySearchOptions(mode=SearchMode.HYBRID, top=top, vector_k=k),
        }

        async def search(store: SQLiteMemoryStore, query: np.ndarray, options: MemorySearchOptions) -> list[str]:
            found = await store.search(SearchRequest(scope, "memory", query.tolist(), options))
            return [hit.record.id for hit in found.hits]

        try:
            await search(exact, queries[0], modes["vector"])  # both load the scope before the clock starts
            started = time.perf_counter()
            await search(approximate, queries[0], modes["vector"])  # starts the build
            while not any(g["state"] != "building" for g in approximate.approximate_indexes()):
                await asyncio.sleep(0.2)
                await search(approximate, queries[0], modes["vector"])  # installs it when it is done
            build_seconds = time.perf_counter() - started
            figures: dict[str, Any] = {"memories": n, "build_seconds_in_background": round(build_seconds, 1), "modes": {}}
            for name, options in modes.items():
                timings: dict[str, list[float]] = {"exact": [], "approximate": []}
                agree = 0
                for query in queries:
                    results = {}
                    for label, store in (("exact", exact), ("approximate", approximate)):
                        began = time.perf_counter()
                        results[label] = await search(store, query, options)
                        timings[label].append(time.perf_counter() - began)
                    agree += results["exact"] == results["approximate"]
                figures["modes"][name] = {
                    "exact_ms": {"p50": _ms(timings["exact"], 50), "p99": _ms(timings["exact"], 99)},
                    "approximate_ms": {
                        "p50": _ms(timings["approximate"], 50),
                        "p99": _ms(timings["approximate"], 99),
                    },
                    "same_top": round(agree / len(queries), 4),
                }
            figures["index"] = approximate.approximate_indexes()
        finally:
            exact.close_sync()
            approximate.close_sync()
    return figures


def _sets(args: argparse.Namespace, progress: Progress) -> list[tuple[str, np.ndarray, np.ndarray]]:
    sets: list[tuple[str, np.ndarray, np.ndarray]] = []
    if args.locomo or args.jdd:
        matrix, queries = load_real_vectors(args.locomo, args.jdd, args.cache, progress=progress)
        sets.append((f"e5 LoCoMo+JDD ({matrix.shape[0]})", matrix, queries[: args.queries]))
        sets.extend(
            (f"e5-derived {n}", derived_from(matrix, n, args.seed), queries[: args.queries])
            for n in args.derived or []
            if n > 0
        )
    for n in args.sizes or []:
        if n > 0:
            sets.append(
                (
                    f"random {n}",
                    random_unit(n, args.dimensions, args.seed),
                    random_unit(args.queries, args.dimensions, args.seed + 1_000_003),
                )
            )
    return sets


def _table(report: dict[str, Any]) -> str:
    lines = [
        "\n| set | n | build s (t=1) | build s (t=2) | s per 100k (t=1) | bytes/vector | load ms view / copy "
        "| k | ANN p50 ms | exact p50 ms | speed-up | recall@k mean / min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["sets"]:
        builds = s["builds"]
        b1 = builds.get("threads=1", {})
        b2 = builds.get("threads=2", {})
        for key, f in s["search"].items():
            lines.append(
                f"| {s['set']} | {s['n']} | {b1.get('seconds', float('nan')):.2f} | {b2.get('seconds', float('nan')):.2f} "
                f"| {b1.get('seconds_per_100k', float('nan')):.1f} | {s['serialized_bytes_per_vector']:.0f} "
                f"| {s['load_ms']['view']:.2f} / {s['load_ms']['copy']:.1f} | {key[2:]} "
                f"| {f['approximate_ms']['p50']:.3f} | {f['exact_ms']['p50']:.3f} | {f['speedup_p50']:.1f}x "
                f"| {f['recall_mean']:.4f} / {f['recall_min']:.2f} |"
            )
    for s in report["sets"]:
        det = {
            t: (b.get("same_results_when_built_again"), b.get("same_bytes_when_built_again"))
            for t, b in s["builds"].items()
        }
        lines.append(f"\n{s['set']}: built again gives the same results / bytes: {det}")
    for name, rows in report.get("sweeps", {}).items():
        lines.append(f"\nsweep on {name} (k={report['sweep_k']}):\n")
        lines.append(
            "| dtype | M | ef add | ef | build s | bytes | p50 ms | recall mean / min |\n|---|---|---|---|---|---|---|---|"
        )
        lines.extend(
            f"| {r['dtype']} | {r['connectivity']} | {r['expansion_add']} | {r['expansion_search']} "
            f"| {r['build_seconds']:.2f} "
            f"| {r['serialized_bytes']} | {r['p50_ms']:.3f} | {r['recall_mean']:.4f} / {r['recall_min']:.2f} |"
            for r in rows
        )
    for name, rows in report.get("filters", {}).items():
        lines.append(f"\nrandom filters on {name} (k={report['filter_k']}):\n")
        lines.append(
            "| kept | request | n | p50 ms | recall mean / min | exact fallbacks |\n|---|---|---|---|---|---|"
        )
        lines.extend(
            f"| {r['kept_fraction']:.0%} | {r['plan']} | {r['requested']} | {r['p50_ms']:.3f} "
            f"| {r['recall_mean']:.4f} / {r['recall_min']:.2f} | {r['exact_fallbacks']} |"
            for r in rows
        )
    store = report.get("store")
    if store:
        lines.append(
            f"\none scope of {store['memories']} e5-derived memories in a SQLite store; the approximate index "
            f"built in the background in {store['build_seconds_in_background']} s:\n"
        )
        lines.append("| search | exact p50 / p99 ms | approximate p50 / p99 ms | same top 10 |\n|---|---|---|---|")
        lines.extend(
            f"| {name} | {m['exact_ms']['p50']:.2f} / {m['exact_ms']['p99']:.2f} "
            f"| {m['approximate_ms']['p50']:.2f} / {m['approximate_ms']['p99']:.2f} | {m['same_top']:.1%} |"
            for name, m in store["modes"].items()
        )
        lines.extend(f"\nthe store's checks: {g}" for g in store["index"])
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class _Grid:
    """The index parameters a sweep tries (:func:`sweep`'s keywords of the same names)."""

    connectivities: tuple[int, ...]
    expansion_adds: tuple[int, ...]
    expansions: tuple[int, ...]
    dtypes: tuple[str, ...]


#: The sweep's grids: a set of at most :data:`_SMALL_SET` vectors gets the wider one.
_SMALL_SET = 20_000
_SWEEP_GRIDS = {
    True: _Grid((8, 16, 32), (128, 256), (64, 128, 192, 256, 384, 512), ("f32", "f16")),
    False: _Grid((16, 32), (128,), (128, 256, 512, 1024), ("f32",)),
}


def _measure_sets(
    args: argparse.Namespace, params: dict[str, Any], report: dict[str, Any], progress: Progress
) -> None:
    """Each vector set: its builds and searches, and with ``--sweep`` / ``--filters`` those figures too."""
    from memory_core.adapters.sqlite.vector_index import ApproximateVectorIndex

    k_filter = max(args.k)
    for name, matrix, queries in _sets(args, progress):
        report["sets"].append(
            measure_set(
                name,
                matrix,
                queries,
                ks=args.k,
                threads=args.threads,
                params=params,
                determinism=not args.no_determinism,
                progress=progress,
            )
        )
        if args.sweep:
            grid = _SWEEP_GRIDS[matrix.shape[0] <= _SMALL_SET]
            report["sweeps"][name] = sweep(matrix, queries, k=k_filter, **asdict(grid))
        if args.filters:
            index = ApproximateVectorIndex.build(matrix, threads=1, **params)
            report["filters"][name] = oversampling(index, matrix, queries, k=k_filter)


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench ann``: the approximate index against exact search (see the module)."""
    from memory_core.adapters.sqlite.vector_index import (
        DEFAULT_CONNECTIVITY,
        DEFAULT_EXPANSION_ADD,
        DEFAULT_EXPANSION_SEARCH,
    )

    params: dict[str, Any] = {
        "connectivity": args.connectivity or DEFAULT_CONNECTIVITY,
        "expansion_add": args.expansion_add or DEFAULT_EXPANSION_ADD,
        "expansion_search": args.expansion_search or DEFAULT_EXPANSION_SEARCH,
    }
    k_filter = max(args.k)
    report: dict[str, Any] = {
        "benchmark": "ann",
        "configuration": {
            **params,
            "k": list(args.k),
            "queries": args.queries,
            "build_threads": list(args.threads),
        },
        "machine": machine_context(),
        "sets": [],
    }
    if args.sweep:
        report["sweep_k"] = k_filter
        report["sweeps"] = {}
    if args.filters:
        report["filter_k"] = k_filter
        report["filters"] = {}
    _measure_sets(args, params, report, progress)
    if getattr(args, "store", 0):
        if not (args.locomo or args.jdd):
            raise ValueError("--store needs the real vectors (--locomo and/or --jdd) to derive its memories from")
        real, queries = load_real_vectors(args.locomo, args.jdd, args.cache, progress=progress)
        report["store"] = await measure_store(
            derived_from(real, args.store, args.seed), queries[: args.queries], k=k_filter, progress=progress
        )
    publish(report, args, out, _table(report))
    return 0
