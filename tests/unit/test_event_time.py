"""The event time a statement states, resolved against when it was said (English and Japanese)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from memory_core.language.event_time import event_time, said_of_past

# 2026-12-03 is a Thursday.
THURSDAY = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
FRIDAY = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
JAN_31 = datetime(2027, 1, 31, 9, 0, tzinfo=UTC)  # a Sunday
DEC_31 = datetime(2026, 12, 31, 9, 0, tzinfo=UTC)  # a Thursday
FEB_10 = datetime(2026, 2, 10, 9, 0, tzinfo=UTC)  # in winter

D = date

#: (what is said, when, first day, day after the last, unit)
CASES: list[tuple[str, datetime, date, date, str]] = [
    # absolute dates
    ("The conference is on 2026-03-14", THURSDAY, D(2026, 3, 14), D(2026, 3, 15), "day"),
    ("We signed it 2025/11/02", THURSDAY, D(2025, 11, 2), D(2025, 11, 3), "day"),
    ("My flight is on March 14, 2027", THURSDAY, D(2027, 3, 14), D(2027, 3, 15), "day"),
    ("I'm flying on 14 March", THURSDAY, D(2027, 3, 14), D(2027, 3, 15), "day"),
    ("I flew to Rome on March 14", THURSDAY, D(2026, 3, 14), D(2026, 3, 15), "day"),
    ("The party is on December 3", THURSDAY, D(2026, 12, 3), D(2026, 12, 4), "day"),
    ("I started the job in March 2024", THURSDAY, D(2024, 3, 1), D(2024, 4, 1), "month"),
    ("I visited Lisbon in March", THURSDAY, D(2026, 3, 1), D(2026, 4, 1), "month"),
    ("I'm visiting Lisbon in March", THURSDAY, D(2027, 3, 1), D(2027, 4, 1), "month"),
    ("I moved to Berlin in 2019", THURSDAY, D(2019, 1, 1), D(2020, 1, 1), "year"),
    ("2026年3月14日に結婚しました", THURSDAY, D(2026, 3, 14), D(2026, 3, 15), "day"),
    ("3月14日に東京へ行きます", THURSDAY, D(2027, 3, 14), D(2027, 3, 15), "day"),
    ("3月14日に東京へ行きました", THURSDAY, D(2026, 3, 14), D(2026, 3, 15), "day"),
    ("2026年3月に引っ越した", THURSDAY, D(2026, 3, 1), D(2026, 4, 1), "month"),
    ("十二月二十五日にパーティーをします", THURSDAY, D(2026, 12, 25), D(2026, 12, 26), "day"),
    ("令和8年4月に入社しました", THURSDAY, D(2026, 4, 1), D(2026, 5, 1), "month"),
    ("平成31年に大学を卒業した", THURSDAY, D(2019, 1, 1), D(2020, 1, 1), "year"),
    ("令和元年5月1日に結婚した", THURSDAY, D(2019, 5, 1), D(2019, 5, 2), "day"),
    # weekdays and the tense that decides a bare one
    ("I went to Kyoto on Friday", THURSDAY, D(2026, 11, 27), D(2026, 11, 28), "day"),
    ("I'm going to Kyoto on Friday", THURSDAY, D(2026, 12, 4), D(2026, 12, 5), "day"),
    ("I'm so excited about the dinner on Friday", THURSDAY, D(2026, 12, 4), D(2026, 12, 5), "day"),
    ("Last Friday I ran a half marathon", THURSDAY, D(2026, 11, 27), D(2026, 11, 28), "day"),
    ("Next Friday I have a dentist appointment", THURSDAY, D(2026, 12, 4), D(2026, 12, 5), "day"),
    ("Next Friday I have a dentist appointment", FRIDAY, D(2026, 12, 11), D(2026, 12, 12), "day"),
    ("This Friday is my day off", FRIDAY, D(2026, 12, 4), D(2026, 12, 5), "day"),
    ("I went to the gym on Friday", FRIDAY, D(2026, 11, 27), D(2026, 11, 28), "day"),
    ("金曜日に京都に行った", THURSDAY, D(2026, 11, 27), D(2026, 11, 28), "day"),
    ("金曜日に京都に行きます", THURSDAY, D(2026, 12, 4), D(2026, 12, 5), "day"),
    ("先週の金曜日に映画を見ました", THURSDAY, D(2026, 11, 27), D(2026, 11, 28), "day"),
    ("来週の月曜に面接があります", THURSDAY, D(2026, 12, 7), D(2026, 12, 8), "day"),
    # relative words
    ("Yesterday I adopted a cat", THURSDAY, D(2026, 12, 2), D(2026, 12, 3), "day"),
    ("I have a meeting tomorrow", DEC_31, D(2027, 1, 1), D(2027, 1, 2), "day"),
    ("I'm tired today", THURSDAY, D(2026, 12, 3), D(2026, 12, 4), "day"),
    ("The day before yesterday I lost my keys", THURSDAY, D(2026, 12, 1), D(2026, 12, 2), "day"),
    ("I moved to Munich last month", THURSDAY, D(2026, 11, 1), D(2026, 12, 1), "month"),
    ("I moved to Munich last month", datetime(2027, 1, 5, tzinfo=UTC), D(2026, 12, 1), D(2027, 1, 1), "month"),
    ("I start my new job next month", JAN_31, D(2027, 2, 1), D(2027, 3, 1), "month"),
    ("Next week I'm in Paris", DEC_31, D(2027, 1, 4), D(2027, 1, 11), "week"),
    ("Last week was busy", THURSDAY, D(2026, 11, 23), D(2026, 11, 30), "week"),
    ("This weekend we're hiking", THURSDAY, D(2026, 12, 5), D(2026, 12, 7), "weekend"),
    ("Last year I ran a marathon", THURSDAY, D(2025, 1, 1), D(2026, 1, 1), "year"),
    ("昨日は友達と会いました", THURSDAY, D(2026, 12, 2), D(2026, 12, 3), "day"),
    ("来月から大阪に住みます", THURSDAY, D(2027, 1, 1), D(2027, 2, 1), "month"),
    ("再来週に引っ越します", THURSDAY, D(2026, 12, 14), D(2026, 12, 21), "week"),
    ("先週末は温泉に行った", THURSDAY, D(2026, 11, 28), D(2026, 11, 30), "weekend"),
    ("去年ハワイに行った", THURSDAY, D(2025, 1, 1), D(2026, 1, 1), "year"),
    ("一昨年に車を買った", THURSDAY, D(2024, 1, 1), D(2025, 1, 1), "year"),
    # counted
    ("Three days ago I got a puppy", THURSDAY, D(2026, 11, 30), D(2026, 12, 1), "day"),
    ("I quit smoking two months ago", THURSDAY, D(2026, 10, 1), D(2026, 11, 1), "month"),
    ("In two weeks I start the course", THURSDAY, D(2026, 12, 17), D(2026, 12, 18), "day"),
    ("I'll be back in 3 days", DEC_31, D(2027, 1, 3), D(2027, 1, 4), "day"),
    ("3日前に風邪をひいた", THURSDAY, D(2026, 11, 30), D(2026, 12, 1), "day"),
    ("二週間後に試験があります", THURSDAY, D(2026, 12, 17), D(2026, 12, 18), "day"),
    ("一年前に犬を飼い始めた", THURSDAY, D(2025, 1, 1), D(2026, 1, 1), "year"),
    # seasons
    ("This summer I'm going to Italy", THURSDAY, D(2026, 6, 1), D(2026, 9, 1), "season"),
    ("Last winter I went skiing", THURSDAY, D(2025, 12, 1), D(2026, 3, 1), "season"),
    ("Last winter I went skiing", FEB_10, D(2024, 12, 1), D(2025, 3, 1), "season"),
    ("This winter is cold", FEB_10, D(2025, 12, 1), D(2026, 3, 1), "season"),
    ("Next spring we're moving", THURSDAY, D(2027, 3, 1), D(2027, 6, 1), "season"),
    ("We married in the summer of 2024", THURSDAY, D(2024, 6, 1), D(2024, 9, 1), "season"),
    ("去年の冬に北海道に行った", THURSDAY, D(2025, 12, 1), D(2026, 3, 1), "season"),
    ("今年の夏は沖縄に行きました", THURSDAY, D(2026, 6, 1), D(2026, 9, 1), "season"),
    ("来年の春に卒業します", THURSDAY, D(2027, 3, 1), D(2027, 6, 1), "season"),
]


@pytest.mark.parametrize(("text", "now", "first", "after", "unit"), CASES)
def test_a_statement_states_its_event_time(text: str, now: datetime, first: date, after: date, unit: str) -> None:
    found = event_time(text, now)
    assert found is not None, text
    assert (found.start.date(), found.end.date(), found.unit) == (first, after, unit)
    assert found.start.tzinfo == UTC and found.start.time() == found.end.time() == datetime.min.time()
    assert found.words in text


@pytest.mark.parametrize(
    "text",
    [
        "I love spicy food",
        "私はベジタリアンです",
        "Every Friday I go swimming",
        "毎週金曜日にジムに行きます",
        "I like to relax on weekends",
        "2月30日に会いました",  # no such day
        "I may go to the park",  # "may" is no month without a day
        "I have 2 cats and 3 dogs",
        "I love summer",
    ],
)
def test_a_statement_without_a_time_has_none(text: str) -> None:
    assert event_time(text, THURSDAY) is None


def test_the_first_date_said_decides_and_the_longest_words_there() -> None:
    found = event_time("先週の金曜日と土曜日に京都に行った", THURSDAY)
    assert found is not None and found.words == "先週の金曜日"
    found = event_time("Yesterday, and on Friday too, I went out", THURSDAY)
    assert found is not None and found.words == "Yesterday"


def test_the_day_is_read_in_the_users_timezone() -> None:
    # 23:30 UTC on 3 December is already 4 December in Tokyo: yesterday is Tokyo's 3 December
    late = datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
    tokyo = ZoneInfo("Asia/Tokyo")
    found = event_time("昨日は雨でした", late, tz=tokyo)
    assert found is not None
    assert found.start == datetime(2026, 12, 3, tzinfo=tokyo).astimezone(UTC)
    assert found.end - found.start == timedelta(days=1)
    # without a timezone the turn's own (UTC) calendar is read
    found = event_time("昨日は雨でした", late)
    assert found is not None and found.start == datetime(2026, 12, 2, tzinfo=UTC)
    # a time with an offset is read in that offset
    offset = datetime(2026, 12, 4, 8, 30, tzinfo=timezone(timedelta(hours=9)))
    found = event_time("yesterday", offset)
    assert found is not None and found.start == datetime(2026, 12, 2, 15, tzinfo=UTC)


def test_the_callers_tense_and_options_decide_when_given() -> None:
    found = event_time("Kyoto on Friday", THURSDAY, past=True)
    assert found is not None and found.start.date() == D(2026, 11, 27)
    assert event_time("My class moved to Thursday", THURSDAY, weekdays=False) is None
    assert event_time("My birthday is March 3", THURSDAY, calendar=False) is None
    found = event_time("My birthday is March 3, 1990", THURSDAY, calendar=False)
    assert found is not None and found.start.date() == D(1990, 3, 3)  # a year makes it a date


def test_a_time_without_a_timezone_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        event_time("yesterday", datetime(2026, 12, 3))


@pytest.mark.parametrize(
    ("sentence", "past"),
    [
        ("I went to Kyoto", True),
        ("I visited my aunt", True),
        ("I will visit my aunt", False),
        ("I'm going to Kyoto", False),
        ("I'm excited about Friday", False),
        ("京都に行った", True),
        ("京都に行きました。", True),
        ("京都に行きます", False),
        ("京都に行く予定でした", False),
        # 〜んだ and 〜いだ after a verb's kanji are past forms; an adjective with だ is not
        ("図書館で本を読んだ", True),
        ("週末は海で泳いだよ", True),
        ("友達とカラオケを楽しんだ。", True),
        ("引っ越し業者に見積もりを頼んだんです", True),
        ("納豆が嫌いだ", False),
        ("それは幸いだ", False),
        ("明日は本を読むんだ", False),
        # what someone has got is no past
        ("I've got a physio session on May 22", False),
        ("She has got two cats", False),
        ("I got a new bike", True),
    ],
)
def test_the_tense_rule(sentence: str, past: bool) -> None:
    assert said_of_past(sentence) is past


def test_a_month_with_its_day_or_year_is_read_whole() -> None:
    for text, first in (("I started in March 2024", D(2024, 3, 1)), ("I flew in on March 14", D(2026, 3, 14))):
        found = event_time(text, THURSDAY)
        assert found is not None and found.start.date() == first, text


def test_a_month_after_of_is_a_month() -> None:
    found = event_time("I moved in the first days of March", THURSDAY)
    assert found is not None and (found.start.date(), found.unit) == (D(2026, 3, 1), "month")


@pytest.mark.parametrize(
    ("text", "first", "after", "unit"),
    [
        ("I moved at the end of March", D(2026, 3, 21), D(2026, 4, 1), "days"),
        ("We met in early May 2025", D(2025, 5, 1), D(2025, 5, 11), "days"),
        ("It was mid-September", D(2026, 9, 11), D(2026, 9, 21), "days"),
        ("the beginning of November 2022", D(2022, 11, 1), D(2022, 11, 11), "days"),
        ("I was in Leeds the second week of November", D(2026, 11, 8), D(2026, 11, 15), "week"),
        ("the last week of October 2023", D(2023, 10, 25), D(2023, 11, 1), "week"),
        ("We went camping the first weekend of August 2023", D(2023, 8, 5), D(2023, 8, 7), "weekend"),
        ("the last weekend of July 2023", D(2023, 7, 29), D(2023, 7, 31), "weekend"),
        ("Where was I the week before 16 November 2023?", D(2023, 11, 9), D(2023, 11, 16), "week"),
        ("the week before May 3, 2023", D(2023, 4, 26), D(2023, 5, 3), "week"),
        ("11月上旬に京都へ行った", D(2026, 11, 1), D(2026, 11, 11), "days"),
        ("2023年10月末に引っ越した", D(2023, 10, 21), D(2023, 11, 1), "days"),
        ("9月中旬に友達と会った", D(2026, 9, 11), D(2026, 9, 21), "days"),
        ("11月の第2週は大阪にいた", D(2026, 11, 8), D(2026, 11, 15), "week"),
        ("7月の最終週に休みを取った", D(2026, 7, 25), D(2026, 8, 1), "week"),
    ],
)
def test_parts_of_a_month(text: str, first: date, after: date, unit: str) -> None:
    """A part of a month, its n-th week or weekend, and the week before a day, in both languages."""
    found = event_time(text, THURSDAY, past=True)
    assert found is not None and (found.start.date(), found.end.date(), found.unit) == (first, after, unit), text


@pytest.mark.parametrize("text", ["In the end may be fine", "The start may slip", "I may start early"])
def test_may_as_a_verb_names_no_part_of_a_month(text: str) -> None:
    assert event_time(text, THURSDAY) is None


def test_a_record_or_candidate_refuses_an_event_span_that_is_no_span() -> None:
    from pydantic import ValidationError

    from memory_core.domain.messages import MemoryCandidate
    from memory_core.domain.records import MemoryRecord

    start = datetime(2026, 12, 2, tzinfo=UTC)
    base = {"user_id": "u", "agent_id": "a", "memory": "x", "created_at": THURSDAY, "updated_at": THURSDAY}
    with pytest.raises(ValidationError, match="event_until needs event_at"):
        MemoryRecord.model_validate({**base, "event_until": start})
    with pytest.raises(ValidationError, match="must be later than event_at"):
        MemoryRecord.model_validate({**base, "event_at": start, "event_until": start})
    with pytest.raises(ValidationError, match="must be later than event_at"):
        MemoryCandidate(memory="x", event_at=start, event_until=start - timedelta(days=1))
    record = MemoryRecord.model_validate({**base, "event_at": start})  # a start alone is an instant
    assert record.event_at == start and record.event_until is None


def test_a_bare_date_in_a_japanese_past_in_nda_is_the_last_such_day() -> None:
    said = datetime(2026, 5, 2, 10, 0, tzinfo=UTC)
    when = event_time("4月25日に引っ越し業者に見積もりを頼んだ。", said)
    assert when is not None and when.start.date() == date(2026, 4, 25)  # not next year's
    when = event_time("金曜日に海で泳いだ", said)  # 2026-05-02 is a Saturday
    assert when is not None and when.start.date() == date(2026, 5, 1)
