"""Large scopes of the embedded store searched through an approximate vector index
(``MEMORY_VECTOR_INDEX_MIN_SCOPE``): built in the background while exact search answers, kept current
after writes, checked against exact search, and given up for exact search when it misses."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract.store_contract import NOW, make

from memory_core.adapters.sqlite import ann as sqlite_ann
from memory_core.adapters.sqlite.ann import ScopeVectorIndexes
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.adapters.sqlite.vector_index import ApproximateVectorIndex
from memory_core.bootstrap import build_store, load_settings
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ConfigurationError
from memory_core.ports import FixedClock

pytest.importorskip("usearch")

SCOPE = Scope.of("user-large", "agent-1")
SMALL = Scope.of("user-small", "agent-1")
DIMS = 48
SIZE = 1200
MIN_SCOPE = 1000


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def clustered(rng: np.random.Generator, count: int, centers: np.ndarray) -> np.ndarray:
    """Unit vectors near a few centers, as embeddings of related texts are (random noise is not
    something a graph can index)."""
    picks = centers[rng.integers(0, len(centers), size=count)]
    vectors = picks + 0.35 * rng.standard_normal((count, DIMS))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def fill(store: SQLiteMemoryStore, scope: Scope, vectors: np.ndarray, prefix: str = "m") -> None:
    records = [
        make(
            f"memory {i} of {scope.user_id}",
            scope,
            id=f"{prefix}-{i:05d}",
            category="plan" if i % 5 == 0 else "fact",
            importance=0.5,
            embedding=[float(x) for x in vectors[i]],
        )
        for i in range(len(vectors))
    ]
    for start in range(0, len(records), 500):
        run(store.upsert(records[start : start + 500]))


def vector_search(store: SQLiteMemoryStore, query: np.ndarray, scope: Scope = SCOPE, **options: Any) -> list[str]:
    opts = MemorySearchOptions(mode=SearchMode.VECTOR, ranking_profile=RankingProfile.NONE, top=10, vector_k=50, **options)
    return [hit.record.id for hit in run(store.search(SearchRequest(scope, "", [float(x) for x in query], opts))).hits]


def graph(store: SQLiteMemoryStore) -> dict[str, Any]:
    [found] = [g for g in store.approximate_indexes() if g["memories"] >= MIN_SCOPE]
    return found


def wait_until_ready(store: SQLiteMemoryStore, query: np.ndarray) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        vector_search(store, query)  # the first search starts the build; a later one installs it
        if any(g["state"] == "ready" for g in store.approximate_indexes()):
            return
        time.sleep(0.02)
    raise AssertionError(f"the index was not built in time: {store.approximate_indexes()}")


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    centers = rng.standard_normal((24, DIMS))
    return clustered(rng, SIZE, centers), clustered(rng, 60, centers)


@pytest.fixture
def ready(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]) -> Iterator[SQLiteMemoryStore]:
    """A store (``tmp_path / "m.db"``) whose large scope is filled and searched through its graph."""
    vectors, queries = data
    store = SQLiteMemoryStore(tmp_path / "m.db", vector_index_min_scope=MIN_SCOPE)
    try:
        fill(store, SCOPE, vectors)
        wait_until_ready(store, queries[0])
        yield store
    finally:
        store.close_sync()


@pytest.fixture
def exact(ready: SQLiteMemoryStore, tmp_path: Path) -> Iterator[SQLiteMemoryStore]:
    """The same file as ``ready``'s, searched without the index."""
    store = SQLiteMemoryStore(tmp_path / "m.db")
    try:
        yield store
    finally:
        store.close_sync()


def test_a_large_scope_answers_through_its_graph_as_exact_search_does(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
) -> None:
    vectors, queries = data
    path = tmp_path / "m.db"
    exact = SQLiteMemoryStore(path)
    fill(exact, SCOPE, vectors)
    fill(exact, SMALL, vectors[:200], prefix="s")
    approximate = SQLiteMemoryStore(path, vector_index_min_scope=MIN_SCOPE)
    try:
        assert vector_search(approximate, queries[0]) == vector_search(exact, queries[0])  # exact meanwhile
        wait_until_ready(approximate, queries[0])
        same = sum(vector_search(approximate, q) == vector_search(exact, q) for q in queries)
        hybrid = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.IMPORTANT, top=10)
        for q in queries[:10]:
            request = SearchRequest(SCOPE, "memory", [float(x) for x in q], hybrid)
            assert [h.record.id for h in run(approximate.search(request)).hits] == [
                h.record.id for h in run(exact.search(request)).hits
            ]
        vector_search(approximate, queries[0], scope=SMALL)  # a small scope: exact, no graph
        stats = graph(approximate)
        assert len(approximate.approximate_indexes()) == 1
    finally:
        exact.close_sync()
        approximate.close_sync()
    assert same >= 0.95 * len(queries)  # candidates rescored exactly: the same top 10 almost always
    assert stats["state"] == "ready" and stats["searches"] >= len(queries)
    assert stats["checks"] >= sqlite_ann.FIRST_CHECKS and stats["mean_recall"] >= 0.99


