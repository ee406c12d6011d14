"""A memory's event time read at a moment: its days in short, and whether a plan has passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_core.domain.event_dates import event_label, event_span_text, is_passed_plan, local_day, tense_of
from memory_core.domain.records import MemoryRecord

SAID = datetime(2026, 11, 30, 10, tzinfo=UTC)
FRIDAY = datetime(2026, 12, 4, tzinfo=UTC)
SATURDAY = FRIDAY + timedelta(days=1)


def plan(start: datetime | None = FRIDAY, end: datetime | None = SATURDAY, category: str = "plan") -> MemoryRecord:
    return MemoryRecord(
        user_id="u1",
        agent_id="a1",
        memory="I'm flying to Osaka next Friday (4 December 2026)",
        category=category,
        created_at=SAID,
        updated_at=SAID,
        event_at=start,
        event_until=end,
    )


def test_a_plan_passes_at_the_first_instant_after_its_span() -> None:
    assert tense_of(FRIDAY, SATURDAY, SAID) == "upcoming"
    assert tense_of(FRIDAY, SATURDAY, FRIDAY + timedelta(hours=9)) == "ongoing"
    assert tense_of(FRIDAY, SATURDAY, SATURDAY - timedelta(microseconds=1)) == "ongoing"
    assert tense_of(FRIDAY, SATURDAY, SATURDAY) == "past"
    assert tense_of(FRIDAY, None, FRIDAY) == "past"  # a start alone is an instant
    assert tense_of(None, None, SATURDAY) is None
    assert not is_passed_plan(plan(), FRIDAY) and is_passed_plan(plan(), SATURDAY)
    assert not is_passed_plan(plan(category="event"), SATURDAY)  # only plans turn into history
    assert not is_passed_plan(plan(None, None), SATURDAY)  # an undated plan has no day to pass


def test_the_days_of_a_span_are_shown_inclusive_in_the_calendar_it_was_stated_in() -> None:
    assert event_span_text(FRIDAY, SATURDAY) == "2026-12-04"
    week = datetime(2026, 12, 7, tzinfo=UTC)
    assert event_span_text(week, week + timedelta(days=7)) == "2026-12-07..2026-12-13"
    # "last Friday" said in Tokyo: the day starts at 15:00 UTC the evening before
    tokyo = datetime(2026, 10, 29, 15, tzinfo=UTC)
    assert local_day(tokyo) == datetime(2026, 10, 30).date()
    assert event_span_text(tokyo, tokyo + timedelta(days=1)) == "2026-10-30"
    # ... and in New York at 05:00 UTC the same day
    assert event_span_text(datetime(2026, 10, 30, 5, tzinfo=UTC), datetime(2026, 10, 31, 5, tzinfo=UTC)) == "2026-10-30"
    assert event_span_text(FRIDAY, None) == "2026-12-04"
    assert event_span_text(None, None) is None


def test_a_passed_plan_is_labelled_with_what_was_planned() -> None:
    assert event_label("plan", FRIDAY, SATURDAY, SAID) == "2026-12-04"
    assert event_label("plan", FRIDAY, SATURDAY, SATURDAY) == "was planned for 2026-12-04"
    assert event_label("event", FRIDAY, SATURDAY, SATURDAY) == "2026-12-04"
    assert event_label("plan", None, None, SATURDAY) is None
