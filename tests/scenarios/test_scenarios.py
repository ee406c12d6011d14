"""The scenario suite on the rule path, end to end: extraction → consolidation → SQLite store."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from pipeline import SCOPE, Pipeline, make_turn
from scenario_data import SCENARIOS, Scenario

from memory_core.ports import Embedder

_CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def test_the_suite_is_large_enough() -> None:
    assert len(SCENARIOS) >= 100
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)
    assert {s.lang for s in SCENARIOS} == {"ja", "en"}


async def _run(scenario: Scenario, path: Path, embedder: Embedder) -> tuple[list[str], list[list[str]]]:
    pipeline = Pipeline.open(path, embedder)
    try:
        events: list[list[str]] = []
        for index, turn in enumerate(scenario.turns):
            result = await pipeline.ingest(make_turn(index, turn))
            events.append([d.event.value for d in result.decisions])
        return await pipeline.active(), events
    finally:
        await pipeline.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario, embedder: Embedder, tmp_path: Path) -> None:
    active, events = asyncio.run(_run(scenario, tmp_path / "memory.db", embedder))
    assert active == sorted(scenario.active), f"events: {events}"
    if scenario.events is not None:
        assert events == scenario.events
    if scenario.lang == "ja":
        assert all(_CJK.search(text) for text in active), "Japanese memories must stay Japanese"


async def _replay(scenario: Scenario, tmp_path: Path, embedder: Embedder) -> None:
    turns = [make_turn(i, t) for i, t in enumerate(scenario.turns)]
    ids = [t.turn_id for t in turns]
    once = Pipeline.open(tmp_path / "once.db", embedder)
    twice = Pipeline.open(tmp_path / "twice.db", embedder)
    interleaved = Pipeline.open(tmp_path / "interleaved.db", embedder)
    try:
        for turn in turns:
            await once.ingest(turn)
            await twice.ingest(turn)
            await interleaved.ingest(turn)
            again = await interleaved.ingest(turn)  # an immediate redelivery
            assert again.status == "duplicate"
        for turn in turns:  # the whole conversation delivered a second time
            assert (await twice.ingest(turn)).status == "duplicate"
        expected = await once.export(SCOPE, ids)
        assert await twice.export(SCOPE, ids) == expected
        assert await interleaved.export(SCOPE, ids) == expected
    finally:
        for pipeline in (once, twice, interleaved):
            await pipeline.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_replay_gives_the_same_store(scenario: Scenario, embedder: Embedder, tmp_path: Path) -> None:
    asyncio.run(_replay(scenario, tmp_path, embedder))
