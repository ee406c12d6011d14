"""The date vocabulary, defined once (weekdays, months, kanji numbers, number words and relative date
words, in English and Japanese), and the days its words mean."""

from __future__ import annotations

import calendar
import re
import unicodedata
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

__all__ = [
    "AGO_UNITS",
    "ERAS",
    "KANJI_DIGITS",
    "KANJI_HUNDRED",
    "MONTHS",
    "MONTH_PARTS",
    "NUMBER_WORDS",
    "ORDINALS",
    "RELATIVE_DATES",
    "SEASONS",
    "WEEKDAYS",
    "WEEKDAYS_JA",
    "WEEKDAY_RELATIONS_EN",
    "WEEKDAY_RELATIONS_JA",
    "RelativeDate",
    "Unit",
    "ago",
    "calendar_day",
    "count_of",
    "fold",
    "kanji_number",
    "month_number",
    "month_spelling",
    "relative_word_pattern",
    "resolve_calendar_date",
    "resolve_date_word",
    "span_end",
    "span_start",
    "weekday_date",
]

#: What a relative date word counts.
Unit = Literal["day", "week", "weekend", "month", "year"]

#: The weekdays in English, Monday first: ``date.weekday()`` is the index.
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: The same weekdays in Japanese (月曜, 火曜, ...), in the same order.
WEEKDAYS_JA = "月火水木金土日"
#: The months in English, January first: the month is the index plus one.
MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
#: The kanji digits, one to ten: the value is the index plus one.
KANJI_DIGITS = "一二三四五六七八九十"
KANJI_HUNDRED = "百"
#: English number words.
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RelativeDate:
    """Words that name a day, week, weekend, month or year by how far it is from the day they are said.

    Attributes:
        unit: What the words count.
        offset: How many units from the day said (-1 for yesterday, +1 for tomorrow).
        words: The words, English in lower case.
        annotated: :func:`~memory_core.language.date_annotation.annotate_dates` writes the date they mean
            after them.
        compared: Consolidation compares statements by them (``rel:d+1`` for tomorrow).
        inside_words: Annotation finds them inside a longer word too ("midday after tomorrow"); otherwise
            an English word is found only as a whole word.
        dated: They put what is said on a date (an event time, see
            :func:`~memory_core.language.event_time.event_time`); a bare "weekend" does not.
    """

    unit: Unit
    offset: int
    words: tuple[str, ...]
    annotated: bool = True
    compared: bool = True
    inside_words: bool = False
    dated: bool = True


#: The relative date words. Annotation tries them in this order, each span once: longer and more
#: specific words first ("the day before yesterday" before "yesterday", 再来週 before 来週).
RELATIVE_DATES: tuple[RelativeDate, ...] = (
    RelativeDate(
        "day", -2, ("the day before yesterday", "一昨日", "おととい"), compared=False, inside_words=True
    ),
    RelativeDate("day", -1, ("yesterday", "昨日")),
    RelativeDate("day", -1, ("きのう",), compared=False),
    RelativeDate("day", -1, ("last night", "昨夜", "昨晩", "ゆうべ"), compared=False),
    RelativeDate("day", 0, ("today", "tonight", "今日")),
    RelativeDate(
        "day", 0, ("this morning", "this afternoon", "this evening", "今夜", "今朝"), compared=False
    ),
    RelativeDate("day", 2, ("the day after tomorrow",), compared=False, inside_words=True),
    RelativeDate("day", 2, ("day after tomorrow", "明後日", "あさって"), inside_words=True),
    RelativeDate("day", 1, ("tomorrow", "明日", "あした")),
    RelativeDate("weekend", -1, ("last weekend", "先週末"), compared=False),
    RelativeDate("weekend", 0, ("this weekend",)),
    RelativeDate("weekend", 0, ("今週末",), compared=False),
    RelativeDate("weekend", 0, ("weekend", "週末"), annotated=False, dated=False),
    RelativeDate("weekend", 1, ("next weekend",)),
    RelativeDate("weekend", 1, ("来週末",), compared=False),
    RelativeDate("week", 2, ("week after next",), compared=False),
    RelativeDate("week", 2, ("再来週",)),
    RelativeDate("week", -1, ("last week", "先週")),
    RelativeDate("week", 0, ("this week", "今週")),
    RelativeDate("week", 1, ("next week", "来週")),
    RelativeDate("month", 2, ("month after next",), compared=False),
    RelativeDate("month", 2, ("再来月",)),
    RelativeDate("month", -1, ("last month", "先月")),
    RelativeDate("month", 0, ("this month", "今月")),
    RelativeDate("month", 1, ("next month", "来月")),
    RelativeDate("year", 2, ("再来年",), annotated=False),
    RelativeDate("year", -2, ("the year before last", "一昨年", "おととし"), annotated=False, compared=False),
    RelativeDate("year", -1, ("last year", "去年", "昨年")),
    RelativeDate("year", 0, ("this year", "今年")),
    RelativeDate("year", 1, ("next year", "来年")),
)

