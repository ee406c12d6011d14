"""Search through entities: a query that names a person, pet, place or organisation, or a relation
("What does my wife drive?", 「妻の仕事は？」, "Where does my sister Ana work?"), brings the memories of
that entity into the candidates, whatever words they share with the query.

The entity leg is a second search of the store, narrowed to the memories the store's entity index
(:class:`~memory_core.capabilities.EntityIndex`) links to the entities the query names
(:func:`~memory_core.language.entities.mentions`, matched without creating anything), with every
option of the search (status, filters, time). What it finds joins the candidates below the ones the
other legs found (:func:`with_entity_leg`); the relevance then orders them, a memory of a named
entity counting :data:`ENTITY_RELEVANCE` more. Measured with ``eval truth`` (docs/entities.md).

The query is read with the names the scope knows (「健一の趣味は？」 names 健一 without an honorific).
A memory that names the entity in other words than the query ("My cat only drinks from the tap"
for "Where does Pepper drink?") is as relevant as the better of the query and the query in the
memory's words (:attr:`EntityLeg.rewrites`: "Where does my cat drink?"); a memory that names
another person or pet and none the query names (:meth:`EntityLeg.elsewhere`: "My friend Michelle
grows orchids" for "What does Michael grow?") ranks :data:`ELSEWHERE_RELEVANCE` lower.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from memory_core.capabilities import EntityIndex, supports
from memory_core.domain.entities import Entity, known_names, matching
from memory_core.domain.records import Scope
from memory_core.domain.search import SearchHit
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ValidationError
from memory_core.language.entities import Mention, may_name, mentions
from memory_core.language.entity_words import relation_words
from memory_core.ports import MemoryStore

__all__ = [
    "ELSEWHERE_RELEVANCE",
    "ENTITY_CANDIDATES",
    "ENTITY_RELEVANCE",
    "ENTITY_WEIGHT",
    "MAX_REWRITES",
    "EntityLeg",
    "asked_entities",
    "says_any",
    "surface_words",
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
#: How much lower a memory that names another person or pet, and none the query names, ranks.
ELSEWHERE_RELEVANCE = 0.1
#: Most rewordings of the query (each one more query embedding) a search weighs.
MAX_REWRITES = 2


@dataclass(frozen=True, slots=True)
class EntityLeg:
    """What the entity leg found for a query.

    Attributes:
        asked: What the query names (read with the scope's names).
        entities: The entities of the scope it may mean.
        memories: Every memory of those entities.
        credited: The memories of those entities that name them in other words than the query.
        rewrites: For each of those, the query in the memory's words ("Where does Pepper drink?"
            → "Where does my cat drink?" for "My cat only drinks from the tap").
        names: The names the scope knows.
    """

    asked: tuple[Mention, ...] = ()
    entities: tuple[Entity, ...] = ()
    memories: frozenset[str] = frozenset()
    credited: frozenset[str] = frozenset()
    rewrites: Mapping[str, str] = field(default_factory=dict)
    names: tuple[str, ...] = ()

    def elsewhere(self, hits: Sequence[SearchHit]) -> frozenset[str]:
        """The hits that name another person or pet than the query's and none of those it names
        (by the scope's names: "My friend Michelle grows orchids" for "What does Michael grow?")."""
        if not self.entities:
            return frozenset()
        keys = {k for e in self.entities for k in e.keys}
        others: set[str] = set()
        for hit in hits:
            if hit.record.id in self.memories:
                continue
            said = [m for m in mentions(hit.record.memory, self.names) if m.kind in ("person", "pet") and m.name]
            if said and not any(m.key in keys for m in said):
                others.add(hit.record.id)
        return frozenset(others)

    def trailing(self, hits: Sequence[SearchHit]) -> dict[str, str]:
        """The rewordings of the query worth weighing: those of the memories of :attr:`rewrites` that
        are less relevant than the best hit, by memory id (at most :data:`MAX_REWRITES` texts)."""
        best = max((h.relevance for h in hits if h.relevance is not None), default=None)
        if best is None or not self.rewrites:
            return {}
        behind = [h.record.id for h in hits if h.record.id in self.rewrites and h.relevance is not None and h.relevance < best]
        texts = list(dict.fromkeys(self.rewrites[i] for i in behind))[:MAX_REWRITES]
        return {i: self.rewrites[i] for i in behind if self.rewrites[i] in texts}


def asked_entities(query: str, names: Sequence[str] = ()) -> list[Mention]:
    """What ``query`` names that the entity index may know (people, pets, places, organisations),
    ``names`` (the scope's) read as names wherever they stand."""
    return mentions(query, names) if query.strip() else []


async def _asked(store: MemoryStore, scope: Scope, query: str) -> tuple[EntityLeg, list[str]]:
    """What the query names, the entities of the scope it may mean, and the ids of their memories
    (nothing when the store keeps no entity index, or the query can name nothing)."""
    if not query.strip() or not supports(store, EntityIndex) or not (mentions(query) or may_name(query)):
        return EntityLeg(), []
    index = cast(EntityIndex, store)
    known = await index.entities(scope)
    if not known:
        return EntityLeg(), []
    names = tuple(known_names(known))
    asked = asked_entities(query, names)
    meant = list({e.id: e for m in asked for e in matching(m, known)}.values())
    if not meant:
        return EntityLeg(tuple(asked), names=names), []
    found = await index.memories_of(scope, [e.id for e in meant])
    ids = list(dict.fromkeys(memory_id for e in meant for memory_id in found.get(e.id, [])))
    return EntityLeg(tuple(asked), tuple(meant), frozenset(ids), names=names), ids


async def with_entity_leg(
    store: MemoryStore, request: SearchRequest, hits: Sequence[SearchHit], *, ranked: bool = True
) -> tuple[list[SearchHit], EntityLeg]:
    """``hits`` fused with the entity leg: the memories of the entities the query names, ranked by a
    search narrowed to them (with the request's options), each that names them in other words than
    the query adding ``ENTITY_WEIGHT × best × 60 / (60 + rank)`` to its score (``best``: the best
    score of ``hits``; a memory the other legs missed joins with that alone), in score order; and
    what the leg found (:class:`EntityLeg`, for :func:`with_entity_boost` and the relevance). A
    search that is not ranked (sorted by a field, or match-all) has none."""
    leg, ids = await _asked(store, request.scope, request.query) if ranked else (EntityLeg(), [])
    if not ids:
        return list(hits), leg
    words = surface_words(leg.asked)
    narrowed: dict[str, Any] = {"id": {"in": ids[:ENTITY_CANDIDATES]}}
    if request.options.filters:
        narrowed = {"AND": [request.options.filters, narrowed]}
    options = request.options.model_copy(update={"filters": narrowed, "top": min(len(ids), ENTITY_CANDIDATES)})
    try:
        result = await store.search(replace(request, options=options))
    except ValidationError:  # the caller's filters leave no room for one more condition: no entity leg
        return list(hits), replace(leg, credited=frozenset(ids))
    rank = {h.record.id: at for at, h in enumerate(result.hits) if not says_any(h.record.memory, words)}
    rewrites = _rewrites(request.query, leg, [h for h in result.hits if h.record.id in rank])
    return _fused(hits, result.hits, rank), replace(leg, credited=frozenset(rank), rewrites=rewrites)


def _fused(hits: Sequence[SearchHit], found: Sequence[SearchHit], rank: Mapping[str, int]) -> list[SearchHit]:
    """``hits`` and the entity leg's ``found``, each credited one (``rank``: its rank in the leg)
    with what the leg adds, in score order."""
    best = max((h.score for h in hits), default=0.0) or max((h.score for h in found), default=1.0)
    fused = [_with_leg(h, best, rank[h.record.id]) if h.record.id in rank else h for h in hits]
    have = {h.record.id for h in hits}
    fused += [
        _with_leg(h.model_copy(update={"score": 0.0}), best, rank.get(h.record.id))
        for h in found
        if h.record.id not in have
    ]
    return sorted(fused, key=lambda h: -h.score)


def _rewrites(query: str, leg: EntityLeg, credited: Sequence[SearchHit]) -> dict[str, str]:
    """The query in the words of each credited memory: the span of what it asks replaced by the name
    or the relation word the memory uses for the entity (at most :data:`MAX_REWRITES` texts)."""
    found: dict[str, str] = {}
    texts: set[str] = set()
    for hit in credited:
        text = hit.record.memory
        for mention in leg.asked:
            if mention.end <= mention.start:
                continue
            surface = next((s for e in matching(mention, leg.entities) if (s := _surface(e, text))), None)
            if surface is None:
                continue
            rewritten = query[: mention.start] + surface + query[mention.end :]
            if rewritten not in texts and len(texts) >= MAX_REWRITES:
                continue
            texts.add(rewritten)
            found[hit.record.id] = rewritten
            break
    return found


def _surface(entity: Entity, text: str) -> str | None:
    """How ``text`` names ``entity``: by one of its names, else by a word of its relation ("my cat"
    in English, 夫 in Japanese)."""
    for name in sorted((n for n in (entity.name, *entity.aliases) if n), key=len, reverse=True):
        if says_any(text, [name]):
            return name
    for word in sorted(relation_words(entity.relation, last_step=True), key=len, reverse=True):
        if says_any(text, [word]):
            return f"my {word}" if word.isascii() else word
    return None


def surface_words(asked: Sequence[Mention]) -> tuple[str, ...]:
    """The words the query names its entities by: their names and every word of their relations
    (every step of a relation path)."""
    words = [m.name for m in asked if m.name]
    words += [w for m in asked for w in relation_words(m.relation)]
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
