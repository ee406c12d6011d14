"""Helpers for the embedded-runtime tests: run ``EmbeddedRuntime`` on a thread, talk HTTP to it."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.bootstrap import load_settings
from memory_core.entrypoints.embedded.host import EmbeddedRuntime, RuntimeOptions

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def turn_body(
    index: int, text: str, *, user: str = "u1", agent: str = "a1", prefix: str = "t", start: datetime = START
) -> dict[str, Any]:
    """One ``turn.v1`` message as JSON."""
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": f"{prefix}{index}",
        "user_id": user,
        "agent_id": agent,
        "occurred_at": (start + timedelta(minutes=index)).isoformat().replace("+00:00", "Z"),
        "messages": [{"role": "user", "text": text}],
    }


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    raw: bytes
    body: Any = field(default=None)


class Client:
    """A tiny HTTP client on ``http.client`` (raw paths, exact headers)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            hdrs = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=payload, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
            if data:
                reply.body = json.loads(data)
            return reply
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("POST", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Reply:
        return self.request("DELETE", path, **kw)


class RunningRuntime:
    """An ``EmbeddedRuntime`` serving on a background thread with its own event loop."""

    def __init__(self, db: Path, *, environ: Mapping[str, str] | None = None, **options: Any) -> None:
        settings = load_settings({"MEMORY_EMBEDDER": "hash", **(environ or {})}, sqlite_path=str(db))
        defaults: dict[str, Any] = {
            "port": 0,
            "workers": 2,
            "idle_seconds": 0.02,
            "scheduler": False,
            "grace_seconds": 5.0,
            # Recall updates are queued at once, so a test can drain and see them applied; the window
            # that gathers them has tests of its own.
            "recall_window_seconds": 0.0,
        }
        self.runtime = EmbeddedRuntime(settings, RuntimeOptions(**{**defaults, **options}))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._loop.call_soon(self._started.set)
            await self.runtime.run(self._stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
            self._started.set()

    def start(self, *, workers: bool = True) -> RunningRuntime:
        """Start it and wait until it serves (and, unless ``workers`` is false, its workers exist)."""
        self._thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._error is not None:
                raise self._error
            served = self.runtime.server is not None or not self.runtime.options.http
            working = bool(self.runtime.workers) or self.runtime.options.workers == 0 or not workers
            if self.runtime.queue is not None and served and working:
                return self
            time.sleep(0.01)
        raise TimeoutError("the runtime did not start")

    @property
    def client(self) -> Client:
        assert self.runtime.server is not None
        return Client(self.runtime.server.host, self.runtime.server.port)

    def call(self, coro: Any) -> Any:
        """Run a coroutine on the runtime's loop and return its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until the queue is empty (every message completed or dead-lettered)."""
        assert self.runtime.queue is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.runtime.queue.stats().active == 0:
                return
            time.sleep(0.02)
        raise TimeoutError(f"the queue did not drain: {self.runtime.queue.stats()}")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)
        if self._error is not None:
            raise self._error


@contextmanager
def running(db: Path, **options: Any) -> Iterator[RunningRuntime]:
    runtime = RunningRuntime(db, **options).start()
    try:
        yield runtime
    finally:
        runtime.stop()
