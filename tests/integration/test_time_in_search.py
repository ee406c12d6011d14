"""Time in a search over the faces: ``reference_time`` and ``as_of`` in the HTTP body (a real socket)
and on the command line, read against the store's supersession chain."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime_helpers import Client

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.records import MemoryRecord
from memory_core.entrypoints.embedded.server import ApiServer
from memory_core.entrypoints.http.dispatcher import MemoryApi

EMBEDDER = HashingEmbedder()
MOVED = datetime(2026, 10, 1, tzinfo=UTC)
#: A day of December: "in March" is March 2026, when the user lived in Berlin.
TURN_TIME = "2026-12-03T12:00:00+00:00"


def fact(id_: str, text: str, valid_from: datetime, **fields: Any) -> MemoryRecord:
    return MemoryRecord(
        id=id_,
        user_id="u1",
        agent_id="a1",
        memory=text,
        created_at=valid_from,
        updated_at=valid_from,
        valid_from=valid_from,
        importance=0.5,
        retention_score=0.9,
        embedding=EMBEDDER.embed_sync(text).tolist(),
        **fields,
    )


def stored(db: Path) -> None:
    store = SQLiteMemoryStore(db)
    records = [
        fact("munich", "I live in Munich", MOVED),
        fact(
            "berlin",
            "I live in Berlin",
            datetime(2026, 1, 5, tzinfo=UTC),
            valid_until=MOVED,
            superseded_by="munich",
        ),
    ]
    asyncio.run(store.upsert(records))
    store.close_sync()


def search_over_http(db: Path, body: dict[str, Any]) -> tuple[int, Any]:
    async def scenario() -> tuple[int, Any]:
        service = build_service(
            load_settings(environ={}, sqlite_path=str(db), embedder="hash"), embedder=EMBEDDER
        )
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            payload = {"user_id": "u1", "agent_id": "a1", "recall": False, **body}
            reply = await asyncio.to_thread(
                Client(server.host, server.port).post, "/api/memories/search", payload
            )
            return reply.status, reply.body
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()

    return asyncio.run(scenario())


def ids(body: Any) -> list[str]:
    return [hit["memory"]["id"] for hit in body["hits"]]


def test_over_http_the_query_s_month_reads_the_value_that_held_then(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    stored(db)
    status, body = search_over_http(db, {"query": "Where did I live in March?", "reference_time": TURN_TIME})
    assert status == 200, body
    assert ids(body) == ["berlin"]
    status, body = search_over_http(db, {"query": "Where do I live?", "reference_time": TURN_TIME})
    assert ids(body) == ["munich"]
    status, body = search_over_http(db, {"query": "Where do I live?", "as_of": "2026-03-15T00:00:00Z"})
    assert ids(body) == ["berlin"]


def test_over_http_a_reference_time_that_is_no_time_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    stored(db)
    status, body = search_over_http(
        db, {"query": "Where did I live in March?", "reference_time": "last Tuesday"}
    )
    assert status == 422
    assert "reference_time" in json.dumps(body)


def test_from_the_command_line_with_a_reference_time(tmp_path: Path, monkeypatch: Any) -> None:
    db = tmp_path / "m.db"
    stored(db)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    base = ["--db", str(db), "--json", "search", "--user", "u1", "--agent", "a1"]
    out = io.StringIO()
    assert main([*base, "Where did I live in March?", "--reference-time", TURN_TIME], out=out) == 0, (
        out.getvalue()
    )
    assert ids(json.loads(out.getvalue())) == ["berlin"]
    out = io.StringIO()
    assert main([*base, "Where do I live?", "--as-of", "2026-11-01"], out=out) == 0, out.getvalue()
    assert ids(json.loads(out.getvalue())) == ["munich"]
