"""Index documents to and from memory records, search hits and retention pages.

A document holds a record's fields under the index's names (:mod:`memory_core.adapters.azure.search_index`):
timestamps as ``Edm.DateTimeOffset`` ISO strings, ``metadata`` and ``provenance`` as JSON strings, the
embedding as the vector field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import numpy as np
from pydantic_core import to_jsonable_python

from memory_core.adapters.azure.search_index import DERIVED_FIELDS, JSON_FIELDS, VECTOR_FIELD, document_field
from memory_core.domain.filters import metadata_terms, session_ids
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.domain.search import ScoreBreakdown, SearchHit
from memory_core.domain.validation import ensure_utc
from memory_core.ports import RetentionPage

__all__ = ["from_document", "reranked", "retention_page", "search_hit", "to_document"]

_TIMES = frozenset(
    {"created_at", "updated_at", "last_accessed_at", "expires_at", "valid_from", "valid_until", "event_at", "event_until"}
)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return ensure_utc(value).isoformat().replace("+00:00", "Z")


def _field_value(name: str, value: Any) -> Any:
    if name in _TIMES:
        return _iso(value)
    if name == "status":
        return MemoryStatus(value).value
    return value


def to_document(record: MemoryRecord, fields: Sequence[str] | None = None) -> dict[str, Any]:
    """The index document of ``record`` (only ``id`` and ``fields`` when given).

    Timestamps become ``Edm.DateTimeOffset`` ISO strings; ``metadata`` and ``provenance`` JSON strings
    in ``metadata_json`` and ``provenance_json``, with the collections filters test beside them
    (``metadata_terms``, ``session_ids``); a missing embedding is left out of a whole document.
    """
    wanted = list(MemoryRecord.model_fields) if fields is None else ["id", *fields]
    document: dict[str, Any] = {}
    for name in wanted:
        key = document_field(name)
        if key in document:
            continue
        value = getattr(record, name)
        if name in JSON_FIELDS:
            document[key] = json.dumps(to_jsonable_python(value), ensure_ascii=False, sort_keys=True)
        elif name == "embedding":
            if value is not None:
                document[VECTOR_FIELD] = [float(x) for x in value]
            elif fields is not None:
                document[VECTOR_FIELD] = None
        else:
            document[key] = _field_value(name, value)
    for derived, source in DERIVED_FIELDS.items():
        if source in wanted:
            document[derived] = metadata_terms(record.metadata) if source == "metadata" else session_ids(record.provenance)
    return document


def _parse_time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def from_document(document: Mapping[str, Any]) -> MemoryRecord:
    """The :class:`MemoryRecord` stored in an index document (``@search.*`` keys are ignored)."""
    data: dict[str, Any] = {}
    for name in MemoryRecord.model_fields:
        if name in JSON_FIELDS:
            raw = document.get(document_field(name))
            if raw:
                data[name] = json.loads(raw)
        elif name == "embedding":
            vector = document.get(VECTOR_FIELD)
            data["embedding"] = [float(x) for x in vector] if vector else None
        elif name in _TIMES:
            data[name] = _parse_time(document.get(name))
        elif name in document and document[name] is not None:
            data[name] = document[name]
    return MemoryRecord.model_validate(data)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _breakdown(hit: Mapping[str, Any], profile: str | None) -> ScoreBreakdown:
    """What the service told us about a hit's score (debug subscores when they were asked for)."""
    relevance = _number(hit.get("@search.score")) or 0.0
    keyword_score = vector_score = None
    boost = 1.0
    debug = hit.get("@search.document_debug_info") or hit.get("@search.documentDebugInfo")
    if isinstance(debug, Mapping):
        subscores = (debug.get("vectors") or {}).get("subscores") or {}
        keyword_score = _number((subscores.get("text") or {}).get("searchScore"))
        for entry in subscores.get("vectors") or []:
            if isinstance(entry, Mapping) and isinstance(entry.get(VECTOR_FIELD), Mapping):
                vector_score = _number(entry[VECTOR_FIELD].get("searchScore"))
        document_boost = _number(subscores.get("documentBoost"))
        if document_boost is not None:
            boost = document_boost
    return ScoreBreakdown(
        keyword_score=keyword_score,
        vector_score=vector_score,
        relevance=relevance,
        profile=profile,
        boost=boost,
    )


def search_hit(document: Mapping[str, Any], profile: str | None) -> SearchHit:
    """One hit of a search answer: the record, the service's score and reranker score, the breakdown.

    The reranker score is the one the semantic ranker ordered the hits by: the boosted one
    (``@search.rerankerBoostedScore``, the reranker's score with the scoring profile applied; the
    index's semantic configuration asks for that order) when the service sends it, else the
    reranker's own.
    """
    breakdown = _breakdown(document, profile)
    boosted = _number(document.get("@search.reranker_boosted_score"))
    return SearchHit(
        record=from_document(document),
        score=breakdown.relevance,
        reranker_score=boosted if boosted is not None else _number(document.get("@search.reranker_score")),
        breakdown=breakdown,
    )


def reranked(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits of a semantic search scored in the order the semantic ranker gave them.

    The service sorts a semantic answer by the reranker score (boosted by the scoring profile, see
    :func:`search_hit`), not by ``@search.score``; the service layer re-ranks by ``score``, so each
    reranked hit's score becomes its reranker score, and a hit the ranker did not reach (past its
    first 50, or all of them when it failed and answered in part) keeps its fused score, scaled to
    stay below the last reranked one. The breakdown keeps the fused score.
    """
    ranked = [h for h in hits if h.reranker_score is not None]
    if not ranked:
        return list(hits)
    floor = max(0.0, min(cast(float, h.reranker_score) for h in ranked))
    rest = [h for h in hits if h.reranker_score is None]
    best_rest = max((h.score for h in rest), default=0.0) or 1.0
    return [h.model_copy(update={"score": h.reranker_score}) for h in ranked] + [
        h.model_copy(update={"score": floor * 0.5 * max(0.0, h.score) / best_rest}) for h in rest
    ]


def retention_page(documents: Sequence[Mapping[str, Any]], more: bool) -> RetentionPage:
    """The retention inputs of a forgetting scan's documents (keyed by id; NaN where a value is missing)."""

    def floats(name: str) -> np.ndarray:
        return np.array([_number(d.get(name)) for d in documents], dtype=np.float64)

    def times(name: str) -> np.ndarray:
        return np.array(
            [np.nan if (t := _parse_time(d.get(name))) is None else t.timestamp() for d in documents],
            dtype=np.float64,
        )

    ids = [str(d["id"]) for d in documents]
    return RetentionPage(
        keys=ids,
        active=np.array([d.get("status") == MemoryStatus.ACTIVE.value for d in documents], dtype=bool),
        retention=floats("retention_score"),
        importance=floats("importance"),
        access_count=floats("access_count"),
        updated_at=times("updated_at"),
        last_accessed_at=times("last_accessed_at"),
        expires_at=times("expires_at"),
        next_cursor=ids[-1] if more and ids else None,
    )
