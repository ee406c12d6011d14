"""The Python API's calls on entities (the people, pets, places and organisations a user's memories
name): :class:`EntityCalls`, which :class:`~memory_core.entrypoints.python_api.async_memory.AsyncMemory`
inherits."""

from __future__ import annotations

from dataclasses import replace

from memory_core.client.base import MemoryBackend
from memory_core.client.results import bare
from memory_core.domain.records import DEFAULT_AGENT_ID, Scope
from memory_core.domain.validation import validate_entity_id
from memory_core.entrypoints.python_api.arguments import require_scope
from memory_core.service.entities import EntityForgetting, EntityMemories, EntitySummary

__all__ = ["EntityCalls", "EntityForgetting", "EntityMemories", "EntitySummary"]


class EntityCalls:
    """Who and what a user's memories name, each with its memories, and forgetting one."""

    def _open(self) -> MemoryBackend:
        raise NotImplementedError  # pragma: no cover - AsyncMemory's

    async def entities(self, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID) -> list[EntitySummary]:
        """The people, pets, places and organisations the memories of a user and agent name, by kind then
        name, each with its number of memories (``summary.entity.name``, ``.relation``, ``.aliases``,
        ``.first_mentioned``, ``.last_mentioned``; ``summary.memory_count``).

        Raises:
            UnsupportedError: The store keeps no entity index.
            ValidationError: A bad user or agent id.
        """
        backend = self._open()
        return await backend.entities(Scope.of(user_id, agent_id))

    async def entity(
        self, entity_id: str, *, user_id: str | None = None, agent_id: str = DEFAULT_AGENT_ID
    ) -> EntityMemories:
        """One entity (its ``id``, as :meth:`entities` gives it) and the memories that name it, newest
        first, without embeddings.

        Raises:
            NotFoundError: No such entity for this user and agent.
            ValidationError: A bad id, or no ``user_id`` (the field is named).
        """
        backend = self._open()
        scope = require_scope(user_id, agent_id, "entity")
        found = await backend.entity(scope, validate_entity_id(entity_id, "entity_id"))
        return replace(found, memories=[bare(r) for r in found.memories])

    async def forget_entity(
        self, entity_id: str, *, user_id: str | None = None, agent_id: str = DEFAULT_AGENT_ID
    ) -> EntityForgetting:
        """Forget everything about one entity: every memory that names it is soft-deleted, as
        :meth:`delete` deletes one (recorded in its history), and the entity goes with the last of them
        ("forget everything about Alex" removes Alex's memories and Alex). Remote, through
        ``DELETE /api/entities/{entity_id}``.

        Returns:
            The entity as it was, its memories (now ``deleted``, without embeddings) and whether the
            entity is gone.

        Raises:
            NotFoundError: No such entity for this user and agent.
            ValidationError: A bad id, or no ``user_id`` (the field is named).
        """
        backend = self._open()
        scope = require_scope(user_id, agent_id, "forget_entity")
        return await backend.forget_entity(scope, validate_entity_id(entity_id, "entity_id"))
