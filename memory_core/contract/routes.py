"""The route table of the HTTP contract, as data, and the paths built from it.

Every route is written here once: its method and path, its OpenAPI operation, the action it is
authorised as and where its scope is read from, the Azure Functions function that serves it, and the
parameters and answers the OpenAPI document lists. The dispatcher admits requests through
:data:`ROUTES`, ``function_app.py`` registers :func:`http_functions`, the OpenAPI document is generated
from it, and clients build their paths with :func:`api_path`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote

from memory_core.domain.access import Action

__all__ = [
    "API_PREFIX",
    "BUSY",
    "INSPECTOR",
    "ROUTES",
    "HttpFunction",
    "Reply",
    "Route",
    "Target",
    "api_path",
    "http_functions",
    "route",
]

#: Where the API is served, on the embedded server and in Azure Functions alike.
API_PREFIX = "/api"


class Target(StrEnum):
    """Where a route reads the scope it acts on (the dispatcher has one reader for each)."""

    NONE = "none"
    """No single scope (administrators, or any caller)."""
    SEARCH_BODY = "search_body"
    """The ``user_id`` and ``agent_id`` of the search request body."""
    QUERY_SCOPE = "query_scope"
    """The ``user_id`` and ``agent_id`` query parameters."""
    MEMORY = "memory"
    """The ``{memory_id}`` of the path in the scope of the query parameters."""
    PATH_USER = "path_user"
    """The ``{user_id}`` of the path alone (every agent of the user)."""
    USER = "user"
    """The ``{user_id}`` of the path and an optional ``agent_id`` query parameter."""
    ADD_BODY = "add_body"
    """The ``user_id`` and ``agent_id`` of the body of memories to add (a turn, and ``infer``)."""
    MEMORY_BODY = "memory_body"
    """The ``{memory_id}`` of the path in the scope of the query parameters, and a body of changes."""
    TURN_BODY = "turn_body"
    """The ``user_id`` and ``agent_id`` of the turn body."""
    ENTITY = "entity"
    """The ``{entity_id}`` of the path in the scope of the query parameters."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer of a route as the OpenAPI document lists it.

    Attributes:
        status: The HTTP status.
        description: What it means.
        model: The name of the response model (``None``: any JSON object).
    """

    status: int
    description: str
    model: str | None = "ErrorResponse"


@dataclass(frozen=True, slots=True)
class Route:
    """One route of the contract and how it is guarded.

    Attributes:
        method: The HTTP method.
        segments: The path below :data:`API_PREFIX`; ``{name}`` segments are parameters.
        operation: The handler's name (and the OpenAPI ``operationId``).
        summary: One line for the OpenAPI document.
        action: What :func:`~memory_core.domain.access.authorize` is asked about (``None``: any
            authenticated caller, or anyone when ``anonymous``).
        target: Where the scope the request acts on is read from, before anything runs.
        anonymous: Served without authentication (health only).
        function: The Azure Functions function serving it (default: ``operation``); routes of one
            function share its path.
        query: The query parameters, as names of :data:`memory_core.contract.parameters.QUERY`.
        body: The name of the request body model, if it has one.
        replies: The documented answers but the errors every guarded route shares.
        telemetry: The operation the Functions app records the exchange as, if any.
        heavy: A heavy operation (it reads or removes many memories): the API serves a bounded number
            of them at once and refuses more with 429 (``MEMORY_HEAVY_OPERATIONS``); searches are never
            among them.
    """

    method: str
    segments: tuple[str, ...]
    operation: str
    summary: str
    action: Action | None
    target: Target
    anonymous: bool = False
    function: str = ""
    query: tuple[str, ...] = ()
    body: str | None = None
    replies: tuple[Reply, ...] = ()
    telemetry: str | None = None
    heavy: bool = False

    def __post_init__(self) -> None:
        if self.anonymous and self.action is not None:
            raise ValueError(f"{self.operation}: an anonymous route cannot be authorised")

    @property
    def path(self) -> str:
        """The path template below :data:`API_PREFIX` (``/memories/{memory_id}``)."""
        return "/" + "/".join(self.segments)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The names of the path parameters, in order."""
        return tuple(s[1:-1] for s in self.segments if s.startswith("{"))

    @property
    def function_name(self) -> str:
        return self.function or self.operation

    def match(self, parts: list[str]) -> dict[str, str] | None:
        """The path parameters when ``parts`` (decoded segments) are this route's path, else ``None``."""
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

    def path_for(self, params: Mapping[str, str]) -> str:
        """The concrete path below :data:`API_PREFIX`, each parameter percent-quoted (``/`` included).

        Raises:
            KeyError: A path parameter is missing from ``params``.
        """
        return "/" + "/".join(
            quote(params[s[1:-1]], safe="") if s.startswith("{") else s for s in self.segments
        )


