"""The one date vocabulary: what annotation writes and what consolidation compares both come from it."""

from __future__ import annotations

from datetime import date

import pytest

from memory_core.language.date_annotation import annotate_dates, is_dated, mentions_relative_date
from memory_core.language.date_mentions import kanji_counts_as_digits, take_dates
from memory_core.language.dates import (
    KANJI_DIGITS,
    MONTHS,
    RELATIVE_DATES,
    WEEKDAYS,
    WEEKDAYS_JA,
    count_of,
    kanji_number,
    month_number,
    weekday_date,
)

# 2026-11-26 is a Thursday.
THURSDAY = date(2026, 11, 26)


def test_the_tables_have_one_entry_per_day_month_and_digit() -> None:
    assert len(WEEKDAYS) == len(WEEKDAYS_JA) == 7
    assert len(MONTHS) == 12
    assert [kanji_number(k) for k in KANJI_DIGITS] == list(range(1, 11))
    assert [date(2026, 11, 23 + i).weekday() for i in range(7)] == list(range(7))  # Monday first


@pytest.mark.parametrize(
    ("text", "annotated"),
    [
        ("I moved to Munich last month", "I moved to Munich last month (October 2026)"),
        ("See you next week", "See you next week (week of 30 November 2026)"),
        ("We met the day before yesterday", "We met the day before yesterday (24 November 2026)"),
        ("We had dinner together last night", "We had dinner together last night (25 November 2026)"),
        ("The last night of the trip was quiet", "The last night of the trip was quiet"),
        ("The last week of the course was hard", "The last week of the course was hard"),
        ("I ran three days ago", "I ran three days ago (23 November 2026)"),
        ("Dinner next Friday", "Dinner next Friday (27 November 2026)"),
        ("My trip starts Sept 3", "My trip starts Sept 3 (3 September 2027)"),
        ("先週京都に行きました", "先週（2026年11月16日の週）京都に行きました"),
        ("三日前に走りました", "三日前（2026年11月23日）に走りました"),
        ("昨晩は友達と飲んだ", "昨晩（2026年11月25日）は友達と飲んだ"),
        ("来週の金曜に会議があります", "来週の金曜（2026年12月4日）に会議があります"),
        ("来週末に旅行します", "来週末（2026年12月5日の週末）に旅行します"),
        ("9月3日に出発します", "9月3日（2027年9月3日）に出発します"),
    ],
)
def test_annotation_writes_the_date_in_the_writers_language(text: str, annotated: str) -> None:
    assert annotate_dates(text, THURSDAY) == annotated


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("every monday at 10am", ["time:10:00", "day:mon"]),
        ("毎週月曜10時に会議", ["time:10:00", "day:mon"]),
        ("friday", ["day:fri"]),
        ("金曜日", ["day:fri"]),
        ("september 3", ["date:-9-3"]),
        ("9月3日", ["date:-9-3"]),
        ("next weekend", ["rel:weekend+1"]),
        ("this weekend", ["rel:weekend"]),
        ("来週", ["rel:w+1"]),
        ("再来年", ["rel:y+2"]),
        ("yesterday", ["rel:d-1"]),
        ("next week (week of 30 november 2026)", ["abs:2026-11-30/week"]),
        ("(2026年5月4日の週)", ["abs:2026-5-4/week"]),
    ],
)
def test_consolidation_tokens_come_from_the_same_tables(text: str, when: list[str]) -> None:
    assert take_dates(text)[1] == when


def test_one_weekday_in_both_languages_is_one_token_and_one_day() -> None:
    for index, (english, kanji) in enumerate(zip(WEEKDAYS, WEEKDAYS_JA, strict=True)):
        assert take_dates(english)[1] == take_dates(f"{kanji}曜日")[1] == [f"day:{english[:3]}"]
        assert annotate_dates(f"next {english.capitalize()}", THURSDAY).endswith(
            f"({weekday_date(index, 'next', THURSDAY, False).day} "
            f"{MONTHS[weekday_date(index, 'next', THURSDAY, False).month - 1].capitalize()} 2026)"
        )


def test_months_and_numbers_are_read_from_the_tables() -> None:
    assert [month_number(name) for name in MONTHS] == list(range(1, 13))
    assert month_number("Sept") == 9
    assert [count_of(w) for w in ("3", "three", "an", "十五", "百二十")] == [3, 3, 1, 15, 120]
    assert kanji_counts_as_digits("猫を二匹、犬を十頭") == "猫を2匹、犬を10頭"


def test_relative_words_say_which_consumer_reads_them() -> None:
    annotated = {w for r in RELATIVE_DATES if r.annotated for w in r.words}
    compared = {w for r in RELATIVE_DATES if r.compared for w in r.words}
    assert {"yesterday", "昨日", "next week", "来週"} <= annotated & compared
    assert {"きのう", "今朝", "先週末"} <= annotated - compared
    assert {"週末", "再来年"} <= compared - annotated
    assert mentions_relative_date("I called her yesterday")
    assert not mentions_relative_date("I call her on weekends")
    assert is_dated("明日は会議です", THURSDAY)
    assert not is_dated("昨日は会議でした", THURSDAY)
