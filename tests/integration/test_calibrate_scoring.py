"""``scripts/calibrate_scoring.py`` end to end against a simulated service (no network).

The simulated service applies the scoring profiles the way ``memory_core.domain.ranking`` predicts (or, in
the second test, with another aggregation), so the script must report agreement (or not). Every
request body is validated against the REST contract subset.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from azure_transport import Captured, CapturingTransport, Scripted, json_response
from rest_contract import validate

from memory_core.config import Settings
from memory_core.domain.ranking import MEMORY_PRIORITY, MEMORY_RECENCY

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "calibrate_scoring.py"
PROFILES = {p.name: p for p in (MEMORY_PRIORITY, MEMORY_RECENCY)}


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibrate_scoring", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SimulatedService:
    """Just enough of Azure AI Search for the calibration script."""

    def __init__(self, combine: str = "sum") -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.combine = combine

    def multiplier(self, profile_name: str, document: dict[str, Any]) -> float:
        profile = PROFILES[profile_name]
        columns = {
            "importance": np.array([document["importance"]]),
            "retention_score": np.array([document["retention_score"]]),
            "access_count": np.array([float(document["access_count"])]),
            "updated_at": np.array(
                [datetime.fromisoformat(document["updated_at"].replace("Z", "+00:00")).timestamp()]
            ),
        }
        total, per_function = profile.multiplier(columns, now_epoch=time.time())
        if self.combine == "product":
            return float(np.prod([v[0] for v in per_function.values()]))
        return float(total[0])

    def __call__(self, request: Captured) -> Scripted:
        if request.method == "GET":
            return json_response(404, {"error": {"code": "ResourceNotFound", "message": "no index"}})
        if request.method == "PUT":
            validate("SearchIndex", request.body)
            return json_response(201, {**request.body, "@odata.etag": '"1"'})
        if request.method == "DELETE":
            return Scripted(204)
        if request.path.endswith("/docs/search.index"):
            validate("IndexBatch", request.body)
            for action in request.body["value"]:
                self.documents[action["id"]] = {k: v for k, v in action.items() if k != "@search.action"}
            return json_response(
                200, {"value": [{"key": k, "status": True, "statusCode": 201} for k in self.documents]}
            )
        validate("SearchRequest", request.body)
        body = request.body
        profile = body.get("scoringProfile")
        hybrid = "search" in body and "vectorQueries" in body
        values = []
        for rank, (_key, document) in enumerate(sorted(self.documents.items())):
            relevance = 2.0 / (60 + rank) if hybrid else 1.7
            boost = self.multiplier(profile, document) if profile else 1.0
            hit: dict[str, Any] = {"@search.score": relevance * boost}
            hit.update({k: v for k, v in document.items() if k != "embedding"})
            if body.get("debug") == "vector" and hybrid:
                hit["@search.documentDebugInfo"] = {"vectors": {"subscores": {"documentBoost": boost}}}
            values.append(hit)
        return json_response(200, {"value": values})


def run_script(service: SimulatedService) -> tuple[bool, CapturingTransport]:
    module = load_script()
    transport = CapturingTransport(fallback=service)
    settings = Settings(azure_search_endpoint="https://memtest.search.windows.net", azure_search_api_key="k")

    async def no_sleep(seconds: float) -> None:
        return None

    agrees = asyncio.run(
        module.calibrate(
            settings, tolerance=0.02, settle=0.0, keep_index=False, sleep=no_sleep, transport=transport
        )
    )
    return agrees, transport


def test_calibration_agrees_with_a_service_that_sums_boosts(capsys: pytest.CaptureFixture[str]) -> None:
    agrees, transport = run_script(SimulatedService("sum"))
    out = capsys.readouterr().out
    assert agrees, out
    assert "AGREES with the service" in out
    methods = [(r.method, r.path.split("/")[-1]) for r in transport.requests]
    assert methods[0][0] == "GET" and methods[1][0] == "PUT" and methods[-1][0] == "DELETE"
    searches = [r.body for r in transport.requests if r.path.endswith("search.post.search")]
    # a write first reads the scope's entities (its texts may name a name the scope knows): not a probe
    searches = [b for b in searches if "entity_ids/any()" not in str(b.get("filter"))]
    assert [b.get("scoringProfile") for b in searches] == [
        None,
        "memory-priority",
        "memory-priority",
        "memory-recency",
        "memory-recency",
    ]
    assert all(b.get("debug") == "vector" for b in searches)


def test_calibration_notices_a_different_aggregation(capsys: pytest.CaptureFixture[str]) -> None:
    agrees, _ = run_script(SimulatedService("product"))
    assert not agrees
    assert "DOES NOT AGREE" in capsys.readouterr().out


def test_script_without_a_service_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_SEARCH_ENDPOINT", raising=False)
    assert load_script().main([]) == 2