#: The memory a route names does not exist in the caller's scope.
_NOT_FOUND = Reply(404, "No such memory in this user's and agent's scope")
_SCOPE = ("user_id", "agent_id")
#: The entity a route names is not one of the caller's scope.
_NO_ENTITY = Reply(404, "No such entity in this user's and agent's scope")
#: The store keeps no entity index.
_NO_INDEX = Reply(501, "This store keeps no entity index (the embedded and Azure AI Search stores do)")
#: Too many heavy operations are running (:attr:`Route.heavy`).
BUSY = Reply(
    429,
    "Too many heavy operations (export, purge, forgetting) are running; retry after `Retry-After` seconds",
)

#: Every route, with the action it is authorised as and where its scope comes from. The dispatcher
#: admits a request through this table only, so a route cannot be served without its check.
ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        ("memories", "search"),
        "search",
        "Ranked memories for a query (the `before_run` call)",
        Action.SEARCH,
        Target.SEARCH_BODY,
        function="search_memories",
        body="SearchRequest",
        replies=(Reply(200, "Ranked hits with score breakdowns", "SearchResponse"),),
        telemetry="memory.search",
    ),
    Route(
        "GET",
        ("memories",),
        "list",
        "Memories of a user and agent, by id, keyset-paged",
        Action.READ,
        Target.QUERY_SCOPE,
        function="list_memories",
        query=(
            *_SCOPE, "status", "cursor:list", "limit:page", "filters", "category", "kind", "order", "offset",
            "include_superseded",
        ),
        replies=(
            Reply(
                200,
                "One page of memories: by id with `next_cursor`; with category, kind, order or offset, a "
                "page of the filtered, sorted listing with `total` and `next_offset`",
                "MemoryListResponse",
            ),
        ),
    ),
    Route(
        "POST",
        ("memories",),
        "add",
        "Add memories from a conversation now: extracted and consolidated (infer=true), or its user "
        "messages stored as given (infer=false)",
        Action.ADD,
        Target.ADD_BODY,
        function="list_memories",
        body="AddMemoryRequest",
        replies=(Reply(200, "The turn's id and status and every decision, in order", "AddMemoryResponse"),),
    ),
    Route(
        "PATCH",
        ("memories", "{memory_id}"),
        "update",
        "Correct one memory's text (re-embedded; metadata keys merged), recorded in its history",
        Action.UPDATE,
        Target.MEMORY_BODY,
        function="memory_item",
        query=_SCOPE,
        body="UpdateMemoryRequest",
        replies=(Reply(200, "The memory after the change", "MemoryView"), _NOT_FOUND),
    ),
    Route(
        "GET",
        ("memories", "{memory_id}"),
        "get",
        "One memory and its history",
        Action.READ,
        Target.MEMORY,
        function="memory_item",
        query=_SCOPE,
        replies=(Reply(200, "The memory and its history", "MemoryDetail"), _NOT_FOUND),
    ),
    Route(
        "DELETE",
        ("memories", "{memory_id}"),
        "delete",
        "Soft-delete one memory (recorded in its history)",
        Action.DELETE,
        Target.MEMORY,
        function="memory_item",
        query=_SCOPE,
        replies=(Reply(200, "The memory, now `deleted`", "MemoryView"), _NOT_FOUND),
    ),
    Route(
        "GET",
        ("users", "{user_id}", "export"),
        "export",
        "Every record of a user (every field, provenance included), the decision history and queued messages",
        Action.EXPORT,
        Target.USER,
        function="export_user",
        query=("agent_id:optional", "cursor:export", "limit:export", "include_vectors"),
        replies=(
            Reply(
                200,
                "One page: records (provenance included; embeddings with `include_vectors=true`), then the "
                "decision history of the exported scopes, agent by agent, and on the first page the user's "
                "messages still on the embedded queue; `next_cursor` fetches the next page (`null`: the last)",
                "ExportResponse",
            ),
            BUSY,
        ),
        heavy=True,
    ),
    Route(
        "DELETE",
        ("users", "{user_id}"),
        "purge",
        "Physically remove a user's memories, history and queued messages; later replays of them are dropped",
        Action.PURGE,
        Target.USER,
        function="purge_user",
        query=("agent_id:optional", "confirm"),
        replies=(Reply(200, "What was removed, and the tombstone that drops replays", "PurgeResponse"), BUSY),
        heavy=True,
    ),
    Route(
        "GET",
        ("entities",),
        "entities",
        "The people, pets, places and organisations a user's and agent's memories name",
        Action.READ,
        Target.QUERY_SCOPE,
        function="list_entities",
        query=_SCOPE,
        replies=(Reply(200, "Every entity of the scope, by kind then name, with its number of memories", "EntityListResponse"), _NO_INDEX),
    ),
    Route(
        "GET",
        ("entities", "{entity_id}"),
        "entity",
        "One entity and the memories that name it",
        Action.READ,
        Target.ENTITY,
        function="entity_item",
        query=_SCOPE,
        replies=(Reply(200, "The entity and its memories, newest first", "EntityDetail"), _NO_ENTITY, _NO_INDEX),
    ),
    Route(
        "DELETE",
        ("entities", "{entity_id}"),
        "forget_entity",
        "Forget an entity: soft-delete every memory that names it (each recorded in its history), and with "
        "the last of them the entity",
        Action.DELETE,
        Target.ENTITY,
        function="entity_item",
        query=_SCOPE,
        replies=(
            Reply(200, "The entity as it was, and its memories, now `deleted`", "EntityForgetResponse"),
            _NO_ENTITY,
            _NO_INDEX,
            BUSY,
        ),
        heavy=True,
    ),
    Route(
        "GET",
        ("entities", "{entity_id}", "export"),
        "export_entity",
        "An entity's memories (every field, provenance included) and their decision history, as the "
        "user's export writes them",
        Action.EXPORT,
        Target.ENTITY,
        query=(*_SCOPE, "include_vectors"),
        replies=(
            Reply(
                200,
                "The export of the entity's memories in one page (`next_cursor` is `null`; nothing queued)",
                "ExportResponse",
            ),
            _NO_ENTITY,
            _NO_INDEX,
            BUSY,
        ),
        heavy=True,
    ),
    Route(
        "POST",
        ("turns",),
        "post_turn",
        "Queue a conversation turn (turn.v1) for ingestion",
        Action.POST_TURN,
        Target.TURN_BODY,
        body="Turn",
        replies=(Reply(202, "Queued on the scope's ordered session", "TurnAccepted"),),
    ),
    Route(
        "POST",
        ("forgetting",),
        "forgetting",
        "Run the forgetting policy (dry run unless dry_run=false)",
        Action.FORGET,
        Target.NONE,
        function="run_forgetting_http",
        query=("dry_run", "limit:forgetting", "cursor:forgetting"),
        replies=(Reply(200, "Counts and the status changes", "ForgettingResponse"), BUSY),
        telemetry="memory.forgetting",
        heavy=True,
    ),
    Route(
        "GET",
        ("users",),
        "users",
        "Users holding memories, with counts by status (every user: administrators only)",
        Action.READ,
        Target.NONE,
        function="list_users",
        query=("cursor:user", "limit:page"),
        replies=(
            Reply(200, "One page of users, by id, with counts by status", "UserListResponse"),
            Reply(
                501,
                "This store cannot list its users (Azure AI Search: `user_id` is not facetable); open a "
                "user by id",
            ),
        ),
    ),
    Route(
        "GET",
        ("users", "{user_id}", "agents"),
        "user_agents",
        "The agents holding memories of a user, with counts by status",
        Action.READ,
        Target.PATH_USER,
        replies=(Reply(200, "Every agent holding memories of the user, with counts", "AgentListResponse"),),
    ),
    Route(
        "GET",
        ("forgetting", "preview"),
        "forgetting_preview",
        "What forgetting would do to one user's and agent's memories now (a dry run of that scope)",
        Action.READ,
        Target.QUERY_SCOPE,
        query=(*_SCOPE, "limit:preview", "cursor:memory"),
        replies=(
            Reply(
                200,
                "Counts, and every change the policy would make now (status changes, then rescores)",
                "ForgettingPreviewResponse",
            ),
            BUSY,
        ),
        heavy=True,
    ),
    Route(
        "GET",
        ("forgetting", "curves"),
        "retention_curves",
        "How memories fade from now on under the forgetting policy",
        Action.READ,
        Target.QUERY_SCOPE,
        query=(*_SCOPE, "ids", "days"),
        replies=(
            Reply(200, "Each memory's retention curve and the policy", "RetentionCurvesResponse"),
            _NOT_FOUND,
        ),
    ),
    Route(
        "GET",
        ("health",),
        "health",
        "Liveness",
        None,
        Target.NONE,
        anonymous=True,
        replies=(
            Reply(200, "Alive (`status` is `ok`, or `degraded`: `details.degraded` says what to look at)", "HealthResponse"),
            Reply(
                503,
                "Unhealthy (`status` is `unhealthy`): messages wait and no worker drains the queue, or the "
                "store file is damaged; `details.problem` says why",
                "HealthResponse",
            ),
        ),
    ),
    Route(
        "GET",
        ("openapi.json",),
        "openapi",
        "This OpenAPI document",
        None,
        Target.NONE,
        function="openapi_document",
        replies=(Reply(200, "This document", None),),
    ),
)


