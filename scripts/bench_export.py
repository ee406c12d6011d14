"""Measure ``GET /api/users/{user_id}/export`` of a large scope on ``memory-core serve``, over a socket.

Builds a temporary SQLite store holding ``--memories`` memories of one user and agent (the hashing
embedder, so no model is needed), serves it with the embedded runtime (as ``memory-core serve`` does) and:

1. exports the user once, following ``next_cursor`` while the server answers one (an API without paging
   answers everything at once), and prints the pages' bytes and seconds;
2. runs ``--parallel`` exporters at once, each exporting the whole user (waiting ``Retry-After`` when
   refused with 429), while one searcher keeps searching, and prints the searches' latencies and how
   many export pages were refused.

The same script measures an older checkout that answers the export in one response (run it with that
checkout first on ``PYTHONPATH``). Figures depend on the machine; print its cores with them.

Usage::

    python scripts/bench_export.py [--memories 18000] [--parallel 6] [--include-vectors]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

USER, AGENT = "bench-user", "bench-agent"


class _Server:
    """The embedded runtime (HTTP, one worker, no scheduler) on its own thread and event loop."""

    def __init__(self, db: Path) -> None:
        from memory_core.bootstrap import load_settings
        from memory_core.entrypoints.embedded.host import EmbeddedRuntime, RuntimeOptions

        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))
        self.runtime = EmbeddedRuntime(settings, RuntimeOptions(port=0, workers=1, scheduler=False))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await self.runtime.run(self._stop)

        asyncio.run(main())

    def __enter__(self) -> tuple[str, int]:
        self._thread.start()
        deadline = time.monotonic() + 60
        while self.runtime.server is None or self._loop is None:
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not start")
            time.sleep(0.05)
        return self.runtime.server.host, self.runtime.server.port

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=60)


async def _seed(db: Path, count: int) -> None:
    from memory_core.bootstrap import build_service, load_settings

    rows = [
        {"user_id": USER, "agent_id": AGENT, "memory": f"memory number {i}: the user mentioned topic {i % 97}"}
        for i in range(count)
    ]
    async with build_service(load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))) as service:
        await service.import_records(rows)


def _get(host: str, port: int, path: str, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=600)
    try:
        conn.request("GET", f"{path}?{urlencode(query)}" if query else path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def export_all(
    host: str, port: int, *, vectors: bool, refused: list[int] | None = None
) -> list[tuple[int, float, int]]:
    """Every page of the user's export: ``(bytes, seconds, memories)`` per page."""
    path = f"/api/users/{quote(USER)}/export"
    query: dict[str, str] = {"include_vectors": "true"} if vectors else {}
    pages: list[tuple[int, float, int]] = []
    while True:
        started = time.perf_counter()
        status, headers, body = _get(host, port, path, query)
        seconds = time.perf_counter() - started
        if status == 429 and refused is not None:
            refused.append(1)
            time.sleep(float(headers.get("retry-after", "1")))
            continue
        if status != 200:
            raise RuntimeError(f"export answered {status}: {body[:300]!r}")
        data = json.loads(body)
        pages.append((len(body), seconds, len(data["memories"])))
        cursor = data.get("next_cursor")
        if not cursor:
            return pages
        query["cursor"] = cursor


def _search(host: str, port: int) -> float:
    body = json.dumps({"user_id": USER, "agent_id": AGENT, "query": "topic 42", "recall": False})
    conn = http.client.HTTPConnection(host, port, timeout=600)
    try:
        started = time.perf_counter()
        conn.request("POST", "/api/memories/search", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"search answered {response.status}")
        return time.perf_counter() - started
    finally:
        conn.close()


def _summary(pages: list[tuple[int, float, int]]) -> dict[str, Any]:
    sizes = [b for b, _, _ in pages]
    seconds = [s for _, s, _ in pages]
    return {
        "pages": len(pages),
        "memories": sum(m for _, _, m in pages),
        "total_mb": round(sum(sizes) / 1e6, 2),
        "total_seconds": round(sum(seconds), 3),
        "largest_page_mb": round(max(sizes) / 1e6, 3),
        "median_page_seconds": round(statistics.median(seconds), 4),
        "slowest_page_seconds": round(max(seconds), 4),
    }


def _parallel(host: str, port: int, exporters: int, vectors: bool) -> dict[str, Any]:
    idle = [_search(host, port) for _ in range(20)]
    refused: list[int] = []
    latencies: list[float] = []
    done = threading.Event()
    threads = [
        threading.Thread(target=export_all, args=(host, port), kwargs={"vectors": vectors, "refused": refused})
        for _ in range(exporters)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()

    def search_until_done() -> None:
        while not done.is_set():
            latencies.append(_search(host, port))

    searcher = threading.Thread(target=search_until_done)
    searcher.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done.set()
    searcher.join()
    return {
        "exporters": exporters,
        "wall_seconds": round(wall, 2),
        "refused_pages_429": len(refused),
        "search_idle_median_ms": round(statistics.median(idle) * 1000, 1),
        "searches_during": len(latencies),
        "search_median_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        "search_max_ms": round(max(latencies) * 1000, 1) if latencies else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=18_000)
    parser.add_argument("--parallel", type=int, default=6, help="exporters at once (0: skip that part)")
    parser.add_argument("--include-vectors", action="store_true", help="ask for the embeddings too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        started = time.perf_counter()
        asyncio.run(_seed(db, args.memories))
        seeded = time.perf_counter() - started
        with _Server(db) as (host, port):
            single = _summary(export_all(host, port, vectors=args.include_vectors))
            parallel = _parallel(host, port, args.parallel, args.include_vectors) if args.parallel else None
    print(
        json.dumps(
            {
                "cores": os.cpu_count(),
                "memories": args.memories,
                "seed_seconds": round(seeded, 1),
                "include_vectors": args.include_vectors,
                "export": single,
                "parallel": parallel,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
