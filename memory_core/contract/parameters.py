"""The limits of the HTTP contract and its path and query parameters as the OpenAPI document lists them.

Routes name their query parameters (:attr:`~memory_core.contract.routes.Route.query`) by the keys of
:data:`QUERY`: the parameter's name, and after a colon which kind when routes read it differently.
"""

from __future__ import annotations

from typing import Any

from memory_core.contract.views import CATEGORY_SCHEMA, SCOPE_SCHEMA
from memory_core.domain.records import DEFAULT_AGENT_ID, MemoryKind, MemoryStatus
from memory_core.domain.search import OrderBy
from memory_core.domain.validation import ENTITY_ID_PATTERN, MEMORY_ID_PATTERN
from memory_core.ports import MAX_BROWSE_OFFSET

__all__ = [
    "DEFAULT_CURVE_DAYS",
    "DEFAULT_EXPORT_LIMIT",
    "DEFAULT_FORGET_LIMIT",
    "DEFAULT_LIST_LIMIT",
    "MAX_BODY_BYTES",
    "MAX_CURVE_DAYS",
    "MAX_CURVE_IDS",
    "MAX_EXPORT_LIMIT",
    "MAX_FILTERS_QUERY",
    "MAX_FORGET_LIMIT",
    "MAX_LIST_LIMIT",
    "MAX_PREVIEW_LIMIT",
    "PATH",
    "QUERY",
]

#: Largest request body accepted (the Service Bus standard-tier message limit).
MAX_BODY_BYTES = 256 * 1024
#: Largest page ``GET /memories`` returns, and the default.
MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 100
#: The most characters of a listing's ``filters`` (JSON in the query string).
MAX_FILTERS_QUERY = 8192
#: Largest page of ``GET /users/{user_id}/export`` (memories and history entries together), and the default.
MAX_EXPORT_LIMIT = 1000
DEFAULT_EXPORT_LIMIT = 500
#: Memories one ``POST /forgetting`` call scans at most (the response's cursor resumes).
MAX_FORGET_LIMIT = 10_000
DEFAULT_FORGET_LIMIT = 1000
#: Memories one ``GET /forgetting/preview`` call reads at most (its cursor resumes).
MAX_PREVIEW_LIMIT = 10_000
#: Memories one ``GET /forgetting/curves`` call draws at most, and how many days ahead at most.
MAX_CURVE_IDS = 50
MAX_CURVE_DAYS = 3650
DEFAULT_CURVE_DAYS = 180

_SCOPE_ID: dict[str, Any] = {"type": "string", **SCOPE_SCHEMA}
_MEMORY_ID: dict[str, Any] = {
    "type": "string",
    "pattern": f"^{MEMORY_ID_PATTERN.pattern}$",
    "minLength": 1,
    "maxLength": 128,
}
_ENTITY_ID: dict[str, Any] = {"type": "string", "pattern": f"^{ENTITY_ID_PATTERN.pattern}$"}


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


def _query(name: str, schema: dict[str, Any], description: str, *, required: bool = False) -> dict[str, Any]:
    return _param(name, "query", schema, description, required=required)


