"""Search options, hits and results: what a search asks for and what it returns."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memory_core.domain.filters import Filter, parse_filters
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus
from memory_core.domain.validation import UtcDateTime, parse_model, unit_interval, validate_category
from memory_core.errors import ValidationError

__all__ = [
    "SEMANTIC_ORDER_PROBLEM",
    "Listing",
    "MemorySearchOptions",
    "OrderBy",
    "RankingProfile",
    "ScoreBreakdown",
    "SearchHit",
    "SearchMode",
    "SearchResult",
    "check_semantic_order",
    "record_item",
]


class SearchMode(StrEnum):
    """How candidates are found."""

    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"
    SEMANTIC = "semantic"


class RankingProfile(StrEnum):
    """How candidates are ranked; each maps to a scoring profile in :mod:`memory_core.domain.ranking`."""

    IMPORTANT = "important"
    RECENT = "recent"
    NONE = "none"


class OrderBy(StrEnum):
    """Explicit sort orders (``$orderby`` in Azure AI Search); relevance breaks ties."""

    UPDATED_AT_DESC = "updated_at desc"
    UPDATED_AT_ASC = "updated_at asc"
    CREATED_AT_DESC = "created_at desc"
    CREATED_AT_ASC = "created_at asc"
    IMPORTANCE_DESC = "importance desc"
    IMPORTANCE_ASC = "importance asc"
    RETENTION_SCORE_DESC = "retention_score desc"
    RETENTION_SCORE_ASC = "retention_score asc"
    ACCESS_COUNT_DESC = "access_count desc"
    LAST_ACCESSED_AT_DESC = "last_accessed_at desc"

    @property
    def field(self) -> str:
        return self.value.split(" ", 1)[0]

    @property
    def descending(self) -> bool:
        return self.value.endswith(" desc")


#: Why ``mode=semantic`` and ``order_by`` cannot go together: the semantic ranker orders by its own
#: score, and Azure AI Search answers ``queryType=semantic`` with ``orderby`` with 400 Bad Request.
SEMANTIC_ORDER_PROBLEM = (
    "cannot be used with mode 'semantic': the semantic ranker orders the results by its own score "
    "(Azure AI Search refuses a semantic query with $orderby); leave out order_by, or sort a keyword, "
    "vector or hybrid search"
)


def check_semantic_order(mode: SearchMode, order_by: OrderBy | None) -> None:
    """Refuse a semantic search sorted by a field.

    Raises:
        ValidationError: ``mode`` is semantic and ``order_by`` is set (names ``order_by``).
    """
    if mode == SearchMode.SEMANTIC and order_by is not None:
        raise ValidationError("order_by", SEMANTIC_ORDER_PROBLEM)


class MemorySearchOptions(BaseModel):
    """What a search asks for. Filters are built from these fields, never from caller-supplied OData."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        # The rule of :func:`check_semantic_order`, in the schema: no semantic search sorted by a field.
        json_schema_extra={
            "not": {
                "required": ["mode", "order_by"],
                "properties": {"mode": {"const": SearchMode.SEMANTIC.value}, "order_by": {"type": "string"}},
            }
        },
    )

    mode: SearchMode = SearchMode.HYBRID
    ranking_profile: RankingProfile = RankingProfile.IMPORTANT
    top: int = Field(default=5, ge=1, le=1000)
    order_by: OrderBy | None = None
    category: str | None = None
    include_archived: bool = False
    #: Also memories superseded by something said later (history: what held before).
    include_superseded: bool = False
    min_importance: float | None = None
    min_retention_score: float | None = None
    #: Leave out hits less relevant than this (0-1, :attr:`SearchHit.relevance`; a hit without a
    #: relevance, from an embedder with no calibration or a keyword search, is kept).
    min_score: float | None = None
    #: Only memories of this kind (``fact`` or ``episode``); both when ``None``.
    kind: MemoryKind | None = None
    #: Nearest neighbours taken by the vector leg (Azure's ``k``).
    vector_k: int = Field(default=50, ge=1, le=1000)
    #: Weight of the vector leg in hybrid fusion (Azure's vector query ``weight``; the text leg has 1);
    #: ``None``: the query language's default (:mod:`memory_core.domain.fusion`).
    vector_weight: float | None = Field(default=None, gt=0.0, le=10.0)
    #: The "now" the query's time words ("last weekend", 先月, "as of March") are read against;
    #: ``None``: the service clock's now (:mod:`memory_core.domain.search_time`).
    reference_time: datetime | None = None
    #: Read what was current at this time: the memories valid then (``valid_from`` at or before it and
    #: no ``valid_until`` at or before it), earlier values included, nothing said later. ``None``: now,
    #: or the moment an "as of" in the query names.
    as_of: UtcDateTime | None = None
    #: Conditions on fields and metadata in Mem0's syntax (:mod:`memory_core.domain.filters`), inside
    #: the scope: ``{"AND": [{"kind": "fact"}, {"metadata.topic": {"in": ["food", "travel"]}}]}``.
    filters: dict[str, Any] | None = None

    @field_validator("category")
    @classmethod
    def _category(cls, value: str | None) -> str | None:
        return None if value is None else validate_category(value)

    @field_validator("reference_time")
    @classmethod
    def _reference_time(cls, value: datetime | None) -> datetime | None:
        # Its own offset is kept: "yesterday" is read in the caller's calendar (naive: UTC).
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    @field_validator("min_importance", "min_retention_score", "min_score")
    @classmethod
    def _bounds(cls, value: float | None) -> float | None:
        return None if value is None else unit_interval(value, "minimum")

    @field_validator("filters")
    @classmethod
    def _filters(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            parse_filters(value)  # (raises naming the bad field or operator)
        return value

    def filter_tree(self) -> Filter | None:
        """The checked tree of :attr:`filters` (``None`` without filters)."""
        return None if self.filters is None else parse_filters(self.filters)

    @model_validator(mode="after")
    def _semantic_order(self) -> MemorySearchOptions:
        check_semantic_order(self.mode, self.order_by)
        return self

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> MemorySearchOptions:
        """The search options among ``values`` (other keys are ignored; ``None`` keeps the default).

        The one converter every entry point uses (the HTTP request, the CLI's arguments, the agent
        provider's configuration), so an option added here reaches the store from all of them.

        Raises:
            ValidationError: A value breaks a rule (names the option).
        """
        return parse_model(
            MemorySearchOptions,
            {name: value for name, value in values.items() if name in cls.model_fields and value is not None},
        )


@dataclass(frozen=True, slots=True)
class Listing:
    """What a filtered, sorted listing of a scope asks for (the inspector's table).

    Attributes:
        statuses: Only memories of these statuses (``None``: any).
        category: Only this category (``None``: any).
        kind: Only facts or only episodes (``None``: both).
        order_by: Sorted by this field, then id (``None``: by id).
        offset: Matching memories skipped (0 to 100,000).
        limit: At most this many (1 to 1,000).
        current_at: Only the memories current at this time (none superseded by then); ``None``: current
            or not.
    """

    statuses: Sequence[MemoryStatus] | None = None
    category: str | None = None
    kind: MemoryKind | None = None
    order_by: OrderBy | None = None
    offset: int = 0
    limit: int = 100
    current_at: datetime | None = None


class ScoreBreakdown(BaseModel):
    """How a hit's score was made, leg by leg."""

    model_config = ConfigDict(frozen=True)

    keyword_score: float | None = None
    keyword_rank: int | None = None
    vector_score: float | None = None
    vector_rank: int | None = None
    relevance: float
    profile: str | None = None
    boost: float = 1.0
    functions: dict[str, float] = Field(default_factory=dict)


class SearchHit(BaseModel):
    """One ranked memory."""

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    #: Orders the hits of this search (fused ranks times the profile's boosts; in Azure's semantic
    #: search, the reranker score it ordered them by); not comparable across searches.
    score: float
    #: The semantic ranker's score the hits were ordered by (Azure AI Search's boosted reranker
    #: score when the scoring profile applies, else its reranker score); ``None`` without reranking.
    reranker_score: float | None = None
    breakdown: ScoreBreakdown
    #: How well the memory answers the query, 0-1, comparable across queries
    #: (:mod:`memory_core.domain.relevance`); ``None`` when the embedder has no calibration or the
    #: search used no vector.
    relevance: float | None = None


def record_item(record: MemoryRecord, score: float | None = None) -> dict[str, Any]:
    """One memory as Mem0 writes an item of its results (``id``, ``memory``, ``metadata``, the scope,
    the times as ISO strings; ``score`` for a search hit), with the category and kind beside."""
    item: dict[str, Any] = {
        "id": record.id,
        "memory": record.memory,
        "metadata": dict(record.metadata),
        "category": record.category,
        "kind": record.kind.value,
        "user_id": record.user_id,
        "agent_id": record.agent_id,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
    }
    if score is not None:
        item["score"] = score
    return item


class SearchResult(BaseModel):
    """Hits plus what the engine did (and could not do) to produce them.

    It also reads as Mem0's answer: ``result["results"]`` (or :attr:`results`) is the hits as
    dictionaries (``id``, ``memory``, ``score``, ``metadata``...), ``result[0]`` the first hit, and
    iterating goes over the hits.
    """

    model_config = ConfigDict(frozen=True)

    hits: list[SearchHit]
    mode: SearchMode
    ranking_profile: RankingProfile
    semantic_ranker_available: bool = True
    notes: list[str] = Field(default_factory=list)

    @property
    def results(self) -> list[dict[str, Any]]:
        """The hits as Mem0's result items, best first (``score``: the relevance, else the score)."""
        return [
            record_item(hit.record, hit.relevance if hit.relevance is not None else hit.score) for hit in self.hits
        ]

    def __getitem__(self, key: str | int) -> Any:
        """``result["results"]``: :attr:`results`; ``result[i]``: the ``i``-th hit."""
        if key == "results":
            return self.results
        if isinstance(key, int):
            return self.hits[key]
        raise KeyError(f"{key!r}: a search result reads as {{'results': [...]}} (or use .hits)")

    def __iter__(self) -> Iterator[SearchHit]:  # type: ignore[override]
        """The hits, best first (not pydantic's field pairs)."""
        return iter(self.hits)
