"""Wire views of forgetting, retention curves, export and purge, and their builders from service reports."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from memory_core.domain.messages import HistoryEntry
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.capabilities import QueuedItem
    from memory_core.service.admin import PurgeReport
    from memory_core.service.forgetting import ForgettingReport, RetentionCurve

__all__ = [
    "PURGED",
    "ExportResponse",
    "ForgettingPreviewResponse",
    "ForgettingResponse",
    "PolicyView",
    "PurgeResponse",
    "QueuedMessageView",
    "RetentionCurveView",
    "RetentionCurvesResponse",
    "export_response",
    "forgetting_response",
    "purge_response",
    "retention_curves_response",
]


class PolicyView(BaseModel):
    """The forgetting policy's parameters (``retention = 0.5^(age/half_life) × (floor + weight ×
    importance) + min(recalls × boost, cap)``; archived at or below ``archive_threshold``)."""

    model_config = ConfigDict(extra="forbid")

    half_life_days: float
    importance_floor: float
    importance_weight: float
    access_boost: float
    access_boost_cap: float
    archive_threshold: float


class RetentionCurveView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: MemoryStatus
    retention_score: float = Field(description="The stored retention")
    points: list[tuple[float, float]] = Field(description="`[days from now, retention]` pairs")
    archives_in_days: float | None = Field(
        description="Days until the retention reaches the archive threshold if nothing reinforces the memory "
        "(0: it is there already; `null`: never, recalls alone keep it above)"
    )


class RetentionCurvesResponse(BaseModel):
    """``GET /api/forgetting/curves``: how memories fade from now on under the policy."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str
    at: datetime
    days: int
    policy: PolicyView
    curves: list[RetentionCurveView]


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


class ForgettingPreviewResponse(ForgettingResponse):
    """``GET /api/forgetting/preview``: what forgetting would do to one scope now (a dry run of the scope;
    ``changes`` lists the rescores too, after the status changes)."""

    user_id: str
    agent_id: str
    at: datetime


class QueuedMessageView(BaseModel):
    """A message of the user still on the embedded queue (not yet processed, or dead-lettered), by ids."""

    model_config = ConfigDict(extra="forbid")

    message_id: str
    kind: str = Field(description="`turn`, `recall` or what the producer said")
    agent_id: str | None
    item_id: str | None = Field(description="The `turn_id` or `recall_id`")
    occurred_at: datetime | None = Field(description="The turn's `occurred_at` (a recall update's `at`)")
    dead_lettered: bool


class ExportResponse(BaseModel):
    """``GET /api/users/{user_id}/export``: one page of everything kept about the user: records (every
    field, provenance included, every status; embeddings only with ``include_vectors=true``), then the
    decision history of the exported scopes, agent by agent, and on the first page what still waits on
    the embedded queue. ``next_cursor`` fetches the next page; the export is complete when it is
    ``null``."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str | None
    count: int = Field(description="The memories on this page")
    memories: list[MemoryRecord]
    history: list[HistoryEntry] = Field(
        default_factory=list,
        description="Recorded decisions (ADD, UPDATE, DELETE, NONE) about the exported scopes, oldest "
        "first per scope, with the states before and after and the reason (each scope's after its memories)",
    )
    queued: list[QueuedMessageView] = Field(
        default_factory=list,
        description="The user's messages still on the embedded queue (waiting or dead-lettered), by ids and "
        "time, on the first page; always empty in Azure (Service Bus messages cannot be listed per user)",
    )
    next_cursor: str | None = Field(
        None, description="Pass as `cursor` for the next page; `null` on the last page (the export is complete)"
    )


class PurgeResponse(BaseModel):
    """``DELETE /api/users/{user_id}``: what was physically removed."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    agent_id: str | None
    purged_memories: int
    purged_history: int
    purged_queued: int = Field(
        0,
        description="Messages of the scope removed from the embedded queue (waiting, in hand, dead-lettered); "
        "0 in Azure, where Service Bus keeps them and the tombstone drops them on delivery",
    )
    purged_at: datetime | None = Field(
        None,
        description="The tombstone left by the purge: a turn whose `occurred_at` (a recall update whose `at`) "
        "is at or before it is dropped from now on, whatever delivers it",
    )


def forgetting_response(report: ForgettingReport) -> ForgettingResponse:
    return ForgettingResponse.model_validate(report.as_dict())


def retention_curves_response(
    scope: Scope, at: datetime, days: int, policy: HumanMemoryPolicy, curves: list[RetentionCurve]
) -> RetentionCurvesResponse:
    return RetentionCurvesResponse(
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        at=at,
        days=days,
        policy=PolicyView.model_validate(policy.as_dict()),
        curves=[RetentionCurveView.model_validate(c.as_dict()) for c in curves],
    )


#: The :class:`PurgeResponse` fields that carry a :class:`~memory_core.service.admin.PurgeReport`'s
#: counts and tombstone, each with the report's name for it.
PURGED = {
    "purged_memories": "memories",
    "purged_history": "history",
    "purged_queued": "queued",
    "purged_at": "purged_at",
}


def purge_response(report: PurgeReport) -> PurgeResponse:
    purged = {view: getattr(report, name) for view, name in PURGED.items()}
    return PurgeResponse(user_id=report.user_id, agent_id=report.agent_id, **purged)


def export_response(
    user_id: str,
    agent_id: str | None,
    records: list[MemoryRecord],
    history: list[HistoryEntry],
    queued: list[QueuedItem],
    next_cursor: str | None = None,
) -> ExportResponse:
    """One page of ``GET /api/users/{user_id}/export`` (and ``memory-core --json export``: every page
    in one, ``next_cursor`` ``null``)."""
    return ExportResponse(
        user_id=user_id,
        agent_id=agent_id,
        count=len(records),
        memories=records,
        history=history,
        next_cursor=next_cursor,
        queued=[
            QueuedMessageView(
                message_id=q.message_id,
                kind=q.kind,
                agent_id=q.agent_id,
                item_id=q.item_id,
                occurred_at=q.occurred_at,
                dead_lettered=q.dead_lettered,
            )
            for q in queued
        ],
    )
