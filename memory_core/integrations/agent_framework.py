"""``MemoryCoreContextProvider``: long-term memory for Microsoft Agent Framework agents.

``MemoryContextProvider`` is the same class under its earlier name, kept as an alias.

``before_run`` injects the memories relevant to the new input; ``after_run`` publishes the turn,
through a durable outbox when that fails. A memory failure never fails the agent's run. Inside
Agent Framework's agent loop both happen once per user turn (see :mod:`.loop`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from agent_framework import AgentSession, ContextProvider, Message, SessionContext

from memory_core.client.base import MemoryClient
from memory_core.client.local import OPEN_OPTIONS, LocalMemoryClient
from memory_core.client.remote import CLIENT_OPTIONS, RemoteMemoryClient
from memory_core.domain.log_ids import redact
from memory_core.domain.records import MemoryKind, Scope
from memory_core.domain.relevance import DEFAULT_RELEVANCE_FLOOR
from memory_core.domain.search import (
    MemorySearchOptions,
    OrderBy,
    RankingProfile,
    SearchHit,
    SearchMode,
    SearchResult,
)
from memory_core.domain.validation import parse_model, unit_interval, validate_scope_id
from memory_core.errors import ConfigurationError, ValidationError
from memory_core.integrations.delivery import TurnDelivery
from memory_core.integrations.loop import LoopMemories, extend_with_origins, loop_token, origin_session_ids
from memory_core.integrations.outbox import DEFAULT_OUTBOX_PATH, TurnOutbox
from memory_core.integrations.reading import memories_for_run
from memory_core.integrations.recall_format import (
    MAX_QUERY_CHARS,
    InjectionRole,
    build_query,
    check_injection_role,
    format_memories,
)
from memory_core.integrations.scopes import bind_scopes, missing_scopes, resolve_scopes, scope_from
from memory_core.integrations.turns import turn_for_run

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = ["DEFAULT_SOURCE_ID", "MemoryContextProvider", "MemoryCoreContextProvider"]

logger = logging.getLogger(__name__)

DEFAULT_SOURCE_ID = "memory_core"
#: Seconds the first search (and the first after ``cold_after``) may take: a cold service starts first.
DEFAULT_FIRST_SEARCH_TIMEOUT = 10.0
#: Shortest transport timeout of a client :meth:`MemoryCoreContextProvider.remote` builds.
DEFAULT_HTTP_TIMEOUT = 5.0


def _floor(value: float | None) -> float | None:
    """The relevance floor, checked (0-1, or ``None``)."""
    try:
        return None if value is None else unit_interval(value, "relevance_floor")
    except ValueError as exc:
        raise ValidationError("relevance_floor", str(exc).removeprefix("relevance_floor ")) from None


def _check_timing(
    *,
    search_timeout: float,
    first_search_timeout: float,
    cold_after: float,
    publish_timeout: float,
    ready_timeout: float,
    flush_interval: float | None,
) -> None:
    """Refuse timeouts and intervals the provider cannot work with."""
    positive = (
        ("search_timeout", search_timeout),
        ("first_search_timeout", first_search_timeout),
        ("cold_after", cold_after),
        ("publish_timeout", publish_timeout),
    )
    for name, value in positive:
        if not value > 0:
            raise ValidationError(name, "must be a positive number of seconds")
    if not ready_timeout >= 0:
        raise ValidationError("ready_timeout", "must not be a negative number of seconds")
    if flush_interval is not None and not flush_interval > 0:
        raise ValidationError("flush_interval", "must be a positive number of seconds or None")


class MemoryCoreContextProvider(ContextProvider):
    """Long-term memory for an Agent Framework agent.

    Build it with a :class:`~memory_core.client.base.MemoryClient` or a
    ``MemoryService``, or with :meth:`local` / :meth:`remote`, which create (and then own) the client.

    Inside Agent Framework's agent loop (``AgentLoopMiddleware``) one user turn is one search (the
    loop's later runs get the same memories) and one published turn, after the loop: the user's words
    and the final answer, never the loop's own prompts (``after_run_once_per_turn``). Memories that
    came from other sessions name them in the message's attribution (``origin_session_ids``, Agent
    Framework 1.15 and later).

    Cold start: the provider's first search, and the first after ``cold_after`` seconds without one,
    may take ``first_search_timeout`` (a service scaled to zero first starts and imports its code);
    every other search takes at most ``search_timeout``.

    Keyword Args:
        client: Where memory lives: a ``MemoryClient`` or a ``MemoryService`` (not closed by the
            provider unless ``owns_client``).
        source_id: Attribution id of the injected messages and key of the provider's session state.
        user_id: The user whose memories are read and written (unless the session says otherwise).
        agent_id: The agent whose memories are read and written (unless the session says otherwise).
        read_scope: Scope searched in ``before_run`` (overrides ``user_id``/``agent_id`` for reads).
        write_scope: Scope turns are published to (overrides ``user_id``/``agent_id`` for writes).
        mode: Search mode (hybrid by default).
        ranking_profile: Ranking profile (``important`` by default).
        top: How many memories to inject at most.
        category: Only memories of this category.
        order_by: An explicit order (relevance breaks ties).
        include_archived: Also search archived memories.
        include_superseded: Also search memories superseded by something said later.
        min_importance: Only memories at least this important (0..1).
        min_retention_score: Only memories whose retention is at least this (0..1).
        kind: Only facts or only episodes (``None``: both).
        vector_k: Nearest neighbours the vector leg takes (hybrid and vector modes).
        vector_weight: Weight of the vector leg in hybrid fusion (the keyword leg has 1).
        min_score: Leave out memories less relevant than this (0-1, ``SearchHit.relevance``).
        reference_time: The "now" the user's time words ("last weekend", 先月) are read against
            (``None``: the memory service's clock, the time of the turn).
        as_of: Read what was current at this time (``None``: now, or an "as of" in what the user asks).
        filters: Conditions on fields and metadata in Mem0's syntax (:mod:`memory_core.domain.filters`),
            e.g. ``{"metadata.topic": {"in": ["travel"]}}``, checked when the provider is made.
        relevance_floor: Inject nothing when the most relevant memory is below this (0-1; default
            ``DEFAULT_RELEVANCE_FLOOR``, 0.5): a question about nothing remembered gets no memories.
            ``None``: always inject what the search found.
        injection_role: Role of the injected message: ``user`` (default), ``assistant`` or ``system``.
        recall: Count injected memories as recalled (reinforces them).
        store_turns: Publish turns in ``after_run``.
        search_timeout: Seconds ``before_run`` waits for the search before going on without memories.
        first_search_timeout: Seconds the first search waits, and the first after ``cold_after``
            seconds without a search (a cold service: a Flex Consumption app starting an instance).
        cold_after: Seconds without a search after which the next one waits ``first_search_timeout``.
        ready_timeout: Seconds ``before_run`` may first wait for the memory to be ready to search (the
            embedded mode: the model loaded and the scope's queued turns ingested). ``0``: never wait.
        publish_timeout: Seconds ``after_run`` waits for the publish before leaving the turn to the outbox.
        outbox_path: The outbox file, or a ready ``TurnOutbox`` (``None``: no outbox; turns that cannot
            be published are logged and dropped).
        flush_interval: Seconds between background outbox flushes while the provider is open as an
            async context manager (``None``: flush only after runs).
        owns_client: Close ``client`` with the provider.
    """

    DEFAULT_SOURCE_ID: ClassVar[str] = DEFAULT_SOURCE_ID
    #: Inside an agent loop, ``after_run`` runs once, when the loop ends, with the whole user turn.
    after_run_once_per_turn: bool = True

    def __init__(
        self,
        *,
        client: MemoryClient | MemoryService,
        source_id: str = DEFAULT_SOURCE_ID,
        user_id: str | None = None,
        agent_id: str | None = None,
        read_scope: Scope | Mapping[str, str] | None = None,
        write_scope: Scope | Mapping[str, str] | None = None,
        mode: SearchMode | str = SearchMode.HYBRID,
        ranking_profile: RankingProfile | str = RankingProfile.IMPORTANT,
        top: int = 5,
        category: str | None = None,
        order_by: OrderBy | str | None = None,
        include_archived: bool = False,
        include_superseded: bool = False,
        min_importance: float | None = None,
        min_retention_score: float | None = None,
        kind: MemoryKind | str | None = None,
        vector_k: int | None = None,
        vector_weight: float | None = None,
        min_score: float | None = None,
        reference_time: datetime | None = None,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        relevance_floor: float | None = DEFAULT_RELEVANCE_FLOOR,
        injection_role: InjectionRole = "user",
        recall: bool = True,
        store_turns: bool = True,
        search_timeout: float = 2.0,
        first_search_timeout: float = DEFAULT_FIRST_SEARCH_TIMEOUT,
        cold_after: float = 300.0,
        ready_timeout: float = 5.0,
        publish_timeout: float = 1.0,
        outbox_path: str | Path | TurnOutbox | None = DEFAULT_OUTBOX_PATH,
        flush_interval: float | None = 30.0,
        owns_client: bool = False,
    ) -> None:
        given = locals()  # every parameter named after a search option is one
        super().__init__(source_id)
        if client is None:
            raise ConfigurationError(
                "MemoryCoreContextProvider needs a client (or use .local(...) / .remote(...))"
            )
        if not isinstance(client, MemoryClient):
            client = LocalMemoryClient(client)
        self.client: MemoryClient = client
        self._owns_client = owns_client
        self.user_id = None if user_id is None else validate_scope_id(user_id, "user_id")
        self.agent_id = None if agent_id is None else validate_scope_id(agent_id, "agent_id")
        self.read_scope = scope_from(read_scope, "read_scope")
        self.write_scope = scope_from(write_scope, "write_scope")
        self.options = MemorySearchOptions.from_values(given)
        check_injection_role(injection_role)
        _check_timing(
            search_timeout=search_timeout,
            first_search_timeout=first_search_timeout,
            cold_after=cold_after,
            publish_timeout=publish_timeout,
            ready_timeout=ready_timeout,
            flush_interval=flush_interval,
        )
        self.relevance_floor = _floor(relevance_floor)
        self.injection_role: InjectionRole = injection_role
        self.recall = recall
        self.store_turns = store_turns
        self.search_timeout = float(search_timeout)
        self.first_search_timeout = float(first_search_timeout)
        self.cold_after = float(cold_after)
        self._searched_at: float | None = None  # time.monotonic() when the last search ended
        self._loop_memories = LoopMemories()
        self.ready_timeout = float(ready_timeout)
        self.publish_timeout = float(publish_timeout)
        self.flush_interval = flush_interval
        self.outbox = TurnOutbox.open(outbox_path)
        self._delivery = TurnDelivery(self.client, self.outbox, publish_timeout=self.publish_timeout)
        self._in_flight = self._delivery.in_flight  # the turn ids being published now
        self._warned_no_scope = False
        self._closed = False

    @classmethod
    def local(cls, *, queue: bool | str | Path = True, worker: bool = True, **kwargs: Any) -> MemoryCoreContextProvider:
        """A provider on the embedded store, in this process (the provider owns the memory service).

        By default ``after_run`` writes the turn to the durable queue beside the store, and a worker in
        this process ingests it while the provider is open; the next run waits (at most ``ready_timeout``)
        until it is searchable. Closing waits (at most ``close_timeout``) for the turns it queued; any
        left are ingested at the next start, or by ``memory-core serve``.

        Keyword Args:
            (Every keyword of :meth:`~memory_core.client.local.LocalMemoryClient.open` opens the memory;
            the others configure the provider.)
            sqlite_path: The embedded store file (default ``MEMORY_SQLITE_PATH``).
            embedder: An embedder instance instead of the one the settings name.
            publisher: Where turns go instead of the queue (for example a Service Bus publisher).
            queue: Publish to the embedded durable queue (``True``: the file ``memory-core serve``
                drains, beside the store; or a path). ``False`` (and no ``publisher``) ingests each turn
                inline, which makes ``after_run`` wait for extraction (it outlives ``publish_timeout``
                and goes on in the background).
            worker: Drain that queue in this process while the provider is open. ``False`` when
                ``memory-core serve`` runs on the same store and does it.
            close_timeout: Seconds closing the provider waits for the worker to ingest the turns it
                queued.
            settings: Ready settings instead of the environment (which names the chat model with
                ``MEMORY_LLM_PROVIDER`` and its settings).
            chat_model: An LLM for extraction and consolidation instead of the one the settings name
                (for example ``OpenAIChatModel.openai_compatible(CompatibleConnection(base_url=...),
                model=...)``); it stays open when the provider closes.
            **kwargs: Provider options (``user_id``, ``agent_id``, ``top``, ...).
        """
        opening = {name: kwargs.pop(name) for name in OPEN_OPTIONS if name in kwargs}
        client = LocalMemoryClient.open(queue=queue, worker=worker, **opening)
        return cls(client=client, owns_client=True, **kwargs)

    @classmethod
    def remote(
        cls, *, base_url: str, http_timeout: float | None = None, **kwargs: Any
    ) -> MemoryCoreContextProvider:
        """A provider on the serverless deployment (the provider owns the HTTP client it creates).

        Keyword Args:
            (Every keyword of :class:`~memory_core.client.remote.RemoteMemoryClient` but ``timeout``
            builds the client; the others configure the provider.)
            base_url: Root of the memory HTTP API (Function App URL, or ``memory-core serve``).
            function_key: The Functions key for the HTTP functions.
            api_token: The bearer token of a ``memory-core serve`` started with ``MEMORY_API_TOKEN``.
            credential: An ``azure-identity`` async credential (``DefaultAzureCredential``, the agent's
                managed identity); its Microsoft Entra ID token for ``api_scope`` goes on every request
                to a Function App that validates tokens. Not closed by the provider.
            api_scope: The API's scope, ``api://<application ID URI or client id>/.default``.
            publisher: Where turns go (for example ``ServiceBusTurnPublisher``); ``None`` posts them
                to ``POST /api/turns``. Not closed by the provider.
            http_client: An ``httpx.AsyncClient`` to use (not closed by the provider).
            http_timeout: Transport timeout of one HTTP request (default: ``first_search_timeout``, at
                least 5 s, so a cold service's first answer is not cut off below the provider's budget).
            **kwargs: Provider options (``user_id``, ``agent_id``, ``top``, ...).
        """
        connecting = {name: kwargs.pop(name) for name in CLIENT_OPTIONS if name in kwargs}
        if http_timeout is None:
            first = kwargs.get("first_search_timeout", DEFAULT_FIRST_SEARCH_TIMEOUT)
            http_timeout = max(DEFAULT_HTTP_TIMEOUT, float(first))
        client = RemoteMemoryClient(base_url, timeout=http_timeout, **connecting)
        return cls(client=client, owns_client=True, **kwargs)

    # -- scope --------------------------------------------------------------------------------------
    @classmethod
    def bind_session(
        cls,
        session: AgentSession,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        read_scope: Scope | Mapping[str, str] | None = None,
        write_scope: Scope | Mapping[str, str] | None = None,
        source_id: str | None = None,
    ) -> None:
        """Store the memory scope of one session in its state (it wins over the provider's configuration).

        Args:
            session: The agent session.
            user_id: The session's user.
            agent_id: The session's agent.
            read_scope: Scope searched for this session.
            write_scope: Scope this session's turns are written to.
            source_id: The provider's ``source_id`` if it is not the default.
        """
        state = session.state.setdefault(source_id or cls.DEFAULT_SOURCE_ID, {})
        bind_scopes(state, user_id=user_id, agent_id=agent_id, read_scope=read_scope, write_scope=write_scope)

    def resolve_scopes(self, state: Mapping[str, Any] | None = None) -> tuple[Scope | None, Scope | None]:
        """The (read, write) scopes for a session state: session values first, then configuration.

        Raises:
            ValidationError: A scope value in the session state is malformed.
        """
        return resolve_scopes(
            state or {},
            user_id=self.user_id,
            agent_id=self.agent_id,
            read_scope=self.read_scope,
            write_scope=self.write_scope,
        )

    def _scopes(self, state: Mapping[str, Any]) -> tuple[Scope | None, Scope | None]:
        try:
            read, write = self.resolve_scopes(state)
        except ValidationError as exc:
            logger.warning(
                "memory scope in the session state is invalid (%s); memory is off for this run", redact(exc)
            )
            return None, None
        if (read is None or (write is None and self.store_turns)) and not self._warned_no_scope:
            self._warned_no_scope = True
            logger.warning(
                "%s: no memory scope (user_id and agent_id, in the configuration or the session) for %s; "
                "memory stays off there until one is set",
                self.source_id,
                missing_scopes(read, write),
            )
        return read, write

    async def search_memories(
        self,
        query: str,
        options: MemorySearchOptions | Mapping[str, Any] | None = None,
        *,
        scope: Scope | Mapping[str, str] | None = None,
        session: AgentSession | None = None,
        recall: bool = False,
    ) -> SearchResult:
        """Ranked memories with their scores, for direct use (tools, inspection, tests).

        Args:
            query: What to look for (an empty query lists the best memories).
            options: Search options; the provider's configured options when ``None``.
            scope: The scope to search; otherwise the session's or the configured read scope.
            session: A session whose bound scope to use.
            recall: Count the returned memories as recalled.

        Returns:
            The hits, best first, each with its score and score breakdown. Without a scope: no hits
            (and a note saying why).
        """
        opts = self.options if options is None else parse_model(MemorySearchOptions, options)
        target = scope_from(scope, "scope")
        if target is None:
            state = session.state.get(self.source_id, {}) if session is not None else {}
            target, _ = self._scopes(state)
        if target is None:
            notes = ["no memory scope configured"]
            return SearchResult(hits=[], mode=opts.mode, ranking_profile=opts.ranking_profile, notes=notes)
        return await self.client.search(target, query[-MAX_QUERY_CHARS:], opts, recall=recall)

    # -- hooks --------------------------------------------------------------------------------------
    async def before_run(
        self,
        *,
        agent: Any,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Search the read scope for the new input and add the relevant memories to the model input.

        Inside an agent loop only the loop's first run searches (for what the user said); its later
        runs, whose input is the loop's own prompt, get the same memories.
        """
        read, _ = self._scopes(state)
        if read is None:
            return
        token = loop_token(context)
        hits = None if token is None else self._loop_memories.get(token, read)
        if hits is None:
            query = build_query(context.input_messages)
            hits = await self._search_for_run(read, query) if query else []
            if token is not None:  # the loop's later runs never search for the loop's own prompt
                self._loop_memories.put(token, read, hits)
        # a fresh marker nonce for every run; a plan whose day has passed by the client's clock reads as past
        text = format_memories(hits, now=self.client.now())
        if text is not None:
            message = Message(role=self.injection_role, contents=[text])
            extend_with_origins(context, self, [message], origin_session_ids(hits, context.session_id))

    def search_budget(self) -> float:
        """Seconds the next search may take: ``first_search_timeout`` when cold, else ``search_timeout``."""
        cold = self._searched_at is None or time.monotonic() - self._searched_at > self.cold_after
        return self.first_search_timeout if cold else self.search_timeout

    async def _search_for_run(self, read: Scope, query: str) -> list[SearchHit]:
        try:
            return await memories_for_run(
                self.client,
                read,
                query,
                self.options,
                floor=self.relevance_floor,
                recall=self.recall,
                search_timeout=self.search_budget(),
                ready_timeout=self.ready_timeout,
                background=self._delivery.run_in_background,
            )
        finally:
            self._searched_at = time.monotonic()

    async def after_run(
        self,
        *,
        agent: Any,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Publish the turn (new input and response) to the write scope, or keep it in the outbox.

        After an agent loop the response is the final answer alone (see :func:`.turns.turn_for_run`).
        """
        if not self.store_turns:
            return
        _, write = self._scopes(state)
        if write is None:
            return
        turn = turn_for_run(write, context)
        if turn is not None:
            await self._delivery.publish(turn)
        self._delivery.flush_soon()

    async def flush_outbox(self, *, force: bool = False, limit: int = 100) -> int:
        """Deliver the turns waiting in the outbox, oldest first; returns how many were delivered.

        Args:
            force: Try every waiting turn now, ignoring the retry schedule.
            limit: Deliver at most this many turns.
        """
        return await self._delivery.flush(force=force, limit=limit)

    # -- lifecycle ----------------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        """Start the client's background work (the embedded worker, the model) and the outbox flusher."""
        try:
            await self.client.start()
        except Exception as exc:  # it starts on first use instead
            logger.warning("starting the memory client failed (%s: %s)", type(exc).__name__, redact(exc))
        if self.flush_interval is not None:
            self._delivery.start_flushing(self.flush_interval)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Wait briefly for publishes still running, then close the outbox and any client the provider created."""
        if self._closed:
            return
        self._closed = True
        await self._delivery.stop()
        try:
            if self._owns_client:
                await self.client.close()
        finally:
            self._delivery.close_outbox()


#: The provider's earlier name, kept importable: the same class object as :class:`MemoryCoreContextProvider`
#: (not Agent Framework's own file-based ``agent_framework.MemoryContextProvider``).
MemoryContextProvider = MemoryCoreContextProvider
