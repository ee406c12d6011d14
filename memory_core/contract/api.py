"""The JSON contract shared by the HTTP API (Azure Functions and the embedded server) and ``--json``.

Request and response bodies are pydantic models; the converters here are the only place that turns
domain objects into wire JSON, so the command line prints exactly what the HTTP API returns.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic import ValidationError as PydanticValidationError
from pydantic.json_schema import models_json_schema

from memory_core.domain.access import Action, Authenticator, Principal, authorize
from memory_core.domain.messages import TURN_ID_PATTERN, HistoryEntry, Turn, session_id_for
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Provenance, Scope
from memory_core.domain.search import (
    MemorySearchOptions,
    OrderBy,
    RankingProfile,
    ScoreBreakdown,
    SearchMode,
    SearchResult,
)
from memory_core.domain.validation import (
    CATEGORY_PATTERN,
    MEMORY_ID_PATTERN,
    SCOPE_ID_PATTERN,
    AgentId,
    UserId,
    parse_model,
    validate_category,
    validate_memory_id,
    validate_scope_id,
)
from memory_core.errors import (
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TransientError,
    UnsupportedError,
    ValidationError,
)
from memory_core.ports import MAX_BROWSE_LIMIT, MAX_BROWSE_OFFSET, Page, QueuedItem, SortedPage, StatusCounts
from memory_core.service.admin import PurgeReport
from memory_core.service.forgetting import ForgettingReport, RetentionCurve
from memory_core.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = [
    "MAX_BODY_BYTES",
    "AgentListResponse",
    "ApiRequest",
    "ApiResponse",
    "ErrorDetail",
    "ErrorResponse",
    "ExportResponse",
    "ForgettingPreviewResponse",
    "ForgettingResponse",
    "Headers",
    "HealthResponse",
    "MemoryApi",
    "MemoryDetail",
    "MemoryListResponse",
    "MemoryView",
    "PurgeResponse",
    "QueuedMessageView",
    "RetentionCurvesResponse",
    "SearchHitView",
    "SearchRequest",
    "SearchResponse",
    "TurnAccepted",
    "UserListResponse",
    "export_response",
    "forgetting_response",
    "memory_detail",
    "memory_list_response",
    "memory_view",
    "purge_response",
    "search_response",
]

logger = logging.getLogger(__name__)

#: A category in the OpenAPI document: the model's rule, letters of any script, digits, ``_ . -``
#: (``\w`` is Unicode here, as in Python; an ECMA-262 validator reads it as ASCII, hence the description).
CATEGORY_SCHEMA: dict[str, JsonValue] = {
    "pattern": f"^{CATEGORY_PATTERN.pattern}$",
    "description": "1-64 letters (any script, e.g. 食事), digits, `_`, `.` or `-`; compared lower-cased",
}

_SCOPE_SCHEMA: dict[str, JsonValue] = {
    "pattern": f"^{SCOPE_ID_PATTERN.pattern}$",
    "minLength": 1,
    "maxLength": 128,
}


class MemoryView(BaseModel):
    """A memory as returned over the API: every field but the embedding."""

    model_config = ConfigDict(extra="forbid")

    id: str
    user_id: str
    agent_id: str
    memory: str
    summary: str
    category: str
    importance: float
    confidence: float
    status: MemoryStatus
    source: str
    kind: MemoryKind
    retention_score: float
    access_count: int
    created_at: str
    updated_at: str
    last_accessed_at: str | None
    expires_at: str | None
    metadata: dict[str, Any]
    provenance: list[Provenance]


class SearchHitView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory: MemoryView
    score: float
    reranker_score: float | None
    breakdown: ScoreBreakdown


class SearchRequest(MemorySearchOptions):
    """Body of ``POST /api/memories/search``: the scope, the query, and every search option.

    The options are :class:`MemorySearchOptions`' own fields (inherited, so a new option is part of
    the request at once), with the HTTP contract's tighter bounds where it has them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: UserId = Field(json_schema_extra=_SCOPE_SCHEMA)
    agent_id: AgentId = Field(json_schema_extra=_SCOPE_SCHEMA)
    query: str = Field(max_length=4000)
    top: int = Field(default=5, ge=1, le=100)
    category: str | None = Field(default=None, json_schema_extra=CATEGORY_SCHEMA)
    min_importance: float | None = Field(default=None, ge=0, le=1)
    min_retention_score: float | None = Field(default=None, ge=0, le=1)
    recall: bool = True

    def options(self) -> MemorySearchOptions:
        """The search options of this request (through :meth:`MemorySearchOptions.from_values`)."""
        return MemorySearchOptions.from_values(self.model_dump())


class SearchResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hits: list[SearchHitView]
    mode: SearchMode
    ranking_profile: RankingProfile
    semantic_ranker_available: bool
    notes: list[str]


class MemoryListResponse(BaseModel):
    """``GET /api/memories``: one page, by id (``next_cursor``) or of a filtered, sorted listing
    (``total`` and ``next_offset``)."""

    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryView]
    next_cursor: str | None
    total: int | None = Field(
        default=None, description="Memories matching the filters in all (filtered or sorted listings only)"
    )
    next_offset: int | None = Field(
        default=None, description="`offset` of the next page, `null` on the last (filtered or sorted listings only)"
    )


class StatusCountsView(BaseModel):
    """How many memories, by status."""

    model_config = ConfigDict(extra="forbid")

    active: int
    archived: int
    deleted: int
    total: int


class UserSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    counts: StatusCountsView


class UserListResponse(BaseModel):
    """``GET /api/users``: users holding memories, by id, with counts by status (every agent's added up)."""

    model_config = ConfigDict(extra="forbid")

    users: list[UserSummary]
    next_cursor: str | None


class AgentSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str
    counts: StatusCountsView


class AgentListResponse(BaseModel):
    """``GET /api/users/{user_id}/agents``: the agents holding memories of the user, by id, with counts."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agents: list[AgentSummary]


class PolicyView(BaseModel):
    """The forgetting policy's parameters (``retention = 0.5^(age/half_life) × (floor + weight ×
    importance) + min(recalls × boost, cap)``; archived at or below ``archive_threshold``)."""

    model_config = ConfigDict(extra="forbid")

    half_life_days: float
    importance_floor: float
    importance_weight: float
    access_boost: float
    access_boost_cap: float
    archive_threshold: float


class RetentionCurveView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: MemoryStatus
    retention_score: float = Field(description="The stored retention")
    points: list[tuple[float, float]] = Field(description="`[days from now, retention]` pairs")
    archives_in_days: float | None = Field(
        description="Days until the retention reaches the archive threshold if nothing reinforces the memory "
        "(0: it is there already; `null`: never, recalls alone keep it above)"
    )


class RetentionCurvesResponse(BaseModel):
    """``GET /api/forgetting/curves``: how memories fade from now on under the policy."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str
    at: datetime
    days: int
    policy: PolicyView
    curves: list[RetentionCurveView]


class ForgettingResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool
    scanned: int
    archived: int
    expired: int
    reactivated: int
    rescored: int
    unchanged: int
    written: int
    complete: bool
    next_cursor: str | None
    changes: list[dict[str, Any]]


class ForgettingPreviewResponse(ForgettingResponse):
    """``GET /api/forgetting/preview``: what forgetting would do to one scope now (a dry run of the scope;
    ``changes`` lists the rescores too, after the status changes)."""

    user_id: str
    agent_id: str
    at: datetime


def memory_view(record: MemoryRecord) -> MemoryView:
    data = record.to_json_dict(include_embedding=False)
    return MemoryView.model_validate(data)


def search_response(result: SearchResult) -> SearchResponse:
    return SearchResponse(
        hits=[
            SearchHitView(
                memory=memory_view(hit.record),
                score=hit.score,
                reranker_score=hit.reranker_score,
                breakdown=hit.breakdown,
            )
            for hit in result.hits
        ],
        mode=result.mode,
        ranking_profile=result.ranking_profile,
        semantic_ranker_available=result.semantic_ranker_available,
        notes=list(result.notes),
    )


def memory_list_response(page: Page) -> MemoryListResponse:
    return MemoryListResponse(memories=[memory_view(r) for r in page.records], next_cursor=page.next_cursor)


def forgetting_response(report: ForgettingReport) -> ForgettingResponse:
    return ForgettingResponse.model_validate(report.as_dict())


def sorted_list_response(page: SortedPage, offset: int) -> MemoryListResponse:
    """``GET /api/memories`` with filters or a sort: the page, the count and the next offset."""
    following = offset + len(page.records)
    return MemoryListResponse(
        memories=[memory_view(r) for r in page.records],
        next_cursor=None,
        total=page.total,
        next_offset=following if page.records and following < page.total else None,
    )


def _counts_view(counts: StatusCounts) -> StatusCountsView:
    return StatusCountsView(
        active=counts.active, archived=counts.archived, deleted=counts.deleted, total=counts.total
    )


def user_list_response(users: list[StatusCounts], next_cursor: str | None) -> UserListResponse:
    return UserListResponse(
        users=[UserSummary(user_id=u.id, counts=_counts_view(u)) for u in users], next_cursor=next_cursor
    )


def agent_list_response(user_id: str, agents: list[StatusCounts]) -> AgentListResponse:
    return AgentListResponse(
        user_id=user_id, agents=[AgentSummary(agent_id=a.id, counts=_counts_view(a)) for a in agents]
    )


def retention_curves_response(
    scope: Scope, at: datetime, days: int, policy: HumanMemoryPolicy, curves: list[RetentionCurve]
) -> RetentionCurvesResponse:
    return RetentionCurvesResponse(
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        at=at,
        days=days,
        policy=PolicyView.model_validate(policy.as_dict()),
        curves=[RetentionCurveView.model_validate(c.as_dict()) for c in curves],
    )


def memory_detail(record: MemoryRecord, history: list[HistoryEntry]) -> MemoryDetail:
    """``GET /api/memories/{memory_id}``: the memory and its history."""
    return MemoryDetail(**memory_view(record).model_dump(), history=history)


def purge_response(report: PurgeReport) -> PurgeResponse:
    return PurgeResponse(
        user_id=report.user_id,
        agent_id=report.agent_id,
        purged_memories=report.memories,
        purged_history=report.history,
        purged_queued=report.queued,
        purged_at=report.purged_at,
    )


def export_response(
    user_id: str,
    agent_id: str | None,
    records: list[MemoryRecord],
    history: list[HistoryEntry],
    queued: list[QueuedItem],
) -> ExportResponse:
    """``GET /api/users/{user_id}/export`` (and ``memory-core --json export``)."""
    return ExportResponse(
        user_id=user_id,
        agent_id=agent_id,
        count=len(records),
        memories=records,
        history=history,
        queued=[
            QueuedMessageView(
                message_id=q.message_id,
                kind=q.kind,
                agent_id=q.agent_id,
                item_id=q.item_id,
                occurred_at=q.occurred_at,
                dead_lettered=q.dead_lettered,
            )
            for q in queued
        ],
    )


# ------------------------------------------------------------------------------------------------
# More response models
# ------------------------------------------------------------------------------------------------


class MemoryDetail(MemoryView):
    """``GET /api/memories/{memory_id}``: the memory and every recorded change to it, oldest first."""

    history: list[HistoryEntry]


class QueuedMessageView(BaseModel):
    """A message of the user still on the embedded queue (not yet processed, or dead-lettered), by ids."""

    model_config = ConfigDict(extra="forbid")

    message_id: str
    kind: str = Field(description="`turn`, `recall` or what the producer said")
    agent_id: str | None
    item_id: str | None = Field(description="The `turn_id` or `recall_id`")
    occurred_at: datetime | None = Field(description="The turn's `occurred_at` (a recall update's `at`)")
    dead_lettered: bool


class ExportResponse(BaseModel):
    """``GET /api/users/{user_id}/export``: every record of the user (every field, provenance included,
    every status), the decision history of the exported scopes, and what still waits on the embedded
    queue."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str | None
    count: int
    memories: list[MemoryRecord]
    history: list[HistoryEntry] = Field(
        default_factory=list,
        description="Every recorded decision (ADD, UPDATE, DELETE, NONE) about the exported scopes, oldest "
        "first per scope, with the states before and after and the reason",
    )
    queued: list[QueuedMessageView] = Field(
        default_factory=list,
        description="The user's messages still on the embedded queue (waiting or dead-lettered), by ids and "
        "time; always empty in Azure (Service Bus messages cannot be listed per user)",
    )


class PurgeResponse(BaseModel):
    """``DELETE /api/users/{user_id}``: what was physically removed."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str | None
    purged_memories: int
    purged_history: int
    purged_queued: int = Field(
        0,
        description="Messages of the scope removed from the embedded queue (waiting, in hand, dead-lettered); "
        "0 in Azure, where Service Bus keeps them and the tombstone drops them on delivery",
    )
    purged_at: datetime | None = Field(
        None,
        description="The tombstone left by the purge: a turn whose `occurred_at` (a recall update whose `at`) "
        "is at or before it is dropped from now on, whatever delivers it",
    )


