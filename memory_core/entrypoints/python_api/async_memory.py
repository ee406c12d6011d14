"""The Python API, ``async``: :class:`AsyncMemory`, three lines to use.

::

    from memory_core import AsyncMemory

    async with AsyncMemory() as m:                             # .memory-core/memory.db, no keys
        await m.add("I'm vegetarian.", user_id="alice")        # the decisions: ADD "I'm vegetarian"
        (await m.search("what does alice eat?", user_id="alice")).hits

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

Both go through the one client pair (:mod:`memory_core.client`). Every memory belongs to a ``user_id``
and an ``agent_id`` (``"default"`` unless given); both are validated, and errors are
:class:`~memory_core.errors.ValidationError` naming the field. Nothing happens at import time.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any

from memory_core.adapters.sqlite.files import check_store_folder
from memory_core.bootstrap import load_settings
from memory_core.client.base import MemoryBackend
from memory_core.client.local import LocalMemoryClient
from memory_core.client.remote import RemoteMemoryClient
from memory_core.client.results import AddResult, MemoryExport, MemoryList, bare
from memory_core.config import Settings
from memory_core.domain.filters import parse_filters, session_ids
from memory_core.domain.messages import HistoryEntry, Turn
from memory_core.domain.records import DEFAULT_AGENT_ID, MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode, SearchResult
from memory_core.domain.validation import (
    parse_model,
    utcnow,
    validate_memory_id,
    validate_positive_int,
    validate_scope_id,
)
from memory_core.entrypoints.python_api.arguments import alias, require_scope, session_filters
from memory_core.entrypoints.python_api.entity_calls import EntityCalls
from memory_core.entrypoints.python_api.messages import Messages, turn_messages
from memory_core.errors import ConfigurationError, PermanentError, ValidationError
from memory_core.service import ForgettingReport, PurgeReport

__all__ = ["DEFAULT_AGENT_ID", "AsyncMemory"]

logger = logging.getLogger(__name__)

#: Records one page of :meth:`AsyncMemory.get_all` reads (the HTTP API's largest page).
_PAGE = 1000
#: Remote-only options of :class:`AsyncMemory`.
_REMOTE_OPTIONS = ("api_token", "function_key", "credential", "api_scope")


def _settings_overrides(path: str | os.PathLike[str] | None, settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` checked against the :class:`~memory_core.config.Settings` fields (names and types)."""
    known = {f.name: type(f.default) for f in fields(Settings) if f.name not in _REMOTE_OPTIONS}
    overrides: dict[str, Any] = {}
    for name, value in settings.items():
        kind = known.get(name)
        if kind is None:
            raise ConfigurationError(
                f"unknown setting {name!r}; the settings are: {', '.join(sorted(known))} (and for a remote "
                "API: url, api_token, function_key, credential, api_scope, timeout)"
            )
        if value is not None:
            overrides[name] = _setting(name, value, kind)
    if path is not None:
        if "sqlite_path" in overrides:
            raise ConfigurationError("give the store file once: path or sqlite_path, not both")
        overrides["sqlite_path"] = os.fspath(path)
    return overrides


