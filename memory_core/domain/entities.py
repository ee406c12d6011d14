"""Entities: the people, pets, places and organisations of a scope, and the rules by which the mentions
of a text become them (pure; the stores keep them, :mod:`memory_core.language.entities` reads them).

Merge rules (:func:`resolve`), per scope and kind:

1. A mention with a name is the entity that has that name or alias (names compared as
   :func:`~memory_core.language.entities.name_key` compares them: "Sara" and "Sarah" are two).
2. Else, a mention with a name and a relation is the entity of that relation that has no name yet
   ("my sister", then "my sister Ana": one person, now named Ana), and never one with another name.
3. A relation alone is the entity of that relation last mentioned ("my sister", 「姉」).
4. Anything else is a new entity.

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

__all__ = [
    "Entity",
    "entity_id",
    "matching",
    "resolve",
]


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


def matching(mention: Mention, known: Iterable[Entity]) -> list[Entity]:
    """The entities ``mention`` may mean (for a search: nothing is created): by name (any kind when the
    mention guessed the kind), else every entity of its relation, newest first."""
    candidates = list(known)
    key = mention.key
    if key is not None:
        named = [e for e in candidates if e.named(key)]
        if named:
            return named
        if mention.relation is None:
            return []
    if mention.relation is None:
        return []
    related = [e for e in candidates if e.relation == mention.relation and (key is None or e.name is None)]
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
    named: list[str] = []
    for mention in mentions:
        entity = _resolved(scope, mention, list(entities.values()), at)
        entities[entity.id] = changed[entity.id] = entity
        if entity.id not in named:
            named.append(entity.id)
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