class TurnAccepted(BaseModel):
    """``POST /api/turns``: the turn was queued (or, without a queue, ingested at once), or it was a duplicate."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str
    session_id: str
    status: str = Field(
        description="`queued` (sent to the ordered queue), `ingested` (no queue configured), `duplicate` "
        "(this scope already ingested this turn id, or the embedded queue already holds it; nothing was "
        "queued) or `purged` (the turn's `occurred_at` is at or before the last purge of its scope or user; "
        "it was dropped)"
    )


class HealthResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "unhealthy"] = Field(
        description="`ok` (HTTP 200), or `unhealthy` (HTTP 503): ingestion has stopped (`details.problem` says why)"
    )
    version: str
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="Facts of the deployment: locally `ingestion` (`ok`, `stopped`, `off`), `queue` and `workers`",
    )


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    """Every error the API returns: ``{"error": {"code", "message", "field"}}``."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


# ------------------------------------------------------------------------------------------------
# Framework-neutral handlers
# ------------------------------------------------------------------------------------------------

#: Largest request body accepted (the Service Bus standard-tier message limit).
MAX_BODY_BYTES = 256 * 1024
#: Largest page ``GET /memories`` returns, and the default.
MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 100
#: Memories one ``POST /forgetting`` call scans at most (the response's cursor resumes).
MAX_FORGET_LIMIT = 10_000
DEFAULT_FORGET_LIMIT = 1000
#: Memories one ``GET /forgetting/preview`` call reads at most (its cursor resumes).
MAX_PREVIEW_LIMIT = 10_000
#: Memories one ``GET /forgetting/curves`` call draws at most, and how many days ahead at most.
MAX_CURVE_IDS = 50
MAX_CURVE_DAYS = 3650
DEFAULT_CURVE_DAYS = 180
RETRY_AFTER_SECONDS = 5
_JSON = {"Content-Type": "application/json; charset=utf-8"}
_TRUE = {"true", "1", "yes", "on"}
_INTEGER = re.compile(r"-?[0-9]{1,19}")
_FALSE = {"false", "0", "no", "off"}


class Headers(Mapping[str, str]):
    """Request headers; names are looked up in any case (the last of repeated ones wins).

    Args:
        values: A mapping or ``(name, value)`` pairs.
    """

    def __init__(self, values: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        pairs = values.items() if isinstance(values, Mapping) else values
        self._values = {name.lower(): value for name, value in pairs}

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:  # never print credentials
        return f"Headers({sorted(self._values)})"


@dataclass(frozen=True)
class ApiRequest:
    """One HTTP request, independent of the web framework.

    Attributes:
        method: The HTTP method (any case).
        path: The URL path after the ``/api`` prefix, still percent-encoded (``/memories/search``).
        query: Query parameters (one value each: the embedded server refuses a repeated parameter
            with 400; the Azure Functions host keeps the last one).
        body: The raw request body.
        headers: The request headers (any mapping is turned into :class:`Headers`, so names are
            looked up in any case); ``Authorization`` is what the authenticator reads.
    """

    method: str
    path: str
    query: Mapping[str, str]
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=Headers, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.headers, Headers):
            object.__setattr__(self, "headers", Headers(self.headers))


@dataclass(frozen=True)
class ApiResponse:
    """One HTTP response: status, a JSON-able body and headers (``Content-Type`` included)."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=lambda: dict(_JSON))

    def json_bytes(self) -> bytes:
        """The body serialized as compact UTF-8 JSON."""
        return json.dumps(self.body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
            "utf-8"
        )


class _HttpError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = dict(headers or {})


def _challenge(error: str | None, description: str) -> str:
    """A ``WWW-Authenticate: Bearer`` challenge (RFC 6750), the description reduced to quotable ASCII."""
    if error is None:
        return 'Bearer realm="memory-core"'
    text = "".join(
        c if " " <= c <= "~" and c not in {'"', "\\"} else "'" if c == '"' else " " for c in description
    )
    return f'Bearer realm="memory-core", error="{error}", error_description="{text[:300]}"'


def _error(status: int, code: str, message: str, field: str | None = None, **headers: str) -> ApiResponse:
    body = ErrorResponse(error=ErrorDetail(code=code, message=message, field=field)).model_dump(mode="json")
    return ApiResponse(status, body, {**_JSON, **headers})


_E = TypeVar("_E", bound=Enum)


class _Query:
    """Typed access to query parameters; every problem is a :class:`ValidationError` naming the parameter."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values

    def text(self, name: str, *, required: bool = False, max_length: int = 256) -> str | None:
        value = self._values.get(name)
        if value is None or value == "":
            if required:
                raise ValidationError(name, "is a required query parameter")
            return None
        if len(value) > max_length:
            raise ValidationError(name, f"is {len(value)} characters; the maximum is {max_length}")
        return value

    def scope_id(self, name: str, *, required: bool = True) -> str | None:
        value = self.text(name, required=required)
        return None if value is None else validate_scope_id(value, name)

    def scope(self) -> Scope:
        return Scope.of(self.scope_id("user_id"), self.scope_id("agent_id"))

    def integer(self, name: str, *, default: int | None, low: int, high: int) -> int | None:
        raw = self.text(name, max_length=20)
        if raw is None:
            return default
        # Strict: ASCII digits with an optional minus; no spaces, "+", "_" or other scripts' digits
        # (which Python's int() would take).
        if not _INTEGER.fullmatch(raw):
            raise ValidationError(name, f"{raw!r} is not an integer (ASCII digits only)")
        value = int(raw)
        if not low <= value <= high:
            raise ValidationError(name, f"must be between {low} and {high}, got {value}")
        return value

    def choice(self, name: str, enum: type[_E]) -> _E | None:
        """One of ``enum``'s values (exactly as written), or ``None`` when absent."""
        raw = self.text(name, max_length=32)
        if raw is None:
            return None
        try:
            return enum(raw)
        except ValueError:
            raise ValidationError(name, f"{raw!r} is not one of {', '.join(repr(e.value) for e in enum)}") from None

    def boolean(self, name: str, *, default: bool) -> bool:
        raw = self.text(name, max_length=8)
        if raw is None:
            return default
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise ValidationError(name, f"{raw!r} is not a boolean (true or false)")


