"""Azure Functions entry points of memory-core (Python v2 programming model).

Thin bodies: each function decodes what the trigger hands over, calls the memory service
(:class:`memory_core.service.MemoryService`) or the HTTP contract (:class:`memory_core.contract.api.MemoryApi`)
and maps errors. Nothing is built at import time: the service (store, history, extractor, Service
Bus publisher, telemetry) is built on first use, once per worker process, by
:mod:`memory_core.bootstrap` from the app settings.

Functions:

- ``ingest_turns``: Service Bus queue trigger on ``%MEMORY_TURNS_QUEUE%`` (sessions: one scope at a
  time, in order). A :class:`~memory_core.errors.TransientError` is raised again after a growing
  pause (2 s, 4 s, ... 60 s by delivery count), so the host abandons the message and Service Bus
  redelivers it without burning ``maxDeliveryCount`` in seconds. A :class:`~memory_core.errors.PermanentError`
  (a message that can never be processed) is *set aside*: recorded with its reason, description,
  ids and body in the history table's dead-letter partition, logged as an error, and then completed.
  The Python worker's ``ServiceBusMessage`` binding cannot settle a message itself (the SDK-type
  binding that can is a pre-release package), so completing after a durable record is what keeps
  the session moving without losing the message. If the record cannot be written the function
  raises, and after ``maxDeliveryCount`` deliveries Service Bus dead-letters the message itself.
  A turn or recall update dated at or before the last purge of its scope (the tombstone in the
  history table) is dropped by the service and completed (outcome ``purged``): a purge holds against
  Service Bus redeliveries and messages queued before it. The sessions the host runs at once in one
  worker process (``maxConcurrentSessions``) share embedding calls: passages asked for while the
  embedder is busy are embedded in one call (:class:`~memory_core.runtime.batching.BatchingEmbedder`),
  with the same vectors as one at a time.
- ``nightly_forgetting``: timer trigger on ``%MEMORY_FORGET_SCHEDULE%``; applies forgetting in
  bounded pages within a time budget and saves where it stopped, so the next run resumes there.
- HTTP functions, one per route of the contract, each forwarding to :meth:`MemoryApi.handle`.
- ``inspector``: the memory inspector page and its assets (:mod:`memory_core.web`) at
  ``/api/inspector/``. The files are static and hold no data, so they are served without the Functions
  key (a browser cannot attach a key or token to the page's own script requests); every API call the
  page makes carries the caller's credential (an Entra ID access token, or the Functions key as
  ``x-functions-key``) and is authenticated and authorised like any other client's.

HTTP authentication (``docs/security.md``): when ``MEMORY_AUTH_TENANT_ID`` and ``MEMORY_AUTH_AUDIENCE``
are set, the routes are bound with ``AuthLevel.ANONYMOUS`` and every route but ``health`` validates a
Microsoft Entra ID bearer token in code and authorises the caller's role for the scope it names (401 /
403). Otherwise they keep ``AuthLevel.FUNCTION`` (the shared Functions key, every tenant) and a warning
is logged on first use. Bindings are decided when the worker indexes the functions, so this one
choice reads the two settings at import (the worker has the app settings in its environment then; an
app settings change restarts it); nothing else is read or built at import. If the routes were bound
anonymous but the validator cannot be built at run time, every route answers 503: it fails closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

import azure.functions as func

from memory_core import telemetry
from memory_core.errors import ConfigurationError, MemoryCoreError, PermanentError, TransientError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.config import Settings
    from memory_core.domain.access import Authenticator
    from memory_core.entrypoints.http.dispatcher import MemoryApi
    from memory_core.service import MemoryService

__all__ = [
    "AUTH_SETTINGS",
    "FORGET_PAGE_SIZE",
    "FORGET_TIME_BUDGET_SECONDS",
    "HTTP_AUTH_LEVEL",
    "MAX_REDELIVERY_DELAY_SECONDS",
    "app",
    "http_auth_level",
    "redelivery_delay",
    "runtime",
]

logger = logging.getLogger("memory_core.functions")

#: Memories one forgetting page scans.
FORGET_PAGE_SIZE = 500
#: Seconds the nightly run may spend before it saves its cursor and stops (``functionTimeout`` is 10 min).
FORGET_TIME_BUDGET_SECONDS = 420.0
#: Longest wait before a message that failed transiently is handed back for redelivery.
MAX_REDELIVERY_DELAY_SECONDS = 60.0

#: The settings that turn on Microsoft Entra ID validation (both must be set).
AUTH_SETTINGS = ("MEMORY_AUTH_TENANT_ID", "MEMORY_AUTH_AUDIENCE")


def http_auth_level(environ: Mapping[str, str]) -> func.AuthLevel:
    """The host-level auth of the HTTP routes: anonymous when the code validates Entra ID tokens.

    Only whether :data:`AUTH_SETTINGS` are non-empty is read (never raises); their values are
    validated on first use, and a bad value then fails closed (503), not open.
    """
    if all(str(environ.get(name) or "").strip() for name in AUTH_SETTINGS):
        return func.AuthLevel.ANONYMOUS
    return func.AuthLevel.FUNCTION


#: Read once, when the worker indexes the functions (see the module docstring).
HTTP_AUTH_LEVEL = http_auth_level(os.environ)

app = func.FunctionApp(http_auth_level=HTTP_AUTH_LEVEL)

_sleep = asyncio.sleep
_monotonic = time.monotonic


def redelivery_delay(delivery_count: int | None) -> float:
    """Seconds to wait before giving back a message that failed transiently (2, 4, 8... up to 60)."""
    attempt = max(int(delivery_count or 1), 1)
    return float(min(2.0**attempt, MAX_REDELIVERY_DELAY_SECONDS))


class _Runtime:
    """The per-worker memory service and HTTP contract, built on first use."""

    def __init__(self) -> None:
        self._service: MemoryService | None = None
        self._api: MemoryApi | None = None
        self._authenticator: Authenticator | None = None
        self._settings: Settings | None = None
        self._lock: asyncio.Lock | None = None

    async def service(self) -> MemoryService:
        if self._service is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._service is None:
                    self._service = self._build()
        return self._service

    async def api(self) -> MemoryApi:
        if self._api is None:
            service = await self.service()
            if self._api is None:
                self._api = self._build_api(service)
        return self._api

    def _build_api(self, service: MemoryService) -> MemoryApi:
        """The HTTP contract with the Entra ID validator the settings describe (or none, with a warning).

        Raises:
            ConfigurationError: The routes were bound anonymous (:data:`HTTP_AUTH_LEVEL`) but no
                validator can be built: serving them would open every route to everyone.
        """
        from memory_core import bootstrap
        from memory_core.entrypoints.http.dispatcher import MemoryApi

        authenticator = self._authenticator
        if authenticator is None:
            authenticator = bootstrap.build_authenticator(self._settings or bootstrap.load_settings())
        if authenticator is None:
            if HTTP_AUTH_LEVEL is func.AuthLevel.ANONYMOUS:
                raise ConfigurationError(
                    "the HTTP routes were bound without the Functions key because MEMORY_AUTH_TENANT_ID and "
                    "MEMORY_AUTH_AUDIENCE were set, but no token validator is configured now; refusing to serve"
                )
            logger.warning(
                "Microsoft Entra ID validation is off (MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE are not "
                "set): the HTTP API is protected by the Functions key only, and every key holder may read, "
                "change and erase every user's memories"
            )
        else:
            logger.info("HTTP API: Microsoft Entra ID tokens are validated and roles enforced")
        return MemoryApi(service, authenticator=authenticator)

    def _build(self) -> MemoryService:
        from memory_core import bootstrap

        settings = bootstrap.load_settings()
        self._settings = settings
        bootstrap.configure_telemetry(settings)
        publisher = bootstrap.build_publisher(settings) if settings.servicebus_namespace else None
        # The trigger runs up to maxConcurrentSessions (host.json) sessions at once in this process:
        # passages asked for while the embedder is busy go in one call (memory_core.runtime.batching).
        # Only batching, no fair gate: searches embed their queries straight away, not in turn with
        # ingestion (the embedder is a remote service here; the gate shares a local model's cores).
        service = bootstrap.build_service(
            settings, publisher=publisher, recall_via_queue=True, batch_embeddings=True
        )
        logger.info(
            "memory-core ready: store %s, publisher %s",
            settings.store,
            "service bus" if publisher else "inline",
        )
        return service

    def use(
        self,
        service: MemoryService | None,
        api: MemoryApi | None = None,
        *,
        authenticator: Authenticator | None = None,
    ) -> None:
        """Serve with an already built service (and optionally an API object or an authenticator)
        instead of settings."""
        self._service = service
        self._api = api
        self._authenticator = authenticator
        self._settings = None

    async def close(self) -> None:
        """Close the service (tests; the worker process simply ends in Azure)."""
        service, self._service, self._api = self._service, None, None
        self._authenticator, self._settings = None, None
        if service is not None:
            await service.close()


runtime = _Runtime()


# ------------------------------------------------------------------------------------------------
# Service Bus: turns and recall updates
# ------------------------------------------------------------------------------------------------


@app.function_name("ingest_turns")
@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%MEMORY_TURNS_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
)
async def ingest_turns(msg: func.ServiceBusMessage) -> None:
    """Process one turn or recall update from the scope's session."""
    from memory_core.runtime.sharing import background_work

    try:
        service = await runtime.service()
    except MemoryCoreError as exc:  # misconfigured: keep the message, slowly, until the settings are fixed
        logger.error(
            "memory-core is not configured; message %s is kept on the queue: %s", msg.message_id, exc
        )
        await _sleep(redelivery_delay(msg.delivery_count))
        raise
    with telemetry.operation(
        "memory.ingest",
        **{"messaging.message.id": msg.message_id, "messaging.delivery_count": msg.delivery_count},
    ) as op:
        try:
            with background_work():  # batched apart from passages an HTTP call asks for
                outcome = await service.process_message(msg.get_body())
        except TransientError as exc:
            delay = redelivery_delay(msg.delivery_count)
            logger.warning(
                "message %s (session %s, delivery %s): transient failure, redelivered after %.0fs: %s",
                msg.message_id,
                msg.session_id,
                msg.delivery_count,
                delay,
                exc,
            )
            # An abandoned session message comes back at once; waiting here (the session lock is
            # renewed meanwhile, other sessions go on) spaces the attempts out, so a throttled
            # dependency does not burn the queue's maxDeliveryCount in seconds.
            await _sleep(delay)
            raise
        except PermanentError as exc:
            await _set_aside(service, msg, exc)
            return
        if outcome.ingest is not None:
            telemetry.record_ingest(outcome.ingest, op.elapsed)
        op.set(
            **{
                "memory.kind": outcome.kind,
                "memory.status": outcome.status,
                "memory.recalled": outcome.recalled,
            }
        )
        logger.info("message %s (%s %s): %s", msg.message_id, outcome.kind, outcome.message_id, outcome.status)


