"""Event time end to end on the embedded service: what a turn states about when becomes ``event_at`` /
``event_until`` of its fact and its episode (the user's words stay in the text), an UPDATE carries the
new statement's time, and export, import and the HTTP contract keep it."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.messages import MemoryEvent
from memory_core.domain.records import MemoryKind, MemoryRecord, Scope
from memory_core.entrypoints.embedded.server import ApiServer
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.ports import FixedClock
from memory_core.service.memory_service import MemoryService

# 2026-12-03 is a Thursday.
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
SCOPE = Scope.of("u", "default")


def service_at(path: Path) -> MemoryService:
    settings = load_settings(environ={}, sqlite_path=str(path), embedder="hash")
    return build_service(settings, embedder=HashingEmbedder(64), clock=FixedClock(NOW))


def turn(turn_id: str, text: str) -> dict[str, Any]:
    return {
        "turn_id": turn_id,
        "user_id": SCOPE.user_id,
        "agent_id": SCOPE.agent_id,
        "occurred_at": NOW.isoformat(),
        "messages": [{"role": "user", "text": text}],
    }


async def records(service: MemoryService) -> list[MemoryRecord]:
    return [r async for r in service.export(SCOPE.user_id)]


def day(year: int, month: int, date: int) -> datetime:
    return datetime(year, month, date, tzinfo=UTC)


def test_a_turn_in_each_language_gives_facts_and_episodes_their_event_time(tmp_path: Path) -> None:
    async def scenario() -> list[MemoryRecord]:
        service = service_at(tmp_path / "m.db")
        try:
            await service.ingest(turn("t-ja", "先週の金曜日に京都に行きました。"))
            await service.ingest(turn("t-en", "I'm flying to Lisbon on March 14."))
            await service.ingest(turn("t-none", "I love green tea."))
            return await records(service)
        finally:
            await service.close()

    found = {(r.kind, r.memory): r for r in asyncio.run(scenario())}
    kyoto = found[(MemoryKind.FACT, "先週の金曜日（2026年11月27日）に京都に行きました")]
    assert (kyoto.event_at, kyoto.event_until) == (day(2026, 11, 27), day(2026, 11, 28))
    lisbon = found[(MemoryKind.FACT, "I'm flying to Lisbon on March 14 (14 March 2027)")]
    assert (lisbon.event_at, lisbon.event_until) == (day(2027, 3, 14), day(2027, 3, 15))
    episode = found[(MemoryKind.EPISODE, "先週の金曜日に京都に行きました。")]  # the user's words, as said
    assert (episode.event_at, episode.event_until) == (day(2026, 11, 27), day(2026, 11, 28))
    assert episode.valid_from == NOW  # when it was said stays the validity
    tea = [r for (kind, text), r in found.items() if "green tea" in text]
    assert len(tea) == 2 and all(r.event_at is None and r.event_until is None for r in tea)


def test_an_update_carries_the_new_statements_event_time(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[MemoryEvent], list[MemoryRecord]]:
        service = service_at(tmp_path / "m.db")
        try:
            await service.ingest(turn("t-1", "I live in Berlin."))
            result = await service.ingest(turn("t-2", "I moved to Munich last month."))
            events = [d.event for d in result.decisions if d.candidate.kind.value == "fact"]
            return events, await records(service)
        finally:
            await service.close()

    events, stored = asyncio.run(scenario())
    assert events == [MemoryEvent.UPDATE]
    current = [r for r in stored if r.kind is MemoryKind.FACT and r.valid_until is None]
    assert [r.memory for r in current] == ["I moved to Munich last month (November 2026)"]
    assert (current[0].event_at, current[0].event_until) == (day(2026, 11, 1), day(2026, 12, 1))
    earlier = [r for r in stored if r.kind is MemoryKind.FACT and r.valid_until is not None]
    assert [r.memory for r in earlier] == ["I live in Berlin"] and earlier[0].event_at is None


def test_export_import_and_the_http_contract_keep_the_event_time(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[MemoryRecord], dict[str, Any]]:
        source = service_at(tmp_path / "a.db")
        try:
            await source.ingest(turn("t-1", "三日前に風邪をひきました。"))
            exported = [r.to_json_dict() for r in await records(source)]
        finally:
            await source.close()
        target = service_at(tmp_path / "b.db")
        server = ApiServer(MemoryApi(target), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            await target.import_records(json.loads(json.dumps(exported)))
            imported = await records(target)
            url = f"http://{server.host}:{server.port}/api/memories?user_id=u&agent_id=default"

            def get() -> dict[str, Any]:
                with urllib.request.urlopen(url) as answer:
                    body: dict[str, Any] = json.loads(answer.read())
                    return body

            listed = await asyncio.to_thread(get)
        finally:
            await asyncio.to_thread(server.stop)
            await target.close()
        return imported, listed

    imported, listed = asyncio.run(scenario())
    assert imported and all(r.event_at == day(2026, 11, 30) for r in imported)
    assert all(r.event_until == day(2026, 12, 1) for r in imported)
    shown = listed["memories"]
    assert shown and all(m["event_at"] == "2026-11-30T00:00:00Z" for m in shown)
    assert all(m["event_until"] == "2026-12-01T00:00:00Z" for m in shown)
