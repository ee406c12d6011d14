"""How an agent reaches memory: one small client interface, two implementations.

- :class:`LocalMemoryClient`: an in-process :class:`~memory_core.service.MemoryService` on the
  embedded store. Turns go to the service's queue (the embedded durable queue), or are ingested
  inline when it has none (scripts, tests).
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
import importlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, PermanentError, TransientError, ValidationError
from ..models import (
    MemoryRecord,
    MemorySearchOptions,
    RankingProfile,
    RecallUpdate,
    Scope,
    SearchHit,
    SearchMode,
    SearchResult,
    Turn,
    parse_model,
)
from ..ports import ChatModel, Embedder, TurnPublisher

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.sqlite_queue import SQLiteQueue
    from ..config import Settings
    from ..service import MemoryService

__all__ = ["LocalMemoryClient", "MemoryClient", "RemoteMemoryClient", "search_request_body"]

logger = logging.getLogger(__name__)

SEARCH_ROUTE = "/api/memories/search"
TURNS_ROUTE = "/api/turns"
FUNCTION_KEY_HEADER = "x-functions-key"


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

    async def close(self) -> None:
        """Release what the client opened (nothing by default)."""
        return None


class LocalMemoryClient(MemoryClient):
    """Memory in this process: the embedded store, queue and service, through a ``MemoryService``.

    Args:
        service: The memory service to use.
        owns_service: Close the service with the client (set when the client built it).
        queue: The embedded queue the service publishes to, when a worker in this process should
            drain it (see ``worker``).
        worker: Run a queue worker in this process while the client is open (started on first use).
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        owns_service: bool = False,
        queue: SQLiteQueue | None = None,
        worker: bool = False,
    ) -> None:
        self.service = service
        self.queue = queue
        self._owns = owns_service
        self._want_worker = worker and queue is not None
        self._worker_task: asyncio.Task[Any] | None = None
        self._stop: asyncio.Event | None = None

    @classmethod
    def open(
        cls,
        *,
        sqlite_path: str | Path | None = None,
        embedder: Embedder | None = None,
        publisher: TurnPublisher | None = None,
        queue: bool | str | Path = False,
        worker: bool = False,
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
            settings: Ready :class:`~memory_core.config.Settings` (overrides are then ignored).
            chat_model: The LLM of extraction and consolidation, instead of the one the settings name
                (``MEMORY_LLM_PROVIDER``); it stays open when the client closes.
            **overrides: Other settings fields (``embedder="hash"``, ``llm_provider="compatible"``,
                ``llm_base_url=...``, ``llm_model=...``, ``half_life_days=30``...).
        """
        from ..bootstrap import build_local_queue, build_service, load_settings

        if settings is None:
            settings = load_settings(
                sqlite_path=str(sqlite_path) if sqlite_path is not None else None, **overrides
            )
        sqlite_queue = None
        if queue and publisher is None:
            sqlite_queue = build_local_queue(settings, path=None if queue is True else str(queue))
            publisher = sqlite_queue
        service = build_service(
            settings,
            embedder=embedder,
            publisher=publisher,
            recall_via_queue=sqlite_queue is not None,
            chat_model=chat_model,
        )
        return cls(service, owns_service=True, queue=sqlite_queue, worker=worker)

    def _ensure_worker(self) -> None:
        if not self._want_worker or self._worker_task is not None or self.queue is None:
            return
        from ..local.worker import QueueWorker

        self._stop = asyncio.Event()
        worker = QueueWorker(self.queue, self.service, name="provider-worker")
        self._worker_task = asyncio.ensure_future(worker.run(self._stop))

    async def drain(self) -> int:
        """Ingest every message waiting in the embedded queue now; returns how many were handled."""
        if self.queue is None:
            return 0
        from ..local.worker import QueueWorker

        handled: int = await QueueWorker(self.queue, self.service, name="drain", renew_locks=False).drain()
        return handled

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        self._ensure_worker()
        return await self.service.search(scope, query, options, recall=recall)

    async def publish_turn(self, turn: Turn) -> None:
        self._ensure_worker()
        await self.service.publish_turn(turn)

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        await self.service.record_recall(scope, list(memory_ids))

    async def close(self) -> None:
        try:
            if self._worker_task is not None and self._stop is not None:
                self._stop.set()
                await self._worker_task
                self._worker_task = None
        finally:
            if self._owns:
                await self.service.close()


def search_request_body(
    scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /api/memories/search`` (:class:`memory_core.api.SearchRequest`): the
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
        httpx = self._http_module
        headers = self._headers
        if self._credential is not None:
            try:
                token = await self._credential.get_token(self._api_scope)
            except Exception as exc:  # the credential's own errors vary by kind; all mean "no token now"
                raise TransientError(f"could not get an access token for {self._api_scope}: {exc}") from exc
            headers = {**headers, "authorization": f"Bearer {token.token}"}
        try:
            response = await self._http.post(self.base_url + route, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise TransientError(f"POST {route} timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"POST {route} failed: {exc}") from exc
        status = response.status_code
        if status == 429 or status >= 500 or status == 408:
            raise TransientError(f"POST {route} answered {status}: {_detail(response)}")
        if status == 400 or status == 422:
            raise ValidationError("request", f"POST {route} answered {status}: {_detail(response)}")
        if status >= 400:
            raise PermanentError(f"POST {route} answered {status}: {_detail(response)}")
        if status == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise PermanentError(f"POST {route} did not answer JSON: {exc}") from None

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


def _detail(response: Any) -> str:
    text = str(getattr(response, "text", "") or "")
    text = " ".join(text.split())
    return text[:300] if text else "(no body)"


def _plain_http_off_machine(base_url: str) -> bool:
    """Whether ``base_url`` is plain ``http`` to another machine (credentials would travel in clear)."""
    from urllib.parse import urlsplit

    from ..net import is_loopback

    parts = urlsplit(base_url)
    return parts.scheme == "http" and not is_loopback(parts.hostname or "")
