"""``memory-core bench provider``: what ``MemoryCoreContextProvider`` adds to an agent's run (embedded mode).

Two ``agent_framework.Agent`` instances answer the same questions with an in-process chat client that
returns at once, so the figures are the framework plus memory, never a model:

- **without memory**: ``context_providers=[]``;
- **with memory**: ``context_providers=[MemoryCoreContextProvider.local(worker=False)]`` on a fresh
  embedded store (SQLite) seeded with ``--memories`` memories in the scope, turns published to the
  embedded durable queue (what ``memory-core serve`` drains; no in-process worker, so ingestion is
  not measured as part of the runs).

Reported: the time spent in ``before_run`` (query embedding, hybrid search, formatting, queuing the
recall update; the query embedding alone is measured too) and in ``after_run`` (building the turn,
writing it to the queue), and the added latency of a whole run (with minus without), as mean / p50 /
p95 / p99 in milliseconds. The embedder is
loaded and warmed up before the clock starts.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import machine_context, publish

__all__ = ["main", "measure"]

_FACTS = [
    "I like green tea",
    "I am allergic to peanuts",
    "I live in Kyoto",
    "I prefer aisle seats",
    "I work as a nurse",
    "I have two cats",
    "I am learning Spanish",
    "I prefer vegetarian food",
    "辛い料理が苦手です",
    "毎週水曜にヨガのレッスンがあります",
    "コーヒーより紅茶が好きです",
    "来月札幌に旅行する予定です",
]
_QUESTIONS = [
    "What should I drink this afternoon?",
    "Can you suggest a dinner for tonight?",
    "Book me a flight to Osaka next week.",
    "What could I do this weekend?",
    "おすすめのレストランを教えてください。",
    "週末の予定を立てたいです。",
    "Any tips for my Spanish lessons?",
    "What gift should I buy for a colleague?",
]


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]

    return {
        "mean": round(statistics.fmean(ordered), 3),
        "p50": round(pct(0.50), 3),
        "p95": round(pct(0.95), 3),
        "p99": round(pct(0.99), 3),
    }


async def measure(
    *,
    runs: int = 200,
    memories: int = 200,
    embedder_name: str = "e5-local",
    threads: int = 2,
    seed: int = 7,
    query_cache_size: int = 0,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Run both agents ``runs`` times and return the figures (milliseconds); progress to ``progress``.

    The questions repeat (8 of them over ``runs``), so with ``query_cache_size`` above 0 every query
    after the first of each is answered from the query cache: the figures of an agent whose users ask
    again. With 0 (the default) every query is embedded: the figures of new questions.
    """
    from memory_core.integrations.agent_framework import MemoryCoreContextProvider

    class TimedProvider(MemoryCoreContextProvider):
        before_ms: list[float]
        after_ms: list[float]

        async def before_run(self, **kwargs: Any) -> None:
            started = time.perf_counter()
            await super().before_run(**kwargs)
            self.before_ms.append((time.perf_counter() - started) * 1000)

        async def after_run(self, **kwargs: Any) -> None:
            started = time.perf_counter()
            await super().after_run(**kwargs)
            self.after_ms.append((time.perf_counter() - started) * 1000)

    rng = random.Random(seed)
    framework_logger = logging.getLogger("agent_framework")
    level = framework_logger.level
    framework_logger.setLevel(logging.ERROR)  # the instant chat client has no function invocation layer
    try:
        return await _measure(
            rng, TimedProvider, runs, memories, embedder_name, threads, query_cache_size, progress
        )
    finally:
        framework_logger.setLevel(level)


