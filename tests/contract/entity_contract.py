"""The entity index contract: what a store that offers :class:`~memory_core.capabilities.EntityIndex`
keeps and finds. A store's test class mixes this in beside :class:`~contract.store_contract.StoreContract`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from contract.store_contract import U1A1, U2A1, make
from memory_core.capabilities import EntityIndex, supports
from memory_core.domain.records import MemoryStatus
from memory_core.language.entities import Mention, mentions
from memory_core.ports import FixedClock, MemoryStore


def _memories(found: dict[str, list[str]]) -> set[str]:
    return {memory_id for ids in found.values() for memory_id in ids}


class EntityContract:
    """Entities follow the memories that name them, per scope."""

    run: Callable[[Callable[[MemoryStore, FixedClock], Awaitable[None]]], None]

    def test_a_relation_and_a_name_find_the_same_memories(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            assert supports(store, EntityIndex)
            index: EntityIndex = store  # type: ignore[assignment]
            await store.upsert(
                [
                    make("My sister Ana works at Contoso.", id="m1"),
                    make("Ana loves jazz.", id="m2"),
                    make("I like tea.", id="m3"),
                    make("姉の花子は東京に住んでいる。", id="m4", scope=U2A1),
                ]
            )
            by_relation = await index.entity_memories(U1A1, [Mention("person", None, "sister")])
            by_name = await index.entity_memories(U1A1, mentions("What does Ana like?"))
            assert _memories(by_relation) == _memories(by_name) == {"m1", "m2"}
            assert _memories(await index.entity_memories(U2A1, mentions("姉の仕事は？"))) == {"m4"}
            assert await index.entity_memories(U1A1, mentions("What does Anna like?")) == {}
            people = [e for e in await index.entities(U1A1) if e.kind == "person"]
            assert [(e.name, e.relation) for e in people] == [("Ana", "sister")]

        self.run(scenario)

    def test_look_alike_names_stay_apart(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            index: EntityIndex = store  # type: ignore[assignment]
            await store.upsert([make("My friend Sara plays chess.", id="m1"), make("My friend Sarah plays golf.", id="m2")])
            assert _memories(await index.entity_memories(U1A1, mentions("What does Sara play?"))) == {"m1"}
            assert _memories(await index.entity_memories(U1A1, mentions("What does Sarah play?"))) == {"m2"}

        self.run(scenario)

    def test_a_deleted_memory_names_nothing_and_its_last_entity_goes(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            index: EntityIndex = store  # type: ignore[assignment]
            await store.upsert([make("My friend Alex lent me his car.", id="m1"), make("My dog Rex is old.", id="m2")])
            await store.mark_status(U1A1, "m1", MemoryStatus.DELETED, reason="forget request")
            assert await index.entity_memories(U1A1, mentions("Who is Alex?")) == {}
            assert [e.name for e in await index.entities(U1A1)] == ["Rex"]
            await store.purge("user-1")
            assert await index.entities(U1A1) == []

        self.run(scenario)

    def test_memories_of_lists_the_live_memories_of_each_entity(self) -> None:
        async def scenario(store: MemoryStore, clock: FixedClock) -> None:
            index: EntityIndex = store  # type: ignore[assignment]
            await store.upsert(
                [
                    make("My sister Ana works at Contoso.", id="m1"),
                    make("Ana loves jazz.", id="m2"),
                    make("My dog Rex is old.", id="m3"),
                    make("Ana visited me.", id="m4"),
                    make("My sister Ana lives in Lisbon.", id="m5", scope=U2A1),
                ]
            )
            await store.mark_status(U1A1, "m4", MemoryStatus.ARCHIVED, reason="faded")
            await store.mark_status(U1A1, "m2", MemoryStatus.DELETED, reason="forget request")
            ana = next(e.id for e in await index.entities(U1A1) if e.name == "Ana")
            rex = next(e.id for e in await index.entities(U1A1) if e.name == "Rex")
            other = next(e.id for e in await index.entities(U2A1) if e.name == "Ana")
            unknown = "ent_" + "0" * 24
            found = await index.memories_of(U1A1, [rex, unknown, ana, other])
            assert found == {rex: ["m3"], ana: ["m1", "m4"]}
            assert list(found) == [rex, ana]
            assert await index.memories_of(U1A1, []) == {}

        self.run(scenario)
