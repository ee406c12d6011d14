"""Wire views of memories, searches, listings, turns, health and errors, and their builders from domain objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from memory_core.domain.messages import HistoryEntry, Turn
from memory_core.domain.records import DEFAULT_AGENT_ID, MemoryKind, MemoryRecord, MemoryStatus, Provenance
from memory_core.domain.search import (
    MemorySearchOptions,
    RankingProfile,
    ScoreBreakdown,
    SearchMode,
    SearchResult,
)
from memory_core.domain.validation import (
    CATEGORY_PATTERN,
    MAX_MEMORY_CHARS,
    RESERVED_METADATA_KEYS,
    SCOPE_ID_PATTERN,
    AgentId,
    UserId,
    parse_model,
)

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.ports import Page, SortedPage, StatusCounts

__all__ = [
    "CATEGORY_SCHEMA",
    "SCOPE_SCHEMA",
    "AgentListResponse",
    "AgentSummary",
    "ErrorDetail",
    "ErrorResponse",
    "HealthResponse",
    "MemoryDetail",
    "MemoryListResponse",
    "MemoryView",
    "SearchHitView",
    "SearchRequest",
    "SearchResponse",
    "StatusCountsView",
    "TurnAccepted",
    "UserListResponse",
    "UserSummary",
    "agent_list_response",
    "memory_detail",
    "memory_list_response",
    "memory_record",
    "memory_view",
    "search_response",
    "sorted_list_response",
    "user_list_response",
]

#: A category in the OpenAPI document: the model's rule, letters of any script, digits, ``_ . -``
#: (``\w`` is Unicode here, as in Python; an ECMA-262 validator reads it as ASCII, hence the description).
CATEGORY_SCHEMA: dict[str, JsonValue] = {
    "pattern": f"^{CATEGORY_PATTERN.pattern}$",
    "description": "1-64 letters (any script, e.g. 食事), digits, `_`, `.` or `-`; compared lower-cased",
}
#: A user or agent id in the OpenAPI document.
SCOPE_SCHEMA: dict[str, JsonValue] = {
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
    valid_from: str | None = None
    valid_until: str | None = None
    superseded_by: str | None = None
    event_at: str | None = Field(
        default=None,
        description="When what the memory says happened or will happen, as the user stated it: the first "
        "instant of the span (null: it states no time).",
    )
    event_until: str | None = Field(
        default=None, description="The first instant after that span (exclusive)."
    )
    metadata: dict[str, Any]
    provenance: list[Provenance]


class SearchHitView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory: MemoryView
    score: float
    reranker_score: float | None
    breakdown: ScoreBreakdown
    relevance: float | None = Field(
        default=None,
        description="How well the memory answers the query, 0-1, comparable across queries "
        "(null: the embedder has no calibration, or the search used no vector).",
    )


class SearchRequest(MemorySearchOptions):
    """Body of ``POST /api/memories/search``: the scope, the query, and every search option.

    The options are :class:`MemorySearchOptions`' own fields (inherited, so a new option is part of
    the request at once), with the HTTP contract's tighter bounds where it has them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: UserId = Field(json_schema_extra=SCOPE_SCHEMA)
    agent_id: AgentId = Field(default=DEFAULT_AGENT_ID, json_schema_extra=SCOPE_SCHEMA)
    query: str = Field(max_length=4000)
    top: int = Field(default=5, ge=1, le=100)
    category: str | None = Field(default=None, json_schema_extra=CATEGORY_SCHEMA)
    min_importance: float | None = Field(default=None, ge=0, le=1)
    min_retention_score: float | None = Field(default=None, ge=0, le=1)
    min_score: float | None = Field(
        default=None, ge=0, le=1, description="Only memories at least this relevant (0-1, a hit's relevance)."
    )
    filters: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Conditions on fields and metadata in Mem0's syntax, inside the scope: {\"AND\": [...]}, "
            "{\"OR\": [...]}, {\"field\": value} or {\"field\": {\"eq|ne|gt|gte|lt|lte|in|nin|contains\": value}}; "
            "a metadata key is written metadata.<key>, the session run_id (422 names a bad field or operator)."
        ),
    )
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


class MemoryDetail(MemoryView):
    """``GET /api/memories/{memory_id}``: the memory and every recorded change to it, oldest first."""

    history: list[HistoryEntry]


