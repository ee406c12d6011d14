"""Azure Functions entry points of memory-core (Python v2 programming model).

Thin bodies: each function parses what the trigger hands over, calls the pipeline or the HTTP
contract (:class:`memory_core.api.MemoryApi`) and maps errors. Nothing is built at import time: the
pipeline (store, history, extractor, Service Bus publisher, telemetry) is wired on first use, once
per worker process, from the app settings.

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
- ``nightly_forgetting``: timer trigger on ``%MEMORY_FORGET_SCHEDULE%``; applies forgetting in
  bounded pages within a time budget and saves where it stopped, so the next run resumes there.
- HTTP functions, one per route of the contract (function key; ``health`` is anonymous), each
  forwarding to :meth:`MemoryApi.handle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import azure.functions as func

from memory_core import telemetry
from memory_core.errors import MemoryCoreError, PermanentError, TransientError

__all__ = [
    "FORGET_CHECKPOINT",
    "FORGET_PAGE_SIZE",
    "FORGET_TIME_BUDGET_SECONDS",
    "MAX_REDELIVERY_DELAY_SECONDS",
    "ForgettingRun",
    "app",
    "run_forgetting",
    "runtime",
]

logger = logging.getLogger("memory_core.functions")

#: Memories one forgetting page scans.
FORGET_PAGE_SIZE = 500
#: Seconds the nightly run may spend before it saves its cursor and stops (``functionTimeout`` is 10 min).
FORGET_TIME_BUDGET_SECONDS = 420.0
#: Name of the saved forgetting cursor.
FORGET_CHECKPOINT = "forgetting-cursor"

#: Longest wait before a message that failed transiently is handed back for redelivery.
MAX_REDELIVERY_DELAY_SECONDS = 60.0

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

_sleep = asyncio.sleep


def redelivery_delay(delivery_count: int | None) -> float:
    """Seconds to wait before giving back a message that failed transiently (2, 4, 8... up to 60)."""
    attempt = max(int(delivery_count or 1), 1)
    return float(min(2.0**attempt, MAX_REDELIVERY_DELAY_SECONDS))


class _Runtime:
    """The per-worker pipeline and HTTP handler, built on first use."""

    def __init__(self) -> None:
        self._pipeline: Any | None = None
        self._api: Any | None = None
        self._lock: asyncio.Lock | None = None

    async def pipeline(self) -> Any:
        if self._pipeline is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._pipeline is None:
                    self._pipeline = self._build()
        return self._pipeline

    async def api(self) -> Any:
        if self._api is None:
            from memory_core.api import MemoryApi

            self._api = MemoryApi(await self.pipeline())
        return self._api

    @staticmethod
    def _build() -> Any:
        from memory_core.bootstrap import build_pipeline, load_settings

        settings = load_settings()
        telemetry.configure_telemetry(settings)
        publisher = None
        if settings.servicebus_namespace:
            from memory_core.adapters.servicebus_queue import ServiceBusTurnPublisher

            publisher = ServiceBusTurnPublisher.from_settings(settings)
        pipeline = build_pipeline(settings, publisher=publisher, recall_via_queue=True)
        logger.info(
            "memory-core pipeline ready: store %s, publisher %s",
            settings.store,
            "service bus" if publisher else "inline",
        )
        return pipeline

    def use(self, pipeline: Any, api: Any | None = None) -> None:
        """Serve with an already built pipeline (and optionally an API object) instead of settings."""
        self._pipeline = pipeline
        self._api = api

    async def close(self) -> None:
        """Close the pipeline (tests; the worker process simply ends in Azure)."""
        pipeline, self._pipeline, self._api = self._pipeline, None, None
        if pipeline is not None:
            await pipeline.close()


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
    try:
        pipeline = await runtime.pipeline()
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
            outcome = await pipeline.process_message(msg.get_body())
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
            await _set_aside(pipeline, msg, exc)
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
        logger.info("message %s: %s %s", msg.message_id, outcome.kind, outcome.status)


async def _set_aside(pipeline: Any, msg: func.ServiceBusMessage, error: PermanentError) -> None:
    """Keep a poison message with its reason, then let the host complete it (see the module docstring)."""
    reason = type(error).__name__
    description = str(error)
    logger.error(
        "message %s (session %s, delivery %s) cannot be processed and is set aside as dead letter: %s: %s",
        msg.message_id,
        msg.session_id,
        msg.delivery_count,
        reason,
        description,
    )
    record = getattr(pipeline.history, "record_dead_letter", None)
    if record is None:
        # No dead-letter store beside this history: keep the message on the queue. Raising makes the
        # host abandon it; Service Bus dead-letters it after maxDeliveryCount (MaxDeliveryCountExceeded).
        raise PermanentError(
            f"{reason}: {description} (no dead-letter store configured; left to Service Bus)"
        ) from error
    await record(
        message_id=msg.message_id,
        reason=reason,
        description=description,
        body=msg.get_body(),
        session_id=msg.session_id,
        delivery_count=msg.delivery_count,
        enqueued_time=msg.enqueued_time_utc,
        at=pipeline.service.clock.now(),
    )
    telemetry.record_dead_letter(reason, message_id=msg.message_id)


# ------------------------------------------------------------------------------------------------
# Timer: nightly forgetting
# ------------------------------------------------------------------------------------------------


@dataclass
class ForgettingRun:
    """Totals of one timer run (possibly several pages)."""

    pages: int = 0
    scanned: int = 0
    archived: int = 0
    expired: int = 0
    reactivated: int = 0
    rescored: int = 0
    unchanged: int = 0
    written: int = 0
    complete: bool = False
    resumed: bool = False
    cursor: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": False,
            "pages": self.pages,
            "scanned": self.scanned,
            "archived": self.archived,
            "expired": self.expired,
            "reactivated": self.reactivated,
            "rescored": self.rescored,
            "unchanged": self.unchanged,
            "written": self.written,
            "complete": self.complete,
            "resumed": self.resumed,
        }


async def run_forgetting(
    pipeline: Any,
    *,
    page_size: int = FORGET_PAGE_SIZE,
    budget_seconds: float = FORGET_TIME_BUDGET_SECONDS,
    clock: Any = time.monotonic,
) -> ForgettingRun:
    """Apply forgetting page by page until done or out of time; save or clear the resume cursor.

    The cursor lives in the history store (``get_checkpoint`` / ``set_checkpoint``) when it has
    them; otherwise every run starts from the beginning (pages already up to date write nothing).
    """
    history = pipeline.history
    load = getattr(history, "get_checkpoint", None)
    save = getattr(history, "set_checkpoint", None)
    cursor: str | None = await load(FORGET_CHECKPOINT) if load is not None else None
    run = ForgettingRun(resumed=cursor is not None)
    started = clock()
    while True:
        report = await pipeline.service.apply_forgetting(dry_run=False, limit=page_size, cursor=cursor)
        run.pages += 1
        for name in ("scanned", "archived", "expired", "reactivated", "rescored", "unchanged", "written"):
            setattr(run, name, getattr(run, name) + int(getattr(report, name)))
        cursor = report.next_cursor
        if cursor is None:
            run.complete = True
            break
        if clock() - started >= budget_seconds:
            break
    run.cursor = cursor
    if save is not None:
        await save(FORGET_CHECKPOINT, cursor)
    return run


@app.function_name("nightly_forgetting")
@app.timer_trigger(
    arg_name="timer", schedule="%MEMORY_FORGET_SCHEDULE%", run_on_startup=False, use_monitor=True
)
async def nightly_forgetting(timer: func.TimerRequest) -> None:
    """Archive and expire memories whose retention has decayed (never deletes physically)."""
    if timer.past_due:
        logger.warning("nightly forgetting is running late (past due); it runs now")
    pipeline = await runtime.pipeline()
    with telemetry.operation("memory.forgetting", **{"memory.dry_run": False}) as op:
        run = await run_forgetting(pipeline)
        telemetry.record_forgetting(run.as_dict(), op.elapsed, pages=run.pages)
    logger.info(
        "nightly forgetting: %s page(s)%s, scanned %s, archived %s, expired %s, reactivated %s, rescored %s, "
        "unchanged %s, written %s, %s",
        run.pages,
        " (resumed)" if run.resumed else "",
        run.scanned,
        run.archived,
        run.expired,
        run.reactivated,
        run.rescored,
        run.unchanged,
        run.written,
        "complete" if run.complete else "stopped at the time budget; the next run resumes",
    )


# ------------------------------------------------------------------------------------------------
# HTTP: the contract of memory_core.api, one function per route
# ------------------------------------------------------------------------------------------------


def _error_response(status: int, code: str, message: str, **headers: str) -> func.HttpResponse:
    body = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode("utf-8")
    return func.HttpResponse(
        body=body, status_code=status, headers={"Content-Type": "application/json; charset=utf-8", **headers}
    )


async def _serve(req: func.HttpRequest, path: str) -> func.HttpResponse:
    """Forward one request to :meth:`MemoryApi.handle` and write its response."""
    from memory_core.api import ApiRequest

    try:
        api = await runtime.api()
    except MemoryCoreError as exc:  # settings missing or wrong: say so instead of a bare 500
        logger.error("memory-core is not configured: %s", exc)
        return _error_response(
            503, "unavailable", f"memory-core is not configured: {exc}", **{"Retry-After": "30"}
        )
    query: Mapping[str, str] = dict(req.params)
    response = await api.handle(ApiRequest(req.method, path, query, req.get_body() or b""))
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
            _record_search(req, response, op.elapsed)
    return response


def _record_search(req: func.HttpRequest, response: func.HttpResponse, seconds: float) -> None:
    try:
        request = json.loads(req.get_body() or b"{}")
        result = json.loads(response.get_body())
    except ValueError:
        return
    if isinstance(request, dict) and isinstance(result, dict):
        telemetry.record_search_exchange(request, result, seconds)


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
