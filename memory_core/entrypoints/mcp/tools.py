"""The MCP tools' use cases over one memory service and one fixed scope (no SDK here)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions
from memory_core.domain.validation import validate_memory_id
from memory_core.entrypoints.mcp.models import (
    MAX_LIST,
    MAX_MESSAGES,
    MAX_TOP,
    ChatMessage,
    DecisionItem,
    ForgetOutput,
    ListOutput,
    MemoryItem,
    RememberOutput,
    SearchOutput,
)
from memory_core.errors import ValidationError
from memory_core.language.sanitize import sanitize_memory_text

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = ["MemoryTools"]


class MemoryTools:
    """The four tools over one :class:`~memory_core.service.MemoryService` and one fixed scope.

    Writes (``remember``, ``forget``, and a search that counts as a recall) run one at a time, so
    two calls at once never interleave their reads and writes of one scope.

    Args:
        service: The memory service (closed by whoever built it).
        scope: The one ``(user_id, agent_id)`` served.
        recall: Whether a search counts as a recall (reinforces the memories it returns); off by
            default, so searching is read-only.
    """

    def __init__(self, service: MemoryService, scope: Scope, *, recall: bool = False) -> None:
        self.service = service
        self.scope = Scope.of(scope.user_id, scope.agent_id)
        self.recall = recall
        self.session_id = f"mcp-{uuid.uuid4().hex[:16]}"
        self._writes = asyncio.Lock()

    async def search(self, query: str, top: int = 5, **options: Any) -> SearchOutput:
        """Ranked memories for ``query`` (hybrid search, important first, unless ``options`` say).

        Args:
            query: What to look for.
            top: How many memories at most.
            **options: Other :class:`~memory_core.domain.search.MemorySearchOptions` fields (``None``:
                the default).

        Raises:
            ValidationError: The query is blank, ``top`` is out of range, or an option is unknown or
                out of range.
        """
        if not query.strip():
            raise ValidationError("query", "is empty; say what to look for (list_memories lists everything)")
        if not 1 <= top <= MAX_TOP:
            raise ValidationError("top", f"must be between 1 and {MAX_TOP}")
        unknown = sorted(set(options) - set(MemorySearchOptions.model_fields))
        if unknown:
            raise ValidationError(unknown[0], "is not a search option")
        chosen = MemorySearchOptions.from_values({**options, "top": top})
        if self.recall:
            async with self._writes:
                result = await self.service.search(self.scope, query, chosen, recall=True)
        else:
            result = await self.service.search(self.scope, query, chosen, recall=False)
        return SearchOutput(
            memories=[MemoryItem.of(hit.record, hit.score, now=self.service.now()) for hit in result.hits],
            notes=[sanitize_memory_text(note) for note in result.notes],
        )

    async def remember(
        self, text: str | None = None, messages: Sequence[ChatMessage] | None = None
    ) -> RememberOutput:
        """Ingest a statement (as the user's message) or a short conversation now.

        Raises:
            ValidationError: Neither or both were given, the text is blank, or the conversation has
                no user message.
        """
        said = _said(text, messages)
        turn = {
            "turn_id": f"mcp-{uuid.uuid4().hex}",
            "user_id": self.scope.user_id,
            "agent_id": self.scope.agent_id,
            "session_id": self.session_id,
            "occurred_at": self.service.now(),
            "messages": said,
        }
        async with self._writes:
            result = await self.service.ingest(turn)
        return RememberOutput(
            status=result.status,
            turn_id=result.turn_id,
            extraction=result.extraction_path,
            decisions=[DecisionItem.of(step) for step in result.steps],
        )

    async def forget(self, memory_id: str) -> ForgetOutput:
        """Soft-delete one memory of the scope (recorded in its history).

        Raises:
            ValidationError: The id is malformed.
            NotFoundError: The scope has no memory with that id.
        """
        memory_id = validate_memory_id(memory_id.strip(), "memory_id")
        async with self._writes:
            before = await self.service.get(self.scope, memory_id)
            already = before.status is MemoryStatus.DELETED
            after = (
                before
                if already
                else await self.service.delete(
                    self.scope, memory_id, reason="forgotten on request (MCP forget)"
                )
            )
        return ForgetOutput(
            memory_id=memory_id,
            status=after.status.value,
            already_forgotten=already,
            memory=sanitize_memory_text(before.memory),
        )

    async def list_memories(
        self, status: str | None = None, limit: int = 20, cursor: str | None = None, include_superseded: bool = False
    ) -> ListOutput:
        """One page of the scope's memories by id (active and archived unless ``status`` says one; the
        current ones, or also those something said later replaced).

        Raises:
            ValidationError: ``status`` or ``limit`` is out of range.
        """
        if status not in (None, "active", "archived"):
            raise ValidationError("status", "must be active or archived (or left out for both)")
        if not 1 <= limit <= MAX_LIST:
            raise ValidationError("limit", f"must be between 1 and {MAX_LIST}")
        statuses = [MemoryStatus(status)] if status else [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]
        page = await self.service.list(
            self.scope, statuses=statuses, cursor=cursor or None, limit=limit, include_superseded=include_superseded
        )
        return ListOutput(memories=[MemoryItem.of(r, now=self.service.now()) for r in page.records], next_cursor=page.next_cursor)


def _said(text: str | None, messages: Sequence[ChatMessage] | None) -> list[dict[str, str]]:
    """The messages of a ``remember`` call: the statement as the user's message, or the conversation
    without its blank messages.

    Raises:
        ValidationError: Neither or both were given, the text is blank, or the conversation is empty,
            too long or has no user message.
    """
    if text is None and messages is None:
        raise ValidationError("text", "give text (a statement) or messages (a conversation)")
    if text is not None and messages is not None:
        raise ValidationError("text", "give either text or messages, not both")
    if text is not None:
        if not text.strip():
            raise ValidationError("text", "is empty; pass what the user said")
        return [{"role": "user", "text": text}]
    assert messages is not None
    return _conversation(messages)


def _conversation(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    if not messages:
        raise ValidationError("messages", "is empty; pass at least one message")
    if len(messages) > MAX_MESSAGES:
        raise ValidationError("messages", f"has {len(messages)} messages; the most is {MAX_MESSAGES}")
    if not any(m.role == "user" and m.content.strip() for m in messages):
        raise ValidationError("messages", "needs at least one non-empty message with role 'user'")
    return [{"role": m.role, "text": m.content} for m in messages if m.content.strip()]
