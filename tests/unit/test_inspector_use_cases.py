"""The use cases behind the inspector's forgetting view: retention curves and the change each memory
would undergo, checked against the policy's one formula (no I/O)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.service.forgetting import ForgettingChange, retention_curves

NOW = datetime(2026, 11, 1, tzinfo=UTC)
POLICY = HumanMemoryPolicy()


def record(days_ago: float = 0.0, **fields: object) -> MemoryRecord:
    at = NOW - timedelta(days=days_ago)
    return MemoryRecord.model_validate(
        {"user_id": "u", "agent_id": "a", "memory": "m", "created_at": at, "updated_at": at, **fields}
    )


def test_a_curve_is_the_policy_over_the_coming_days_and_crosses_the_threshold_when_it_says() -> None:
    memory = record(days_ago=10, importance=0.6, access_count=2)
    (curve,) = retention_curves([memory], POLICY, NOW, days=120, points=13)
    assert curve.days == [10.0 * i for i in range(13)]
    for day, value in zip(curve.days, curve.retention, strict=True):
        assert value == POLICY.retention(memory, NOW + timedelta(days=day))
    assert curve.archives_in_days is not None
    at = NOW + timedelta(days=curve.archives_in_days)
    assert math.isclose(POLICY.retention(memory, at), POLICY.archive_threshold, abs_tol=1e-9)


def test_recalls_can_keep_a_memory_above_the_threshold_for_good() -> None:
    (curve,) = retention_curves([record(access_count=6)], POLICY, NOW, days=365)  # 6 x 0.04 > 0.22
    assert curve.archives_in_days is None and min(curve.retention) > POLICY.archive_threshold


def test_an_expiry_ends_the_curve_and_counts_as_archiving() -> None:
    memory = record(importance=1.0, access_count=20, expires_at=NOW + timedelta(days=30))
    (curve,) = retention_curves([memory], POLICY, NOW, days=60, points=7)
    assert curve.archives_in_days == 30.0
    assert curve.retention[-1] == 0.0 and curve.retention[0] > 0.9


def test_a_memory_already_below_the_threshold_archives_now() -> None:
    (curve,) = retention_curves([record(days_ago=400, importance=0.1)], POLICY, NOW, days=30)
    assert curve.archives_in_days == 0.0


def test_each_change_is_named() -> None:
    def change(old: MemoryStatus, new: MemoryStatus, *, expired: bool = False) -> str:
        return ForgettingChange("m", "u", "a", old, new, 0.5, 0.1, expired).change

    active, archived = MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED
    assert change(active, archived) == "archive"
    assert change(active, archived, expired=True) == "expire"
    assert change(archived, active) == "reactivate"
    assert change(active, active) == "rescore"
    assert ForgettingChange("m", "u", "a", active, archived, 0.5, 0.1, False).as_dict()["change"] == "archive"
