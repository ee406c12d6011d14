"""Forget by entity: a broad forget request that names a person, pet, place or organisation ("forget
everything about Alex", 「元彼の話は全部忘れて」) takes every memory the store's entity index links to it,
whatever words they use for it ("my sister", 「姉」, "Ana"), and the sentences of episodes that name it by
any of its names or its relation words. The request is read with the names the scope knows
(「花子のことは全部忘れて」 names 花子 without an honorific), and a relation word stands for the entity
only when no other entity of the scope has that relation ("forget everything about Sarah" leaves "My
friend Sara plays chess" when both are friends). With its last memory the entity goes too (the index
drops an entity no memory names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from memory_core.capabilities import EntityIndex, supports
from memory_core.domain.entities import Entity, known_names, matching
from memory_core.domain.records import Scope
from memory_core.language.entities import mentions
from memory_core.language.entity_words import PATH_SEPARATOR, relation_words
from memory_core.ports import MemoryStore

__all__ = ["entity_trace"]


async def entity_trace(store: MemoryStore, scope: Scope, request: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """What the entities a forget ``request`` names leave in ``scope``: the ids of their memories, and
    the words that name them (names, aliases, and the relation words of their relation in both
    languages when it is theirs alone in the scope and a relation to the user, not a path); nothing
    when the store keeps no entity index or the request names no entity it knows."""
    if not request.strip() or not supports(store, EntityIndex):
        return frozenset(), ()
    index = cast(EntityIndex, store)
    known = await index.entities(scope)
    asked = mentions(request, known_names(known))
    meant = {e.id: e for m in asked for e in matching(m, known)}
    if not meant:
        return frozenset(), ()
    found = await index.memories_of(scope, list(meant))
    words = [w for entity in meant.values() for w in _words(entity, known)]
    return frozenset(i for ids in found.values() for i in ids), tuple(dict.fromkeys(words))


def _words(entity: Entity, known: Sequence[Entity]) -> list[str]:
    """The words that name ``entity``: its names, and its relation's words when the relation is to
    the user (not a path) and no other entity of ``known`` has it."""
    words = [n for n in (entity.name, *entity.aliases) if n]
    relation = entity.relation
    if relation and PATH_SEPARATOR not in relation and not any(e.relation == relation and e.id != entity.id for e in known):
        words += relation_words(relation)
    return words
