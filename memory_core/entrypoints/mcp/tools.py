"""The MCP tools' use cases over one memory service and one fixed scope (no SDK here)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_core.domain.chat import turn_messages
from memory_core.domain.messages import MessageRole, TurnMessage
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions
from memory_core.domain.validation import parse_model, validate_memory_id
from memory_core.entrypoints.mcp.models import (
    MAX_LIST,
    MAX_TOP,
    ChatMessage,
    DecisionItem,
    EntitiesOutput,
    EntityItem,
    ForgetEntityOutput,
    ForgetOutput,
    ListOutput,
    MemoryItem,
    RememberOutput,
    SearchOutput,
)
from memory_core.entrypoints.mcp.transcript import chunk_id, chunks
from memory_core.errors import MemoryCoreError, ValidationError
from memory_core.language.sanitize import sanitize_memory_text

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = ["MemoryTools"]


class MemoryTools:
    """The tools over one :class:`~memory_core.service.MemoryService` and one fixed scope.

    Writes (``remember``, ``forget``, ``forget_entity``, and a search that counts as a recall) run one
    at a time, so
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
        """Ingest a statement (as the user's message) or a conversation now; a long conversation is
        recorded as several turns (:func:`~memory_core.entrypoints.mcp.transcript.chunks`).

        Each turn's id comes from its words (:func:`~memory_core.entrypoints.mcp.transcript.chunk_id`),
        so the same call again records nothing new, and a call that failed part way can be sent again
        to record the rest.

        Raises:
            ValidationError: Neither or both were given, the text is blank, the conversation has no
                user message, or it is larger than one call takes.
        """
        turns = chunks(_said(text, messages))
        statuses: list[str] = []
        turn_ids: list[str] = []
        decisions: list[DecisionItem] = []
        extraction = ""
        async with self._writes:
            for number, said in enumerate(turns):
                turn = {
                    "turn_id": chunk_id(self.scope, said),
                    "user_id": self.scope.user_id,
                    "agent_id": self.scope.agent_id,
                    "session_id": self.session_id,
                    "occurred_at": self.service.now(),
                    "messages": [m.model_dump(exclude_none=True) for m in said],
                }
                try:
                    result = await self.service.ingest(turn)
                except MemoryCoreError as exc:
                    if number == 0:
                        raise
                    raise _partly(exc, number, len(turns)) from exc
                statuses.append(result.status)
                turn_ids.append(result.turn_id)
                extraction = extraction or result.extraction_path
                decisions += [DecisionItem.of(step) for step in result.steps]
        return RememberOutput(
            status="duplicate" if all(s == "duplicate" for s in statuses) else "ingested",
            turn_id=turn_ids[0],
            turn_ids=turn_ids,
            extraction=extraction,
            decisions=decisions,
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

    async def list_entities(self) -> EntitiesOutput:
        """The people, pets, places and organisations the scope's memories name, by kind then name.

        Raises:
            UnsupportedError: The store keeps no entity index.
        """
        summaries = await self.service.entities(self.scope)
        return EntitiesOutput(entities=[EntityItem.of(s.entity, s.memory_count) for s in summaries])

    async def forget_entity(self, entity_id: str) -> ForgetEntityOutput:
        """Forget one entity of the scope and every memory that names it (each soft-deleted as
        ``forget`` deletes one, recorded in its history).

        Args:
            entity_id: Its id from ``list_entities``, or the start of exactly one.

        Raises:
            ValidationError: The id is malformed or starts several entities' ids.
            NotFoundError: The scope has no such entity (a forgotten entity is gone).
            UnsupportedError: The store keeps no entity index.
        """
        async with self._writes:
            entity_id = await self.service.resolve_entity_id(self.scope, entity_id.strip())
            done = await self.service.forget_entity(self.scope, entity_id)
        return ForgetEntityOutput(
            entity=EntityItem.of(done.entity, len(done.forgotten)),
            forgotten=[r.id for r in done.forgotten],
            entity_removed=done.entity_removed,
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


def _partly(exc: MemoryCoreError, recorded: int, parts: int) -> MemoryCoreError:
    """``exc`` saying how much of the conversation was recorded before it, and how to go on."""
    note = (
        f" (after {recorded} of {parts} parts were recorded: send the same messages again to record "
        "the rest; the recorded parts are not repeated)"
    )
    if isinstance(exc, ValidationError):
        return ValidationError(exc.field, exc.message + note)
    return MemoryCoreError(f"{exc}{note}")


def _said(text: str | None, messages: Sequence[ChatMessage] | None) -> list[TurnMessage]:
    """The messages of a ``remember`` call: the statement (any text, JSON-looking or not) as the
    user's message, or the conversation read as chat APIs write it, without its messages that have
    no text.

    Raises:
        ValidationError: Neither or both were given, the text is blank, or the conversation is empty
            or has no user message.
    """
    if text is None and messages is None:
        raise ValidationError("text", "give text (a statement) or messages (a conversation)")
    if text is not None and messages is not None:
        raise ValidationError("text", "give either text or messages, not both")
    if text is not None:
        if not text.strip():
            raise ValidationError("text", "is empty; pass what the user said")
        return [_message(text)]
    assert messages is not None
    if not messages:
        raise ValidationError("messages", "is empty; pass at least one message")
    said = turn_messages([m.model_dump(exclude_none=True) for m in messages])
    if not any(m.role is MessageRole.USER and m.text.strip() for m in said):
        raise ValidationError("messages", "needs at least one non-empty message with role 'user'")
    return [m for m in said if m.text.strip()]


def _message(text: str) -> TurnMessage:
    """The user's statement as a message (its field named ``text`` in an error)."""
    try:
        return parse_model(TurnMessage, {"role": "user", "text": text})
    except ValidationError as exc:
        raise ValidationError("text", exc.message) from None
