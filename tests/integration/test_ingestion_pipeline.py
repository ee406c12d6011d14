"""Ingestion on SQLite: history, provenance, crash + redelivery, scopes, and the consolidation LLM path."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenarios"))

from pipeline import SCOPE, Pipeline, make_turn

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.cli.main import main
from memory_core.domain.messages import FORGOTTEN_REASON, HistoryEntry, MemoryEvent
from memory_core.domain.records import FORGOTTEN_TEXT, MemoryRecord, MemoryStatus, Scope
from memory_core.errors import TransientError, ValidationError
from memory_core.ports import ChatModel, SchemaT
from memory_core.service.consolidation.consolidator import MemoryConsolidator
from memory_core.service.journal import earlier_value_id, memory_id_for
from memory_core.service.prompts.consolidation import ConsolidationDecision

CONVERSATION: list[Any] = [
    "来週京都に旅行する予定です。旅館が好きです。",
    "辛い料理が苦手です。紅茶が好きです。",
    "旅館が好きです。",
    "最近は紅茶よりコーヒーが好きです。",
    "辛い料理が苦手って言ったのは忘れて。",
]


class Crash(Exception):
    pass


class CrashingStore(SQLiteMemoryStore):
    """Fails its n-th upsert (after the decision was recorded, before the write)."""

    crash_at: int | None = None
    calls = 0

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        type(self).calls += 1
        if type(self).crash_at is not None and type(self).calls == type(self).crash_at:
            raise Crash(f"crash at upsert {type(self).calls}")
        await super().upsert(records)


class CrashingHistory(SQLiteHistoryStore):
    """Fails before marking a turn processed, once."""

    fail_mark = False

    async def mark_turn_processed(self, scope: Scope, turn_id: str, at: Any) -> None:
        if type(self).fail_mark:
            type(self).fail_mark = False
            raise Crash("crash before marking the turn")
        await super().mark_turn_processed(scope, turn_id, at)


async def _reference(tmp_path: Path) -> dict[str, Any]:
    pipeline = Pipeline.open(tmp_path / "reference.db", HashingEmbedder())
    try:
        for i, turn in enumerate(CONVERSATION):
            await pipeline.ingest(make_turn(i, turn))
        return await pipeline.export(SCOPE, [f"t{i}" for i in range(len(CONVERSATION))])
    finally:
        await pipeline.close()


@pytest.mark.parametrize("crash_at", [1, 2, 3, 4, 5, 6, 7])
def test_crash_midway_and_redelivery_converge(tmp_path: Path, crash_at: int) -> None:
    async def run() -> None:
        expected = await _reference(tmp_path)
        CrashingStore.calls = 0
        CrashingStore.crash_at = crash_at
        pipeline = Pipeline.open(tmp_path / "crash.db", HashingEmbedder(), store_cls=CrashingStore)
        crashed = 0
        try:
            for i, turn in enumerate(CONVERSATION):
                for _attempt in range(3):  # at-least-once delivery: redeliver until it succeeds
                    try:
                        await pipeline.ingest(make_turn(i, turn))
                        break
                    except Crash:
                        crashed += 1
            assert crashed == 1
            assert await pipeline.export(SCOPE, [f"t{i}" for i in range(len(CONVERSATION))]) == expected
        finally:
            CrashingStore.crash_at = None
            await pipeline.close()

    asyncio.run(run())


def test_crash_before_the_turn_is_marked(tmp_path: Path) -> None:
    async def run() -> None:
        expected = await _reference(tmp_path)
        path = tmp_path / "mark.db"
        pipeline = Pipeline.open(path, HashingEmbedder())
        pipeline.history = CrashingHistory(path)
        try:
            for i, turn in enumerate(CONVERSATION):
                CrashingHistory.fail_mark = i == 3
                try:
                    await pipeline.ingest(make_turn(i, turn))
                except Crash:
                    result = await pipeline.ingest(make_turn(i, turn))
                    assert result.status == "resumed"
            assert await pipeline.export(SCOPE, [f"t{i}" for i in range(len(CONVERSATION))]) == expected
        finally:
            await pipeline.close()

    asyncio.run(run())


def test_history_per_memory_and_per_turn(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline = Pipeline.open(tmp_path / "h.db", HashingEmbedder())
        try:
            for i, turn in enumerate(CONVERSATION):
                await pipeline.ingest(make_turn(i, turn))
            tea_id = memory_id_for(SCOPE, "t1", 1)
            entries = await pipeline.history.for_memory(SCOPE, tea_id)
            assert [e.event for e in entries] == [MemoryEvent.ADD, MemoryEvent.UPDATE]
            assert entries[1].before is not None and entries[1].before["memory"] == "紅茶が好きです"
            assert entries[1].after is not None and entries[1].after["memory"] == "最近は紅茶よりコーヒーが好きです"
            assert entries[1].turn_id == "t3" and "supersedes" in entries[1].reason
            assert "embedding" not in entries[1].after
            # the value it held is kept as a record of its own, closed and linked (its ADD recorded)
            earlier = await pipeline.store.get(SCOPE, earlier_value_id(SCOPE, tea_id, "t3"))
            assert earlier is not None and earlier.memory == "紅茶が好きです" and earlier.superseded_by == tea_id
            assert earlier.valid_until == make_turn(3, "").occurred_at
            assert entries[1].after["metadata"]["earlier_values"] == [earlier.id]
            per_turn = await pipeline.history.for_turn(SCOPE, "t0")
            assert [e.event for e in per_turn] == [MemoryEvent.ADD, MemoryEvent.ADD]
            assert all(e.at == make_turn(0, "").occurred_at for e in per_turn)
            # DELETE is a status change with provenance, never a physical delete
            spicy_id = memory_id_for(SCOPE, "t1", 0)
            spicy = await pipeline.store.get(SCOPE, spicy_id)
            assert spicy is not None and spicy.status is MemoryStatus.DELETED
            # forgotten on request: only its tombstone is kept (id, status, times), not what it said
            assert spicy.metadata["deleted_by_turn"] == "t4" and spicy.memory == FORGOTTEN_TEXT
            assert spicy.embedding is None and "status_reason" not in spicy.metadata
            deleted = await pipeline.history.for_memory(SCOPE, spicy_id)
            assert deleted[-1].event is MemoryEvent.DELETE and deleted[-1].after is not None
            assert deleted[-1].after["status"] == "deleted"
            assert all(e.reason == FORGOTTEN_REASON and "辛い" not in str(e.before) + str(e.after) for e in deleted)
            # the restated fact reinforced the memory (NONE), it did not duplicate or delete it
            ryokan = await pipeline.history.for_memory(SCOPE, memory_id_for(SCOPE, "t0", 1))
            assert [e.event for e in ryokan] == [MemoryEvent.ADD, MemoryEvent.NONE]
            # plain appends (outside turns) are kept too
            manual = HistoryEntry(
                memory_id=tea_id, user_id=SCOPE.user_id, agent_id=SCOPE.agent_id, event=MemoryEvent.DELETE,
                reason="deleted through the API", at=make_turn(9, "").occurred_at,
            )
            await pipeline.history.append([manual])
            assert (await pipeline.history.for_memory(SCOPE, tea_id))[-1].reason == "deleted through the API"
            assert await pipeline.history.purge(SCOPE.user_id) == 9
            assert await pipeline.history.for_turn(SCOPE, "t0") == []
        finally:
            await pipeline.close()

    asyncio.run(run())


def test_scopes_do_not_meet(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline = Pipeline.open(tmp_path / "s.db", HashingEmbedder())
        other = Scope.of("user-2", "travel-agent")
        try:
            await pipeline.ingest(make_turn(0, "紅茶が好きです。"))
            await pipeline.ingest(make_turn(1, "コーヒーが好きです。", scope=other, prefix="o"))
            await pipeline.ingest(make_turn(2, "紅茶が好きって話は忘れて。", scope=other, prefix="o"))
            assert await pipeline.active(SCOPE) == ["紅茶が好きです"]
            assert await pipeline.active(other) == ["コーヒーが好きです"]
        finally:
            await pipeline.close()

    asyncio.run(run())


def test_memory_core_ingest_prints_each_decision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    path = tmp_path / "turns.jsonl"
    lines = [make_turn(i, t).model_dump_json(by_alias=True) for i, t in enumerate(CONVERSATION)]
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    db = str(tmp_path / "f.db")

    def ingest(*args: str) -> tuple[int, str]:
        out = io.StringIO()
        code = main(["--db", db, *args], out=out)
        return code, out.getvalue()

    code, text = ingest("ingest", str(path))
    assert code == 0
    headers = [line for line in text.splitlines() if line.startswith("turn ")]
    assert [h.split(" ")[1] for h in headers] == ["t0", "t1", "t2", "t3", "t4"]
    assert all(h.endswith("decision(s)") for h in headers)
    assert "ADD" in text and "NONE" in text and "UPDATE" in text and "DELETE" in text
    assert "紅茶が好きです → 最近は紅茶よりコーヒーが好きです" in text
    code, again = ingest("--json", "ingest", str(path))  # one JSON document: the turns' results
    assert code == 0 and [r["status"] for r in json.loads(again)] == ["duplicate"] * len(lines)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n{\"schema\": \"memory-core.turn.v1\"}\n", encoding="utf-8")
    def listed() -> list[dict[str, Any]]:  # (a read shows the retention at the moment of reading)
        text = ingest("--json", "list", "--user", SCOPE.user_id, "--agent", SCOPE.agent_id)[1]
        return [{k: v for k, v in m.items() if k != "retention_score"} for m in json.loads(text)["memories"]]

    before = listed()
    code, _ = ingest("ingest", str(bad))
    assert code == 2  # bad input, named by line; nothing of the file was ingested
    assert listed() == before


# -- the LLM path ---------------------------------------------------------------------------------


class ScriptedChatModel(ChatModel):
    """Answers consolidation prompts from a script; records the prompts."""

    def __init__(self, answers: list[dict[str, Any] | Exception]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    async def complete_json(
        self, *, system: str, user: str, schema: type[SchemaT], temperature: float = 0.0
    ) -> SchemaT:
        self.prompts.append(user)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return schema.model_validate(answer)


async def _llm_pipeline(tmp_path: Path, answers: list[dict[str, Any] | Exception]) -> tuple[Pipeline, ScriptedChatModel]:
    pipeline = Pipeline.open(tmp_path / "llm.db", HashingEmbedder())
    await pipeline.ingest(make_turn(0, "紅茶が好きです。"))  # rules (no model yet)
    model = ScriptedChatModel(answers)
    pipeline.consolidator = MemoryConsolidator(chat_model=model)
    return pipeline, model


def test_llm_valid_update(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline, model = await _llm_pipeline(
            tmp_path,
            [{"event": "UPDATE", "target_id": "m1", "memory": "コーヒーが好き(紅茶から変更)", "reason": "好みが変わった"}],
        )
        try:
            result = await pipeline.ingest(make_turn(1, "コーヒーが好きです。"))
            step = result.steps[0]
            assert step.path == "llm" and step.decision.event is MemoryEvent.UPDATE
            assert await pipeline.active() == ["コーヒーが好き(紅茶から変更)"]
            assert "m1" in model.prompts[0] and "紅茶が好きです" in model.prompts[0]
            assert _real_ids_hidden(model.prompts[0])
        finally:
            await pipeline.close()

    asyncio.run(run())


def _real_ids_hidden(prompt: str) -> bool:
    """The real memory ids are never shown to the model."""
    return memory_id_for(SCOPE, "t0", 0) not in prompt


def test_llm_invented_id_falls_back_to_rules(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline, _ = await _llm_pipeline(
            tmp_path, [{"event": "DELETE", "target_id": "m7", "memory": None, "reason": "made up"}]
        )
        try:
            result = await pipeline.ingest(make_turn(1, "コーヒーが好きです。"))
            step = result.steps[0]
            assert step.path == "rules-fallback" and step.fallback_reason is not None
            assert "invented id 'm7'" in step.fallback_reason
            assert step.decision.event is MemoryEvent.ADD  # the rules: likings accumulate (tea and coffee)
            assert sorted(await pipeline.active()) == sorted(["コーヒーが好きです", "紅茶が好きです"])
            entries = await pipeline.history.for_turn(SCOPE, "t1")
            assert "invented id" in entries[0].reason and entries[0].reason.startswith("[rules-fallback]")
        finally:
            await pipeline.close()

    asyncio.run(run())


def test_llm_none_for_a_contradiction_is_rejected(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline, _ = await _llm_pipeline(
            tmp_path,
            [
                {"event": "NONE", "target_id": "m1", "memory": None, "reason": "same"},
                {"event": "NONE", "target_id": "m1", "memory": None, "reason": "same"},
            ],
        )
        try:
            result = await pipeline.ingest(make_turn(1, "紅茶が苦手です。"))
            assert result.steps[0].path == "rules-fallback"
            assert await pipeline.active() == ["紅茶が苦手です"]
        finally:
            await pipeline.close()

    asyncio.run(run())


def test_llm_invalid_then_valid_and_unavailable(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline, _ = await _llm_pipeline(
            tmp_path,
            [
                ValidationError("answer", "is not JSON"),
                {"event": "ADD", "target_id": None, "memory": "温泉が好き", "reason": "new"},
                TransientError("429 too many requests"),
            ],
        )
        try:
            first = await pipeline.ingest(make_turn(1, "温泉が好きです。"))
            assert first.steps[0].path == "llm" and first.steps[0].decision.event is MemoryEvent.ADD
            second = await pipeline.ingest(make_turn(2, "旅館が好きです。"))
            assert second.steps[0].path == "rules-fallback"
            assert "unavailable" in (second.steps[0].fallback_reason or "")
            assert await pipeline.active() == sorted(["紅茶が好きです", "温泉が好き", "旅館が好きです"])
        finally:
            await pipeline.close()

    asyncio.run(run())


def test_consolidation_decision_schema_is_enforced() -> None:
    with pytest.raises(Exception, match="short id"):
        ConsolidationDecision.model_validate({"event": "DELETE", "target_id": "abc123", "memory": None, "reason": "x"})


def test_forget_reaches_an_archived_memory(tmp_path: Path) -> None:
    async def run() -> None:
        pipeline = Pipeline.open(tmp_path / "a.db", HashingEmbedder())
        try:
            await pipeline.ingest(make_turn(0, "辛い料理が苦手です。"))
            spicy = memory_id_for(SCOPE, "t0", 0)
            await pipeline.store.mark_status(SCOPE, spicy, MemoryStatus.ARCHIVED, reason="test")
            await pipeline.ingest(make_turn(1, "辛い料理が苦手って言ったのは忘れて。"))
            record = await pipeline.store.get(SCOPE, spicy)
            assert record is not None and record.status is MemoryStatus.DELETED
        finally:
            await pipeline.close()

    asyncio.run(run())
