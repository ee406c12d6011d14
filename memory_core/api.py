"""The JSON contract shared by the HTTP API (Azure Functions and the embedded server) and ``--json``.

Request and response bodies are pydantic models; the converters here are the only place that turns
domain objects into wire JSON, so the command line prints exactly what the HTTP API returns.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .models import (
    MemoryRecord,
    MemorySearchOptions,
    MemoryStatus,
    OrderBy,
    RankingProfile,
    ScoreBreakdown,
    SearchMode,
    SearchResult,
)
from .ports import ForgettingReport, Page

__all__ = [
    "ForgettingResponse",
    "MemoryListResponse",
    "MemoryView",
    "SearchHitView",
    "SearchRequest",
    "SearchResponse",
    "forgetting_response",
    "memory_list_response",
    "memory_view",
    "search_response",
]


class MemoryView(BaseModel):
    """A memory as returned over the API: every field but the embedding."""

    model_config = ConfigDict(extra="forbid")

    id: str
    user_id: str
    agent_id: str
    memory: str
    summary: str
    category: str
    importance: float
    confidence: float
    status: MemoryStatus
    source: str
    retention_score: float
    access_count: int
    created_at: str
    updated_at: str
    last_accessed_at: str | None
    expires_at: str | None
    metadata: dict[str, Any]


class SearchHitView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory: MemoryView
    score: float
    reranker_score: float | None
    breakdown: ScoreBreakdown


class SearchRequest(BaseModel):
    """Body of ``POST /api/memories/search``."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str
    query: str = Field(max_length=4000)
    mode: SearchMode = SearchMode.HYBRID
    ranking_profile: RankingProfile = RankingProfile.IMPORTANT
    top: int = Field(default=5, ge=1, le=100)
    order_by: OrderBy | None = None
    category: str | None = None
    include_archived: bool = False
    min_importance: float | None = Field(default=None, ge=0, le=1)
    min_retention_score: float | None = Field(default=None, ge=0, le=1)
    recall: bool = True

    def options(self) -> MemorySearchOptions:
        return MemorySearchOptions(
            mode=self.mode,
            ranking_profile=self.ranking_profile,
            top=self.top,
            order_by=self.order_by,
            category=self.category,
            include_archived=self.include_archived,
            min_importance=self.min_importance,
            min_retention_score=self.min_retention_score,
        )


class SearchResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hits: list[SearchHitView]
    mode: SearchMode
    ranking_profile: RankingProfile
    semantic_ranker_available: bool
    notes: list[str]


class MemoryListResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryView]
    next_cursor: str | None


class ForgettingResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool
    scanned: int
    archived: int
    expired: int
    reactivated: int
    rescored: int
    unchanged: int
    written: int
    complete: bool
    next_cursor: str | None
    changes: list[dict[str, Any]]


def memory_view(record: MemoryRecord) -> MemoryView:
    data = record.to_json_dict(include_embedding=False)
    return MemoryView.model_validate(data)


def search_response(result: SearchResult) -> SearchResponse:
    return SearchResponse(
        hits=[
            SearchHitView(
                memory=memory_view(hit.record),
                score=hit.score,
                reranker_score=hit.reranker_score,
                breakdown=hit.breakdown,
            )
            for hit in result.hits
        ],
        mode=result.mode,
        ranking_profile=result.ranking_profile,
        semantic_ranker_available=result.semantic_ranker_available,
        notes=list(result.notes),
    )


def memory_list_response(page: Page) -> MemoryListResponse:
    return MemoryListResponse(memories=[memory_view(r) for r in page.records], next_cursor=page.next_cursor)


def forgetting_response(report: ForgettingReport) -> ForgettingResponse:
    return ForgettingResponse.model_validate(report.as_dict())
