"""``memory-core bench inspector``: what the memory inspector's views cost the server, on a large scope.

A store with ``--memories`` (10,000) memories for one user and agent (mixed English and Japanese,
facts and episodes, every status, ages over a year; plus ``--other-users`` users with 100 each) is
served by a fresh ``memory-core serve`` process (loopback, a random token, no scheduler). The requests
each view of the page makes are then timed from a client on the same machine, ``--runs`` times after
one cold pass: the figures are wall time per request as the client sees it, an upper bound of the
server's time (they include loopback HTTP and the client's own JSON decoding).

The first view is opening the inspector on that user: the page and its four assets, the users list,
the user's agents, and the first page of the memories table (50, newest first). The bar (issue 18):
its API calls take under 300 ms in all.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlencode

import numpy as np

from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.contract.routes import API_PREFIX, api_path
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.tools.bench.server import ServeProcess
from memory_core.tools.bench.synthetic import synthetic_memory
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import machine_context, publish

__all__ = ["FIRST_VIEW", "build_store", "main"]

USER, AGENT = "inspector-user", "assistant"
#: The bar for the first view's API calls, in milliseconds (issue 18).
BAR_MS = 300.0
_CATEGORIES = ["preference", "constraint", "profile", "plan", "routine", "general"]
_SCOPE = urlencode({"user_id": USER, "agent_id": AGENT})
_STATIC = ["/", "/ui/app.css", "/ui/app.js", "/ui/charts.js", "/ui/icon.svg"]
_MEMORIES, _CURVES = api_path("list"), api_path("retention_curves")
#: The API calls of the first view: the Scopes view, then the scope's Memories table.
FIRST_VIEW = [
    f"{api_path('users')}?limit=50",
    api_path("user_agents", user_id=USER),
    f"{_MEMORIES}?{_SCOPE}&order=updated_at%20desc&offset=0&limit=50",
]


async def build_store(path: str, *, memories: int, other_users: int, seed: int) -> None:
    """Write the benchmark store at ``path`` (kept as it is when it already holds the same count)."""
    store = SQLiteMemoryStore(path)
    try:
        total = memories + other_users * 100
        if await store.count() == total:
            return
        if await store.count():
            raise SystemExit(f"{path} holds another store; remove it or pick another --keep path")
        rng = np.random.default_rng(seed)
        now = datetime.now(UTC)
        owners = [(USER, memories)] + [(f"user{u:04d}", 100) for u in range(other_users)]
        batch: list[MemoryRecord] = []
        for user, count in owners:
            for i in range(count):
                updated = now - timedelta(days=float(rng.uniform(0, 365)))
                roll = rng.random()
                status = (
                    MemoryStatus.DELETED
                    if roll < 0.05
                    else MemoryStatus.ARCHIVED
                    if roll < 0.2
                    else MemoryStatus.ACTIVE
                )
                batch.append(
                    synthetic_memory(
                        rng,
                        memory_id=f"{user}-{i:06d}",
                        scope=(user, AGENT),
                        updated=updated,
                        categories=_CATEGORIES,
                        status=status,
                        episode_share=0.4,
                    )
                )
                if len(batch) == 2000:
                    await store.upsert(batch)
                    batch = []
        if batch:
            await store.upsert(batch)
    finally:
        await store.close()


class _Server(ServeProcess):
    """The server the views are timed against: the hash embedder, one worker, no scheduler."""

    def __init__(self, db: Path, log: Path) -> None:
        super().__init__(db, log, options=["--workers", "1", "--no-scheduler"], env={"MEMORY_EMBEDDER": "hash"})

    def get(self, conn: http.client.HTTPConnection, path: str) -> float:
        """Milliseconds from sending ``GET path`` to having its whole answer (decoded if JSON)."""
        started = time.perf_counter()
        conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
        if path.startswith(API_PREFIX + "/"):
            json.loads(body)
        return (time.perf_counter() - started) * 1000


def _views(ids: str) -> dict[str, list[str]]:
    """Each view's API calls (beyond the first view), as the page makes them."""
    return {
        "memories, last page by retention": [
            f"{_MEMORIES}?{_SCOPE}&order=retention_score%20asc&offset=9950&limit=50"
        ],
        "memories, one category of active facts": [
            f"{_MEMORIES}?{_SCOPE}&status=active&kind=fact&category=plan&order=importance%20desc&limit=50"
        ],
        "a memory (detail and its curve)": [
            f"{api_path('get', memory_id=f'{USER}-000000')}?{_SCOPE}",
            f"{_CURVES}?{_SCOPE}&ids={USER}-000000&days=180",
        ],
        "forgetting (8 curves)": [
            f"{_MEMORIES}?{_SCOPE}&status=active&order=retention_score%20asc&limit=8",
            f"{_CURVES}?{_SCOPE}&ids={quote(ids)}&days=180",
        ],
        "forgetting dry run of the scope": [f"{api_path('forgetting_preview')}?{_SCOPE}"],
    }


