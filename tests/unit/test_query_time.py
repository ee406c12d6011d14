"""The time a search query asks about: its window, an "as of" moment, and the words left to search."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from memory_core.language.query_time import asks_ahead, query_time

# 2026-12-03 is a Thursday.
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
D = date


@pytest.mark.parametrize(
    ("query", "first", "after", "rest"),
    [
        ("What did I do last weekend?", D(2026, 11, 28), D(2026, 11, 30), "What did I do ?"),
        ("先月どこに行ったっけ", D(2026, 11, 1), D(2026, 12, 1), "どこに行ったっけ"),
        ("What's on my calendar next week?", D(2026, 12, 7), D(2026, 12, 14), "What's on my calendar ?"),
        ("Where did I go on Friday?", D(2026, 11, 27), D(2026, 11, 28), "Where did I go ?"),
        ("What am I doing on Friday?", D(2026, 12, 4), D(2026, 12, 5), "What am I doing ?"),
        ("金曜日に何をしたっけ", D(2026, 11, 27), D(2026, 11, 28), "に何をしたっけ"),
        ("金曜日の予定は？", D(2026, 12, 4), D(2026, 12, 5), "の予定は？"),
        ("Where did I live in March?", D(2026, 3, 1), D(2026, 4, 1), "Where did I live ?"),
        ("去年の夏はどこに旅行した？", D(2026 - 1, 6, 1), D(2025, 9, 1), "はどこに旅行した？"),
        ("What happened three days ago?", D(2026, 11, 30), D(2026, 12, 1), "What happened ?"),
    ],
)
def test_a_query_names_the_window_it_asks_about(query: str, first: date, after: date, rest: str) -> None:
    asked = query_time(query, NOW)
    assert asked.window is not None
    assert (asked.window.start.date(), asked.window.end.date()) == (first, after)
    assert asked.as_of is None
    assert asked.rest == rest


@pytest.mark.parametrize(
    ("query", "as_of", "rest"),
    [
        ("Where did I live as of March?", datetime(2026, 4, 1, tzinfo=UTC), "Where did I live ?"),
        ("Who was my employer as of 2025-06-30?", datetime(2025, 7, 1, tzinfo=UTC), "Who was my employer ?"),
        ("3月時点でどこに住んでいた？", datetime(2026, 4, 1, tzinfo=UTC), "どこに住んでいた？"),
        ("令和7年の時点の勤務先は？", datetime(2026, 1, 1, tzinfo=UTC), "勤務先は？"),
        ("Where do I live as of today?", NOW, "Where do I live ?"),  # never later than now
    ],
)
def test_an_as_of_query_asks_what_held_at_the_end_of_its_window(query: str, as_of: datetime, rest: str) -> None:
    asked = query_time(query, NOW)
    assert asked.window is not None and asked.as_of == as_of
    assert asked.rest == rest


def test_a_query_without_time_words_has_no_window() -> None:
    for query in ("When did Caroline go to the support group?", "好きな食べ物は？", "  What do I like?  "):
        asked = query_time(query, NOW)
        assert asked.window is None and asked.as_of is None and asked.rest == query.strip()


def test_a_query_time_needs_a_timezone() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        query_time("last week", datetime(2026, 12, 3))


@pytest.mark.parametrize(
    ("query", "ahead"),
    [
        ("What's on my calendar next week?", True),
        ("What plans does the user have coming up?", True),
        ("Anything scheduled for the user?", True),
        ("Where will I be on Friday?", True),
        ("What does the user have planned?", True),
        ("来週の予定は？", True),
        ("今後の予定を教えて", True),
        ("何を計画している？", True),
        ("近々やることは？", True),
        # when-questions ask for a date, past or not
        ("When is the user's dentist appointment?", False),
        ("What month is the wedding planned for?", False),
        ("歯医者の予約はいつ？", False),
        ("何月に引っ越す予定？", False),
        # the past tense, and no word of what is to come
        ("What were the user's plans for May?", False),
        ("先週の予定は何だった？", False),
        ("What did I do last weekend?", False),
        ("Where does the user live?", False),
        ("好きな食べ物は？", False),
    ],
)
def test_a_question_about_what_is_to_come_asks_ahead(query: str, ahead: bool) -> None:
    assert asks_ahead(query) is ahead
