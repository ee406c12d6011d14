"""The Python API: :class:`Memory` (synchronous) and :class:`AsyncMemory` (``async``), three lines to use.

::

    from memory_core import Memory

    m = Memory()                                               # .memory-core/memory.db, no keys
    m.add("I'm vegetarian.", user_id="alice")                  # the decisions: ADD "I'm vegetarian"
    m.search("what does alice eat?", user_id="alice").hits     # ranked memories

Where memories live:

- **Embedded** (the default): a SQLite file (``path``; default ``MEMORY_SQLITE_PATH``, else
  ``.memory-core/memory.db`` in the working directory, the command line's default), the local
  multilingual embedder, rules or the configured LLM for extraction. :meth:`AsyncMemory.add` extracts
  and consolidates the turn before it returns and gives back the decisions: no queue, no
  ``memory-core serve``.
- **Remote** (``url=``): a ``memory-core serve`` or the Azure Functions app, over its HTTP API, with a
  bearer token (``api_token``), a Functions key (``function_key``) or Microsoft Entra ID
  (``credential`` + ``api_scope``). :meth:`AsyncMemory.add` posts the turn and returns its queue status
  (the server's workers ingest it).
- **Azure settings**: keyword arguments are :class:`~memory_core.config.Settings` fields
  (``store="azure_search"``, ``azure_search_endpoint=...``), on top of the ``MEMORY_*`` environment,
  so the same object runs on Azure AI Search, ingesting in this process (which needs the Table
  history, ``history_table_endpoint``).

Every memory belongs to a ``user_id`` and an ``agent_id`` (``"default"`` unless given); both are
validated, and errors are :class:`~memory_core.errors.ValidationError` naming the field. The service is
built by :func:`memory_core.bootstrap.build_service`, the one composition root; nothing happens at
import time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import uuid
import weakref
from collections.abc import Awaitable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast
from urllib.parse import quote

from memory_core.bootstrap import build_service, existing_local_queue, load_settings
from memory_core.client.memory_client import TURNS_ROUTE, RemoteMemoryClient
from memory_core.config import Settings
from memory_core.domain.messages import (
    CandidateKind,
    HistoryEntry,
    MemoryEvent,
    MessageRole,
    Turn,
    TurnMessage,
)
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode, SearchResult
from memory_core.domain.validation import (
    parse_model,
    utcnow,
    validate_memory_id,
    validate_positive_int,
    validate_scope_id,
)
from memory_core.errors import ConfigurationError, PermanentError, ValidationError
from memory_core.service import COUNTERS, ForgettingChange, ForgettingReport, PurgeReport

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import IngestResult, MemoryService

__all__ = [
    "DEFAULT_AGENT_ID",
    "AddResult",
    "AddStatus",
    "AsyncMemory",
    "Memory",
    "MemoryDecision",
    "MemoryExport",
    "turn_messages",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The ``agent_id`` of memories added or searched without one.
DEFAULT_AGENT_ID = "default"
#: Records one page of :meth:`AsyncMemory.get_all` reads (the HTTP API's largest page).
_PAGE = 1000
#: Memories one forgetting call over HTTP reads (the HTTP API's largest).
_FORGET_PAGE = 10_000
#: Content part types that carry text (Chat Completions, Responses and Agent Framework spellings).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
#: Roles of other chat APIs, and the turn role they are kept as.
_ROLE_ALIASES = {"developer": MessageRole.SYSTEM}
#: Seconds :meth:`Memory.close` lets calls still running on other threads finish before it cancels
#: them (they then raise :class:`~memory_core.errors.PermanentError`).
_CLOSE_GRACE = 5.0
#: Remote-only options of :class:`AsyncMemory`.
_REMOTE_OPTIONS = ("api_token", "function_key", "credential", "api_scope")

#: What happened to the turn :meth:`AsyncMemory.add` handed over: ``ingested`` (extracted and
#: consolidated now), ``resumed`` (an earlier attempt with the same ``turn_id`` stopped midway and was
#: completed), ``duplicate`` (this ``turn_id`` was already ingested; the recorded decisions are
#: returned), ``purged`` (dated at or before the last purge of the user: dropped), or ``queued``
#: (remote: the server's workers will ingest it).
AddStatus = Literal["ingested", "resumed", "duplicate", "purged", "queued"]


# ------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryDecision:
    """What consolidation decided for one thing said in a turn.

    Attributes:
        event: ``ADD`` (a new memory), ``UPDATE`` (an existing memory changed: restated, refined,
            superseded or partly forgotten), ``DELETE`` (forgotten on request: soft-deleted) or
            ``NONE`` (already known: the memory was reinforced, or a forget request matched nothing).
        memory: The memory's text after the decision (before it, for ``DELETE``; what was said, when
            no memory is involved).
        memory_id: The memory decided about (``None`` when there is none).
        previous: The memory's text before the decision (``None`` for ``ADD``).
        kind: What extraction found: ``fact`` (a durable statement), ``episode`` (the user's own
            words of one message) or ``forget`` (a request to forget something).
        category: The candidate's category (``preference``, ``constraint``, ``episode``...).
        reason: Why, in words (also recorded in the memory's history).
        record: The memory after the decision, without its embedding (``None`` when there is none).
    """

    event: MemoryEvent
    memory: str
    memory_id: str | None
    previous: str | None
    kind: CandidateKind
    category: str
    reason: str
    record: MemoryRecord | None


@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`AsyncMemory.add` did with one turn.

    Attributes:
        turn_id: The turn's id (generated unless given): adding the same ``turn_id`` again changes
            nothing.
        status: See :data:`AddStatus`.
        decisions: The decisions, in order (empty when ``status`` is ``queued`` or ``purged``).
    """

    turn_id: str
    status: AddStatus
    decisions: tuple[MemoryDecision, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryExport:
    """Everything kept about a user (:meth:`AsyncMemory.export`).

    Attributes:
        user_id: The user.
        agent_id: The agent (``None``: every agent of the user).
        memories: Every memory, every status, every field (embedding and provenance included); each
            ``record.to_json_dict()`` is a line ``memory-core import`` takes back.
        history: Every recorded decision about those memories, oldest first per agent.
    """

    user_id: str
    agent_id: str | None
    memories: tuple[MemoryRecord, ...]
    history: tuple[HistoryEntry, ...]


# ------------------------------------------------------------------------------------------------
# Messages
# ------------------------------------------------------------------------------------------------


def turn_messages(
    messages: str | Mapping[str, Any] | Iterable[Mapping[str, Any] | TurnMessage],
) -> list[TurnMessage]:
    """Chat-style messages as the messages of a turn.

    Accepted:

    - a string: one user message;
    - a message ``{"role": ..., "content": ...}`` or a list of them, as every chat API writes them
      (a conversation history can be passed as is): ``role`` is ``user``, ``assistant``, ``system``,
      ``tool`` (or ``developer``, kept as ``system``); ``content`` is a string or a list of content
      parts (``{"type": "text", "text": ...}``, also ``input_text`` / ``output_text``; a part that is a
      plain string is text too; parts without text, such as images, are left out); the project's own
      ``text`` key may stand for ``content``, and ``name`` says who spoke (two people in one
      conversation). Other keys (``tool_calls``, ``tool_call_id``, ``refusal``, ``audio``,
      ``function_call``, ``annotations``...) are ignored;
    - :class:`~memory_core.domain.records.TurnMessage` objects.

    Messages without text (an assistant's tool call with ``content`` ``None``, a tool result with an
    empty content, an image alone) and items of the Responses API that are not messages (a
    ``{"type": "function_call", ...}`` without a role) are left out; at least one message must have
    text.

    Raises:
        ValidationError: No message, or no message with text; a message that is not a mapping, has
            no or an unknown role, a content that is neither a string nor a list of parts, or both
            ``content`` and ``text`` (the field is named: ``messages.1.role``).
    """
    if isinstance(messages, str):
        items: list[Any] = [{"role": "user", "content": messages}]
    elif isinstance(messages, Mapping):
        items = [messages]
    elif isinstance(messages, Iterable):
        items = list(messages)
    else:
        raise ValidationError("messages", "must be a string, a message or a list of messages")
    if not items:
        raise ValidationError("messages", "is empty: give at least one message")
    kept: list[TurnMessage] = []
    textless: list[ValidationError] = []
    for i, item in enumerate(items):
        message = _message(i, item)
        if isinstance(message, TurnMessage):
            kept.append(message)
        else:
            textless.append(message)
    if not kept:
        if len(items) == 1:
            raise textless[0]
        raise ValidationError(
            "messages", "has no message with text (tool calls and other messages without text are left out)"
        )
    return kept


def _message(index: int, item: Any) -> TurnMessage | ValidationError:
    """One message, or (not raised) why it has no text and is left out."""
    where = f"messages.{index}"
    if isinstance(item, TurnMessage):
        return item
    if not isinstance(item, Mapping):
        raise ValidationError(
            where,
            f"must be a message such as {{'role': 'user', 'content': '...'}}, not {type(item).__name__}",
        )
    role = item.get("role")
    kind = item.get("type")
    if role is None and isinstance(kind, str) and kind != "message":
        return ValidationError(where, f"is a {kind!r} item, not a message with text")
    if role is None:
        raise ValidationError(f"{where}.role", "is required: user, assistant, system or tool")
    if isinstance(role, str) and role.strip().lower() in _ROLE_ALIASES:
        role = _ROLE_ALIASES[role.strip().lower()]
    try:
        role = MessageRole(role)
    except (ValueError, TypeError):
        raise ValidationError(
            f"{where}.role", f"{role!r} is not a role; use {', '.join(r.value for r in MessageRole)}"
        ) from None
    if item.get("content") is not None and item.get("text") is not None:
        raise ValidationError(f"{where}.content", "give content or text, not both")
    key = "text" if item.get("text") is not None else "content"
    content = item.get(key)
    if content is None:
        return ValidationError(f"{where}.{key}", "is required: the message's text")
    text = _text_of(content, f"{where}.{key}")
    if not text.strip():
        return ValidationError(f"{where}.{key}", "is empty: a message needs some text")
    data: dict[str, Any] = {"role": role, "text": text}
    if item.get("name") is not None:
        data["name"] = item["name"]
    try:
        return parse_model(TurnMessage, data)
    except ValidationError as exc:
        field = key if exc.field == "text" else exc.field
        raise ValidationError(f"{where}.{field}", exc.message) from None


def _text_of(content: Any, where: str) -> str:
    """The text of a message's content: a string, or the text parts of a list joined by line breaks."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, Sequence):
        raise ValidationError(
            where, f"must be a string or a list of content parts, not {type(content).__name__}"
        )
    texts: list[str] = []
    for number, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            if part.get("type", "text") in _TEXT_PARTS:
                text = part.get("text")
                if not isinstance(text, str):
                    raise ValidationError(f"{where}.{number}.text", "must be a string")
                texts.append(text)
        else:
            raise ValidationError(
                f"{where}.{number}",
                f"must be a content part (a mapping) or a string, not {type(part).__name__}",
            )
    return "\n".join(texts)


# ------------------------------------------------------------------------------------------------
# Where memories live: in this process (a MemoryService), or behind the HTTP API
# ------------------------------------------------------------------------------------------------


def _bare(record: MemoryRecord) -> MemoryRecord:
    return record if record.embedding is None else record.without_embedding()


def _decisions(result: IngestResult) -> tuple[MemoryDecision, ...]:
    decisions = []
    for step in result.steps:
        d = step.decision
        subject = d.before if d.event is MemoryEvent.DELETE or d.after is None else d.after
        decisions.append(
            MemoryDecision(
                event=d.event,
                memory=subject.memory if subject is not None else d.candidate.memory,
                memory_id=d.memory_id,
                previous=None if d.before is None else d.before.memory,
                kind=d.candidate.kind,
                category=d.candidate.category,
                reason=d.reason,
                record=None if d.after is None else _bare(d.after),
            )
        )
    return tuple(decisions)


class _Embedded:
    """A :class:`~memory_core.service.MemoryService` in this process, ingesting at once."""

    def __init__(self, service: MemoryService, mode: str, where: str, settings: Settings) -> None:
        self.service = service
        self.mode = mode
        self.where = where
        self.settings = settings
        # Turns of a scope are ingested one at a time, in order (what the queue's sessions guarantee
        # elsewhere): concurrent adds, hand edits and purges wait for one another.
        self._writing = asyncio.Lock()

    async def add(self, turn: Turn) -> AddResult:
        async with self._writing:
            result = await self.service.ingest(turn)
        return AddResult(
            turn_id=turn.turn_id, status=cast(AddStatus, result.status), decisions=_decisions(result)
        )

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, recall: bool
    ) -> SearchResult:
        return await self.service.search(scope, query, options, recall=recall)

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        return await self.service.get(scope, memory_id)

    async def page(
        self, scope: Scope, status: MemoryStatus | None, cursor: str | None, limit: int
    ) -> tuple[list[MemoryRecord], str | None]:
        statuses = [status] if status is not None else [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]
        page = await self.service.list(scope, statuses=statuses, cursor=cursor, limit=limit)
        return page.records, page.next_cursor

    async def update(
        self, scope: Scope, memory_id: str, text: str, metadata: Mapping[str, Any] | None
    ) -> MemoryRecord:
        async with self._writing:
            return await self.service.update(scope, memory_id, text, metadata=metadata)

    async def delete(self, scope: Scope, memory_id: str) -> MemoryRecord:
        async with self._writing:
            return await self.service.delete(scope, memory_id)

    async def purge(self, user_id: str, agent_id: str | None) -> PurgeReport:
        async with self._writing:
            # The embedded queue beside the store (a LocalMemoryClient or `memory-core serve` publishes
            # there) holds the words of turns not ingested yet: they go too.
            queue = existing_local_queue(self.settings)
            try:
                return await self.service.purge(user_id, agent_id, queue=queue)
            finally:
                if queue is not None:
                    await queue.close()

    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        await self.service.get(scope, memory_id)  # NotFoundError for an unknown memory, as over HTTP
        return await self.service.history_of(scope, memory_id)

    async def export(self, user_id: str, agent_id: str | None) -> MemoryExport:
        memories = [record async for record in self.service.export(user_id, agent_id)]
        history = await self.service.export_history(user_id, agent_id)
        return MemoryExport(user_id, agent_id, tuple(memories), tuple(history))

    async def forget(self, dry_run: bool, limit: int | None) -> ForgettingReport:
        return await self.service.apply_forgetting(dry_run=dry_run, limit=limit)

    async def close(self) -> None:
        await self.service.close()


class _Remote:
    """The HTTP API of ``memory-core serve`` or the Functions app, through a remote memory client."""

    def __init__(self, client: RemoteMemoryClient) -> None:
        self.client = client
        self.mode = "remote"
        self.where = client.base_url

    @staticmethod
    def _scope(scope: Scope) -> dict[str, str]:
        return {"user_id": scope.user_id, "agent_id": scope.agent_id}

    async def add(self, turn: Turn) -> AddResult:
        answer = await self.client.request("POST", TURNS_ROUTE, body=turn.to_json_dict())
        status = answer.get("status") if isinstance(answer, Mapping) else None
        if status not in ("queued", "ingested", "duplicate", "purged"):
            raise PermanentError(f"POST {TURNS_ROUTE} answered an unknown status {status!r}")
        return AddResult(turn_id=turn.turn_id, status=status)

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, recall: bool
    ) -> SearchResult:
        return await self.client.search(scope, query, options, recall=recall)

    async def _detail(self, scope: Scope, memory_id: str) -> dict[str, Any]:
        answer = await self.client.request(
            "GET", f"/api/memories/{quote(memory_id, safe='')}", params=self._scope(scope)
        )
        return _mapping(answer, "GET /api/memories/{memory_id}")

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        detail = await self._detail(scope, memory_id)
        detail.pop("history", None)
        return _parsed(MemoryRecord, detail)

    async def page(
        self, scope: Scope, status: MemoryStatus | None, cursor: str | None, limit: int
    ) -> tuple[list[MemoryRecord], str | None]:
        params = self._scope(scope) | {"limit": str(limit)}
        if status is not None:
            params["status"] = status.value
        if cursor is not None:
            params["cursor"] = cursor
        answer = _mapping(
            await self.client.request("GET", "/api/memories", params=params), "GET /api/memories"
        )
        records = [_parsed(MemoryRecord, row) for row in answer.get("memories", [])]
        if status is None:  # the API lists every status; "no status" here means all but deleted
            records = [r for r in records if r.status is not MemoryStatus.DELETED]
        cursor = answer.get("next_cursor")
        return records, cursor if isinstance(cursor, str) else None

    async def update(
        self, scope: Scope, memory_id: str, text: str, metadata: Mapping[str, Any] | None
    ) -> MemoryRecord:
        raise ConfigurationError(
            "update is not part of the HTTP API: update memories where the store is (an embedded or "
            "Azure-settings Memory), or delete this one and add the corrected statement"
        )

    async def delete(self, scope: Scope, memory_id: str) -> MemoryRecord:
        answer = await self.client.request(
            "DELETE", f"/api/memories/{quote(memory_id, safe='')}", params=self._scope(scope)
        )
        return _parsed(MemoryRecord, _mapping(answer, "DELETE /api/memories/{memory_id}"))

    async def purge(self, user_id: str, agent_id: str | None) -> PurgeReport:
        params = {"confirm": "true"} | ({"agent_id": agent_id} if agent_id else {})
        answer = _mapping(
            await self.client.request("DELETE", f"/api/users/{quote(user_id, safe='')}", params=params),
            "DELETE /api/users/{user_id}",
        )
        purged_at = answer.get("purged_at")
        return PurgeReport(
            user_id=user_id,
            agent_id=agent_id,
            memories=int(answer.get("purged_memories", 0)),
            history=int(answer.get("purged_history", 0)),
            queued=int(answer.get("purged_queued", 0)),
            purged_at=datetime.fromisoformat(purged_at) if isinstance(purged_at, str) else None,
        )

    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        detail = await self._detail(scope, memory_id)
        return [_parsed(HistoryEntry, entry) for entry in detail.get("history", [])]

    async def export(self, user_id: str, agent_id: str | None) -> MemoryExport:
        params = {"agent_id": agent_id} if agent_id else {}
        answer = _mapping(
            await self.client.request("GET", f"/api/users/{quote(user_id, safe='')}/export", params=params),
            "GET /api/users/{user_id}/export",
        )
        return MemoryExport(
            user_id,
            agent_id,
            tuple(_parsed(MemoryRecord, row) for row in answer.get("memories", [])),
            tuple(_parsed(HistoryEntry, row) for row in answer.get("history", [])),
        )

    async def forget(self, dry_run: bool, limit: int | None) -> ForgettingReport:
        report = ForgettingReport(dry_run=dry_run)
        cursor: str | None = None
        while True:
            size = _FORGET_PAGE if limit is None else min(_FORGET_PAGE, limit - report.scanned)
            params = {"dry_run": "true" if dry_run else "false", "limit": str(size)}
            if cursor is not None:
                params["cursor"] = cursor
            answer = _mapping(
                await self.client.request("POST", "/api/forgetting", params=params), "POST /api/forgetting"
            )
            for name in COUNTERS:
                setattr(report, name, getattr(report, name) + int(answer.get(name, 0)))
            for change in answer.get("changes", []):
                if len(report.changes) < report.max_listed:
                    report.changes.append(
                        ForgettingChange(
                            id=change["id"],
                            user_id=change["user_id"],
                            agent_id=change["agent_id"],
                            old_status=MemoryStatus(change["old_status"]),
                            new_status=MemoryStatus(change["new_status"]),
                            old_retention=float(change["old_retention"]),
                            new_retention=float(change["new_retention"]),
                            expired=bool(change["expired"]),
                        )
                    )
            next_cursor = answer.get("next_cursor")
            cursor = next_cursor if isinstance(next_cursor, str) else None
            if cursor is None or (limit is not None and report.scanned >= limit):
                report.next_cursor = cursor
                return report

    async def close(self) -> None:
        await self.client.close()


def _mapping(answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, Mapping):
        raise PermanentError(f"{what} did not answer a JSON object")
    return dict(answer)


M = TypeVar("M", MemoryRecord, HistoryEntry)


def _parsed(model: type[M], data: Any) -> M:
    try:
        return parse_model(model, data)
    except ValidationError as exc:
        raise PermanentError(f"the server's answer does not match the contract: {exc}") from None


# ------------------------------------------------------------------------------------------------
# The API
# ------------------------------------------------------------------------------------------------


def _settings_overrides(path: str | os.PathLike[str] | None, settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` checked against the :class:`~memory_core.config.Settings` fields (names and types)."""
    from dataclasses import fields


    known = {f.name: type(f.default) for f in fields(Settings) if f.name not in _REMOTE_OPTIONS}
    overrides: dict[str, Any] = {}
    for name, value in settings.items():
        kind = known.get(name)
        if kind is None:
            raise ConfigurationError(
                f"unknown setting {name!r}; the settings are: {', '.join(sorted(known))} (and for a remote "
                "API: url, api_token, function_key, credential, api_scope, timeout)"
            )
        if name == "sqlite_path" and isinstance(value, os.PathLike):
            value = os.fspath(value)
        if value is None:
            continue
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigurationError(f"setting {name} must be a {kind.__name__}, not {type(value).__name__}")
        overrides[name] = value
    if path is not None:
        if "sqlite_path" in overrides:
            raise ConfigurationError("give the store file once: path or sqlite_path, not both")
        overrides["sqlite_path"] = os.fspath(path)
    return overrides


def _options(
    *,
    top: int,
    mode: SearchMode | str | None,
    profile: RankingProfile | str | None,
    category: str | None,
    kind: str | None,
    include_archived: bool,
    min_importance: float | None,
    min_retention_score: float | None,
    order_by: OrderBy | str | None,
) -> MemorySearchOptions:
    values = {
        "top": top,
        "mode": mode,
        "ranking_profile": profile,
        "category": category,
        "kind": kind,
        "include_archived": include_archived,
        "min_importance": min_importance,
        "min_retention_score": min_retention_score,
        "order_by": order_by,
    }
    try:
        return parse_model(MemorySearchOptions, {k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise ValidationError(
            "profile" if exc.field == "ranking_profile" else exc.field, exc.message
        ) from None


class AsyncMemory:
    """Long-term memory for one application, ``async``: add conversations, search, inspect, forget.

    Embedded by default (a SQLite file; see the module documentation for the remote and Azure modes).
    Use it as an async context manager, or :meth:`close` it::

        async with AsyncMemory("memory.db") as memory:
            result = await memory.add([{"role": "user", "content": "I'm vegetarian."}], user_id="alice")
            hits = (await memory.search("food", user_id="alice")).hits

    Args:
        path: The embedded store file (default: ``MEMORY_SQLITE_PATH``, else ``.memory-core/memory.db``
            in the working directory); its directory is created.
        url: Root of a remote memory-core HTTP API (``http://127.0.0.1:7071`` for ``memory-core serve``,
            ``https://APP.azurewebsites.net``); then ``path`` and settings are not taken (the server's
            apply). Plain ``http`` carries credentials to a loopback address only.
        api_token: With ``url``: the bearer token of a ``memory-core serve`` started with
            ``MEMORY_API_TOKEN``.
        function_key: With ``url``: an Azure Functions key.
        credential: With ``url``: an ``azure.core`` *async* token credential (for example
            ``azure.identity.aio.DefaultAzureCredential()``) for an API that validates Microsoft
            Entra ID tokens; it is not closed here.
        api_scope: With ``credential``: the API's scope, ``api://<application ID URI or client id>/.default``.
        timeout: With ``url``: seconds per HTTP request.
        **settings: :class:`~memory_core.config.Settings` fields over the ``MEMORY_*`` environment
            (``embedder="hash"``, ``half_life_days=30``, ``store="azure_search"``,
            ``azure_search_endpoint=...``, ``llm_provider="openai"``...).

    Raises:
        ConfigurationError: An unknown setting (the message lists the valid ones), a value of the wrong
            type, inconsistent settings, or remote options without ``url``.
        ConflictError: The store file was built with another embedder.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        api_token: str | None = None,
        function_key: str | None = None,
        credential: Any | None = None,
        api_scope: str | None = None,
        timeout: float = 30.0,
        **settings: Any,
    ) -> None:
        self._closed = False
        self._backend: _Embedded | _Remote
        remote = {
            "api_token": api_token,
            "function_key": function_key,
            "credential": credential,
            "api_scope": api_scope,
        }
        if url is None:
            given = [name for name in _REMOTE_OPTIONS if remote[name] is not None]
            if given:
                raise ConfigurationError(f"{given[0]} goes with url= (a remote memory-core API)")

            config = load_settings(**_settings_overrides(path, settings))
            if config.store == "azure_search":
                mode, where = "azure", config.azure_search_endpoint
            else:
                mode, where = "embedded", config.sqlite_path
            self._backend = _Embedded(build_service(config), mode, where, config)
        else:
            if path is not None or settings:
                name = "path" if path is not None else sorted(settings)[0]
                raise ConfigurationError(
                    f"{name} does not go with url=: a remote API runs with its own settings; pass url, "
                    "api_token, function_key, credential, api_scope and timeout only"
                )

            self._backend = _Remote(
                RemoteMemoryClient(
                    url,
                    api_token=api_token,
                    function_key=function_key,
                    credential=credential,
                    api_scope=api_scope,
                    timeout=timeout,
                )
            )
        logger.debug("memory opened (%s): %s", self._backend.mode, self._backend.where)

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"{type(self).__name__}({self._backend.mode}: {self._backend.where!r}{state})"

    @property
    def remote(self) -> bool:
        """Whether memories are behind a remote HTTP API (``url=``), so :meth:`add` only queues."""
        return isinstance(self._backend, _Remote)

    def _open(self) -> _Embedded | _Remote:
        if self._closed:
            raise PermanentError(f"this {type(self).__name__} is closed")
        return self._backend

    async def add(
        self,
        messages: str | Mapping[str, Any] | Iterable[Mapping[str, Any] | TurnMessage],
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        metadata: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
        occurred_at: datetime | None = None,
    ) -> AddResult:
        """Remember a conversation turn: extract what is worth keeping and consolidate it.

        Embedded (and with Azure settings) the turn is extracted and consolidated before this returns,
        and the result lists every decision (``ADD`` / ``UPDATE`` / ``DELETE`` / ``NONE``, with the
        memory and the reason); a user message is also kept as an episode (its own words, dated) unless
        ``MEMORY_EPISODES=false``. Remote, the turn is posted to the server's queue and the result's
        status is ``queued`` (its workers ingest it; the decisions are then in each memory's history).

        Args:
            messages: A string (one user message), a message, or a list of chat messages
                (``{"role": "user", "content": "..."}``; see :func:`turn_messages`).
            user_id: Whose memory.
            agent_id: Which agent's memory of the user.
            metadata: Key-value data (JSON values) merged into the metadata of every memory the turn
                adds or updates (keys memory-core writes itself are refused).
            turn_id: The turn's id (default: a new one); adding a turn id again changes nothing.
            occurred_at: When the conversation took place (default: now; relative dates such as
                "last month" are resolved against it; at most a few minutes in the future).

        Returns:
            The turn id, what happened to the turn, and the decisions.

        Raises:
            ValidationError: Bad messages, ids or metadata (the field is named).
        """
        backend = self._open()
        turn = parse_model(
            Turn,
            {
                "turn_id": turn_id if turn_id is not None else f"turn-{uuid.uuid4().hex}",
                "user_id": validate_scope_id(user_id, "user_id"),
                "agent_id": validate_scope_id(agent_id, "agent_id"),
                "occurred_at": occurred_at if occurred_at is not None else utcnow(),
                "messages": turn_messages(messages),
                "metadata": {} if metadata is None else dict(metadata),
            },
        )
        return await backend.add(turn)

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        top: int = 5,
        mode: SearchMode | str | None = None,
        profile: RankingProfile | str | None = None,
        category: str | None = None,
        kind: str | None = None,
        include_archived: bool = False,
        min_importance: float | None = None,
        min_retention_score: float | None = None,
        order_by: OrderBy | str | None = None,
        recall: bool = False,
    ) -> SearchResult:
        """The memories that best match ``query``, best first.

        Args:
            query: What to look for (words in any language; an empty query lists by the profile).
            user_id: Whose memories.
            agent_id: Which agent's.
            top: How many hits at most (1-100 remote, 1-1000 embedded).
            mode: ``hybrid`` (default: keywords and meaning, fused), ``keyword``, ``vector`` or
                ``semantic`` (Azure's semantic ranker; embedded it is hybrid and a note says so).
            profile: Ranking: ``important`` (default: importance, retention and recall count boost
                relevance), ``recent`` (freshness boosts it) or ``none`` (relevance only).
            category: Only memories of this category.
            kind: Only ``fact`` or only ``episode`` memories (default: both).
            include_archived: Also memories that faded below the archive threshold.
            min_importance: Only memories at least this important (0-1).
            min_retention_score: Only memories with at least this retention (0-1).
            order_by: An explicit order instead of relevance (``"updated_at desc"``...).
            recall: Count the returned memories as recalled (access count, last access and
                retention go up), as an agent's search does; off by default, so a search only reads.

        Returns:
            The hits (``hit.record.memory``, ``hit.score``, ``hit.breakdown``), without embeddings,
            and notes on what the engine could not do.

        Raises:
            ValidationError: A bad option or id (the field is named).
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        if not isinstance(query, str):
            raise ValidationError("query", "must be a string")
        options = _options(
            top=top,
            mode=mode,
            profile=profile,
            category=category,
            kind=kind,
            include_archived=include_archived,
            min_importance=min_importance,
            min_retention_score=min_retention_score,
            order_by=order_by,
        )
        result = await backend.search(scope, query, options, bool(recall))
        if any(hit.record.embedding is not None for hit in result.hits):
            result = result.model_copy(
                update={"hits": [hit.model_copy(update={"record": _bare(hit.record)}) for hit in result.hits]}
            )
        return result

    async def get(self, memory_id: str, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID) -> MemoryRecord:
        """One memory, whatever its status, without its embedding.

        Raises:
            NotFoundError: No such memory for this user and agent.
            ValidationError: A bad id (the field is named).
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        return _bare(await backend.get(scope, validate_memory_id(memory_id, "memory_id")))

    async def get_all(
        self,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        status: MemoryStatus | str | None = None,
        limit: int | None = 100,
    ) -> list[MemoryRecord]:
        """The memories of a user and agent, ordered by id, without embeddings.

        Pages through the store internally and returns one list of at most ``limit`` memories.

        Args:
            user_id: Whose memories.
            agent_id: Which agent's.
            status: Only ``active``, ``archived`` or ``deleted`` ones (default: active and archived;
                soft-deleted memories are only listed when asked for).
            limit: The most memories returned (``None``: all of them).

        Raises:
            ValidationError: A bad id, status or limit (the field is named).
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        wanted: MemoryStatus | None = None
        if status is not None:
            try:
                wanted = MemoryStatus(status)
            except ValueError:
                raise ValidationError(
                    "status", f"{status!r} is not one of {', '.join(s.value for s in MemoryStatus)}"
                ) from None
        if limit is not None:
            validate_positive_int(limit, "limit")
        records: list[MemoryRecord] = []
        cursor: str | None = None
        while limit is None or len(records) < limit:
            size = _PAGE if limit is None else min(_PAGE, limit - len(records))
            page, cursor = await backend.page(scope, wanted, cursor, size)
            records.extend(_bare(r) for r in page)
            if cursor is None:
                break
        return records if limit is None else records[:limit]

    async def update(
        self,
        memory_id: str,
        text: str,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Correct a memory's text by hand (re-embedded), recorded in its history as an ``UPDATE``.

        The memory counts as restated now (its decay starts again; an archived one is active again);
        its id, kind, category, importance and provenance stay. Not available remotely (the HTTP API
        has no update route).

        Args:
            memory_id: Which memory.
            text: Its new text.
            user_id: Whose memory.
            agent_id: Which agent's.
            metadata: Keys to set in its metadata.

        Returns:
            The memory after the change, without its embedding.

        Raises:
            NotFoundError: No such memory for this user and agent (also when the user is purged while
                the new text is embedded: the purge holds).
            ConflictError: The memory is deleted.
            ValidationError: A bad id, text or metadata (the field is named).
            ConfigurationError: Remote (``url=``).
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        return _bare(await backend.update(scope, validate_memory_id(memory_id, "memory_id"), text, metadata))

    async def delete(self, memory_id: str, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID) -> MemoryRecord:
        """Forget one memory: a soft delete, recorded in its history; search never returns it again,
        :meth:`get` and :meth:`history` still show it, :meth:`delete_all` removes it for good.

        Returns:
            The memory, now ``deleted``, without its embedding (deleting it again changes nothing).

        Raises:
            NotFoundError: No such memory for this user and agent.
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        return _bare(await backend.delete(scope, validate_memory_id(memory_id, "memory_id")))

    async def delete_all(self, *, user_id: str, agent_id: str | None = None) -> PurgeReport:
        """Remove a user's memories physically, for good: every memory (one agent's, or all), their
        history and their turns still waiting on a local queue (embedded: the ``<store>.queue`` file
        that a ``LocalMemoryClient(queue=True)`` or ``memory-core serve`` uses, when there is one;
        remote: the server's). Turns of the user dated at or before now that arrive later are dropped.
        An update or delete in flight does not bring a memory back. Cannot be undone.

        Args:
            user_id: Whose memories.
            agent_id: Only this agent's (``None``: every agent's).

        Returns:
            How many memories, history entries and queued messages were removed, and the purge time.
        """
        backend = self._open()
        user = validate_scope_id(user_id, "user_id")
        agent = None if agent_id is None else validate_scope_id(agent_id, "agent_id")
        return await backend.purge(user, agent)

    async def history(
        self, memory_id: str, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID
    ) -> list[HistoryEntry]:
        """Every recorded change to one memory, oldest first: the event, the states before and after
        (without embeddings), the reason, the turn and the time.

        Raises:
            NotFoundError: No such memory for this user and agent.
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        return await backend.history(scope, validate_memory_id(memory_id, "memory_id"))

    async def export(self, *, user_id: str, agent_id: str | None = None) -> MemoryExport:
        """Everything kept about a user (one agent, or all): every memory with every field, and the
        decision history.
        """
        backend = self._open()
        user = validate_scope_id(user_id, "user_id")
        agent = None if agent_id is None else validate_scope_id(agent_id, "agent_id")
        return await backend.export(user, agent)

    async def forget(self, *, dry_run: bool = True, limit: int | None = None) -> ForgettingReport:
        """Apply the forgetting policy to every memory of the store (all users): memories whose
        retention fell to the archive threshold are archived, reinforced ones come back. A dry run by
        default: it only reports what would change. The nightly job of ``memory-core serve`` and of
        the Functions app does the same.

        Args:
            dry_run: Only report (``False``: write the changes).
            limit: The most memories to read (``None``: all); the report's ``next_cursor`` says where
                it stopped.

        Returns:
            Counts (scanned, archived, expired, reactivated, rescored, unchanged, written) and the
            status changes.
        """
        backend = self._open()
        if limit is not None:
            validate_positive_int(limit, "limit")
        return await backend.forget(bool(dry_run), limit)

    async def close(self) -> None:
        """Close the store, history and clients (again: nothing)."""
        if self._closed:
            return
        self._closed = True
        await self._backend.close()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _LoopThread:
    """One event loop on a daemon thread, for the lifetime of a :class:`Memory`.

    Other threads run calls on it (:meth:`run`). :meth:`close` refuses new calls, lets the calls in
    flight finish (for up to :data:`_CLOSE_GRACE` seconds), cancels the ones still running, runs a last
    coroutine (closing the memory) and stops the loop; whatever is left is cancelled before the loop
    closes. Every caller gets its result or an error; none waits forever.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closing = False
        self._calls: set[concurrent.futures.Future[Any]] = set()  # callers waiting, on any thread
        self._tasks: set[asyncio.Task[Any]] = set()  # their tasks (touched on the loop's thread only)
        self._thread = threading.Thread(target=self._main, name="memory-core", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                self._cancel_left()
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()
                with self._lock:
                    left = list(self._calls)
                for future in left:  # a call that never ran to its end: its caller is told
                    future.cancel()

    def _cancel_left(self) -> None:
        """Cancel every task still on the (stopped) loop and run the loop until they have unwound."""
        tasks = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=_CLOSE_GRACE))

    async def _call(self, awaitable: Awaitable[T]) -> T:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            return await awaitable
        finally:
            self._tasks.discard(cast("asyncio.Task[Any]", task))

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the loop and wait for its result (from any other thread).

        Raises:
            PermanentError: Called on the loop's own thread, after :meth:`close`, or the memory was
                closed before the call finished.
        """
        refusal = None
        future: concurrent.futures.Future[T] | None = None
        if threading.current_thread() is self._thread:
            refusal = "a Memory cannot be called from its own event loop; use AsyncMemory there"
        else:
            with self._lock:  # no call starts once close has begun, so close sees every call
                if self._closing or self.loop.is_closed():
                    refusal = "this Memory is closed"
                else:
                    future = asyncio.run_coroutine_threadsafe(self._call(awaitable), self.loop)
                    self._calls.add(future)
        if future is None:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: no "never awaited" warning
            raise PermanentError(refusal or "this Memory is closed")
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._closing:
                raise PermanentError("this Memory was closed before the call finished") from None
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            with self._lock:
                self._calls.discard(future)

    async def _close(self, closer: Coroutine[Any, Any, Any] | None) -> None:
        """On the loop: let the calls in flight finish (bounded), cancel the rest, run ``closer``, stop."""
        try:
            running = {task for task in self._tasks if not task.done()}
            if running:
                _, running = await asyncio.wait(running, timeout=_CLOSE_GRACE)
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running, timeout=_CLOSE_GRACE)
            if closer is not None:
                await closer
        finally:
            self.loop.stop()

    def close(self, closer: Coroutine[Any, Any, Any] | None = None) -> None:
        """Refuse new calls, settle the calls in flight, run ``closer`` on the loop and stop it (again:
        nothing). On the loop's own thread (a memory collected there) it is scheduled, not awaited."""
        with self._lock:
            again = self._closing
            self._closing = True
        if again or not self._thread.is_alive() or not self.loop.is_running():
            if closer is not None:
                closer.close()
            if not again and self._thread.is_alive():
                self.loop.call_soon_threadsafe(self.loop.stop)
            return
        if threading.current_thread() is self._thread:  # collected on its own loop: it ends by itself
            self.loop.create_task(self._close(closer))
            return
        done = asyncio.run_coroutine_threadsafe(self._close(closer), self.loop)
        try:
            done.result()
        finally:
            self._thread.join()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _build(path: str | os.PathLike[str] | None, options: dict[str, Any]) -> Coroutine[Any, Any, AsyncMemory]:
    async def build() -> AsyncMemory:  # on the loop's thread, so every client belongs to it
        return AsyncMemory(path, **options)

    return build()


def _shut(runner: _LoopThread, memory: AsyncMemory | None) -> None:
    """Close ``memory`` on its loop and stop the loop (also when a :class:`Memory` is collected or the
    interpreter exits without :meth:`Memory.close`); calls in flight on other threads are settled
    first (:meth:`_LoopThread.close`)."""
    try:
        runner.close(None if memory is None else memory.close())
    except Exception:
        logger.warning("closing the memory failed", exc_info=True)


class Memory:
    """Long-term memory for one application: :class:`AsyncMemory`'s API, synchronous.

    It keeps one event loop on a background thread for its lifetime, so it works in scripts and in
    notebooks (where a loop already runs). Use it as a context manager, or :meth:`close` it (a memory
    that is not closed is closed when it is collected or at exit)::

        with Memory() as m:
            m.add("I'm vegetarian.", user_id="alice")
            print(m.search("what does alice eat?", user_id="alice").hits[0].record.memory)

    Every argument is :class:`AsyncMemory`'s; a ``credential`` must be an async one
    (``azure.identity.aio``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        api_token: str | None = None,
        function_key: str | None = None,
        credential: Any | None = None,
        api_scope: str | None = None,
        timeout: float = 30.0,
        **settings: Any,
    ) -> None:
        runner = _LoopThread()
        options = {
            "url": url,
            "api_token": api_token,
            "function_key": function_key,
            "credential": credential,
            "api_scope": api_scope,
            "timeout": timeout,
            **settings,
        }
        try:
            self._memory = runner.run(_build(path, options))
        except BaseException:
            runner.close()
            raise
        self._runner = runner
        self._finalizer = weakref.finalize(self, _shut, runner, self._memory)

    def __repr__(self) -> str:
        return repr(self._memory).replace("AsyncMemory(", "Memory(", 1)

    @property
    def remote(self) -> bool:
        """Whether memories are behind a remote HTTP API (``url=``), so :meth:`add` only queues."""
        return self._memory.remote

    def _run(self, awaitable: Awaitable[T]) -> T:
        if not self._finalizer.alive:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise PermanentError("this Memory is closed")
        return self._runner.run(awaitable)

    def add(
        self,
        messages: str | Mapping[str, Any] | Iterable[Mapping[str, Any] | TurnMessage],
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        metadata: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
        occurred_at: datetime | None = None,
    ) -> AddResult:
        """Remember a conversation turn; see :meth:`AsyncMemory.add`."""
        return self._run(
            self._memory.add(
                messages,
                user_id=user_id,
                agent_id=agent_id,
                metadata=metadata,
                turn_id=turn_id,
                occurred_at=occurred_at,
            )
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        top: int = 5,
        mode: SearchMode | str | None = None,
        profile: RankingProfile | str | None = None,
        category: str | None = None,
        kind: str | None = None,
        include_archived: bool = False,
        min_importance: float | None = None,
        min_retention_score: float | None = None,
        order_by: OrderBy | str | None = None,
        recall: bool = False,
    ) -> SearchResult:
        """The memories that best match ``query``; see :meth:`AsyncMemory.search`."""
        return self._run(
            self._memory.search(
                query,
                user_id=user_id,
                agent_id=agent_id,
                top=top,
                mode=mode,
                profile=profile,
                category=category,
                kind=kind,
                include_archived=include_archived,
                min_importance=min_importance,
                min_retention_score=min_retention_score,
                order_by=order_by,
                recall=recall,
            )
        )

    def get(self, memory_id: str, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID) -> MemoryRecord:
        """One memory; see :meth:`AsyncMemory.get`."""
        return self._run(self._memory.get(memory_id, user_id=user_id, agent_id=agent_id))

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        status: MemoryStatus | str | None = None,
        limit: int | None = 100,
    ) -> list[MemoryRecord]:
        """The memories of a user and agent; see :meth:`AsyncMemory.get_all`."""
        return self._run(self._memory.get_all(user_id=user_id, agent_id=agent_id, status=status, limit=limit))

    def update(
        self,
        memory_id: str,
        text: str,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Correct a memory's text; see :meth:`AsyncMemory.update`."""
        return self._run(
            self._memory.update(memory_id, text, user_id=user_id, agent_id=agent_id, metadata=metadata)
        )

    def delete(self, memory_id: str, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID) -> MemoryRecord:
        """Soft-delete one memory; see :meth:`AsyncMemory.delete`."""
        return self._run(self._memory.delete(memory_id, user_id=user_id, agent_id=agent_id))

    def delete_all(self, *, user_id: str, agent_id: str | None = None) -> PurgeReport:
        """Remove a user's memories for good; see :meth:`AsyncMemory.delete_all`."""
        return self._run(self._memory.delete_all(user_id=user_id, agent_id=agent_id))

    def history(
        self, memory_id: str, *, user_id: str, agent_id: str = DEFAULT_AGENT_ID
    ) -> list[HistoryEntry]:
        """Every recorded change to one memory; see :meth:`AsyncMemory.history`."""
        return self._run(self._memory.history(memory_id, user_id=user_id, agent_id=agent_id))

    def export(self, *, user_id: str, agent_id: str | None = None) -> MemoryExport:
        """Everything kept about a user; see :meth:`AsyncMemory.export`."""
        return self._run(self._memory.export(user_id=user_id, agent_id=agent_id))

    def forget(self, *, dry_run: bool = True, limit: int | None = None) -> ForgettingReport:
        """Apply the forgetting policy; see :meth:`AsyncMemory.forget`."""
        return self._run(self._memory.forget(dry_run=dry_run, limit=limit))

    def close(self) -> None:
        """Close the memory and stop its event loop (again: nothing).

        New calls are refused at once. Calls still running on other threads may finish first (for up
        to 5 seconds); those still running then are cancelled and raise
        :class:`~memory_core.errors.PermanentError` ("closed before the call finished").
        """
        self._finalizer()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