async def _set_aside(service: MemoryService, msg: func.ServiceBusMessage, error: PermanentError) -> None:
    """Keep a poison message with its reason, then let the host complete it (see the module docstring)."""
    reason, description = type(error).__name__, str(error)
    logger.error(
        "message %s (session %s, delivery %s) cannot be processed and is set aside as dead letter: %s: %s",
        msg.message_id,
        msg.session_id,
        msg.delivery_count,
        reason,
        description,
    )
    kept = await service.set_aside(
        message_id=msg.message_id,
        reason=reason,
        description=description,
        body=msg.get_body(),
        session_id=msg.session_id,
        delivery_count=msg.delivery_count,
        enqueued_time=msg.enqueued_time_utc,
    )
    if not kept:
        # No dead-letter store in this deployment: keep the message on the queue. Raising makes the
        # host abandon it; Service Bus dead-letters it after maxDeliveryCount (MaxDeliveryCountExceeded).
        raise PermanentError(
            f"{reason}: {description} (no dead-letter store configured; left to Service Bus)"
        ) from error
    telemetry.record_dead_letter(reason, message_id=msg.message_id)


# ------------------------------------------------------------------------------------------------
# Timer: nightly forgetting
# ------------------------------------------------------------------------------------------------


@app.function_name("nightly_forgetting")
@app.timer_trigger(
    arg_name="timer", schedule="%MEMORY_FORGET_SCHEDULE%", run_on_startup=False, use_monitor=True
)
async def nightly_forgetting(timer: func.TimerRequest) -> None:
    """Archive and expire memories whose retention has decayed (never deletes physically).

    Pages of :data:`FORGET_PAGE_SIZE` from the saved cursor, within :data:`FORGET_TIME_BUDGET_SECONDS`;
    the cursor is saved after each page, so the next run resumes where this one stopped.
    """
    if timer.past_due:
        logger.warning("nightly forgetting is running late (past due); it runs now")
    service = await runtime.service()
    started = _monotonic()
    with telemetry.operation("memory.forgetting", **{"memory.dry_run": False}) as op:
        run = await service.run_forgetting(
            page_size=FORGET_PAGE_SIZE,
            should_stop=lambda: _monotonic() - started >= FORGET_TIME_BUDGET_SECONDS,
        )
        telemetry.record_forgetting(run.as_dict(), op.elapsed, pages=run.pages)


