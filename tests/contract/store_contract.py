"""The ``MemoryStore`` contract, run against every adapter.

A test module subclasses :class:`StoreContract` and implements :meth:`StoreContract.open_store`, an
async context manager yielding a fresh, empty store that uses the given clock. Each case runs in its
own event loop (``asyncio.run``) so adapters with async clients work unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Provenance, Scope
from memory_core.domain.search import Listing, MemorySearchOptions, OrderBy, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.search_time import TimeWindow
from memory_core.errors import NotFoundError, ValidationError
from memory_core.ports import FixedClock, MemoryStore, RetentionWrite
from memory_core.service.forgetting import ForgettingReport, apply_forgetting

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
EMBEDDER = HashingEmbedder(256)
POLICY = HumanMemoryPolicy()
U1A1 = Scope.of("user-1", "agent-1")
U1A2 = Scope.of("user-1", "agent-2")
U2A1 = Scope.of("user-2", "agent-1")

HOSTILE_IDS = [
    "",
    "alice' or 1=1 --",
    "x' or user_id ne '",
    'bob") or (1 eq 1',
    "a b",
    "a;DROP TABLE memories",
    "user_id eq 'x'",
    "$filter=*",
    "x" * 10_000,
    "tab\tid",
    "nul\x00id",
    "newline\nid",
    "ünïcödé",
    "-leading-dash",
    "../../etc/passwd",
]


def vector(text: str) -> list[float]:
    return EMBEDDER.embed_sync(text).tolist()


def make(
    memory: str,
    scope: Scope = U1A1,
    *,
    id: str | None = None,
    days_ago: float = 0.0,
    with_vector: bool = True,
    **fields: Any,
) -> MemoryRecord:
    updated = NOW - timedelta(days=days_ago)
    data: dict[str, Any] = {
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "memory": memory,
        "created_at": updated,
        "updated_at": updated,
        "embedding": vector(memory) if with_vector else None,
        **fields,
    }
    if id is not None:
        data["id"] = id
    record = MemoryRecord.model_validate(data)
    if "retention_score" not in fields:
        record = (
            POLICY.apply(record, NOW)
            if "status" not in fields
            else record.model_copy(update={"retention_score": POLICY.retention(record, NOW)})
        )
    return record


def opts(**kwargs: Any) -> MemorySearchOptions:
    kwargs.setdefault("ranking_profile", RankingProfile.NONE)
    return MemorySearchOptions(**kwargs)


async def ids_of(store: MemoryStore, scope: Scope, query: str, **kwargs: Any) -> list[str]:
    options = opts(**kwargs)
    vec = None if options.mode == SearchMode.KEYWORD else vector(query)
    result = await store.search(SearchRequest(scope, query, vec, options))
    return [hit.record.id for hit in result.hits]


async def forget(store: MemoryStore, clock: FixedClock, **kwargs: Any) -> ForgettingReport:
    """The one forgetting algorithm over this store, at the clock's time."""
    return await apply_forgetting(store, POLICY, clock.now(), **kwargs)


