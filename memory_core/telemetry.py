"""OpenTelemetry traces and metrics for ingestion, search, forgetting and the queue.

The ``record_*`` functions are small, synchronous and never raise: hosts call them after an
operation with its result and duration. Each one adds metrics and, when a span is current (see
:func:`operation`), sets attributes on it. Without a configured OpenTelemetry SDK (or without the
``opentelemetry-api`` package) every call is a no-op.

Where telemetry goes is decided once per process by :func:`configure_telemetry`:

- ``APPLICATIONINSIGHTS_CONNECTION_STRING`` set: the Azure Monitor OpenTelemetry distro exports
  traces and metrics to Application Insights, authenticating with Microsoft Entra ID (the managed
  identity ``AZURE_CLIENT_ID``). Python logging is left to the Functions host, which forwards it.
- ``MEMORY_TELEMETRY_CONSOLE=true``: spans and metrics are printed to standard error (local runs).
- otherwise: nothing is exported.

Privacy: by default telemetry carries ids of messages and memories, counts, modes, paths and
timings, and the scope's tag (``u:<hash>/a:<hash>``, the one logs use); never memory text, queries,
turn messages nor raw user and agent ids. ``MEMORY_TELEMETRY_CONTENT=true`` adds the query text and
raw scope ids for debugging.

Metric names (all with the ``memory.`` prefix): ``ingest.turns``, ``ingest.decisions``,
``ingest.duration``, ``search.requests``, ``search.hits``, ``search.duration``,
``forgetting.memories``, ``forgetting.duration``, ``queue.dead_letters``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memory_core.domain.log_ids import scope_tag
from memory_core.domain.policy import COUNTERS

__all__ = [
    "INSTRUMENTATION_NAME",
    "Operation",
    "TelemetryStatus",
    "configure_telemetry",
    "content_enabled",
    "operation",
    "record_dead_letter",
    "record_forgetting",
    "record_ingest",
    "record_search",
    "reset_telemetry",
    "scope_hash",
    "use_providers",
]

logger = logging.getLogger(__name__)

INSTRUMENTATION_NAME = "memory_core"

try:  # the API is light; without it telemetry is off
    from opentelemetry import metrics as _otel_metrics
    from opentelemetry import trace as _otel_trace

    _HAVE_OTEL = True
except ImportError:  # pragma: no cover - exercised only without the package
    _HAVE_OTEL = False



@dataclass(frozen=True, slots=True)
class TelemetryStatus:
    """What :func:`configure_telemetry` set up: ``exporter`` is ``azure_monitor``, ``console`` or ``none``."""

    exporter: str
    content: bool


@dataclass
class _Instruments:
    tracer: Any
    turns: Any
    decisions: Any
    ingest_duration: Any
    searches: Any
    search_hits: Any
    search_duration: Any
    forgetting: Any
    forgetting_duration: Any
    dead_letters: Any


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    instruments: _Instruments | None = None
    content: bool = False
    status: TelemetryStatus | None = None


_state = _State()


#: The metric instruments, by kind (``counter`` or ``histogram``): the :class:`_Instruments` field, the
#: metric name, its unit and its description.
_METRICS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "counter": (
        ("turns", "memory.ingest.turns", "{turn}", "Turns processed, by status and extraction path"),
        ("decisions", "memory.ingest.decisions", "{decision}", "Consolidation decisions, by event and path"),
        ("searches", "memory.search.requests", "{search}", "Searches, by mode and profile"),
        ("forgetting", "memory.forgetting.memories", "{memory}", "Memories seen by forgetting, by outcome"),
        (
            "dead_letters",
            "memory.queue.dead_letters",
            "{message}",
            "Queue messages set aside as poison, by reason",
        ),
    ),
    "histogram": (
        ("ingest_duration", "memory.ingest.duration", "s", "Time to ingest one turn"),
        ("search_hits", "memory.search.hits", "{hit}", "Hits returned by one search"),
        ("search_duration", "memory.search.duration", "s", "Time to answer one search"),
        ("forgetting_duration", "memory.forgetting.duration", "s", "Time of one forgetting run"),
    ),
}


def _build(tracer_provider: Any | None, meter_provider: Any | None) -> _Instruments | None:
    if not _HAVE_OTEL:
        return None
    tracer = (tracer_provider or _otel_trace.get_tracer_provider()).get_tracer(INSTRUMENTATION_NAME)
    meter = (meter_provider or _otel_metrics.get_meter_provider()).get_meter(INSTRUMENTATION_NAME)
    instruments = {
        attribute: getattr(meter, f"create_{kind}")(name, unit=unit, description=description)
        for kind, metrics in _METRICS.items()
        for attribute, name, unit, description in metrics
    }
    return _Instruments(tracer=tracer, **instruments)


def use_providers(
    tracer_provider: Any | None = None, meter_provider: Any | None = None, *, content: bool = False
) -> None:
    """Record through these providers (``None``: the global ones). Tests and hosts with their own SDK use it."""
    with _state.lock:
        _state.instruments = _build(tracer_provider, meter_provider)
        _state.content = content


def reset_telemetry() -> None:
    """Forget the configuration and instruments (tests; a process normally configures once)."""
    with _state.lock:
        _state.instruments = None
        _state.content = False
        _state.status = None


def _instruments() -> _Instruments | None:
    if _state.instruments is None and _HAVE_OTEL:
        with _state.lock:
            if _state.instruments is None:
                _state.instruments = _build(None, None)
    return _state.instruments


def content_enabled() -> bool:
    """Whether memory text, queries and raw ids may go into telemetry (``MEMORY_TELEMETRY_CONTENT``)."""
    return _state.content


def configure_telemetry(
    *, content: bool = False, console: bool = False, exporter: Callable[[], str] | None = None
) -> TelemetryStatus:
    """Set up where telemetry goes, once per process (later calls return the first result).

    :func:`memory_core.bootstrap.configure_telemetry` calls this from the settings.

    Args:
        content: Put memory text, queries and raw scope ids into telemetry (``MEMORY_TELEMETRY_CONTENT``).
        console: Print spans and metrics to standard error when there is no ``exporter``.
        exporter: Installs the global tracer and meter providers of an exporter and returns its name
            (Azure Monitor); tried first.

    Returns:
        Which exporter is active. A failure to set one up is logged and leaves telemetry off; it
        never stops the app.
    """
    with _state.lock:
        if _state.status is not None:
            return _state.status
    name = "none"
    try:
        if exporter is not None and _HAVE_OTEL:
            name = exporter()
        elif console and _HAVE_OTEL:
            _configure_console()
            name = "console"
    except Exception as exc:  # telemetry must never take the app down
        logger.warning("telemetry exporter could not be set up (%s); continuing without it", exc)
        name = "none"
    use_providers(content=content)
    status = TelemetryStatus(exporter=name, content=content)
    with _state.lock:
        _state.status = status
    logger.info("telemetry: exporter %s, content %s", name, "on" if content else "off")
    return status


def _configure_console() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    resource = Resource.create({"service.name": "memory-core"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    _otel_trace.set_tracer_provider(tracer_provider)
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000)
    _otel_metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))


def scope_hash(user_id: str, agent_id: str) -> str:
    """The scope's tag, ``u:<hash>/a:<hash>``, the same the logs name it by
    (:func:`memory_core.domain.log_ids.scope_tag`: keyed, so it correlates without giving ids back)."""
    return scope_tag(user_id, agent_id)


def _scope_attributes(user_id: str | None, agent_id: str | None) -> dict[str, str]:
    if not user_id or not agent_id:
        return {}
    attrs = {"memory.scope_hash": scope_hash(user_id, agent_id)}
    if _state.content:
        attrs["memory.user_id"] = user_id
        attrs["memory.agent_id"] = agent_id
    return attrs


def _current_span() -> Any | None:
    if not _HAVE_OTEL:
        return None
    span = _otel_trace.get_current_span()
    return span if span.is_recording() else None


def _safe(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:  # telemetry never breaks the caller
            logger.debug("telemetry call %s failed", fn.__name__, exc_info=True)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@dataclass
class Operation:
    """A running operation: its span (or ``None``) and its start time."""

    name: str
    span: Any | None
    started: float

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def set(self, **attributes: Any) -> None:
        """Set span attributes (``None`` values are skipped)."""
        if self.span is None:
            return
        for key, value in attributes.items():
            if value is not None:
                self.span.set_attribute(key, value)


@contextmanager
def operation(name: str, **attributes: Any) -> Iterator[Operation]:
    """A span named ``name`` (``memory.ingest``, ``memory.search``...) around a block; exceptions are recorded."""
    inst = _instruments()
    if inst is None:
        yield Operation(name, None, time.perf_counter())
        return
    clean = {k: v for k, v in attributes.items() if v is not None}
    with inst.tracer.start_as_current_span(name, attributes=clean) as span:
        yield Operation(name, span, time.perf_counter())


@_safe
def record_ingest(result: Any, seconds: float | None = None) -> None:
    """Metrics (and span attributes) for one ingested turn.

    Args:
        result: An :class:`~memory_core.service.IngestResult` (or a ``ProcessOutcome``
            carrying one in ``ingest``).
        seconds: Duration; defaults to ``result.seconds``.
    """
    ingest = getattr(result, "ingest", None) if not hasattr(result, "steps") else result
    inst = _instruments()
    if ingest is None or inst is None:
        return
    duration = float(seconds if seconds is not None else getattr(ingest, "seconds", 0.0))
    base = {"memory.status": str(ingest.status), "memory.extraction_path": str(ingest.extraction_path)}
    inst.turns.add(1, base)
    inst.ingest_duration.record(duration, base)
    events: dict[str, int] = {}
    for step in ingest.steps:
        event = getattr(step.decision.event, "value", str(step.decision.event))
        path = "llm" if str(step.path).startswith("llm") else str(step.path)
        inst.decisions.add(1, {"memory.event": event, "memory.decision_path": path})
        events[event] = events.get(event, 0) + 1
    span = _current_span()
    if span is not None:
        span.set_attribute("memory.turn_id", str(ingest.turn_id))
        for key, value in {**base, **_scope_attributes(ingest.scope.user_id, ingest.scope.agent_id)}.items():
            span.set_attribute(key, value)
        span.set_attribute("memory.decisions", len(ingest.steps))
        for event, count in events.items():
            span.set_attribute(f"memory.decisions.{event.lower()}", count)
        if ingest.fallback_reason and _state.content:
            span.set_attribute("memory.fallback_reason", str(ingest.fallback_reason))


@_safe
def record_search(
    *,
    mode: str,
    profile: str,
    hits: int,
    seconds: float,
    user_id: str | None = None,
    agent_id: str | None = None,
    query: str | None = None,
    semantic_available: bool | None = None,
) -> None:
    """Metrics (and span attributes) for one search. ``query`` is kept only with content enabled."""
    inst = _instruments()
    if inst is None:
        return
    base = {"memory.mode": str(mode), "memory.profile": str(profile)}
    inst.searches.add(1, base)
    inst.search_hits.record(int(hits), base)
    inst.search_duration.record(float(seconds), base)
    span = _current_span()
    if span is not None:
        for key, value in {**base, **_scope_attributes(user_id, agent_id)}.items():
            span.set_attribute(key, value)
        span.set_attribute("memory.hits", int(hits))
        if semantic_available is not None:
            span.set_attribute("memory.semantic_available", bool(semantic_available))
        if query is not None and _state.content:
            span.set_attribute("memory.query", query)


@_safe
def record_forgetting(report: Any, seconds: float, *, pages: int | None = None) -> None:
    """Counts of one forgetting run (a report or run of :mod:`memory_core.service.forgetting`, or a
    mapping of its counts)."""
    inst = _instruments()
    if inst is None:
        return
    data: Mapping[str, Any] = report if isinstance(report, Mapping) else report.as_dict()
    dry_run = bool(data.get("dry_run", False))
    for outcome in COUNTERS:
        count = int(data.get(outcome, 0) or 0)
        if count:
            inst.forgetting.add(count, {"memory.outcome": outcome, "memory.dry_run": dry_run})
    inst.forgetting_duration.record(float(seconds), {"memory.dry_run": dry_run})
    span = _current_span()
    if span is not None:
        span.set_attribute("memory.dry_run", dry_run)
        for outcome in COUNTERS:
            span.set_attribute(f"memory.{outcome}", int(data.get(outcome, 0) or 0))
        if pages is not None:
            span.set_attribute("memory.pages", pages)
        if "complete" in data:
            span.set_attribute("memory.complete", bool(data["complete"]))


@_safe
def record_dead_letter(reason: str, *, message_id: str | None = None) -> None:
    """One queue message set aside as poison (``reason``: the error class, never the message body)."""
    inst = _instruments()
    if inst is None:
        return
    inst.dead_letters.add(1, {"memory.reason": reason})
    span = _current_span()
    if span is not None:
        span.set_attribute("memory.dead_letter_reason", reason)
        if message_id:
            span.set_attribute("messaging.message.id", message_id)


def record_search_exchange(request: Mapping[str, Any], result: Mapping[str, Any], seconds: float) -> None:
    """:func:`record_search` from one ``POST /memories/search`` request and its 200 response body."""
    hits = result.get("hits", [])
    record_search(
        mode=str(result.get("mode", request.get("mode", "hybrid"))),
        profile=str(result.get("ranking_profile", request.get("ranking_profile", "none"))),
        hits=len(hits) if isinstance(hits, list) else 0,
        seconds=seconds,
        user_id=request.get("user_id"),
        agent_id=request.get("agent_id"),
        query=request.get("query"),
        semantic_available=result.get("semantic_ranker_available"),
    )