@functools.cache
def _by_operation() -> dict[str, Route]:
    return {r.operation: r for r in ROUTES}


def route(operation: str) -> Route:
    """The route of an operation (``"search"``, ``"get"``, ...).

    Raises:
        KeyError: No route has this operation.
    """
    return _by_operation()[operation]


def api_path(operation: str, /, **params: str) -> str:
    """The path of an operation from the server root, its parameters percent-quoted.

    ``api_path("get", memory_id="m/1")`` is ``"/api/memories/m%2F1"``; ``api_path("search")`` is
    ``"/api/memories/search"``. Query strings are the caller's.

    Raises:
        KeyError: An unknown operation, or a path parameter missing.
        TypeError: A parameter the path does not have.
    """
    target = route(operation)
    extra = set(params) - set(target.parameters)
    if extra:
        raise TypeError(f"{operation}: the path has no parameter {', '.join(sorted(extra))}")
    return API_PREFIX + target.path_for(params)


@dataclass(frozen=True, slots=True)
class HttpFunction:
    """One HTTP function of the Azure Functions app.

    Attributes:
        name: The function name.
        route: Its route template below :data:`API_PREFIX`, as the Functions host writes it.
        methods: The HTTP methods bound to it.
        anonymous: Bound without the Functions key (otherwise the app's level applies).
        routes: The routes of the contract it serves (none: the inspector's static files).
    """

    name: str
    route: str
    methods: tuple[str, ...]
    anonymous: bool = False
    routes: tuple[Route, ...] = ()

    def serving(self, method: str) -> Route | None:
        """The route of ``method`` (any case) among :attr:`routes`, or ``None``."""
        return next((r for r in self.routes if r.method == method.upper()), None)


#: The memory inspector's page and assets (static files that hold no data, hence anonymous).
INSPECTOR = HttpFunction("inspector", "inspector/{*path}", ("GET",), anonymous=True)


@functools.cache
def http_functions() -> tuple[HttpFunction, ...]:
    """The HTTP functions of the contract: one per :attr:`Route.function_name`, in table order."""
    groups: dict[str, list[Route]] = {}
    for r in ROUTES:
        groups.setdefault(r.function_name, []).append(r)
    return tuple(
        HttpFunction(name, rs[0].path[1:], tuple(r.method for r in rs), rs[0].anonymous, tuple(rs))
        for name, rs in groups.items()
    )
