"""Memory behind the HTTP API of the Functions app (or of ``memory-core serve``).

Every call names an operation of the route table (:mod:`memory_core.contract.routes`), whose method
and path it takes, and reads the answer as the contract's view of it (:mod:`memory_core.contract`).
The HTTP client (``httpx``) is imported when a remote client is first built.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from memory_core.client.base import MemoryBackend
from memory_core.client.results import AddResult, AddStatus, MemoryDecision, MemoryExport
from memory_core.contract.admin_views import PURGED, ExportResponse, ForgettingResponse, PurgeResponse
from memory_core.contract.entity_views import (
    EntityDetail,
    EntityForgetResponse,
    EntityListResponse,
    entity_of,
    forgetting_of,
    memories_of,
)
from memory_core.contract.parameters import MAX_EXPORT_LIMIT
from memory_core.contract.routes import API_PREFIX, api_path, route
from memory_core.contract.views import (
    AddMemoryResponse,
    MemoryDetail,
    MemoryListResponse,
    MemoryView,
    SearchResponse,
    TurnAccepted,
    memory_record,
    search_result,
)
from memory_core.domain.messages import CandidateKind, HistoryEntry, MemoryEvent, RecallUpdate, Turn
from memory_core.domain.network import is_loopback
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, SearchResult
from memory_core.errors import (
    ConfigurationError,
    NotFoundError,
    PermanentError,
    TransientError,
    UnsupportedError,
    ValidationError,
)
from memory_core.ports import TurnPublisher
from memory_core.service import COUNTERS, ForgettingChange, ForgettingReport, PurgeReport
from memory_core.service.entities import EntityForgetting, EntityMemories, EntitySummary

__all__ = ["CLIENT_OPTIONS", "FUNCTION_KEY_HEADER", "RemoteMemoryClient", "ServerBusyError", "search_request_body"]

#: The keyword arguments of :class:`RemoteMemoryClient` a caller that builds one for its own caller
#: passes on (``timeout`` aside).
CLIENT_OPTIONS = ("function_key", "api_token", "credential", "api_scope", "publisher", "http_client", "owns_publisher")

FUNCTION_KEY_HEADER = "x-functions-key"
#: Memories one forgetting call reads (the HTTP API's largest page).
FORGET_PAGE = 10_000
#: Memories and history entries one export call reads (the HTTP API's largest export page).
EXPORT_PAGE = MAX_EXPORT_LIMIT
#: Tries of one export page the server refuses as busy (429), and the longest wait between two.
BUSY_ATTEMPTS = 5
BUSY_WAIT_CAP = 30.0
#: The answers :meth:`RemoteMemoryClient.add` knows (``resumed`` is never answered over HTTP).
_ADD_STATUSES: tuple[AddStatus, ...] = ("queued", "ingested", "duplicate", "purged")
#: What ``POST /api/memories`` answers (the turn is added at once).
_ADDED_STATUSES: tuple[AddStatus, ...] = ("ingested", "resumed", "duplicate", "purged")

V = TypeVar("V", bound=BaseModel)


def search_request_body(
    scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool
) -> dict[str, Any]:
    """The JSON body of ``POST /api/memories/search`` (:class:`memory_core.contract.views.SearchRequest`):
    the scope, the query, ``recall`` and every search option that is set."""
    return {
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "query": query,
        "recall": recall,
        **options.model_dump(mode="json", exclude_none=True),
    }


def _named(operation: str) -> str:
    """An operation as its method and path template (``POST /api/turns``), for messages."""
    target = route(operation)
    return f"{target.method} {API_PREFIX}{target.path}"


def _view(model: type[V], data: Any, operation: str) -> V:
    """The contract's ``model`` of an operation's answer."""
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the body"
        raise PermanentError(
            f"the answer of {_named(operation)} does not match the contract: {where}: {problem['msg']}"
        ) from None


def _decisions(decisions: list[dict[str, Any]]) -> tuple[MemoryDecision, ...]:
    """The decisions of ``POST /api/memories``, as :class:`MemoryDecision` objects."""
    found = []
    for d in decisions:
        before, after = d.get("before"), d.get("after")
        subject = before if d["event"] == MemoryEvent.DELETE.value or after is None else after
        found.append(
            MemoryDecision(
                event=MemoryEvent(d["event"]),
                memory=subject["memory"] if subject is not None else d["candidate"],
                memory_id=d.get("memory_id"),
                previous=None if before is None else before["memory"],
                kind=CandidateKind(d["kind"]),
                category=d["category"],
                reason=d["reason"],
                record=None if after is None else MemoryRecord.model_validate(after),
            )
        )
    return tuple(found)


def _record(view: MemoryView) -> MemoryRecord:
    try:
        return memory_record(view)
    except ValidationError as exc:
        raise PermanentError(f"a memory in the answer does not match the contract: {exc}") from None


def _import_http() -> ModuleType:
    """The ``httpx`` module (or its API-compatible successor ``httpx2``, which ``openai`` ships with)."""
    for name in ("httpx", "httpx2"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ConfigurationError("the remote memory client needs httpx: pip install 'memory-core[agent]'")



class RemoteMemoryClient(MemoryBackend):
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
        self.mode, self.where = "remote", self.base_url
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

    async def call(
        self,
        operation: str,
        *,
        path: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """Call one operation of the route table (``"search"``, ``"get"``...) with its method and path.

        Args:
            operation: The route's operation name.
            path: Its path parameters (percent-quoted here).
            params: Query parameters.
            body: The JSON body, if any.

        Returns:
            The decoded JSON body (``None`` for an empty one); raises as :meth:`request` does.
        """
        return await self.request(
            route(operation).method, api_path(operation, **dict(path or {})), params=params, body=body
        )

    @staticmethod
    def _scope(scope: Scope) -> dict[str, str]:
        return {"user_id": scope.user_id, "agent_id": scope.agent_id}

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
            TransientError: A timeout, a failed connection, 408 or 5xx; :class:`ServerBusyError` for 429.
            ValidationError: 400 or 422 (naming the field the API names, else ``request``).
            NotFoundError: 404 for an unknown memory (or entity).
            UnsupportedError: 501: the server's store cannot do it.
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
        if status == 429:
            raise ServerBusyError(
                f"{method} {route} answered 429: {_detail(response)}", _retry_after(response.headers)
            )
        if status == 501:
            raise UnsupportedError(f"{method} {route} answered 501: {_error_of(response)[1]}")
        if status >= 500 or status == 408:
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
        data = await self.call("search", body=search_request_body(scope, query, options, recall=recall))
        try:
            return search_result(_view(SearchResponse, data, "search"))
        except ValidationError as exc:
            raise PermanentError(f"a memory in the answer does not match the contract: {exc}") from None

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
        await self.call("post_turn", body=turn.to_json_dict())

    async def add(self, turn: Turn, *, infer: bool = True) -> AddResult:
        """Post ``turn`` to ``POST /api/turns`` (the server's workers ingest it: status ``queued``), or,
        with ``infer=False``, to ``POST /api/memories``, which stores its user messages as given now."""
        if not infer:
            body = {**turn.to_json_dict(), "infer": False}
            added = _view(AddMemoryResponse, await self.call("add", body=body), "add")
            status = next((known for known in _ADDED_STATUSES if known == added.status), None)
            if status is None:
                raise PermanentError(f"{_named('add')} answered an unknown status {added.status!r}")
            return AddResult(turn_id=added.turn_id, status=status, decisions=_decisions(added.decisions))
        accepted = _view(TurnAccepted, await self.call("post_turn", body=turn.to_json_dict()), "post_turn")
        status = next((known for known in _ADD_STATUSES if known == accepted.status), None)
        if status is None:
            raise PermanentError(f"{_named('post_turn')} answered an unknown status {accepted.status!r}")
        return AddResult(turn_id=turn.turn_id, status=status)

    async def _detail(self, scope: Scope, memory_id: str) -> MemoryDetail:
        answer = await self.call("get", path={"memory_id": memory_id}, params=self._scope(scope))
        return _view(MemoryDetail, answer, "get")

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        detail = await self._detail(scope, memory_id)
        return _record(detail)

    async def page(
        self, scope: Scope, status: MemoryStatus | None, cursor: str | None, limit: int, *,
        include_superseded: bool = False, filters: Mapping[str, Any] | None = None,
    ) -> tuple[list[MemoryRecord], str | None]:
        params = self._scope(scope) | {"limit": str(limit)}
        if include_superseded:
            params["include_superseded"] = "true"
        if filters is not None:
            params["filters"] = json.dumps(dict(filters), ensure_ascii=False, separators=(",", ":"))
        if status is not None:
            params["status"] = status.value
        if cursor is not None:
            params["cursor"] = cursor
        answer = _view(MemoryListResponse, await self.call("list", params=params), "list")
        records = [_record(view) for view in answer.memories]
        if status is None:  # the API lists every status; "no status" here means all but deleted
            records = [r for r in records if r.status is not MemoryStatus.DELETED]
        return records, answer.next_cursor

    async def update(
        self, scope: Scope, memory_id: str, text: str, metadata: Mapping[str, Any] | None
    ) -> MemoryRecord:
        body: dict[str, Any] = {"text": text} | ({} if metadata is None else {"metadata": dict(metadata)})
        answer = await self.call("update", path={"memory_id": memory_id}, params=self._scope(scope), body=body)
        return _record(_view(MemoryView, answer, "update"))

    async def delete(self, scope: Scope, memory_id: str) -> MemoryRecord:
        answer = await self.call("delete", path={"memory_id": memory_id}, params=self._scope(scope))
        return _record(_view(MemoryView, answer, "delete"))

    async def purge(self, user_id: str, agent_id: str | None) -> PurgeReport:
        params = {"confirm": "true"} | ({"agent_id": agent_id} if agent_id else {})
        answer = _view(PurgeResponse, await self.call("purge", path={"user_id": user_id}, params=params), "purge")
        purged = {name: getattr(answer, view) for view, name in PURGED.items()}  # checkpointed: not said
        return PurgeReport(user_id=user_id, agent_id=agent_id, **purged)

    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        return (await self._detail(scope, memory_id)).history

    async def export(self, user_id: str, agent_id: str | None, *, include_vectors: bool = False) -> MemoryExport:
        """Every page of ``GET /api/users/{user_id}/export``, each asked for with the cursor of the one
        before until the last; a page refused because the server is busy (429) is asked for again after
        its ``Retry-After``, a few times."""
        params = {"limit": str(EXPORT_PAGE)} | ({"agent_id": agent_id} if agent_id else {})
        if include_vectors:
            params["include_vectors"] = "true"
        memories: list[MemoryRecord] = []
        history: list[HistoryEntry] = []
        cursor: str | None = None
        while True:
            page_params = params | ({"cursor": cursor} if cursor is not None else {})
            answer = await self._busy_retried("export", {"user_id": user_id}, page_params)
            page = _view(ExportResponse, answer, "export")
            memories.extend(page.memories)
            history.extend(page.history)
            if page.next_cursor is None:
                return MemoryExport(user_id, agent_id, tuple(memories), tuple(history))
            cursor = page.next_cursor

    async def _busy_retried(self, operation: str, path: Mapping[str, str], params: Mapping[str, str]) -> Any:
        """:meth:`call`, asked again after ``Retry-After`` while the server answers 429 (``busy``), at
        most :data:`BUSY_ATTEMPTS` times in all."""
        for attempt in range(1, BUSY_ATTEMPTS + 1):
            try:
                return await self.call(operation, path=path, params=params)
            except ServerBusyError as busy:
                if attempt == BUSY_ATTEMPTS:
                    raise
                await asyncio.sleep(min(busy.retry_after, BUSY_WAIT_CAP))
        raise AssertionError("unreachable")  # pragma: no cover

    async def entities(self, scope: Scope) -> list[EntitySummary]:
        """``GET /api/entities`` of ``scope``."""
        answer = _view(EntityListResponse, await self.call("entities", params=self._scope(scope)), "entities")
        return [EntitySummary(entity_of(view), view.memory_count) for view in answer.entities]

    async def entity(self, scope: Scope, entity_id: str) -> EntityMemories:
        """``GET /api/entities/{entity_id}`` of ``scope``."""
        answer = await self.call("entity", path={"entity_id": entity_id}, params=self._scope(scope))
        return memories_of(_view(EntityDetail, answer, "entity"))

    async def forget_entity(self, scope: Scope, entity_id: str) -> EntityForgetting:
        """``DELETE /api/entities/{entity_id}`` of ``scope`` (asked again while the server is busy)."""
        answer = await self._busy_retried("forget_entity", {"entity_id": entity_id}, self._scope(scope))
        return forgetting_of(_view(EntityForgetResponse, answer, "forget_entity"))

    async def forget(self, dry_run: bool, limit: int | None) -> ForgettingReport:
        report = ForgettingReport(dry_run=dry_run)
        cursor: str | None = None
        while True:
            size = FORGET_PAGE if limit is None else min(FORGET_PAGE, limit - report.scanned)
            params = {"dry_run": "true" if dry_run else "false", "limit": str(size)}
            if cursor is not None:
                params["cursor"] = cursor
            page = _view(ForgettingResponse, await self.call("forgetting", params=params), "forgetting")
            _add_page(report, page)
            cursor = page.next_cursor
            if cursor is None or (limit is not None and report.scanned >= limit):
                report.next_cursor = cursor
                return report

    async def close(self) -> None:
        try:
            if self._owns_http:
                await self._http.aclose()
        finally:
            if self._owns_publisher and self.publisher is not None:
                await self.publisher.close()


class ServerBusyError(TransientError):
    """The server answered 429: it runs as many heavy operations as it allows; retry after ``retry_after``."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(headers: Mapping[str, str]) -> float:
    """The seconds of a ``Retry-After`` header given in seconds (1 when absent or a date)."""
    try:
        return max(0.0, float(headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


def _add_page(report: ForgettingReport, page: ForgettingResponse) -> None:
    """Add one page of a forgetting run to ``report`` (its counts, and its changes while they are listed)."""
    for name in COUNTERS:
        setattr(report, name, getattr(report, name) + getattr(page, name))
    room = max(0, report.max_listed - len(report.changes))
    report.changes.extend(_change(change) for change in page.changes[:room])


def _change(data: Mapping[str, Any]) -> ForgettingChange:
    """A :class:`ForgettingChange` from its ``as_dict`` form."""
    values = {field.name: data[field.name] for field in fields(ForgettingChange)}
    for status in ("old_status", "new_status"):
        values[status] = MemoryStatus(values[status])
    return ForgettingChange(**values)


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
    parts = urlsplit(base_url)
    return parts.scheme == "http" and not is_loopback(parts.hostname or "")
