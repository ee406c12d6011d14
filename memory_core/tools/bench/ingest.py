"""``memory-core bench ingest``: turns per second through the rule path with the local embedder.

A synthetic conversation (Japanese and English statements from templates: new facts, restatements,
changed preferences, forget requests, small talk and assistant-only claims) is spread over a few
scopes and ingested turn by turn into a fresh SQLite store in a temporary folder: rule extraction,
rule consolidation (hybrid search of the neighbours), the history and the store writes. The embedder
is loaded and warmed up before the clock starts. Reported: turns and candidates per second, latency
per turn, and the share of the time the model spent embedding.

``--concurrency N`` (default 4, as ``memory-core serve``'s workers and ``memory-core ingest``) ingests
like ``memory-core serve`` with N workers: up to N turns in flight, never two of one scope, through the
runtime's :class:`~memory_core.runtime.batching.BatchingEmbedder`, so passages asked for while the model
is busy go in one call; and each scope's next ``--batch`` turns (default 8, as ``serve``'s workers take
that many messages of a session) are prepared together: extracted, and all their passages embedded in
one call, then consolidated one by one (:func:`~memory_core.runtime.lanes.ingest_in_lanes`). The floor
beside the figures is the embedder's batch throughput in the same run: every passage the run embedded,
embedded again in batches of 16, as turns per second. Several values (``--concurrency 1 2 4 8``) give
one run each, a table of them and, with ``--charts DIR``, ``ingest.png``
(turns per second against the concurrency, the floor beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.ports import Embedder
from memory_core.runtime.lanes import DEFAULT_BATCH
from memory_core.service.ingest import TimedEmbedder
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import (
    machine_context,
    markdown_table,
    publish,
    publish_charts,
    pyplot,
    save_chart,
)

__all__ = ["DEFAULT_CONCURRENCY", "draw_ingest_chart", "main", "run", "synthetic_turns"]

#: Turns in flight by default: what ``memory-core serve`` (its workers) and ``memory-core ingest`` use.
DEFAULT_CONCURRENCY = 4

_FOODS_JA = ["辛い料理", "甘いもの", "生魚", "納豆", "パクチー", "チーズ", "揚げ物", "蕎麦"]
_DRINKS_JA = ["コーヒー", "紅茶", "緑茶", "ビール", "ワイン", "日本酒"]
_PLACES_JA = ["京都", "大阪", "札幌", "福岡", "沖縄", "金沢", "箱根", "奈良"]
_DAYS_JA = ["月", "火", "水", "木", "金", "土", "日"]
_LESSONS_JA = ["英会話", "ヨガ", "ピアノ", "水泳", "書道"]
_FOODS_EN = ["spicy food", "sushi", "cilantro", "cheese", "fried food", "ramen", "olives"]
_DRINKS_EN = ["coffee", "tea", "beer", "wine", "juice"]
_CITIES_EN = ["Tokyo", "Osaka", "Kyoto", "Seattle", "London", "Paris"]
_DAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def _statement(rng: random.Random) -> str:
    """One user message (one to three sentences)."""
    kind = rng.random()
    templates: list[Callable[[], str]]
    if kind < 0.5:
        templates = [
            lambda: f"{rng.choice(_FOODS_JA)}が{rng.choice(['好き', '苦手', '大好き'])}です。",
            lambda: f"{rng.choice(_DRINKS_JA)}が好きです。",
            lambda: f"最近は{rng.choice(_DRINKS_JA)}より{rng.choice(_DRINKS_JA)}が好きです。",
            lambda: f"来週{rng.choice(_PLACES_JA)}に旅行する予定です。",
            lambda: f"毎週{rng.choice(_DAYS_JA)}曜{rng.randint(7, 20)}時に{rng.choice(_LESSONS_JA)}のレッスンがあります。",
            lambda: f"{rng.choice(_PLACES_JA)}に住んでいます。",
            lambda: f"猫を{rng.randint(1, 4)}匹飼っています。",
            lambda: f"{rng.choice(_FOODS_JA)}が苦手って言ったのは忘れて。",
            lambda: "ありがとう、助かります。",
            lambda: f"{rng.choice(_PLACES_JA)}のおすすめを教えてください。",
        ]
    else:
        templates = [
            lambda: f"I {rng.choice(['like', 'love', 'hate'])} {rng.choice(_FOODS_EN)}.",
            lambda: f"I like {rng.choice(_DRINKS_EN)}.",
            lambda: f"I live in {rng.choice(_CITIES_EN)}.",
            lambda: f"I go to the gym every {rng.choice(_DAYS_EN)}.",
            lambda: f"I have {rng.randint(1, 4)} kids.",
            lambda: f"Please forget that I like {rng.choice(_DRINKS_EN)}.",
            lambda: "Thanks, that helps!",
            lambda: f"Can you find a hotel in {rng.choice(_CITIES_EN)}?",
        ]
    count = rng.choice([1, 1, 2, 3])
    return " ".join(rng.choice(templates)() for _ in range(count))


def synthetic_turns(count: int, *, scopes: int = 8, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` turn messages (``turn.v1`` dicts) over ``scopes`` users, one minute apart."""
    rng = random.Random(seed)
    start = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    turns: list[dict[str, Any]] = []
    for index in range(count):
        user = f"bench-user-{index % scopes}"
        messages = [{"role": "user", "text": _statement(rng)}]
        messages.append({"role": "assistant", "text": "承知しました。You also like jazz, I remember."})
        turns.append(
            {
                "schema": "memory-core.turn.v1",
                "turn_id": f"bench-{index}",
                "user_id": user,
                "agent_id": "bench-agent",
                "occurred_at": (start + timedelta(minutes=index)).isoformat(),
                "messages": messages,
            }
        )
    return turns


