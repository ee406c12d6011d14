"""Forgetting, written once: the policy applied to pages of retention inputs, for every store.

A store only reads retention inputs in keyset pages (:meth:`~memory_core.ports.MemoryStore.scan_retention`)
and writes a batch of new values (:meth:`~memory_core.ports.MemoryStore.write_retention`). Everything
else lives here: the policy (vectorised over a page), what counts as a change (a status change, or a
retention drift past ``tolerance``), the counters, the listed changes, paging with ``limit`` and
``cursor``, and the nightly run that saves where it stopped (:func:`run_forgetting`).

For one scope (the inspector): :func:`preview_forgetting` is the same assessment as a dry run over
that scope's memories only, listing every change it would make (rescores included), and
:func:`retention_curves` says how each memory fades from now on under the policy.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import ForgettingCounts, HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.validation import validate_positive_int
from memory_core.errors import ValidationError
from memory_core.ports import CheckpointStore, MemoryStore, ProgressCallback, RetentionPage, RetentionWrite

__all__ = [
    "FORGET_CHECKPOINT",
    "FORGET_PAGE_SIZE",
    "ForgettingChange",
    "ForgettingReport",
    "ForgettingRun",
    "RetentionCurve",
    "apply_forgetting",
    "assess_page",
    "preview_forgetting",
    "retention_curves",
    "run_forgetting",
]

logger = logging.getLogger(__name__)

#: Rows one store call reads at most (a store may read fewer: Azure AI Search pages hold 1,000).
FORGET_PAGE_SIZE = 20_000
#: Name of the saved cursor of the scheduled run.
FORGET_CHECKPOINT = "forgetting.cursor"


@dataclass(frozen=True, slots=True)
class ForgettingChange:
    """One memory whose status the forgetting job changes (or would change)."""

    id: str
    user_id: str
    agent_id: str
    old_status: MemoryStatus
    new_status: MemoryStatus
    old_retention: float
    new_retention: float
    expired: bool

    @property
    def change(self) -> str:
        """``archive``, ``expire`` (archived because it expired), ``reactivate`` or ``rescore`` (the
        status stays; only the stored retention is brought up to date)."""
        if self.old_status == self.new_status:
            return "rescore"
        if self.new_status == MemoryStatus.ARCHIVED:
            return "expire" if self.expired else "archive"
        return "reactivate"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "change": self.change,
            "old_status": self.old_status.value,
            "new_status": self.new_status.value,
            "old_retention": round(self.old_retention, 6),
            "new_retention": round(self.new_retention, 6),
            "expired": self.expired,
        }


@dataclass(slots=True)
class ForgettingReport(ForgettingCounts):
    """What one forgetting call saw and did.

    ``changes`` lists status changes (at most ``max_listed``); ``next_cursor`` resumes a call that
    stopped at its ``limit``.
    """

    dry_run: bool = True
    changes: list[ForgettingChange] = field(default_factory=list)
    next_cursor: str | None = None
    max_listed: int = 1000

    @property
    def complete(self) -> bool:
        return self.next_cursor is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            **self.counts(),
            "complete": self.complete,
            "next_cursor": self.next_cursor,
            "changes": [c.as_dict() for c in self.changes],
        }


@dataclass(slots=True)
class ForgettingRun(ForgettingCounts):
    """The totals of one scheduled run over all its pages (never a dry run)."""

    pages: int = 0
    complete: bool = False
    resumed_from: str | None = None
    cursor: str | None = None

    @property
    def resumed(self) -> bool:
        return self.resumed_from is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": False,
            "pages": self.pages,
            **self.counts(),
            "complete": self.complete,
            "resumed": self.resumed,
        }


@dataclass(frozen=True, slots=True)
class PageAssessment:
    """The policy's verdict on one page: new values and what changes."""

    retention: np.ndarray
    now_active: np.ndarray
    expired: np.ndarray
    status_changed: np.ndarray
    drifted: np.ndarray

    @property
    def write(self) -> np.ndarray:
        """Rows to store: a status change, or a retention drift past the tolerance."""
        result: np.ndarray = self.status_changed | self.drifted
        return result