def _setting(name: str, value: Any, kind: type) -> Any:
    """One setting's value as its field's type (a path as text, an int as a float where one is wanted)."""
    if name == "sqlite_path" and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigurationError(f"setting {name} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _options(values: Mapping[str, Any], profile: RankingProfile | str | None) -> MemorySearchOptions:
    """The search options of a call (``profile``: the older name of ``ranking_profile``)."""
    values = dict(values)
    if profile is not None:
        if values.get("ranking_profile") is not None:
            raise ValidationError("profile", "give ranking_profile or profile (its older name), not both")
        values["ranking_profile"] = profile
    try:
        return MemorySearchOptions.from_values(values)
    except ValidationError as exc:
        if exc.field == "ranking_profile" and profile is not None:
            raise ValidationError("profile", exc.message) from None
        raise


class AsyncMemory(EntityCalls):
    """Long-term memory for one application, ``async``: add conversations, search, inspect, forget
    (memories, and the entities they name: :class:`~memory_core.entrypoints.python_api.entity_calls.EntityCalls`).

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
        forgetting: Without ``url``: keep the forgetting policy running while the memory is open (a
            run at first use when one is due, then at ``MEMORY_FORGET_SCHEDULE``; default: on for the
            embedded store, off for Azure AI Search, whose Functions timer runs it).
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
        forgetting: bool | None = None,
        **settings: Any,
    ) -> None:
        self._closed = False
        self._backend: MemoryBackend
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

            if path is not None:
                check_store_folder(os.fspath(path), "path")
            self._backend = LocalMemoryClient.open(
                settings=load_settings(**_settings_overrides(path, settings)), forgetting=forgetting
            )
        else:
            if path is not None or settings or forgetting is not None:
                name = "path" if path is not None else "forgetting" if forgetting is not None else sorted(settings)[0]
                raise ConfigurationError(
                    f"{name} does not go with url=: a remote API runs with its own settings; pass url, "
                    "api_token, function_key, credential, api_scope and timeout only"
                )

            self._backend = RemoteMemoryClient(
                url,
                api_token=api_token,
                function_key=function_key,
                credential=credential,
                api_scope=api_scope,
                timeout=timeout,
            )
        logger.debug("memory opened (%s): %s", self._backend.mode, self._backend.where)

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"{type(self).__name__}({self._backend.mode}: {self._backend.where!r}{state})"

    @property
    def remote(self) -> bool:
        """Whether memories are behind a remote HTTP API (``url=``), so :meth:`add` only queues."""
        return isinstance(self._backend, RemoteMemoryClient)

    def _open(self) -> MemoryBackend:
        if self._closed:
            raise PermanentError(f"this {type(self).__name__} is closed")
        return self._backend

    async def add(
        self,
        messages: Messages,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        metadata: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
        occurred_at: datetime | None = None,
        infer: bool = True,
        run_id: str | None = None,
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
            infer: Extract what is worth keeping (default). ``False``: keep each user and assistant
                message as given, one memory each (no extraction, no episodes; a text already known
                reinforces that memory instead of storing it twice). Remote, the server stores them
                at once through ``POST /api/memories`` and the result lists its decisions.
            run_id: The conversation session the turn belongs to (Mem0's ``run_id``): kept in each
                memory's provenance, so ``search(..., run_id=...)`` finds what was said in it.

        Returns:
            The turn id, what happened to the turn, and the decisions (``result["results"]``: as
            Mem0 lists them).

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
                "session_id": None if run_id is None else validate_scope_id(run_id, "run_id"),
            },
        )
        return await backend.add(turn, infer=bool(infer))

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        top: int = 5,
        mode: SearchMode | str | None = None,
        ranking_profile: RankingProfile | str | None = None,
        category: str | None = None,
        kind: MemoryKind | str | None = None,
        include_archived: bool = False,
        include_superseded: bool = False,
        min_importance: float | None = None,
        min_retention_score: float | None = None,
        min_score: float | None = None,
        order_by: OrderBy | str | None = None,
        vector_k: int | None = None,
        vector_weight: float | None = None,
        reference_time: datetime | None = None,
        as_of: datetime | None = None,
        recall: bool = False,
        profile: RankingProfile | str | None = None,
        filters: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        limit: int | None = None,
        threshold: float | None = None,
    ) -> SearchResult:
        """The memories that best match ``query``, best first.

        Every :class:`~memory_core.domain.search.MemorySearchOptions` field is a keyword here, under
        its own name.

        Args:
            query: What to look for (words in any language; an empty query lists by the profile).
            user_id: Whose memories.
            agent_id: Which agent's.
            top: How many hits at most (1-100 remote, 1-1000 embedded).
            mode: ``hybrid`` (default: keywords and meaning, fused), ``keyword``, ``vector`` or
                ``semantic`` (Azure's semantic ranker; embedded it is hybrid and a note says so).
            ranking_profile: Ranking: ``important`` (default: importance, retention and recall count
                boost relevance), ``recent`` (freshness boosts it) or ``none`` (relevance only).
            category: Only memories of this category.
            kind: Only ``fact`` or only ``episode`` memories (default: both).
            include_archived: Also memories that faded below the archive threshold.
            include_superseded: Also memories superseded by something said later (what held before).
            min_importance: Only memories at least this important (0-1).
            min_retention_score: Only memories with at least this retention (0-1).
            min_score: Only memories at least this relevant (0-1, ``hit.relevance``: how well the
                memory answers the query, comparable across queries).
            order_by: An explicit order instead of relevance (``"updated_at desc"``...).
            vector_k: Nearest neighbours the vector leg takes (default 50).
            vector_weight: Weight of the vector leg in hybrid fusion (default: by the query's language).
            reference_time: The "now" the query's time words ("last weekend", 先月, "as of March")
                are read against (default: the service clock's now; naive: UTC).
            as_of: Read what was current at this time (earlier values included, nothing said later).
            recall: Count the returned memories as recalled (access count, last access and
                retention go up), as an agent's search does; off by default, so a search only reads.
            profile: The older name of ``ranking_profile`` (give one of them).
            filters: Conditions on fields and metadata in Mem0's syntax, inside the scope
                (``{"AND": [{"kind": "fact"}, {"metadata.topic": {"in": ["food", "travel"]}}]}``; see
                :mod:`memory_core.domain.filters`).
            run_id: Only memories said in this conversation session (as ``filters={"run_id": ...}``).
            limit: Mem0's name for ``top``.
            threshold: Mem0's name for ``min_score``.

        Returns:
            The hits (``hit.record.memory``, ``hit.score``, ``hit.breakdown``), without embeddings,
            and notes on what the engine could not do; ``result["results"]`` lists them as Mem0 does
            and iterating goes over the hits.

        Raises:
            ValidationError: A bad option or id (the field is named).
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        if not isinstance(query, str):
            raise ValidationError("query", "must be a string")
        top = alias("top", top, "limit", limit, default=5)
        min_score = alias("min_score", min_score, "threshold", threshold)
        filters = session_filters(filters, run_id)
        options = _options(locals(), profile)  # (every parameter named after a search option is one)
        result = await backend.search(scope, query, options, recall=bool(recall))
        if any(hit.record.embedding is not None for hit in result.hits):
            result = result.model_copy(
                update={"hits": [hit.model_copy(update={"record": bare(hit.record)}) for hit in result.hits]}
            )
        return result

    async def get(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str = DEFAULT_AGENT_ID
    ) -> MemoryRecord:
        """One memory, whatever its status, without its embedding.

        ``user_id`` is required: a memory is read only in the scope of the user (and agent) named.

        Raises:
            NotFoundError: No such memory for this user and agent.
            ValidationError: A bad id, or no ``user_id`` (the field is named).
        """
        backend = self._open()
        scope = require_scope(user_id, agent_id, "get")
        return bare(await backend.get(scope, validate_memory_id(memory_id, "memory_id")))

    async def get_all(
        self,
        *,
        user_id: str,
        agent_id: str = DEFAULT_AGENT_ID,
        status: MemoryStatus | str | None = None,
        limit: int | None = 100,
        include_superseded: bool = False,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> MemoryList:
        """The memories of a user and agent, ordered by id, without embeddings.

        Pages through the store internally and returns one list of at most ``limit`` memories (a
        list, which also reads as Mem0's ``{"results": [...]}``: ``memories["results"]``).

        Args:
            user_id: Whose memories.
            agent_id: Which agent's.
            status: Only ``active``, ``archived`` or ``deleted`` ones (default: active and archived;
                soft-deleted memories are only listed when asked for).
            limit: The most memories returned (``None``: all of them).
            include_superseded: Also memories superseded by something said later (what held before:
                a replaced value keeps its text, with ``valid_until`` and ``superseded_by``).
            run_id: Only the memories said in this conversation session (Mem0's ``run_id``).
            filters: Only the memories these conditions keep, written as for :meth:`search` (fields
                and ``metadata.<key>``, in Mem0's syntax: ``{"AND": [{"category": "food"},
                {"importance": {"gte": 0.7}}]}``); applied by the store, remote by the server.

        Raises:
            ValidationError: A bad id, status, limit or filter (the field is named, ``filters.<path>``).
        """
        backend = self._open()
        scope = Scope.of(user_id, agent_id)
        wanted = None if status is None else _status(status)
        if limit is not None:
            validate_positive_int(limit, "limit")
        session = None if run_id is None else validate_scope_id(run_id, "run_id")
        if filters is not None:
            parse_filters(filters)  # a bad filter is refused before anything is read
        records = MemoryList()
        cursor: str | None = None
        while limit is None or len(records) < limit:
            size = _PAGE if limit is None or session is not None else min(_PAGE, limit - len(records))
            page, cursor = await backend.page(
                scope, wanted, cursor, size, include_superseded=include_superseded, filters=filters
            )
            records.extend(bare(r) for r in page if session is None or session in session_ids(r.provenance))
            if cursor is None:
                break
        return records if limit is None else MemoryList(records[:limit])

    async def update(
        self,
        memory_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str = DEFAULT_AGENT_ID,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Correct a memory's text by hand (re-embedded), recorded in its history as an ``UPDATE``.

        The memory counts as restated now (its decay starts again; an archived one is active again);
        its id, kind, category, importance and provenance stay. Remote, through
        ``PATCH /api/memories/{memory_id}``.

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
            ValidationError: A bad id, text or metadata, or no ``user_id`` (the field is named).
        """
        backend = self._open()
        scope = require_scope(user_id, agent_id, "update")
        return bare(await backend.update(scope, validate_memory_id(memory_id, "memory_id"), text, metadata))

    async def delete(
        self, memory_id: str, *, user_id: str | None = None, agent_id: str = DEFAULT_AGENT_ID
    ) -> MemoryRecord:
        """Forget one memory. The delete is **soft**: the memory's status becomes ``deleted`` and the
        change is recorded in its history; search never returns it again, but its text stays in the
        store, :meth:`get` and :meth:`history` still show it and ``get_all(status="deleted")`` lists
        it. To remove memories physically, for good, purge them: :meth:`delete_all` (a user, or one
        agent of a user), or :meth:`reset` (the whole local store).

        Returns:
            The memory, now ``deleted``, without its embedding (deleting it again changes nothing).

        Raises:
            NotFoundError: No such memory for this user and agent.
            ValidationError: A bad id, or no ``user_id`` (a memory is deleted only in the scope of the
                user named).
        """
        backend = self._open()
        scope = require_scope(user_id, agent_id, "delete")
        return bare(await backend.delete(scope, validate_memory_id(memory_id, "memory_id")))

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
        self, memory_id: str, *, user_id: str | None = None, agent_id: str = DEFAULT_AGENT_ID
    ) -> list[HistoryEntry]:
        """Every recorded change to one memory, oldest first: the event, the states before and after
        (without embeddings), the reason, the turn and the time.

        Raises:
            NotFoundError: No such memory for this user and agent.
            ValidationError: A bad id, or no ``user_id`` (the history is read in the user's scope).
        """
        backend = self._open()
        scope = require_scope(user_id, agent_id, "history")
        return await backend.history(scope, validate_memory_id(memory_id, "memory_id"))

    async def export(
        self, *, user_id: str, agent_id: str | None = None, include_vectors: bool = False
    ) -> MemoryExport:
        """Everything kept about a user (one agent, or all): every memory with every field, and the
        decision history (from a remote API, every page of its export in turn).

        Args:
            user_id: Whose memories.
            agent_id: Only this agent's (``None``: every agent's).
            include_vectors: Keep each memory's embedding (left out by default; ``memory-core import``
                computes missing ones).
        """
        backend = self._open()
        user = validate_scope_id(user_id, "user_id")
        agent = None if agent_id is None else validate_scope_id(agent_id, "agent_id")
        return await backend.export(user, agent, include_vectors=include_vectors)

    async def reset(self) -> list[PurgeReport]:
        """Empty the local store: every user's memories, history and queued turns are purged, for good
        (as :meth:`delete_all` of each user; turns dated before now that arrive later are dropped).
        Only on an explicit call, and only where the store is local: a remote memory refuses.

        Returns:
            One purge report per user.

        Raises:
            ConfigurationError: Remote (``url=``): purge user by user with :meth:`delete_all`.
            UnsupportedError: The store cannot list its users (Azure AI Search).
        """
        return await self._open().reset()

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


def _status(status: MemoryStatus | str) -> MemoryStatus:
    """``status`` as a :class:`MemoryStatus` (a bad one is refused, naming the valid ones)."""
    try:
        return MemoryStatus(status)
    except ValueError:
        raise ValidationError("status", f"{status!r} is not one of {', '.join(s.value for s in MemoryStatus)}") from None