class _ModelTimer(TimedEmbedder):
    """Counts the seconds the model itself spends, and keeps the passages it was given."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.passages: list[str] = []
        self.calls = 0

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.passages.extend(texts)
        return await super().embed_passages(texts)


async def _measure(
    turns: int,
    scopes: int,
    seed: int,
    threads: int,
    progress: Progress = NO_PROGRESS,
    concurrency: int = 1,
    batch: int = 1,
) -> dict[str, Any]:
    from memory_core.adapters.models.local_embedder import E5LocalEmbedder
    from memory_core.bootstrap import build_service, load_settings
    from memory_core.domain.messages import Turn
    from memory_core.ports import FixedClock
    from memory_core.runtime.batching import BatchingEmbedder
    from memory_core.runtime.lanes import ingest_in_lanes
    from memory_core.service.results import IngestResult

    data = [Turn.model_validate(t) for t in synthetic_turns(turns, scopes=scopes, seed=seed)]
    model = E5LocalEmbedder(threads=threads)
    await model.embed_passages(["warm-up", "ウォームアップ"])
    await model.embed_query("warm-up")
    timer = _ModelTimer(model)
    batching = BatchingEmbedder(timer) if concurrency > 1 else None
    embedder: Embedder = batching or timer
    clock = FixedClock(data[-1].occurred_at)  # no turn is from the future
    events: Counter[str] = Counter()
    latencies: list[float] = []
    candidates = 0
    with tempfile.TemporaryDirectory(prefix="memory-core-bench-") as tmp:
        path = str(Path(tmp) / "bench.db")
        service = build_service(load_settings(environ={}, sqlite_path=path), clock=clock, embedder=embedder)
        try:
            bar = progress.bar("ingesting", len(data), unit="turns")

            def count(_: int, turn: Turn, result: IngestResult) -> None:
                nonlocal candidates
                latencies.append(result.seconds)
                candidates += len(result.steps)
                events.update(step.decision.event.value for step in result.steps)
                bar.advance()

            timed = _TimedPreparation(service)
            started = time.perf_counter()
            await ingest_in_lanes(timed, data, concurrency=concurrency, batch=batch, deliver=count)
            total = time.perf_counter() - started
            bar.finish()
        finally:
            await service.close()
    embed_seconds = timer.seconds
    floor_started = time.perf_counter()
    for i in range(0, len(timer.passages), 16):
        await model.embed_passages(timer.passages[i : i + 16])
    floor_seconds = time.perf_counter() - floor_started
    return {
        "turns": turns,
        "scopes": scopes,
        "candidates": candidates,
        "decisions": dict(sorted(events.items())),
        "seconds": round(total, 3),
        "turns_per_second": round(turns / total, 1),
        "candidates_per_second": round(candidates / total, 1),
        "turn_ms": _percentiles(latencies),
        "prepare_ms": _percentiles(timed.seconds),
        "turns_per_preparation": round(len(data) / len(timed.seconds), 2) if timed.seconds else None,
        "embedding_seconds": round(embed_seconds, 3),
        "embedding_share": round(embed_seconds / total, 3) if total else 0.0,
        "embedder": model.name,
        "embedder_threads": threads,
        "concurrency": concurrency,
        "batch": batch,
        "passages_embedded": len(timer.passages),
        "model_calls": timer.calls,
        "floor_turns_per_second": round(turns / floor_seconds, 1) if floor_seconds else None,
        "floor_passages_per_second": round(len(timer.passages) / floor_seconds, 1) if floor_seconds else None,
    }


class _TimedPreparation:
    """The service as :func:`~memory_core.runtime.lanes.ingest_in_lanes` uses it, timing each preparation."""

    def __init__(self, service: Any) -> None:
        self._service = service
        self.seconds: list[float] = []

    async def prepare(self, turns: Sequence[Any]) -> list[Any]:
        started = time.perf_counter()
        try:
            return list(await self._service.prepare(turns))
        finally:
            self.seconds.append(time.perf_counter() - started)

    async def ingest(self, turn: Any, *, prepared: Any = None) -> Any:
        return await self._service.ingest(turn, prepared=prepared)


def _percentiles(seconds: list[float]) -> dict[str, float] | None:
    if not seconds:
        return None
    ordered = sorted(seconds)
    return {
        "mean": round(1000 * statistics.fmean(ordered), 2),
        "p50": round(1000 * ordered[len(ordered) // 2], 2),
        "p95": round(1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
    }


def _table(report: dict[str, Any]) -> str:
    ms = report["turn_ms"]
    return (
        f"\n| measure | value |\n|---|---|\n"
        f"| turns | {report['turns']} ({report['scopes']} scopes, {report['candidates']} candidates) |\n"
        f"| turns per second | {report['turns_per_second']} |\n"
        f"| candidates per second | {report['candidates_per_second']} |\n"
        f"| ms per turn (mean / p50 / p95), its batch's preparation apart | {ms['mean']} / {ms['p50']} / {ms['p95']} |\n"
        f"| ms per preparation (mean / p50 / p95) | {_shown(report['prepare_ms'])} "
        f"({report['turns_per_preparation'] or '-'} turns each) |\n"
        f"| time the model spent embedding | {100 * report['embedding_share']:.1f}% |\n"
        f"| floor: the same passages in batches of 16 | {report['floor_turns_per_second']} turns/s "
        f"({report['floor_passages_per_second']} passages/s) |\n"
        f"| decisions | {', '.join(f'{k} {v}' for k, v in report['decisions'].items())} |\n"
        f"\nrule path + {report['embedder']} ({report['embedder_threads']} threads) + SQLite, "
        f"concurrency {report['concurrency']}, {report['batch']} turns of a scope prepared together, "
        f"{report['machine']['cpus']} CPUs\n"
    )


def run(
    *,
    turns: int = 200,
    out: Callable[[str], Any] | None = print,
    scopes: int = 8,
    seed: int = 7,
    threads: int = 2,
    concurrency: int = 1,
    batch: int = 1,
) -> dict[str, Any]:
    """Measure ingestion throughput; prints a table through ``out`` and returns the figures.

    Args:
        turns: How many synthetic turns to ingest.
        out: Where the table goes (``None``: silent).
        scopes: How many users the turns are spread over.
        seed: Seed of the synthetic conversation.
        threads: Threads of the local embedder.
        concurrency: Turns in flight at once (of different scopes), like ``serve`` with that many workers.
        batch: Turns of one scope prepared together (their passages embedded in one call), like
            ``serve``'s workers taking that many messages of a session at once.
    """
    if turns < 1:
        raise ValueError("turns must be at least 1")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    figures = asyncio.run(_measure(turns, scopes, seed, threads, concurrency=concurrency, batch=batch))
    report = {"benchmark": "ingest", "machine": machine_context(), **figures}
    if out is not None:
        out(_table(report))
    return report


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench ingest [--turns N] [--scopes N] [--seed N] [--threads N] [--concurrency N ...]
    [--output JSON] [--charts DIR]``: one run per concurrency (several: a table and a chart of them)."""
    turns = int(getattr(args, "turns", 200) or 200)
    scopes = int(getattr(args, "scopes", 8) or 8)
    seed = int(getattr(args, "seed", 7) or 7)
    threads = int(getattr(args, "threads", 2) or 2)
    given = getattr(args, "concurrency", None) or [DEFAULT_CONCURRENCY]
    levels = [max(1, int(c)) for c in (given if isinstance(given, list) else [given])]
    batch = max(1, int(getattr(args, "batch", None) or DEFAULT_BATCH))
    runs = []
    for concurrency in levels:
        figures = await _measure(turns, scopes, seed, threads, progress, concurrency, batch)
        runs.append({"benchmark": "ingest", "machine": machine_context(), **figures})
    if len(runs) == 1:
        publish(runs[0], args, out, _table(runs[0]))
        report = runs[0]
    else:
        report = {"benchmark": "ingest", "machine": machine_context(), "runs": runs}
        publish(report, args, out, _sweep_table(runs))
    if getattr(args, "charts", None):
        publish_charts(draw_ingest_chart(runs, args.charts), args, out)
    return 0


