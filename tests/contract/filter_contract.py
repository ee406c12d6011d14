"""Search filters in Mem0's syntax, run against every store: the same filters find the same memories.

Mixed into each store's contract class (beside :class:`~contract.store_contract.StoreContract`), so
the embedded store's SQL and Azure AI Search's OData ``$filter`` answer the same cases.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from contract.store_contract import NOW, U1A1, U1A2, ids_of, make
from memory_core.domain.filters import parse_filters
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryKind, Provenance
from memory_core.domain.search import SearchMode
from memory_core.ports import FixedClock, MemoryStore

QUERY = "tea"


def _records() -> list[Any]:
    def said(session: str | None) -> list[Provenance]:
        return [Provenance(turn_id=f"turn-{session or 'none'}", session_id=session)]

    return [
        make("green tea", id="green", category="preference", importance=0.9,
             metadata={"topic": "drinks", "tags": ["morning", "hot"], "cups": 3, "decaf": False},
             provenance=said("s-1")),
        make("black tea", id="black", category="preference", importance=0.4,
             metadata={"topic": "drinks", "tags": ["evening"], "cups": 1.0, "decaf": True},
             provenance=said("s-2"), event_at=NOW - timedelta(days=3)),
        make("tea ceremony in Kyoto", id="kyoto", category="plan", importance=0.7,
             metadata={"topic": "travel", "note": {"topic": "drinks"}}, provenance=said("s-1"),
             event_at=NOW + timedelta(days=10)),
        make("tea with O'Brien", id="obrien", kind=MemoryKind.EPISODE, importance=0.2,
             metadata={"who": "O'Brien"}, provenance=said(None)),
        make("tea for the other agent", U1A2, id="other", category="preference",
             metadata={"topic": "drinks"}, provenance=said("s-1")),
    ]


#: (filters, the ids found), the same in every store.
CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"category": "preference"}, {"green", "black"}),
    ({"category": {"ne": "preference"}}, {"kyoto", "obrien"}),
    ({"category": {"in": ["plan", "general"]}}, {"kyoto", "obrien"}),
    ({"category": {"nin": ["plan", "general"]}}, {"green", "black"}),
    ({"importance": {"gte": 0.7}}, {"green", "kyoto"}),
    ({"importance": {"gt": 0.4, "lt": 0.9}}, {"kyoto"}),
    ({"kind": "episode"}, {"obrien"}),
    ({"kind": {"ne": "episode"}}, {"green", "black", "kyoto"}),
    ({"event_at": {"gte": NOW.isoformat()}}, {"kyoto"}),
    ({"event_at": {"lt": NOW}}, {"black"}),
    ({"event_at": None}, {"green", "obrien"}),
    ({"event_at": {"ne": None}}, {"black", "kyoto"}),
    ({"metadata.topic": "drinks"}, {"green", "black"}),
    ({"metadata.topic": {"ne": "drinks"}}, {"kyoto", "obrien"}),
    ({"metadata.tags": {"contains": "morning"}}, {"green"}),
    ({"metadata.tags": {"in": ["hot", "evening"]}}, {"green", "black"}),
    ({"metadata.tags": {"nin": ["hot", "evening"]}}, {"kyoto", "obrien"}),
    ({"metadata.cups": 3.0}, {"green"}),
    ({"metadata.cups": 1}, {"black"}),
    ({"metadata.cups": "3"}, set()),
    ({"metadata.decaf": True}, {"black"}),
    ({"metadata.decaf": 1}, set()),
    ({"metadata.who": "O'Brien"}, {"obrien"}),
    ({"metadata.note": "drinks"}, set()),
    ({"metadata.note": {"ne": "drinks"}}, {"green", "black", "kyoto", "obrien"}),
    ({"metadata.who": "O' or 1 eq 1 or '"}, set()),
    ({"run_id": "s-1"}, {"green", "kyoto"}),
    ({"run_id": {"ne": "s-1"}}, {"black", "obrien"}),
    ({"run_id": {"in": ["s-2", "s-9"]}}, {"black"}),
    ({"AND": [{"metadata.topic": "drinks"}, {"importance": {"lt": 0.5}}]}, {"black"}),
    ({"OR": [{"kind": "episode"}, {"category": "plan"}]}, {"kyoto", "obrien"}),
    ({"OR": [{"AND": [{"run_id": "s-1"}, {"category": "plan"}]}, {"metadata.decaf": True}]}, {"kyoto", "black"}),
    ({"metadata.topic": "drinks", "run_id": "s-1"}, {"green"}),
]


class FilterContract:
    """Mem0-style filters in a store (mixed into a class that has ``run``)."""

    def run(self, scenario: Any) -> None:  # pragma: no cover - the store contract's
        raise NotImplementedError

    @pytest.mark.parametrize(("filters", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
    def test_mem0_filters_find_the_same_memories_in_every_store(
        self, filters: dict[str, Any], expected: set[str]
    ) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(_records())
            for mode in (SearchMode.KEYWORD, SearchMode.HYBRID):
                found = await ids_of(store, U1A1, QUERY, mode=mode, filters=filters, top=20)
                assert set(found) == expected, (mode, filters)

        self.run(scenario)

    @pytest.mark.parametrize(("filters", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
    def test_mem0_filters_list_the_same_memories_in_every_store(
        self, filters: dict[str, Any], expected: set[str]
    ) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(_records())
            page = await store.scan(U1A1, PageRequest(limit=2, filters=parse_filters(filters)))
            listed = [r.id for r in page.records]
            while page.next_cursor is not None:  # paged by id, two at a time: the filter holds on every page
                page = await store.scan(
                    U1A1, PageRequest(after=page.next_cursor, limit=2, filters=parse_filters(filters))
                )
                listed += [r.id for r in page.records]
            assert set(listed) == expected and listed == sorted(listed), filters

        self.run(scenario)

    def test_filters_follow_a_changed_metadata(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            await store.upsert(_records())
            await store.merge(U1A1, "kyoto", {"metadata": {"topic": "drinks"}})
            found = await ids_of(store, U1A1, QUERY, mode=SearchMode.KEYWORD, filters={"metadata.topic": "drinks"})
            assert set(found) == {"green", "black", "kyoto"}

        self.run(scenario)
