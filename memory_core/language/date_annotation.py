"""Dates in a text: relative date words followed by the absolute date they mean (and taken out again),
and whether a statement puts itself on a day."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date

from memory_core.language.dates import (
    AGO_UNITS,
    KANJI_DIGITS,
    KANJI_HUNDRED,
    MONTHS,
    NUMBER_WORDS,
    RELATIVE_DATES,
    WEEKDAY_RELATIONS_EN,
    WEEKDAY_RELATIONS_JA,
    WEEKDAYS,
    WEEKDAYS_JA,
    RelativeDate,
    Unit,
    ago,
    calendar_day,
    count_of,
    fold,
    month_number,
    month_spelling,
    relative_word_pattern,
    resolve_calendar_date,
    span_start,
    weekday_date,
)
from memory_core.language.sentences import JAPANESE_SCRIPT

__all__ = [
    "annotate_dates",
    "is_dated",
    "mentions_relative_date",
    "strip_date_annotations",
]

_MONTH_EN = f"({'|'.join(month_spelling(name) for name in MONTHS)})"
_CALENDAR_JA = re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})日")
_CALENDAR_EN_MD = re.compile(
    rf"\b{_MONTH_EN}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", re.IGNORECASE
)
_CALENDAR_EN_DM = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_EN}\b(?:,?\s+(\d{{4}}))?", re.IGNORECASE
)
#: The calendar date patterns with the groups of their month, day and year.
_CALENDAR_PATTERNS: tuple[tuple[re.Pattern[str], int, int, int], ...] = (
    (_CALENDAR_JA, 2, 3, 1),
    (_CALENDAR_EN_MD, 1, 2, 3),
    (_CALENDAR_EN_DM, 2, 1, 3),
)

_KANJI_COUNT = f"{KANJI_DIGITS}{KANJI_HUNDRED}"
_AGO_EN = re.compile(
    rf"(?<![\d,.])\b(\d{{1,3}}|{'|'.join(NUMBER_WORDS)}) ({'|'.join(u for u in AGO_UNITS if u.isascii())})s? ago\b",
    re.IGNORECASE,
)
_AGO_JA = re.compile(
    rf"(?<![0-9{_KANJI_COUNT}])([0-9]{{1,3}}|[{_KANJI_COUNT}]{{1,4}})({'|'.join(u for u in AGO_UNITS if not u.isascii())})前"
)
_WEEKDAY_REL_EN = re.compile(
    rf"\b({'|'.join(WEEKDAY_RELATIONS_EN)})\s+({'|'.join(WEEKDAYS)})\b", re.IGNORECASE
)
_WEEKDAY_REL_JA = re.compile(
    rf"(?<!毎週)(?<!毎)({'|'.join(WEEKDAY_RELATIONS_JA)})?([{WEEKDAYS_JA}])曜(?:日)?"
)


def _relative_pattern(relative: RelativeDate) -> re.Pattern[str]:
    return re.compile(
        "|".join(relative_word_pattern(w, relative.inside_words) for w in relative.words), re.IGNORECASE
    )


#: The relative date words annotation writes a date after, in the order it tries them.
_RELATIVE_WORDS = tuple((_relative_pattern(r), r) for r in RELATIVE_DATES if r.annotated)
#: Words that put a statement on a day ahead (a plan's date): 明日, next week, on Friday...
_DATES_AHEAD = re.compile(
    "|".join(
        re.escape(word)
        for r in RELATIVE_DATES
        if r.annotated and (r.offset > 0 or (r.offset == 0 and r.unit != "day"))
        for word in r.words
    )
    + rf"|\b(?:on|this|next|coming)\s+(?:{'|'.join(WEEKDAYS)})\b|[{WEEKDAYS_JA}]曜(?:日)?(?:に|は|の)",
    re.IGNORECASE,
)
#: An annotation already there: the text has been made absolute before (a replay, an import).
_ANNOTATED = re.compile(
    r"^\s*[（(](?:week of |weekend of )?(?:\d{1,2} )?(?:[A-Z][a-z]+ )?\d{4}|^\s*（\d{4}年"
)
#: What :func:`annotate_dates` writes: " (30 April 2026)", "（2026年4月27日の週）".
_DATE_ANNOTATION = re.compile(
    r" \((?:(?:week|weekend) of )?(?:\d{1,2} )?(?:[A-Z][a-z]+ )?\d{4}\)|（\d{4}年(?:\d{1,2}月(?:\d{1,2}日)?)?(?:の週末?)?）"
)


def _month_day(match: re.Match[str], month_group: int, day_group: int) -> tuple[int, int]:
    """The month and day of a :data:`_CALENDAR_PATTERNS` match."""
    month_text = match.group(month_group)
    month = int(month_text) if month_text.isdigit() else month_number(month_text)
    return month, int(match.group(day_group))


def is_dated(sentence: str, reference: date) -> bool:
    """Whether a statement puts itself on a day: a calendar date that exists (the first one written
    decides), or a word for a day ahead (明日, next week, on Friday...)."""
    for pattern, month_group, day_group, year_group in _CALENDAR_PATTERNS:
        match = pattern.search(sentence)
        if match:
            month, day = _month_day(match, month_group, day_group)
            year = int(match.group(year_group)) if match.group(year_group) else None
            if resolve_calendar_date(month, day, reference, year) is not None:
                return True
            break
    return _DATES_AHEAD.search(sentence) is not None


def mentions_relative_date(text: str) -> bool:
    """Whether ``text`` has a relative date word that annotation writes a date after (昨日, next week)."""
    return any(pattern.search(text) for pattern, _ in _RELATIVE_WORDS)


def _render_span(unit: Unit, start: date, japanese: bool) -> str:
    """An absolute date in the writer's language: "(30 April 2026)", "（2026年4月27日の週）"."""
    if japanese:
        if unit == "day":
            inner = f"{start.year}年{start.month}月{start.day}日"
        elif unit in ("week", "weekend"):
            inner = f"{start.year}年{start.month}月{start.day}日の{'週末' if unit == 'weekend' else '週'}"
        elif unit == "month":
            inner = f"{start.year}年{start.month}月"
        else:
            inner = f"{start.year}年"
        return f"（{inner}）"
    month = MONTHS[start.month - 1].capitalize()
    long = f"{start.day} {month} {start.year}"
    if unit == "day":
        return f"({long})"
    if unit in ("week", "weekend"):
        return f"({unit} of {long})"
    if unit == "month":
        return f"({month} {start.year})"
    return f"({start.year})"


