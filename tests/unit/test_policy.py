"""The human memory policy: the design's formula, its bounds and monotonicity (property-based)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.errors import ValidationError

NOW = datetime(2026, 11, 1, tzinfo=UTC)
POLICY = HumanMemoryPolicy()

ages = st.floats(min_value=0, max_value=3650, allow_nan=False)
unit = st.floats(min_value=0, max_value=1, allow_nan=False)
counts = st.integers(min_value=0, max_value=10_000)


def record(
    *, age_days: float = 0.0, importance: float = 0.5, access_count: int = 0, **extra: object
) -> MemoryRecord:
    updated = NOW - timedelta(days=age_days)
    return MemoryRecord(
        user_id="u",
        agent_id="a",
        memory="m",
        importance=importance,
        access_count=access_count,
        created_at=updated,
        updated_at=updated,
        **extra,  # type: ignore[arg-type]
    )


def test_defaults_are_the_designs() -> None:
    assert (
        POLICY.half_life_days,
        POLICY.access_boost,
        POLICY.access_boost_cap,
        POLICY.archive_threshold,
    ) == (
        45.0,
        0.04,
        0.35,
        0.22,
    )


@pytest.mark.parametrize(
    ("age", "importance", "count", "expected"),
    [
        (0, 1.0, 0, 1.0),
        (0, 0.0, 0, 0.35),
        (45, 1.0, 0, 0.5),
        (90, 0.5, 0, 0.25 * (0.35 + 0.325)),
        (75, 1.0, 20, 0.5 ** (75 / 45) + 0.35),
        (10, 0.2, 3, 0.5 ** (10 / 45) * (0.35 + 0.13) + 0.12),
    ],
)
def test_formula(age: float, importance: float, count: int, expected: float) -> None:
    assert POLICY.retention(
        record(age_days=age, importance=importance, access_count=count), NOW
    ) == pytest.approx(min(expected, 1.0))


@given(ages, unit, counts)
def test_retention_is_in_unit_interval(age: float, importance: float, count: int) -> None:
    assert 0.0 <= POLICY.retention_value(age_days=age, importance=importance, access_count=count) <= 1.0


@given(ages, ages, unit, counts)
def test_monotone_non_increasing_in_age(a: float, b: float, importance: float, count: int) -> None:
    young, old = sorted((a, b))
    r_young = POLICY.retention_value(age_days=young, importance=importance, access_count=count)
    r_old = POLICY.retention_value(age_days=old, importance=importance, access_count=count)
    assert r_old <= r_young + 1e-12


@given(ages, unit, unit, counts)
def test_monotone_non_decreasing_in_importance(age: float, a: float, b: float, count: int) -> None:
    low, high = sorted((a, b))
    assert (
        POLICY.retention_value(age_days=age, importance=low, access_count=count)
        <= POLICY.retention_value(age_days=age, importance=high, access_count=count) + 1e-12
    )


@given(ages, unit, counts, counts)
def test_monotone_non_decreasing_in_access_count(age: float, importance: float, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert (
        POLICY.retention_value(age_days=age, importance=importance, access_count=low)
        <= POLICY.retention_value(age_days=age, importance=importance, access_count=high) + 1e-12
    )


@given(ages, unit, counts)
def test_rehearsal_is_capped(age: float, importance: float, count: int) -> None:
    with_recalls = POLICY.retention_value(age_days=age, importance=importance, access_count=count)
    without = POLICY.retention_value(age_days=age, importance=importance, access_count=0)
    assert with_recalls - without <= 0.35 + 1e-12


def test_expired_memories_score_zero_and_archive() -> None:
    r = record(importance=1.0, access_count=50, expires_at=NOW - timedelta(seconds=1))
    assert POLICY.retention(r, NOW) == 0.0
    assessment = POLICY.assess(r, NOW)
    assert assessment.expired and assessment.status == MemoryStatus.ARCHIVED


def test_archive_threshold_is_inclusive() -> None:
    policy = HumanMemoryPolicy(archive_threshold=0.35)
    assert policy.status_for(MemoryStatus.ACTIVE, 0.35) == MemoryStatus.ARCHIVED
    assert policy.status_for(MemoryStatus.ACTIVE, 0.3501) == MemoryStatus.ACTIVE
    assert policy.status_for(MemoryStatus.DELETED, 0.99) == MemoryStatus.DELETED


def test_recall_reinforces_and_restarts_decay() -> None:
    r = record(age_days=120, importance=0.2, access_count=0, status=MemoryStatus.ARCHIVED)
    assert POLICY.assess(r, NOW).status == MemoryStatus.ARCHIVED
    recalled = POLICY.recall(r, NOW)
    assert recalled.access_count == 1 and recalled.last_accessed_at == NOW
    assert recalled.retention_score == pytest.approx(0.35 + 0.65 * 0.2 + 0.04)
    assert recalled.status == MemoryStatus.ACTIVE
    later = NOW + timedelta(days=45)
    assert POLICY.retention(recalled, later) == pytest.approx(0.5 * (0.35 + 0.13) + 0.04)


@settings(max_examples=50)
@given(st.lists(st.tuples(ages, unit, st.integers(0, 40), st.booleans()), min_size=1, max_size=30))
def test_vectorized_matches_scalar(rows: list[tuple[float, float, int, bool]]) -> None:
    records = [
        record(age_days=age, importance=imp, access_count=n, expires_at=(NOW if expired else None))
        for age, imp, n, expired in rows
    ]
    nan = float("nan")
    values = POLICY.retention_array(
        now_epoch=NOW.timestamp(),
        updated_at=np.array([r.updated_at.timestamp() for r in records]),
        last_accessed_at=np.array([nan for _ in records]),
        expires_at=np.array([r.expires_at.timestamp() if r.expires_at else nan for r in records]),
        importance=np.array([r.importance for r in records]),
        access_count=np.array([r.access_count for r in records], dtype=float),
    )
    assert values == pytest.approx([POLICY.retention(r, NOW) for r in records])


@pytest.mark.parametrize(
    ("field", "value"),
    [("half_life_days", 0), ("half_life_days", -1), ("access_boost", -0.1), ("archive_threshold", 1.0)],
)
def test_invalid_parameters_name_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as info:
        HumanMemoryPolicy(**{field: value})
    assert info.value.field == field
