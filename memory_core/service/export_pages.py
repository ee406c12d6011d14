"""A user's export one page at a time: each agent's memories by id, then that agent's decision history,
agent after agent, resumed from an opaque cursor.

A page holds at most ``limit`` items (memories and history entries together). Memories are read by id
after the cursor's id (a keyset page of :meth:`~memory_core.ports.MemoryStore.scan`), history entries
after the cursor's count of them, oldest first; history is only appended to, so a write between two
pages neither repeats nor skips anything that was there when the export began. A memory added
meanwhile is in the export when its id comes after the cursor; agents are visited in id order.
"""

from __future__ import annotations

import base64
import binascii
import bisect
from dataclasses import dataclass, field
from typing import cast

from memory_core.capabilities import HistoryPager, supports
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.validation import validate_memory_id, validate_scope_id
from memory_core.errors import ValidationError
from memory_core.ports import HistoryStore, MemoryStore

__all__ = ["ExportPage", "ExportPosition", "export_page"]

_SEPARATOR = "\x1f"
_MEMORIES, _HISTORY = "m", "h"
_BAD_CURSOR = "is not a cursor of this export (pass the `next_cursor` of the page before, unchanged)"


@dataclass(frozen=True, slots=True)
class ExportPosition:
    """Where a paged export resumes: an agent, and after which memory id or how many history entries."""

    agent_id: str
    phase: str = _MEMORIES
    after: str | None = None
    offset: int = 0

    def encode(self) -> str:
        """The opaque cursor of this position (URL-safe base64, no padding)."""
        value = (self.after or "") if self.phase == _MEMORIES else str(self.offset)
        raw = _SEPARATOR.join((self.agent_id, self.phase, value)).encode("utf-8")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> ExportPosition:
        """The position a cursor names.

        Raises:
            ValidationError: ``cursor`` was not made by :meth:`encode` (names ``cursor``).
        """
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
            agent, phase, value = raw.split(_SEPARATOR)
            agent = validate_scope_id(agent, "agent_id")
            if phase == _MEMORIES:
                return cls(agent, phase, validate_memory_id(value, "cursor") if value else None)
            if phase == _HISTORY and value.isascii() and value.isdigit():
                return cls(agent, phase, offset=int(value))
        except (binascii.Error, UnicodeDecodeError, ValueError, ValidationError):
            pass
        raise ValidationError("cursor", _BAD_CURSOR)


@dataclass(slots=True)
class ExportPage:
    """One page of an export.

    Attributes:
        records: Memories, in agent order then id order.
        history: Decisions recorded about the scopes, oldest first per agent.
        next_cursor: Where the next page starts (``None``: this is the last page).
    """

    records: list[MemoryRecord] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    next_cursor: str | None = None


async def export_page(
    store: MemoryStore,
    history: HistoryStore | None,
    user_id: str,
    agent_id: str | None,
    *,
    cursor: str | None,
    limit: int,
    include_vectors: bool = False,
) -> ExportPage:
    """One page of a user's export (one agent's, or every agent's).

    Args:
        store: The memories.
        history: The decision history (``None``: none is exported).
        user_id: Whose export.
        agent_id: Only this agent (``None``: every agent of the user, in id order).
        cursor: The ``next_cursor`` of the page before (``None``: the first page).
        limit: At most this many memories and history entries together.
        include_vectors: The memories carry their embeddings (left out by default: an import
            computes missing ones).

    Raises:
        ValidationError: An invalid id, or a cursor this export did not issue (or one of another agent).
    """
    user_id = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        agents = [validate_scope_id(agent_id, "agent_id")]
    else:
        agents = sorted(await store.agents(user_id))
    position = ExportPosition.decode(cursor) if cursor is not None else None
    if position is not None and agent_id is not None and position.agent_id != agent_id:
        raise ValidationError("cursor", f"belongs to the export of another agent than {agent_id!r}")
    index = 0 if position is None else bisect.bisect_left(agents, position.agent_id)
    if position is None or index >= len(agents) or agents[index] != position.agent_id:
        position = ExportPosition(agents[index]) if index < len(agents) else None
    page = ExportPage()
    room = limit
    while position is not None and room > 0:
        scope = Scope.of(user_id, position.agent_id)
        if position.phase == _MEMORIES:
            request = PageRequest(after=position.after, limit=room, with_embedding=include_vectors)
            scanned = await store.scan(scope, request)
            page.records.extend(scanned.records)
            room -= len(scanned.records)
            if scanned.next_cursor is not None:
                position = ExportPosition(position.agent_id, _MEMORIES, scanned.next_cursor)
                continue
            position = ExportPosition(position.agent_id, _HISTORY)
            continue
        asked = room
        entries = await _history_page(history, scope, position.offset, asked)
        page.history.extend(entries)
        room -= len(entries)
        if len(entries) == asked:  # (a full slice: more may follow)
            position = ExportPosition(position.agent_id, _HISTORY, offset=position.offset + len(entries))
            continue
        index = bisect.bisect_right(agents, position.agent_id)
        position = ExportPosition(agents[index]) if index < len(agents) else None
    page.next_cursor = None if position is None else position.encode()
    return page


async def _history_page(history: HistoryStore | None, scope: Scope, offset: int, limit: int) -> list[HistoryEntry]:
    """At most ``limit`` history entries of ``scope`` after the first ``offset`` (a history that cannot
    read a slice is read whole and sliced)."""
    if history is None:
        return []
    if supports(history, HistoryPager):
        return await cast(HistoryPager, history).scope_page(scope, offset, limit)
    return (await history.for_scope(scope))[offset : offset + limit]
