"""What the embedded store adds to the contract: exact BM25, atomic writes, readers in other processes."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from contract.store_contract import NOW, U1A1, U2A1, make, vector

from memory_core.adapters.sqlite.legs import BM25_B, BM25_K1
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.records import MemoryRecord
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ConflictError, ValidationError
from memory_core.language.text import index_terms, query_terms
from memory_core.ports import FixedClock

KEYWORD = MemorySearchOptions(mode=SearchMode.KEYWORD, ranking_profile=RankingProfile.NONE, top=50)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def lucene_bm25(query: str, docs: dict[str, dict[str, str]]) -> dict[str, float]:
    """BM25 written out from the formula, over every document of the index."""
    fields = ("memory", "summary", "category")
    terms = {d: {f: Counter(index_terms(v.get(f, ""))) for f in fields} for d, v in docs.items()}
    scores = dict.fromkeys(docs, 0.0)
    for f in fields:
        having = [d for d in docs if sum(terms[d][f].values())]
        n_docs = len(having)
        if not n_docs:
            continue
        avgdl = sum(sum(terms[d][f].values()) for d in having) / n_docs
        for t in query_terms(query):
            n = sum(1 for d in having if terms[d][f][t])
            idf = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
            for d in docs:
                tf = terms[d][f][t]
                if tf:
                    dl = sum(terms[d][f].values())
                    scores[d] += idf * tf / (tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))
    return {d: s for d, s in scores.items() if s > 0}


def test_bm25_matches_the_formula_with_index_wide_statistics(tmp_path: Path) -> None:
    docs = {
        "a": {
            "memory": "spicy ramen in tokyo is the best ramen",
            "summary": "ramen lover",
            "category": "preference",
        },
        "b": {"memory": "avoids spicy food", "summary": "", "category": "constraint"},
        "c": {"memory": "京都の旅館で辛いラーメン", "summary": "", "category": "plan"},
        "d": {"memory": "ramen ramen ramen", "summary": "", "category": "preference"},
    }
    other_scope = {"x": {"memory": "ramen shop near the office", "summary": "", "category": "general"}}

    async def scenario() -> dict[str, float]:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert(
            [
                make(v["memory"], U1A1, id=k, summary=v["summary"], category=v["category"])
                for k, v in docs.items()
            ]
        )
        await store.upsert(
            [make(v["memory"], U2A1, id=k, category=v["category"]) for k, v in other_scope.items()]
        )
        result = await store.search(SearchRequest(U1A1, "spicy ramen preference", None, KEYWORD))
        await store.close()
        return {h.record.id: h.score for h in result.hits}

    got = run(scenario())
    expected = lucene_bm25("spicy ramen preference", {**docs, **other_scope})
    expected.pop("x")  # statistics are index-wide; results stay in the scope
    assert got == pytest.approx(expected, rel=1e-9)


def test_statistics_stay_exact_through_updates_merges_and_purges(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def scenario() -> None:
        store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
        await store.upsert([make(f"note {i} about tea and coffee", id=f"n{i}") for i in range(10)])
        await store.upsert([make("only coffee now", id="n3")])
        await store.merge(U1A1, "n4", {"memory": "green tea", "summary": "tea"})
        await store.upsert([make("tea elsewhere", U2A1, id="o1")])
        await store.purge("user-1")
        await store.close()

    run(scenario())
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT terms FROM memories").fetchall()
    expected: Counter[tuple[str, str]] = Counter()
    for (terms,) in rows:
        for f, counts in json.loads(terms).items():
            for t in counts:
                expected[(f, t)] += 1
    stored = {(f, t): df for f, t, df in conn.execute("SELECT field, term, df FROM term_stats")}
    assert stored == dict(expected)
    fields = {f: (n, total) for f, n, total in conn.execute("SELECT * FROM field_stats") if n}
    assert fields == {"memory": (1, 2), "category": (1, 1)}


def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert([make("first", id="a")])
        with pytest.raises(ConflictError):
            # The second record carries an embedding of another size: the whole batch is rolled back.
            await store.upsert(
                [make("second", id="b"), make("third", id="c").model_copy(update={"embedding": [1.0, 0.0]})]
            )
        assert await store.get(U1A1, "b") is None
        assert await store.count() == 1
        result = await store.search(SearchRequest(U1A1, "second", None, KEYWORD))
        assert result.hits == []
        await store.close()

    run(scenario())


def test_an_id_cannot_be_taken_over_by_another_scope(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert([make("mine", U1A1, id="shared-id")])
        with pytest.raises(ConflictError):
            await store.upsert([make("theirs", U2A1, id="shared-id")])
        got = await store.get(U1A1, "shared-id")
        assert got is not None and got.memory == "mine"
        with pytest.raises(ValidationError):
            await store.upsert([make("dup", id="d"), make("dup2", id="d")])
        await store.close()

    run(scenario())


def test_query_vector_of_the_wrong_size_is_rejected(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert([make("tea", id="a")])
        with pytest.raises(ValidationError) as info:
            await store.search(SearchRequest(U1A1, "tea", [1.0, 0.0, 0.0], MemorySearchOptions(mode=SearchMode.VECTOR)))
        assert info.value.field == "vector"
        with pytest.raises(ValidationError):
            await store.search(SearchRequest(U1A1, "tea", None, MemorySearchOptions(mode=SearchMode.HYBRID)))
        await store.close()

    run(scenario())


WRITER = """
import asyncio, sys
from datetime import UTC, datetime
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.ports import FixedClock
now = datetime(2026, 11, 1, 12, tzinfo=UTC)
async def main():
    store = SQLiteMemoryStore(sys.argv[1], clock=FixedClock(now))
    await store.upsert([MemoryRecord(id=sys.argv[2], user_id="user-1", agent_id="agent-1", memory=sys.argv[3],
                                     created_at=now, updated_at=now)])
    if len(sys.argv) > 4:
        await store.merge(Scope.of("user-1", "agent-1"), sys.argv[4],
                          {"memory": "rewritten by another process"})
    await store.close()
