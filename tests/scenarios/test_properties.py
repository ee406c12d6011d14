"""Properties over random conversations built from the scenario sentences (hashing embedder)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline import SCOPE, Pipeline, make_turn
from scenario_data import SCENARIOS

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.service.consolidation.features import normalized_statement
from memory_core.service.consolidation.rules import find_contradiction

SENTENCES = sorted({turn for s in SCENARIOS for turn in s.turns if isinstance(turn, str) and "##" not in turn})


async def _check(conversation: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        once = Pipeline.open(Path(tmp) / "once.db", HashingEmbedder())
        twice = Pipeline.open(Path(tmp) / "twice.db", HashingEmbedder())
        try:
            turns = [make_turn(i, text) for i, text in enumerate(conversation)]
            for turn in turns:
                await once.ingest(turn)
                await twice.ingest(turn)
                await twice.ingest(turn)
            ids = [t.turn_id for t in turns]
            assert await twice.export(SCOPE, ids) == await once.export(SCOPE, ids)
            active = await once.active()
            # no duplicates among the active memories
            assert len({normalized_statement(m) for m in active}) == len(active)
            # no two active memories contradict each other
            for i, a in enumerate(active):
                for b in active[i + 1:]:
                    assert find_contradiction(a, b) is None or find_contradiction(b, a) is None, (a, b)
        finally:
            await once.close()
            await twice.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=8))
def test_random_conversations_replay_and_stay_consistent(conversation: list[str]) -> None:
    asyncio.run(_check(conversation))
