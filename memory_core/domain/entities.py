"""Entities: the people, pets, places and organisations of a scope, and the rules by which the mentions
of a text become them (pure; the stores keep them, :mod:`memory_core.language.entities` reads them).

Merge rules (:func:`resolve`), per scope and kind:

1. A mention with a name is the entity that has that name or alias (names compared as
   :func:`~memory_core.language.entities.name_key` compares them: "Sara" and "Sarah" are two).
2. Else, a mention with a name and a relation is the entity of that relation that has no name yet
   ("my sister", then "my sister Ana": one person, now named Ana), and never one with another name.
3. A relation alone is the entity of that relation last mentioned ("my sister", 「姉」).
4. Anything else is a new entity.

A mention whose relation is relative to another entity (:attr:`~memory_core.language.entities.Mention.of`:
"Ana is married to Tom") takes the relation path through that entity (Ana is the sister: Tom is
``sister.spouse``), or no relation when that entity's relation to the user is unknown. Relations
and paths compare as :func:`~memory_core.language.entity_words.same_relation` compares them (a
``sister.husband`` asked finds the ``sister.spouse`` known).

An entity's id comes from its scope, kind and first key (its name, else its relation), so a replayed
turn finds the same ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from memory_core.domain.records import Scope
from memory_core.language.entities import KINDS, Mention, name_key
from memory_core.language.entity_words import PATH_SEPARATOR, path_steps, same_relation

__all__ = [
    "MAX_PATH_STEPS",
    "Entity",
    "entity_id",
    "known_names",
    "matching",
    "resolve",
    "with_path",
]

#: The most steps a relation path takes (``sister.spouse.son``): a longer one is not kept.
MAX_PATH_STEPS = 3


@dataclass(frozen=True, slots=True)
class Entity:
    """One person, pet, place or organisation a scope's memories name.

    Attributes:
        id: Its id (:func:`entity_id`).
        user_id: Its scope's user.
        agent_id: Its scope's agent.
        kind: ``person``, ``pet``, ``place`` or ``org``.
        name: Its name as first written, or ``None`` while only its relation is known.
        aliases: Other names it goes by (the same entity's other spellings the text gave).
        relation: Its relation to the user (``sister``, ``dog``...), or ``None``.
        first_mentioned: When a memory first named it.
        last_mentioned: When a memory last named it.
    """

    id: str
    user_id: str
    agent_id: str
    kind: str
    name: str | None
    relation: str | None
    first_mentioned: datetime
    last_mentioned: datetime
    aliases: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"entity kind must be one of {', '.join(KINDS)}, not {self.kind!r}")

    @property
    def scope(self) -> Scope:
        return Scope(user_id=self.user_id, agent_id=self.agent_id)

    @property
    def keys(self) -> frozenset[str]:
        """Its names as compared (name and aliases)."""
        return frozenset(name_key(n) for n in (self.name, *self.aliases) if n)

    def named(self, key: str) -> bool:
        """Whether it has the name (or alias) ``key``."""
        return key in self.keys


def entity_id(scope: Scope, kind: str, key: str) -> str:
    """The id of the entity of ``scope`` first known by ``key`` (a name key, or ``rel:`` and a relation)."""
    digest = hashlib.sha256(f"{scope.user_id}\x1f{scope.agent_id}\x1f{kind}\x1f{key}".encode()).hexdigest()
    return f"ent_{digest[:24]}"


def known_names(known: Iterable[Entity]) -> list[str]:
    """The names and aliases of ``known`` (what :func:`~memory_core.language.entities.mentions`
    reads as names wherever they stand in a later text of the scope)."""
    return list(dict.fromkeys(n for e in known for n in (e.name, *e.aliases) if n))


def with_path(mention: Mention, known: Iterable[Entity]) -> Mention:
    """``mention`` with its relation to the user: a relation relative to another entity (``of``)
    becomes the path through that entity's relation (the entity it means that has one, newest
    first), else no relation; a mention without ``of`` as it is."""
    if mention.of is None:
        return mention
    holders = [e for e in matching(mention.of, known) if e.relation]
    path = None
    if holders and mention.relation:
        path = f"{holders[0].relation}{PATH_SEPARATOR}{mention.relation}"
        if len(path_steps(path)) > MAX_PATH_STEPS:
            path = None
    return replace(mention, relation=path, of=None)


def matching(mention: Mention, known: Iterable[Entity]) -> list[Entity]:
    """The entities ``mention`` may mean (for a search: nothing is created): by name (any kind when the
    mention guessed the kind), else every entity of its relation (or path), newest first."""
    candidates = list(known)
    mention = with_path(mention, candidates)
    key = mention.key
    if key is not None:
        named = [e for e in candidates if e.named(key)]
        if named:
            return named
        if mention.relation is None:
            return []
    if mention.relation is None:
        return []
    related = [e for e in candidates if same_relation(e.relation, mention.relation) and (key is None or e.name is None)]
    return sorted(related, key=lambda e: e.last_mentioned, reverse=True)


def resolve(
    scope: Scope, mentions: Sequence[Mention], known: Sequence[Entity], at: datetime
) -> tuple[list[Entity], list[str]]:
    """The entities a text's ``mentions`` name, by the merge rules (see the module).

    Args:
        scope: The text's scope.
        mentions: What the text names.
        known: The scope's entities so far.
        at: When the text was said (their last mention; the first of a new one).

    Returns:
        The entities created or changed (to be saved), and the ids of every entity the text names,
        in the order of their mentions.
    """
    entities = {e.id: e for e in known}
    changed: dict[str, Entity] = {}
    at_start: list[tuple[int, str]] = []
    # A relation of another entity is resolved once that entity is ("Ravi is Priya's son").
    for mention in sorted(mentions, key=lambda m: m.of is not None):
        entity = _resolved(scope, with_path(mention, entities.values()), list(entities.values()), at)
        entities[entity.id] = changed[entity.id] = entity
        at_start.append((mention.start, entity.id))
    named = list(dict.fromkeys(entity_id for _, entity_id in sorted(at_start, key=lambda p: p[0])))
    return list(changed.values()), named


def _resolved(scope: Scope, mention: Mention, known: list[Entity], at: datetime) -> Entity:
    key = mention.key
    same_kind = [e for e in known if e.kind == mention.kind or (mention.relation is None and key is not None)]
    found = matching(mention, same_kind)
    if found:
        entity = found[0]
        name = entity.name if entity.name is not None else mention.name
        relation = entity.relation or mention.relation
        return replace(
            entity,
            name=name,
            relation=relation,
            first_mentioned=min(entity.first_mentioned, at),
            last_mentioned=max(entity.last_mentioned, at),
        )
    first = key if key is not None else f"rel:{mention.relation}"
    return Entity(
        id=entity_id(scope, mention.kind, first),
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        kind=mention.kind,
        name=mention.name,
        relation=mention.relation,
        first_mentioned=at,
        last_mentioned=at,
    )
