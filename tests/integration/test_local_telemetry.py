"""The embedded runtime records ingest and search telemetry, without memory text by default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from runtime_helpers import running, turn_body

from memory_core import telemetry
from memory_core.bootstrap import configure_telemetry
from memory_core.config import Settings

SECRET = "My locker code is 8812 and I love green tea."


@pytest.fixture
def sinks() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    # Configure first (once per process, as the runtime would), then record into in-memory sinks.
    telemetry.reset_telemetry()
    configure_telemetry(Settings())
    telemetry.use_providers(tracer_provider, MeterProvider(metric_readers=[reader]), content=False)
    yield spans, reader
    telemetry.reset_telemetry()


def metric_names(reader: InMemoryMetricReader) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(dict(p.attributes) for p in metric.data.data_points)
    return out


def test_serve_records_ingest_and_search_without_content(
    tmp_path: Path, sinks: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    spans, reader = sinks
    with running(tmp_path / "memory.db", workers=1) as runtime:
        assert runtime.client.post("/api/turns", turn_body(0, SECRET)).status == 202
        runtime.drain()
        reply = runtime.client.post(
            "/api/memories/search",
            {"user_id": "u1", "agent_id": "a1", "query": "locker code", "mode": "hybrid"},
        )
        assert reply.status == 200 and reply.body["hits"]
    names = metric_names(reader)
    assert "memory.search.requests" in names and "memory.search.duration" in names
    assert "hybrid" in repr(names["memory.search.requests"])
    assert any(name.startswith("memory.ingest") or name.startswith("memory.turns") for name in names)
    exported = repr([s.to_json() for s in spans.get_finished_spans()]) + repr(names)
    assert "8812" not in exported and "locker" not in exported
