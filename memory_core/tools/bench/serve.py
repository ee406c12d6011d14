"""``memory-core bench serve``: the embedded server under search load while turns pour in.

A fresh ``memory-core serve`` process (loopback only, a random token, a store in a temporary folder)
is seeded with ``--seed-turns`` turns per user and drained; then, for ``--seconds``:

- ``--searchers`` threads search as fast as the server answers (``POST /api/memories/search``, each
  on its own keep-alive connection, random users and questions, recall on: every search also
  queues a recall update, as an agent's ``before_run`` does);
- one poster sends ``--turns`` turns (``POST /api/turns``) as fast as they are accepted.

When the searches stop, the benchmark waits (at most ``--drain-timeout`` seconds) until every
accepted turn is processed, then stops the server with SIGTERM and reads its files to check the
bar: every accepted turn processed exactly once (its journal marked processed, one episode per
user message, no turn left in the queue or dead-lettered).

Reported: searches per second and search latency (p50 / p99), turns processed while the searches ran
and the time to drain the rest, errors (any answer but 2xx, any connection error), and the server's
peak resident memory (Linux ``VmHWM``). The bar (issue 16): 0 errors, 0 lost or duplicated turns, at
least half of the turns processed while the searches run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sqlite3
import tempfile
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from memory_core.contract.routes import api_path
from memory_core.tools.bench.server import ServeProcess
from memory_core.tools.progress import NO_PROGRESS, Bar, Progress
from memory_core.tools.reporting import machine_context, publish

__all__ = ["LoadFigures", "main", "measure"]

_SEARCH, _TURNS = api_path("search"), api_path("post_turn")
_PREFERENCES = [
    ("I like {x}", ["green tea", "jazz", "hiking", "spicy ramen", "old films", "board games", "cycling"]),
    ("I am allergic to {x}", ["peanuts", "shellfish", "cats", "pollen", "penicillin"]),
    ("I live in {x}", ["Kyoto", "Osaka", "Sapporo", "Fukuoka", "Sendai", "Nagoya"]),
    ("I work as a {x}", ["nurse", "teacher", "data engineer", "chef", "pilot", "designer"]),
    ("I prefer {x}", ["aisle seats", "morning meetings", "vegetarian food", "trains to planes"]),
    ("My daughter's name is {x}", ["Hana", "Yui", "Mei", "Sakura"]),
    ("{x}が好きです", ["紅茶", "温泉", "登山", "映画", "料理", "読書"]),
    ("{x}が苦手です", ["辛い料理", "早起き", "満員電車", "人混み"]),
    ("来月{x}に旅行する予定です", ["札幌", "沖縄", "京都", "金沢", "台湾"]),
    ("毎週{x}にヨガのレッスンがあります", ["月曜", "水曜", "金曜"]),
]
_QUESTIONS = [
    "What should I drink this afternoon?",
    "Can you suggest a dinner for tonight?",
    "Book me a flight next week.",
    "What could I do this weekend?",
    "Where do I live?",
    "おすすめのレストランを教えてください。",
    "週末の予定を立てたいです。",
    "私の苦手なものは何ですか?",
    "What is my job?",
    "Any gift ideas for my daughter?",
]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclass
class LoadFigures:
    """What one run measured (times in seconds unless named ``_ms``)."""

    searches: int = 0
    search_seconds: float = 0.0
    search_ms: list[float] = field(default_factory=list)
    post_ms: list[float] = field(default_factory=list)
    turns_posted: int = 0
    turns_accepted: int = 0
    turns_duplicate: int = 0
    errors: list[str] = field(default_factory=list)
    processed_during_load: int = 0
    drain_seconds: float | None = None
    processed: int = 0
    episodes: int = 0
    duplicated_episodes: int = 0
    queue_left: int = 0
    dead_letters: int = 0
    rss_peak_mb: float | None = None

    def as_dict(self) -> dict[str, Any]:
        lost = max(self.turns_accepted - self.processed, 0)
        return {
            "searches": self.searches,
            "searches_per_second": round(self.searches / self.search_seconds, 1) if self.search_seconds else 0.0,
            "search_p50_ms": round(_percentile(self.search_ms, 0.50), 2),
            "search_p99_ms": round(_percentile(self.search_ms, 0.99), 2),
            "post_p50_ms": round(_percentile(self.post_ms, 0.50), 2),
            "post_p99_ms": round(_percentile(self.post_ms, 0.99), 2),
            "turns_posted": self.turns_posted,
            "turns_accepted": self.turns_accepted,
            "processed_during_load": self.processed_during_load,
            "processed_during_load_share": round(self.processed_during_load / self.turns_accepted, 3)
            if self.turns_accepted
            else 0.0,
            "drain_seconds": None if self.drain_seconds is None else round(self.drain_seconds, 1),
            "processed": self.processed,
            "lost": lost,
            "duplicated": self.duplicated_episodes,
            "queue_left": self.queue_left,
            "dead_letters": self.dead_letters,
            "errors": len(self.errors),
            "error_samples": self.errors[:5],
            "rss_peak_mb": self.rss_peak_mb,
        }

    def verdict(self) -> list[str]:
        """What misses the bar (empty: the run passed)."""
        figures = self.as_dict()
        missed = []
        if figures["errors"]:
            missed.append(f"{figures['errors']} error(s)")
        if figures["lost"] or figures["queue_left"] or figures["dead_letters"]:
            missed.append(
                f"{figures['lost']} turn(s) not processed, {figures['queue_left']} message(s) left, "
                f"{figures['dead_letters']} dead-lettered"
            )
        if figures["duplicated"]:
            missed.append(f"{figures['duplicated']} duplicated episode(s)")
        if figures["processed_during_load_share"] < 0.5:
            missed.append(f"only {figures['processed_during_load_share']:.0%} processed during the load")
        return missed


class _Connection:
    """One keep-alive HTTP/1.1 connection with the bearer token."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        payload = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        return response.status, json.loads(data) if data else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _turn(rng: random.Random, user: str, index: int, at: datetime) -> dict[str, Any]:
    template, values = rng.choice(_PREFERENCES)
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": f"bench-{user}-{index}",
        "user_id": user,
        "agent_id": "assistant",
        "occurred_at": at.isoformat().replace("+00:00", "Z"),
        "messages": [
            {"role": "user", "text": template.format(x=rng.choice(values)) + "."},
            {"role": "assistant", "text": "Noted."},
        ],
    }