def _integer(low: int, high: int, default: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": low, "maximum": high}
    return schema if default is None else {**schema, "default": default}


def _one_of(values: list[Any]) -> dict[str, Any]:
    return {"type": "string", "enum": values}


#: The path parameters, by name.
PATH: dict[str, dict[str, Any]] = {
    "memory_id": _param("memory_id", "path", _MEMORY_ID, "Memory id"),
    "user_id": _param("user_id", "path", _SCOPE_ID, "User id"),
    "entity_id": _param("entity_id", "path", _ENTITY_ID, "Entity id (`ent_` and 24 hex digits)"),
}

_PAGE_LIMIT = _integer(1, MAX_LIST_LIMIT, DEFAULT_LIST_LIMIT)

#: The query parameters, by key (see the module docstring).
QUERY: dict[str, dict[str, Any]] = {
    "user_id": _query("user_id", _SCOPE_ID, "Owner of the memories", required=True),
    "agent_id": _query(
        "agent_id", {**_SCOPE_ID, "default": DEFAULT_AGENT_ID}, f"Agent of the memories (default {DEFAULT_AGENT_ID!r})"
    ),
    "agent_id:optional": _query(
        "agent_id", _SCOPE_ID, "Only this agent's memories (default: every agent)"
    ),
    "status": _query("status", _one_of([s.value for s in MemoryStatus]), "Only this status"),
    "cursor:list": _query(
        "cursor",
        _MEMORY_ID,
        "Resume after this memory id (`next_cursor`); only without category, kind, order and offset "
        "(422 otherwise)",
    ),
    "limit:page": _query("limit", _PAGE_LIMIT, "Page size"),
    "category": _query(
        "category", {"type": "string", **CATEGORY_SCHEMA}, "Only this category (a filtered listing)"
    ),
    "kind": _query("kind", _one_of([k.value for k in MemoryKind]), "Only this kind (a filtered listing)"),
    "order": _query(
        "order",
        _one_of([o.value for o in OrderBy]),
        "Sort by this field, then by id (a sorted listing; default: by id)",
    ),
    "offset": _query(
        "offset",
        _integer(0, MAX_BROWSE_OFFSET),
        "Skip this many memories of a filtered or sorted listing (`next_offset`)",
    ),
    "filters": _query(
        "filters",
        {"type": "string", "maxLength": MAX_FILTERS_QUERY},
        "Only the memories these conditions keep: a search's `filters` as JSON (fields and "
        "`metadata.<key>`, Mem0's syntax); only with the listing by id",
    ),
    "include_superseded": _query(
        "include_superseded",
        {"type": "boolean", "default": False},
        "Also memories superseded by something said later (what held before; default: the current ones)",
    ),
    "cursor:export": _query(
        "cursor",
        {"type": "string", "pattern": "^[A-Za-z0-9_\\-]{1,1024}$"},
        "Resume the export: the page before's `next_cursor` (opaque; 422 when this export did not issue it)",
    ),
    "limit:export": _query(
        "limit",
        _integer(1, MAX_EXPORT_LIMIT, DEFAULT_EXPORT_LIMIT),
        "Memories and history entries on one page at most",
    ),
    "include_vectors": _query(
        "include_vectors",
        {"type": "boolean", "default": False},
        "Include each memory's embedding (default: left out; an import computes missing embeddings)",
    ),
    "cursor:user": _query("cursor", _SCOPE_ID, "Resume after this user id (`next_cursor`)"),
    "limit:preview": _query(
        "limit", _integer(1, MAX_PREVIEW_LIMIT, MAX_PREVIEW_LIMIT), "Memories read at most"
    ),
    "cursor:memory": _query("cursor", _MEMORY_ID, "Resume after this memory id (`next_cursor`)"),
    "ids": _query(
        "ids",
        {
            "type": "string",
            "pattern": f"^{MEMORY_ID_PATTERN.pattern}(,{MEMORY_ID_PATTERN.pattern})*$",
            "minLength": 1,
            "maxLength": MAX_CURVE_IDS * 129,
        },
        f"Memory ids, comma-separated (at most {MAX_CURVE_IDS})",
        required=True,
    ),
    "days": _query(
        "days", _integer(1, MAX_CURVE_DAYS, DEFAULT_CURVE_DAYS), "How many days ahead"
    ),
    "confirm": _query("confirm", {"type": "boolean", "enum": [True]}, "Must be true", required=True),
    "dry_run": _query("dry_run", {"type": "boolean", "default": True}, "Report only (default)"),
    "limit:forgetting": _query(
        "limit", _integer(1, MAX_FORGET_LIMIT, DEFAULT_FORGET_LIMIT), "Memories scanned at most"
    ),
    "cursor:forgetting": _query(
        "cursor",
        {"type": "string", "pattern": "^[A-Za-z0-9_\\-]{1,64}$"},
        "Resume an earlier run: its `next_cursor` (opaque and store-specific; 422 when this store "
        "did not issue it)",
    ),
}
