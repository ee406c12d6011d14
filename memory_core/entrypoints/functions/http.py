"""The Functions app's HTTP functions: each request forwarded to the HTTP API, and the inspector's files.

Every function of :func:`~memory_core.contract.routes.http_functions` forwards its request to
:meth:`MemoryApi.handle <memory_core.entrypoints.http.dispatcher.MemoryApi.handle>`; a route with a
``telemetry`` operation is recorded as one (the search exchange, the forgetting counts). The inspector's
page and assets are static and hold no data, so they are served without the Functions key; every API
call the page makes carries the caller's credential.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory_core import telemetry
from memory_core.contract.routes import INSPECTOR, HttpFunction
from memory_core.entrypoints.http.kit import JSON_HEADERS, ApiRequest, with_api_headers
from memory_core.errors import MemoryCoreError
from memory_core.web import static_file

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.entrypoints.functions.runtime import FunctionsRuntime

__all__ = ["HttpCall", "HttpReply", "inspector_file", "respond"]

logger = logging.getLogger("memory_core.functions")

#: Where the inspector's folder is, relative to its bare path (its assets are relative to the folder).
_INSPECTOR_FOLDER = INSPECTOR.route.split("/", 1)[0] + "/"


@dataclass(frozen=True)
class HttpReply:
    """What an HTTP function answers: status, body bytes, headers and (for files) the media type."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    mimetype: str | None = None


def _error(status: int, code: str, message: str, **headers: str) -> HttpReply:
    body = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode("utf-8")
    return HttpReply(status, body, with_api_headers({**JSON_HEADERS, **headers}))


def _record_search(request: bytes, reply: HttpReply, seconds: float) -> None:
    with contextlib.suppress(ValueError):
        query, result = json.loads(request or b"{}"), json.loads(reply.body)
        if isinstance(query, dict) and isinstance(result, dict):
            telemetry.record_search_exchange(query, result, seconds)


def _record_forgetting(request: bytes, reply: HttpReply, seconds: float) -> None:
    with contextlib.suppress(ValueError):
        telemetry.record_forgetting(json.loads(reply.body), seconds)


#: How an answered exchange is recorded, by the route's telemetry operation.
_RECORDERS: dict[str, Callable[[bytes, HttpReply, float], None]] = {
    "memory.search": _record_search,
    "memory.forgetting": _record_forgetting,
}


@dataclass(frozen=True)
class HttpCall:
    """One request to an HTTP function, as the trigger hands it over."""

    method: str
    route_params: Mapping[str, str]
    params: Mapping[str, str]
    body: bytes
    headers: Mapping[str, str]


async def respond(runtime: FunctionsRuntime, function: HttpFunction, call: HttpCall) -> HttpReply:
    """Answer one request to ``function`` through the HTTP API (recorded when its route says so)."""
    route = function.serving(call.method)
    operation = route.telemetry if route is not None else None
    if operation is None:
        return await _forward(runtime, function, call)
    with telemetry.operation(operation) as op:
        reply = await _forward(runtime, function, call)
        if reply.status == 200:
            _RECORDERS[operation](call.body, reply, op.elapsed)
    return reply


async def _forward(runtime: FunctionsRuntime, function: HttpFunction, call: HttpCall) -> HttpReply:
    try:
        api = await runtime.api()
    except MemoryCoreError as exc:  # settings missing or wrong: the log says which, the caller only that
        logger.error("memory-core is not configured: %s", exc)
        return _error(
            503, "unavailable", "memory-core is not configured; the Function App's log says why", **{"Retry-After": "30"}
        )
    template = function.routes[0]
    path = template.path_for({name: call.route_params.get(name, "") for name in template.parameters})
    request = ApiRequest(
        call.method, path, dict(call.params), call.body, headers=dict(call.headers), anonymous=function.anonymous
    )
    response = await api.handle(request)
    answer = dict(response.headers)
    answer.setdefault("Content-Type", JSON_HEADERS["Content-Type"])
    return HttpReply(response.status, response.json_bytes(), with_api_headers(answer))


def inspector_file(path: str, url: str) -> HttpReply:
    """The inspector's page (``path`` empty) or one of its assets (``ui/<file>``); ``url`` is the request's."""
    if not path and not url.split("?", 1)[0].endswith("/"):  # its assets are relative to the folder
        return HttpReply(308, b"", {"Location": _INSPECTOR_FOLDER})
    page = static_file(path)
    if page is None:
        return _error(404, "no_route", f"no inspector file {path[:100]!r}")
    return HttpReply(200, page.body, dict(page.headers), page.content_type.split(";")[0])
