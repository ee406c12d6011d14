"""The Azure AI Search adapter against a capturing transport: every request checked, no network.

Each test scripts the service's answers, runs the adapter, then asserts every request field by field
(method, path, api-version, body) and validates every body against the REST contract subset in
``tests/specs`` (closed objects, discriminators flattened).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ServiceRequestError, ServiceResponseTimeoutError
from azure_fixtures import (
    DIMENSIONS,
    ENDPOINT,
    INDEX,
    NOW,
    SleepRecorder,
    assert_documents_fit_index,
    check_request,
    index_result,
    make_record,
    make_store,
    run,
    search_response,
)
from azure_transport import CapturingTransport, json_response
from hypothesis import given
from hypothesis import strategies as st
from rest_contract import validate

from memory_core.adapters.azure import odata
from memory_core.adapters.azure import search_store as azure_search_store
from memory_core.adapters.azure.documents import from_document, to_document
from memory_core.adapters.azure.index_writes import PartialWriteError, RetryablePartialWriteError
from memory_core.adapters.azure.retry import RetrySettings
from memory_core.adapters.azure.search_index import (
    SELECT_FIELDS,
    build_index,
    ensure_index,
    ensure_index_definition,
    render_scoring_profile,
    search_credential,
)
from memory_core.adapters.azure.search_store import RETENTION_FIELDS, AzureSearchMemoryStore
from memory_core.config import Settings
from memory_core.domain.fusion import FUSIONS, fusion_for
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.ranking import MEMORY_PRIORITY, MEMORY_RECENCY, PROFILES
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.domain.search_time import TimeWindow
from memory_core.domain.validation import parse_model
from memory_core.errors import ConflictError, NotFoundError, PermanentError, TransientError, ValidationError
from memory_core.ports import MemoryStore
from memory_core.service.forgetting import ForgettingReport, apply_forgetting

SEARCH = "/indexes('{indexName}')/docs/search.post.search"
INDEX_DOCS = "/indexes('{indexName}')/docs/search.index"
PUT_INDEX = "/indexes('{indexName}')"
SCOPE = Scope.of("u1", "a1")
KEYWORD = MemorySearchOptions(mode=SearchMode.KEYWORD)
VECTOR = [0.1, 0.2, 0.3, 0.4]
NOW_LITERAL = "2026-11-29T12:00:00.000000Z"
BASE_FILTER = (
    "user_id eq 'u1' and agent_id eq 'a1' and status eq 'active' and "
    f"(expires_at eq null or expires_at gt {NOW_LITERAL}) and "
    f"(valid_until eq null or valid_until gt {NOW_LITERAL})"
)
SELECT = ",".join(SELECT_FIELDS)


def admin_key() -> AzureKeyCredential:
    return AzureKeyCredential("test-admin-key")


async def forget(store: MemoryStore, policy: HumanMemoryPolicy, **kwargs: Any) -> ForgettingReport:
    """The one forgetting algorithm over the Azure store, at the fixtures' time."""
    return await apply_forgetting(store, policy, NOW, **kwargs)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "store": "azure_search",
        "azure_search_endpoint": "https://memtest.search.windows.net",
        "azure_search_index_name": INDEX,
        "azure_search_api_key": "test-admin-key",
    }
    values.update(overrides)
    return Settings(**values)


# ================================================================================================
# The index definition
# ================================================================================================

