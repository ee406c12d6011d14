"""The LLM path of the whole pipeline, with the real ``openai`` client against a local server.

Extraction and consolidation both talk to a scripted chat-completions server over a real socket:
valid answers are used, throttling is retried, and invalid JSON, invented ids and timeouts fall back
to the rules for that step, with the reason recorded in the decision history.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fake_openai_server import FakeOpenAIServer, Reply

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.models.openai_chat import OpenAIChatModel
from memory_core.adapters.models.openai_clients import CompatibleConnection
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.ports import FixedClock

SCOPE = Scope.of("u1", "travel")


def turn(turn_id: str, text: str, day: int) -> dict[str, Any]:
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": turn_id,
        "user_id": SCOPE.user_id,
        "agent_id": SCOPE.agent_id,
        "occurred_at": datetime(2026, 11, day, 9, tzinfo=UTC).isoformat(),
        "messages": [{"role": "user", "text": text}, {"role": "assistant", "text": "わかりました。"}],
    }


def fact(memory: str, evidence: str, importance: float = 0.8) -> dict[str, Any]:
    return {
        "memories": [
            {
                "kind": "fact",
                "memory": memory,
                "category": "preference",
                "importance": importance,
                "confidence": 0.9,
                "expires_at": None,
                "evidence": evidence,
            }
        ]
    }


def test_llm_answers_retries_and_fallbacks_through_the_service(tmp_path: Path) -> None:
    async def scenario(server: FakeOpenAIServer) -> None:
        model = OpenAIChatModel.openai_compatible(
            CompatibleConnection(base_url=server.base_url, timeout=0.5, max_retries=1), model="test-model"
        )
        history = SQLiteHistoryStore(tmp_path / "m.db")
        service = build_service(
            load_settings({"MEMORY_EMBEDDER": "hash", "MEMORY_EPISODES": "false"}, sqlite_path=str(tmp_path / "m.db")),
            clock=FixedClock(datetime(2026, 11, 5, tzinfo=UTC)),
            embedder=HashingEmbedder(),
            history=history,
            chat_model=model,
        )
        try:
            # 1. Valid answers: the model's candidate and decision are used as they are.
            server.script(
                Reply.json(fact("紅茶が好き", "紅茶が好きです。")),
                Reply.json(
                    {"event": "ADD", "target_id": None, "memory": "紅茶が好き", "reason": "new preference"}
                ),
            )
            first = await service.process_message(turn("t1", "紅茶が好きです。", 1))
            assert first.ingest is not None and first.ingest.extraction_path == "llm"
            (step,) = first.ingest.steps
            assert step.decision.event.value == "ADD" and step.path == "llm"
            added = step.decision.after
            assert added is not None and added.source == "llm.test-model" and added.importance == 0.8
            # which model extracted and decided it is in the memory's history
            (entry,) = await service.history_of(SCOPE, step.decision.memory_id or "")
            assert entry.reason.startswith("[llm test-model] ") and entry.after["source"] == "llm.test-model"

            # 2. Throttled once (retried by the client), then an invented id: the rules decide.
            server.script(
                Reply.status(429, retry_after="0.01"),
                Reply.json(fact("最近はコーヒーの方が好き", "最近はコーヒーの方が好きです。")),
                Reply.json({"event": "UPDATE", "target_id": "m7", "memory": "コーヒーが好き", "reason": "x"}),
            )
            second = await service.process_message(turn("t2", "最近はコーヒーの方が好きです。", 2))
            assert second.ingest is not None and second.ingest.extraction_path == "llm"
            (step,) = second.ingest.steps
            assert step.path == "rules-fallback"
            assert "invented id 'm7'" in (step.fallback_reason or "")
            assert step.decision.event.value == "UPDATE"  # the contradiction supersedes the old memory

            # 3. Invalid JSON twice: extraction falls back to rules; a timeout: consolidation does too.
            server.script(
                Reply.text("{not json"),
                Reply.text("still not json"),
                Reply.json(
                    {"event": "ADD", "target_id": None, "memory": "辛い料理が苦手", "reason": "late"},
                    delay=2.0,
                ),
                Reply.json(
                    {"event": "ADD", "target_id": None, "memory": "辛い料理が苦手", "reason": "late"},
                    delay=2.0,
                ),
            )
            third = await service.process_message(turn("t3", "辛い料理が苦手です。", 3))
            assert third.ingest is not None and third.ingest.extraction_path == "rules"
            assert third.ingest.fallback_reason
            (step,) = third.ingest.steps
            assert step.path == "rules-fallback" and "unavailable" in (step.fallback_reason or "")
            assert step.decision.event.value == "ADD"

            # 4. A gateway's HTML page with status 200, for extraction and for consolidation: the rules
            # take over at once; the turn is not retried.
            page = Reply.page(b"<html><body><h1>Service temporarily unavailable</h1></body></html>")
            server.script(page, page, page, page)
            fourth = await service.process_message(turn("t4", "窓側の席が好きです。", 4))
            assert fourth.ingest is not None and fourth.ingest.extraction_path == "rules"
            assert "not a chat completion" in (fourth.ingest.fallback_reason or "")
            (step,) = fourth.ingest.steps
            assert step.decision.event.value == "ADD"

            active = [
                r.memory for r in (await service.list(SCOPE, statuses=[MemoryStatus.ACTIVE])).records
            ]
            assert sorted(active) == sorted(["最近はコーヒーの方が好き", "辛い料理が苦手です", "窓側の席が好きです"])
            entries = await history.for_turn(SCOPE, "t2")
            assert "invented id" in entries[0].reason

            # Every chat request carried the structured-output schema and the user's words.
            chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
            assert all(r.body.get("response_format", {}).get("type") == "json_schema" for r in chats)
            assert any("紅茶が好きです" in str(r.messages()) for r in chats)
        finally:
            await service.close()
            await model.close()

    with FakeOpenAIServer() as server:
        asyncio.run(scenario(server))
