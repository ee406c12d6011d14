"""Reading memories as the inspector and the command line do: one memory by its id or the start of it,
the users with their counts, a user's messages still on a local queue."""

from __future__ import annotations

from typing import cast

from memory_core.capabilities import QueuedItem, QueuedLister, UserDirectory, supports
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.validation import validate_memory_id, validate_scope_id
from memory_core.errors import NotFoundError, UnsupportedError, ValidationError
from memory_core.ports import MemoryStore, StatusCounts

__all__ = [
    "PREFIX_CANDIDATES",
    "get_memory",
    "list_users",
    "memory_not_found",
    "queued_messages",
    "resolve_memory_id",
]

#: Memories an ambiguous id prefix names in its error, at most.
PREFIX_CANDIDATES = 10


async def resolve_memory_id(store: MemoryStore, scope: Scope, text: str) -> str:
    """The id of the memory of ``scope`` that ``text`` names: its whole id, or the start of exactly
    one id (as the command line prints them shortened).

    Raises:
        ValidationError: ``text`` is not an id, or starts the ids of several memories (names up to
            :data:`PREFIX_CANDIDATES` of them).
        NotFoundError: No memory of ``scope`` has that id or one starting with it.
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    text = validate_memory_id(text, "id")
    if await store.get(scope, text) is not None:
        return text
    # Ids are listed in order, so the ids starting with ``text`` come right after it.
    page = await store.scan(scope, PageRequest(after=text, limit=PREFIX_CANDIDATES + 1))
    matches = [r.id for r in page.records if r.id.startswith(text)]
    if not matches:
        raise NotFoundError(
            f"no memory has the id {text!r} or an id starting with it (user {scope.user_id!r}, "
            f"agent {scope.agent_id!r})"
        )
    if len(matches) > 1:
        shown = ", ".join(matches[:PREFIX_CANDIDATES])
        more = " and more" if len(matches) > PREFIX_CANDIDATES else ""
        raise ValidationError(
            "id", f"{text!r} starts the ids of several memories ({shown}{more}); give more of the id"
        )
    return matches[0]


def memory_not_found(memory_id: str) -> NotFoundError:
    """The error for a memory the scope does not hold."""
    return NotFoundError(f"memory {memory_id!r} not found for this user and agent")


async def get_memory(store: MemoryStore, scope: Scope, memory_id: str) -> MemoryRecord:
    """One memory of any status (with its embedding).

    Raises:
        NotFoundError: No such memory in ``scope``.
    """
    record = await store.get(Scope.of(scope.user_id, scope.agent_id), memory_id)
    if record is None:
        raise memory_not_found(memory_id)
    return record


async def list_users(store: MemoryStore, *, after: str | None, limit: int) -> tuple[list[StatusCounts], str | None]:
    """Users holding memories, by id after ``after``, with counts by status; and the next cursor.

    Raises:
        UnsupportedError: The store cannot list its users (Azure AI Search).
    """
    if not supports(store, UserDirectory):
        raise UnsupportedError(
            "this store cannot list its users (the Azure AI Search index does not facet user_id); "
            "open a user by id instead"
        )
    found = await cast(UserDirectory, store).count_users(after=after, limit=limit + 1)
    return found[:limit], found[limit - 1].id if len(found) > limit else None


async def queued_messages(queue: object, user_id: str, agent_id: str | None = None) -> list[QueuedItem]:
    """A user's messages still on a local queue, by ids and time (empty where the queue cannot list
    them, as Service Bus)."""
    if not supports(queue, QueuedLister):
        return []
    user_id = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        agent_id = validate_scope_id(agent_id, "agent_id")
    return await cast(QueuedLister, queue).queued_for(user_id, agent_id)