#: A date said in a text: where it is, what it counts and the first day it means.
_Mention = tuple[int, int, Unit, date]


def _ago_mentions(text: str, reference: date) -> Iterator[_Mention]:
    for match in (*_AGO_EN.finditer(text), *_AGO_JA.finditer(text)):
        unit = AGO_UNITS[fold(match.group(2))]
        day = ago(unit, count_of(match.group(1)), reference)
        yield match.start(), match.end(), "day" if unit in ("day", "week") else unit, day


def _calendar_mentions(text: str, reference: date, past: bool) -> Iterator[_Mention]:
    for pattern, month_group, day_group, year_group in _CALENDAR_PATTERNS:
        for match in pattern.finditer(text):
            if match.group(year_group):
                continue  # already absolute
            meant = calendar_day(*_month_day(match, month_group, day_group), reference, past)
            if meant is not None:
                yield match.start(), match.end(), "day", meant


def _weekday_mentions(text: str, reference: date, past: bool, bare: bool) -> Iterator[_Mention]:
    """Weekdays with the word before them ("next Friday", 「来週の月曜」); bare ones ("on Friday",
    「金曜に」) only when ``bare``."""
    said = [
        (match, WEEKDAY_RELATIONS_EN[fold(match.group(1))], WEEKDAYS.index(fold(match.group(2))))
        for match in _WEEKDAY_REL_EN.finditer(text)
    ] + [
        (match, WEEKDAY_RELATIONS_JA.get(match.group(1) or "", "on"), WEEKDAYS_JA.index(match.group(2)))
        for match in _WEEKDAY_REL_JA.finditer(text)
    ]
    for match, relation, weekday in said:
        if relation != "on" or bare:
            yield match.start(), match.end(), "day", weekday_date(weekday, relation, reference, past)


def _relative_mentions(text: str, reference: date) -> Iterator[_Mention]:
    for pattern, relative in _RELATIVE_WORDS:
        for match in pattern.finditer(text):
            yield (
                match.start(),
                match.end(),
                relative.unit,
                span_start(relative.unit, relative.offset, reference),
            )


class _Annotations:
    """The annotations of one text, each after the words it dates, none overlapping another."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._spans: list[tuple[int, int, str]] = []

    def add(self, start: int, end: int, annotation: str) -> None:
        if self._text[end : end + 2] in ("'s", "’s"):
            end += 2  # "yesterday's game" → "yesterday's (25 November 2026) game"
        if any(start < e and s < end for s, e, _ in self._spans):
            return
        if _ANNOTATED.match(self._text[end:]):
            return
        self._spans.append((start, end, annotation))

    def written(self, japanese: bool) -> str:
        """The text with its annotations (a space before an English one)."""
        out: list[str] = []
        position = 0
        for _start, end, annotation in sorted(self._spans):
            out.append(self._text[position:end])
            out.append(annotation if japanese or annotation.startswith("（") else " " + annotation)
            position = end
        out.append(self._text[position:])
        return "".join(out)


def annotate_dates(
    text: str, reference: date, *, past: bool = False, weekdays: bool = True, calendar: bool = True
) -> str:
    """``text`` with each relative date word followed by the absolute date it means on ``reference``.

    "I moved to Munich last month" said on 2026-11-26 becomes "I moved to Munich last month (October
    2026)"; 「先週京都に行きました」 becomes 「先週（2026年11月16日の週）京都に行きました」. The user's words stay;
    the date they meant is added, so the memory still says the right thing (and is found by its date)
    long after "last month" has moved on. A bare weekday ("on Friday", 「金曜に」) is the next one, or the
    last one when ``past`` (the sentence reports an event); with ``weekdays=False`` a bare weekday is
    left as said (「ヨガ教室は木曜に変わりました」 names a weekday, not a date).

    Args:
        text: A memory text.
        reference: The day the statement was made (the turn's ``occurred_at``, UTC).
        past: The statement reports something that happened.
        weekdays: Annotate bare weekdays too (a plan's "on Friday" is a date).
        calendar: Give a month and day without a year their year (not for a date that comes back every
            year: a birthday).

    Returns:
        The annotated text (unchanged when it has no relative date word).
    """
    japanese = bool(JAPANESE_SCRIPT.search(text))
    mentions = (
        *_ago_mentions(text, reference),
        *(_calendar_mentions(text, reference, past) if calendar else ()),
        *_weekday_mentions(text, reference, past, bare=weekdays),
        *_relative_mentions(text, reference),
    )
    if not mentions:
        return text
    annotations = _Annotations(text)
    for start, end, unit, day in mentions:
        annotations.add(start, end, _render_span(unit, day, japanese))
    return annotations.written(japanese)


def strip_date_annotations(text: str) -> str:
    """``text`` without the absolute dates :func:`annotate_dates` added (the words as the user said them)."""
    return _DATE_ANNOTATION.sub("", text)
