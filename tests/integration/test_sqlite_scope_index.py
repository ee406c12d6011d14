"""A scope's search index kept current row by row, saved in the file and loaded back, ranks exactly as
one rebuilt from every row; a saved index never holds text the rows no longer hold."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract.store_contract import NOW, make

from memory_core.adapters.sqlite import scope_cache as sqlite_store
from memory_core.adapters.sqlite.scope_index import ScopeIndex, SnapshotError
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.ports import FixedClock

SCOPE = Scope.of("user-big", "agent-1")
OTHER = Scope.of("user-small", "agent-1")
WORDS = (
    "ramen sushi tokyo kyoto hiking piano deadline project budget allergy peanuts coffee tea morning "
    "evening report azure search python rust meeting travel hotel flight daughter birthday gift "
    "ラーメン 寿司 東京 京都 会議 旅行 誕生日 コーヒー 締め切り 予算"
).split()
CATEGORIES = ("preference", "constraint", "plan", "fact")
QUERIES = ("ramen tokyo", "allergy peanuts", "会議 予算", "azure python report", "birthday gift daughter", "")


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def _text(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))))


def _record(rng: np.random.Generator, i: int, scope: Scope = SCOPE, *, text: str | None = None) -> Any:
    return make(
        text or _text(rng),
        scope,
        id=f"m-{scope.user_id}-{i:05d}",
        days_ago=float(rng.integers(0, 300)),
        category=str(rng.choice(CATEGORIES)),
        importance=float(rng.random()),
        with_vector=bool(rng.random() > 0.05),
    )


def _options() -> list[MemorySearchOptions]:
    found = []
    for mode in (SearchMode.HYBRID, SearchMode.KEYWORD, SearchMode.VECTOR):
        for profile in (RankingProfile.IMPORTANT, RankingProfile.RECENT, RankingProfile.NONE):
            found.append(MemorySearchOptions(mode=mode, ranking_profile=profile, top=15, vector_k=40))
    found.append(MemorySearchOptions(mode=SearchMode.HYBRID, category="plan", include_archived=True, top=20))
    found.append(MemorySearchOptions(mode=SearchMode.KEYWORD, order_by=OrderBy.IMPORTANCE_DESC, top=30))
    return found


def _results(store: SQLiteMemoryStore) -> list[Any]:
    out = []
    for query in QUERIES:
        vector = make(query or "anything").embedding
        for options in _options():
            if options.mode == SearchMode.VECTOR and not query:
                continue
            result = run(store.search(SearchRequest(SCOPE, query, vector, options)))
            out.append([(h.record.id, h.record.memory, h.score, h.breakdown.model_dump()) for h in result.hits])
    return out


def _saved(path: Path, scope: Scope = SCOPE) -> tuple[int, int] | None:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT version, length(data) FROM scope_snapshots WHERE user_id = ? AND agent_id = ?",
            (scope.user_id, scope.agent_id),
        ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def _rebuilt(path: Path) -> list[Any]:
    """The same queries on a fresh store whose saved indexes are dropped: every scope built from rows."""
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM scope_snapshots")
    store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    try:
        return _results(store)
    finally:
        store.close_sync()


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "PERSIST_MIN_DOCUMENTS", 200)
    monkeypatch.setattr(sqlite_store, "PERSIST_INTERVAL_SECONDS", 0.0)


def test_updated_saved_and_rebuilt_indexes_rank_alike(tmp_path: Path, small_threshold: None) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(11)
    clock = FixedClock(NOW)
    live = SQLiteMemoryStore(path, clock=clock)
    writer = SQLiteMemoryStore(path, clock=clock)  # another connection, as another process would be
    run(live.upsert([_record(rng, i) for i in range(1500)]))
    run(live.upsert([_record(rng, i, OTHER) for i in range(50)]))
    _results(live)  # the first search builds the index from the rows and saves it
    saved = _saved(path)
    assert saved is not None and _saved(path, OTHER) is None  # small scopes are not saved

    # Numbers change and memories are added: the saved index stays, the rows changed since apply on top.
    run(writer.upsert([_record(rng, i) for i in range(1500, 1800)]))
    run(writer.recall(SCOPE, [f"m-user-big-{i:05d}" for i in range(0, 300, 3)], HumanMemoryPolicy()))
    for i in range(5):
        run(writer.mark_status(SCOPE, f"m-user-big-{i:05d}", MemoryStatus.ARCHIVED, reason="test"))
    assert _saved(path) == saved
    updated = _results(live)
    loaded_store = SQLiteMemoryStore(path, clock=clock)
    loaded = _results(loaded_store)
    loaded_store.close_sync()
    assert updated == loaded == _rebuilt(path)

    # Texts change, more than a sixteenth of the scope (the changed postings are merged in): the saved
    # index, which holds the old terms, is dropped at once.
    _results(live)
    run(writer.upsert([_record(rng, i, text=_text(rng) + " rewritten") for i in range(1800) if i % 8]))
    assert _saved(path) is None
    updated = _results(live)
    assert updated == _rebuilt(path)
    assert any("rewritten" in hit[1] for result in updated for hit in result)

    # A fresh store builds from the rows and saves again; the next one loads that.
    fresh = SQLiteMemoryStore(path, clock=clock)
    first = _results(fresh)
    fresh.close_sync()
    assert _saved(path) is not None
    again = SQLiteMemoryStore(path, clock=clock)
    assert _results(again) == first == updated
    again.close_sync()
    live.close_sync()
    writer.close_sync()


def test_a_saved_index_never_keeps_purged_or_replaced_text(tmp_path: Path, small_threshold: None) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(5)
    store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    records = [_record(rng, i) for i in range(400)]
    records[7] = _record(rng, 7, text="zanzibarquokka likes ramen")
    run(store.upsert(records))
    run(store.search(SearchRequest(SCOPE, "ramen", None, MemorySearchOptions(mode=SearchMode.KEYWORD))))
    assert _saved(path) is not None
    run(store.upsert([_record(rng, 7, text="likes ramen")]))  # the marker word is edited out
    assert _saved(path) is None
    run(store.search(SearchRequest(SCOPE, "ramen", None, MemorySearchOptions(mode=SearchMode.KEYWORD))))
    assert _saved(path) is not None  # saved again, without the word
    assert run(store.checkpoint_wal())
    assert b"zanzibarquokka" not in path.read_bytes()

    run(store.upsert([_record(rng, 8, text="wombatcanary plans a trip")]))
    other = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    run(other.search(SearchRequest(SCOPE, "trip", None, MemorySearchOptions(mode=SearchMode.KEYWORD))))
    other.close_sync()
    run(store.purge(SCOPE.user_id))
    assert _saved(path) is None
    assert run(store.checkpoint_wal())
    assert b"wombatcanary" not in path.read_bytes()
    store.close_sync()


def test_a_damaged_saved_index_is_rebuilt_from_the_rows(
    tmp_path: Path, small_threshold: None, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(3)
    store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    run(store.upsert([_record(rng, i) for i in range(300)]))
    expected = _results(store)
    store.close_sync()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE scope_snapshots SET data = zeroblob(100)")
    damaged = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    with caplog.at_level(logging.WARNING, logger="memory_core.adapters.sqlite.scope_cache"):
        assert _results(damaged) == expected
    assert "saved copy is damaged" in caplog.text
    damaged.close_sync()
    saved = _saved(path)
    assert saved is not None and saved[1] > 100  # written again, whole


def test_a_busy_file_does_not_hold_up_a_search(tmp_path: Path, small_threshold: None) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(4)
    store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    run(store.upsert([_record(rng, i) for i in range(300)]))
    store.close_sync()
    reader = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process is writing
    try:
        started = time.monotonic()
        result = run(reader.search(SearchRequest(SCOPE, "ramen", None, MemorySearchOptions(mode=SearchMode.KEYWORD))))
        waited = time.monotonic() - started
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert result.hits and waited < 5.0  # the saving gave up at once (the busy wait is 10 s for writes)
    reader.close_sync()
    assert _saved(path) is None


def test_the_saved_form_refuses_another_epoch_and_damage() -> None:
    index = ScopeIndex(3, 2)
    data = index.to_bytes()
    assert len(ScopeIndex.from_bytes(data, epoch=2, dims=None)) == 0
    with pytest.raises(SnapshotError, match="earlier epoch"):
        ScopeIndex.from_bytes(data, epoch=3, dims=None)
    with pytest.raises(SnapshotError, match="damaged"):
        ScopeIndex.from_bytes(data[: len(data) // 2], epoch=2, dims=None)


def test_ties_and_the_order_memories_arrived_in_do_not_change_the_ranking(
    tmp_path: Path, small_threshold: None
) -> None:
    """Equal scores (the same text, the same vector) are broken by id, and a vector's score does not
    depend on where its row sits: an index that grew by appends, one loaded from the file and one
    rebuilt in id order rank alike."""
    path = tmp_path / "m.db"
    rng = np.random.default_rng(21)
    clock = FixedClock(NOW)
    texts = [_text(rng) for _ in range(40)]  # few texts, so many memories share one

    def batch(count: int) -> list[Any]:
        return [
            _record(rng, 0, text=str(rng.choice(texts))).model_copy(update={"id": f"r{rng.integers(10**12):012d}"})
            for _ in range(count)
        ]

    live = SQLiteMemoryStore(path, clock=clock)
    writer = SQLiteMemoryStore(path, clock=clock)
    run(live.upsert(batch(400)))
    _results(live)  # built and saved
    for _ in range(3):  # ids arrive in random order: appended positions are not id order
        run(writer.upsert(batch(60)))
        updated = _results(live)
    loaded_store = SQLiteMemoryStore(path, clock=clock)
    loaded = _results(loaded_store)
    loaded_store.close_sync()
    tied = [result for result in updated if len({hit[2] for hit in result}) < len(result)]
    assert tied  # the queries do meet equal scores
    assert updated == loaded == _rebuilt(path)
    live.close_sync()
    writer.close_sync()


def test_a_scope_without_vectors_answers_alike_loaded_or_rebuilt(tmp_path: Path, small_threshold: None) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(8)
    store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    run(store.upsert([_record(rng, i, OTHER) for i in range(3)]))  # the store's vectors: 64 dimensions
    run(store.upsert([_record(rng, i).model_copy(update={"embedding": None}) for i in range(300)]))
    options = MemorySearchOptions(mode=SearchMode.HYBRID)
    built = run(store.search(SearchRequest(SCOPE, "ramen", [1.0, 0.0, 0.0], options)))
    store.close_sync()
    assert _saved(path) is not None
    loaded = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    again = run(loaded.search(SearchRequest(SCOPE, "ramen", [1.0, 0.0, 0.0], options)))
    loaded.close_sync()
    assert [h.record.id for h in again.hits] == [h.record.id for h in built.hits]


def test_the_index_holds_columns_not_the_rows_it_applied(tmp_path: Path, small_threshold: None) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(9)
    live = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    writer = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    run(live.upsert([_record(rng, i) for i in range(300)]))
    _results(live)
    for start in range(300, 800, 100):
        run(writer.upsert([_record(rng, i) for i in range(start, start + 100)]))
        run(live.search(SearchRequest(SCOPE, "ramen", None, MemorySearchOptions(mode=SearchMode.KEYWORD, top=5))))
    (index,) = live._cache.values()
    assert len(index) == 800 and len(index._rows) == 0 and len(index._records) < 300  # hits only
    live.close_sync()
    writer.close_sync()


def test_a_saved_index_dropped_by_another_process_is_saved_again(tmp_path: Path, small_threshold: None) -> None:
    path = tmp_path / "m.db"
    rng = np.random.default_rng(10)
    live = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    writer = SQLiteMemoryStore(path, clock=FixedClock(NOW))
    run(live.upsert([_record(rng, i) for i in range(300)]))
    _results(live)
    assert _saved(path) is not None
    run(writer.upsert([_record(rng, 300)]))  # new, then its text changes: the saved copy is dropped
    run(writer.upsert([_record(rng, 300, text="a changed text")]))
    assert _saved(path) is None
    run(live.search(SearchRequest(SCOPE, "ramen", None, MemorySearchOptions(mode=SearchMode.KEYWORD))))
    assert _saved(path) is not None
    live.close_sync()
    writer.close_sync()