async def all_ids(store: MemoryStore, scope: Scope, **kwargs: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.scan(scope, PageRequest(after=cursor, **kwargs))
        ids.extend(r.id for r in page.records)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


class StoreContract:
    """Behaviours every memory store must have. Subclasses provide :meth:`open_store`."""

    #: Adapters whose search cannot rank exactly like the local engine (a live service's semantic
    #: ranker) may turn off the exact reference-order checks of semantic mode.
    semantic_is_hybrid = True

    def open_store(self, clock: FixedClock) -> AbstractAsyncContextManager[MemoryStore]:
        raise NotImplementedError

    def run(self, scenario: Callable[[MemoryStore, FixedClock], Awaitable[None]]) -> None:
        async def main() -> None:
            clock = FixedClock(NOW)
            async with self.open_store(clock) as store:
                await scenario(store, clock)

        asyncio.run(main())

    # -- writes and reads -----------------------------------------------------------------------
    def test_upsert_then_get_returns_every_field(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            record = make(
                "京都では旅館に泊まりたい",
                id="mem-1",
                summary="旅館が好き",
                category="preference",
                importance=0.8,
                confidence=0.7,
                source="llm",
                access_count=3,
                expires_at=NOW + timedelta(days=30),
                metadata={"turn_id": "t-1", "tags": ["travel"]},
            )
            await store.upsert([record])
            got = await store.get(U1A1, "mem-1")
            assert got is not None
            expected = record.to_json_dict(include_embedding=False)
            actual = got.to_json_dict(include_embedding=False)
            assert actual == expected
            assert got.embedding is not None
            assert sum(
                a * b for a, b in zip(got.embedding, record.embedding or [], strict=True)
            ) == pytest.approx(1.0, abs=1e-5)

        self.run(scenario)

    def test_upsert_replaces_whole_record(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("I like tea", id="m1", category="preference")])
            await store.upsert([make("I like green tea", id="m1", category="preference", importance=0.9)])
            got = await store.get(U1A1, "m1")
            assert got is not None and got.memory == "I like green tea" and got.importance == 0.9
            assert await ids_of(store, U1A1, "green", mode=SearchMode.KEYWORD) == ["m1"]

        self.run(scenario)

    def test_merge_changes_only_given_fields(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("I like tea", id="m1", importance=0.3, category="preference")])
            merged = await store.merge(U1A1, "m1", {"importance": 0.95, "summary": "tea lover"})
            assert merged.importance == 0.95 and merged.summary == "tea lover"
            got = await store.get(U1A1, "m1")
            assert got is not None
            assert (got.memory, got.category, got.importance, got.summary) == (
                "I like tea",
                "preference",
                0.95,
                "tea lover",
            )
            assert await ids_of(store, U1A1, "lover", mode=SearchMode.KEYWORD) == ["m1"]
            with pytest.raises(ValidationError):
                await store.merge(U1A1, "m1", {"importance": 7})
            with pytest.raises(ValidationError):
                await store.merge(U1A1, "m1", {"user_id": "user-2"})
            with pytest.raises(NotFoundError):
                await store.merge(U1A1, "missing", {"importance": 0.5})

        self.run(scenario)

    def test_mark_status_records_reason(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("I like tea", id="m1")])
            record = await store.mark_status(U1A1, "m1", MemoryStatus.DELETED, reason="user asked to forget")
            assert record.status == MemoryStatus.DELETED
            got = await store.get(U1A1, "m1")
            assert got is not None and got.status == MemoryStatus.DELETED
            assert got.metadata["status_reason"] == "user asked to forget"
            with pytest.raises(NotFoundError):
                await store.mark_status(U2A1, "m1", MemoryStatus.ACTIVE, reason="not mine")

        self.run(scenario)

    # -- scope isolation ------------------------------------------------------------------------
    def test_scope_isolation_everywhere(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            text = "the user is allergic to peanuts"
            await store.upsert([make(text, U1A1, id="a"), make(text, U1A2, id="b"), make(text, U2A1, id="c")])
            for mode in SearchMode:
                assert await ids_of(store, U1A1, "peanuts allergic", mode=mode) == ["a"]
                assert await ids_of(store, U2A1, "peanuts allergic", mode=mode) == ["c"]
            assert await ids_of(store, U1A1, "", mode=SearchMode.KEYWORD) == ["a"]
            assert await all_ids(store, U1A1) == ["a"]
            assert await all_ids(store, U1A2) == ["b"]
            assert await store.get(U1A1, "b") is None
            assert await store.get(U2A1, "a") is None
            with pytest.raises(NotFoundError):
                await store.merge(U2A1, "a", {"importance": 1.0})
            assert await store.recall(U2A1, ["a"], POLICY) == []
            got = await store.get(U1A1, "a")
            assert got is not None and got.access_count == 0
            assert sorted(await store.agents("user-1")) == ["agent-1", "agent-2"]
            assert await store.agents("user-2") == ["agent-1"]
            assert await store.purge("user-1", "agent-2") == 1
            assert await all_ids(store, U1A1) == ["a"]
            assert await all_ids(store, U2A1) == ["c"]
            assert await store.purge("user-1") == 1
            assert await all_ids(store, U1A1) == []
            assert await all_ids(store, U2A1) == ["c"]
            assert await ids_of(store, U2A1, "peanuts", mode=SearchMode.KEYWORD) == ["c"]

        self.run(scenario)

    def test_hostile_scope_ids_are_rejected_before_the_store(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("secret of user one", id="a")])
            for bad in HOSTILE_IDS:
                with pytest.raises(ValidationError) as info:
                    Scope.of(bad, "agent-1")
                assert info.value.field == "user_id"
                with pytest.raises(ValidationError) as info:
                    Scope.of("user-1", bad)
                assert info.value.field == "agent_id"
                # A scope smuggled past the constructor is still checked by the store.
                smuggled = Scope.model_construct(user_id=bad, agent_id="agent-1")
                with pytest.raises(ValidationError):
                    await store.search(SearchRequest(smuggled, "secret", None, opts(mode=SearchMode.KEYWORD)))
                with pytest.raises(ValidationError):
                    await store.scan(smuggled, PageRequest())
                with pytest.raises(ValidationError):
                    await store.get(smuggled, "a")
                with pytest.raises(ValidationError):
                    await store.purge(bad)
                with pytest.raises(ValidationError):
                    await store.agents(bad)
            for bad_id in ["a' or '1'='1", "x" * 200, "a/b", "a b", ""]:
                with pytest.raises(ValidationError):
                    await store.get(U1A1, bad_id)
            assert await all_ids(store, U1A1) == ["a"]

        self.run(scenario)

    # -- status visibility and filters ----------------------------------------------------------
    def test_status_visibility(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [
                    make("hotel with onsen", id="active"),
                    make("hotel with onsen view", id="archived", status=MemoryStatus.ARCHIVED),
                    make("hotel with onsen bath", id="deleted", status=MemoryStatus.DELETED),
                ]
            )
            for mode in SearchMode:
                assert set(await ids_of(store, U1A1, "hotel onsen", mode=mode)) == {"active"}
                assert set(await ids_of(store, U1A1, "hotel onsen", mode=mode, include_archived=True)) == {
                    "active",
                    "archived",
                }
            assert set(await all_ids(store, U1A1)) == {"active", "archived", "deleted"}
            assert await all_ids(store, U1A1, statuses=[MemoryStatus.DELETED]) == ["deleted"]

        self.run(scenario)

    def test_filters(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [
                    make(
                        "likes window seats",
                        id="pref",
                        category="preference",
                        importance=0.9,
                        retention_score=0.9,
                    ),
                    make(
                        "window seats only on trains",
                        id="cons",
                        category="constraint",
                        importance=0.4,
                        retention_score=0.5,
                    ),
                    make(
                        "window seats next week",
                        id="expired",
                        category="plan",
                        importance=0.9,
                        retention_score=0.9,
                        expires_at=NOW - timedelta(hours=1),
                    ),
                    make(
                        "window seats next month",
                        id="future",
                        category="plan",
                        importance=0.2,
                        retention_score=0.3,
                        expires_at=NOW + timedelta(days=20),
                    ),
                ]
            )
            for mode in SearchMode:
                q = "window seats"
                assert set(await ids_of(store, U1A1, q, mode=mode)) == {"pref", "cons", "future"}
                assert await ids_of(store, U1A1, q, mode=mode, category="preference") == ["pref"]
                assert await ids_of(store, U1A1, q, mode=mode, category="PLAN") == ["future"]
                assert set(await ids_of(store, U1A1, q, mode=mode, min_importance=0.4)) == {"pref", "cons"}
                # (the stored scores are stale: the embedded store filters on the retention now)
                assert set(await ids_of(store, U1A1, q, mode=mode, min_retention_score=0.7)) == {"pref"}
                assert await ids_of(store, U1A1, q, mode=mode, category="nothing") == []
            clock.advance(days=30)
            assert set(await ids_of(store, U1A1, "window seats", mode=SearchMode.KEYWORD)) == {"pref", "cons"}

        self.run(scenario)

    def test_top_and_order_by(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            records = [
                make(f"travel note number {i}", id=f"m{i:02d}", importance=i / 10, days_ago=float(i))
                for i in range(10)
            ]
            await store.upsert(records)
            assert len(await ids_of(store, U1A1, "travel note", mode=SearchMode.KEYWORD, top=3)) == 3
            by_importance = await ids_of(
                store, U1A1, "travel", mode=SearchMode.KEYWORD, top=10, order_by=OrderBy.IMPORTANCE_DESC
            )
            assert by_importance == [f"m{i:02d}" for i in range(9, -1, -1)]
            oldest_first = await ids_of(
                store, U1A1, "travel", mode=SearchMode.KEYWORD, top=4, order_by=OrderBy.UPDATED_AT_ASC
            )
            assert oldest_first == ["m09", "m08", "m07", "m06"]

        self.run(scenario)

    def test_semantic_search_cannot_be_sorted_by_a_field(self) -> None:
        """Azure AI Search answers a semantic query with ``$orderby`` with 400; both stores refuse it
        first, naming ``order_by``, also when the options were changed without validation."""

        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("travel note", id="m1")])
            with pytest.raises(ValidationError) as info:
                MemorySearchOptions.from_values({"mode": "semantic", "order_by": "importance desc"})
            assert info.value.field == "order_by" and "semantic" in info.value.message
            smuggled = opts(mode=SearchMode.SEMANTIC).model_copy(update={"order_by": OrderBy.IMPORTANCE_DESC})
            with pytest.raises(ValidationError) as info:
                await store.search(SearchRequest(U1A1, "travel", vector("travel"), smuggled))
            assert info.value.field == "order_by"
            # Sorted keyword, vector and hybrid searches, and unsorted semantic ones, still run.
            for options in (
                opts(mode=SearchMode.HYBRID, order_by=OrderBy.IMPORTANCE_DESC),
                opts(mode=SearchMode.SEMANTIC),
            ):
                result = await store.search(SearchRequest(U1A1, "travel", vector("travel"), options))
                assert [h.record.id for h in result.hits] == ["m1"]

        self.run(scenario)

    # -- ranking --------------------------------------------------------------------------------
    def test_reference_ranking_example(self) -> None:
        """Same text: A important and often recalled but 75 days old, B trivial but fresh."""

        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            text = "prefers an aisle seat on long flights"
            await store.upsert(
                [
                    make(text, id="A", importance=1.0, access_count=20, days_ago=75),
                    make(text, id="B", importance=0.05, access_count=0, days_ago=0),
                ]
            )
            modes = [SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID]
            if self.semantic_is_hybrid:
                modes.append(SearchMode.SEMANTIC)
            for mode in modes:
                important = await ids_of(
                    store, U1A1, "aisle seat flights", mode=mode, ranking_profile=RankingProfile.IMPORTANT
                )
                recent = await ids_of(
                    store, U1A1, "aisle seat flights", mode=mode, ranking_profile=RankingProfile.RECENT
                )
                assert important == ["A", "B"], mode
                assert recent == ["B", "A"], mode

        self.run(scenario)

    def test_keyword_relevance_orders_by_bm25(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [
                    make("spicy ramen in tokyo", id="two"),
                    make("spicy food is fine", id="one"),
                    make("quiet hotel room", id="none"),
                ]
            )
            assert await ids_of(store, U1A1, "spicy ramen", mode=SearchMode.KEYWORD) == ["two", "one"]

        self.run(scenario)

    def test_japanese_keyword_search_matches_words_not_characters(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [
                    make("京都の旅館に泊まりたい", id="kyoto"),
                    make("東京の都心に住んでいる", id="tokyo"),
                    make("コーヒーが好き", id="coffee"),
                ]
            )
            assert await ids_of(store, U1A1, "京都", mode=SearchMode.KEYWORD) == ["kyoto"]
            assert await ids_of(store, U1A1, "コーヒー", mode=SearchMode.KEYWORD) == ["coffee"]

        self.run(scenario)

    def test_hybrid_includes_vector_only_matches(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("window seat please", id="w"), make("zzz", id="z")])
            hybrid = await ids_of(store, U1A1, "window seat please", mode=SearchMode.HYBRID)
            assert hybrid[0] == "w"
            assert "z" in hybrid  # the vector leg returns k neighbours even without shared words

        self.run(scenario)

    def test_search_results_explain_scores(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("likes spicy curry", id="c", importance=0.7)])
            result = await store.search(
                SearchRequest(
                    U1A1,
                    "spicy curry",
                    vector("spicy curry"),
                    MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.IMPORTANT),
                )
            )
            hit = result.hits[0]
            assert hit.breakdown.keyword_rank == 0 and hit.breakdown.vector_rank == 0
            assert hit.breakdown.profile == "memory-priority"
            assert hit.score == pytest.approx(hit.breakdown.relevance * hit.breakdown.boost, rel=1e-6)
            assert hit.record.embedding is None  # vectors are not sent back

        self.run(scenario)

    # -- recall and paging ----------------------------------------------------------------------
    def test_recall_touches_counts_and_reactivates(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            old = make(
                "bring an umbrella",
                id="old",
                importance=0.1,
                days_ago=200,
                status=MemoryStatus.ARCHIVED,
                access_count=8,
            )
            await store.upsert([old, make("other", id="other")])
            clock.advance(hours=1)
            touched = await store.recall(U1A1, ["old", "old", "missing"], POLICY)
            assert [r.id for r in touched] == ["old"]
            got = await store.get(U1A1, "old")
            assert got is not None
            assert got.access_count == 9
            assert got.last_accessed_at == clock.now()
            assert got.retention_score == pytest.approx(POLICY.retention(got, clock.now()))
            assert got.status == MemoryStatus.ACTIVE  # rehearsal brought it back above the threshold
            other = await store.get(U1A1, "other")
            assert other is not None and other.access_count == 0

        self.run(scenario)

    def test_scan_pages_by_keyset(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make(f"note {i}", id=f"n{i:03d}") for i in range(25)])
            pages = []
            cursor = None
            while True:
                page = await store.scan(U1A1, PageRequest(after=cursor, limit=10))
                pages.append([r.id for r in page.records])
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert [len(p) for p in pages] == [10, 10, 5]
            assert [i for page in pages for i in page] == [f"n{i:03d}" for i in range(25)]

        self.run(scenario)

    def test_scan_and_browse_read_the_current_records_or_every_record(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            said, changed = NOW - timedelta(days=10), NOW - timedelta(days=2)
            await store.upsert(
                [
                    make("I live in Munich", id="c1", valid_from=changed),
                    make("I live in Berlin", id="c0", valid_from=said, valid_until=changed, superseded_by="c1"),
                    make("until next week", id="c2", valid_from=said, valid_until=NOW + timedelta(days=7)),
                    make("theirs, superseded", U1A2, id="c3", valid_until=changed, superseded_by="c9"),
                ]
            )
            assert await all_ids(store, U1A1, current_at=NOW) == ["c1", "c2"]
            assert await all_ids(store, U1A1, current_at=changed - timedelta(seconds=1)) == ["c0", "c1", "c2"]
            assert await all_ids(store, U1A1) == ["c0", "c1", "c2"]  # current or not
            assert await all_ids(store, U1A2, current_at=NOW) == []
            current = await store.browse(U1A1, Listing(current_at=NOW))
            assert [r.id for r in current.records] == ["c1", "c2"] and current.total == 2
            every = await store.browse(U1A1, Listing(kind=MemoryKind.FACT))
            assert [r.id for r in every.records] == ["c0", "c1", "c2"] and every.total == 3
            (old,) = [r for r in every.records if r.id == "c0"]
            assert old.superseded_by == "c1" and old.valid_until == changed and old.valid_from == said

        self.run(scenario)

    def test_a_window_finds_the_memories_whose_span_overlaps_it_and_as_of_what_was_current_then(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            march = TimeWindow(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC))
            said, moved = datetime(2026, 1, 10, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC)
            await store.upsert(
                [
                    make("I live in Munich", id="now", valid_from=moved),
                    make("I live in Berlin", id="then", valid_from=said, valid_until=moved, superseded_by="now"),
                    make("hiking in March", id="hike", valid_from=moved, event_at=datetime(2026, 3, 14, tzinfo=UTC),
                         event_until=datetime(2026, 3, 15, tzinfo=UTC)),
                    make("a point in April", id="april", valid_from=said, event_at=datetime(2026, 4, 1, tzinfo=UTC)),
                    make("a turn in March", id="turn", created_at=datetime(2026, 3, 2, tzinfo=UTC),
                         updated_at=datetime(2026, 3, 2, tzinfo=UTC), retention_score=0.9),
                    make("a plan for later", id="later", valid_from=said, valid_until=datetime(2026, 2, 1, tzinfo=UTC)),
                ]
            )
            found = await store.search(SearchRequest(U1A1, "", None, opts(mode=SearchMode.KEYWORD, top=10), march))
            assert sorted(h.record.id for h in found.hits) == ["hike", "then", "turn"]
            at = datetime(2026, 3, 20, tzinfo=UTC)
            as_of = opts(mode=SearchMode.KEYWORD, top=10, as_of=at)
            found = await store.search(SearchRequest(U1A1, "", None, as_of))
            assert sorted(h.record.id for h in found.hits) == ["april", "then", "turn"]
            assert await ids_of(store, U1A1, "Berlin", mode=SearchMode.KEYWORD) == []  # not current now

        self.run(scenario)

    def test_an_undated_memory_of_a_moment_is_in_the_window_of_when_it_was_said_only(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            week = TimeWindow(datetime(2026, 10, 19, tzinfo=UTC), datetime(2026, 10, 26, tzinfo=UTC))
            later = TimeWindow(datetime(2026, 10, 26, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
            said = datetime(2026, 10, 20, tzinfo=UTC)
            await store.upsert(
                [
                    make("went hiking", id="episode", kind=MemoryKind.EPISODE, category="episode", valid_from=said),
                    make("ran a half marathon", id="event", category="event", valid_from=said),
                    make("going to a concert", id="plan", category="plan", valid_from=said),
                    make("I live in Munich", id="profile", category="profile", valid_from=said),
                    make("dated hike", id="dated", kind=MemoryKind.EPISODE, category="episode", valid_from=said,
                         event_at=datetime(2026, 10, 28, tzinfo=UTC), event_until=datetime(2026, 10, 29, tzinfo=UTC)),
                ]
            )

            async def in_window(window: TimeWindow) -> list[str]:
                found = await store.search(SearchRequest(U1A1, "", None, opts(mode=SearchMode.KEYWORD, top=10), window))
                return sorted(h.record.id for h in found.hits)

            # said that week: each moment is of that week; what holds (where the user lives) is too
            assert await in_window(week) == ["episode", "event", "plan", "profile"]
            # the week after: only what still holds, and the episode dated then
            assert await in_window(later) == ["dated", "profile"]

        self.run(scenario)

    # -- forgetting -----------------------------------------------------------------------------
    def test_forgetting_dry_run_then_apply_writes_only_changes(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [
                    make("weak memory", id="weak", importance=0.0, days_ago=0),
                    make("strong memory", id="strong", importance=1.0, access_count=10),
                    make("plan that expires", id="plan", importance=1.0, expires_at=NOW + timedelta(days=3)),
                    make("deleted one", id="gone", status=MemoryStatus.DELETED),
                ]
            )
            clock.advance(days=60)
            dry = await forget(store, clock, dry_run=True)
            assert dry.dry_run and dry.written == 0
            assert dry.scanned == 3
            assert {c.id for c in dry.changes} == {"weak", "plan"}
            assert {c.id for c in dry.changes if c.expired} == {"plan"}
            weak = await store.get(U1A1, "weak")
            assert weak is not None and weak.status == MemoryStatus.ACTIVE  # nothing written
            applied = await forget(store, clock, dry_run=False)
            assert applied.archived == 2 and applied.expired == 1
            assert applied.written == 3  # two archived, the strong one rescored (drifted)
            for memory_id, status in [
                ("weak", "archived"),
                ("plan", "archived"),
                ("strong", "active"),
                ("gone", "deleted"),
            ]:
                got = await store.get(U1A1, memory_id)
                assert got is not None and got.status == status, memory_id
            again = await forget(store, clock, dry_run=False)
            assert again.written == 0 and again.unchanged == 3
            assert await ids_of(store, U1A1, "memory", mode=SearchMode.KEYWORD) == ["strong"]

        self.run(scenario)

    def test_forgetting_is_resumable_in_bounded_pages(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make(f"fading {i}", id=f"f{i:02d}", importance=0.0) for i in range(7)])
            clock.advance(days=90)
            archived = 0
            cursor = None
            calls = 0
            while True:
                report = await forget(store, clock, dry_run=False, limit=3, cursor=cursor)
                calls += 1
                assert report.scanned <= 3
                archived += report.archived
                if report.next_cursor is None:
                    break
                cursor = report.next_cursor
            assert archived == 7 and calls >= 3
            assert await all_ids(store, U1A1, statuses=[MemoryStatus.ARCHIVED]) == [
                f"f{i:02d}" for i in range(7)
            ]

        self.run(scenario)

    def test_retention_scan_pages_every_scope_and_skips_deleted(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [make(f"a {i}", id=f"a{i}") for i in range(4)]
                + [make(f"b {i}", U2A1, id=f"b{i}") for i in range(3)]
                + [make("gone", id="gone", status=MemoryStatus.DELETED)]
            )
            seen: list[str] = []
            scopes: set[tuple[str, str]] = set()
            cursor = None
            while True:
                page = await store.scan_retention(after=cursor, limit=3)
                assert len(page) <= 3
                refs = await store.memory_refs(list(page.keys))
                assert all(ref is not None for ref in refs)
                seen += [ref.id for ref in refs if ref is not None]
                scopes |= {(ref.user_id, ref.agent_id) for ref in refs if ref is not None}
                assert page.active.all() and (page.importance == 0.5).all()
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert sorted(seen) == sorted([f"a{i}" for i in range(4)] + [f"b{i}" for i in range(3)])
            assert scopes == {(U1A1.user_id, U1A1.agent_id), (U2A1.user_id, U2A1.agent_id)}
            with pytest.raises(ValidationError) as caught:
                await store.scan_retention(after="' or 1=1 --", limit=3)
            assert caught.value.field == "cursor"
            for bad in (0, True, 2.5):
                with pytest.raises(ValidationError) as caught:
                    await store.scan_retention(limit=bad)  # type: ignore[arg-type]
                assert caught.value.field == "limit"

        self.run(scenario)

    def test_retention_write_changes_only_status_and_retention(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("keep me", id="k1", importance=0.9), make("fade", id="k2")])
            page = await store.scan_retention(limit=10)
            ids = [ref.id for ref in await store.memory_refs(list(page.keys)) if ref is not None]
            await store.mark_status(U1A1, "k2", MemoryStatus.DELETED, reason="deleted meanwhile")
            import numpy as np

            written = await store.write_retention(
                RetentionWrite(
                    page=page,
                    rows=np.arange(len(page)),
                    active=np.array([i != "k1" for i in ids]),
                    retention=np.array([0.123 if i == "k1" else 0.5 for i in ids]),
                )
            )
            assert written == 1  # k2 was deleted since the scan: not written
            k1, k2 = await store.get(U1A1, "k1"), await store.get(U1A1, "k2")
            assert k1 is not None and (k1.status, k1.retention_score) == (MemoryStatus.ARCHIVED, 0.123)
            assert k1.memory == "keep me" and k1.importance == 0.9 and k1.embedding is not None
            assert k2 is not None and k2.status == MemoryStatus.DELETED  # a deleted memory is never revived

        self.run(scenario)

    def test_kind_filter_and_provenance(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            source = Provenance(turn_id="t-7", message=1, start=3, end=20, speaker="Caroline")
            await store.upsert(
                [
                    make("green tea in the morning", id="f1", provenance=[source]),
                    make("Caroline: green tea, every morning", id="e1", kind=MemoryKind.EPISODE, provenance=[source]),
                ]
            )
            got = await store.get(U1A1, "e1")
            assert got is not None and got.kind is MemoryKind.EPISODE and got.provenance == [source]
            for mode in (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID):
                assert await ids_of(store, U1A1, "green tea morning", mode=mode, kind=MemoryKind.EPISODE) == ["e1"]
                assert await ids_of(store, U1A1, "green tea morning", mode=mode, kind=MemoryKind.FACT) == ["f1"]
                both = await ids_of(store, U1A1, "green tea morning", mode=mode)
                assert sorted(both) == ["e1", "f1"]

        self.run(scenario)

    def test_event_time_is_kept_read_and_merged(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            # "last Friday" said in Tokyo: the span starts at 15:00 UTC, not at a UTC midnight
            start, end = datetime(2026, 10, 29, 15, tzinfo=UTC), datetime(2026, 10, 30, 15, tzinfo=UTC)
            await store.upsert(
                [
                    make("京都の旅館に泊まった", id="dated", event_at=start, event_until=end),
                    make("旅館が好き", id="undated"),
                ]
            )
            got = await store.get(U1A1, "dated")
            assert got is not None and (got.event_at, got.event_until) == (start, end)
            undated = await store.get(U1A1, "undated")
            assert undated is not None and (undated.event_at, undated.event_until) == (None, None)
            page = await store.scan(U1A1, PageRequest())
            assert {r.id: r.event_at for r in page.records} == {"dated": start, "undated": None}
            later = start + timedelta(days=7)
            merged = await store.merge(U1A1, "dated", {"event_at": later, "event_until": later + timedelta(days=1)})
            assert merged.event_at == later
            got = await store.get(U1A1, "dated")
            assert got is not None and (got.event_at, got.event_until) == (later, later + timedelta(days=1))
            with pytest.raises(ValidationError):
                await store.merge(U1A1, "dated", {"event_until": start})  # before its start

        self.run(scenario)

    def test_a_passed_plan_stays_an_active_dated_plan_through_forgetting(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            friday = datetime(2026, 11, 6, tzinfo=UTC)
            span = {"event_at": friday, "event_until": friday + timedelta(days=1)}
            await store.upsert(
                [make("flying to Osaka on Friday", id="trip", category="plan", importance=0.65, **span)]
            )
            clock.advance(days=14)  # a week after the day
            report = await forget(store, clock, dry_run=False)
            assert report.archived == 0 and report.expired == 0
            got = await store.get(U1A1, "trip")
            assert got is not None and got.status == MemoryStatus.ACTIVE and got.category == "plan"
            assert (got.event_at, got.event_until) == (span["event_at"], span["event_until"])
            assert 0 < got.retention_score < 1  # rescored like any memory, not dropped
            assert await ids_of(store, U1A1, "Osaka", mode=SearchMode.KEYWORD) == ["trip"]

        self.run(scenario)

    def test_browse_filters_sorts_pages_and_counts(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            records = [
                make(
                    f"note {i}",
                    id=f"b{i:02d}",
                    importance=(i % 5) / 5,
                    days_ago=float(i),
                    category="travel" if i % 2 else "food",
                    kind=MemoryKind.EPISODE if i % 3 == 0 else MemoryKind.FACT,
                    access_count=i,
                )
                for i in range(12)
            ]
            await store.upsert([*records, make("someone else's", U1A2, id="b99"), make("theirs", U2A1, id="b98")])
            await store.mark_status(U1A1, "b05", MemoryStatus.DELETED, reason="test")
            page = await store.browse(U1A1, Listing(limit=5))
            assert [r.id for r in page.records] == ["b00", "b01", "b02", "b03", "b04"] and page.total == 12
            assert all(r.embedding is None for r in page.records)
            newest = await store.browse(U1A1, Listing(order_by=OrderBy.UPDATED_AT_DESC, offset=2, limit=3))
            assert [r.id for r in newest.records] == ["b02", "b03", "b04"] and newest.total == 12
            # ties (equal importance) are broken by id
            ranked = await store.browse(U1A1, Listing(order_by=OrderBy.IMPORTANCE_DESC, limit=4))
            assert [r.id for r in ranked.records] == ["b04", "b09", "b03", "b08"]
            recalled = await store.browse(U1A1, Listing(order_by=OrderBy.ACCESS_COUNT_DESC, limit=2))
            assert [r.id for r in recalled.records] == ["b11", "b10"]
            travel = await store.browse(U1A1, Listing(category="travel", kind=MemoryKind.FACT, limit=100))
            assert [r.id for r in travel.records] == ["b01", "b05", "b07", "b11"] and travel.total == 4
            episodes = await store.browse(
                U1A1, Listing(kind=MemoryKind.EPISODE, statuses=[MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED])
            )
            assert [r.id for r in episodes.records] == ["b00", "b03", "b06", "b09"]
            deleted = await store.browse(U1A1, Listing(statuses=[MemoryStatus.DELETED]))
            assert [r.id for r in deleted.records] == ["b05"] and deleted.total == 1
            beyond = await store.browse(U1A1, Listing(offset=50))
            assert beyond.records == [] and beyond.total == 12
            for bad in ({"offset": -1}, {"offset": 100_001}, {"limit": 0}, {"limit": 1001}, {"category": "a b"}):
                with pytest.raises(ValidationError):
                    await store.browse(U1A1, Listing(**bad))

        self.run(scenario)

    def test_agents_are_counted_by_status(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(
                [
                    make("one", id="c1"),
                    make("two", id="c2", status=MemoryStatus.ARCHIVED),
                    make("three", U1A2, id="c3"),
                    make("four", U2A1, id="c4"),
                ]
            )
            await store.mark_status(U1A1, "c1", MemoryStatus.DELETED, reason="test")
            counts = await store.count_agents(U1A1.user_id)
            assert [(c.id, c.active, c.archived, c.deleted, c.total) for c in counts] == [
                ("agent-1", 0, 1, 1, 2),
                ("agent-2", 1, 0, 0, 1),
            ]
            assert await store.count_agents("nobody") == []
            with pytest.raises(ValidationError):
                await store.count_agents("x' or 1 eq 1")

        self.run(scenario)

    def test_retention_refs_skip_a_memory_purged_since_the_scan(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert([make("mine", id="p1"), make("theirs", U2A1, id="p2")])
            page = await store.scan_retention(limit=10)
            await store.purge(U2A1.user_id)
            refs = await store.memory_refs(list(page.keys))
            assert sorted((r.id, r.user_id) for r in refs if r is not None) == [("p1", U1A1.user_id)]
            assert sum(r is None for r in refs) == 1

        self.run(scenario)


def async_context(factory: Callable[[], Awaitable[MemoryStore]]) -> AbstractAsyncContextManager[MemoryStore]:
    """Wrap an async store factory into a context manager that closes the store."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def manager() -> AsyncIterator[MemoryStore]:
        store = await factory()
        try:
            yield store
        finally:
            await store.close()

    return manager()