def relative_word_pattern(word: str, inside_words: bool) -> str:
    """The regular expression of one relative date word: a whole English word unless ``inside_words``;
    an English "last ..." not after "the" ("the last night of the trip" is no date)."""
    escaped = re.escape(word)
    if inside_words or not word.isascii():
        return escaped
    after = r"(?<!the )" if word.startswith("last ") else ""
    return rf"{after}\b{escaped}\b"


#: The words before a weekday and which such day they mean (see :func:`weekday_date`).
WEEKDAY_RELATIONS_EN = {"last": "last", "this": "this", "next": "next", "coming": "next", "on": "on"}
WEEKDAY_RELATIONS_JA = {
    "先週の": "last-week", "今週の": "this", "来週の": "next-week", "今度の": "on", "次の": "on", "この前の": "last",
}  # fmt: skip
#: The units of "three days ago" and 「三日前」 (か月 and its spellings are months).
AGO_UNITS: dict[str, Unit] = {
    "day": "day", "week": "week", "month": "month", "year": "year",
    "日": "day", "週間": "week", "か月": "month", "ヶ月": "month", "ヵ月": "month", "カ月": "month", "年": "year",
}  # fmt: skip

#: The Japanese eras (年号) and the Western year of their first year (令和元年 = 2019, so 令和8年 = 2026).
ERAS = {"令和": 2019, "平成": 1989, "昭和": 1926, "大正": 1912, "明治": 1868}
#: The seasons (meteorological, northern hemisphere) in English and Japanese, and the month each begins:
#: spring March to May, summer June to August, autumn September to November, winter December to February
#: (the winter of a year begins in its December).
SEASONS: dict[str, int] = {
    "spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12, "春": 3, "夏": 6, "秋": 9, "冬": 12,
}  # fmt: skip

#: The parts of a month ("early May", "the end of October", 11月上旬, 10月末) and their days: the first
#: day and the day after the last (``None``: to the month's end).
MONTH_PARTS: dict[str, tuple[int, int | None]] = {
    "beginning": (1, 11), "start": (1, 11), "early": (1, 11), "middle": (11, 21), "mid": (11, 21),
    "end": (21, None), "late": (21, None),
    "上旬": (1, 11), "初旬": (1, 11), "初め": (1, 11), "はじめ": (1, 11), "頭": (1, 11),
    "中旬": (11, 21), "半ば": (11, 21), "下旬": (21, None), "末": (21, None), "終わり": (21, None),
}  # fmt: skip
#: Which week or weekend of a month ("the second week of November", 11月の第2週, "the last weekend of
#: July", 7月の最終週): 1 to 4, -1 the last.
ORDINALS: dict[str, int] = {
    "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
    "last": -1, "final": -1, "1": 1, "2": 2, "3": 3, "4": 4, "一": 1, "二": 2, "三": 3, "四": 4, "最終": -1,
}  # fmt: skip

#: The normalized date words of :func:`resolve_date_word`: the unit and offset of the span they end.
_DATE_WORDS: dict[str, tuple[Unit, int]] = {
    "tomorrow": ("day", 1),
    "day-after-tomorrow": ("day", 2),
    "this-week": ("week", 0),
    "next-week": ("week", 1),
    "week-after-next": ("week", 2),
    "this-weekend": ("weekend", 0),
    "next-weekend": ("weekend", 1),
    "this-month": ("month", 0),
    "next-month": ("month", 1),
    "month-after-next": ("month", 2),
    "this-year": ("year", 0),
    "next-year": ("year", 1),
}
_MONTH_OF_ABBREVIATION = {name[:3]: number for number, name in enumerate(MONTHS, start=1)}


def fold(word: str) -> str:
    """A matched word as a lookup key: case-insensitive matching also matches "ſ" (long s) and the
    Kelvin sign, which ``lower()`` keeps; NFKC and case folding make them plain letters."""
    return unicodedata.normalize("NFKC", word).casefold()


def month_spelling(name: str) -> str:
    """How a month may be written, as a regular expression: its first three letters and optionally the
    rest ("jan", "january"; "sept" too)."""
    if name == "september":
        return "sept?(?:ember)?"
    return f"{name[:3]}(?:{name[3:]})?" if len(name) > 3 else name


def month_number(word: str) -> int:
    """The month of an English month name or abbreviation ("Sept" → 9)."""
    return _MONTH_OF_ABBREVIATION[fold(word)[:3]]


def kanji_number(text: str) -> int:
    """一 → 1, 十五 → 15, 二十 → 20, 三十五 → 35, 百二十 → 120."""
    total = current = 0
    for ch in text:
        if ch == KANJI_HUNDRED:
            total += (current or 1) * 100
            current = 0
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        else:
            current = KANJI_DIGITS.index(ch) + 1
    return total + current