def _measure(server: _Server, runs: int, progress: Progress) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        weakest = json.loads(
            _fetch(conn, server, f"{_MEMORIES}?{_SCOPE}&status=active&order=retention_score%20asc&limit=8")
        )
        ids = ",".join(m["id"] for m in weakest["memories"])
        views = _views(ids)
        per_call: dict[str, list[float]] = {path: [] for path in [*_STATIC, *FIRST_VIEW]}
        for calls in views.values():
            per_call.update({path: [] for path in calls})
        cold = {path: server.get(conn, path) for path in FIRST_VIEW}
        with progress.bar("timing the views", runs, unit="runs") as bar:
            for _ in range(runs):
                for path in per_call:
                    per_call[path].append(server.get(conn, path))
                bar.advance()
    finally:
        conn.close()

    def total(paths: list[str]) -> dict[str, float]:
        sums = [sum(per_call[p][i] for p in paths) for i in range(runs)]
        return {"p50": round(statistics.median(sums), 2), "max": round(max(sums), 2)}

    return {
        "first_view_api_ms": total(FIRST_VIEW),
        "first_view_api_cold_ms": round(sum(cold.values()), 2),
        "first_view_static_ms": total(_STATIC),
        "calls_ms": {path: round(statistics.median(times), 2) for path, times in per_call.items()},
        "views_ms": {name: total(calls) for name, calls in views.items()},
    }


def _fetch(conn: http.client.HTTPConnection, server: _Server, path: str) -> bytes:
    conn.request("GET", path, headers={"Authorization": f"Bearer {server.token}"})
    return conn.getresponse().read()


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core bench inspector``: build the store, serve it, time each view's requests."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.keep or Path(tmp) / "inspector.db")
        await build_store(str(db), memories=args.memories, other_users=args.other_users, seed=args.seed)
        server = _Server(db, Path(tmp) / "serve.log")
        try:
            figures = await asyncio.to_thread(_measure, server, args.runs, progress)
        finally:
            server.stop(timeout=30)
    first = figures["first_view_api_ms"]
    report = {
        "benchmark": "inspector",
        "configuration": {"memories": args.memories, "other_users": args.other_users, "runs": args.runs},
        "machine": machine_context(),
        "bar_ms": BAR_MS,
        "meets_bar": first["max"] < BAR_MS and figures["first_view_api_cold_ms"] < BAR_MS,
        **figures,
    }
    lines = [
        "",
        "| requests (ms, client wall time) | p50 | max |",
        "|---|---|---|",
        f"| first view: API calls ({len(FIRST_VIEW)}) | {first['p50']:.1f} | {first['max']:.1f} |",
        f"| first view: API calls, cold (first run) | {figures['first_view_api_cold_ms']:.1f} | |",
        f"| first view: page and assets ({len(_STATIC)}) | {figures['first_view_static_ms']['p50']:.1f} | "
        f"{figures['first_view_static_ms']['max']:.1f} |",
        *(f"| {name} | {v['p50']:.1f} | {v['max']:.1f} |" for name, v in figures["views_ms"].items()),
        "",
        f"{args.memories} memories for one user, {args.runs} runs; bar: first view's API calls under "
        f"{BAR_MS:.0f} ms: {'met' if report['meets_bar'] else 'NOT met'}",
        "",
    ]
    publish(report, args, out, "\n".join(lines))
    return 0 if report["meets_bar"] else 1