def _json_body(request: ApiRequest) -> dict[str, Any]:
    if not request.body:
        raise _HttpError(400, "bad_request", "a JSON object body is required", "body")

    def no_constants(token: str) -> Any:
        raise ValueError(f"{token} is not valid JSON")

    try:
        data = json.loads(request.body.decode("utf-8"), parse_constant=no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _HttpError(400, "bad_request", f"the body is not valid UTF-8 JSON ({exc})", "body") from None
    if not isinstance(data, dict):
        raise _HttpError(400, "bad_request", "the body must be a JSON object", "body")
    return data


@dataclass(frozen=True, slots=True)
class _Target:
    """What a request acts on: the scope authorisation checks, and the parsed input its handler uses.

    Attributes:
        user_id: The user whose memories the request touches (``None``: no single user).
        agent_id: The agent whose memories it touches (``None``: every agent of the user, or none).
        memory_id: The memory of ``/memories/{memory_id}``.
        body: The validated request body (``SearchRequest``, ``Turn``), if the route has one.
    """

    user_id: str | None = None
    agent_id: str | None = None
    memory_id: str | None = None
    body: Any = None

    @property
    def scope(self) -> Scope:
        return Scope.of(self.user_id, self.agent_id)


TargetReader = Callable[[ApiRequest, dict[str, str]], _Target]
Handler = Callable[[ApiRequest, _Target], Awaitable[ApiResponse]]


def _no_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    return _Target()


def _search_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    body = parse_model(SearchRequest, _json_body(request))
    return _Target(body.user_id, body.agent_id, body=body)


def _scope_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    scope = _Query(request.query).scope()
    return _Target(scope.user_id, scope.agent_id)


def _memory_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    memory_id = validate_memory_id(params["memory_id"], "memory_id")
    scope = _Query(request.query).scope()
    return _Target(scope.user_id, scope.agent_id, memory_id)


def _path_user_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    """The user of the path alone (every agent of the user): no query parameter widens or narrows it."""
    return _Target(validate_scope_id(params["user_id"], "user_id"))


def _user_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    user_id = validate_scope_id(params["user_id"], "user_id")
    return _Target(user_id, _Query(request.query).scope_id("agent_id", required=False))


def _turn_target(request: ApiRequest, params: dict[str, str]) -> _Target:
    turn = parse_model(Turn, _json_body(request))
    return _Target(turn.user_id, turn.agent_id, body=turn)


@dataclass(frozen=True, slots=True)
class _Route:
    """One route of the contract and how it is guarded.

    Attributes:
        method: The HTTP method.
        segments: The path below ``/api``; ``{name}`` segments are parameters.
        operation: The handler's name (and the OpenAPI ``operationId``).
        summary: One line for the OpenAPI document.
        action: What :func:`~memory_core.domain.access.authorize` is asked about (``None``: any authenticated
            caller, or anyone when ``anonymous``).
        target: Reads the scope the request acts on (and its parsed input) before anything runs.
        anonymous: Served without authentication (health only).
    """

    method: str
    segments: tuple[str, ...]
    operation: str
    summary: str
    action: Action | None
    target: TargetReader
    anonymous: bool = False

    def __post_init__(self) -> None:
        if self.anonymous and self.action is not None:
            raise ValueError(f"{self.operation}: an anonymous route cannot be authorised")

    def match(self, parts: list[str]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for pattern, part in zip(self.segments, parts, strict=True):
            if pattern.startswith("{"):
                if not part:
                    return None
                params[pattern[1:-1]] = part
            elif pattern != part:
                return None
        return params

    @property
    def path(self) -> str:
        return "/" + "/".join(self.segments)


#: Every route, with the action it is authorised as and where its scope comes from. ``handle`` admits a
#: request through this table only, so a route cannot be served without its check.
_ROUTES: tuple[_Route, ...] = (
    _Route(
        "POST",
        ("memories", "search"),
        "search",
        "Ranked memories for a query (the `before_run` call)",
        Action.SEARCH,
        _search_target,
    ),
    _Route(
        "GET",
        ("memories",),
        "list",
        "Memories of a user and agent, by id, keyset-paged",
        Action.READ,
        _scope_target,
    ),
    _Route(
        "GET", ("memories", "{memory_id}"), "get", "One memory and its history", Action.READ, _memory_target
    ),
    _Route(
        "GET",
        ("users",),
        "users",
        "Users holding memories, with counts by status (every user: administrators only)",
        Action.READ,
        _no_target,
    ),
    _Route(
        "GET",
        ("users", "{user_id}", "agents"),
        "user_agents",
        "The agents holding memories of a user, with counts by status",
        Action.READ,
        _path_user_target,
    ),
    _Route(
        "DELETE",
        ("memories", "{memory_id}"),
        "delete",
        "Soft-delete one memory (recorded in its history)",
        Action.DELETE,
        _memory_target,
    ),
    _Route(
        "GET",
        ("users", "{user_id}", "export"),
        "export",
        "Every record of a user (every field, provenance included), the decision history and queued messages",
        Action.EXPORT,
        _user_target,
    ),
    _Route(
        "DELETE",
        ("users", "{user_id}"),
        "purge",
        "Physically remove a user's memories, history and queued messages; later replays of them are dropped",
        Action.PURGE,
        _user_target,
    ),
    _Route(
        "POST",
        ("turns",),
        "post_turn",
        "Queue a conversation turn (turn.v1) for ingestion",
        Action.POST_TURN,
        _turn_target,
    ),
    _Route(
        "POST",
        ("forgetting",),
        "forgetting",
        "Run the forgetting policy (dry run unless dry_run=false)",
        Action.FORGET,
        _no_target,
    ),
    _Route(
        "GET",
        ("forgetting", "preview"),
        "forgetting_preview",
        "What forgetting would do to one user's and agent's memories now (a dry run of that scope)",
        Action.READ,
        _scope_target,
    ),
    _Route(
        "GET",
        ("forgetting", "curves"),
        "retention_curves",
        "How memories fade from now on under the forgetting policy",
        Action.READ,
        _scope_target,
    ),
    _Route("GET", ("health",), "health", "Liveness", None, _no_target, anonymous=True),
    _Route("GET", ("openapi.json",), "openapi", "This OpenAPI document", None, _no_target),
)
#: The caller of an API without an authenticator (the embedded server, whose token or loopback
#: binding already gates access; in-process callers): allowed everything.
_TOKEN_HOLDER = Principal.token_holder()


class MemoryApi:
    """The HTTP contract of memory-core, independent of the web framework.

    The embedded server (:mod:`memory_core.entrypoints.embedded.server`) and the Azure Functions HTTP triggers both
    turn their request into an :class:`ApiRequest`, await :meth:`handle` and write the
    :class:`ApiResponse` back. Routes (below the ``/api`` prefix) are listed in :meth:`openapi`.

    Errors are JSON ``{"error": {"code", "message", "field"}}``: a body that is not a JSON object is
    400 (``bad_request``); a value that breaks a rule (bad id, out-of-range number, missing field,
    unknown enum value, purge without ``confirm=true``) is 422 (``validation_error``); an unknown
    memory is 404 (``not_found``); an unknown path 404 (``no_route``); a known path with another
    method 405 (``method_not_allowed``, with ``Allow``); a body over ``max_body_bytes`` 413
    (``payload_too_large``); a store conflict 409 (``conflict``); what this deployment's store cannot do
    501 (``not_supported``: listing users on Azure AI Search); a transient failure 503 (``unavailable``,
    with ``Retry-After``). Only a bug is a 500.

    Identity: with an ``authenticator`` every route but health needs credentials it accepts (401
    ``unauthorized`` with ``WWW-Authenticate: Bearer`` otherwise; 503 when it cannot decide, for example
    because the identity provider's keys cannot be fetched), and each request is then authorised once,
    by :func:`~memory_core.domain.access.authorize`, on the scope it names, before the service is touched (403
    ``forbidden``, saying what is missing). Without one, every caller acts as the token holder (all
    actions allowed): for embedded callers that gate access themselves, such as ``memory-core serve``.

    Args:
        service: The memory service.
        max_body_bytes: Largest request body accepted.
        health_details: Optional extra facts for ``GET /health`` (queue depth, ...).
        authenticator: Turns request headers into a principal (``None``: no authentication).
        healthy: Decides from those facts whether the service works; ``False`` answers ``GET /health``
            with 503 and ``"status": "unhealthy"`` (``None``: always 200 ``ok``).
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        health_details: Callable[[], Mapping[str, Any]] | None = None,
        authenticator: Authenticator | None = None,
        healthy: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> None:
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.authenticator = authenticator
        self._health_details = health_details
        self._healthy = healthy
        self._openapi: dict[str, Any] | None = None
        self._handlers: dict[str, Handler] = {
            "search": self._search,
            "list": self._list,
            "get": self._get,
            "delete": self._delete,
            "export": self._export,
            "purge": self._purge,
            "post_turn": self._post_turn,
            "forgetting": self._forgetting,
            "users": self._users,
            "user_agents": self._user_agents,
            "forgetting_preview": self._forgetting_preview,
            "retention_curves": self._retention_curves,
            "health": self._health,
            "openapi": self._openapi_route,
        }

    # -- dispatch -------------------------------------------------------------------------------
    async def handle(self, request: ApiRequest) -> ApiResponse:
        """Route one request and turn every failure into a JSON error response."""
        method = request.method.upper()
        try:
            if len(request.body) > self.max_body_bytes:
                raise _HttpError(
                    413,
                    "payload_too_large",
                    f"the body is {len(request.body)} bytes; the maximum is {self.max_body_bytes}",
                    "body",
                )
            route, params = self._route(method, request.path)
            target = await self._admit(route, request, params)
            return await self._handlers[route.operation](request, target)
        except _HttpError as exc:
            return _error(exc.status, exc.code, exc.message, exc.field, **exc.headers)
        except AuthenticationError as exc:
            logger.info("%s %s: not authenticated: %s", method, request.path, exc)
            return _error(
                401, "unauthorized", str(exc), None, **{"WWW-Authenticate": _challenge(exc.error, str(exc))}
            )
        except ForbiddenError as exc:
            logger.info("%s %s: forbidden: %s", method, request.path, exc)
            return _error(
                403,
                "forbidden",
                str(exc),
                None,
                **{"WWW-Authenticate": _challenge("insufficient_scope", str(exc))},
            )
        except ValidationError as exc:
            return _error(422, "validation_error", exc.message, exc.field)
        except PydanticValidationError as exc:
            first = exc.errors(include_url=False)[0] if exc.errors() else {"loc": (), "msg": str(exc)}
            where = ".".join(str(p) for p in first.get("loc", ())) or None
            return _error(422, "validation_error", str(first.get("msg", "is invalid")), where)
        except NotFoundError as exc:
            return _error(404, "not_found", str(exc))
        except UnsupportedError as exc:
            return _error(501, "not_supported", str(exc))
        except ConflictError as exc:
            return _error(409, "conflict", str(exc))
        except PermanentError as exc:
            return _error(400, "bad_request", str(exc))
        except TransientError as exc:
            logger.warning("%s %s: transient failure: %s", method, request.path, exc)
            return _error(503, "unavailable", str(exc), None, **{"Retry-After": str(RETRY_AFTER_SECONDS)})
        except ConfigurationError as exc:
            logger.error("%s %s: configuration error: %s", method, request.path, exc)
            return _error(500, "configuration_error", str(exc))
        except Exception:
            logger.exception("%s %s failed", method, request.path)
            return _error(500, "internal_error", "the request failed unexpectedly; see the server log")

    async def _admit(self, route: _Route, request: ApiRequest, params: dict[str, str]) -> _Target:
        """Authenticate and authorise one request: the only gate between a route and the service.

        The caller is authenticated first (so an unknown caller learns nothing from validation), the
        route's target (the scope it acts on) is read, and the route's action is authorised on it.

        Raises:
            AuthenticationError: No acceptable credentials.
            ForbiddenError: The caller may not perform the route's action on that scope.
        """
        if route.anonymous:
            return route.target(request, params)
        principal = await self._authenticate(request)
        target = route.target(request, params)
        if route.action is not None:
            authorize(principal, route.action, user_id=target.user_id, agent_id=target.agent_id)
        return target

    async def _authenticate(self, request: ApiRequest) -> Principal:
        if self.authenticator is None:
            return _TOKEN_HOLDER
        return await self.authenticator.authenticate(request.headers)

    def _route(self, method: str, path: str) -> tuple[_Route, dict[str, str]]:
        raw = path.split("?", 1)[0]
        if not raw.startswith("/"):
            raise _HttpError(404, "no_route", f"no route for {path[:100]!r}")
        parts = [unquote(p, errors="replace") for p in raw[1:].split("/")]
        allowed: list[str] = []
        for route in _ROUTES:
            params = route.match(parts)
            if params is None:
                continue
            if route.method == method:
                return route, params
            allowed.append(route.method)
        if allowed:
            raise _HttpError(
                405,
                "method_not_allowed",
                f"{method} is not allowed on {raw[:100]}; use {', '.join(sorted(set(allowed)))}",
                None,
                {"Allow": ", ".join(sorted(set(allowed)))},
            )
        raise _HttpError(404, "no_route", f"no route for {raw[:100]!r}")

    # -- routes ---------------------------------------------------------------------------------
    async def _search(self, request: ApiRequest, target: _Target) -> ApiResponse:
        body: SearchRequest = target.body
        result = await self.service.search(
            Scope.of(body.user_id, body.agent_id), body.query, body.options(), recall=body.recall
        )
        return ApiResponse(200, search_response(result).model_dump(mode="json"))

    async def _list(self, request: ApiRequest, target: _Target) -> ApiResponse:
        query = _Query(request.query)
        scope = target.scope
        status = query.choice("status", MemoryStatus)
        statuses = None if status is None else [status]
        cursor = query.text("cursor", max_length=128)
        if cursor is not None:
            validate_memory_id(cursor, "cursor")
        limit = query.integer("limit", default=DEFAULT_LIST_LIMIT, low=1, high=MAX_LIST_LIMIT)
        assert limit is not None
        category = query.text("category", max_length=64)
        if category is not None:
            category = validate_category(category)
        kind = query.choice("kind", MemoryKind)
        order = query.choice("order", OrderBy)
        offset = query.integer("offset", default=None, low=0, high=MAX_BROWSE_OFFSET)
        if category is None and kind is None and order is None and offset is None:
            page = await self.service.list(scope, statuses=statuses, cursor=cursor, limit=limit)
            return ApiResponse(200, memory_list_response(page).model_dump(mode="json"))
        if cursor is not None:
            raise ValidationError(
                "cursor",
                "pages the listing by id; a filtered or sorted listing (category, kind, order, offset) "
                "pages with offset instead",
            )
        sorted_page = await self.service.browse(
            scope,
            statuses=statuses,
            category=category,
            kind=kind,
            order_by=order,
            offset=offset or 0,
            limit=min(limit, MAX_BROWSE_LIMIT),
        )
        return ApiResponse(200, sorted_list_response(sorted_page, offset or 0).model_dump(mode="json"))

    async def _users(self, request: ApiRequest, _: _Target) -> ApiResponse:
        query = _Query(request.query)
        cursor = query.scope_id("cursor", required=False)
        limit = query.integer("limit", default=DEFAULT_LIST_LIMIT, low=1, high=MAX_LIST_LIMIT)
        assert limit is not None
        users, next_cursor = await self.service.users(after=cursor, limit=limit)
        return ApiResponse(200, user_list_response(users, next_cursor).model_dump(mode="json"))

    async def _user_agents(self, request: ApiRequest, target: _Target) -> ApiResponse:
        user_id = str(target.user_id)
        agents = await self.service.agent_counts(user_id)
        return ApiResponse(200, agent_list_response(user_id, agents).model_dump(mode="json"))

    async def _forgetting_preview(self, request: ApiRequest, target: _Target) -> ApiResponse:
        query = _Query(request.query)
        limit = query.integer("limit", default=MAX_PREVIEW_LIMIT, low=1, high=MAX_PREVIEW_LIMIT)
        assert limit is not None
        cursor = query.text("cursor", max_length=128)
        if cursor is not None:
            validate_memory_id(cursor, "cursor")
        scope = target.scope
        at = self.service.now()
        report = await self.service.preview_forgetting(scope, limit=limit, cursor=cursor)
        preview = ForgettingPreviewResponse.model_validate(
            {**report.as_dict(), "user_id": scope.user_id, "agent_id": scope.agent_id, "at": at}
        )
        return ApiResponse(200, preview.model_dump(mode="json"))

    async def _retention_curves(self, request: ApiRequest, target: _Target) -> ApiResponse:
        query = _Query(request.query)
        raw = query.text("ids", required=True, max_length=MAX_CURVE_IDS * 129)
        ids = list(dict.fromkeys(validate_memory_id(i, "ids") for i in str(raw).split(",")))
        if len(ids) > MAX_CURVE_IDS:
            raise ValidationError("ids", f"names {len(ids)} memories; at most {MAX_CURVE_IDS} at once")
        days = query.integer("days", default=DEFAULT_CURVE_DAYS, low=1, high=MAX_CURVE_DAYS)
        assert days is not None
        scope = target.scope
        at = self.service.now()
        curves = await self.service.retention_curves(scope, ids, days=days)
        response = retention_curves_response(scope, at, days, self.service.policy, curves)
        return ApiResponse(200, response.model_dump(mode="json"))

    async def _get(self, request: ApiRequest, target: _Target) -> ApiResponse:
        scope, memory_id = target.scope, str(target.memory_id)
        record = await self.service.get(scope, memory_id)
        history = await self.service.history_of(scope, memory_id)
        return ApiResponse(200, memory_detail(record, history).model_dump(mode="json"))

    async def _delete(self, request: ApiRequest, target: _Target) -> ApiResponse:
        scope, memory_id = target.scope, str(target.memory_id)
        after = await self.service.delete(scope, memory_id, reason="deleted through the API")
        return ApiResponse(200, memory_view(after).model_dump(mode="json"))

    async def _export(self, request: ApiRequest, target: _Target) -> ApiResponse:
        user_id, agent_id = str(target.user_id), target.agent_id
        records = [r async for r in self.service.export(user_id, agent_id)]
        history = await self.service.export_history(user_id, agent_id)
        queued = await self.service.queued_messages(user_id, agent_id)
        response = export_response(user_id, agent_id, records, history, queued)
        return ApiResponse(200, response.model_dump(mode="json"))

    async def _purge(self, request: ApiRequest, target: _Target) -> ApiResponse:
        user_id, agent_id = str(target.user_id), target.agent_id
        if not _Query(request.query).boolean("confirm", default=False):
            raise ValidationError(
                "confirm",
                "purge removes memories and history physically and cannot be undone; add confirm=true",
            )
        report = await self.service.purge(user_id, agent_id)
        return ApiResponse(200, purge_response(report).model_dump(mode="json"))

    async def _post_turn(self, request: ApiRequest, target: _Target) -> ApiResponse:
        turn: Turn = target.body
        status = await self.service.publish_turn(turn)
        accepted = TurnAccepted(turn_id=turn.turn_id, session_id=session_id_for(turn.scope), status=status)
        return ApiResponse(202, accepted.model_dump(mode="json"))

    async def _forgetting(self, request: ApiRequest, _: _Target) -> ApiResponse:
        query = _Query(request.query)
        dry_run = query.boolean("dry_run", default=True)
        limit = query.integer("limit", default=DEFAULT_FORGET_LIMIT, low=1, high=MAX_FORGET_LIMIT)
        cursor = query.text("cursor", max_length=64)
        report = await self.service.apply_forgetting(dry_run=dry_run, limit=limit, cursor=cursor)
        return ApiResponse(200, forgetting_response(report).model_dump(mode="json"))

    async def _health(self, request: ApiRequest, _: _Target) -> ApiResponse:
        details = dict(self._health_details()) if self._health_details is not None else {}
        ok = self._healthy is None or self._healthy(details)
        return ApiResponse(
            200 if ok else 503,
            HealthResponse(status="ok" if ok else "unhealthy", version=__version__, details=details).model_dump(),
        )

    async def _openapi_route(self, request: ApiRequest, _: _Target) -> ApiResponse:
        return ApiResponse(200, self.openapi())

    # -- the OpenAPI document -------------------------------------------------------------------
    def openapi(self) -> dict[str, Any]:
        """The OpenAPI 3.1 document of every route, generated from the pydantic models."""
        if self._openapi is None:
            self._openapi = build_openapi(self.max_body_bytes)
        return json.loads(json.dumps(self._openapi))  # type: ignore[no-any-return]


def _param(
    name: str, where: str, schema: dict[str, Any], description: str, *, required: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "description": description,
        "schema": schema,
    }


def build_openapi(max_body_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """Build the OpenAPI document (paths below the ``/api`` server prefix)."""
    models: list[tuple[type[BaseModel], Any]] = [
        (SearchRequest, "validation"),
        (Turn, "validation"),
        (SearchResponse, "serialization"),
        (MemoryListResponse, "serialization"),
        (MemoryDetail, "serialization"),
        (MemoryView, "serialization"),
        (ExportResponse, "serialization"),
        (PurgeResponse, "serialization"),
        (TurnAccepted, "serialization"),
        (ForgettingResponse, "serialization"),
        (ForgettingPreviewResponse, "serialization"),
        (RetentionCurvesResponse, "serialization"),
        (UserListResponse, "serialization"),
        (AgentListResponse, "serialization"),
        (HealthResponse, "serialization"),
        (ErrorResponse, "serialization"),
    ]
    refs, top = models_json_schema(models, ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = top.get("$defs", {})

    def ref(model: type[BaseModel], mode: str = "serialization") -> dict[str, Any]:
        return dict(refs[(model, mode)])  # type: ignore[index]

    # Tighten the turn schema to what the validators accept (so generated requests are realistic).
    turn = schemas[ref(Turn, "validation")["$ref"].rsplit("/", 1)[1]]
    props = turn["properties"]
    props["schema"]["enum"] = [props["schema"]["default"]]
    props["turn_id"].update({"pattern": f"^{TURN_ID_PATTERN.pattern}$", "minLength": 1, "maxLength": 128})
    props["user_id"].update(_SCOPE_SCHEMA)
    props["agent_id"].update(_SCOPE_SCHEMA)
    props["session_id"]["anyOf"][0].update(_SCOPE_SCHEMA)

    scope_id = {"type": "string", **_SCOPE_SCHEMA}
    memory_id = {
        "type": "string",
        "pattern": f"^{MEMORY_ID_PATTERN.pattern}$",
        "minLength": 1,
        "maxLength": 128,
    }
    category = {"type": "string", **CATEGORY_SCHEMA}
    user_q = _param("user_id", "query", scope_id, "Owner of the memories", required=True)
    agent_q = _param("agent_id", "query", scope_id, "Agent of the memories", required=True)
    agent_opt = _param("agent_id", "query", scope_id, "Only this agent's memories (default: every agent)")
    memory_p = _param("memory_id", "path", memory_id, "Memory id")
    user_p = _param("user_id", "path", scope_id, "User id")

    def error(description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": ref(ErrorResponse)}}}

    def ok(model: type[BaseModel], description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": ref(model)}}}

    errors = {
        "400": error("The body is not a JSON object"),
        "413": error(f"The body is larger than {max_body_bytes} bytes"),
        "422": error("A value breaks a rule (the error names the field)"),
        "503": error("A dependency is temporarily unavailable; retry after `Retry-After` seconds"),
    }
    not_found = {"404": error("No such memory in this user's and agent's scope")}
    unauthorized = {
        "401": error(
            "No acceptable bearer token (when the API validates tokens); see `WWW-Authenticate`. The "
            "embedded server answers 401 on every route but health without its token"
        )
    }
    guarded = {
        **unauthorized,
        "403": error(
            "The caller's role, user id or agent binding does not cover this scope; the message says which"
        ),
    }

    def body(model: type[BaseModel]) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": ref(model, "validation")}}}

    def operation(route_id: str, **spec: Any) -> dict[str, Any]:
        route = next(r for r in _ROUTES if r.operation == route_id)
        return {"operationId": route_id, "summary": route.summary, **spec}

    paths: dict[str, Any] = {
        "/memories/search": {
            "post": operation(
                "search",
                requestBody=body(SearchRequest),
                responses={
                    "200": ok(SearchResponse, "Ranked hits with score breakdowns"),
                    **errors,
                    **guarded,
                },
            )
        },
        "/memories": {
            "get": operation(
                "list",
                parameters=[
                    user_q,
                    agent_q,
                    _param(
                        "status",
                        "query",
                        {"type": "string", "enum": [s.value for s in MemoryStatus]},
                        "Only this status",
                    ),
                    _param(
                        "cursor",
                        "query",
                        memory_id,
                        "Resume after this memory id (`next_cursor`); only without category, kind, order "
                        "and offset (422 otherwise)",
                    ),
                    _param(
                        "limit",
                        "query",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIST_LIMIT,
                            "default": DEFAULT_LIST_LIMIT,
                        },
                        "Page size",
                    ),
                    _param("category", "query", category, "Only this category (a filtered listing)"),
                    _param(
                        "kind",
                        "query",
                        {"type": "string", "enum": [k.value for k in MemoryKind]},
                        "Only this kind (a filtered listing)",
                    ),
                    _param(
                        "order",
                        "query",
                        {"type": "string", "enum": [o.value for o in OrderBy]},
                        "Sort by this field, then by id (a sorted listing; default: by id)",
                    ),
                    _param(
                        "offset",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": MAX_BROWSE_OFFSET},
                        "Skip this many memories of a filtered or sorted listing (`next_offset`)",
                    ),
                ],
                responses={
                    "200": ok(
                        MemoryListResponse,
                        "One page of memories: by id with `next_cursor`; with category, kind, order or "
                        "offset, a page of the filtered, sorted listing with `total` and `next_offset`",
                    ),
                    **errors,
                    **guarded,
                },
            )
        },
        "/users": {
            "get": operation(
                "users",
                parameters=[
                    _param("cursor", "query", scope_id, "Resume after this user id (`next_cursor`)"),
                    _param(
                        "limit",
                        "query",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIST_LIMIT,
                            "default": DEFAULT_LIST_LIMIT,
                        },
                        "Page size",
                    ),
                ],
                responses={
                    "200": ok(UserListResponse, "One page of users, by id, with counts by status"),
                    "501": error(
                        "This store cannot list its users (Azure AI Search: `user_id` is not facetable); "
                        "open a user by id"
                    ),
                    **errors,
                    **guarded,
                },
            )
        },
        "/users/{user_id}/agents": {
            "get": operation(
                "user_agents",
                parameters=[user_p],
                responses={
                    "200": ok(AgentListResponse, "Every agent holding memories of the user, with counts"),
                    **errors,
                    **guarded,
                },
            )
        },
        "/forgetting/preview": {
            "get": operation(
                "forgetting_preview",
                parameters=[
                    user_q,
                    agent_q,
                    _param(
                        "limit",
                        "query",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_PREVIEW_LIMIT,
                            "default": MAX_PREVIEW_LIMIT,
                        },
                        "Memories read at most",
                    ),
                    _param("cursor", "query", memory_id, "Resume after this memory id (`next_cursor`)"),
                ],
                responses={
                    "200": ok(
                        ForgettingPreviewResponse,
                        "Counts, and every change the policy would make now (status changes, then rescores)",
                    ),
                    **errors,
                    **guarded,
                },
            )
        },
        "/forgetting/curves": {
            "get": operation(
                "retention_curves",
                parameters=[
                    user_q,
                    agent_q,
                    _param(
                        "ids",
                        "query",
                        {
                            "type": "string",
                            "pattern": f"^{MEMORY_ID_PATTERN.pattern}(,{MEMORY_ID_PATTERN.pattern})*$",
                            "minLength": 1,
                            "maxLength": MAX_CURVE_IDS * 129,
                        },
                        f"Memory ids, comma-separated (at most {MAX_CURVE_IDS})",
                        required=True,
                    ),
                    _param(
                        "days",
                        "query",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_CURVE_DAYS,
                            "default": DEFAULT_CURVE_DAYS,
                        },
                        "How many days ahead",
                    ),
                ],
                responses={
                    "200": ok(RetentionCurvesResponse, "Each memory's retention curve and the policy"),
                    **not_found,
                    **errors,
                    **guarded,
                },
            )
        },
        "/memories/{memory_id}": {
            "get": operation(
                "get",
                parameters=[memory_p, user_q, agent_q],
                responses={
                    "200": ok(MemoryDetail, "The memory and its history"),
                    **not_found,
                    **errors,
                    **guarded,
                },
            ),
            "delete": operation(
                "delete",
                parameters=[memory_p, user_q, agent_q],
                responses={
                    "200": ok(MemoryView, "The memory, now `deleted`"),
                    **not_found,
                    **errors,
                    **guarded,
                },
            ),
        },
        "/users/{user_id}/export": {
            "get": operation(
                "export",
                parameters=[user_p, agent_opt],
                responses={
                    "200": ok(
                        ExportResponse,
                        "Every record (embeddings and provenance included), the decision history of the "
                        "exported scopes, and the user's messages still on the embedded queue",
                    ),
                    **errors,
                    **guarded,
                },
            )
        },
        "/users/{user_id}": {
            "delete": operation(
                "purge",
                parameters=[
                    user_p,
                    agent_opt,
                    _param(
                        "confirm", "query", {"type": "boolean", "enum": [True]}, "Must be true", required=True
                    ),
                ],
                responses={
                    "200": ok(PurgeResponse, "What was removed, and the tombstone that drops replays"),
                    **errors,
                    **guarded,
                },
            )
        },
        "/turns": {
            "post": operation(
                "post_turn",
                requestBody=body(Turn),
                responses={
                    "202": ok(TurnAccepted, "Queued on the scope's ordered session"),
                    **errors,
                    **guarded,
                },
            )
        },
        "/forgetting": {
            "post": operation(
                "forgetting",
                parameters=[
                    _param("dry_run", "query", {"type": "boolean", "default": True}, "Report only (default)"),
                    _param(
                        "limit",
                        "query",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_FORGET_LIMIT,
                            "default": DEFAULT_FORGET_LIMIT,
                        },
                        "Memories scanned at most",
                    ),
                    _param(
                        "cursor",
                        "query",
                        {"type": "string", "pattern": "^[A-Za-z0-9_\\-]{1,64}$"},
                        "Resume an earlier run: its `next_cursor` (opaque and store-specific; "
                        "422 when this store did not issue it)",
                    ),
                ],
                responses={
                    "200": ok(ForgettingResponse, "Counts and the status changes"),
                    **errors,
                    **guarded,
                },
            )
        },
        "/health": {
            "get": operation(
                "health",
                security=[],
                responses={
                    "200": ok(HealthResponse, "Alive (`status` is `ok`)"),
                    "503": ok(
                        HealthResponse,
                        "Unhealthy (`status` is `unhealthy`): messages wait and no worker drains the queue; "
                        "`details.problem` says why",
                    ),
                },
            )
        },
        "/openapi.json": {
            "get": operation(
                "openapi",
                responses={
                    "200": {
                        "description": "This document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **unauthorized,
                },
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memory-core",
            "version": __version__,
            "description": "Long-term memory for AI agents. The same routes and JSON locally "
            '(`memory-core serve`) and in Azure Functions. Errors: `{"error": {"code", "message", "field"}}`.',
        },
        "servers": [{"url": "/api"}],
        # A bearer token where the deployment requires one; `memory-core serve` on loopback without a
        # token requires none, hence the empty alternative.
        "security": [{"bearer": []}, {}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A Microsoft Entra ID access token for the API (Azure, when "
                    "MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE are set), or MEMORY_API_TOKEN "
                    "(`memory-core serve`). Roles: Memory.Agent, Memory.User (or the Memory.ReadWrite "
                    "scope), Memory.Admin.",
                }
            },
        },
    }
