"""How a memory's event time reads at a given moment: its dates in short, and whether a plan has passed.

A plan keeps its category and its event span for good (it is a dated record, and retention treats it
like any other memory); whether it is still ahead is read against the time of the read, so no run has
to visit it when its day passes. A plan whose span has ended (``event_until <= now``) is history: the
faces that show memories to a model say so ("was planned for 2026-12-11") instead of showing it as
something to come. A span is half-open, so a plan for Friday is past from Saturday's first instant.

The dates shown are the days of the span in the calendar it was stated in: a span starts and ends at
that calendar's midnights, which :func:`local_day` reads back from the UTC instants (the nearest UTC
midnight is the local date for every offset within twelve hours of UTC).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Literal

from memory_core.domain.records import MemoryRecord

__all__ = [
    "PLAN_CATEGORY",
    "Tense",
    "event_label",
    "event_span_text",
    "is_passed_plan",
    "local_day",
    "tense_of",
]

#: The category of a dated intention (extraction's ``plan``).
PLAN_CATEGORY = "plan"
#: Where an event span lies relative to a moment.
Tense = Literal["past", "ongoing", "upcoming"]


def local_day(instant: datetime) -> date:
    """The calendar day a span boundary at ``instant`` (a local midnight, as UTC) starts."""
    return (instant + timedelta(hours=12)).date()


def tense_of(start: datetime | None, end: datetime | None, now: datetime) -> Tense | None:
    """``past`` when the span has ended at ``now``, ``upcoming`` when it has not begun, else ``ongoing``
    (``None``: no event time). A start without an end is an instant."""
    if start is None:
        return None
    if (end if end is not None else start) <= now:
        return "past"
    return "upcoming" if start > now else "ongoing"


def event_span_text(start: datetime | None, end: datetime | None) -> str | None:
    """The days of a span: ``2026-12-11`` for one day, ``2026-12-07..2026-12-13`` for several (both
    inclusive); ``None`` without an event time."""
    if start is None:
        return None
    first = local_day(start)
    last = first if end is None else max(local_day(end) - timedelta(days=1), first)
    return first.isoformat() if last == first else f"{first.isoformat()}..{last.isoformat()}"


def is_passed_plan(record: MemoryRecord, now: datetime) -> bool:
    """Whether ``record`` is a plan whose date has passed at ``now`` (a past event, not an upcoming plan)."""
    return record.category == PLAN_CATEGORY and tense_of(record.event_at, record.event_until, now) == "past"


def event_label(category: str, start: datetime | None, end: datetime | None, now: datetime) -> str | None:
    """The event time as a label beside a memory: its dates, or ``was planned for <dates>`` for a plan
    whose span has ended at ``now`` (``None`` without an event time)."""
    dates = event_span_text(start, end)
    if dates is None:
        return None
    if category == PLAN_CATEGORY and tense_of(start, end, now) == "past":
        return f"was planned for {dates}"
    return dates
