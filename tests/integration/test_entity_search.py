"""Search through entities, end to end through the search service on the embedded store: a query that
names a relation or a name finds the memories of that entity, though they share no word with it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions
from memory_core.service import entity_search
from memory_core.service.search import search

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
EN, JA = Scope.of("ent-en", "a1"), Scope.of("ent-ja", "a1")
EMBEDDER = HashingEmbedder(256)

MEMORIES: list[tuple[Scope, str, str]] = [
    (EN, "wife", "My wife Mei started flying lessons."),
    (EN, "mei-job", "Mei is a pilot for a cargo airline."),
    (EN, "car", "I drive an old blue Volvo to work."),
    (EN, "job", "I work as a nurse at the city hospital."),
    (EN, "sister", "My sister Ana moved to Lisbon."),
    (EN, "ana-job", "Ana teaches chemistry at a high school."),
    (EN, "coffee", "I like strong coffee in the morning."),
    (EN, "friend", "My friend Sarah plays golf on Sundays."),
    (EN, "sara", "Sara from the gym does triathlons."),
    (JA, "tsuma", "妻の由美は看護師になった。"),
    (JA, "yumi", "由美さんは週末にテニスをする。"),
    (JA, "shigoto", "私の仕事はエンジニアです。"),
    (JA, "neko", "うちの猫のミケは魚が好き。"),
    (EN, "married", "My brother Luis is married to Carmen."),
    (EN, "carmen", "Carmen restores old pianos in her workshop."),
    (JA, "ani", "兄の健一は札幌に住んでいる。"),
    (JA, "kenichi", "健一は釣りが大好きだ。"),
]


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    async def fill() -> SQLiteMemoryStore:
        store = SQLiteMemoryStore(tmp_path / "memory.db")
        vectors = await EMBEDDER.embed_passages([m[2] for m in MEMORIES])
        records = []
        for i, ((scope, id_, text), vector) in enumerate(zip(MEMORIES, vectors, strict=True)):
            at = NOW - timedelta(days=len(MEMORIES) - i)
            records.append(
                MemoryRecord(
                    id=id_, user_id=scope.user_id, agent_id=scope.agent_id, memory=text, created_at=at,
                    updated_at=at, importance=0.5, retention_score=0.9, embedding=vector.tolist(),
                )
            )
        await store.upsert(records)
        return store

    s = run(fill())
    yield s
    run(s.close())


async def ids(store: SQLiteMemoryStore, scope: Scope, query: str, top: int = 3) -> list[str]:
    result = await search(store, EMBEDDER, scope, query, MemorySearchOptions(top=top), now=NOW)
    return [h.record.id for h in result.hits]


@pytest.mark.parametrize(
    ("scope", "query", "expected"),
    [
        (EN, "What does my wife do for a living?", {"wife", "mei-job"}),
        (EN, "What does Mei do?", {"wife", "mei-job"}),
        (EN, "Where does my sister work?", {"sister", "ana-job"}),
        (JA, "妻の趣味は？", {"tsuma", "yumi"}),
    ],
)
def test_a_named_entity_brings_its_memories_first(store, scope: Scope, query: str, expected: set[str]) -> None:  # type: ignore[no-untyped-def]
    assert set(run(ids(store, scope, query, top=2))) == expected


def test_look_alike_names_find_their_own_memories(store) -> None:  # type: ignore[no-untyped-def]
    assert run(ids(store, EN, "What does Sarah play?", top=1)) == ["friend"]
    assert run(ids(store, EN, "What does Sara do?", top=1)) == ["sara"]


def test_without_the_entity_leg_a_relation_alone_misses_the_named_memory(store, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert "ana-job" in run(ids(store, EN, "Where does my sister work?", top=2))
    monkeypatch.setattr(entity_search, "ENTITY_WEIGHT", 0.0)
    assert "ana-job" not in run(ids(store, EN, "Where does my sister work?", top=2))


def test_the_hit_says_what_the_entity_leg_added(store) -> None:  # type: ignore[no-untyped-def]
    result = run(search(store, EMBEDDER, EN, "What does my wife do for a living?", MemorySearchOptions(top=2), now=NOW))
    added = {h.record.id: h.breakdown.functions.get("entity", 0.0) for h in result.hits}
    assert added["mei-job"] > 0  # it names her otherwise: the leg brings it
    assert added["wife"] == 0.0  # it says "wife": the words already found it


def test_a_two_step_question_follows_the_relation_path(store) -> None:  # type: ignore[no-untyped-def]
    assert run(ids(store, EN, "What does my brother's wife restore?", top=1)) == ["carmen"]


def test_a_known_name_without_a_frame_is_linked_and_found_by_relation(store) -> None:  # type: ignore[no-untyped-def]
    entities = {e.name: e.relation for e in run(store.entities(JA))}
    assert entities["健一"] == "brother"
    assert "kenichi" in run(ids(store, JA, "兄の趣味は？", top=2))