EXPECTED_FIELDS = [
    {
        "name": "id",
        "type": "Edm.String",
        "key": True,
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "user_id",
        "type": "Edm.String",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "agent_id",
        "type": "Edm.String",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": True,
        "retrievable": True,
    },
    {
        "name": "memory",
        "type": "Edm.String",
        "searchable": True,
        "filterable": False,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
        "analyzer": "ja.microsoft",
    },
    {
        "name": "summary",
        "type": "Edm.String",
        "searchable": True,
        "filterable": False,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
        "analyzer": "ja.microsoft",
    },
    {
        "name": "category",
        "type": "Edm.String",
        "searchable": True,
        "filterable": True,
        "sortable": False,
        "facetable": True,
        "retrievable": True,
    },
    {
        "name": "importance",
        "type": "Edm.Double",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "confidence",
        "type": "Edm.Double",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "status",
        "type": "Edm.String",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": True,
        "retrievable": True,
    },
    {
        "name": "source",
        "type": "Edm.String",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "kind",
        "type": "Edm.String",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": True,
        "retrievable": True,
    },
    {
        "name": "retention_score",
        "type": "Edm.Double",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "access_count",
        "type": "Edm.Int32",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "created_at",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "updated_at",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "last_accessed_at",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "expires_at",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "valid_from",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "valid_until",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "superseded_by",
        "type": "Edm.String",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "event_at",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "event_until",
        "type": "Edm.DateTimeOffset",
        "searchable": False,
        "filterable": True,
        "sortable": True,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "metadata_json",
        "type": "Edm.String",
        "searchable": False,
        "filterable": False,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "provenance_json",
        "type": "Edm.String",
        "searchable": False,
        "filterable": False,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "embedding",
        "type": "Collection(Edm.Single)",
        "searchable": True,
        "retrievable": True,
        "dimensions": DIMENSIONS,
        "vectorSearchProfile": "memory-hnsw",
    },
    *(
        {
            "name": name,
            "type": "Collection(Edm.String)",
            "searchable": False,
            "filterable": True,
            "sortable": False,
            "facetable": False,
            "retrievable": False,
        }
        for name in ("metadata_terms", "session_ids")
    ),
    {
        "name": "entity_ids",
        "type": "Collection(Edm.String)",
        "searchable": False,
        "filterable": True,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
    {
        "name": "entity_names",
        "type": "Collection(Edm.String)",
        "searchable": True,
        "filterable": False,
        "sortable": False,
        "facetable": False,
        "retrievable": False,
        "analyzer": "ja.microsoft",
    },
    {
        "name": "entities_json",
        "type": "Edm.String",
        "searchable": False,
        "filterable": False,
        "sortable": False,
        "facetable": False,
        "retrievable": True,
    },
]
#: The entity fields of a document that names nothing.
NO_ENTITIES = {"entity_ids": [], "entity_names": [], "entities_json": "[]"}

EXPECTED_SCORING_PROFILES = [
    {
        "name": "memory-priority",
        "functionAggregation": "sum",
        "functions": [
            {
                "type": "magnitude",
                "fieldName": "importance",
                "boost": 2.0,
                "interpolation": "linear",
                "magnitude": {
                    "boostingRangeStart": 0.0,
                    "boostingRangeEnd": 1.0,
                    "constantBoostBeyondRange": True,
                },
            },
            {
                "type": "magnitude",
                "fieldName": "retention_score",
                "boost": 1.5,
                "interpolation": "linear",
                "magnitude": {
                    "boostingRangeStart": 0.0,
                    "boostingRangeEnd": 1.0,
                    "constantBoostBeyondRange": True,
                },
            },
            {
                "type": "magnitude",
                "fieldName": "access_count",
                "boost": 1.5,
                "interpolation": "logarithmic",
                "magnitude": {
                    "boostingRangeStart": 0.0,
                    "boostingRangeEnd": 20.0,
                    "constantBoostBeyondRange": True,
                },
            },
        ],
    },
    {
        "name": "memory-recency",
        "functionAggregation": "sum",
        "functions": [
            {
                "type": "freshness",
                "fieldName": "updated_at",
                "boost": 2.0,
                "interpolation": "linear",
                "freshness": {"boostingDuration": "P90D"},
            },
        ],
    },
]

EXPECTED_VECTOR_SEARCH = {
    "algorithms": [
        {
            "name": "memory-hnsw-cosine",
            "kind": "hnsw",
            "hnswParameters": {"m": 4, "efConstruction": 400, "efSearch": 500, "metric": "cosine"},
        },
        {
            "name": "memory-exhaustive-cosine",
            "kind": "exhaustiveKnn",
            "exhaustiveKnnParameters": {"metric": "cosine"},
        },
    ],
    "profiles": [
        {"name": "memory-hnsw", "algorithm": "memory-hnsw-cosine"},
        {"name": "memory-exhaustive", "algorithm": "memory-exhaustive-cosine"},
    ],
}

EXPECTED_SEMANTIC = {
    "defaultConfiguration": "memory-semantic",
    "configurations": [
        {
            "name": "memory-semantic",
            "prioritizedFields": {
                "prioritizedContentFields": [{"fieldName": "memory"}, {"fieldName": "summary"}],
                "prioritizedKeywordsFields": [{"fieldName": "category"}],
            },
            "rankingOrder": "BoostedRerankerScore",
        }
    ],
}

EXPECTED_INDEX = {
    "name": INDEX,
    "fields": EXPECTED_FIELDS,
    "scoringProfiles": EXPECTED_SCORING_PROFILES,
    "similarity": {"@odata.type": "#Microsoft.Azure.Search.BM25Similarity", "k1": 1.2, "b": 0.75},
    "semantic": EXPECTED_SEMANTIC,
    "vectorSearch": EXPECTED_VECTOR_SEARCH,
}


def service_echo(body: dict[str, Any], etag: str = '"0x8DD1"') -> dict[str, Any]:
    """What the service answers for an index: the definition plus defaults and an ETag."""
    echoed = json.loads(json.dumps(body))
    echoed["@odata.etag"] = etag
    echoed.setdefault("suggesters", [])
    echoed.setdefault("analyzers", [])
    for field in echoed["fields"]:
        field.setdefault("synonymMaps", [])
        if field["type"] != "Collection(Edm.Single)":
            field.setdefault("stored", True)
    return echoed


def test_index_definition_is_created_when_missing() -> None:
    transport = CapturingTransport(
        [json_response(404, {"error": {"code": "ResourceNotFound", "message": "No index"}})]
    )
    transport.add(lambda captured: json_response(201, service_echo(captured.body)))
    outcome = run(
        ensure_index(
            ENDPOINT, INDEX, admin_key(), dimensions=DIMENSIONS, transport=transport
        )
    )
    assert outcome == "created"
    get, put = transport.requests
    assert get.method == "GET" and get.path == f"/indexes('{INDEX}')" and get.api_version == "2026-04-01"
    body = check_request(put, "PUT", PUT_INDEX)
    assert put.headers["If-None-Match"] == "*"
    assert "If-Match" not in put.headers
    assert put.headers["Prefer"] == "return=representation"
    assert body == EXPECTED_INDEX


def test_scoring_profiles_are_rendered_from_ranking() -> None:
    rendered = [render_scoring_profile(p).as_dict() for p in PROFILES.values() if p is not None]
    assert [p["name"] for p in rendered] == [MEMORY_PRIORITY.name, MEMORY_RECENCY.name]
    for profile, azure in zip((MEMORY_PRIORITY, MEMORY_RECENCY), rendered, strict=True):
        assert azure["functionAggregation"] == profile.aggregation
        for function, wire in zip(profile.functions, azure["functions"], strict=True):
            assert wire["fieldName"] == function.field
            assert wire["boost"] == function.boost
            assert wire["interpolation"] == function.interpolation.value
            assert wire["type"] == function.kind.value
    assert rendered == json.loads(json.dumps(EXPECTED_SCORING_PROFILES)) or all(
        sorted(a.items()) == sorted(b.items())
        for a, b in zip(rendered, EXPECTED_SCORING_PROFILES, strict=True)
    )


def test_the_index_has_no_vectorizer_and_an_old_one_is_removed() -> None:
    """Queries bring their vectors (memory-core's embedder, with its cache and ``dimensions``), so
    the index has no integrated vectorizer; one left by an earlier version is dropped, since the
    search service may no longer call Azure OpenAI."""
    assert "vectorizers" not in EXPECTED_VECTOR_SEARCH
    assert all("vectorizer" not in p for p in EXPECTED_VECTOR_SEARCH["profiles"])
    old = json.loads(json.dumps(EXPECTED_INDEX))
    old["vectorSearch"]["vectorizers"] = [
        {
            "name": "memory-aoai",
            "kind": "azureOpenAI",
            "azureOpenAIParameters": {
                "resourceUri": "https://aoai.openai.azure.com",
                "deploymentId": "text-embedding-3-small",
                "modelName": "text-embedding-3-small",
            },
        }
    ]
    for profile in old["vectorSearch"]["profiles"]:
        profile["vectorizer"] = "memory-aoai"
    transport = CapturingTransport([json_response(200, service_echo(old, etag='"0xOLD"'))])
    transport.add(lambda captured: json_response(200, service_echo(captured.body, etag='"0xNEW"')))
    assert run(ensure_index(ENDPOINT, INDEX, admin_key(), dimensions=DIMENSIONS, transport=transport)) == "updated"
    put = transport.requests[1]
    body = check_request(put, "PUT", PUT_INDEX)
    assert put.headers["If-Match"] == '"0xOLD"'
    body.pop("@odata.etag")
    assert body == EXPECTED_INDEX


def test_ensure_index_is_unchanged_when_the_service_already_has_it() -> None:
    wanted = json.loads(json.dumps(EXPECTED_INDEX))
    transport = CapturingTransport([json_response(200, service_echo(wanted))])
    outcome = run(
        ensure_index(
            ENDPOINT, INDEX, admin_key(), dimensions=DIMENSIONS, transport=transport
        )
    )
    assert outcome == "unchanged"
    assert [r.method for r in transport.requests] == ["GET"]


def test_ensure_index_updates_with_the_etag() -> None:
    old = json.loads(json.dumps(EXPECTED_INDEX))
    old["scoringProfiles"] = old["scoringProfiles"][:1]
    transport = CapturingTransport([json_response(200, service_echo(old, etag='"0xOLD"'))])
    transport.add(lambda captured: json_response(200, service_echo(captured.body, etag='"0xNEW"')))
    outcome = run(
        ensure_index(
            ENDPOINT, INDEX, admin_key(), dimensions=DIMENSIONS, transport=transport
        )
    )
    assert outcome == "updated"
    put = transport.requests[1]
    body = check_request(put, "PUT", PUT_INDEX)
    assert put.headers["If-Match"] == '"0xOLD"'
    assert "If-None-Match" not in put.headers
    assert body.pop("@odata.etag") == '"0xOLD"'
    assert body == EXPECTED_INDEX


def test_ensure_index_rereads_after_a_concurrent_change() -> None:
    old = json.loads(json.dumps(EXPECTED_INDEX))
    old["fields"] = old["fields"][:-1]
    transport = CapturingTransport(
        [
            json_response(200, service_echo(old, etag='"0x1"')),
            json_response(412, {"error": {"code": "PreconditionFailed", "message": "etag mismatch"}}),
            json_response(200, service_echo(json.loads(json.dumps(EXPECTED_INDEX)), etag='"0x2"')),
        ]
    )
    outcome = run(
        ensure_index(
            ENDPOINT, INDEX, admin_key(), dimensions=DIMENSIONS, transport=transport
        )
    )
    assert outcome == "unchanged"
    assert [r.method for r in transport.requests] == ["GET", "PUT", "GET"]
    assert transport.requests[1].headers["If-Match"] == '"0x1"'


def test_ensure_index_reports_an_incompatible_definition() -> None:
    old = json.loads(json.dumps(EXPECTED_INDEX))
    old["fields"][3]["analyzer"] = "standard.lucene"
    transport = CapturingTransport(
        [
            json_response(200, service_echo(old)),
            json_response(
                400,
                {
                    "error": {
                        "code": "OperationNotAllowed",
                        "message": "Existing field 'memory' cannot be changed",
                    }
                },
            ),
        ]
    )
    with pytest.raises(PermanentError, match="cannot be changed"):
        run(
            ensure_index(
                ENDPOINT, INDEX, admin_key(), dimensions=DIMENSIONS, transport=transport
            )
        )


def test_ensure_index_definition_gives_up_after_repeated_conflicts() -> None:
    from azure.search.documents.indexes.aio import SearchIndexClient

    old = json.loads(json.dumps(EXPECTED_INDEX))
    old["fields"] = old["fields"][:-1]
    conflict = json_response(412, {"error": {"code": "PreconditionFailed", "message": "etag"}})
    transport = CapturingTransport([json_response(200, service_echo(old)), conflict] * 2)

    async def go() -> None:
        client = SearchIndexClient(
            ENDPOINT,
            admin_key(),
            transport=transport,
            retry_total=0,
        )
        try:
            await ensure_index_definition(client, build_index(INDEX, DIMENSIONS), max_conflicts=2)
        finally:
            await client.close()

    with pytest.raises(ConflictError):
        run(go())


def test_build_index_rejects_bad_dimensions() -> None:
    with pytest.raises(ValidationError):
        build_index(INDEX, 0)


# ================================================================================================
# Search: every mode x ranking profile, filters, ordering, result mapping
# ================================================================================================


def expected_search_body(mode: SearchMode, ranking: RankingProfile, query: str = "coffee") -> dict[str, Any]:
    body: dict[str, Any] = {"filter": BASE_FILTER, "select": SELECT, "top": 5, "scoringStatistics": "global"}
    if mode != SearchMode.VECTOR:
        body["search"] = query
    if mode != SearchMode.KEYWORD:
        body["vectorQueries"] = [{"kind": "vector", "vector": VECTOR, "k": 50, "fields": "embedding"}]
    if mode in (SearchMode.HYBRID, SearchMode.SEMANTIC):  # the query language's fusion
        fusion = fusion_for(query)
        if fusion.vector_weight != 1.0:
            body["vectorQueries"][0]["weight"] = fusion.vector_weight
        if fusion.text_match == "all":
            body["searchMode"] = "all"
    profile = {RankingProfile.IMPORTANT: "memory-priority", RankingProfile.RECENT: "memory-recency"}.get(
        ranking
    )
    if profile:
        body["scoringProfile"] = profile
    if mode == SearchMode.SEMANTIC:
        body["queryType"] = "semantic"
        body["semanticConfiguration"] = "memory-semantic"
        body["semanticErrorHandling"] = "partial"
    return body


@pytest.mark.parametrize("ranking", list(RankingProfile))
@pytest.mark.parametrize("mode", list(SearchMode))
def test_search_request_for_every_mode_and_profile(mode: SearchMode, ranking: RankingProfile) -> None:
    record = make_record()
    # With a scoring profile the service orders reranked hits by the boosted score and sends both.
    boosted = {"@search.rerankerBoostedScore": 11.5} if ranking != RankingProfile.NONE else {}
    extras = [{"@search.rerankerScore": 2.75, **boosted}] if mode == SearchMode.SEMANTIC else None
    transport = CapturingTransport([search_response(record, scores=[0.8], extras=extras)])
    store = make_store(transport)
    options = MemorySearchOptions(mode=mode, ranking_profile=ranking)
    result = run(store.search(SearchRequest(SCOPE, "coffee", VECTOR, options)))
    (captured,) = transport.requests
    assert check_request(captured, "POST", SEARCH) == expected_search_body(mode, ranking)
    assert result.mode == mode and result.ranking_profile == ranking and result.notes == []
    (hit,) = result.hits
    assert hit.record == record.without_embedding()
    reranked = 11.5 if ranking != RankingProfile.NONE else 2.75
    # A semantic answer is ordered by the reranker score: that is the hit's score; the fused one stays
    # in the breakdown.
    assert hit.score == (reranked if mode == SearchMode.SEMANTIC else 0.8)
    assert hit.breakdown.relevance == 0.8
    assert hit.breakdown.profile == (None if ranking == RankingProfile.NONE else PROFILES[ranking].name)  # type: ignore[union-attr]
    assert hit.reranker_score == (reranked if mode == SearchMode.SEMANTIC else None)


def test_a_semantic_search_keeps_the_order_of_the_semantic_ranker() -> None:
    """The service sorts a semantic answer by the (boosted) reranker score, not by ``@search.score``;
    the search service layer re-ranks by score, so the reranker's order must survive it, with a hit
    the ranker did not reach (past its first 50) after the reranked ones."""
    from memory_core.adapters.models.hash_embedder import HashingEmbedder
    from memory_core.service.search import search

    records = [make_record(f"m{i}", memory=f"coffee note {i}") for i in range(3)]
    extras = [
        {"@search.rerankerScore": 3.1, "@search.rerankerBoostedScore": 6.2},
        {"@search.rerankerScore": 2.9, "@search.rerankerBoostedScore": 4.0},
        {},  # not reranked
    ]
    # Fused scores in the opposite order: sorting by them would undo the reranking.
    transport = CapturingTransport([search_response(*records, scores=[0.01, 0.02, 0.05], extras=extras)])
    store = make_store(transport, dimensions=8)
    options = MemorySearchOptions(mode=SearchMode.SEMANTIC, top=3)
    result = run(search(store, HashingEmbedder(8), SCOPE, "coffee", options))
    (captured,) = transport.requests
    assert captured.body["queryType"] == "semantic"
    assert [h.record.id for h in result.hits] == ["m0", "m1", "m2"]
    assert [h.reranker_score for h in result.hits] == [6.2, 4.0, None]
    assert [h.breakdown.relevance for h in result.hits] == [0.01, 0.02, 0.05]
    assert result.hits[0].score == 6.2 and 0 < result.hits[2].score < result.hits[1].score


@pytest.mark.parametrize(
    ("options", "extra_filter"),
    [
        (MemorySearchOptions(include_archived=True), None),
        (MemorySearchOptions(category="食事"), "category eq '食事'"),
        (MemorySearchOptions(min_importance=0.5), "importance ge 0.5"),
        (MemorySearchOptions(min_retention_score=0.25), "retention_score ge 0.25"),
        (
            MemorySearchOptions(
                category="Work.Notes", min_importance=1, min_retention_score=0, include_archived=True
            ),
            "category eq 'work.notes' and importance ge 1.0 and retention_score ge 0.0",
        ),
    ],
)
def test_search_filters(options: MemorySearchOptions, extra_filter: str | None) -> None:
    transport = CapturingTransport([search_response()])
    run(
        make_store(transport).search(
            SearchRequest(SCOPE, "coffee", None, options.model_copy(update={"mode": SearchMode.KEYWORD}))
        )
    )
    body = check_request(transport.requests[0], "POST", SEARCH)
    status = (
        "(status eq 'active' or status eq 'archived')" if options.include_archived else "status eq 'active'"
    )
    expected = f"user_id eq 'u1' and agent_id eq 'a1' and {status}"
    if extra_filter:
        expected += f" and {extra_filter}"
    expected += f" and (expires_at eq null or expires_at gt {NOW_LITERAL})"
    expected += f" and (valid_until eq null or valid_until gt {NOW_LITERAL})"
    assert body["filter"] == expected
    assert "deleted" not in body["filter"]


def test_a_window_and_an_as_of_moment_are_sent_as_date_range_filters() -> None:
    """The rule of memory_core.domain.search_time as OData: the event span overlaps the window (a point
    inside it), else the validity does (an undated memory of a moment: its valid_from is inside it),
    else created_at is inside it; an earlier value closed before the window began is left out. As of T: valid from T or before, not closed by T."""
    window = TimeWindow(datetime(2026, 11, 28, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC))
    start, end = "2026-11-28T00:00:00.000000Z", "2026-11-30T00:00:00.000000Z"
    transport = CapturingTransport([search_response(), search_response()])
    store = make_store(transport)
    keyword = MemorySearchOptions(mode=SearchMode.KEYWORD)
    run(store.search(SearchRequest(SCOPE, "hiking", None, keyword, window)))
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body["filter"].endswith(
        f" and (event_at lt {end} and (event_until gt {start} or event_until eq null and event_at ge {start})"
        f" or event_at eq null and kind ne 'episode' and category ne 'episode' and category ne 'event'"
        f" and category ne 'plan' and valid_from lt {end} and (valid_until eq null or valid_until gt {start})"
        f" or event_at eq null and (kind eq 'episode' or category eq 'episode' or category eq 'event'"
        f" or category eq 'plan') and valid_from ge {start} and valid_from lt {end}"
        f" or event_at eq null and valid_from eq null and created_at ge {start} and created_at lt {end})"
        f" and (valid_until eq null or valid_until gt {start})"
    )
    as_of = keyword.model_copy(update={"as_of": datetime(2026, 3, 15, tzinfo=UTC)})
    run(store.search(SearchRequest(SCOPE, "live", None, as_of)))
    body = check_request(transport.requests[1], "POST", SEARCH)
    t = "2026-03-15T00:00:00.000000Z"
    assert body["filter"].endswith(
        f" and (valid_from le {t} or valid_from eq null and created_at le {t})"
        f" and (valid_until eq null or valid_until gt {t})"
    )
    assert f"valid_until gt {NOW_LITERAL}" not in body["filter"]  # current then, not now


@pytest.mark.parametrize("order", list(OrderBy))
def test_search_order_by(order: OrderBy) -> None:
    transport = CapturingTransport([search_response()])
    options = MemorySearchOptions(
        mode=SearchMode.KEYWORD, ranking_profile=RankingProfile.NONE, order_by=order, top=7
    )
    run(make_store(transport).search(SearchRequest(SCOPE, "coffee", None, options)))
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body["orderby"] == order.value
    assert body["top"] == 7
    assert "scoringProfile" not in body


def test_query_text_is_plain_words_never_query_syntax() -> None:
    transport = CapturingTransport([search_response()])
    run(make_store(transport).search(SearchRequest(SCOPE, 'non-smoking "quiet" room* (a|b)', None, KEYWORD)))
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body["search"] == 'non\\-smoking \\"quiet\\" room\\* \\(a\\|b\\)'


def test_search_vector_k_and_exhaustive_knn() -> None:
    transport = CapturingTransport([search_response()])
    store = make_store(transport, exhaustive_knn=True)
    run(store.search(SearchRequest(SCOPE, "", VECTOR, MemorySearchOptions(mode=SearchMode.VECTOR, vector_k=12))))
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body["vectorQueries"] == [
        {"kind": "vector", "vector": VECTOR, "k": 12, "fields": "embedding", "exhaustive": True}
    ]
    assert "search" not in body


def test_hybrid_vector_weight_is_sent_as_the_vector_query_weight() -> None:
    transport = CapturingTransport([search_response()])
    store = make_store(transport)
    options = MemorySearchOptions(mode=SearchMode.HYBRID, vector_weight=0.5)
    run(store.search(SearchRequest(SCOPE, "window seat", VECTOR, options)))
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body["vectorQueries"] == [
        {"kind": "vector", "vector": VECTOR, "k": 50, "fields": "embedding", "weight": 0.5}
    ]


def test_the_query_language_chooses_the_fusion() -> None:
    transport = CapturingTransport([search_response(), search_response(), search_response(), search_response()])
    store = make_store(transport)
    run(store.search(SearchRequest(SCOPE, "京都の旅館が好き", VECTOR, MemorySearchOptions(mode=SearchMode.HYBRID))))
    run(store.search(SearchRequest(SCOPE, "window seat", VECTOR, MemorySearchOptions(mode=SearchMode.HYBRID))))
    run(store.search(SearchRequest(SCOPE, "京都の旅館が好き", VECTOR, MemorySearchOptions(mode=SearchMode.KEYWORD))))
    run(store.search(SearchRequest(SCOPE, "京都の旅館が好き", VECTOR, MemorySearchOptions(mode=SearchMode.HYBRID, vector_weight=2.0))))
    japanese, english, keyword, weighted = (check_request(r, "POST", SEARCH) for r in transport.requests)
    # a Japanese query's text leg counts a memory only with every word (searchMode=all), in hybrid only
    assert japanese["searchMode"] == "all" and "searchMode" not in english and "searchMode" not in keyword
    assert japanese["vectorQueries"][0].get("weight", 1.0) == FUSIONS["ja"].vector_weight
    assert english["vectorQueries"][0].get("weight", 1.0) == FUSIONS["*"].vector_weight
    # an explicit weight wins; the language still decides the text leg's matching
    assert weighted["vectorQueries"][0]["weight"] == 2.0 and weighted["searchMode"] == "all"


def test_search_debug_scores_fill_the_breakdown() -> None:
    debug = {
        "@search.documentDebugInfo": {
            "vectors": {
                "subscores": {
                    "text": {"searchScore": 1.25},
                    "vectors": [{"embedding": {"searchScore": 0.75, "vectorSimilarity": 0.66}}],
                    "documentBoost": 9.5,
                }
            }
        }
    }
    transport = CapturingTransport([search_response(make_record(), scores=[0.3], extras=[debug])])
    store = make_store(transport, debug_scores=True)
    result = run(store.search(SearchRequest(SCOPE, "coffee", VECTOR, MemorySearchOptions())))
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body["debug"] == "vector"
    breakdown = result.hits[0].breakdown
    assert (breakdown.keyword_score, breakdown.vector_score, breakdown.boost) == (1.25, 0.75, 9.5)
    assert breakdown.profile == "memory-priority"


def test_search_without_a_vector_or_without_text() -> None:
    transport = CapturingTransport()
    store = make_store(transport)
    for mode in (SearchMode.VECTOR, SearchMode.HYBRID, SearchMode.SEMANTIC):
        with pytest.raises(ValidationError, match="needs a query vector"):
            run(store.search(SearchRequest(SCOPE, "coffee", None, MemorySearchOptions(mode=mode))))
    assert transport.requests == []
    # An empty keyword query matches everything the filters allow (no "search" sent means "*").
    transport.add(search_response(make_record()))
    everything = run(store.search(SearchRequest(SCOPE, "  ", None, MemorySearchOptions(mode=SearchMode.KEYWORD))))
    body = check_request(transport.requests[-1], "POST", SEARCH)
    assert "search" not in body and "vectorQueries" not in body and len(everything.hits) == 1
    # Hybrid with no words is the vector leg alone; semantic cannot rerank without words.
    transport.add(search_response(), search_response())
    run(store.search(SearchRequest(SCOPE, "", VECTOR, MemorySearchOptions(mode=SearchMode.HYBRID))))
    assert "search" not in check_request(transport.requests[-1], "POST", SEARCH)
    semantic = run(store.search(SearchRequest(SCOPE, "", VECTOR, MemorySearchOptions(mode=SearchMode.SEMANTIC))))
    body = check_request(transport.requests[-1], "POST", SEARCH)
    assert "queryType" not in body and "search" not in body and body["vectorQueries"]
    assert semantic.notes == ["the semantic ranker needs query text; results are not reranked"]


def test_search_rejects_a_vector_of_the_wrong_size() -> None:
    transport = CapturingTransport()
    with pytest.raises(ValidationError, match="dimensions"):
        run(make_store(transport).search(SearchRequest(SCOPE, "coffee", [1.0, 2.0], MemorySearchOptions())))
    assert transport.requests == []


# ================================================================================================
# Hostile input cannot alter the filter
# ================================================================================================

HOSTILE = [
    "u1' or user_id ne 'x",
    "u1') or (true",
    "u1' or 1 eq 1 or 'a' eq 'a",
    "'",
    "u1 or true",
    "u1\u2019 or x",
    "",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_scope_ids_are_rejected_before_any_request(value: str) -> None:
    transport = CapturingTransport()
    store = make_store(transport)
    with pytest.raises(ValidationError):
        Scope.of(value, "a1")
    # Even a scope that skipped validation is validated again by the store and the filter compiler.
    forged = Scope.model_construct(user_id=value, agent_id="a1")
    with pytest.raises(ValidationError):
        run(store.search(SearchRequest(forged, "coffee", None, MemorySearchOptions())))
    with pytest.raises(ValidationError):
        run(store.scan(Scope.model_construct(user_id="u1", agent_id=value), PageRequest()))
    with pytest.raises(ValidationError):
        run(store.purge(value))
    with pytest.raises(ValidationError):
        odata.scope_filter(forged)
    assert transport.requests == []


@pytest.mark.parametrize("value", ["work' or category ne 'x", "a) or (b", "x' or '1' eq '1", "a b", "a,b"])
def test_hostile_categories_are_rejected(value: str) -> None:
    transport = CapturingTransport()
    with pytest.raises(ValidationError):
        parse_model(MemorySearchOptions, {"category": value})
    forged = MemorySearchOptions.model_construct(**{**MemorySearchOptions().model_dump(), "category": value})
    with pytest.raises(ValidationError):
        odata.search_filter(SCOPE, forged, NOW)
    with pytest.raises(ValidationError):
        run(make_store(transport).search(SearchRequest(SCOPE, "coffee", None, forged)))
    assert transport.requests == []


@pytest.mark.parametrize("value", ["m1' or id ne '", "m 1", "m1,m2", "../x"])
def test_hostile_memory_ids_and_cursors_are_rejected(value: str) -> None:
    transport = CapturingTransport()
    store = make_store(transport)
    with pytest.raises(ValidationError):
        run(store.get(SCOPE, value))
    with pytest.raises(ValidationError):
        run(store.scan(SCOPE, PageRequest(after=value)))
    with pytest.raises(ValidationError):
        run(store.recall(SCOPE, [value], HumanMemoryPolicy()))
    with pytest.raises(ValidationError):
        run(forget(store, HumanMemoryPolicy(), cursor=value))
    assert transport.requests == []


def test_quote_doubles_single_quotes() -> None:
    assert odata.quote("abc") == "'abc'"
    assert odata.quote("O'Brien") == "'O''Brien'"
    assert odata.quote("'") == "''''"
    assert odata.quote("a''b") == "'a''''b'"
    assert odata.quote("") == "''"
    assert odata.eq("category", "it's") == "category eq 'it''s'"
    with pytest.raises(ValidationError):
        odata.quote(3)  # type: ignore[arg-type]


def _read_literal(text: str) -> tuple[str, str]:
    """Parse one OData string literal at the start of ``text``; return (value, rest)."""
    assert text[0] == "'"
    out, i = [], 1
    while True:
        if text[i] == "'":
            if i + 1 < len(text) and text[i + 1] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), text[i + 1 :]
        out.append(text[i])
        i += 1


@given(st.text())
def test_quote_round_trips_and_never_ends_early(value: str) -> None:
    literal = odata.quote(value)
    parsed, rest = _read_literal(literal)
    assert parsed == value
    assert rest == ""


def test_filter_compiler_rejects_unknown_fields_and_operators() -> None:
    with pytest.raises(ValidationError):
        odata.eq("memory", "x")
    with pytest.raises(ValidationError):
        odata.compare("importance", "or", 1.0)
    with pytest.raises(ValidationError):
        odata.compare("importance", "ge", float("nan"))
    with pytest.raises(ValidationError):
        odata.compare("importance", "ge", "1 or true")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        odata.status_filter(["gone"])


# ================================================================================================
# Writes
# ================================================================================================


def test_upsert_sends_upload_actions_field_by_field() -> None:
    record = make_record(expires_at=NOW + timedelta(days=30))
    bare = make_record("m2", embedding=None, last_accessed_at=None, metadata={})
    # First the read of the scope's entities (a Japanese text may name a name the scope knows).
    transport = CapturingTransport([search_response(), index_result(("m1", 201), ("m2", 200))])
    run(make_store(transport).upsert([record, bare]))
    body = check_request(transport.requests[1], "POST", INDEX_DOCS)
    assert_documents_fit_index(body)
    assert body["value"] == [
        {
            "@search.action": "upload",
            "id": "m1",
            "user_id": "u1",
            "agent_id": "a1",
            "memory": "コーヒーはブラックが好き",
            "summary": "coffee: black",
            "category": "preference",
            "importance": 0.8,
            "confidence": 0.7,
            "status": "active",
            "source": "rule-fallback",
            "kind": "fact",
            "retention_score": 0.9,
            "access_count": 2,
            "created_at": "2026-11-19T12:00:00Z",
            "updated_at": "2026-11-24T12:00:00Z",
            "last_accessed_at": "2026-11-28T12:00:00Z",
            "expires_at": "2026-12-29T12:00:00Z",
            "valid_from": None,
            "valid_until": None,
            "superseded_by": None,
            "event_at": None,
            "event_until": None,
            "metadata_json": '{"tags": ["飲み物"], "turn_id": "t-1"}',
            "provenance_json": "[]",
            "embedding": [0.5, 0.5, 0.5, 0.5],
            "metadata_terms": ['tags="飲み物"', 'turn_id="t-1"'],
            "session_ids": [],
            **NO_ENTITIES,
        },
        {
            "@search.action": "upload",
            "id": "m2",
            "user_id": "u1",
            "agent_id": "a1",
            "memory": "コーヒーはブラックが好き",
            "summary": "coffee: black",
            "category": "preference",
            "importance": 0.8,
            "confidence": 0.7,
            "status": "active",
            "source": "rule-fallback",
            "kind": "fact",
            "retention_score": 0.9,
            "access_count": 2,
            "created_at": "2026-11-19T12:00:00Z",
            "updated_at": "2026-11-24T12:00:00Z",
            "last_accessed_at": None,
            "expires_at": None,
            "valid_from": None,
            "valid_until": None,
            "superseded_by": None,
            "event_at": None,
            "event_until": None,
            "metadata_json": "{}",
            "provenance_json": "[]",
            "metadata_terms": [],
            "session_ids": [],
            **NO_ENTITIES,
        },
    ]


def test_documents_round_trip() -> None:
    record = make_record(expires_at=NOW + timedelta(hours=1), metadata={"a": {"b": [1, 2.5, None, "日本"]}})
    assert from_document(to_document(record)) == record
    assert from_document(json.loads(json.dumps(to_document(record)))) == record


def test_upsert_batches_at_most_1000_actions() -> None:
    records = [make_record(f"m{i:04d}", embedding=None) for i in range(2001)]
    transport = CapturingTransport(
        [
            search_response(),  # the read of the scope's entities
            index_result(*[(r.id, 200) for r in records[:1000]]),
            index_result(*[(r.id, 200) for r in records[1000:2000]]),
            index_result((records[2000].id, 200)),
        ]
    )
    run(make_store(transport).upsert(records))
    sizes = [len(check_request(r, "POST", INDEX_DOCS)["value"]) for r in transport.requests[1:]]
    assert sizes == [1000, 1000, 1]


def test_upsert_refuses_embeddings_of_another_size() -> None:
    transport = CapturingTransport()
    with pytest.raises(ConflictError):
        run(make_store(transport).upsert([make_record(embedding=[1.0, 2.0])]))
    assert transport.requests == []


def test_get_reads_one_document() -> None:
    record = make_record()
    transport = CapturingTransport([json_response(200, to_document(record))])
    assert run(make_store(transport).get(SCOPE, "m1")) == record
    (captured,) = transport.requests
    assert captured.method == "GET"
    assert captured.path == f"/indexes('{INDEX}')/docs('m1')"
    assert captured.api_version == "2026-04-01"
    assert captured.body is None


def test_get_returns_none_when_missing_or_in_another_scope() -> None:
    other = make_record(user_id="someone-else")
    transport = CapturingTransport(
        [
            json_response(404, {"error": {"code": "NotFound", "message": "nope"}}),
            json_response(200, to_document(other)),
        ]
    )
    store = make_store(transport)
    assert run(store.get(SCOPE, "m1")) is None
    assert run(store.get(SCOPE, "m1")) is None


def test_merge_sends_only_the_changed_fields() -> None:
    record = make_record()
    transport = CapturingTransport([json_response(200, to_document(record)), search_response(), index_result(("m1", 200))])
    later = NOW + timedelta(minutes=5)
    updated = run(
        make_store(transport).merge(
            SCOPE,
            "m1",
            {"memory": "紅茶も好き", "importance": 0.9, "updated_at": later, "metadata": {"k": "v"}},
        )
    )
    assert updated == record.without_embedding().model_copy(
        update={"memory": "紅茶も好き", "importance": 0.9, "updated_at": later, "metadata": {"k": "v"}}
    )
    body = check_request(transport.requests[2], "POST", INDEX_DOCS)
    assert_documents_fit_index(body)
    assert body == {
        "value": [
            {
                "@search.action": "merge",
                "id": "m1",
                "memory": "紅茶も好き",
                "importance": 0.9,
                "updated_at": "2026-11-29T12:05:00Z",
                "metadata_json": '{"k": "v"}',
                "metadata_terms": ['k="v"'],
                **NO_ENTITIES,
            }
        ]
    }


def test_merge_validates_changes_and_scope() -> None:
    transport = CapturingTransport([json_response(200, to_document(make_record(agent_id="other")))])
    store = make_store(transport)
    with pytest.raises(ValidationError):
        run(store.merge(SCOPE, "m1", {"user_id": "u2"}))
    with pytest.raises(ValidationError):
        run(store.merge(SCOPE, "m1", {"colour": "blue"}))
    with pytest.raises(NotFoundError):
        run(store.merge(SCOPE, "m1", {"importance": 0.1}))
    transport.add(json_response(200, to_document(make_record())))
    with pytest.raises(ValidationError):
        run(store.merge(SCOPE, "m1", {"importance": 7}))
    assert [r.method for r in transport.requests] == ["GET", "GET"]


def test_mark_status_merges_status_and_the_recorded_reason() -> None:
    transport = CapturingTransport(
        [json_response(200, to_document(make_record())), index_result(("m1", 200))]
    )
    record = run(make_store(transport).mark_status(SCOPE, "m1", MemoryStatus.DELETED, reason="user asked"))
    assert record.status == MemoryStatus.DELETED
    assert record.metadata["status_reason"] == "user asked"
    assert record.embedding is None
    body = check_request(transport.requests[1], "POST", INDEX_DOCS)
    assert_documents_fit_index(body)
    assert body == {
        "value": [
            {
                "@search.action": "merge",
                "id": "m1",
                "status": "deleted",
                "metadata_json": json.dumps(
                    {
                        "status_changed_at": "2026-11-29T12:00:00+00:00",
                        "status_reason": "user asked",
                        "tags": ["飲み物"],
                        "turn_id": "t-1",
                    },
                    ensure_ascii=False,
                    sort_keys=True,
                ),
                "metadata_terms": [
                    'status_changed_at="2026-11-29T12:00:00+00:00"',
                    'status_reason="user asked"',
                    'tags="飲み物"',
                    'turn_id="t-1"',
                ],
                **NO_ENTITIES,
            }
        ]
    }


def test_agents_are_a_facet_of_the_user() -> None:
    body = {
        "@search.facets": {"agent_id": [{"value": "b2", "count": 1}, {"value": "a1", "count": 4}]},
        "value": [],
    }
    transport = CapturingTransport([json_response(200, body)])
    assert run(make_store(transport).agents("u1")) == ["a1", "b2"]
    assert check_request(transport.requests[0], "POST", SEARCH) == {
        "filter": "user_id eq 'u1'",
        "facets": ["agent_id,count:1000,sort:value"],
        "top": 0,
    }


def test_recall_reads_by_id_and_merges_the_rehearsal() -> None:
    policy = HumanMemoryPolicy()
    first = make_record("m1")
    second = make_record("m2", status=MemoryStatus.ARCHIVED, retention_score=0.1)
    deleted = make_record("m3", status=MemoryStatus.DELETED)
    transport = CapturingTransport(
        [search_response(second, first, deleted), index_result(("m1", 200), ("m2", 200))]
    )
    recalled = run(make_store(transport).recall(SCOPE, ["m1", "m2", "m3", "m1", "m9"], policy))
    query = check_request(transport.requests[0], "POST", SEARCH)
    assert query == {
        "filter": "user_id eq 'u1' and agent_id eq 'a1' and search.in(id, 'm1,m2,m3,m9', ',')",
        "select": SELECT,
        "top": 4,
    }
    expected = [policy.recall(first.without_embedding(), NOW), policy.recall(second.without_embedding(), NOW)]
    assert recalled == expected
    write = check_request(transport.requests[1], "POST", INDEX_DOCS)
    assert_documents_fit_index(write)
    assert write == {
        "value": [
            {
                "@search.action": "merge",
                "id": r.id,
                "last_accessed_at": "2026-11-29T12:00:00Z",
                "access_count": r.access_count,
                "retention_score": r.retention_score,
                "status": r.status.value,
            }
            for r in expected
        ]
    }
    assert [r.access_count for r in recalled] == [3, 3]


def test_scan_is_keyset_paged(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [make_record(f"m{i}") for i in range(3)]
    transport = CapturingTransport([search_response(*records)])
    page = run(
        make_store(transport).scan(
            SCOPE,
            PageRequest(
                statuses=[MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED], after="m0", limit=2, with_embedding=True
            ),
        )
    )
    body = check_request(transport.requests[0], "POST", SEARCH)
    assert body == {
        "filter": "user_id eq 'u1' and agent_id eq 'a1' and (status eq 'active' or status eq 'archived') "
        "and id gt 'm0'",
        "orderby": "id asc",
        "select": SELECT + ",embedding",
        "top": 3,
    }
    assert "skip" not in body
    assert [r.id for r in page.records] == ["m0", "m1"]
    assert page.next_cursor == "m1"
    transport.add(search_response(records[2]))
    last = run(make_store(transport).scan(SCOPE, PageRequest(after="m1", limit=2)))
    second = check_request(transport.requests[1], "POST", SEARCH)
    assert second["filter"] == "user_id eq 'u1' and agent_id eq 'a1' and id gt 'm1'"
    assert second["select"] == SELECT  # no vectors unless asked for
    assert last.next_cursor is None and last.records[0].embedding is None


def test_purge_scans_by_key_and_deletes_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(azure_search_store, "MAX_PAGE", 2)

    def page(*keys: str) -> Any:
        body = {"value": [{"@search.score": 1.0, "id": k} for k in keys]}
        validate("SearchDocumentsResult", body)
        return json_response(200, body)

    transport = CapturingTransport(
        [page("a", "b"), index_result(("a", 200), ("b", 200)), page("c"), index_result(("c", 200))]
    )
    assert run(make_store(transport).purge("u1")) == 3
    scan1, delete1, scan2, delete2 = transport.requests
    assert check_request(scan1, "POST", SEARCH) == {
        "filter": "user_id eq 'u1'",
        "orderby": "id asc",
        "select": "id",
        "top": 2,
    }
    assert check_request(delete1, "POST", INDEX_DOCS) == {
        "value": [{"@search.action": "delete", "id": "a"}, {"@search.action": "delete", "id": "b"}]
    }
    assert check_request(scan2, "POST", SEARCH) == {
        "filter": "user_id eq 'u1' and id gt 'b'",
        "orderby": "id asc",
        "select": "id",
        "top": 2,
    }
    assert check_request(delete2, "POST", INDEX_DOCS) == {"value": [{"@search.action": "delete", "id": "c"}]}


def test_purge_one_agent() -> None:
    transport = CapturingTransport([json_response(200, {"value": []})])
    assert run(make_store(transport).purge("u1", "a1")) == 0
    assert (
        check_request(transport.requests[0], "POST", SEARCH)["filter"]
        == "user_id eq 'u1' and agent_id eq 'a1'"
    )


def forgetting_records() -> list[Any]:
    policy = HumanMemoryPolicy()
    fresh = make_record("f1", updated_at=NOW - timedelta(days=1), last_accessed_at=None, access_count=0)
    fresh = fresh.model_copy(update={"retention_score": policy.retention(fresh, NOW)})  # up to date
    stale = make_record(
        "f2",
        importance=0.1,
        access_count=0,
        last_accessed_at=None,
        created_at=NOW - timedelta(days=300),
        updated_at=NOW - timedelta(days=200),
        retention_score=0.9,
    )  # -> archived
    expired = make_record("f3", expires_at=NOW - timedelta(days=1))  # -> archived, expired
    drifted = make_record(
        "f4",
        created_at=NOW - timedelta(days=30),
        updated_at=NOW - timedelta(days=20),
        last_accessed_at=None,
        access_count=0,
        importance=1.0,
        retention_score=1.0,
    )  # rescored only
    revived = make_record(
        "f5",
        status=MemoryStatus.ARCHIVED,
        retention_score=0.1,
        updated_at=NOW - timedelta(days=1),
        last_accessed_at=None,
    )  # -> active
    return [fresh, stale, expired, drifted, revived]


def test_forgetting_writes_only_what_changed() -> None:
    policy = HumanMemoryPolicy()
    records = forgetting_records()
    transport = CapturingTransport(
        [
            search_response(*records),
            search_response(records[1], records[2], records[4]),  # ids and scopes of the listed changes
            search_response(*records[1:]),
            index_result(*[(r.id, 200) for r in records[1:]]),
        ]
    )
    report = run(forget(make_store(transport), policy, dry_run=False))
    scan = check_request(transport.requests[0], "POST", SEARCH)
    assert scan == {
        "filter": "(status eq 'active' or status eq 'archived')",
        "orderby": "id asc",
        "select": ",".join(RETENTION_FIELDS),
        "top": 1000,
    }
    refs = check_request(transport.requests[1], "POST", SEARCH)
    assert refs == {"filter": "search.in(id, 'f2,f3,f5', ',')", "select": "id,user_id,agent_id", "top": 3}
    recheck = check_request(transport.requests[2], "POST", SEARCH)
    assert recheck == {
        "filter": "search.in(id, 'f2,f3,f4,f5', ',') and (status eq 'active' or status eq 'archived')",
        "select": "id",
        "top": 4,
    }
    write = check_request(transport.requests[3], "POST", INDEX_DOCS)
    assert_documents_fit_index(write)
    assert [a["id"] for a in write["value"]] == ["f2", "f3", "f4", "f5"]
    assert [a["status"] for a in write["value"]] == ["archived", "archived", "active", "active"]
    for action, record in zip(write["value"], records[1:], strict=True):
        assert set(action) == {"@search.action", "id", "status", "retention_score"}
        assert action["@search.action"] == "merge"
        assert action["retention_score"] == pytest.approx(policy.retention(record, NOW))
    assert (
        report.scanned,
        report.archived,
        report.expired,
        report.reactivated,
        report.rescored,
        report.unchanged,
        report.written,
    ) == (5, 2, 1, 1, 1, 1, 4)
    assert [c.id for c in report.changes] == ["f2", "f3", "f5"]
    assert report.complete


def test_forgetting_skips_documents_purged_meanwhile() -> None:
    records = forgetting_records()
    transport = CapturingTransport(
        [
            search_response(*records),
            search_response(records[1], records[2], records[4]),
            search_response(*records[1:]),
            index_result(("f2", 404, "Document not found."), ("f3", 200), ("f4", 200), ("f5", 200)),
        ]
    )
    report = run(forget(make_store(transport), HumanMemoryPolicy(), dry_run=False))
    assert report.written == 3
    assert len(transport.requests) == 4  # a missing document is not retried


def test_forgetting_never_revives_a_memory_deleted_since_the_scan() -> None:
    records = forgetting_records()
    transport = CapturingTransport(
        [
            search_response(*records),
            search_response(records[1], records[2], records[4]),
            search_response(records[2], records[3], records[4]),  # f2 was deleted meanwhile
            index_result(("f3", 200), ("f4", 200), ("f5", 200)),
        ]
    )
    report = run(forget(make_store(transport), HumanMemoryPolicy(), dry_run=False))
    write = check_request(transport.requests[3], "POST", INDEX_DOCS)
    assert [a["id"] for a in write["value"]] == ["f3", "f4", "f5"]
    assert report.written == 3


def test_merge_into_a_missing_document_is_reported() -> None:
    transport = CapturingTransport(
        [json_response(200, to_document(make_record())), index_result(("m1", 404, "Document not found."))]
    )
    with pytest.raises(PartialWriteError, match="m1"):
        run(make_store(transport).merge(SCOPE, "m1", {"importance": 0.2}))


def test_forgetting_dry_run_writes_nothing_and_resumes_from_a_cursor() -> None:
    records = forgetting_records()
    transport = CapturingTransport([search_response(*records[:2]), search_response(records[1])])
    report = run(forget(make_store(transport), HumanMemoryPolicy(), dry_run=True, limit=2, cursor="f0"))
    scan = check_request(transport.requests[0], "POST", SEARCH)
    assert scan["filter"] == "(status eq 'active' or status eq 'archived') and id gt 'f0'"
    assert scan["top"] == 2
    assert len(transport.requests) == 2  # the scan, and the ids and scopes of the listed change; no write
    assert [(c.id, c.user_id, c.agent_id) for c in report.changes] == [("f2", "u1", "a1")]
    assert (report.scanned, report.written, report.next_cursor) == (2, 0, "f2")
    assert report.dry_run and not report.complete


# ================================================================================================
# Partial failure, throttling, timeouts
# ================================================================================================


def test_207_retries_only_the_failed_document_then_succeeds() -> None:
    sleep = SleepRecorder()
    transport = CapturingTransport(
        [
            search_response(),  # the read of the scope's entities
            index_result(("m1", 200), ("m2", 503, "Service busy"), ("m3", 201)),
            index_result(("m2", 200)),
        ]
    )
    records = [make_record("m1"), make_record("m2"), make_record("m3")]
    run(make_store(transport, sleep).upsert(records))
    first = check_request(transport.requests[1], "POST", INDEX_DOCS)
    retry = check_request(transport.requests[2], "POST", INDEX_DOCS)
    assert [a["id"] for a in first["value"]] == ["m1", "m2", "m3"]
    assert retry["value"] == [first["value"][1]]
    assert sleep.calls == [0.5]


def test_207_permanent_failure_is_reported_not_dropped() -> None:
    transport = CapturingTransport(
        [search_response(), index_result(("m1", 200), ("m2", 400, "The field 'importance' has an invalid value"))]
    )
    with pytest.raises(PartialWriteError) as caught:
        run(make_store(transport).upsert([make_record("m1"), make_record("m2")]))
    assert [(f.key, f.status_code) for f in caught.value.failures] == [("m2", 400)]
    assert "m2" in str(caught.value) and "invalid value" in str(caught.value)
    assert isinstance(caught.value, PermanentError)
    assert len(transport.requests) == 2  # the read of the scope's entities, and the write


def test_207_retryable_failure_that_persists_is_transient() -> None:
    sleep = SleepRecorder()
    transport = CapturingTransport(
        [search_response(), index_result(("m1", 200), ("m2", 409, "Version conflict"))]
        + [index_result(("m2", 422, "Busy")) for _ in range(2)]
    )
    with pytest.raises(RetryablePartialWriteError) as caught:
        run(make_store(transport, sleep).upsert([make_record("m1"), make_record("m2")]))
    assert isinstance(caught.value, TransientError)
    assert [(f.key, f.status_code) for f in caught.value.failures] == [("m2", 422)]
    assert len(transport.requests) == 4
    assert sleep.calls == [0.5, 1.0]


def test_429_with_retry_after_is_honoured_then_succeeds() -> None:
    sleep = SleepRecorder()
    throttled = json_response(
        429, {"error": {"code": "Throttled", "message": "Too many requests"}}, Retry_After="7"
    )
    transport = CapturingTransport([throttled, search_response(make_record())])
    result = run(make_store(transport, sleep).search(SearchRequest(SCOPE, "coffee", VECTOR, MemorySearchOptions())))
    assert len(result.hits) == 1
    assert sleep.calls == [7.0]
    assert transport.sleeps == []  # the SDK's own retry policy is off; the store owns retries
    assert transport.requests[0].body == transport.requests[1].body


def test_repeated_429_becomes_a_transient_error() -> None:
    sleep = SleepRecorder()
    throttled = json_response(429, {"error": {"code": "Throttled", "message": "Too many requests"}})
    transport = CapturingTransport([throttled] * 3)
    with pytest.raises(TransientError, match="after 3 attempts: HTTP 429"):
        run(make_store(transport, sleep).upsert([make_record()]))
    assert len(transport.requests) == 3
    assert sleep.calls == [0.5, 1.0]


def test_503_is_retried_with_backoff() -> None:
    sleep = SleepRecorder()
    transport = CapturingTransport(
        [search_response(), json_response(503, {"error": {"code": "Unavailable", "message": "down"}}), index_result(("m1", 200))]
    )
    run(make_store(transport, sleep).upsert([make_record()]))
    assert sleep.calls == [0.5]


@pytest.mark.parametrize(
    "error", [ServiceResponseTimeoutError("read timed out"), ServiceRequestError("reset")]
)
def test_timeouts_are_retried_then_transient(error: Exception) -> None:
    sleep = SleepRecorder()
    transport = CapturingTransport([error, search_response(make_record())])
    assert len(run(make_store(transport, sleep).search(SearchRequest(SCOPE, "coffee", None, KEYWORD))).hits) == 1
    transport.add(error, error, error)
    with pytest.raises(TransientError, match="after 3 attempts"):
        run(make_store(transport, sleep).search(SearchRequest(SCOPE, "coffee", None, KEYWORD)))


@pytest.mark.parametrize(
    ("status", "kind"), [(400, PermanentError), (403, TransientError), (401, TransientError), (412, ConflictError)]
)
def test_other_client_errors_are_permanent_and_not_retried(status: int, kind: type[Exception]) -> None:
    """Not retried in the call; 401 and 403 are transient for the pipeline (role assignments still
    applying after a deployment), so the queue redelivers the message instead of setting it aside."""
    transport = CapturingTransport([json_response(status, {"error": {"code": "Bad", "message": "no"}})])
    with pytest.raises(kind):
        run(make_store(transport).upsert([make_record()]))
    assert len(transport.requests) == 1


def test_retry_settings_cap_the_wait() -> None:
    settings_ = RetrySettings(attempts=4, base_delay=1.0, max_delay=5.0)
    assert [settings_.delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert settings_.delay(1, retry_after=60.0) == 5.0


# ================================================================================================
# Lifecycle
# ================================================================================================


def test_store_closes_only_the_client_it_created() -> None:
    from azure.core.credentials import AzureKeyCredential
    from azure.search.documents.aio import SearchClient

    owned = CapturingTransport()
    run(make_store(owned).close())
    assert owned.closed

    shared_transport = CapturingTransport()
    client = SearchClient(
        "https://memtest.search.windows.net", INDEX, AzureKeyCredential("k"), transport=shared_transport
    )
    store = AzureSearchMemoryStore("", INDEX, client=client)
    run(store.close())
    assert not shared_transport.closed
    run(client.close())


def test_store_needs_an_endpoint_and_credential() -> None:
    from memory_core.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        AzureSearchMemoryStore("", INDEX, None)
    with pytest.raises(ConfigurationError):
        search_credential("", None)
    assert isinstance(search_credential("test-admin-key", None), AzureKeyCredential)


def test_store_closes_a_credential_only_when_it_owns_it() -> None:
    closed: list[str] = []

    class Token:
        def __init__(self, name: str) -> None:
            self.name = name

        async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
            raise AssertionError("not used")

        async def close(self) -> None:
            closed.append(self.name)

    shared = AzureSearchMemoryStore(ENDPOINT, INDEX, Token("shared"), transport=CapturingTransport())  # type: ignore[arg-type]
    run(shared.close())
    owned = AzureSearchMemoryStore(
        ENDPOINT, INDEX, Token("owned"), transport=CapturingTransport(), owns_credential=True  # type: ignore[arg-type]
    )
    run(owned.close())
    run(owned.close())
    assert closed == ["owned"]  # a credential passed in belongs to the caller; an owned one closes once


def test_bootstrap_builds_the_store_with_the_admin_key_or_microsoft_entra_id() -> None:
    from memory_core import bootstrap
    from memory_core.ports import FixedClock

    keyed = bootstrap.build_store(settings(), clock=FixedClock(NOW))
    assert isinstance(keyed, AzureSearchMemoryStore)
    assert isinstance(keyed._owned_credential, AzureKeyCredential)
    run(keyed.close())
    pytest.importorskip("aiohttp", reason="the async Azure credential needs aiohttp")
    entra = bootstrap.build_store(settings(azure_search_api_key=""), clock=FixedClock(NOW))
    assert isinstance(entra, AzureSearchMemoryStore)
    assert type(entra._owned_credential).__name__ == "DefaultAzureCredential"
    run(entra.close())
    assert entra._owned_credential is None
