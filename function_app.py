"""Azure Functions entry points of memory-core (Python v2 programming model), thin triggers over
:mod:`memory_core.entrypoints.functions`: ``ingest_turns`` (Service Bus, one session per scope),
``nightly_forgetting`` (timer), one HTTP function per function of the route table
(:func:`memory_core.contract.routes.http_functions`) and ``inspector`` (static files, without the key).

Nothing is built at import but the HTTP auth level (``docs/security.md``): anonymous when the Entra ID
settings are set (the code validates tokens, and fails closed without a validator), else the key.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import azure.functions as func

from memory_core.contract.routes import API_PREFIX, INSPECTOR, HttpFunction, http_functions
from memory_core.entrypoints.functions.runtime import FunctionsRuntime

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.config import Settings
    from memory_core.domain.access import Authenticator
    from memory_core.entrypoints.functions.http import HttpReply
    from memory_core.entrypoints.http.dispatcher import MemoryApi
    from memory_core.service import MemoryService

__all__ = [
    "AUTH_SETTINGS", "FORGET_PAGE_SIZE", "FORGET_TIME_BUDGET_SECONDS", "HTTP_AUTH_LEVEL",
    "app", "http_auth_level", "runtime",
]  # fmt: skip

#: Memories one forgetting page scans.
FORGET_PAGE_SIZE = 500
#: Seconds the nightly run may spend before it saves its cursor and stops (``functionTimeout`` is 10 min).
FORGET_TIME_BUDGET_SECONDS = 420.0
#: The settings that turn on Microsoft Entra ID validation (both must be set).
AUTH_SETTINGS = ("MEMORY_AUTH_TENANT_ID", "MEMORY_AUTH_AUDIENCE")

HttpBody = Callable[[func.HttpRequest], Awaitable[func.HttpResponse]]


def http_auth_level(environ: Mapping[str, str]) -> func.AuthLevel:
    """The host-level auth of the HTTP routes: anonymous when the code validates Entra ID tokens.

    Only whether :data:`AUTH_SETTINGS` are non-empty is read (never raises); their values are
    validated on first use, and a bad value then fails closed (503), not open.
    """
    if all(str(environ.get(name) or "").strip() for name in AUTH_SETTINGS):
        return func.AuthLevel.ANONYMOUS
    return func.AuthLevel.FUNCTION


#: Read once, when the worker indexes the functions (an app settings change restarts the worker).
HTTP_AUTH_LEVEL = http_auth_level(os.environ)

app = func.FunctionApp(http_auth_level=HTTP_AUTH_LEVEL)

_sleep = asyncio.sleep
_monotonic = time.monotonic


def _build_service() -> tuple[MemoryService, Settings]:
    from memory_core.entrypoints.functions.building import build_service

    return build_service()


def _build_api(service: MemoryService, authenticator: Authenticator | None, settings: Settings | None) -> MemoryApi:
    from memory_core.entrypoints.functions.building import build_api

    return build_api(service, authenticator, settings, keyless=HTTP_AUTH_LEVEL is func.AuthLevel.ANONYMOUS)


runtime = FunctionsRuntime(build_service=_build_service, build_api=_build_api)


@app.function_name("ingest_turns")
@app.service_bus_queue_trigger(
    arg_name="msg", queue_name="%MEMORY_TURNS_QUEUE%", connection="ServiceBusConnection", is_sessions_enabled=True
)
async def ingest_turns(msg: func.ServiceBusMessage) -> None:
    """Process one turn or recall update from the scope's session."""
    from memory_core.entrypoints.functions.triggers import ingest_message

    await ingest_message(runtime, msg, sleep=_sleep)


@app.function_name("nightly_forgetting")
@app.timer_trigger(arg_name="timer", schedule="%MEMORY_FORGET_SCHEDULE%", run_on_startup=False, use_monitor=True)
async def nightly_forgetting(timer: func.TimerRequest) -> None:
    """Archive and expire memories whose retention has decayed, :data:`FORGET_PAGE_SIZE` at a time,
    within :data:`FORGET_TIME_BUDGET_SECONDS`."""
    from memory_core.entrypoints.functions.triggers import forget_nightly

    await forget_nightly(
        runtime,
        past_due=timer.past_due,
        page_size=FORGET_PAGE_SIZE,
        budget=FORGET_TIME_BUDGET_SECONDS,
        clock=_monotonic,
    )


def _response(reply: HttpReply) -> func.HttpResponse:
    return func.HttpResponse(body=reply.body, status_code=reply.status, headers=reply.headers, mimetype=reply.mimetype)


def _http(function: HttpFunction) -> Callable[[HttpBody], Any]:
    """Register a body as ``function``: its name, route, methods and (anonymous or the app's) auth level."""
    level = func.AuthLevel.ANONYMOUS if function.anonymous else None
    route = app.route(route=function.route, methods=list(function.methods), auth_level=level)

    def register(body: HttpBody) -> Any:
        return app.function_name(function.name)(route(body))

    return register


def _forwarding(function: HttpFunction) -> HttpBody:
    """The body of an HTTP function of the contract: the request, forwarded to the HTTP API."""

    async def body(req: func.HttpRequest) -> func.HttpResponse:
        from memory_core.entrypoints.functions.http import HttpCall, respond

        call = HttpCall(req.method, req.route_params, req.params, req.get_body() or b"", req.headers)
        return _response(await respond(runtime, function, call))

    body.__name__ = body.__qualname__ = function.name
    body.__doc__ = " ".join(f"``{r.method} {API_PREFIX}{r.path}``: {r.summary}." for r in function.routes)
    return body


def _register_contract() -> None:
    """Register every HTTP function of the route table, each also an attribute of this module."""
    for function in http_functions():
        globals()[function.name] = _http(function)(_forwarding(function))


_register_contract()


@_http(INSPECTOR)
async def inspector(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/inspector/``: the inspector page, and ``/api/inspector/ui/<file>`` its assets."""
    from memory_core.entrypoints.functions.http import inspector_file

    return _response(inspector_file(req.route_params.get("path") or "", req.url))
