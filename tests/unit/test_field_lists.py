"""Every ``MemoryRecord`` field, every search option and every forgetting counter reaches every list
derived from it: the SQLite columns, the Azure AI Search index and ``select``, the API's views, the
command line. A field added to the model and left out of one of them fails here."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.adapters.azure.documents import from_document, to_document
from memory_core.adapters.azure.entity_fields import ENTITY_FIELDS
from memory_core.adapters.azure.search_index import (
    DERIVED_FIELDS,
    FIELD_ROLES,
    SELECT_FIELDS,
    build_index,
    document_field,
)
from memory_core.adapters.sqlite.schema import MERGEABLE, RECORD_COLUMNS
from memory_core.cli.memories import SEARCH_FLAGS
from memory_core.contract.admin_views import ForgettingResponse
from memory_core.contract.views import MemoryDetail, MemoryView, SearchRequest
from memory_core.domain.policy import COUNTERS
from memory_core.domain.records import IMMUTABLE_FIELDS, MemoryRecord
from memory_core.domain.search import MemorySearchOptions
from memory_core.service.forgetting import ForgettingReport, ForgettingRun

FIELDS = list(MemoryRecord.model_fields)


def record() -> MemoryRecord:
    at = datetime(2026, 11, 1, tzinfo=UTC)
    return MemoryRecord(
        id="m1",
        user_id="u1",
        agent_id="a1",
        memory="窓側の席が好き",
        summary="seat",
        category="preference",
        importance=0.8,
        confidence=0.7,
        source="manual",
        retention_score=0.9,
        access_count=3,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        expires_at=at,
        metadata={"k": "v"},
        embedding=[0.5, 0.5, 0.5, 0.5],
    )


def test_sqlite_has_a_column_for_every_field() -> None:
    assert [c.name for c in RECORD_COLUMNS] == FIELDS
    assert set(FIELDS) - IMMUTABLE_FIELDS == MERGEABLE


def test_the_azure_index_has_a_field_for_every_field_and_select_reads_all_but_the_vector() -> None:
    assert set(FIELD_ROLES) == set(FIELDS)
    index = build_index("memories", 4).as_dict()
    # (then the filterable collections derived from metadata and provenance, never selected, and the
    # fields of the entity index, which the store reads on their own)
    names = [document_field(n) for n in FIELDS] + list(DERIVED_FIELDS) + list(ENTITY_FIELDS)
    assert [f["name"] for f in index["fields"]] == names
    assert all(f["filterable"] and not f["retrievable"] for f in index["fields"] if f["name"] in DERIVED_FIELDS)
    assert list(SELECT_FIELDS) == [document_field(n) for n in FIELDS if n != "embedding"]
    assert not set(SELECT_FIELDS) & set(ENTITY_FIELDS)


def test_azure_documents_carry_every_field_both_ways() -> None:
    original = record()
    document = to_document(original)
    assert set(document) == {document_field(n) for n in FIELDS} | set(DERIVED_FIELDS)
    assert from_document(document) == original


def test_the_api_views_show_every_field_but_the_embedding() -> None:
    assert set(MemoryView.model_fields) == set(FIELDS) - {"embedding"}
    assert set(MemoryDetail.model_fields) == set(MemoryView.model_fields) | {"history"}


def test_every_search_option_is_in_the_http_request_and_has_a_cli_flag() -> None:
    assert set(MemorySearchOptions.model_fields) <= set(SearchRequest.model_fields)
    assert set(SEARCH_FLAGS) == set(MemorySearchOptions.model_fields)


def test_every_forgetting_counter_is_reported_everywhere() -> None:
    assert set(COUNTERS) <= set(ForgettingResponse.model_fields)
    assert set(COUNTERS) <= set(ForgettingReport(dry_run=True).as_dict())
    assert set(COUNTERS) <= set(ForgettingRun().as_dict())
