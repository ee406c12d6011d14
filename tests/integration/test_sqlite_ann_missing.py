"""Without ``usearch`` (the ``ann`` extra), ``MEMORY_VECTOR_INDEX_MIN_SCOPE`` says so once and every
scope is searched exactly."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from contract.store_contract import make

from memory_core.adapters.sqlite import ann as sqlite_ann
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest

SCOPE = Scope.of("user-1", "agent-1")


def test_without_usearch_every_scope_is_searched_exactly_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite_ann, "ann_available", lambda: False)
    path = tmp_path / "m.db"
    with caplog.at_level(logging.WARNING, logger="memory_core.adapters.sqlite.ann"):
        store = SQLiteMemoryStore(path, vector_index_min_scope=10)
    exact = SQLiteMemoryStore(path)
    texts = [f"memory {i} about {topic}" for i, topic in enumerate(["tea", "coffee", "ramen", "kyoto"] * 10)]
    options = MemorySearchOptions(mode=SearchMode.VECTOR, ranking_profile=RankingProfile.NONE, top=5)

    async def scenario() -> tuple[list[str], list[str]]:
        await store.upsert([make(t, SCOPE, id=f"m-{i:03d}") for i, t in enumerate(texts)])
        query = make("ramen").embedding
        found = await store.search(SearchRequest(SCOPE, "ramen", query, options))
        expected = await exact.search(SearchRequest(SCOPE, "ramen", query, options))
        return [h.record.id for h in found.hits], [h.record.id for h in expected.hits]

    try:
        found, expected = asyncio.run(scenario())
        assert found == expected and len(found) == 5
        assert store.approximate_indexes() == []  # no graph was started
    finally:
        store.close_sync()
        exact.close_sync()
    assert "pip install 'memory-core[ann]'" in caplog.text
