"""The OpenAPI document describes the answers of ``GET /health``: 200 ``ok`` or ``degraded``, 503 ``unhealthy``."""

from __future__ import annotations

import asyncio
from typing import Any

from memory_core.contract.openapi import build_openapi
from memory_core.contract.views import HealthResponse
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest


def test_health_documents_the_503_unhealthy_answer_with_the_health_schema() -> None:
    doc = build_openapi()
    responses = doc["paths"]["/health"]["get"]["responses"]
    assert set(responses) == {"200", "503"}
    for code in ("200", "503"):
        schema = responses[code]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/HealthResponse"}
    assert "unhealthy" in responses["503"]["description"]
    health = doc["components"]["schemas"]["HealthResponse"]
    assert health["properties"]["status"]["enum"] == ["ok", "degraded", "unhealthy"]
    assert set(health["required"]) == {"status", "version"}


def test_the_503_body_matches_the_documented_schema() -> None:
    class _NoService:
        pass

    facts: dict[str, Any] = {"ingestion": "stopped", "problem": "3 message(s) wait and no worker drains them"}
    api = MemoryApi(
        _NoService(),  # type: ignore[arg-type]  # health never touches the service
        health_details=lambda: facts,
        healthy=lambda d: d["ingestion"] != "stopped",
    )
    response = asyncio.run(api.handle(ApiRequest("GET", "/health", {})))
    assert response.status == 503
    body = HealthResponse.model_validate(response.body)  # the documented schema accepts it
    assert body.status == "unhealthy" and body.details["problem"].startswith("3 message(s)")
