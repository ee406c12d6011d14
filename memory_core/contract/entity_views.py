"""Wire views of entities (the people, pets, places and organisations a scope's memories name), and
their builders from the entity use cases' results and back (the remote client reads them)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from memory_core.contract.views import MemoryView, memory_record, memory_view
from memory_core.domain.entities import Entity
from memory_core.service.entities import EntityForgetting, EntityMemories, EntitySummary

__all__ = [
    "EntityDetail",
    "EntityForgetResponse",
    "EntityListResponse",
    "EntityView",
    "entity_detail",
    "entity_forget_response",
    "entity_list_response",
    "entity_of",
    "entity_view",
    "forgetting_of",
    "memories_of",
]


class EntityView(BaseModel):
    """An entity as the API shows it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    user_id: str
    agent_id: str
    kind: str = Field(description="`person`, `pet`, `place` or `org`")
    name: str | None = Field(description="The name as first written (`null` while only the relation is known)")
    relation: str | None = Field(description="The relation to the user (`sister`, `dog`...), one key in every language, or a path through another entity (`sister.spouse`)")
    aliases: list[str]
    first_mentioned: datetime
    last_mentioned: datetime
    memory_count: int = Field(description="The memories that name it (any status but deleted)")


class EntityListResponse(BaseModel):
    """``GET /api/entities``: the entities of a user and agent, by kind then name."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str
    entities: list[EntityView]


class EntityDetail(EntityView):
    """``GET /api/entities/{entity_id}``: the entity and its memories, newest first."""

    memories: list[MemoryView]


class EntityForgetResponse(BaseModel):
    """``DELETE /api/entities/{entity_id}``: the entity as it was, and its memories, now ``deleted``."""

    model_config = ConfigDict(extra="forbid")

    entity: EntityView
    forgotten: list[MemoryView] = Field(description="Its memories, each soft-deleted and recorded in its history")
    entity_removed: bool = Field(
        description="The entity is gone from the index with its last memory (`false` only when a memory naming "
        "it was written meanwhile)"
    )


def entity_view(entity: Entity, memory_count: int) -> EntityView:
    return EntityView(
        id=entity.id,
        user_id=entity.user_id,
        agent_id=entity.agent_id,
        kind=entity.kind,
        name=entity.name,
        relation=entity.relation,
        aliases=list(entity.aliases),
        first_mentioned=entity.first_mentioned,
        last_mentioned=entity.last_mentioned,
        memory_count=memory_count,
    )


def entity_list_response(user_id: str, agent_id: str, found: list[EntitySummary]) -> EntityListResponse:
    return EntityListResponse(
        user_id=user_id, agent_id=agent_id, entities=[entity_view(s.entity, s.memory_count) for s in found]
    )


def entity_detail(found: EntityMemories) -> EntityDetail:
    view = entity_view(found.entity, len(found.memories))
    return EntityDetail(**view.model_dump(), memories=[memory_view(r) for r in found.memories])


def entity_forget_response(report: EntityForgetting) -> EntityForgetResponse:
    return EntityForgetResponse(
        entity=entity_view(report.entity, len(report.forgotten)),
        forgotten=[memory_view(r) for r in report.forgotten],
        entity_removed=report.entity_removed,
    )


def entity_of(view: EntityView) -> Entity:
    """The :class:`Entity` a view shows (the inverse of :func:`entity_view`).

    Raises:
        ValueError: An unknown kind.
    """
    return Entity(
        id=view.id,
        user_id=view.user_id,
        agent_id=view.agent_id,
        kind=view.kind,
        name=view.name,
        relation=view.relation,
        aliases=tuple(view.aliases),
        first_mentioned=view.first_mentioned,
        last_mentioned=view.last_mentioned,
    )


def memories_of(detail: EntityDetail) -> EntityMemories:
    """The :class:`EntityMemories` an entity detail shows (the inverse of :func:`entity_detail`)."""
    return EntityMemories(entity_of(detail), [memory_record(m) for m in detail.memories])


def forgetting_of(response: EntityForgetResponse) -> EntityForgetting:
    """The :class:`EntityForgetting` a forget response shows (the inverse of :func:`entity_forget_response`)."""
    return EntityForgetting(
        entity_of(response.entity), [memory_record(m) for m in response.forgotten], response.entity_removed
    )