def assess_page(
    page: RetentionPage, policy: HumanMemoryPolicy, now_epoch: float, tolerance: float
) -> PageAssessment:
    """Apply the policy to every row of ``page`` at ``now_epoch`` (vectorised; DESIGN section 5)."""
    retention = policy.retention_array(
        now_epoch=now_epoch,
        updated_at=page.updated_at,
        last_accessed_at=page.last_accessed_at,
        expires_at=page.expires_at,
        importance=page.importance,
        access_count=page.access_count,
    )
    expired = ~np.isnan(page.expires_at) & (page.expires_at <= now_epoch)
    now_active = retention > policy.archive_threshold
    return PageAssessment(
        retention=retention,
        now_active=now_active,
        expired=expired,
        status_changed=page.active != now_active,
        drifted=np.abs(retention - page.retention) > tolerance,
    )


def _count(report: ForgettingReport, verdict: PageAssessment, was_active: np.ndarray) -> None:
    changed, drifted = verdict.status_changed, verdict.drifted
    report.archived += int(np.count_nonzero(changed & was_active))
    report.reactivated += int(np.count_nonzero(changed & ~was_active))
    report.expired += int(np.count_nonzero(changed & was_active & verdict.expired))
    report.rescored += int(np.count_nonzero(drifted & ~changed))
    report.unchanged += int(np.count_nonzero(~verdict.write))


async def _list_changes(
    store: MemoryStore, page: RetentionPage, verdict: PageAssessment, report: ForgettingReport
) -> None:
    room = max(report.max_listed - len(report.changes), 0)
    listed = np.flatnonzero(verdict.status_changed)[:room]
    if not len(listed):
        return
    refs = await store.memory_refs([page.keys[int(at)] for at in listed])
    active, archived = MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED
    for ref, at in zip(refs, listed, strict=True):
        if ref is None:  # purged since the scan: nothing to report about it
            continue
        row = int(at)
        report.changes.append(
            ForgettingChange(
                id=ref.id,
                user_id=ref.user_id,
                agent_id=ref.agent_id,
                old_status=active if page.active[row] else archived,
                new_status=active if verdict.now_active[row] else archived,
                old_retention=float(page.retention[row]),
                new_retention=float(verdict.retention[row]),
                expired=bool(verdict.expired[row]),
            )
        )


def _check(limit: int | None, tolerance: float, page_size: int) -> None:
    if limit is not None:
        validate_positive_int(limit, "limit")
    if not (isinstance(tolerance, int | float) and np.isfinite(tolerance) and 0 <= tolerance < 1):
        raise ValidationError("tolerance", "must be in [0, 1)")
    validate_positive_int(page_size, "page_size")


async def apply_forgetting(
    store: MemoryStore,
    policy: HumanMemoryPolicy,
    now: datetime,
    *,
    dry_run: bool = True,
    limit: int | None = None,
    cursor: str | None = None,
    tolerance: float = 0.01,
    page_size: int = FORGET_PAGE_SIZE,
    progress: ProgressCallback | None = None,
) -> ForgettingReport:
    """Bring retention and status up to date for every memory not deleted, writing only changes.

    Reads keyset pages of at most ``page_size`` rows; in each, rows whose status changes or whose
    stored retention is off by more than ``tolerance`` are written (one store call per page) unless
    ``dry_run``. ``limit`` bounds the rows read in this call; the report's ``next_cursor`` resumes.

    Args:
        store: The memory store.
        policy: The forgetting policy.
        now: The moment the policy is applied at.
        dry_run: Report only.
        limit: Most memories read in this call.
        cursor: Resume after this cursor (a ``next_cursor`` this store issued).
        tolerance: Retention drift below which an unchanged-status memory is not rewritten.
        page_size: Rows per store call.
        progress: Told ``(rows scanned so far, limit)`` after every page.

    Raises:
        ValidationError: A bad ``limit``, ``tolerance`` or ``cursor``.
    """
    _check(limit, tolerance, page_size)
    now_epoch = now.timestamp()
    report = ForgettingReport(dry_run=dry_run)
    after = cursor
    while True:
        size = page_size if limit is None else min(page_size, limit - report.scanned)
        if size <= 0:
            report.next_cursor = after
            break
        page = await store.scan_retention(after=after, limit=size)
        report.scanned += len(page)
        if len(page):
            verdict = assess_page(page, policy, now_epoch, tolerance)
            _count(report, verdict, page.active)
            await _list_changes(store, page, verdict, report)
            rows = np.flatnonzero(verdict.write)
            if not dry_run and len(rows):
                report.written += await store.write_retention(
                    RetentionWrite(
                        page=page,
                        rows=rows,
                        active=verdict.now_active[rows],
                        retention=verdict.retention[rows],
                    )
                )
        if progress is not None:
            progress(report.scanned, limit)
        if page.next_cursor is None:
            break
        after = page.next_cursor
    return report