def count_of(word: str) -> int:
    """A count written in digits, in English words or in kanji ("3", "three", 三)."""
    return int(word) if word.isdigit() else NUMBER_WORDS.get(fold(word)) or kanji_number(word)


def _end_of_month(day: date) -> date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def _add_months(day: date, months: int) -> date:
    """The first day of the month ``months`` after the month of ``day``."""
    month_index = day.month - 1 + months
    return date(day.year + month_index // 12, month_index % 12 + 1, 1)


def span_start(unit: Unit, offset: int, reference: date) -> date:
    """The first day of the day / week / weekend / month / year ``offset`` units from ``reference``."""
    if unit == "day":
        return reference + timedelta(days=offset)
    if unit == "week":
        return reference - timedelta(days=reference.weekday()) + timedelta(weeks=offset)
    if unit == "weekend":
        return reference - timedelta(days=reference.weekday()) + timedelta(weeks=offset, days=5)
    if unit == "month":
        return _add_months(reference, offset)
    return date(reference.year + offset, 1, 1)


def span_end(unit: Unit, offset: int, reference: date) -> date:
    """The last day of the span :func:`span_start` begins (weeks and weekends end on Sunday)."""
    start = span_start(unit, offset, reference)
    if unit in ("week", "weekend"):
        return start + timedelta(days=6 if unit == "week" else 1)
    if unit == "month":
        return _end_of_month(start)
    if unit == "year":
        return date(start.year, 12, 31)
    return start


def resolve_date_word(word: str, reference: date, weekday: int | None = None) -> date:
    """The last day a statement with a relative date word is about.

    Weeks run Monday to Sunday.

    Args:
        word: A normalized date word: ``tomorrow``, ``day-after-tomorrow``, ``this-week``,
            ``next-week``, ``week-after-next``, ``this-weekend``, ``next-weekend``, ``this-month``,
            ``next-month``, ``month-after-next``, ``this-year``, ``next-year`` or ``weekday`` (with
            ``weekday``, 0 = Monday: the next such day after ``reference``; "next Friday" said on a
            Thursday is taken as the next day).
        reference: The day the statement was made.
        weekday: The weekday for ``word == "weekday"``.

    Returns:
        The last relevant day (inclusive).

    Raises:
        ValueError: For an unknown word, or ``weekday`` without a weekday.
    """
    if word in _DATE_WORDS:
        return span_end(*_DATE_WORDS[word], reference)
    if word == "weekday":
        if weekday is None or not 0 <= weekday <= 6:
            raise ValueError("weekday must be 0 (Monday) to 6 (Sunday)")
        ahead = (weekday - reference.weekday()) % 7 or 7
        return reference + timedelta(days=ahead)
    raise ValueError(f"unknown date word {word!r}")


def resolve_calendar_date(month: int, day: int, reference: date, year: int | None = None) -> date | None:
    """The date of "month/day" as said on ``reference``: that day this year, or next year once it has
    passed (unless ``year`` is given). ``None`` for a day that does not exist (2月30日)."""
    try:
        if year is not None:
            return date(year, month, day)
        candidate = date(reference.year, month, day)
        if candidate < reference:
            candidate = date(reference.year + 1, month, day)
        return candidate
    except ValueError:
        return None


def calendar_day(month: int, day: int, reference: date, past: bool) -> date | None:
    """ "5月3日" / "May 3rd" without a year: the next such day (``reference`` itself included), or the
    last one when ``past``; ``None`` for a day that does not exist."""
    upcoming = resolve_calendar_date(month, day, reference)
    if upcoming is None or not past or upcoming <= reference:
        return upcoming
    return resolve_calendar_date(month, day, reference, upcoming.year - 1)


def ago(unit: Unit, count: int, reference: date) -> date:
    """The day "``count`` units ago" means (a year ago: the first day of that year)."""
    if unit == "day":
        return reference - timedelta(days=count)
    if unit == "week":
        return reference - timedelta(weeks=count)
    if unit == "month":
        return _add_months(reference, -count)
    return date(max(reference.year - count, 1), 1, 1)


def weekday_date(weekday: int, relation: str, reference: date, past: bool) -> date:
    """The day a weekday word means: ``last-week``, ``next-week``, ``this`` (of this week), ``last``,
    ``on`` (the next one, or the last one if ``past``) or ``next``."""
    monday = reference - timedelta(days=reference.weekday())
    if relation == "last-week":
        return monday - timedelta(weeks=1) + timedelta(days=weekday)
    if relation == "next-week":
        return monday + timedelta(weeks=1, days=weekday)
    if relation == "this":
        return monday + timedelta(days=weekday)
    back = (reference.weekday() - weekday) % 7 or 7
    if relation == "last" or (relation == "on" and past):
        return reference - timedelta(days=back)
    return resolve_date_word("weekday", reference, weekday)
