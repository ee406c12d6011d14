"""Shared pieces of the Azure adapter tests: a store on a capturing transport, records, responses."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from azure.core.credentials import AzureKeyCredential
from azure_transport import Captured, CapturingTransport, Scripted, json_response
from rest_contract import api_version, operation, validate

from memory_core.adapters.azure.documents import to_document
from memory_core.adapters.azure.retry import RetrySettings
from memory_core.adapters.azure.search_index import SELECT_FIELDS, build_index
from memory_core.adapters.azure.search_store import AzureSearchMemoryStore
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.ports import FixedClock

__all__ = [
    "DIMENSIONS",
    "ENDPOINT",
    "INDEX",
    "NOW",
    "SleepRecorder",
    "assert_documents_fit_index",
    "assert_search_fits_index",
    "check_request",
    "index_result",
    "make_record",
    "make_store",
    "run",
    "search_response",
]

T = TypeVar("T")

ENDPOINT = "https://memtest.search.windows.net"
INDEX = "memories"
DIMENSIONS = 4
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SEARCH_PATH = f"/indexes('{INDEX}')/docs/search.post.search"
INDEX_DOCS_PATH = f"/indexes('{INDEX}')/docs/search.index"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion (the tests are synchronous)."""
    return asyncio.run(coro)