def _retention_page(records: Sequence[MemoryRecord], next_cursor: str | None) -> RetentionPage:
    """The retention inputs of ``records`` as a :class:`RetentionPage` keyed by memory id."""

    def epoch(values: Sequence[datetime | None]) -> np.ndarray:
        return np.array([math.nan if v is None else v.timestamp() for v in values], dtype=np.float64)

    return RetentionPage(
        keys=[r.id for r in records],
        active=np.array([r.status == MemoryStatus.ACTIVE for r in records], dtype=bool),
        retention=np.array([r.retention_score for r in records], dtype=np.float64),
        importance=np.array([r.importance for r in records], dtype=np.float64),
        access_count=np.array([r.access_count for r in records], dtype=np.float64),
        updated_at=epoch([r.updated_at for r in records]),
        last_accessed_at=epoch([r.last_accessed_at for r in records]),
        expires_at=epoch([r.expires_at for r in records]),
        next_cursor=next_cursor,
    )


async def preview_forgetting(
    store: MemoryStore,
    policy: HumanMemoryPolicy,
    now: datetime,
    scope: Scope,
    *,
    limit: int = 10_000,
    cursor: str | None = None,
    tolerance: float = 0.01,
    page_size: int = 1000,
    max_listed: int = 1000,
) -> ForgettingReport:
    """What forgetting would do to one scope's memories at ``now``: a dry run of that scope alone.

    The same assessment (:func:`assess_page`) and counts as :func:`apply_forgetting`, over the scope's
    active and archived memories read by id (:meth:`~memory_core.ports.MemoryStore.scan`). Unlike a
    run, the report lists the rescores too (memories whose status stays but whose stored retention
    would be rewritten), after the status changes, at most ``max_listed`` in all. Nothing is written.

    Args:
        store: The memory store.
        policy: The forgetting policy.
        now: The moment the policy is applied at.
        scope: Whose memories.
        limit: Most memories read in this call (the report's ``next_cursor`` resumes).
        cursor: Resume after this memory id.
        tolerance: Retention drift below which a memory is not rewritten.
        page_size: Memories per store call.
        max_listed: Most changes listed.

    Raises:
        ValidationError: A bad scope, ``limit``, ``tolerance`` or ``cursor``.
    """
    _check(limit, tolerance, page_size)
    now_epoch = now.timestamp()
    report = ForgettingReport(dry_run=True, max_listed=max_listed)
    statuses = [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]
    rescores: list[ForgettingChange] = []
    after = cursor
    while True:
        size = min(page_size, limit - report.scanned)
        if size <= 0:
            report.next_cursor = after
            break
        scanned = await store.scan(scope, PageRequest(statuses=statuses, after=after, limit=size))
        page = _retention_page(scanned.records, scanned.next_cursor)
        report.scanned += len(page)
        if len(page):
            verdict = assess_page(page, policy, now_epoch, tolerance)
            _count(report, verdict, page.active)
            for row in np.flatnonzero(verdict.write):
                record = scanned.records[int(row)]
                change = ForgettingChange(
                    id=record.id,
                    user_id=record.user_id,
                    agent_id=record.agent_id,
                    old_status=record.status,
                    new_status=MemoryStatus.ACTIVE if verdict.now_active[row] else MemoryStatus.ARCHIVED,
                    old_retention=record.retention_score,
                    new_retention=float(verdict.retention[row]),
                    expired=bool(verdict.expired[row]),
                )
                listed = report.changes if change.change != "rescore" else rescores
                if len(listed) < max_listed:
                    listed.append(change)
        if scanned.next_cursor is None:
            break
        after = scanned.next_cursor
    report.changes = [*report.changes, *rescores][:max_listed]
    return report


