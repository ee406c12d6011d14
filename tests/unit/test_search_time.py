"""Which memories a query's window holds: event spans, validity, and undated moments as points."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.domain.records import MemoryKind, MemoryRecord
from memory_core.domain.search_time import MOMENT_CATEGORIES, TimeWindow, in_window

SAID = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
THAT_WEEK = TimeWindow(datetime(2026, 10, 19, tzinfo=UTC), datetime(2026, 10, 26, tzinfo=UTC))
NEXT_WEEK = TimeWindow(datetime(2026, 10, 26, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))


def record(category: str, kind: MemoryKind = MemoryKind.FACT) -> MemoryRecord:
    return MemoryRecord(
        user_id="u", agent_id="a", memory="m", kind=kind, category=category,
        created_at=SAID, updated_at=SAID, valid_from=SAID,
    )


@pytest.mark.parametrize(
    "memory",
    [record("episode", MemoryKind.EPISODE), record("general", MemoryKind.EPISODE)]
    + [record(c) for c in MOMENT_CATEGORIES if c != "episode"],
)
def test_an_undated_memory_of_a_moment_is_a_point_when_it_was_said(memory: MemoryRecord) -> None:
    assert in_window(memory, THAT_WEEK)
    assert not in_window(memory, NEXT_WEEK)


@pytest.mark.parametrize("category", ["profile", "preference", "routine", "general"])
def test_a_fact_that_holds_is_in_every_window_from_when_it_was_said(category: str) -> None:
    assert in_window(record(category), THAT_WEEK) and in_window(record(category), NEXT_WEEK)
