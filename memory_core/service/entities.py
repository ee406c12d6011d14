"""The entities of a scope as every face shows them: the people, pets, places and organisations its
memories name, each with its memories; forgetting one (its memories soft-deleted as a forget deletes
them, so the entity goes with its last mention) and exporting one (its memories as an export writes
them, so ``memory-core import`` reads them back).

Every use case needs a store with an entity index (:class:`~memory_core.capabilities.EntityIndex`);
another store answers :class:`~memory_core.errors.UnsupportedError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from memory_core.capabilities import BatchReader, EntityIndex, supports
from memory_core.domain.entities import Entity
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.validation import MEMORY_ID_PATTERN, validate_entity_id
from memory_core.errors import NotFoundError, UnsupportedError, ValidationError
from memory_core.ports import HistoryStore, MemoryStore
from memory_core.service.admin import delete_memory

__all__ = [
    "PREFIX_CANDIDATES",
    "EntityExport",
    "EntityForgetting",
    "EntityMemories",
    "EntitySummary",
    "entity_index",
    "entity_with_memories",
    "export_entity",
    "forget_entity",
    "list_entities",
    "resolve_entity_id",
]

#: Entities an ambiguous id prefix names in its error, at most.
PREFIX_CANDIDATES = 10


@dataclass(frozen=True, slots=True)
class EntitySummary:
    """One entity of a scope and how many memories name it.

    Attributes:
        entity: The entity.
        memory_count: Its memories (any status but deleted).
    """

    entity: Entity
    memory_count: int


@dataclass(frozen=True, slots=True)
class EntityMemories:
    """One entity and the memories that name it, newest first (as the store keeps them).

    Attributes:
        entity: The entity.
        memories: Its memories (any status but deleted).
    """

    entity: Entity
    memories: list[MemoryRecord]


@dataclass(frozen=True, slots=True)
class EntityForgetting:
    """What forgetting an entity did.

    Attributes:
        entity: The entity as it was.
        forgotten: Its memories, now ``deleted`` (without embeddings).
        entity_removed: Whether the entity is gone from the index (it is, unless a memory naming it
            was written meanwhile).
    """

    entity: Entity
    forgotten: list[MemoryRecord]
    entity_removed: bool


@dataclass(frozen=True, slots=True)
class EntityExport:
    """An entity's memories as an export writes them, and their recorded decisions.

    Attributes:
        entity: The entity.
        records: Its memories, every field (the embedding only when asked for).
        history: Every recorded change to them, oldest first per memory.
    """

    entity: Entity
    records: list[MemoryRecord]
    history: list[HistoryEntry]


def entity_index(store: MemoryStore) -> EntityIndex:
    """``store`` as an entity index.

    Raises:
        UnsupportedError: The store keeps no entity index.
    """
    if not supports(store, EntityIndex):
        raise UnsupportedError(
            "this store keeps no entity index (the embedded store and the Azure AI Search store do)"
        )
    return cast(EntityIndex, store)


def entity_not_found(entity_id: str) -> NotFoundError:
    """The error for an entity the scope does not have."""
    return NotFoundError(f"entity {entity_id!r} not found for this user and agent")


async def list_entities(store: MemoryStore, scope: Scope) -> list[EntitySummary]:
    """The entities of ``scope``, by kind then name, each with its number of memories."""
    index = entity_index(store)
    scope = Scope.of(scope.user_id, scope.agent_id)
    known = await index.entities(scope)
    ids = await index.memories_of(scope, [e.id for e in known]) if known else {}
    summaries = [EntitySummary(e, len(ids.get(e.id, ()))) for e in known if e.id in ids]
    return sorted(summaries, key=lambda s: (s.entity.kind, (s.entity.name or s.entity.relation or "").casefold()))


async def _entity(index: EntityIndex, scope: Scope, entity_id: str) -> tuple[Entity, list[str]]:
    entity_id = validate_entity_id(entity_id, "entity_id")
    ids = (await index.memories_of(scope, [entity_id])).get(entity_id)
    entity = next((e for e in await index.entities(scope) if e.id == entity_id), None)
    if ids is None or entity is None:
        raise entity_not_found(entity_id)
    return entity, ids


async def _records(store: MemoryStore, scope: Scope, memory_ids: Sequence[str]) -> list[MemoryRecord]:
    """The memories of ``memory_ids`` still in ``scope``, newest first."""
    if supports(store, BatchReader):
        found = list((await cast(BatchReader, store).get_many(scope, memory_ids)).values())
    else:
        found = [r for r in [await store.get(scope, i) for i in memory_ids] if r is not None]
    return sorted(found, key=lambda r: (r.updated_at, r.id), reverse=True)


async def entity_with_memories(store: MemoryStore, scope: Scope, entity_id: str) -> EntityMemories:
    """One entity of ``scope`` and its memories (with their embeddings, as the store reads them).

    Raises:
        ValidationError: ``entity_id`` is not an entity id.
        NotFoundError: ``scope`` has no such entity.
        UnsupportedError: The store keeps no entity index.
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    entity, ids = await _entity(entity_index(store), scope, entity_id)
    return EntityMemories(entity, await _records(store, scope, ids))


