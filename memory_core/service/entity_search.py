"""Search through entities: a query that names a person, pet, place or organisation, or a relation
("What does my wife drive?", 「妻の仕事は？」, "Where does my sister Ana work?"), brings the memories of
that entity into the candidates, whatever words they share with the query.

The entity leg is a second search of the store, narrowed to the memories the store's entity index
(:class:`~memory_core.capabilities.EntityIndex`) links to the entities the query names
(:func:`~memory_core.language.entities.mentions`, matched without creating anything), with every
option of the search (status, filters, time). What it finds joins the candidates below the ones the
other legs found (:func:`with_entity_leg`); the relevance then orders them, a memory of a named
entity counting :data:`ENTITY_RELEVANCE` more. Measured with ``eval truth`` (docs/entities.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from memory_core.capabilities import EntityIndex, supports
from memory_core.domain.records import Scope
from memory_core.domain.search import SearchHit
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ValidationError
from memory_core.language.entities import RELATION_WORDS, Mention, mentions
from memory_core.ports import MemoryStore

__all__ = [
    "ENTITY_CANDIDATES",
    "ENTITY_RELEVANCE",
    "ENTITY_WEIGHT",
    "entity_memory_ids",
    "with_entity_boost",
    "with_entity_leg",
]

#: Most memories of the named entities the entity leg weighs (the newest ids first).
ENTITY_CANDIDATES = 60
#: What the entity leg adds to a memory's score, relative to the best score of the other legs (its
#: rank in the leg discounting it as Reciprocal Rank Fusion does).
ENTITY_WEIGHT = 1.0
#: How much more relevant a memory of an entity the query names is (at most 1).
ENTITY_RELEVANCE = 0.1


def asked_entities(query: str) -> list[Mention]:
    """What ``query`` names that the entity index may know (people, pets, places, organisations)."""
    return mentions(query) if query.strip() else []


async def entity_memory_ids(store: MemoryStore, scope: Scope, asked: Sequence[Mention]) -> list[str]:
    """The ids of the memories of every entity of ``scope`` the mentions ``asked`` may mean (none when
    the store keeps no entity index)."""
    if not asked or not supports(store, EntityIndex):
        return []
    found = await cast(EntityIndex, store).entity_memories(scope, asked)
    return list(dict.fromkeys(memory_id for ids in found.values() for memory_id in ids))


async def with_entity_leg(
    store: MemoryStore, request: SearchRequest, hits: Sequence[SearchHit], *, ranked: bool = True
) -> tuple[list[SearchHit], frozenset[str]]:
    """``hits`` fused with the entity leg: the memories of the entities the query names, ranked by a
    search narrowed to them (with the request's options), each adding ``ENTITY_WEIGHT × best × 60 /
    (60 + rank)`` to its score (``best``: the best score of ``hits``; a memory the other legs missed
    joins with that alone), in score order; and the ids of every memory of those entities (for
    :func:`with_entity_boost`). A search that is not ranked (sorted by a field, or match-all) has none."""
    asked = asked_entities(request.query) if ranked else []
    ids = await entity_memory_ids(store, request.scope, asked)
    if not ids:
        return list(hits), frozenset()
    words = surface_words(asked)
    narrowed: dict[str, Any] = {"id": {"in": ids[:ENTITY_CANDIDATES]}}
    if request.options.filters:
        narrowed = {"AND": [request.options.filters, narrowed]}
    options = request.options.model_copy(update={"filters": narrowed, "top": min(len(ids), ENTITY_CANDIDATES)})
    try:
        result = await store.search(replace(request, options=options))
    except ValidationError:  # the caller's filters leave no room for one more condition: no entity leg
        return list(hits), frozenset(ids)
    best = max((h.score for h in hits), default=0.0) or max((h.score for h in result.hits), default=1.0)
    rank = {h.record.id: at for at, h in enumerate(result.hits) if not says_any(h.record.memory, words)}
    fused = [_with_leg(h, best, rank[h.record.id]) if h.record.id in rank else h for h in hits]
    have = {h.record.id for h in hits}
    fused += [
        _with_leg(h.model_copy(update={"score": 0.0}), best, rank.get(h.record.id))
        for h in result.hits
        if h.record.id not in have
    ]
    return sorted(fused, key=lambda h: -h.score), frozenset(rank)


def surface_words(asked: Sequence[Mention]) -> tuple[str, ...]:
    """The words the query names its entities by: their names and every word of their relations."""
    words = [m.name for m in asked if m.name]
    words += [w for m in asked for r in RELATION_WORDS if r.key == m.relation for w in (*r.english, *r.japanese)]
    return tuple(dict.fromkeys(words))


def says_any(text: str, words: Sequence[str]) -> bool:
    """Whether ``text`` holds one of ``words`` (a Latin word as a whole word)."""
    folded = text.casefold()
    for word in words:
        w = word.casefold()
        if w.isascii():
            if re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", folded):
                return True
        elif w in folded:
            return True
    return False


def _with_leg(hit: SearchHit, best: float, rank: int | None) -> SearchHit:
    if rank is None:
        return hit
    added = ENTITY_WEIGHT * best * 60 / (60 + rank)
    functions = {**hit.breakdown.functions, "entity": round(added, 6)}
    return hit.model_copy(update={"score": hit.score + added, "breakdown": hit.breakdown.model_copy(update={"functions": functions})})


def with_entity_boost(hits: Sequence[SearchHit], named: frozenset[str]) -> list[SearchHit]:
    """The hits, each memory of a named entity (``named``) :data:`ENTITY_RELEVANCE` more relevant."""
    if not named or not ENTITY_RELEVANCE:
        return list(hits)
    return [
        h.model_copy(update={"relevance": round(min(1.0, h.relevance + ENTITY_RELEVANCE), 4)})
        if h.relevance is not None and h.record.id in named
        else h
        for h in hits
    ]