class AddMemoryRequest(Turn):
    """``POST /api/memories``: a turn (as ``POST /api/turns`` takes it: chat-API messages, ``turn_id``,
    ``occurred_at`` and ``agent_id`` optional) to add now, and whether to extract from it."""

    infer: bool = Field(
        default=True,
        description="true: extract and consolidate what is worth keeping; false: store each user "
        "message as given (verbatim)",
    )


class AddMemoryResponse(BaseModel):
    """``POST /api/memories``: what happened to the turn, and every decision in order."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str
    user_id: str
    agent_id: str
    status: str = Field(
        description="`ingested`, `resumed`, `duplicate` (this turn id was already added) or `purged`"
    )
    extraction_path: str | None = None
    fallback_reason: str | None = None
    decisions: list[dict[str, Any]]


class UpdateMemoryRequest(BaseModel):
    """``PATCH /api/memories/{memory_id}``: the memory's new text, and metadata keys to set."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        min_length=1,
        max_length=MAX_MEMORY_CHARS,
        json_schema_extra={"pattern": "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*[^\\s\\x00-\\x1f\\x7f][^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"},
    )
    metadata: dict[str, JsonValue] | None = Field(
        default=None,
        json_schema_extra={
            "propertyNames": {
                "pattern": "^[^\\x00-\\x1f\\x7f]{1,128}$",
                "not": {"enum": [key for key in sorted(RESERVED_METADATA_KEYS)]},
            }
        },
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

    status: Literal["ok", "degraded", "unhealthy"] = Field(
        description="`ok` (HTTP 200); `degraded` (HTTP 200): it works, but something needs looking at "
        "(`details.degraded` says what, such as a damaged queue file); or `unhealthy` (HTTP 503): ingestion has "
        "stopped or the store file is damaged (`details.problem` says why)"
    )
    version: str
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="Facts of the deployment: locally `ingestion` (`ok`, `stopped`, `off`), `queue`, `workers` "
        "and `files` (the integrity of the store's and the queue's files: `ok`, `damaged`, `unchecked`)",
    )


class Problem(BaseModel):
    """One problem of a request that was refused as invalid: the field (a dotted path) and what is wrong."""

    model_config = ConfigDict(extra="forbid")

    field: str
    message: str


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str
    field: str | None = None
    #: Every problem of an invalid request (``validation_error``), the first being ``field``'s; left
    #: out of other errors.
    problems: list[Problem] | None = None


class ErrorResponse(BaseModel):
    """Every error the API returns: ``{"error": {"code", "message", "field"}}``, and ``problems`` (each
    ``{"field", "message"}``) when the request was invalid."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


def memory_view(record: MemoryRecord) -> MemoryView:
    data = record.to_json_dict(include_embedding=False)
    return MemoryView.model_validate(data)


def search_response(result: SearchResult) -> SearchResponse:
    hits = [{**hit.model_dump(exclude={"record"}), "memory": memory_view(hit.record)} for hit in result.hits]
    return SearchResponse.model_validate({**result.model_dump(exclude={"hits"}), "hits": hits})


def memory_record(view: MemoryView) -> MemoryRecord:
    """The :class:`MemoryRecord` a view (or a :class:`MemoryDetail`) shows, without its embedding
    (the inverse of :func:`memory_view`).

    Raises:
        ValidationError: The memory breaks a rule of the domain (names the field).
    """
    return parse_model(MemoryRecord, view.model_dump(include=set(MemoryView.model_fields)))


def search_result(response: SearchResponse) -> SearchResult:
    """The :class:`SearchResult` a search response carries (the inverse of :func:`search_response`).

    Raises:
        ValidationError: A memory of the response breaks a rule of the domain (names the field).
    """
    hits = [
        {**hit.model_dump(exclude={"memory"}), "record": memory_record(hit.memory)}
        for hit in response.hits
    ]
    return parse_model(SearchResult, {**response.model_dump(exclude={"hits"}), "hits": hits})


def memory_list_response(page: Page) -> MemoryListResponse:
    return MemoryListResponse(memories=[memory_view(r) for r in page.records], next_cursor=page.next_cursor)


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


def memory_detail(record: MemoryRecord, history: list[HistoryEntry]) -> MemoryDetail:
    """``GET /api/memories/{memory_id}``: the memory and its history."""
    return MemoryDetail(**memory_view(record).model_dump(), history=history)