# ------------------------------------------------------------------------------------------------
# HTTP: the contract of memory_core.contract.api, one function per route
# ------------------------------------------------------------------------------------------------


def _error_response(status: int, code: str, message: str, **headers: str) -> func.HttpResponse:
    body = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode("utf-8")
    return func.HttpResponse(
        body=body, status_code=status, headers={"Content-Type": "application/json; charset=utf-8", **headers}
    )


async def _serve(req: func.HttpRequest, path: str) -> func.HttpResponse:
    """Forward one request to :meth:`MemoryApi.handle` and write its response."""
    from memory_core.entrypoints.http.kit import ApiRequest

    try:
        api = await runtime.api()
    except MemoryCoreError as exc:  # settings missing or wrong: say so instead of a bare 500
        logger.error("memory-core is not configured: %s", exc)
        return _error_response(
            503, "unavailable", f"memory-core is not configured: {exc}", **{"Retry-After": "30"}
        )
    query: Mapping[str, str] = dict(req.params)
    request = ApiRequest(req.method, path, query, req.get_body() or b"", headers=dict(req.headers))
    response = await api.handle(request)
    headers = dict(response.headers)
    headers.setdefault("Content-Type", "application/json; charset=utf-8")
    return func.HttpResponse(body=response.json_bytes(), status_code=response.status, headers=headers)


