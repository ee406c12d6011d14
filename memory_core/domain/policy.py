"""The human memory policy: decay, rehearsal, archiving and expiry, as pure functions.

``retention = 0.5 ** (age_days / half_life) * (floor + weight * importance) + min(access_count * boost, cap)``
clamped to ``[0, 1]``. ``age_days`` runs from the memory's last reinforcement: the later of
``updated_at`` (stated or restated) and ``last_accessed_at`` (recalled). An expired memory scores 0.
A memory at or below ``archive_threshold`` becomes ``archived``; a recalled archived memory whose
retention rises above it becomes ``active`` again. Forgetting never deletes: ``deleted`` is only set by
an explicit delete, and physical removal is a separate purge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.domain.validation import ensure_utc
from memory_core.errors import ValidationError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


__all__ = [
    "COUNTERS",
    "RETENTION_INPUTS",
    "Assessment",
    "ForgettingCounts",
    "HumanMemoryPolicy",
]

_SECONDS_PER_DAY = 86400.0

#: The record fields retention is computed from (times as epoch seconds in a store's columns).
RETENTION_INPUTS = ("updated_at", "last_accessed_at", "expires_at", "importance", "access_count")


@dataclass(frozen=True, slots=True)
class Assessment:
    """What the policy says about one memory at one moment."""

    retention_score: float
    status: MemoryStatus
    expired: bool

    def differs_from(self, record: MemoryRecord, tolerance: float = 0.0) -> bool:
        """True when storing this assessment would change ``record`` by more than ``tolerance``."""
        return self.status != record.status or abs(self.retention_score - record.retention_score) > tolerance


@dataclass(frozen=True, slots=True)
class HumanMemoryPolicy:
    """Parameters of forgetting. Defaults follow the design: half-life 45 days, archive at 0.22.

    Args:
        half_life_days: Days after which an unreinforced memory keeps half its base strength.
        importance_floor: Base strength of a memory of importance 0.
        importance_weight: Extra base strength per unit of importance.
        access_boost: Retention added per recall.
        access_boost_cap: Most retention recalls can add.
        archive_threshold: At or below this retention an active memory is archived.
    """

    half_life_days: float = 45.0
    importance_floor: float = 0.35
    importance_weight: float = 0.65
    access_boost: float = 0.04
    access_boost_cap: float = 0.35
    archive_threshold: float = 0.22

    def __post_init__(self) -> None:
        if not (math.isfinite(self.half_life_days) and self.half_life_days > 0):
            raise ValidationError("half_life_days", "must be a positive number of days")
        for name in ("importance_floor", "importance_weight", "access_boost", "access_boost_cap"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValidationError(name, "must be a non-negative number")
        if not 0.0 <= self.archive_threshold < 1.0:
            raise ValidationError("archive_threshold", "must be in [0, 1)")

    # -- scalar API ---------------------------------------------------------------------------
    @staticmethod
    def reinforced_at(record: MemoryRecord) -> datetime:
        """The moment decay restarts from: the later of ``updated_at`` and ``last_accessed_at``."""
        if record.last_accessed_at is not None and record.last_accessed_at > record.updated_at:
            return record.last_accessed_at
        return record.updated_at

    @staticmethod
    def is_expired(record: MemoryRecord, now: datetime) -> bool:
        return record.expires_at is not None and record.expires_at <= ensure_utc(now)

    def retention_value(self, *, age_days: float, importance: float, access_count: int) -> float:
        """Retention for raw values (negative ages count as 0)."""
        decay: float = 0.5 ** (max(age_days, 0.0) / self.half_life_days)
        base = decay * (self.importance_floor + self.importance_weight * importance)
        rehearsal = min(access_count * self.access_boost, self.access_boost_cap)
        return min(max(base + rehearsal, 0.0), 1.0)

    def retention(self, record: MemoryRecord, now: datetime) -> float:
        """Retention of ``record`` at ``now``; 0 once it has expired."""
        if self.is_expired(record, now):
            return 0.0
        age = (ensure_utc(now) - self.reinforced_at(record)).total_seconds() / _SECONDS_PER_DAY
        return self.retention_value(
            age_days=age, importance=record.importance, access_count=record.access_count
        )

    def status_for(self, current: MemoryStatus, retention: float) -> MemoryStatus:
        """Status implied by ``retention``; ``deleted`` is never changed by the policy."""
        if current == MemoryStatus.DELETED:
            return current
        return MemoryStatus.ARCHIVED if retention <= self.archive_threshold else MemoryStatus.ACTIVE

    def assess(self, record: MemoryRecord, now: datetime) -> Assessment:
        retention = self.retention(record, now)
        return Assessment(
            retention_score=retention,
            status=self.status_for(record.status, retention),
            expired=self.is_expired(record, now),
        )

    def apply(self, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """``record`` with retention and status brought up to ``now``."""
        assessment = self.assess(record, now)
        return record.model_copy(
            update={"retention_score": assessment.retention_score, "status": assessment.status}
        )

    def as_of(self, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """``record`` as read at ``now``: its retention computed now, its status as stored (only a
        forgetting run changes a status, and records the change)."""
        retention = self.retention(record, now)
        if retention == record.retention_score:
            return record
        return record.model_copy(update={"retention_score": retention})

    def recall(self, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """``record`` after being returned to an agent: touched, counted, re-scored, status re-derived."""
        now = ensure_utc(now)
        touched = record.model_copy(update={"last_accessed_at": now, "access_count": record.access_count + 1})
        return self.apply(touched, now)

    def initial(self, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """A new record's retention and status, computed at ``now``."""
        return self.apply(record, now)

    # -- vectorized API (the nightly job over many records) ---------------------------------
    def retention_array(
        self,
        *,
        now_epoch: float,
        updated_at: np.ndarray,
        last_accessed_at: np.ndarray,
        expires_at: np.ndarray,
        importance: np.ndarray,
        access_count: np.ndarray,
    ) -> np.ndarray:
        """The same formula over arrays of epoch seconds (NaN for missing times)."""
        import numpy as np

        reinforced = np.fmax(updated_at, last_accessed_at)  # fmax ignores NaN
        age_days = np.maximum(now_epoch - reinforced, 0.0) / _SECONDS_PER_DAY
        base = np.power(0.5, age_days / self.half_life_days) * (
            self.importance_floor + self.importance_weight * importance
        )
        rehearsal = np.minimum(access_count * self.access_boost, self.access_boost_cap)
        retention = np.clip(base + rehearsal, 0.0, 1.0)
        expired = ~np.isnan(expires_at) & (expires_at <= now_epoch)
        result: np.ndarray = np.where(expired, 0.0, retention)
        return result

    def retention_of_columns(self, columns: Mapping[str, np.ndarray], *, now_epoch: float) -> np.ndarray:
        """:meth:`retention_array` over a store's columns (epoch seconds, NaN for missing times), keyed
        by the record field names: the retention at ``now_epoch``, whatever the stored score says."""
        return self.retention_array(
            now_epoch=now_epoch,
            updated_at=columns["updated_at"],
            last_accessed_at=columns["last_accessed_at"],
            expires_at=columns["expires_at"],
            importance=columns["importance"],
            access_count=columns["access_count"],
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "half_life_days": self.half_life_days,
            "importance_floor": self.importance_floor,
            "importance_weight": self.importance_weight,
            "access_boost": self.access_boost,
            "access_boost_cap": self.access_boost_cap,
            "archive_threshold": self.archive_threshold,
        }


@dataclass(slots=True)
class ForgettingCounts:
    """What forgetting saw and did, counted.

    Attributes:
        scanned: Memories read (not deleted).
        archived: Active memories that became archived.
        expired: Of those, the ones archived because they expired.
        reactivated: Archived memories whose retention rose above the threshold again.
        rescored: Memories whose status stays but whose stored retention drifted past the tolerance.
        unchanged: Memories left as they are.
        written: Memories stored (status changes plus rescored ones; 0 in a dry run).
    """

    scanned: int = 0
    archived: int = 0
    expired: int = 0
    reactivated: int = 0
    rescored: int = 0
    unchanged: int = 0
    written: int = 0

    def add(self, other: ForgettingCounts) -> None:
        """Add another run's or page's counts to these."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def counts(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in COUNTERS}

    def summary(self) -> str:
        """The counts as one log-friendly line."""
        return ", ".join(f"{name} {getattr(self, name)}" for name in COUNTERS)


#: The counter names, in report order (one list for reports, runs, telemetry and the CLI).
COUNTERS: tuple[str, ...] = tuple(f.name for f in fields(ForgettingCounts))
