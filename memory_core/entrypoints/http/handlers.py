"""The handler of each route: read the rest of the request, call the memory service, build the view.

A handler is registered under its route's operation (:func:`handles`); the dispatcher finds it there
by the operation the route table names.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from memory_core.contract.admin_views import (
    ForgettingPreviewResponse,
    export_response,
    forgetting_response,
    purge_response,
    retention_curves_response,
)
from memory_core.contract.entity_views import entity_detail, entity_forget_response, entity_list_response
from memory_core.contract.parameters import (
    DEFAULT_CURVE_DAYS,
    DEFAULT_EXPORT_LIMIT,
    DEFAULT_FORGET_LIMIT,
    DEFAULT_LIST_LIMIT,
    MAX_CURVE_DAYS,
    MAX_CURVE_IDS,
    MAX_EXPORT_LIMIT,
    MAX_FILTERS_QUERY,
    MAX_FORGET_LIMIT,
    MAX_LIST_LIMIT,
    MAX_PREVIEW_LIMIT,
)
from memory_core.contract.views import (
    AddMemoryResponse,
    HealthResponse,
    SearchRequest,
    TurnAccepted,
    UpdateMemoryRequest,
    agent_list_response,
    memory_detail,
    memory_list_response,
    memory_view,
    search_response,
    sorted_list_response,
    user_list_response,
)
from memory_core.domain.messages import Turn, session_id_for
from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.domain.search import Listing, OrderBy
from memory_core.domain.validation import validate_category, validate_memory_id
from memory_core.entrypoints.http.kit import ApiRequest, ApiResponse, Query
from memory_core.entrypoints.http.targets import AddInput, Subject
from memory_core.errors import ValidationError
from memory_core.ports import MAX_BROWSE_LIMIT, MAX_BROWSE_OFFSET
from memory_core.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = ["HANDLERS", "Context", "Handler", "HealthStatus", "handles"]

#: What ``GET /health`` says of the deployment.
HealthStatus = Literal["ok", "degraded", "unhealthy"]


class Context(Protocol):
    """What a handler may use of the API it runs in."""

    service: MemoryService

    async def public_health(self, request: ApiRequest) -> tuple[HealthStatus, dict[str, Any]]:
        """How the deployment is (ok, degraded or unhealthy), and the facts ``request``'s caller may see."""
        ...

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document."""
        ...


Handler = Callable[[Context, ApiRequest, Subject], Awaitable[ApiResponse]]
#: Every handler, by the operation of its route.
HANDLERS: dict[str, Handler] = {}


def handles(operation: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``operation``."""

    def register(handler: Handler) -> Handler:
        if operation in HANDLERS:
            raise ValueError(f"{operation} has a handler already")
        HANDLERS[operation] = handler
        return handler

    return register


def _ok(view: Any, status: int = 200) -> ApiResponse:
    return ApiResponse(status, view.model_dump(mode="json"))


def _memory_cursor(query: Query) -> str | None:
    cursor = query.text("cursor", max_length=128)
    if cursor is not None:
        validate_memory_id(cursor, "cursor")
    return cursor