def test_filters_that_keep_little_of_the_scope_are_searched_exactly(
    ready: SQLiteMemoryStore, exact: SQLiteMemoryStore, data: tuple[np.ndarray, np.ndarray]
) -> None:
    _, queries = data
    before = graph(ready)["exact_fallbacks"]
    # a fifth of the scope is a plan: the graph would have to walk five times as wide
    assert vector_search(ready, queries[1], category="plan") == vector_search(exact, queries[1], category="plan")
    assert graph(ready)["exact_fallbacks"] == before + 1


def test_writes_after_the_build_are_found_through_the_graph(
    ready: SQLiteMemoryStore, data: tuple[np.ndarray, np.ndarray]
) -> None:
    _, queries = data
    store = ready
    searches = graph(store)["searches"]
    # a new memory right on a query, and an old one moved onto another
    fill(store, SCOPE, queries[2:3], prefix="new")
    moved = make("memory 7 moved", SCOPE, id="m-00007", category="fact", embedding=[float(x) for x in queries[3]])
    run(store.upsert([moved]))
    assert vector_search(store, queries[2])[0] == "new-00000"
    assert vector_search(store, queries[3])[0] == "m-00007"
    assert graph(store)["searches"] == searches + 2  # both through the graph
    assert graph(store)["state"] == "ready"


def test_a_graph_that_misses_is_built_again_once_then_the_scope_goes_back_to_exact_search(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray], caplog: pytest.LogCaptureFixture
) -> None:
    vectors, queries = data

    def scrambled(matrix: np.ndarray, keys: np.ndarray) -> ApproximateVectorIndex:
        """A graph whose keys point at the wrong vectors: what a broken index would return."""
        return ApproximateVectorIndex.build(matrix, np.random.default_rng(1).permutation(keys), threads=1)

    path = tmp_path / "m.db"
    exact = SQLiteMemoryStore(path)
    store = SQLiteMemoryStore(path, vector_index_min_scope=MIN_SCOPE)
    store._ann = ScopeVectorIndexes(MIN_SCOPE, lock=store._lock, build=scrambled)
    try:
        fill(store, SCOPE, vectors)
        wait_until_ready(store, queries[0])
        with caplog.at_level(logging.WARNING, logger="memory_core.adapters.sqlite.ann"):
            deadline = time.monotonic() + 30
            while graph(store)["state"] != "exact" and time.monotonic() < deadline:
                vector_search(store, queries[1])
                time.sleep(0.01)
        stats = graph(store)
        # from then on every answer is exact search's
        assert all(vector_search(store, q) == vector_search(exact, q) for q in queries[4:12])
    finally:
        store.close_sync()
        exact.close_sync()
    assert stats["state"] == "exact" and "recall" in (stats["why_exact"] or "")
    assert stats["builds"] == 2  # built again once, and given up when the new one missed too
    assert "building it again" in caplog.text and "goes back to exact vector search" in caplog.text


def test_an_index_that_fails_never_fails_a_search(
    ready: SQLiteMemoryStore, exact: SQLiteMemoryStore, data: tuple[np.ndarray, np.ndarray]
) -> None:
    _, queries = data

    def broken(*_: Any, **__: Any) -> Any:
        raise MemoryError("the graph's memory is gone")

    built = ready._ann._graphs[(SCOPE.user_id, SCOPE.agent_id)].index
    assert built is not None
    built.search = broken  # type: ignore[method-assign]
    assert vector_search(ready, queries[1]) == vector_search(exact, queries[1])
    assert graph(ready)["state"] == "exact" and "MemoryError" in (graph(ready)["why_exact"] or "")


