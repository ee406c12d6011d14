"""A user's export, page by page, on the real SQLite store and history: put together, the pages are the
whole export (no repeat, no gap), even with memories added, corrected and deleted between two pages."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from fake_table_service import FakeTableService
from functions_env import history_store

from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.errors import ValidationError
from memory_core.service import MemoryService
from memory_core.service.export_pages import ExportPosition

USER = "u1"
AGENTS = ("alpha", "beta", "gamma")


def _rows(agent: str, count: int, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "id": uuid.UUID(int=rng.getrandbits(128)).hex,
            "user_id": USER,
            "agent_id": agent,
            "memory": f"{agent} fact number {i}",
        }
        for i in range(count)
    ]


async def _seeded(svc: MemoryService) -> None:
    rng = random.Random(29)
    for agent, count in zip(AGENTS, (23, 31, 9), strict=True):
        await svc.import_records(_rows(agent, count, rng))
        records = [r async for r in svc.export(USER, agent)]
        for record in records[::3]:  # history: corrections and deletions
            await svc.update(Scope.of(USER, agent), record.id, record.memory + " (corrected)")
        for record in records[1::5]:
            await svc.delete(Scope.of(USER, agent), record.id, reason="test")
    await svc.import_records([{**r, "user_id": "u2"} for r in _rows("alpha", 4, rng)])  # another user


def with_service(fn: Callable[[MemoryService], Coroutine[Any, Any, None]]) -> Callable[[str, Path], None]:
    """Run ``fn`` on a seeded service over the SQLite store, with the SQLite history (which reads a
    slice of a scope's history) or the Table history on a fake Table service (read whole, sliced)."""

    @pytest.mark.parametrize("history", ["sqlite", "azure_table"])
    def test(history: str, tmp_path: Path) -> None:
        async def body() -> None:
            settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(tmp_path / "m.db"))
            tables = history_store(FakeTableService()) if history == "azure_table" else None
            options: dict[str, Any] = {} if tables is None else {"history": tables, "checkpoints": tables}
            async with build_service(settings, **options) as svc:
                await _seeded(svc)
                await fn(svc)

        asyncio.run(body())

    test.__name__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


async def _pages(
    service: MemoryService, limit: int, *, agent_id: str | None = None, between: Any = None
) -> tuple[list[MemoryRecord], list[HistoryEntry], int]:
    records: list[MemoryRecord] = []
    history: list[HistoryEntry] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await service.export_page(USER, agent_id, cursor=cursor, limit=limit)
        pages += 1
        assert len(page.records) + len(page.history) <= limit
        records.extend(page.records)
        history.extend(page.history)
        if page.next_cursor is None:
            return records, history, pages
        cursor = page.next_cursor
        if between is not None:
            await between(pages)


@with_service
async def test_the_pages_put_together_are_the_whole_export(service: MemoryService) -> None:
    everything = [r async for r in service.export(USER)]
    decisions = await service.export_history(USER)
    assert len(everything) == 63 and len(decisions) > 20
    for limit in (1, 7, 64, 1000):
        records, history, pages = await _pages(service, limit)
        assert [r.id for r in records] == [r.id for r in everything]
        assert records == everything  # every field, every status (the deleted ones too)
        assert Counter(map(_key, history)) == Counter(map(_key, decisions))
        assert pages >= (len(everything) + len(decisions)) // limit
    alpha, alpha_history, _ = await _pages(service, 5, agent_id="alpha")
    assert alpha == [r async for r in service.export(USER, "alpha")]
    assert Counter(map(_key, alpha_history)) == Counter(map(_key, await service.export_history(USER, "alpha")))
    assert {r.user_id for r in records} == {USER}


@with_service
async def test_writes_between_pages_neither_repeat_nor_skip_what_was_there(service: MemoryService) -> None:
    before = {r.id for r in [r async for r in service.export(USER)]}
    decisions = await service.export_history(USER)
    rng = random.Random(11)
    added: set[str] = set()

    async def write(page: int) -> None:
        agent = AGENTS[page % len(AGENTS)]
        rows = _rows(agent, 3, rng)  # random ids: some before the cursor, some after
        await service.import_records(rows)
        added.update(r["id"] for r in rows)
        scope = Scope.of(USER, agent)
        stored = [r async for r in service.export(USER, agent) if r.status is not MemoryStatus.DELETED]
        target = rng.choice(stored)
        await service.update(scope, target.id, f"{target.memory} (page {page})")
        await service.delete(scope, rng.choice(stored).id, reason=f"page {page}")

    records, history, pages = await _pages(service, 6, between=write)
    assert pages > 20
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids))  # nothing twice
    assert before <= set(ids)  # nothing that was there is missing
    assert set(ids) <= before | added
    seen = Counter(map(_key, history))
    assert all(count == 1 for count in seen.values())  # no decision twice
    assert all(seen[_key(entry)] == 1 for entry in decisions)  # every decision recorded before


@with_service
async def test_a_cursor_is_the_exports_own(service: MemoryService) -> None:
    first = await service.export_page(USER, "alpha", cursor=None, limit=2)
    assert first.next_cursor is not None and ExportPosition.decode(first.next_cursor).agent_id == "alpha"
    for bad in ("not-a-cursor", "", "AAAA", ExportPosition("alpha", "h", offset=3).encode() + "x"):
        with pytest.raises(ValidationError) as raised:
            await service.export_page(USER, None, cursor=bad, limit=2)
        assert raised.value.field == "cursor"
    with pytest.raises(ValidationError, match="another agent"):
        await service.export_page(USER, "beta", cursor=first.next_cursor, limit=2)
    # the cursor of an agent that no longer holds memories resumes at the next one
    gone = ExportPosition("alphz", "m", "ff").encode()
    page = await service.export_page(USER, None, cursor=gone, limit=1000)
    assert {r.agent_id for r in page.records} == {"beta", "gamma"} and page.next_cursor is None


@with_service
async def test_the_api_pages_the_export_and_leaves_vectors_out(service: MemoryService) -> None:
    api = MemoryApi(service)

    async def get(**query: str) -> Any:
        return await api.handle(ApiRequest("GET", f"/users/{USER}/export", query))

    first = await get(limit="10")
    assert first.status == 200 and first.body["count"] == 10 and first.body["next_cursor"]
    assert all(m["embedding"] is None for m in first.body["memories"])
    assert "queued" in first.body
    second = await get(limit="10", cursor=first.body["next_cursor"], include_vectors="true")
    assert second.status == 200 and second.body["queued"] == []
    assert all(len(m["embedding"]) > 8 for m in second.body["memories"])
    assert {m["id"] for m in first.body["memories"]}.isdisjoint(m["id"] for m in second.body["memories"])
    for query, field in (
        ({"limit": "1001"}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"include_vectors": "maybe"}, "include_vectors"),
        ({"cursor": "x" * 1025}, "cursor"),
        ({"cursor": "%%%"}, "cursor"),
    ):
        refused = await get(**query)
        assert refused.status == 422 and refused.body["error"]["field"] == field, refused.body
    default = await get()
    assert default.body["count"] + len(default.body["history"]) == 500 or default.body["next_cursor"] is None


def _key(entry: HistoryEntry) -> str:
    return entry.model_dump_json()