async def forget_entity(
    store: MemoryStore, history: HistoryStore | None, scope: Scope, entity_id: str, *, now: datetime
) -> EntityForgetting:
    """Soft-delete every memory of one entity of ``scope``, each as a forget deletes a memory (recorded
    in its history); the index drops the entity with its last memory.

    Raises:
        ValidationError: ``entity_id`` is not an entity id.
        NotFoundError: ``scope`` has no such entity.
        UnsupportedError: The store keeps no entity index.
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    index = entity_index(store)
    entity, ids = await _entity(index, scope, entity_id)
    reason = f"forgotten with the entity {entity.id}"
    forgotten = []
    for memory_id in ids:
        try:
            forgotten.append(await delete_memory(store, history, scope, memory_id, reason=reason, now=now))
        except NotFoundError:  # purged meanwhile: nothing left to forget
            continue
    left = await index.memories_of(scope, [entity.id])
    return EntityForgetting(entity, [r.without_embedding() for r in forgotten], entity.id not in left)


async def export_entity(
    store: MemoryStore,
    history: HistoryStore | None,
    scope: Scope,
    entity_id: str,
    *,
    include_vectors: bool = False,
) -> EntityExport:
    """One entity's memories, every field (the embedding only with ``include_vectors``), oldest first
    by id as an export lists them, and their recorded decisions.

    Raises:
        ValidationError: ``entity_id`` is not an entity id.
        NotFoundError: ``scope`` has no such entity.
        UnsupportedError: The store keeps no entity index.
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    entity, ids = await _entity(entity_index(store), scope, entity_id)
    records = sorted(await _records(store, scope, ids), key=lambda r: r.id)
    if not include_vectors:
        records = [r.without_embedding() for r in records]
    entries: list[HistoryEntry] = []
    if history is not None:
        for record in records:
            entries.extend(await history.for_memory(scope, record.id))
    return EntityExport(entity, records, entries)


async def resolve_entity_id(store: MemoryStore, scope: Scope, text: str) -> str:
    """The id of the entity of ``scope`` that ``text`` names: its whole id, or the start of exactly one
    (as the command line prints them shortened).

    Raises:
        ValidationError: ``text`` is not an id, or starts the ids of several entities.
        NotFoundError: No entity of ``scope`` has that id or one starting with it.
        UnsupportedError: The store keeps no entity index.
    """
    if not isinstance(text, str) or not MEMORY_ID_PATTERN.fullmatch(text):
        raise ValidationError("id", f"{str(text)[:40]!r} is not an entity id (ent_ and 24 hex digits) or the start of one")
    ids = sorted(e.id for e in await entity_index(store).entities(Scope.of(scope.user_id, scope.agent_id)))
    if text in ids:
        return text
    matches = [i for i in ids if i.startswith(text)]
    if not matches:
        raise NotFoundError(
            f"no entity has the id {text!r} or an id starting with it (user {scope.user_id!r}, agent {scope.agent_id!r})"
        )
    if len(matches) > 1:
        more = " and more" if len(matches) > PREFIX_CANDIDATES else ""
        raise ValidationError(
            "id",
            f"{text!r} starts the ids of several entities ({', '.join(matches[:PREFIX_CANDIDATES])}{more}); "
            "give more of the id",
        )
    return matches[0]
