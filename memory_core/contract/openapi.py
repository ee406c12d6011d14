"""The OpenAPI 3.1 document of the HTTP contract, generated from the route table and the wire views."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from memory_core.contract import admin_views, entity_views, views
from memory_core.contract.parameters import MAX_BODY_BYTES, PATH, QUERY
from memory_core.contract.routes import API_PREFIX, ROUTES, Reply, Route
from memory_core.contract.views import SCOPE_SCHEMA
from memory_core.domain.messages import TURN_ID_PATTERN, Turn
from memory_core.version import __version__

__all__ = ["MODELS", "build_openapi"]

#: The models the routes name (request bodies and answers), by name.
MODELS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (
        views.SearchRequest,
        Turn,
        views.SearchResponse,
        views.MemoryListResponse,
        views.MemoryDetail,
        views.MemoryView,
        admin_views.ExportResponse,
        admin_views.PurgeResponse,
        views.TurnAccepted,
        views.AddMemoryRequest,
        views.AddMemoryResponse,
        views.UpdateMemoryRequest,
        admin_views.ForgettingResponse,
        admin_views.ForgettingPreviewResponse,
        admin_views.RetentionCurvesResponse,
        views.UserListResponse,
        views.AgentListResponse,
        entity_views.EntityListResponse,
        entity_views.EntityDetail,
        entity_views.EntityForgetResponse,
        views.HealthResponse,
        views.ErrorResponse,
    )
}
_INFO = {
    "title": "memory-core",
    "description": "Long-term memory for AI agents. The same routes and JSON locally "
    '(`memory-core serve`) and in Azure Functions. Errors: `{"error": {"code", "message", "field"}}`, '
    'with every problem of an invalid request in `problems` (`[{"field", "message"}]`).',
}
_BEARER = {
    "type": "http",
    "scheme": "bearer",
    "bearerFormat": "JWT",
    "description": "A Microsoft Entra ID access token for the API (Azure, when "
    "MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE are set), or MEMORY_API_TOKEN "
    "(`memory-core serve`). Roles: Memory.Agent, Memory.User (or the Memory.ReadWrite "
    "scope), Memory.Admin.",
}
_UNAUTHORIZED = Reply(
    401,
    "No acceptable bearer token (when the API validates tokens); see `WWW-Authenticate`. The "
    "embedded server answers 401 on every route but health without its token",
)
_FORBIDDEN = Reply(
    403, "The caller's role, user id or agent binding does not cover this scope; the message says which"
)


def _replies(route: Route, max_body_bytes: int) -> list[Reply]:
    """Every answer of a route: its own, and the errors of authentication and authorisation."""
    if route.anonymous:
        return list(route.replies)
    if route.action is None:
        return [*route.replies, _UNAUTHORIZED]
    return [
        *route.replies,
        Reply(400, "The body is not a JSON object"),
        Reply(413, f"The body is larger than {max_body_bytes} bytes"),
        Reply(422, "A value breaks a rule (the error names the field)"),
        Reply(503, "A dependency is temporarily unavailable; retry after `Retry-After` seconds"),
        _UNAUTHORIZED,
        _FORBIDDEN,
    ]


class _Document:
    """One build of the document: the component schemas and the operations that refer to them."""

    def __init__(self, max_body_bytes: int) -> None:
        self.replies = {r.operation: _replies(r, max_body_bytes) for r in ROUTES}
        bodies: list[tuple[str, JsonSchemaMode]] = [(r.body, "validation") for r in ROUTES if r.body]
        answers: list[tuple[str, JsonSchemaMode]] = [
            (reply.model, "serialization") for rs in self.replies.values() for reply in rs if reply.model
        ]
        self.refs, top = models_json_schema(
            [(MODELS[name], mode) for name, mode in dict.fromkeys([*bodies, *answers])],
            ref_template="#/components/schemas/{model}",
        )
        self.schemas: dict[str, Any] = top.get("$defs", {})
        self._tighten_turn()

    def ref(self, name: str, mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
        return dict(self.refs[(MODELS[name], mode)])

    def _tighten_turn(self) -> None:
        """The turn schemas as the validators accept them (so generated requests are realistic)."""
        for name in ("Turn", "AddMemoryRequest"):
            schema = self.schemas[self.ref(name, "validation")["$ref"].rsplit("/", 1)[1]]
            props = schema["properties"]
            props["schema"]["enum"] = [props["schema"]["default"]]
            props["turn_id"].update({"pattern": f"^{TURN_ID_PATTERN.pattern}$", "minLength": 1, "maxLength": 128})
            props["user_id"].update(SCOPE_SCHEMA)
            props["agent_id"].update(SCOPE_SCHEMA)
            props["session_id"]["anyOf"][0].update(SCOPE_SCHEMA)
            # Optional on the way in: a turn without them is dated on receipt, its id derived from it.
            optional = {"turn_id", "occurred_at"} | ({"agent_id"} if name == "AddMemoryRequest" else set())
            schema["required"] = [field for field in schema["required"] if field not in optional]
            props["turn_id"]["description"] = (
                "Default: derived from the turn (user, agent, session, occurred_at when given, messages), "
                "so the same turn sent again is a repeat"
            )
            props["occurred_at"]["description"] = "Default: when the turn is received"
            props["messages"]["description"] = (
                "turn.v1 messages ({role, text, name}) or chat-API messages ({role, content}, content a "
                "string or a list of text parts)"
            )

    def reply(self, reply: Reply) -> dict[str, Any]:
        schema = {"type": "object"} if reply.model is None else self.ref(reply.model)
        return {"description": reply.description, "content": {"application/json": {"schema": schema}}}

    def operation(self, route: Route) -> dict[str, Any]:
        spec: dict[str, Any] = {"operationId": route.operation, "summary": route.summary}
        parameters = [PATH[name] for name in route.parameters] + [QUERY[key] for key in route.query]
        if parameters:
            spec["parameters"] = copy.deepcopy(parameters)
        if route.body is not None:
            body = self.ref(route.body, "validation")
            spec["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        spec["responses"] = {str(r.status): self.reply(r) for r in self.replies[route.operation]}
        if route.anonymous:
            spec["security"] = []
        return spec

    def paths(self) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for route in ROUTES:
            paths.setdefault(route.path, {})[route.method.lower()] = self.operation(route)
        return paths


def build_openapi(max_body_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The OpenAPI document (paths below the ``/api`` server prefix), built afresh."""
    document = _Document(max_body_bytes)
    return {
        "openapi": "3.1.0",
        "info": {**_INFO, "version": __version__},
        "servers": [{"url": API_PREFIX}],
        # A bearer token where the deployment requires one; `memory-core serve` on loopback without a
        # token requires none, hence the empty alternative.
        "security": [{"bearer": []}, {}],
        "paths": document.paths(),
        "components": {"schemas": document.schemas, "securitySchemes": {"bearer": dict(_BEARER)}},
    }