class SleepRecorder:
    """An awaitable ``sleep`` that records instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_store(
    transport: CapturingTransport, sleep: SleepRecorder | None = None, **kwargs: Any
) -> AzureSearchMemoryStore:
    """A store with an API key credential on ``transport``, a fixed clock and recorded sleeps."""
    kwargs.setdefault("dimensions", DIMENSIONS)
    kwargs.setdefault("clock", FixedClock(NOW))
    kwargs.setdefault("retry", RetrySettings(attempts=3, base_delay=0.5, max_delay=10.0, document_attempts=3))
    return AzureSearchMemoryStore(
        ENDPOINT,
        INDEX,
        AzureKeyCredential("test-admin-key"),
        transport=transport,
        sleep=sleep or SleepRecorder(),
        **kwargs,
    )


def make_record(memory_id: str = "m1", **changes: Any) -> MemoryRecord:
    """A fully populated record of scope (u1, a1)."""
    data: dict[str, Any] = {
        "id": memory_id,
        "user_id": "u1",
        "agent_id": "a1",
        "memory": "コーヒーはブラックが好き",
        "summary": "coffee: black",
        "category": "preference",
        "importance": 0.8,
        "confidence": 0.7,
        "status": MemoryStatus.ACTIVE,
        "source": "rule-fallback",
        "retention_score": 0.9,
        "access_count": 2,
        "created_at": NOW - timedelta(days=10),
        "updated_at": NOW - timedelta(days=5),
        "last_accessed_at": NOW - timedelta(days=1),
        "expires_at": None,
        "metadata": {"turn_id": "t-1", "tags": ["飲み物"]},
        "embedding": [0.5, 0.5, 0.5, 0.5],
    }
    data.update(changes)
    return MemoryRecord(**data)


def search_response(
    *records: MemoryRecord,
    scores: list[float] | None = None,
    extras: list[dict[str, Any]] | None = None,
) -> Scripted:
    """A 200 search answer carrying ``records`` (every selected field), as the service sends it.

    ``extras`` adds ``@search.*`` keys per hit (reranker score, debug info).
    """
    values = []
    for i, record in enumerate(records):
        document = {k: v for k, v in to_document(record).items() if k in SELECT_FIELDS}
        score = scores[i] if scores else 1.0 / (i + 1)
        values.append({"@search.score": score, **document, **(extras[i] if extras else {})})
    body = {"value": values}
    validate("SearchDocumentsResult", body)
    return json_response(200, body)


def index_result(*outcomes: tuple[str, int] | tuple[str, int, str]) -> Scripted:
    """A search.index answer: ``(key, statusCode[, message])`` per document; 207 when any failed."""
    value = []
    for outcome in outcomes:
        key, status = outcome[0], outcome[1]
        item: dict[str, Any] = {"key": key, "status": status in (200, 201), "statusCode": status}
        if len(outcome) == 3:
            item["errorMessage"] = outcome[2]
        value.append(item)
    body = {"value": value}
    validate("IndexDocumentsResult", body)
    return json_response(207 if any(not v["status"] for v in value) else 200, body)


def check_request(captured: Captured, method: str, path_template: str) -> dict[str, Any]:
    """Assert method, path, api-version and required headers; validate the body; return it."""
    spec = operation(method, path_template)
    assert captured.method == method
    assert captured.path == path_template.replace("{indexName}", INDEX)
    assert captured.api_version == api_version() == "2026-04-01"
    for parameter in spec["requiredQueryParameters"]:
        assert parameter["name"] in captured.query
    for header in spec["requiredHeaderParameters"]:
        value = {k.lower(): v for k, v in captured.headers.items()}.get(header["name"].lower())
        assert value is not None, f"missing required header {header['name']}"
        if "enum" in header:
            assert value in header["enum"]
    assert captured.headers.get("api-key") == "test-admin-key"
    body_schema = spec["body"]["schema"]["$ref"].rsplit("/", 1)[-1]
    validate(body_schema, captured.body)
    body: dict[str, Any] = captured.body
    if path_template.endswith("search.post.search"):
        assert_search_fits_index(body)
    return body


_EDM_CHECKS: dict[str, Any] = {
    "Edm.String": lambda v: isinstance(v, str),
    "Edm.Double": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "Edm.Int32": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31,
    "Edm.DateTimeOffset": lambda v: isinstance(v, str) and datetime.fromisoformat(v.replace("Z", "+00:00")),
    "Collection(Edm.Single)": lambda v: isinstance(v, list) and len(v) == DIMENSIONS,
    "Collection(Edm.String)": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def assert_documents_fit_index(batch: dict[str, Any]) -> None:
    """Every document field of an IndexBatch exists in the index with a value of its EDM type."""
    fields = {f["name"]: f for f in build_index(INDEX, DIMENSIONS).as_dict()["fields"]}
    for action in batch["value"]:
        assert action["@search.action"] in {"upload", "merge", "mergeOrUpload", "delete"}
        assert "id" in action
        for name, value in action.items():
            if name == "@search.action":
                continue
            assert name in fields, f"{name} is not an index field"
            if value is not None:
                assert _EDM_CHECKS[fields[name]["type"]](value), (
                    f"{name}={value!r} is not {fields[name]['type']}"
                )


_FILTER_FIELD = re.compile(r"\b([a-z_]+) (?:eq|ne|gt|ge|lt|le) |search\.in\(([a-z_]+),")
_ANY = re.compile(r"\b([a-z_]+)/any\((?:([a-z_]+):)?")


def assert_search_fits_index(body: dict[str, Any]) -> None:
    """A search body names only index fields, each with the attribute its use needs."""
    index = build_index(INDEX, DIMENSIONS).as_dict()
    fields = {f["name"]: f for f in index["fields"]}
    for name in filter(None, body.get("select", "").split(",")):
        assert fields[name].get("retrievable", True), f"{name} is not retrievable"
    for clause in filter(None, body.get("orderby", "").split(",")):
        name = clause.strip().split(" ")[0]
        assert fields[name]["sortable"], f"{name} is not sortable"
    expression = _without_literals(body.get("filter", ""))
    variables = {m.group(2): m.group(1) for m in _ANY.finditer(expression) if m.group(2)}  # x/any(v: ...)
    for match in _ANY.finditer(expression):
        assert fields[match.group(1)]["filterable"], f"{match.group(1)} is not filterable"
        assert fields[match.group(1)]["type"].startswith("Collection("), f"{match.group(1)} is not a collection"
    for match in _FILTER_FIELD.finditer(expression):
        name = match.group(1) or match.group(2)
        name = variables.get(name, name)
        assert fields[name]["filterable"], f"{name} is not filterable"
    for facet in body.get("facets", []):
        assert fields[facet.split(",")[0]]["facetable"]
    if "scoringProfile" in body:
        assert body["scoringProfile"] in {p["name"] for p in index["scoringProfiles"]}
    if "semanticConfiguration" in body:
        assert body["semanticConfiguration"] in {c["name"] for c in index["semantic"]["configurations"]}
    for query in body.get("vectorQueries", []):
        assert fields[query["fields"]]["type"] == "Collection(Edm.Single)"
        assert len(query["vector"]) == fields[query["fields"]]["dimensions"]


def _without_literals(expression: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", expression)