async def _measure(
    rng: random.Random,
    provider_cls: Any,
    runs: int,
    memories: int,
    embedder_name: str,
    threads: int,
    query_cache_size: int,
    progress: Progress,
) -> dict[str, Any]:
    from memory_core.bootstrap import build_embedder, load_settings
    from memory_core.integrations.harness import new_agent, new_session

    with tempfile.TemporaryDirectory(prefix="memory-core-bench-") as tmp:
        settings = load_settings(
            environ={},
            sqlite_path=str(Path(tmp) / "memory.db"),
            embedder=embedder_name,
            embedder_threads=threads,
            query_cache_size=query_cache_size,
        )
        embedder = build_embedder(settings)
        await embedder.embed_passages(["warm-up", "ウォームアップ"])
        await embedder.embed_query("warm-up")
        provider = provider_cls.local(
            settings=settings,
            embedder=embedder,
            queue=True,
            worker=False,  # what the agent pays for, not ingestion in the same process
            user_id="bench-user",
            agent_id="bench-agent",
            outbox_path=Path(tmp) / "outbox.db",
            flush_interval=None,
        )
        provider.before_ms, provider.after_ms = [], []
        service = provider.client.service
        now = service.now()
        rows = [
            {
                "user_id": "bench-user",
                "agent_id": "bench-agent",
                "memory": f"{rng.choice(_FACTS)} ({i})",
                "category": rng.choice(["preference", "constraint", "profile", "schedule"]),
                "importance": round(rng.uniform(0.3, 0.95), 2),
                "created_at": now,
            }
            for i in range(memories)
        ]
        await service.import_records(rows)

        plain = new_agent()
        remembering = new_agent(context_providers=[provider])
        without_ms: list[float] = []
        with_ms: list[float] = []
        async with provider:
            for warm in range(5):
                await plain.run(_QUESTIONS[warm % len(_QUESTIONS)], session=new_session())
                await remembering.run(_QUESTIONS[warm % len(_QUESTIONS)], session=new_session())
            provider.before_ms.clear()
            provider.after_ms.clear()
            bar = progress.bar("agent runs", runs, unit="runs")
            for i in range(runs):
                question = _QUESTIONS[i % len(_QUESTIONS)]
                started = time.perf_counter()
                await plain.run(question, session=new_session())
                without_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await remembering.run(question, session=new_session())
                with_ms.append((time.perf_counter() - started) * 1000)
                bar.advance()
            bar.finish()
            queued = provider.client.queue.stats().as_dict()
        embed_ms: list[float] = []
        for i in range(runs):
            started = time.perf_counter()
            await embedder.embed_query(_QUESTIONS[i % len(_QUESTIONS)])
            embed_ms.append((time.perf_counter() - started) * 1000)
        added = [w - p for w, p in zip(with_ms, without_ms, strict=True)]
        return {
            "runs": runs,
            "memories": memories,
            "embedder": embedder.name,
            "embedder_threads": threads,
            "top": provider.options.top,
            "mode": provider.options.mode.value,
            "before_run_ms": _summary(provider.before_ms),
            "after_run_ms": _summary(provider.after_ms),
            "query_embedding_ms": _summary(embed_ms),
            "run_without_memory_ms": _summary(without_ms),
            "run_with_memory_ms": _summary(with_ms),
            "added_ms": _summary(added),
            "queue": queued,
        }


def _table(report: dict[str, Any]) -> str:
    rows = [
        ("before_run (search + inject)", report["before_run_ms"]),
        ("  of which embedding the query", report["query_embedding_ms"]),
        ("after_run (publish turn)", report["after_run_ms"]),
        ("agent run without memory", report["run_without_memory_ms"]),
        ("agent run with memory", report["run_with_memory_ms"]),
        ("added by memory", report["added_ms"]),
    ]
    lines = ["", "| ms | mean | p50 | p95 | p99 |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {v['mean']} | {v['p50']} | {v['p95']} | {v['p99']} |" for name, v in rows]
    lines.append(
        f"\n{report['runs']} runs, {report['memories']} memories in the scope, {report['mode']} search, "
        f"top {report['top']}, {report['embedder']} ({report['embedder_threads']} threads), embedded SQLite "
        f"store and queue, {report['machine']['cpus']} CPUs"
    )
    return "\n".join(lines) + "\n"


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench provider [--runs N] [--memories N] [--embedder NAME] [--threads N] [--output JSON]``."""
    figures = await measure(
        runs=int(getattr(args, "runs", 200) or 200),
        memories=int(getattr(args, "memories", 200) or 200),
        embedder_name=str(getattr(args, "embedder", None) or "e5-local"),
        threads=int(getattr(args, "threads", 2) or 2),
        seed=int(getattr(args, "seed", 7) or 7),
        query_cache_size=int(getattr(args, "query_cache_size", 0) or 0),
        progress=progress,
    )
    report = {"benchmark": "provider", "machine": machine_context(), **figures}
    publish(report, args, out, _table(report))
    return 0
