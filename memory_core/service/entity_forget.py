"""Forget by entity: a broad forget request that names a person, pet, place or organisation ("forget
everything about Alex", 「元彼の話は全部忘れて」) takes every memory the store's entity index links to it,
whatever words they use for it ("my sister", 「姉」, "Ana"), and the sentences of episodes that name it by
any of its names or its relation words. With its last memory the entity goes too (the index drops an
entity no memory names)."""

from __future__ import annotations

from typing import cast

from memory_core.capabilities import EntityIndex, supports
from memory_core.domain.records import Scope
from memory_core.language.entities import RELATION_WORDS, mentions
from memory_core.ports import MemoryStore

__all__ = ["entity_trace"]


async def entity_trace(store: MemoryStore, scope: Scope, request: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """What the entities a forget ``request`` names leave in ``scope``: the ids of their memories, and
    the words that name them (names, aliases, the relation words of their relation in both languages);
    nothing when the store keeps no entity index or the request names no entity it knows."""
    asked = mentions(request)
    if not asked or not supports(store, EntityIndex):
        return frozenset(), ()
    index = cast(EntityIndex, store)
    found = await index.entity_memories(scope, asked)
    if not found:
        return frozenset(), ()
    words: list[str] = []
    for entity in await index.entities(scope):
        if entity.id not in found:
            continue
        words += [n for n in (entity.name, *entity.aliases) if n]
        words += [w for r in RELATION_WORDS if r.key == entity.relation for w in (*r.english, *r.japanese)]
    return frozenset(i for ids in found.values() for i in ids), tuple(dict.fromkeys(words))
