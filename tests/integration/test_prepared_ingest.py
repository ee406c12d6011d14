"""Turns prepared ahead (:func:`prepare_turns`: extracted, and all their passages embedded in one call)
are ingested exactly as they are one at a time: the same records with the same vectors, the same
history and journals; preparing is best effort, so whatever it cannot do is done by ingestion itself."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenarios"))

from pipeline import SCOPE, START, Pipeline, make_turn

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.domain.messages import Turn
from memory_core.domain.records import Scope
from memory_core.errors import TransientError, ValidationError
from memory_core.ports import TurnStart
from memory_core.service.episodes import EpisodePolicy
from memory_core.service.extraction.extractor import MemoryExtractor
from memory_core.service.preparation import PreparedTurn, prepare_turns
from memory_core.service.results import IngestResult

OTHER = Scope.of("user-2", "travel-agent")
CONVERSATION = [
    "来週京都に旅行する予定です。旅館が好きです。",
    "辛い料理が苦手です。紅茶が好きです。",
    "I live in Osaka. I have two cats.",
    "旅館が好きです。",
    "最近は紅茶よりコーヒーが好きです。",
    "辛い料理が苦手って言ったのは忘れて。",
    "Thanks, that helps!",
    "Actually I moved to Kyoto last month.",
]
TURNS = [make_turn(i, text) for i, text in enumerate(CONVERSATION)] + [
    make_turn(i, text, scope=OTHER, prefix="o") for i, text in enumerate(CONVERSATION[:4])
]


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, recording every passage call; can be told to fail."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []
        self.fail = False

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.fail:
            raise TransientError("the embedder is unavailable")
        return await super().embed_passages(texts)


async def ingest(pipeline: Pipeline, turn: Turn, prepared: PreparedTurn | None = None) -> IngestResult:
    return await pipeline.ingest(turn, episodes=EpisodePolicy(), prepared=prepared)


async def prepare(pipeline: Pipeline, turns: Sequence[Turn]) -> list[PreparedTurn | None]:
    return await prepare_turns(
        turns,
        history=pipeline.history,
        extractor=pipeline.extractor,
        embedder=pipeline.embedder,
        episodes=EpisodePolicy(),
    )


async def export(pipeline: Pipeline) -> dict[str, Any]:
    ids = {SCOPE: [t.turn_id for t in TURNS if t.scope == SCOPE], OTHER: [t.turn_id for t in TURNS if t.scope == OTHER]}
    return {str(scope): await pipeline.export(scope, turn_ids) for scope, turn_ids in ids.items()}


def test_prepared_turns_are_ingested_exactly_as_one_at_a_time(tmp_path: Path) -> None:
    async def run() -> tuple[dict[str, Any], dict[str, Any], list[list[str]], list[list[str]]]:
        alone = Pipeline.open(tmp_path / "alone.db", CountingEmbedder())
        ahead = Pipeline.open(tmp_path / "ahead.db", CountingEmbedder())
        try:
            for turn in TURNS:
                await ingest(alone, turn)
            prepared = await prepare(ahead, TURNS)  # both scopes, one call
            assert all(p is not None and p.is_for(t) for p, t in zip(prepared, TURNS, strict=True))
            for turn, ready in zip(TURNS, prepared, strict=True):
                await ingest(ahead, turn, ready)
            return await export(alone), await export(ahead), alone.embedder.calls, ahead.embedder.calls  # type: ignore[attr-defined]
        finally:
            await alone.close()
            await ahead.close()

    expected, actual, calls_alone, calls_ahead = asyncio.run(run())
    assert actual == expected  # records with their vectors, the history, the turn journals
    assert sum(len(r["records"]) for r in actual.values()) > 15
    # every candidate's passage went in the one call; what came after were the episodes' redactions
    # (a forget request rewrites the episodes that said it), made in both runs alike
    assert len(calls_ahead[0]) > len(TURNS)
    assert {t for call in calls_alone for t in call} == {t for call in calls_ahead for t in call}
    assert len(calls_ahead) < len(calls_alone) // 2


def test_a_turn_already_begun_or_ingested_is_not_prepared(tmp_path: Path) -> None:
    async def run() -> list[PreparedTurn | None]:
        pipeline = Pipeline.open(tmp_path / "m.db", CountingEmbedder())
        try:
            await ingest(pipeline, TURNS[0])
            # TURNS[1] was begun (its journal holds the candidates) and then the process died
            await pipeline.history.begin_turn(
                TurnStart(
                    SCOPE, TURNS[1].turn_id, candidates=(), extraction_path="rules", fallback_reason=None, at=START
                )
            )
            return await prepare(pipeline, TURNS[:3])
        finally:
            await pipeline.close()

    prepared = asyncio.run(run())
    assert prepared[0] is None and prepared[1] is None
    assert prepared[2] is not None and prepared[2].vectors


def test_a_turn_its_scopes_purge_drops_is_not_prepared(tmp_path: Path) -> None:
    async def run() -> tuple[list[PreparedTurn | None], list[list[str]]]:
        pipeline = Pipeline.open(tmp_path / "m.db", CountingEmbedder())
        try:
            # the scope was purged after its first two turns were said (and before they were ingested)
            await pipeline.history.record_tombstone(SCOPE.user_id, SCOPE.agent_id, TURNS[1].occurred_at)
            prepared = await prepare(pipeline, TURNS[:4])
            return prepared, pipeline.embedder.calls  # type: ignore[attr-defined]
        finally:
            await pipeline.close()

    prepared, calls = asyncio.run(run())
    assert [p is not None for p in prepared] == [False, False, True, True]
    assert not any("京都" in text for call in calls for text in call)  # the purged words were not embedded


def test_a_chat_models_extraction_is_not_prepared_ahead(tmp_path: Path) -> None:
    from memory_core.bootstrap import build_service, load_settings
    from memory_core.ports import ChatModel, FixedClock

    asked: list[str] = []

    class Unreachable(ChatModel):
        """A chat model that records being asked (preparing ahead must not ask it) and is unavailable."""

        name = "unreachable"

        async def complete_json(self, **call: Any) -> Any:
            asked.append(call["user"])
            raise TransientError("the chat model is unavailable")

    settings = load_settings(environ={"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(tmp_path / "m.db"))

    async def run() -> list[PreparedTurn | None]:
        service = build_service(settings, clock=FixedClock(TURNS[-1].occurred_at), chat_model=Unreachable())
        try:
            return await service.prepare(TURNS[:3])
        finally:
            await service.close()

    assert asyncio.run(run()) == [None, None, None]
    assert asked == []


def test_what_was_prepared_for_another_turn_is_ignored(tmp_path: Path) -> None:
    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        alone = Pipeline.open(tmp_path / "alone.db", CountingEmbedder())
        wrong = Pipeline.open(tmp_path / "wrong.db", CountingEmbedder())
        try:
            [for_other] = await prepare(wrong, [TURNS[2]])
            for turn in TURNS[:2]:
                await ingest(alone, turn)
                await ingest(wrong, turn, for_other)  # prepared for TURNS[2], handed to another turn
            return await alone.export(SCOPE), await wrong.export(SCOPE)
        finally:
            await alone.close()
            await wrong.close()

    expected, actual = asyncio.run(run())
    assert actual == expected


def test_a_failed_extraction_leaves_that_turn_and_the_later_ones_to_ingestion(tmp_path: Path) -> None:
    class Failing(MemoryExtractor):
        async def extract(self, turn: Turn) -> Any:
            if turn.turn_id == "t1":
                raise TransientError("the chat model is unavailable")
            return await super().extract(turn)

    async def run() -> list[PreparedTurn | None]:
        pipeline = Pipeline.open(tmp_path / "m.db", CountingEmbedder())
        pipeline.extractor = Failing()
        try:
            prepared = await prepare(pipeline, TURNS[:4])
            await ingest(pipeline, TURNS[0], prepared[0])
            with pytest.raises(TransientError):  # ingesting it raises, where the queue handles it
                await ingest(pipeline, TURNS[1], prepared[1])
            return prepared
        finally:
            await pipeline.close()

    prepared = asyncio.run(run())
    assert prepared[0] is not None
    assert prepared[1:] == [None, None, None]  # extracted one after another: the rest waits for ingestion


def test_a_failed_embedding_leaves_the_vectors_to_ingestion(tmp_path: Path) -> None:
    async def run() -> tuple[list[PreparedTurn | None], dict[str, Any], dict[str, Any]]:
        alone = Pipeline.open(tmp_path / "alone.db", CountingEmbedder())
        pipeline = Pipeline.open(tmp_path / "m.db", CountingEmbedder())
        try:
            embedder: CountingEmbedder = pipeline.embedder  # type: ignore[assignment]
            embedder.fail = True
            prepared = await prepare(pipeline, TURNS[:3])
            embedder.fail = False
            for turn, ready in zip(TURNS[:3], prepared, strict=True):
                await ingest(pipeline, turn, ready)
                await ingest(alone, turn)
            return prepared, await alone.export(SCOPE), await pipeline.export(SCOPE)
        finally:
            await alone.close()
            await pipeline.close()

    prepared, expected, actual = asyncio.run(run())
    assert all(p is not None and not p.vectors for p in prepared)  # extracted, not embedded
    assert actual == expected


def test_prepare_messages_skips_what_is_not_a_turn_it_may_ingest() -> None:
    from memory_core.bootstrap import build_service, load_settings
    from memory_core.ports import FixedClock

    clock = FixedClock(TURNS[-1].occurred_at)
    future = make_turn(99, "I like tea.", prefix="f")  # 99 hours after the clock
    def body(turn: Turn) -> str:
        return turn.model_dump_json(by_alias=True)

    bodies: list[Any] = [
        body(TURNS[0]),
        b"not json",
        '{"schema": "memory-core.recall.v1"}',
        body(future),
        body(TURNS[1]).encode(),
        json.loads(body(TURNS[2])),
    ]

    async def run() -> list[PreparedTurn | None]:
        settings = load_settings(environ={"MEMORY_EMBEDDER": "hash"}, sqlite_path=":memory:")
        service = build_service(settings, clock=clock)
        try:
            prepared = await service.prepare_messages(bodies)
            with pytest.raises(ValidationError, match="future"):  # processing it says why
                await service.process_message(bodies[3])
            return prepared
        finally:
            await service.close()

    prepared = asyncio.run(run())
    assert [p is not None for p in prepared] == [True, False, False, False, True, True]
    assert [p.turn_id for p in prepared if p is not None] == ["t0", "t1", "t2"]