def _processed(db: Path, prefix: str = "bench-") -> int:
    """Turns of this benchmark the server has marked processed (read-only, beside the running server)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM turns_journal WHERE processed_at IS NOT NULL AND turn_id LIKE ?",
            (prefix + "%",),
        ).fetchone()
    return int(row[0])


def _post_turns(
    conn: _Connection, turns: list[dict[str, Any]], figures: LoadFigures, lock: threading.Lock
) -> None:
    for turn in turns:
        started = time.perf_counter()
        try:
            status, body = conn.call("POST", _TURNS, turn)
        except (OSError, http.client.HTTPException) as exc:
            with lock:
                figures.errors.append(f"POST {_TURNS}: {type(exc).__name__}: {exc}")
            continue
        elapsed = (time.perf_counter() - started) * 1000
        with lock:
            figures.turns_posted += 1
            figures.post_ms.append(elapsed)
            if status in (200, 202):
                figures.turns_accepted += 1
                if isinstance(body, dict) and body.get("status") == "duplicate":
                    figures.turns_duplicate += 1
            else:
                figures.errors.append(f"POST {_TURNS}: {status} {str(body)[:200]}")


def _search_loop(
    conn: _Connection,
    users: list[str],
    seed: int,
    stop: threading.Event,
    figures: LoadFigures,
    lock: threading.Lock,
) -> None:
    rng = random.Random(seed)
    latencies: list[float] = []
    errors: list[str] = []
    while not stop.is_set():
        request = {"user_id": rng.choice(users), "agent_id": "assistant", "query": rng.choice(_QUESTIONS)}
        started = time.perf_counter()
        try:
            status, body = conn.call("POST", _SEARCH, request)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"search: {type(exc).__name__}: {exc}")
            continue
        latencies.append((time.perf_counter() - started) * 1000)
        if status != 200:
            errors.append(f"search: {status} {str(body)[:200]}")
    conn.close()
    with lock:
        figures.search_ms.extend(latencies)
        figures.searches += len(latencies)
        figures.errors.extend(errors)


def _wait_processed(db: Path, target: int, timeout: float, bar: Bar | None = None) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        processed = _processed(db)
        if bar is not None:
            bar.update(min(processed, target))
        if processed >= target:
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _wait(seconds: float, progress: Progress) -> None:
    """Sleep ``seconds``, with a bar of the seconds gone."""
    total = max(1, round(seconds))
    with progress.bar("load", total, unit="s") as bar:
        started = time.monotonic()
        while (gone := time.monotonic() - started) < seconds:
            bar.update(min(round(gone), total))
            time.sleep(min(seconds - gone, 0.2))
        bar.update(total)


def _check_files(db: Path, figures: LoadFigures) -> None:
    """After the server stopped: processed turns, episodes per message, what is left in the queue."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        figures.processed = _processed(db)
        rows = conn.execute("SELECT provenance FROM memories WHERE kind = 'episode'").fetchall()
    seen: dict[tuple[str, int], int] = {}
    for (provenance,) in rows:
        for source in json.loads(provenance or "[]") if provenance else []:
            key = (str(source.get("turn_id")), int(source.get("message") or 0))
            seen[key] = seen.get(key, 0) + 1
    figures.episodes = len(seen)  # messages kept as episodes (a repeat reinforces its episode: one row)
    figures.duplicated_episodes = sum(count - 1 for count in seen.values() if count > 1)
    queue = Path(f"{db}.queue")
    if queue.exists():
        with closing(sqlite3.connect(f"file:{queue}?mode=ro", uri=True)) as conn:
            active, dead = conn.execute(  # turns only: recall updates held at the stop are queued then
                "SELECT COALESCE(SUM(state = 'active'), 0), COALESCE(SUM(state = 'dead'), 0) FROM queue_messages "
                "WHERE subject = 'turn'"
            ).fetchone()
        figures.queue_left, figures.dead_letters = int(active), int(dead)


