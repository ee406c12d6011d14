"""The bound on heavy operations (export pages, purges, forgetting): while as many as the bound allows are
in progress, one more is refused at once with 429 and Retry-After, and searches are still answered.

The heavy operations are held inside the service on events, never timed: the embedded server over a real
socket (whose admission gate must not be taken by them), the Function App's HTTP functions, and the
remote client, which asks for a refused page again.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from functions_env import functions_env
from runtime_helpers import RunningRuntime, running

import function_app
from memory_core.client import remote
from memory_core.service import MemoryService

USER = "u1"
SEARCH = {"user_id": USER, "agent_id": "a1", "query": "fact number 3"}


class Hold:
    """Holds every export page inside the service until released; counts the pages held so far."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        original = MemoryService.export_page
        hold = self

        async def held(service: MemoryService, *args: Any, **kwargs: Any) -> Any:
            hold.entered.release()
            await asyncio.to_thread(hold.release.wait, 60)
            return await original(service, *args, **kwargs)

        monkeypatch.setattr(MemoryService, "export_page", held)

    def wait_entered(self, count: int) -> None:
        for _ in range(count):
            assert self.entered.acquire(timeout=30), "a held export never began"


def _rows(count: int, agent: str = "a1") -> list[dict[str, Any]]:
    return [{"user_id": USER, "agent_id": agent, "memory": f"{agent} fact number {i}"} for i in range(count)]


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[RunningRuntime]:
    # MEMORY_HEAVY_OPERATIONS=2 (the default) and two requests on the loop at once (the default).
    with running(tmp_path / "memory.db", workers=1, request_concurrency=2) as runtime:
        assert runtime.runtime.service is not None
        runtime.call(runtime.runtime.service.import_records(_rows(30)))
        yield runtime


def test_the_third_heavy_operation_is_refused_while_searches_answer(
    rt: RunningRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = Hold(monkeypatch)
    client = rt.client
    with ThreadPoolExecutor(2) as pool:
        try:
            held = [pool.submit(client.get, f"/api/users/{USER}/export") for _ in range(2)]
            hold.wait_entered(2)
            refused = client.get(f"/api/users/{USER}/export")
            assert refused.status == 429, refused.body
            assert refused.headers["retry-after"] == "5" and refused.body["error"]["code"] == "busy"
            assert "MEMORY_HEAVY_OPERATIONS" in refused.body["error"]["message"]
            purge = client.delete(f"/api/users/{USER}?confirm=true")
            assert purge.status == 429 and purge.body["error"]["code"] == "busy"
            assert client.post("/api/forgetting").status == 429
            # Searches and listings are not held back, neither by the bound nor by the exports held.
            search = client.post("/api/memories/search", SEARCH)
            assert search.status == 200 and search.body["hits"]
            assert client.get(f"/api/memories?user_id={USER}&agent_id=a1&limit=5").status == 200
        finally:
            hold.release.set()
        assert [f.result(timeout=30).status for f in held] == [200, 200]
    after = client.get(f"/api/users/{USER}/export")  # the bound is free again
    assert after.status == 200 and after.body["count"] == 30
    assert client.get(f"/api/memories?user_id={USER}&agent_id=a1").body["memories"]  # nothing purged


def test_the_remote_client_asks_for_a_refused_page_again(
    rt: RunningRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    assert rt.runtime.service is not None
    rt.call(rt.runtime.service.import_records(_rows(7, "b2")))
    monkeypatch.setattr(remote, "EXPORT_PAGE", 4)  # several pages
    monkeypatch.setattr(remote, "BUSY_WAIT_CAP", 0.01)
    monkeypatch.setattr(remote, "BUSY_ATTEMPTS", 10_000)
    hold = Hold(monkeypatch)
    refused = threading.Event()

    async def seen(response: httpx.Response) -> None:
        if response.status_code == 429:
            refused.set()

    async def export_all() -> Any:
        http = httpx.AsyncClient(timeout=30, event_hooks={"response": [seen]})
        client = remote.RemoteMemoryClient(f"http://{rt.client.host}:{rt.client.port}", http_client=http)
        try:
            return await client.export(USER, None)
        finally:
            await http.aclose()

    client = rt.client
    with ThreadPoolExecutor(3) as pool:
        try:
            held = [pool.submit(client.get, f"/api/users/{USER}/export") for _ in range(2)]
            hold.wait_entered(2)
            exported = pool.submit(asyncio.run, export_all())
            assert refused.wait(30), "the remote export was never refused"
        finally:
            hold.release.set()
        assert [f.result(timeout=30).status for f in held] == [200, 200]
        result = exported.result(timeout=60)
    assert sorted(r.memory for r in result.memories) == sorted(
        r["memory"] for r in _rows(30) + _rows(7, "b2")
    )
    assert len({r.id for r in result.memories}) == 37


def test_the_function_app_bounds_heavy_operations_by_its_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_HEAVY_OPERATIONS", "1")

    def request(method: str, route: str, params: dict[str, str] | None = None, **route_params: str) -> Any:
        return func.HttpRequest(
            method, f"https://memapp.azurewebsites.net/api/{route}", headers={}, params=params or {},
            route_params=route_params, body=b"",
        )

    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            try:
                await env.service.import_records(_rows(12))
                hold = Hold(monkeypatch)
                first = asyncio.create_task(
                    function_app.export_user(request("GET", f"users/{USER}/export", user_id=USER))
                )
                await asyncio.to_thread(hold.wait_entered, 1)
                refused = await function_app.export_user(request("GET", f"users/{USER}/export", user_id=USER))
                assert refused.status_code == 429 and refused.headers["Retry-After"] == "5"
                purge = await function_app.purge_user(
                    request("DELETE", f"users/{USER}", {"confirm": "true"}, user_id=USER)
                )
                assert purge.status_code == 429
                search = await function_app.search_memories(
                    func.HttpRequest(
                        "POST", "https://memapp.azurewebsites.net/api/memories/search",
                        headers={"Content-Type": "application/json"}, params={}, route_params={},
                        body=json.dumps(SEARCH).encode(),
                    )
                )
                assert search.status_code == 200
                hold.release.set()
                assert (await first).status_code == 200
                again = await function_app.export_user(request("GET", f"users/{USER}/export", user_id=USER))
                assert again.status_code == 200
            finally:
                function_app.runtime.use(None)  # type: ignore[arg-type]

    asyncio.run(body())
