"""Forgetting, written once (:mod:`memory_core.service.forgetting`), against a fake store.

The fake implements the three store ports forgetting uses over a list of records; the policy over
a page must agree with the scalar policy record by record, and paging, limits, cursors, counts,
listed changes and dry runs must behave the same whatever the store's own page size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus
from memory_core.errors import ValidationError
from memory_core.ports import MemoryRef, MemoryStore, RetentionPage, RetentionWrite
from memory_core.service.forgetting import ForgettingReport, apply_forgetting, assess_page, run_forgetting

NOW = datetime(2026, 11, 1, tzinfo=UTC)
POLICY = HumanMemoryPolicy()


def epoch(value: datetime | None) -> float:
    return np.nan if value is None else value.timestamp()


class ListStore(MemoryStore):
    """The forgetting ports over a list of records (keys are positions); pages of at most ``max_page``."""

    def __init__(self, records: Sequence[MemoryRecord], max_page: int = 1000) -> None:
        self.records = list(records)
        self.max_page = max_page
        self.writes: list[list[str]] = []

    async def scan_retention(self, *, after: str | None = None, limit: int) -> RetentionPage:
        start = 0 if after is None else int(after) + 1
        live = [i for i in range(start, len(self.records)) if self.records[i].status != MemoryStatus.DELETED]
        rows = live[: min(limit, self.max_page)]
        picked = [self.records[i] for i in rows]
        return RetentionPage(
            keys=rows,
            active=np.array([r.status == MemoryStatus.ACTIVE for r in picked], dtype=bool),
            retention=np.array([r.retention_score for r in picked], dtype=np.float64),
            importance=np.array([r.importance for r in picked], dtype=np.float64),
            access_count=np.array([r.access_count for r in picked], dtype=np.float64),
            updated_at=np.array([epoch(r.updated_at) for r in picked], dtype=np.float64),
            last_accessed_at=np.array([epoch(r.last_accessed_at) for r in picked], dtype=np.float64),
            expires_at=np.array([epoch(r.expires_at) for r in picked], dtype=np.float64),
            next_cursor=str(rows[-1]) if len(rows) == min(limit, self.max_page) and rows else None,
        )

    async def memory_refs(self, keys: Sequence[Any]) -> list[MemoryRef | None]:
        return [MemoryRef(r.id, r.user_id, r.agent_id) for r in (self.records[int(k)] for k in keys)]

    async def write_retention(self, write: RetentionWrite) -> int:
        written = []
        for at, active, retention in zip(write.rows, write.active, write.retention, strict=True):
            index = int(write.page.keys[int(at)])
            status = MemoryStatus.ACTIVE if active else MemoryStatus.ARCHIVED
            self.records[index] = self.records[index].model_copy(
                update={"status": status, "retention_score": float(retention)}
            )
            written.append(self.records[index].id)
        self.writes.append(written)
        return len(written)


def record(i: int, **fields: Any) -> MemoryRecord:
    updated = fields.pop("updated_at", NOW - timedelta(days=i))
    return MemoryRecord(
        id=f"m{i:04d}", user_id="u1", agent_id="a1", memory=f"memory {i}", created_at=updated - timedelta(days=1),
        updated_at=updated, **fields,
    )


records_strategy = st.lists(
    st.builds(
        dict,
        age=st.floats(0, 400),
        importance=st.floats(0, 1),
        access=st.integers(0, 30),
        recalled=st.one_of(st.none(), st.floats(0, 400)),
        expires=st.one_of(st.none(), st.floats(-30, 30)),
        archived=st.booleans(),
        retention=st.floats(0, 1),
    ),
    min_size=1,
    max_size=40,
)


def build(specs: list[dict[str, Any]]) -> list[MemoryRecord]:
    out = []
    for i, s in enumerate(specs):
        updated = NOW - timedelta(days=s["age"])
        out.append(
            record(
                i,
                updated_at=updated,
                importance=s["importance"],
                access_count=s["access"],
                last_accessed_at=None if s["recalled"] is None else max(updated, NOW - timedelta(days=s["recalled"])),
                expires_at=None if s["expires"] is None else NOW + timedelta(days=s["expires"]),
                status=MemoryStatus.ARCHIVED if s["archived"] else MemoryStatus.ACTIVE,
                retention_score=s["retention"],
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(records_strategy)
def test_the_policy_over_a_page_agrees_with_the_policy_record_by_record(specs: list[dict[str, Any]]) -> None:
    records = build(specs)
    page = asyncio.run(ListStore(records).scan_retention(limit=1000))
    verdict = assess_page(page, POLICY, NOW.timestamp(), tolerance=0.01)
    for i, r in enumerate(records):
        expected = POLICY.assess(r, NOW)
        assert verdict.retention[i] == pytest.approx(expected.retention_score, abs=1e-9)
        assert bool(verdict.expired[i]) == expected.expired
        if abs(expected.retention_score - POLICY.archive_threshold) > 1e-9:
            assert (MemoryStatus.ACTIVE if verdict.now_active[i] else MemoryStatus.ARCHIVED) == expected.status


@settings(max_examples=30, deadline=None)
@given(records_strategy, st.integers(1, 7), st.integers(1, 9), st.booleans())
def test_paging_never_changes_the_outcome(
    specs: list[dict[str, Any]], store_page: int, call_limit: int, dry_run: bool
) -> None:
    async def whole() -> tuple[ForgettingReport, list[MemoryRecord]]:
        store = ListStore(build(specs))
        report = await apply_forgetting(store, POLICY, NOW, dry_run=dry_run)
        return report, store.records

    async def paged() -> tuple[ForgettingReport, list[MemoryRecord]]:
        store = ListStore(build(specs), max_page=store_page)
        total = ForgettingReport(dry_run=dry_run)
        cursor = None
        while True:
            report = await apply_forgetting(store, POLICY, NOW, dry_run=dry_run, limit=call_limit, cursor=cursor)
            assert report.scanned <= call_limit
            total.add(report)
            total.changes += report.changes
            cursor = report.next_cursor
            if cursor is None:
                return total, store.records

    one, one_records = asyncio.run(whole())
    many, many_records = asyncio.run(paged())
    assert one.counts() == many.counts()
    assert [c.id for c in one.changes] == [c.id for c in many.changes]
    assert one_records == many_records
    assert one.scanned == len(specs)
    assert one.written == (0 if dry_run else one.archived + one.reactivated + one.rescored)
    assert one.scanned == one.archived + one.reactivated + one.rescored + one.unchanged


def test_a_deleted_memory_is_never_scanned_and_a_dry_run_writes_nothing() -> None:
    store = ListStore([record(0, importance=0.0, updated_at=NOW - timedelta(days=300)), record(1, status=MemoryStatus.DELETED)])
    dry = asyncio.run(apply_forgetting(store, POLICY, NOW, dry_run=True))
    assert (dry.scanned, dry.archived, dry.written, store.writes) == (1, 1, 0, [])
    assert [c.id for c in dry.changes] == ["m0000"]
    applied = asyncio.run(apply_forgetting(store, POLICY, NOW, dry_run=False))
    assert applied.written == 1 and store.writes == [["m0000"]]
    assert store.records[1].status == MemoryStatus.DELETED


def test_the_listed_changes_are_capped_but_every_change_is_counted_and_written() -> None:
    faded = NOW - timedelta(days=300)
    store = ListStore([record(i, importance=0.0, updated_at=faded) for i in range(1500)], max_page=400)
    result = asyncio.run(apply_forgetting(store, POLICY, NOW, dry_run=False))
    assert result.archived == result.written == 1500
    assert len(result.changes) == result.max_listed == 1000
    assert [c.id for c in result.changes] == [f"m{i:04d}" for i in range(1000)]


@pytest.mark.parametrize(("name", "value"), [("limit", 0), ("tolerance", 1.5), ("page_size", 0)])
def test_bad_arguments_name_themselves(name: str, value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        asyncio.run(apply_forgetting(ListStore([]), POLICY, NOW, **{name: value}))
    assert caught.value.field == name


class Bookmarks:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.saved: list[str | None] = []

    async def get_checkpoint(self, name: str) -> str | None:
        return self.values.get(name)

    async def set_checkpoint(self, name: str, value: str | None) -> None:
        self.saved.append(value)
        if value is None:
            self.values.pop(name, None)
        else:
            self.values[name] = value


def test_the_scheduled_run_saves_its_cursor_after_every_page_and_resumes() -> None:
    store = ListStore([record(i, importance=0.0, updated_at=NOW - timedelta(days=300)) for i in range(25)])
    bookmarks = Bookmarks()

    async def forget(**kwargs: Any) -> ForgettingReport:
        return await apply_forgetting(store, POLICY, NOW, **kwargs)

    pages = iter([False, True])  # stop after the second page
    first = asyncio.run(run_forgetting(forget, bookmarks, page_size=10, should_stop=lambda: next(pages)))
    assert (first.pages, first.complete, first.scanned, first.cursor) == (2, False, 20, "19")
    assert bookmarks.saved == ["9", "19"]
    second = asyncio.run(run_forgetting(forget, bookmarks, page_size=10))
    assert second.resumed_from == "19" and second.complete and second.scanned == 5
    assert bookmarks.saved[-1] is None and bookmarks.values == {}
    assert first.archived + second.archived == 25