def _filters(query: Query) -> dict[str, Any] | None:
    """A listing's ``filters``: a JSON object in the query string (its conditions are read by the
    service, which names a bad one)."""
    text = query.text("filters", max_length=MAX_FILTERS_QUERY)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError("filters", f"must be a JSON object ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValidationError("filters", f"must be a JSON object, not {type(value).__name__}")
    return value


@handles("search")
async def search(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    body: SearchRequest = subject.body
    result = await api.service.search(
        Scope.of(body.user_id, body.agent_id), body.query, body.options(), recall=body.recall
    )
    return _ok(search_response(result))


@handles("list")
async def list_memories(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    query = Query(request.query)
    status = query.choice("status", MemoryStatus)
    statuses = None if status is None else [status]
    cursor = _memory_cursor(query)
    limit = query.integer("limit", default=DEFAULT_LIST_LIMIT, low=1, high=MAX_LIST_LIMIT)
    assert limit is not None
    category = query.text("category", max_length=64)
    if category is not None:
        category = validate_category(category)
    kind = query.choice("kind", MemoryKind)
    order = query.choice("order", OrderBy)
    offset = query.integer("offset", default=None, low=0, high=MAX_BROWSE_OFFSET)
    superseded = query.boolean("include_superseded", default=False)
    filters = _filters(query)
    if category is None and kind is None and order is None and offset is None:
        page = await api.service.list(
            subject.scope, statuses=statuses, cursor=cursor, limit=limit, include_superseded=superseded,
            filters=filters,
        )
        return _ok(memory_list_response(page))
    for name, given in (("cursor", cursor), ("filters", filters)):
        if given is not None:
            raise ValidationError(
                name,
                f"goes with the listing by id; a filtered or sorted listing (category, kind, order, offset) "
                f"{'pages with offset instead' if name == 'cursor' else 'takes category and kind'}",
            )
    listing = Listing(statuses, category, kind, order, offset or 0, min(limit, MAX_BROWSE_LIMIT))
    sorted_page = await api.service.browse(subject.scope, listing, include_superseded=superseded)
    return _ok(sorted_list_response(sorted_page, offset or 0))


@handles("users")
async def users(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    query = Query(request.query)
    cursor = query.scope_id("cursor", required=False)
    limit = query.integer("limit", default=DEFAULT_LIST_LIMIT, low=1, high=MAX_LIST_LIMIT)
    assert limit is not None
    found, next_cursor = await api.service.users(after=cursor, limit=limit)
    return _ok(user_list_response(found, next_cursor))


@handles("user_agents")
async def user_agents(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    user_id = str(subject.user_id)
    agents = await api.service.agent_counts(user_id)
    return _ok(agent_list_response(user_id, agents))


@handles("forgetting_preview")
async def forgetting_preview(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    query = Query(request.query)
    limit = query.integer("limit", default=MAX_PREVIEW_LIMIT, low=1, high=MAX_PREVIEW_LIMIT)
    assert limit is not None
    cursor = _memory_cursor(query)
    scope = subject.scope
    at = api.service.now()
    report = await api.service.preview_forgetting(scope, limit=limit, cursor=cursor)
    return _ok(
        ForgettingPreviewResponse.model_validate(
            {**report.as_dict(), "user_id": scope.user_id, "agent_id": scope.agent_id, "at": at}
        )
    )


@handles("retention_curves")
async def retention_curves(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    query = Query(request.query)
    raw = query.text("ids", required=True, max_length=MAX_CURVE_IDS * 129)
    ids = list(dict.fromkeys(validate_memory_id(i, "ids") for i in str(raw).split(",")))
    if len(ids) > MAX_CURVE_IDS:
        raise ValidationError("ids", f"names {len(ids)} memories; at most {MAX_CURVE_IDS} at once")
    days = query.integer("days", default=DEFAULT_CURVE_DAYS, low=1, high=MAX_CURVE_DAYS)
    assert days is not None
    scope = subject.scope
    at = api.service.now()
    curves = await api.service.retention_curves(scope, ids, days=days)
    return _ok(retention_curves_response(scope, at, days, api.service.policy, curves))


@handles("get")
async def get(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    scope, memory_id = subject.scope, str(subject.memory_id)
    record = await api.service.get(scope, memory_id)
    history = await api.service.history_of(scope, memory_id)
    return _ok(memory_detail(record, history))


@handles("delete")
async def delete(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    after = await api.service.delete(subject.scope, str(subject.memory_id), reason="deleted through the API")
    return _ok(memory_view(after))


@handles("export")
async def export(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    query = Query(request.query)
    cursor = query.text("cursor", max_length=1024)
    limit = query.integer("limit", default=DEFAULT_EXPORT_LIMIT, low=1, high=MAX_EXPORT_LIMIT)
    assert limit is not None
    vectors = query.boolean("include_vectors", default=False)
    user_id, agent_id = str(subject.user_id), subject.agent_id
    page = await api.service.export_page(
        user_id, agent_id, cursor=cursor, limit=limit, include_vectors=vectors
    )
    queued = await api.service.queued_messages(user_id, agent_id) if cursor is None else []
    return _ok(export_response(user_id, agent_id, page.records, page.history, queued, page.next_cursor))


@handles("entities")
async def entities(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    scope = subject.scope
    found = await api.service.entities(scope)
    return _ok(entity_list_response(scope.user_id, scope.agent_id, found))


@handles("entity")
async def entity(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    return _ok(entity_detail(await api.service.entity(subject.scope, str(subject.entity_id))))


@handles("forget_entity")
async def forget_entity(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    return _ok(entity_forget_response(await api.service.forget_entity(subject.scope, str(subject.entity_id))))


@handles("export_entity")
async def export_entity(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    vectors = Query(request.query).boolean("include_vectors", default=False)
    scope = subject.scope
    found = await api.service.export_entity(scope, str(subject.entity_id), include_vectors=vectors)
    return _ok(export_response(scope.user_id, scope.agent_id, found.records, found.history, []))


@handles("purge")
async def purge(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    if not Query(request.query).boolean("confirm", default=False):
        raise ValidationError(
            "confirm",
            "purge removes memories and history physically and cannot be undone; add confirm=true",
        )
    report = await api.service.purge(str(subject.user_id), subject.agent_id)
    return _ok(purge_response(report))


@handles("add")
async def add(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    given: AddInput = subject.body
    result = await api.service.ingest(given.turn, infer=given.infer)
    return ApiResponse(200, AddMemoryResponse.model_validate(result.as_dict()).model_dump(mode="json"))


@handles("update")
async def update(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    body: UpdateMemoryRequest = subject.body
    assert subject.memory_id is not None  # the route's target reads it
    record = await api.service.update(subject.scope, subject.memory_id, body.text, metadata=body.metadata)
    return _ok(memory_view(record))


@handles("post_turn")
async def post_turn(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    turn: Turn = subject.body
    status = await api.service.publish_turn(turn)
    return _ok(TurnAccepted(turn_id=turn.turn_id, session_id=session_id_for(turn.scope), status=status), 202)


@handles("forgetting")
async def forgetting(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    query = Query(request.query)
    dry_run = query.boolean("dry_run", default=True)
    limit = query.integer("limit", default=DEFAULT_FORGET_LIMIT, low=1, high=MAX_FORGET_LIMIT)
    cursor = query.text("cursor", max_length=64)
    report = await api.service.apply_forgetting(dry_run=dry_run, limit=limit, cursor=cursor)
    return _ok(forgetting_response(report))


@handles("health")
async def health(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    status, details = await api.public_health(request)
    view = HealthResponse(status=status, version=__version__, details=details)
    return ApiResponse(503 if status == "unhealthy" else 200, view.model_dump())


@handles("openapi")
async def openapi(api: Context, request: ApiRequest, subject: Subject) -> ApiResponse:
    return ApiResponse(200, api.openapi())