def measure(
    *,
    searchers: int = 20,
    seconds: float = 30.0,
    turns: int = 2000,
    users: int = 50,
    seed_turns: int = 4,
    embedder: str = "e5-local",
    workers: int = 4,
    batch: int = 8,
    threads: int = 2,
    drain_timeout: float = 600.0,
    seed: int = 7,
    request_concurrency: int = 2,
    query_cache_size: int = 1024,
    progress: Progress = NO_PROGRESS,
) -> LoadFigures:
    """Run the load once and return its figures (see the module docstring); progress to ``progress``."""
    rng = random.Random(seed)
    names = [f"user{i:03d}" for i in range(users)]
    start = datetime.now(UTC) - timedelta(days=1)
    figures = LoadFigures()
    with tempfile.TemporaryDirectory(prefix="memory-core-bench-serve-") as tmp:
        server = ServeProcess(
            Path(tmp) / "store.db",
            Path(tmp) / "serve.log",
            options=[
                "--workers",
                str(workers),
                "--batch",
                str(batch),
                "--request-concurrency",
                str(request_concurrency),
                "--no-scheduler",
            ],
            env={
                "MEMORY_EMBEDDER": embedder,
                "MEMORY_EMBEDDER_THREADS": str(threads),
                "MEMORY_QUERY_CACHE_SIZE": str(query_cache_size),
                "OMP_NUM_THREADS": str(threads),
            },
        )
        try:
            progress.note(f"server on {server.host}:{server.port}; seeding {seed_turns} turn(s) per user")
            seeding = LoadFigures()
            seeds = [
                _turn(rng, user, -1 - i, start + timedelta(seconds=i)) for user in names for i in range(seed_turns)
            ]
            for turn in seeds:
                turn["turn_id"] = f"seed-{turn['user_id']}-{turn['turn_id'].rsplit('-', 1)[1]}"
            _post_turns(_Connection(server.host, server.port, server.token), seeds, seeding, threading.Lock())
            if seeding.errors:
                raise RuntimeError(f"seeding failed: {seeding.errors[:3]}")
            if _wait_processed_prefix(server.db, "seed-", len(seeds), drain_timeout) is None:
                raise RuntimeError("the seed turns were not processed in time")
            load = [
                _turn(rng, rng.choice(names), i, start + timedelta(hours=1, milliseconds=i)) for i in range(turns)
            ]
            progress.note(f"load: {searchers} searcher(s) for {seconds:g}s while {turns} turn(s) are posted")
            lock = threading.Lock()
            stop = threading.Event()
            threads_ = [
                threading.Thread(
                    target=_search_loop,
                    args=(_Connection(server.host, server.port, server.token), names, seed + i, stop, figures, lock),
                    daemon=True,
                )
                for i in range(searchers)
            ]
            poster = threading.Thread(
                target=_post_turns,
                args=(_Connection(server.host, server.port, server.token), load, figures, lock),
                daemon=True,
            )
            began = time.perf_counter()
            for thread in threads_:
                thread.start()
            poster.start()
            _wait(seconds, progress)
            stop.set()
            figures.processed_during_load = _processed(server.db)
            for thread in threads_:
                thread.join(timeout=120)
            figures.search_seconds = time.perf_counter() - began
            poster.join()
            progress.note(
                f"searches stopped: {figures.processed_during_load} of {figures.turns_accepted} turn(s) processed; "
                "draining"
            )
            with progress.bar("processed", figures.turns_accepted, unit="turns") as bar:
                figures.drain_seconds = _wait_processed(server.db, figures.turns_accepted, drain_timeout, bar)
            figures.rss_peak_mb = server.rss_peak_mb()
        finally:
            code = server.stop()
        if code != 0:
            figures.errors.append(f"memory-core serve exited with {code}")
        _check_files(server.db, figures)
    return figures