def _segment(req: func.HttpRequest, name: str) -> str:
    return quote(req.route_params.get(name, ""), safe="")


@app.function_name("search_memories")
@app.route(route="memories/search", methods=["POST"])
async def search_memories(req: func.HttpRequest) -> func.HttpResponse:
    """``POST /api/memories/search``: the ``before_run`` search (publishes the recall update)."""
    with telemetry.operation("memory.search") as op:
        response = await _serve(req, "/memories/search")
        if response.status_code == 200:
            with contextlib.suppress(ValueError):
                request, result = json.loads(req.get_body() or b"{}"), json.loads(response.get_body())
                if isinstance(request, dict) and isinstance(result, dict):
                    telemetry.record_search_exchange(request, result, op.elapsed)
    return response


@app.function_name("list_memories")
@app.route(route="memories", methods=["GET"])
async def list_memories(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/memories?user_id=&agent_id=``: one scope's memories, keyset-paged."""
    return await _serve(req, "/memories")


@app.function_name("memory_item")
@app.route(route="memories/{memory_id}", methods=["GET", "DELETE"])
async def memory_item(req: func.HttpRequest) -> func.HttpResponse:
    """``GET`` / ``DELETE /api/memories/{memory_id}``: one memory, or its soft delete."""
    return await _serve(req, f"/memories/{_segment(req, 'memory_id')}")


@app.function_name("export_user")
@app.route(route="users/{user_id}/export", methods=["GET"])
async def export_user(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/users/{user_id}/export``: every record of a user."""
    return await _serve(req, f"/users/{_segment(req, 'user_id')}/export")


@app.function_name("purge_user")
@app.route(route="users/{user_id}", methods=["DELETE"])
async def purge_user(req: func.HttpRequest) -> func.HttpResponse:
    """``DELETE /api/users/{user_id}``: physically remove a user's memories and history."""
    return await _serve(req, f"/users/{_segment(req, 'user_id')}")


@app.function_name("post_turn")
@app.route(route="turns", methods=["POST"])
async def post_turn(req: func.HttpRequest) -> func.HttpResponse:
    """``POST /api/turns``: enqueue a ``turn.v1`` for clients that cannot reach Service Bus."""
    return await _serve(req, "/turns")


@app.function_name("run_forgetting_http")
@app.route(route="forgetting", methods=["POST"])
async def run_forgetting_http(req: func.HttpRequest) -> func.HttpResponse:
    """``POST /api/forgetting``: forgetting on demand (a dry run unless ``dry_run=false``)."""
    with telemetry.operation("memory.forgetting") as op:
        response = await _serve(req, "/forgetting")
        if response.status_code == 200:
            with contextlib.suppress(ValueError):
                telemetry.record_forgetting(json.loads(response.get_body()), op.elapsed)
    return response


@app.function_name("list_users")
@app.route(route="users", methods=["GET"])
async def list_users(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/users``: users with counts by status (501 on Azure AI Search, which cannot list them)."""
    return await _serve(req, "/users")


@app.function_name("user_agents")
@app.route(route="users/{user_id}/agents", methods=["GET"])
async def user_agents(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/users/{user_id}/agents``: a user's agents with counts by status."""
    return await _serve(req, f"/users/{_segment(req, 'user_id')}/agents")


@app.function_name("forgetting_preview")
@app.route(route="forgetting/preview", methods=["GET"])
async def forgetting_preview(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/forgetting/preview?user_id=&agent_id=``: a dry run of forgetting for one scope."""
    return await _serve(req, "/forgetting/preview")


@app.function_name("retention_curves")
@app.route(route="forgetting/curves", methods=["GET"])
async def retention_curves(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/forgetting/curves?user_id=&agent_id=&ids=``: how memories fade under the policy."""
    return await _serve(req, "/forgetting/curves")


@app.function_name("inspector")
@app.route(route="inspector/{*path}", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def inspector(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/inspector/``: the inspector page and ``/api/inspector/ui/<file>`` its assets (static, no
    data; see the module docstring)."""
    from memory_core.web import static_file

    path = req.route_params.get("path") or ""
    if not path and not req.url.split("?", 1)[0].endswith("/"):  # its assets are relative to the folder
        return func.HttpResponse(status_code=308, headers={"Location": "inspector/"})
    page = static_file(path)
    if page is None:
        return _error_response(404, "no_route", f"no inspector file {path[:100]!r}")
    return func.HttpResponse(
        body=page.body, status_code=200, headers=page.headers, mimetype=page.content_type.split(";")[0]
    )


@app.function_name("health")
@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def health(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/health``: liveness (anonymous, for probes)."""
    return await _serve(req, "/health")


@app.function_name("openapi_document")
@app.route(route="openapi.json", methods=["GET"])
async def openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    """``GET /api/openapi.json``: the OpenAPI document of these routes."""
    return await _serve(req, "/openapi.json")