asyncio.run(main())
"""


def test_a_reader_sees_what_another_process_wrote(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def scenario() -> None:
        reader = SQLiteMemoryStore(path, clock=FixedClock(NOW))
        await reader.upsert([make("local tea note", id="local")])
        assert [h.record.id for h in (await reader.search(SearchRequest(U1A1, "tea", None, KEYWORD))).hits] == ["local"]
        subprocess.run(
            [sys.executable, "-c", WRITER, str(path), "remote", "remote tea note", "local"], check=True
        )
        hits = (await reader.search(SearchRequest(U1A1, "tea", None, KEYWORD))).hits
        assert sorted(h.record.id for h in hits) == ["remote"]
        assert [h.record.id for h in (await reader.search(SearchRequest(U1A1, "rewritten", None, KEYWORD))).hits] == [
            "local"
        ]
        await reader.close()

    run(scenario())


def test_hybrid_search_uses_vectors_from_the_cache_after_updates(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert([make("apples", id="a"), make("bananas", id="b")])
        options = MemorySearchOptions(mode=SearchMode.VECTOR, ranking_profile=RankingProfile.NONE, top=1)
        assert (await store.search(SearchRequest(U1A1, "x", vector("bananas"), options))).hits[0].record.id == "b"
        await store.merge(U1A1, "a", {"memory": "bananas", "embedding": vector("bananas")})
        await store.merge(U1A1, "b", {"memory": "apples", "embedding": vector("apples")})
        assert (await store.search(SearchRequest(U1A1, "x", vector("bananas"), options))).hits[0].record.id == "a"
        await store.close()

    run(scenario())


def test_records_without_embeddings_are_keyword_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert([make("plain text", id="p", with_vector=False), make("plain vector", id="v")])
        vec = MemorySearchOptions(mode=SearchMode.VECTOR, ranking_profile=RankingProfile.NONE)
        assert [h.record.id for h in (await store.search(SearchRequest(U1A1, "plain", vector("plain"), vec))).hits] == ["v"]
        hyb = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.NONE)
        assert sorted(
            h.record.id for h in (await store.search(SearchRequest(U1A1, "plain", vector("plain"), hyb))).hits
        ) == ["p", "v"]
        await store.close()

    run(scenario())


def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db")
        await store.close()

    run(scenario())
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_datetime_round_trip_keeps_microseconds(tmp_path: Path) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

    async def scenario() -> MemoryRecord | None:
        store = SQLiteMemoryStore(tmp_path / "m.db")
        await store.upsert([make("x", id="t").model_copy(update={"created_at": at, "updated_at": at})])
        got = await store.get(U1A1, "t")
        await store.close()
        return got

    got = run(scenario())
    assert got is not None and got.updated_at == at


def test_vector_weight_scales_the_vector_leg_in_fusion(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        # With k = 1, "words" is only in the text leg and "meaning" only in the vector leg.
        await store.upsert([make("green tea every morning", id="words"), make("zzz qqq", id="meaning")])
        query_vector = vector("zzz qqq")

        async def ranked(weight: float) -> list[tuple[str, float]]:
            options = MemorySearchOptions(
                mode=SearchMode.HYBRID, ranking_profile=RankingProfile.NONE, vector_k=1, vector_weight=weight
            )
            hits = (await store.search(SearchRequest(U1A1, "green tea", query_vector, options))).hits
            return [(h.record.id, h.score) for h in hits]

        light = await ranked(0.5)
        assert [i for i, _ in light] == ["words", "meaning"]
        assert [s for _, s in light] == pytest.approx([1 / 60, 0.5 / 60])
        heavy = await ranked(2.0)
        assert [i for i, _ in heavy] == ["meaning", "words"]
        assert [s for _, s in heavy] == pytest.approx([2 / 60, 1 / 60])
        await store.close()

    run(scenario())


def test_a_japanese_query_counts_a_keyword_match_only_with_every_word(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db", clock=FixedClock(NOW))
        await store.upsert(
            [
                make("京都の旅館が好きです", id="all"),  # holds every content word of the query
                make("京都に住んでいます", id="part"),  # holds one
                make("温泉が好きです", id="none"),
            ]
        )
        hyb = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.NONE, top=10)
        result = await store.search(SearchRequest(U1A1, "京都の旅館", vector("温泉"), hyb))
        legs = {h.record.id: h.breakdown for h in result.hits}
        assert legs["all"].keyword_rank is not None
        assert legs["part"].keyword_rank is None and legs["none"].keyword_rank is None
        # keyword search itself still matches any word, and an English query's hybrid too
        kw = await store.search(SearchRequest(U1A1, "京都の旅館", None, KEYWORD))
        assert {h.record.id for h in kw.hits} == {"all", "part"}
        await store.upsert([make("tea in Kyoto", id="en-part"), make("ryokan tea in Kyoto", id="en-all")])
        english = await store.search(SearchRequest(U1A1, "ryokan Kyoto", vector("温泉"), hyb))
        assert {h.record.id for h in english.hits if h.breakdown.keyword_rank is not None} == {"en-all", "en-part"}
        await store.close()

    run(scenario())


def test_a_file_of_an_older_analyzer_is_re_indexed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def write() -> None:
        store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
        await store.upsert([make("京都の旅館に泊まりたいです", id="ja"), make("I loved the paintings", id="en")])
        await store.close()

    run(write())
    # what a file written by the previous analyzer (CJK bigrams, the light stemmer) looked like
    conn = sqlite3.connect(path)
    old = {"memory": {"京都": 1, "都の": 1, "の旅": 1, "旅館": 1, "館に": 1, "に泊": 1}, "summary": {}, "category": {}}
    conn.execute("UPDATE memories SET terms = ? WHERE id = 'ja'", (json.dumps(old, ensure_ascii=False),))
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'analyzer'")
    conn.commit()
    conn.close()

    async def read() -> list[str]:
        store = SQLiteMemoryStore(path, clock=FixedClock(NOW))
        hits = [h.record.id for h in (await store.search(SearchRequest(U1A1, "泊まる", None, KEYWORD))).hits]
        painted = [h.record.id for h in (await store.search(SearchRequest(U1A1, "painting", None, KEYWORD))).hits]
        await store.close()
        return hits + painted

    # 泊まる matches 泊まりたい only through the new analysis (its base form), painting via Snowball
    assert run(read()) == ["ja", "en"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()[0] == "3"
    conn.close()