def _wait_processed_prefix(db: Path, prefix: str, target: int, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if _processed(db, prefix) >= target:
            return time.monotonic() - started
        time.sleep(0.1)
    return None


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """Run the benchmark, print the figures and the verdict; exit 1 when the bar is missed.

    The figures go to ``out`` (with ``--json``: the report, one JSON document), progress to ``progress``.
    """
    figures = measure(
        searchers=args.searchers,
        seconds=args.seconds,
        turns=args.turns,
        users=args.users,
        seed_turns=args.seed_turns,
        embedder=args.embedder,
        workers=args.workers,
        batch=args.batch,
        threads=args.threads,
        drain_timeout=args.drain_timeout,
        seed=args.seed,
        request_concurrency=args.request_concurrency,
        query_cache_size=args.query_cache_size,
        progress=progress,
    )
    result = figures.as_dict()
    missed = figures.verdict()
    report = {
        "benchmark": "serve",
        "settings": {
            "searchers": args.searchers,
            "seconds": args.seconds,
            "turns": args.turns,
            "users": args.users,
            "seed_turns": args.seed_turns,
            "embedder": args.embedder,
            "workers": args.workers,
            "batch": args.batch,
            "threads": args.threads,
            "request_concurrency": args.request_concurrency,
            "query_cache_size": args.query_cache_size,
        },
        "machine": machine_context(),
        "figures": result,
        "passed": not missed,
        "missed": missed,
    }
    rows = [
        ("searches / s", f"{result['searches_per_second']}"),
        ("search p50 / p99 (ms)", f"{result['search_p50_ms']} / {result['search_p99_ms']}"),
        ("POST /turns p50 / p99 (ms)", f"{result['post_p50_ms']} / {result['post_p99_ms']}"),
        ("turns accepted", f"{result['turns_accepted']} of {result['turns_posted']}"),
        (
            "processed during load",
            f"{result['processed_during_load']} ({result['processed_during_load_share']:.0%})",
        ),
        ("time to drain the rest (s)", f"{result['drain_seconds']}"),
        ("lost / duplicated / dead-lettered", f"{result['lost']} / {result['duplicated']} / {result['dead_letters']}"),
        ("errors", f"{result['errors']}"),
        ("server peak RSS (MB)", f"{result['rss_peak_mb']}"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    lines += [f"  error: {sample}" for sample in result["error_samples"]]
    lines.append("passed" if not missed else "missed the bar: " + "; ".join(missed))
    publish(report, args, out, "\n".join(lines) + "\n")
    return 0 if not missed else 1