def test_writes_that_change_no_vector_leave_the_graph_alone(
    ready: SQLiteMemoryStore, data: tuple[np.ndarray, np.ndarray]
) -> None:
    from memory_core.domain.policy import HumanMemoryPolicy

    _, queries = data
    store = ready
    ids = [f"m-{i:05d}" for i in range(SIZE)]
    run(store.recall(SCOPE, ids, HumanMemoryPolicy()))  # every memory's numbers change, no vector
    vector_search(store, queries[1])
    assert graph(store)["updated"] == 0 and graph(store)["builds"] == 1
    fill(store, SCOPE, queries[5:6], prefix="one-more")
    vector_search(store, queries[1])
    assert graph(store)["updated"] == 1


def test_vectors_written_faster_than_the_graph_takes_them_are_found_at_once(
    ready: SQLiteMemoryStore, data: tuple[np.ndarray, np.ndarray]
) -> None:
    _, queries = data
    store = ready
    burst = sqlite_ann.INLINE_UPDATES + 8
    fill(store, SCOPE, queries[10 : 10 + burst], prefix="burst")  # each new memory right on a query
    # every one is found by the very next search, though the graph takes 32 a search
    assert vector_search(store, queries[10 + burst - 1])[0] == f"burst-{burst - 1:05d}"
    assert graph(store)["updated"] == sqlite_ann.INLINE_UPDATES
    assert vector_search(store, queries[10])[0] == "burst-00000"
    assert graph(store)["updated"] == burst and graph(store)["builds"] == 1


def test_a_purged_scope_loses_its_graph(
    ready: SQLiteMemoryStore, data: tuple[np.ndarray, np.ndarray]
) -> None:
    vectors, queries = data
    store = ready
    run(store.purge(SCOPE.user_id, SCOPE.agent_id))
    assert store.approximate_indexes() == []
    fill(store, SCOPE, vectors[:50])  # small again: searched exactly, no graph
    assert len(vector_search(store, queries[0])) == 10 and store.approximate_indexes() == []


def test_a_scope_with_a_graph_stays_in_memory_while_others_come_and_go(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
) -> None:
    vectors, queries = data
    store = SQLiteMemoryStore(tmp_path / "m.db", vector_index_min_scope=MIN_SCOPE, cache_documents=1_500)
    try:
        fill(store, SCOPE, vectors)
        others = [Scope.of(f"user-{i}", "agent-1") for i in range(3)]
        for n, other in enumerate(others):
            fill(store, other, vectors[:400], prefix=f"o{n}")
        wait_until_ready(store, queries[0])
        for _ in range(3):
            for other in others:  # each alone would push the large scope out of a 1,500-memory cache
                vector_search(store, queries[2], scope=other)
            vector_search(store, queries[2])
        assert graph(store)["state"] == "ready" and graph(store)["builds"] == 1
        # the scope just searched is never the one evicted, though the kept one fills the cache
        vector_search(store, queries[2], scope=others[0])
        assert (others[0].user_id, others[0].agent_id) in store._cache
    finally:
        store.close_sync()


def test_the_setting_is_validated_and_reaches_the_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="MEMORY_VECTOR_INDEX_MIN_SCOPE"):
        load_settings(environ={"MEMORY_VECTOR_INDEX_MIN_SCOPE": "-1"})
    settings = load_settings(environ={"MEMORY_VECTOR_INDEX_MIN_SCOPE": "50000"}, sqlite_path=str(tmp_path / "m.db"))
    store = build_store(settings, clock=FixedClock(NOW))
    try:
        assert isinstance(store, SQLiteMemoryStore) and store._ann.min_scope == 50000 and store._ann.enabled
    finally:
        run(store.close())
    assert not ScopeVectorIndexes(0).enabled  # the default: every scope exact


def test_bench_ann_measures_a_store_scope_with_the_index_off_and_on(data: tuple[np.ndarray, np.ndarray]) -> None:
    from memory_core.tools.bench.ann import measure_store

    vectors, queries = data
    report = run(measure_store(vectors, queries[:12], k=20))
    assert report["memories"] == SIZE and report["build_seconds_in_background"] >= 0
    assert set(report["modes"]) == {"vector", "hybrid + important"}
    for figures in report["modes"].values():
        assert figures["exact_ms"]["p50"] > 0 and figures["approximate_ms"]["p50"] > 0
        assert figures["same_top"] >= 0.9
    [index] = report["index"]
    assert index["state"] == "ready" and index["searches"] >= 24 and index["mean_recall"] >= 0.99
