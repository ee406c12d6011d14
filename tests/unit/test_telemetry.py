"""Telemetry: what is recorded, and that memory text and user content stay out unless enabled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memory_core import telemetry
from memory_core.bootstrap import configure_telemetry
from memory_core.config import Settings
from memory_core.domain.messages import Decision, MemoryCandidate, MemoryEvent
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.service import ForgettingReport, IngestResult, StepResult

SECRET_MEMORY = "My bank PIN is 4321 and I love green tea"
SECRET_QUERY = "what is my bank PIN"
USER = "alice@example.com"
NOW = datetime(2026, 11, 29, tzinfo=UTC)


class Sinks:
    def __init__(self, content: bool) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.reader])
        telemetry.use_providers(tracer_provider, meter_provider, content=content)

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        data = self.reader.get_metrics_data()
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = (point.count, point.sum)
                        out.setdefault(metric.name, []).append((dict(point.attributes), value))
        return out

    def dump(self) -> str:
        """Everything exported, as text: the haystack for leaks."""
        spans = [
            {
                "name": s.name,
                "attributes": dict(s.attributes or {}),
                "events": [dict(e.attributes or {}) for e in s.events],
            }
            for s in self.spans.get_finished_spans()
        ]
        return json.dumps({"spans": spans, "metrics": self.metrics()}, default=str, ensure_ascii=False)


@pytest.fixture
def sinks() -> Iterator[Sinks]:
    telemetry.reset_telemetry()
    yield Sinks(content=False)
    telemetry.reset_telemetry()


@pytest.fixture
def content_sinks() -> Iterator[Sinks]:
    telemetry.reset_telemetry()
    yield Sinks(content=True)
    telemetry.reset_telemetry()


def ingest_result() -> IngestResult:
    scope = Scope.of(USER, "a1")
    candidate = MemoryCandidate(memory=SECRET_MEMORY)
    record = MemoryRecord(
        id="m1",
        user_id=USER,
        agent_id="a1",
        memory=SECRET_MEMORY,
        summary=SECRET_MEMORY,
        created_at=NOW,
        updated_at=NOW,
    )
    steps = [
        StepResult(
            0,
            Decision(
                event=MemoryEvent.ADD,
                candidate=candidate,
                memory_id="m1",
                after=record,
                reason=f"new: {SECRET_MEMORY}",
            ),
            "rules",
        ),
        StepResult(1, Decision(event=MemoryEvent.NONE, candidate=candidate, reason="known"), "llm"),
    ]
    return IngestResult(
        turn_id="turn-1",
        scope=scope,
        status="ingested",
        extraction_path="llm",
        fallback_reason=f"model said {SECRET_MEMORY}",
        steps=steps,
        seconds=0.25,
    )


def test_ingest_metrics_and_span_without_content(sinks: Sinks) -> None:
    with telemetry.operation("memory.ingest") as op:
        telemetry.record_ingest(ingest_result(), op.elapsed)
    metrics = sinks.metrics()
    assert metrics["memory.ingest.turns"] == [
        ({"memory.status": "ingested", "memory.extraction_path": "llm"}, 1)
    ]
    decisions = {
        (a["memory.event"], a["memory.decision_path"]): v for a, v in metrics["memory.ingest.decisions"]
    }
    assert decisions == {("ADD", "rules"): 1, ("NONE", "llm"): 1}
    ((_, (count, _)),) = metrics["memory.ingest.duration"]
    assert count == 1
    (span,) = sinks.spans.get_finished_spans()
    assert span.name == "memory.ingest"
    assert span.attributes["memory.turn_id"] == "turn-1"
    assert span.attributes["memory.decisions.add"] == 1 and span.attributes["memory.decisions"] == 2
    assert span.attributes["memory.scope_hash"] == telemetry.scope_hash(USER, "a1")
    text = sinks.dump()
    for secret in (SECRET_MEMORY, "4321", "green tea", USER):
        assert secret not in text


def test_search_and_forgetting_without_content(sinks: Sinks) -> None:
    with telemetry.operation("memory.search"):
        telemetry.record_search(
            mode="hybrid",
            profile="memory-priority",
            hits=3,
            seconds=0.02,
            user_id=USER,
            agent_id="a1",
            query=SECRET_QUERY,
        )
    report = ForgettingReport(dry_run=False, scanned=10, archived=2, expired=1, unchanged=7, written=3)
    with telemetry.operation("memory.forgetting"):
        telemetry.record_forgetting(report, 1.5, pages=2)
    telemetry.record_dead_letter("ValidationError", message_id="turn-9")
    metrics = sinks.metrics()
    assert metrics["memory.search.requests"] == [
        ({"memory.mode": "hybrid", "memory.profile": "memory-priority"}, 1)
    ]
    assert metrics["memory.search.hits"][0][1] == (1, 3)
    outcomes = {a["memory.outcome"]: v for a, v in metrics["memory.forgetting.memories"]}
    assert outcomes == {"scanned": 10, "archived": 2, "expired": 1, "unchanged": 7, "written": 3}
    assert metrics["memory.queue.dead_letters"] == [({"memory.reason": "ValidationError"}, 1)]
    search_span, forgetting_span = sinks.spans.get_finished_spans()
    assert search_span.attributes["memory.hits"] == 3 and "memory.query" not in search_span.attributes
    assert (
        forgetting_span.attributes["memory.archived"] == 2 and forgetting_span.attributes["memory.pages"] == 2
    )
    text = sinks.dump()
    assert SECRET_QUERY not in text and USER not in text


def test_content_only_when_enabled(content_sinks: Sinks) -> None:
    with telemetry.operation("memory.search"):
        telemetry.record_search(
            mode="keyword",
            profile="none",
            hits=0,
            seconds=0.01,
            user_id=USER,
            agent_id="a1",
            query=SECRET_QUERY,
        )
    (span,) = content_sinks.spans.get_finished_spans()
    assert span.attributes["memory.query"] == SECRET_QUERY
    assert span.attributes["memory.user_id"] == USER
    assert telemetry.content_enabled()


def test_exceptions_are_recorded_on_the_span_and_re_raised(sinks: Sinks) -> None:
    with pytest.raises(RuntimeError), telemetry.operation("memory.ingest"):
        raise RuntimeError("boom")
    (span,) = sinks.spans.get_finished_spans()
    assert not span.status.is_ok


def test_recording_never_raises(sinks: Sinks) -> None:
    telemetry.record_ingest(object())
    telemetry.record_forgetting({"scanned": "not a number"}, 1.0)
    telemetry.record_search(mode="hybrid", profile="none", hits="x", seconds=0.1)  # type: ignore[arg-type]


def test_configure_without_exporters_is_a_no_op_and_runs_once() -> None:
    telemetry.reset_telemetry()
    try:
        status = configure_telemetry(Settings())
        assert status == telemetry.TelemetryStatus(exporter="none", content=False)
        again = configure_telemetry(Settings(telemetry_content=True))
        assert again is status
    finally:
        telemetry.reset_telemetry()


def test_application_insights_gets_the_managed_identity_and_no_log_export(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import azure.identity
    import azure.monitor.opentelemetry

    calls: list[dict[str, Any]] = []
    credentials: list[dict[str, Any]] = []

    class Credential:
        def __init__(self, **kwargs: Any) -> None:
            credentials.append(kwargs)

    monkeypatch.setattr(azure.monitor.opentelemetry, "configure_azure_monitor", lambda **kw: calls.append(kw))
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", Credential)
    telemetry.reset_telemetry()
    try:
        settings = Settings(
            applicationinsights_connection_string="InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x.example/",
            azure_client_id="client-1",
        )
        status = configure_telemetry(settings)
        assert status.exporter == "azure_monitor"
        (call,) = calls
        assert call["connection_string"] == settings.applicationinsights_connection_string
        assert isinstance(call["credential"], Credential)
        assert credentials == [{"managed_identity_client_id": "client-1"}]
        assert call["disable_logging"] is True
    finally:
        telemetry.reset_telemetry()


def test_a_failing_exporter_leaves_telemetry_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.identity
    import azure.monitor.opentelemetry

    def broken(**kwargs: Any) -> None:
        raise ValueError("bad connection string")

    monkeypatch.setattr(azure.monitor.opentelemetry, "configure_azure_monitor", broken)
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", lambda **kwargs: object())
    telemetry.reset_telemetry()
    try:
        status = configure_telemetry(Settings(applicationinsights_connection_string="x"))
        assert status.exporter == "none"
    finally:
        telemetry.reset_telemetry()