@dataclass(frozen=True, slots=True)
class RetentionCurve:
    """How one memory fades from now on if nothing reinforces it.

    Attributes:
        id: The memory.
        status: Its status now.
        retention_score: Its stored retention.
        days: Days from now of each point.
        retention: The policy's retention at each point (0 once it has expired).
        archives_in_days: Days from now until its retention reaches the archive threshold (0: it is
            there already; ``None``: never, because recalls alone keep it above).
    """

    id: str
    status: MemoryStatus
    retention_score: float
    days: list[float]
    retention: list[float]
    archives_in_days: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "retention_score": round(self.retention_score, 6),
            "points": [[round(d, 3), round(r, 6)] for d, r in zip(self.days, self.retention, strict=True)],
            "archives_in_days": None if self.archives_in_days is None else round(self.archives_in_days, 3),
        }


def _archives_in_days(record: MemoryRecord, policy: HumanMemoryPolicy, now: datetime) -> float | None:
    """Days until ``record``'s retention falls to the archive threshold (the formula solved for the age)."""
    if policy.retention(record, now) <= policy.archive_threshold:
        return 0.0
    expiry = None
    if record.expires_at is not None:
        expiry = max((record.expires_at - now).total_seconds() / 86400.0, 0.0)
    base = policy.importance_floor + policy.importance_weight * record.importance
    gap = policy.archive_threshold - min(record.access_count * policy.access_boost, policy.access_boost_cap)
    if gap <= 0 or base <= 0:  # recalls alone keep it above the threshold
        return expiry
    age_now = (now - policy.reinforced_at(record)).total_seconds() / 86400.0
    fades = max(policy.half_life_days * math.log2(base / gap) - max(age_now, 0.0), 0.0)
    return fades if expiry is None else min(fades, expiry)


def retention_curves(
    records: Sequence[MemoryRecord], policy: HumanMemoryPolicy, now: datetime, *, days: int, points: int = 61
) -> list[RetentionCurve]:
    """Each memory's retention over the next ``days`` days under ``policy``, from ``now``.

    Args:
        records: The memories.
        policy: The forgetting policy (the one formula: :meth:`HumanMemoryPolicy.retention`).
        now: Where the curves start.
        days: How far they go.
        points: Points per curve (evenly spaced, both ends included).
    """
    validate_positive_int(days, "days")
    offsets = [days * i / (points - 1) for i in range(points)]
    return [
        RetentionCurve(
            id=record.id,
            status=record.status,
            retention_score=record.retention_score,
            days=offsets,
            retention=[policy.retention(record, now + timedelta(days=d)) for d in offsets],
            archives_in_days=_archives_in_days(record, policy, now),
        )
        for record in records
    ]


async def run_forgetting(
    forget: Callable[..., Any],
    checkpoints: CheckpointStore | None,
    *,
    page_size: int = 1000,
    should_stop: Callable[[], bool] = lambda: False,
    checkpoint: str = FORGET_CHECKPOINT,
) -> ForgettingRun:
    """Apply forgetting page by page from the saved cursor until done or told to stop.

    The cursor is saved after every page (and cleared when the run completes), so a run stopped by
    ``should_stop``, a time budget or a crash resumes where it stopped; pages already up to date write
    nothing, so without ``checkpoints`` every run simply starts from the beginning.

    Args:
        forget: ``apply_forgetting(dry_run=False, limit=..., cursor=...)`` of the service.
        checkpoints: Where the cursor is kept (``None``: nowhere).
        page_size: Memories per page.
        should_stop: Asked after each page; ``True`` stops the run (the cursor is kept).
        checkpoint: Name of the saved cursor.
    """
    cursor = await checkpoints.get_checkpoint(checkpoint) if checkpoints is not None else None
    run = ForgettingRun(resumed_from=cursor)
    if cursor is not None:
        logger.info("forgetting: resuming an interrupted run from cursor %s", cursor)
    while True:
        report: ForgettingReport = await forget(dry_run=False, limit=page_size, cursor=cursor)
        run.pages += 1
        run.add(report)
        cursor = report.next_cursor
        if checkpoints is not None:
            await checkpoints.set_checkpoint(checkpoint, cursor)
        if cursor is None:
            run.complete = True
            break
        if should_stop():
            logger.info(
                "forgetting: stopping after %s page(s); the next run resumes at %s", run.pages, cursor
            )
            break
        await asyncio.sleep(0)  # let requests and queue work in between pages
    run.cursor = cursor
    logger.info(
        "forgetting %s: %s page(s)%s, %s",
        "done" if run.complete else "interrupted",
        run.pages,
        " (resumed)" if run.resumed else "",
        run.summary(),
    )
    return run
