"""How an agent reaches memory: one small client interface, two implementations.

- :class:`LocalMemoryClient`: an in-process :class:`~memory_core.service.MemoryService` on the
  embedded store. Turns go to the service's queue (the embedded durable queue), drained by a worker
  in this process (``worker``) or by ``memory-core serve``, or are ingested inline when it has none.
- :class:`RemoteMemoryClient`: the serverless deployment. Search goes over the HTTP API
  (``POST /api/memories/search``, function key in ``x-functions-key``); turns go to a
  :class:`~memory_core.ports.TurnPublisher` (Service Bus) when one is given, else to
  ``POST /api/turns``.

Both raise :class:`~memory_core.errors.TransientError` for failures worth retrying (timeouts, refused
connections, throttling, 5xx) and :class:`~memory_core.errors.PermanentError` for the rest, so the
caller can tell a turn worth keeping in the outbox from one that will never be accepted.

Nothing here imports Agent Framework or an Azure SDK; the HTTP client (``httpx``) is imported when a
remote client is first built.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence, Set
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.bootstrap import build_local_queue, build_service, load_settings
from memory_core.domain.messages import RecallUpdate, Turn, session_id_for
from memory_core.domain.network import is_loopback
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchHit, SearchMode, SearchResult
from memory_core.domain.validation import parse_model
from memory_core.errors import (
    ConfigurationError,
    NotFoundError,
    PermanentError,
    TransientError,
    ValidationError,
)
from memory_core.ports import ChatModel, Embedder, TurnPublisher
from memory_core.runtime.offload import StorageThread, offloaded
from memory_core.runtime.worker import QueueWorker

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.sqlite.queue_messages import QueueMessage
    from memory_core.config import Settings
    from memory_core.service import MemoryService

__all__ = ["LocalMemoryClient", "MemoryClient", "RemoteMemoryClient", "search_request_body"]

logger = logging.getLogger(__name__)

SEARCH_ROUTE = "/api/memories/search"
TURNS_ROUTE = "/api/turns"
FUNCTION_KEY_HEADER = "x-functions-key"

T = TypeVar("T")


class MemoryClient(ABC):
    """What :class:`~memory_core.integrations.agent_framework.MemoryContextProvider` needs from memory."""

    @abstractmethod
    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        """Ranked memories of ``scope`` for ``query``; returned memories count as recalled if ``recall``.

        Args:
            scope: Whose memories to search.
            query: The search text (at most 4000 characters).
            options: Mode, ranking profile, top and filters.
            recall: Reinforce the returned memories (access count, last access, retention).

        Returns:
            The hits, best first, with their scores and score breakdowns.
        """

    @abstractmethod
    async def publish_turn(self, turn: Turn) -> None:
        """Hand one turn to ingestion (idempotent per ``turn_id``)."""

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Count memories as recalled outside a search (not every client can; the default does nothing)."""
        return None

    async def start(self) -> None:
        """Begin the client's background work, if it has any (nothing by default)."""
        return None

    async def wait_ready(self, scope: Scope, *, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until a search of ``scope`` sees the turns already handed
        to ingestion that this client can follow (the default follows none).

        Returns:
            ``False`` when the wait timed out (the search then runs without those turns).
        """
        return True

    async def close(self) -> None:
        """Release what the client opened (nothing by default)."""
        return None


class LocalMemoryClient(MemoryClient):
    """Memory in this process: the embedded store, queue and service, through a ``MemoryService``.

    With ``worker``, turns published to the embedded queue are ingested in this process, in the
    background, while the client is open: :meth:`wait_ready` waits (bounded) until the queued turns of
    a scope are ingested, so the next search sees them, and :meth:`close` waits (at most
    ``close_timeout``) for the turns this client queued. What is still queued then stays in the queue
    file, for the next client with a worker or for ``memory-core serve``.

    The queue's calls never run on the caller's event loop (as built by :meth:`open`): publishing
    (turns, recall updates) and the worker's receiving and settling take turns on one
    :class:`~memory_core.runtime.offload.StorageThread`, and :meth:`wait_ready` reads the queue on a
    connection of its own, off the loop. A queue file locked by another process (or a busy worker)
    therefore delays only those calls; the caller's timeouts (``asyncio.wait_for``) still hold and the
    agent's other work goes on.

    Args:
        service: The memory service to use.
        owns_service: Close the service with the client (set when the client built it).
        queue: The embedded queue the service publishes to, when a worker in this process should
            drain it (see ``worker``).
        worker: Run a queue worker in this process while the client is open (started on first use).
        close_timeout: Seconds :meth:`close` waits for the turns this client queued to be ingested by
            its worker.
        queue_thread: The thread the service's publisher runs ``queue``'s calls on (as :meth:`open`
            wires it); the worker runs its queue calls there too. ``None``: on the event loop.
    """

    #: Seconds between two looks at the queue while waiting for turns to be ingested.
    POLL_SECONDS: float = 0.02
    #: Seconds a queue operation of :meth:`open`'s queue waits for another connection's write lock
    #: before it fails (and is retried: by the outbox for a turn, by the worker for its own calls).
    QUEUE_BUSY_SECONDS: float = 2.0
    #: Sessions whose given-up turns are remembered (the least recently waited for are forgotten).
    MAX_GIVEN_UP_SESSIONS: int = 1024

    def __init__(
        self,
        service: MemoryService,
        *,
        owns_service: bool = False,
        queue: SQLiteQueue | None = None,
        worker: bool = False,
        close_timeout: float = 10.0,
        queue_thread: StorageThread | None = None,
    ) -> None:
        if close_timeout < 0:
            raise ValidationError("close_timeout", "must not be negative")
        self.service = service
        self.queue = queue
        self.queue_thread = queue_thread
        self.close_timeout = float(close_timeout)
        self._owns = owns_service
        self._want_worker = worker and queue is not None
        self._worker: QueueWorker | None = None
        self._worker_task: asyncio.Task[Any] | None = None
        self._stop: asyncio.Event | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self._written: set[Scope] = set()  # scopes this client queued turns for
        # Per session, the queued turns a wait already timed out on (pruned as they leave the queue).
        self._given_up: OrderedDict[str, set[str]] = OrderedDict()
        # Readiness is read on a connection of its own: the worker's calls (and their lock) never
        # hold it up. An in-memory queue has no second connection; its reads go where its calls go.
        self._monitor: SQLiteQueue | None = None
        if self._want_worker and queue is not None and queue.path != ":memory:":
            self._monitor = self._open_monitor(queue)

    @staticmethod
    def _open_monitor(queue: SQLiteQueue) -> SQLiteQueue | None:
        try:
            return SQLiteQueue(queue.path, queue=queue.queue, busy_timeout_seconds=queue.busy_timeout_seconds)
        except Exception as exc:  # readiness is then read through the queue itself
            logger.warning("could not open the queue %s for reading: %s: %s", queue.path, type(exc).__name__, exc)
            return None

    @classmethod
    def open(
        cls,
        *,
        sqlite_path: str | Path | None = None,
        embedder: Embedder | None = None,
        publisher: TurnPublisher | None = None,
        queue: bool | str | Path = False,
        worker: bool = False,
        close_timeout: float = 10.0,
        settings: Settings | None = None,
        chat_model: ChatModel | None = None,
        **overrides: Any,
    ) -> LocalMemoryClient:
        """Build an embedded memory service from settings (environment plus overrides) and own it.

        Args:
            sqlite_path: The embedded store file (default ``MEMORY_SQLITE_PATH``).
            embedder: An embedder instance to use instead of the one the settings name.
            publisher: Where turns go; ``None`` (and no ``queue``) ingests each turn inline.
            queue: Publish turns and recall updates to the embedded durable queue: ``True`` for
                the default file beside the store (the one ``memory-core serve`` drains), or a path.
            worker: Drain that queue in this process too (otherwise ``memory-core serve`` does).
            close_timeout: Seconds :meth:`close` waits for this client's queued turns (with ``worker``).
            settings: Ready :class:`~memory_core.config.Settings` (overrides are then ignored).
            chat_model: The LLM of extraction and consolidation, instead of the one the settings name
                (``MEMORY_LLM_PROVIDER``); it stays open when the client closes.
            **overrides: Other settings fields (``embedder="hash"``, ``llm_provider="compatible"``,
                ``llm_base_url=...``, ``llm_model=...``, ``half_life_days=30``...).
        """

        if settings is None:
            settings = load_settings(
                sqlite_path=str(sqlite_path) if sqlite_path is not None else None, **overrides
            )

        sqlite_queue = None
        thread = None
        if queue and publisher is None:
            sqlite_queue = build_local_queue(settings, path=None if queue is True else str(queue))
            try:
                sqlite_queue.busy_timeout_seconds = cls.QUEUE_BUSY_SECONDS
                thread = StorageThread("memory-queue")
            except BaseException:
                sqlite_queue.close_sync()
                raise
            # Every queue call of the service (turns, recall updates) runs on the queue's thread,
            # never on the agent's event loop; closing the service closes the queue and the thread.
            publisher = offloaded(sqlite_queue, thread)
        try:
            service = build_service(
                settings,
                embedder=embedder,
                publisher=publisher,
                recall_via_queue=sqlite_queue is not None,
                chat_model=chat_model,
            )
            return cls(
                service,
                owns_service=True,
                queue=sqlite_queue,
                worker=worker,
                close_timeout=close_timeout,
                queue_thread=thread,
            )
        except BaseException:
            if sqlite_queue is not None:
                sqlite_queue.close_sync()
            if thread is not None:
                thread.close()
            raise

    def _ensure_worker(self) -> None:
        if not self._want_worker or self._worker_task is not None or self.queue is None:
            return

        self._stop = asyncio.Event()
        self._worker = QueueWorker(self.queue, self.service, name="provider-worker", thread=self.queue_thread)
        self._worker_task = asyncio.ensure_future(self._worker.run(self._stop))

    def _ensure_warm(self) -> asyncio.Task[None]:
        if self._warm_task is None:
            self._warm_task = asyncio.ensure_future(self._warm_up())
        return self._warm_task

    async def _warm_up(self) -> None:
        try:
            await self.service.warm_up()
        except Exception as exc:  # the first search loads it then, or says what is wrong
            logger.warning("loading the embedding model failed: %s: %s", type(exc).__name__, exc)

    @property
    def worker_running(self) -> bool:
        """Whether this client's in-process worker is draining the queue now."""
        return self._worker_task is not None and not self._worker_task.done()

    async def start(self) -> None:
        """Start the in-process worker (with ``worker``) and begin loading the embedding model."""
        self._ensure_worker()
        self._ensure_warm()

    async def wait_ready(self, scope: Scope, *, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, for the embedding model to load and, while this client's
        worker runs, for the turns of ``scope`` waiting in the queue to be ingested (whoever queued
        them, this process or an earlier one).

        Only new turns and turns being processed are waited for (not one waiting to be retried after
        a failure, nor any turn of a session whose first message waits for its retry: none of them can
        be taken before), and each turn at most once: one a wait timed out on is not waited for again.
        The queue is read off the event loop, so a locked queue file delays nothing but this wait.

        Returns:
            ``False`` when the wait timed out.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        self._ensure_worker()
        try:
            await asyncio.wait_for(asyncio.shield(self._ensure_warm()), timeout=max(0.0, timeout))
        except TimeoutError:
            return False
        if not self.worker_running:
            return True
        return await self._wait_ingested({scope}, deadline)

    async def _queue_call(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run a synchronous call of the queue on its thread (or here, without one)."""
        if self.queue_thread is None:
            return fn(*args)
        return await self.queue_thread.call(fn, *args)

    async def _waiting(self, scopes: Set[Scope]) -> tuple[dict[str, list[QueueMessage]], float]:
        """The waiting messages (every subject, oldest first) of each scope's session, and the queue's
        time they were read at; read off the event loop."""
        sessions = {session_id_for(scope) for scope in scopes}

        def read(queue: SQLiteQueue) -> tuple[dict[str, list[QueueMessage]], float]:
            found = {session: queue.waiting_in_session(session) for session in sessions}
            return found, time.time()  # the queue's clock

        if self._monitor is not None:  # its own connection and lock: never behind the worker's calls
            return await asyncio.to_thread(read, self._monitor)
        assert self.queue is not None  # only called with a queue
        return await self._queue_call(read, self.queue)

    async def _unsettled(self, scopes: Set[Scope], *, closing: bool = False) -> dict[str, str]:
        """The queued turns of ``scopes`` a wait may follow, by message id (to their session id): new
        or being processed now, in a session whose first message can be taken now (not one waiting
        for a retry), and, unless ``closing``, not one an earlier wait gave up on."""
        found, now = await self._waiting(scopes)
        waiting: dict[str, str] = {}
        for session, messages in found.items():
            present = {message.message_id for message in messages}
            given_up = self._given_up.get(session)
            if given_up is not None:  # forget the turns that left the queue
                given_up &= present
                if not given_up:
                    del self._given_up[session]
            if not messages:
                continue
            head = messages[0]
            head_in_hand = head.locked_until is not None and head.locked_until > now
            if not head_in_hand and head.visible_at > now:
                continue  # the session waits for a retry: none of its turns can be taken before
            skip: Set[str] = frozenset() if closing or given_up is None else given_up
            for message in messages:
                if message.subject != "turn" or message.message_id in skip:
                    continue
                in_hand = message.locked_until is not None and message.locked_until > now
                if message.delivery_count == 0 or in_hand:
                    waiting[message.message_id] = session
        return waiting

    def _give_up(self, waiting: Mapping[str, str]) -> None:
        """Remember turns a wait timed out on, so no later wait waits for them again (bounded)."""
        for message_id, session in waiting.items():
            self._given_up.setdefault(session, set()).add(message_id)
            self._given_up.move_to_end(session)
        while len(self._given_up) > self.MAX_GIVEN_UP_SESSIONS:
            self._given_up.popitem(last=False)

    async def _wait_ingested(self, scopes: set[Scope], deadline: float, *, closing: bool = False) -> bool:
        """Wait until the turns of ``scopes`` queued now are ingested, the worker stops, or ``deadline``
        (``closing``: also the turns an earlier wait gave up on)."""
        loop = asyncio.get_running_loop()
        waiting = await self._unsettled(scopes, closing=closing)
        if waiting and self._worker is not None:
            self._worker.wake()
        while waiting:
            if loop.time() >= deadline or not self.worker_running:
                if not closing:  # (close says what is left itself)
                    self._give_up(waiting)
                    logger.info(
                        "%s queued turn(s) are not ingested yet; searching without them (they are "
                        "ingested in the background)",
                        len(waiting),
                    )
                return False
            await asyncio.sleep(self.POLL_SECONDS)
            still = await self._unsettled(scopes, closing=closing)
            # Turns queued after the wait began are not awaited.
            waiting = {message_id: session for message_id, session in waiting.items() if message_id in still}
        return True

    async def drain(self) -> int:
        """Ingest every message waiting in the embedded queue now; returns how many were handled."""
        if self.queue is None:
            return 0

        worker = QueueWorker(self.queue, self.service, name="drain", renew_locks=False, thread=self.queue_thread)
        handled: int = await worker.drain()
        return handled

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        self._ensure_worker()
        return await self.service.search(scope, query, options, recall=recall)

    async def publish_turn(self, turn: Turn) -> None:
        self._ensure_worker()
        if self.queue is not None:
            self._written.add(turn.scope)  # (also for a send that outlives its caller's timeout)
        await self.service.publish_turn(turn)
        if self._worker is not None:
            self._worker.wake()  # ingest it now, not at the worker's next poll

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        await self.service.record_recall(scope, list(memory_ids))

    async def close(self) -> None:
        """Wait (at most ``close_timeout``) for the worker to ingest the turns this client queued, stop
        it, and close the service if the client owns it. Turns not ingested by then stay queued."""
        try:
            if self._worker_task is not None and self._stop is not None:
                await self._stop_worker(self._worker_task, self._stop)
        finally:
            self._worker_task = None
            if self._warm_task is not None and not self._warm_task.done():
                self._warm_task.cancel()
                await asyncio.gather(self._warm_task, return_exceptions=True)
            try:
                if self._owns:
                    await self.service.close()  # (closes the queue and its thread)
            finally:
                if self._monitor is not None:
                    self._monitor.close_sync()
                    self._monitor = None

    async def _stop_worker(self, task: asyncio.Task[Any], stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.close_timeout
        if self._written and not task.done():
            try:
                await self._wait_ingested(self._written, deadline, closing=True)
            except Exception as exc:  # the queue is unreadable: what is queued stays queued
                logger.warning("could not follow the queued turns on close: %s: %s", type(exc).__name__, exc)
        stop.set()  # the worker finishes the message in hand
        _, running = await asyncio.wait({task}, timeout=max(1.0, deadline - loop.time()))
        if running:
            task.cancel()  # the message in hand is released: delivered again at the next start
        await asyncio.gather(task, return_exceptions=True)
        left = 0
        with contextlib.suppress(Exception):  # only for the log line
            found, _ = await asyncio.wait_for(self._waiting(self._written), timeout=1.0)
            left = sum(1 for messages in found.values() for message in messages if message.subject == "turn")
        if left:
            logger.warning(
                "%s turn(s) are still queued in %s; they are ingested at the next start of a provider "
                "with a worker, or by `memory-core serve`",
                left,
                self.queue.path if self.queue is not None else "the queue",
            )


def search_request_body(
    scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /api/memories/search`` (:class:`memory_core.contract.api.SearchRequest`): the
    scope, the query, ``recall`` and every search option that is set."""
    return {
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "query": query,
        "recall": recall,
        **options.model_dump(mode="json", exclude_none=True),
    }


def _search_result(data: Any) -> SearchResult:
    """A :class:`SearchResult` from a ``SearchResponse`` JSON body."""
    if not isinstance(data, Mapping):
        raise PermanentError("the search response is not a JSON object")
    try:
        hits = [
            SearchHit(
                record=parse_model(MemoryRecord, dict(hit["memory"])),
                score=float(hit["score"]),
                reranker_score=hit.get("reranker_score"),
                breakdown=hit["breakdown"],
            )
            for hit in data.get("hits", [])
        ]
        return SearchResult(
            hits=hits,
            mode=SearchMode(data.get("mode", SearchMode.HYBRID.value)),
            ranking_profile=RankingProfile(data.get("ranking_profile", RankingProfile.IMPORTANT.value)),
            semantic_ranker_available=bool(data.get("semantic_ranker_available", True)),
            notes=list(data.get("notes", [])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PermanentError(f"the search response does not match the contract: {exc}") from None


def _import_http() -> ModuleType:
    """The ``httpx`` module (or its API-compatible successor ``httpx2``, which ``openai`` ships with)."""
    for name in ("httpx", "httpx2"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ConfigurationError("the remote memory client needs httpx: pip install 'memory-core[agent]'")


class RemoteMemoryClient(MemoryClient):
    """Memory behind the HTTP API of the Functions app (or of ``memory-core serve``).

    Args:
        base_url: Root of the API (``https://APP.azurewebsites.net`` or ``http://127.0.0.1:7071``).
        function_key: Azure Functions key sent as ``x-functions-key`` (``None`` locally).
        api_token: Bearer token of a ``memory-core serve`` started with ``MEMORY_API_TOKEN``.
        credential: An ``azure.core`` async token credential (``DefaultAzureCredential``, a managed
            identity) whose Microsoft Entra ID access token for ``api_scope`` is sent on every request,
            for a Function App that validates tokens (``MEMORY_AUTH_*``). Tokens are refreshed by the
            credential (it caches them until shortly before they expire); the client does not close it.
        api_scope: The API's scope, ``api://<application ID URI or client id>/.default``.
        publisher: Where turns go (for example a ``ServiceBusTurnPublisher``); ``None`` posts them to
            ``POST /api/turns``. A publisher passed in is not closed by the client.
        http_client: An ``httpx.AsyncClient`` to use; one the client creates is closed with it.
        timeout: Seconds for one HTTP request (connect, read, write).
        owns_publisher: Close ``publisher`` with the client.
    """

    def __init__(
        self,
        base_url: str,
        *,
        function_key: str | None = None,
        api_token: str | None = None,
        credential: Any | None = None,
        api_scope: str | None = None,
        publisher: TurnPublisher | None = None,
        http_client: Any | None = None,
        timeout: float = 5.0,
        owns_publisher: bool = False,
    ) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must be an http(s) URL, not {base_url!r}")
        if (credential is None) != (not api_scope):
            raise ConfigurationError(
                "credential and api_scope go together: the token is asked for the API's scope "
                "(api://<application ID URI or client id>/.default)"
            )
        if credential is not None and api_token:
            raise ConfigurationError("pass either credential (Microsoft Entra ID) or api_token, not both")
        if (credential is not None or api_token or function_key) and _plain_http_off_machine(base_url):
            raise ConfigurationError(
                f"refusing to send credentials to {base_url} over plain http: use https (plain http is "
                "accepted for 127.0.0.1 and localhost only)"
            )
        self._credential = credential
        self._api_scope = api_scope
        self.base_url = base_url.rstrip("/")
        self.publisher = publisher
        self._owns_publisher = owns_publisher
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if function_key:
            self._headers[FUNCTION_KEY_HEADER] = function_key
        if api_token:
            self._headers["authorization"] = f"Bearer {api_token}"
        self._http_module = _import_http()
        self._owns_http = http_client is None
        self._http = http_client or self._http_module.AsyncClient(timeout=timeout)

    async def _post(self, route: str, body: dict[str, Any]) -> Any:
        return await self.request("POST", route, body=body)

    async def request(
        self,
        method: str,
        route: str,
        *,
        params: Mapping[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """Call one route of the HTTP API with this client's credentials; returns the JSON answer.

        Args:
            method: ``GET``, ``POST`` or ``DELETE``.
            route: The path from the root (``/api/memories``), percent-encoded where needed.
            params: Query parameters.
            body: The JSON body, if any.

        Returns:
            The decoded JSON body (``None`` for an empty one).

        Raises:
            TransientError: A timeout, a failed connection, 408, 429 or 5xx.
            ValidationError: 400 or 422 (naming the field the API names, else ``request``).
            NotFoundError: 404 for an unknown memory.
            PermanentError: Any other 4xx, or an answer that is not JSON.
        """
        httpx = self._http_module
        headers = self._headers
        if self._credential is not None:
            try:
                token = await self._credential.get_token(self._api_scope)
            except Exception as exc:  # the credential's own errors vary by kind; all mean "no token now"
                raise TransientError(f"could not get an access token for {self._api_scope}: {exc}") from exc
            headers = {**headers, "authorization": f"Bearer {token.token}"}
        try:
            response = await self._http.request(
                method, self.base_url + route, json=body, params=dict(params or {}), headers=headers
            )
        except httpx.TimeoutException as exc:
            raise TransientError(f"{method} {route} timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"{method} {route} failed: {exc}") from exc
        status = response.status_code
        if status == 429 or status >= 500 or status == 408:
            raise TransientError(f"{method} {route} answered {status}: {_detail(response)}")
        if status in (400, 404, 422):
            field, message, code = _error_of(response)
            if status == 404 and code == "not_found":
                raise NotFoundError(message)
            if status != 404:
                raise ValidationError(field or "request", f"{method} {route} answered {status}: {message}")
        if status >= 400:
            raise PermanentError(f"{method} {route} answered {status}: {_detail(response)}")
        if status == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise PermanentError(f"{method} {route} did not answer JSON: {exc}") from None

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        data = await self._post(SEARCH_ROUTE, search_request_body(scope, query, options, recall=recall))
        return _search_result(data)

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Send a recall update on the ordered queue path (needs a publisher; otherwise nothing)."""
        if self.publisher is None or not memory_ids:
            return
        await self.publisher.publish_recall(
            RecallUpdate(
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                memory_ids=list(memory_ids),
                at=datetime.now(UTC),
            )
        )

    async def publish_turn(self, turn: Turn) -> None:
        if self.publisher is not None:
            await self.publisher.publish_turn(turn)
            return
        await self._post(TURNS_ROUTE, turn.to_json_dict())

    async def close(self) -> None:
        try:
            if self._owns_http:
                await self._http.aclose()
        finally:
            if self._owns_publisher and self.publisher is not None:
                await self.publisher.close()


def _error_of(response: Any) -> tuple[str | None, str, str | None]:
    """The field, message and code of an ``{"error": {...}}`` answer (the raw text when it is not one)."""
    try:
        error = response.json().get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            field = error.get("field")
            code = error.get("code")
            return (
                field if isinstance(field, str) and field else None,
                error["message"],
                code if isinstance(code, str) else None,
            )
    except (ValueError, AttributeError):
        pass
    return None, _detail(response), None


def _detail(response: Any) -> str:
    text = str(getattr(response, "text", "") or "")
    text = " ".join(text.split())
    return text[:300] if text else "(no body)"


def _plain_http_off_machine(base_url: str) -> bool:
    """Whether ``base_url`` is plain ``http`` to another machine (credentials would travel in clear)."""
    from urllib.parse import urlsplit


    parts = urlsplit(base_url)
    return parts.scheme == "http" and not is_loopback(parts.hostname or "")