def _shown(ms: dict[str, float] | None) -> str:
    return f"{ms['mean']} / {ms['p50']} / {ms['p95']}" if ms else "none (--batch 1)"


def _sweep_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        [
            r["concurrency"],
            r["turns_per_second"],
            r["floor_turns_per_second"],
            f"{100 * r['turns_per_second'] / r['floor_turns_per_second']:.0f} %" if r["floor_turns_per_second"] else "-",
            r["turn_ms"]["p50"],
            r["prepare_ms"]["p50"] if r["prepare_ms"] else "-",
            r["passages_embedded"],
            r["model_calls"],
        ]
        for r in runs
    ]
    first = runs[0]
    return (
        "\n"
        + markdown_table(
            [
                "concurrency",
                "turns/s",
                "floor turns/s",
                "share of the floor",
                "ms per turn p50",
                "ms per preparation p50",
                "passages",
                "model calls",
            ],
            rows,
        )
        + f"\n{first['turns']} turns over {first['scopes']} scopes, {first['batch']} turns of a scope prepared "
        f"together; rule path + {first['embedder']} "
        f"({first['embedder_threads']} threads) + SQLite, {first['machine']['cpus']} CPUs\n"
    )


def draw_ingest_chart(runs: list[dict[str, Any]], directory: str | Path) -> list[str]:
    """``ingest.png``: turns per second at each concurrency, with the model-only floor beside it."""
    plt = pyplot()
    if plt is None:
        return []
    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = [r["concurrency"] for r in runs]
    ax.plot(xs, [r["turns_per_second"] for r in runs], marker="o", color="#4472c4", label="ingestion, turns/s")
    ax.plot(
        xs,
        [r["floor_turns_per_second"] for r in runs],
        marker=".",
        linestyle=":",
        color="#ed7d31",
        label="the limit: the model alone, in batches of 16",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("turns of different scopes in flight (serve's workers)")
    ax.set_ylabel("turns per second")
    ax.set_title(
        f"{runs[0]['turns']} turns, {runs[0]['batch']} of a scope prepared together, "
        f"{runs[0]['embedder']} ({runs[0]['embedder_threads']} threads)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return [save_chart(plt, fig, directory, "ingest.png")]
