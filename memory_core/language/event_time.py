"""The event time of a statement: the day, week, weekend, month, season or year it says something
happened or will happen, resolved against the moment it was said.

One resolver, read from the date vocabulary of :mod:`memory_core.language.dates`, for extraction,
consolidation and (later) queries. A span is half-open: ``start`` is the first instant of it and ``end``
the first instant after it ("yesterday" said on 2026-12-03 is ``[2026-12-02T00:00, 2026-12-03T00:00)``),
so spans of different units compare and nest without "end of day" rounding.

Which day a word means depends on the tense where the words leave it open: a bare weekday ("on Friday",
「金曜日に」), a month and day without a year ("March 14", 「3月14日」), a month alone ("in March", 「3月に」)
is the last such one in a statement about the past ("I went to Kyoto on Friday", 「金曜日に京都に行った」)
and the next one (today included) otherwise ("I'm going to Kyoto on Friday", 「金曜日に京都に行く」). The
tense is the caller's when it knows it (``past``), else :func:`said_of_past` of the sentence the words
are in. Words that say their direction ("last Friday", 「先週の金曜日」, "three days ago", 来月) need no
tense. "next Friday" is the first Friday after the day said (said on a Friday: a week later); "this
Friday" is the Friday of the week said (Monday to Sunday), even once it has passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Literal

from memory_core.language.dates import (
    AGO_UNITS,
    ERAS,
    KANJI_DIGITS,
    KANJI_HUNDRED,
    MONTH_PARTS,
    MONTHS,
    NUMBER_WORDS,
    ORDINALS,
    RELATIVE_DATES,
    SEASONS,
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
    span_end,
    span_start,
    weekday_date,
)
from memory_core.language.sentences import JAPANESE_SCRIPT

__all__ = ["HAVE_GOT", "EventTime", "SpanUnit", "event_time", "said_of_past"]

#: What an event time spans.
SpanUnit = Literal["day", "days", "week", "weekend", "month", "season", "year"]


@dataclass(frozen=True, slots=True)
class EventTime:
    """When a statement says something happened or will happen.

    Attributes:
        start: The first instant of the span (UTC, inclusive).
        end: The first instant after it (UTC, exclusive).
        unit: What the words name: a day, a run of days (a part of a month, "early May"), a week,
            weekend, month, season or year.
        words: The words that said it, as written.
    """

    start: datetime
    end: datetime
    unit: SpanUnit
    words: str


#: A resolved span in the local calendar: what it names, its first day and the day after its last.
_Span = tuple[SpanUnit, date, date]


@dataclass(frozen=True, slots=True)
class _Reading:
    """How the words of one statement are read: the day said, the tense, and what counts as a date."""

    today: date
    past: Callable[[int], bool]
    weekdays: bool
    calendar: bool


_K = f"{KANJI_DIGITS}{KANJI_HUNDRED}"
#: A month or day number in Japanese: digits or kanji (3, 十四).
_N = rf"\d{{1,2}}|[{KANJI_DIGITS}]{{1,3}}"
_MONTH_EN = f"({'|'.join(month_spelling(name) for name in MONTHS)})"
_SEASON_EN = "|".join(s for s in SEASONS if s.isascii())
_SEASON_JA = "".join(s for s in SEASONS if not s.isascii())
_COUNT_EN = rf"\d{{1,3}}|{'|'.join(NUMBER_WORDS)}"
_UNITS_EN = "|".join(u for u in AGO_UNITS if u.isascii())
_UNITS_JA = "|".join(u for u in AGO_UNITS if not u.isascii())
#: The Japanese year words (去年, 来年...) and how many years from the year said they are.
_YEAR_WORDS_JA = {w: r.offset for r in RELATIVE_DATES if r.unit == "year" for w in r.words if not w.isascii()}
_ERA = rf"({'|'.join(ERAS)})(元|\d{{1,2}}|[{KANJI_DIGITS}]{{1,3}})年"
_I = re.IGNORECASE


def _day(day: date) -> _Span:
    return "day", day, day + timedelta(days=1)


def _month(year: int, month: int) -> _Span:
    start = date(year, month, 1)
    return "month", start, span_start("month", 1, start)


def _year(year: int) -> _Span:
    return "year", date(year, 1, 1), date(year + 1, 1, 1)


def _season(first_month: int, year: int) -> _Span:
    start = date(year, first_month, 1)
    return "season", start, span_start("month", 3, start)


def _date(year: int, month: int | None, day: int | None) -> _Span | None:
    """A year, a month of it or a day of it; ``None`` for one that does not exist (2026-02-30)."""
    try:
        if month is None:
            return _year(year)
        if day is None:
            return _month(year, month)
        return _day(date(year, month, day))
    except ValueError:
        return None


def _number(text: str | None) -> int | None:
    return None if text is None else count_of(text)


def _era_year(era: str, number: str) -> int:
    return ERAS[era] + (1 if number == "元" else count_of(number)) - 1


def _month_alone(month: int, reading: _Reading, at: int) -> _Span | None:
    """"in March" without a year: this month's or the next such month, or the last one when past."""
    today = reading.today
    year = today.year
    if reading.past(at):
        year -= month > today.month
    else:
        year += month < today.month
    return _month(year, month) if 1 <= month <= 12 else None


def _season_of(first_month: int, relation: str, today: date) -> _Span:
    """A season by its relation to ``today``: ``this`` (the one of this year; a winter of January or
    February is the one that began in December), ``last`` (the last one that has ended) or ``next``
    (the first one that has not begun)."""
    if relation == "this":
        year = today.year - (first_month == 12 and today.month < 3)
        return _season(first_month, year)
    years = range(today.year - 2, today.year + 2)
    if relation == "last":
        return max((s for y in years if (s := _season(first_month, y))[2] <= today), key=lambda s: s[1])
    return min((s for y in years if (s := _season(first_month, y))[1] > today), key=lambda s: s[1])


# --------------------------------------------------------------------------------------------
# What each pattern means
# --------------------------------------------------------------------------------------------


def _iso(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _date(int(m[1]), int(m[2]), int(m[3]))


def _ja_era(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _date(_era_year(m[1], m[2]), _number(m[3]), _number(m[4]))


def _ja_year(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _date(int(m[1]), _number(m[2]), _number(m[3]))


def _ja_month_day(m: re.Match[str], reading: _Reading) -> _Span | None:
    if not reading.calendar:
        return None
    day = calendar_day(count_of(m[1]), count_of(m[2]), reading.today, reading.past(m.start()))
    return None if day is None else _day(day)


def _ja_month(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _month_alone(count_of(m[1]), reading, m.start()) if reading.calendar else None


def _en_month_day(month: str, day: str, year: str | None, m: re.Match[str], reading: _Reading) -> _Span | None:
    if year:
        return _date(int(year), month_number(month), int(day))
    if not reading.calendar:
        return None
    meant = calendar_day(month_number(month), int(day), reading.today, reading.past(m.start()))
    return None if meant is None else _day(meant)


def _en_mdy(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _en_month_day(m[1], m[2], m[3], m, reading)


def _en_dmy(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _en_month_day(m[2], m[1], m[3], m, reading)


def _en_month_year(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _date(int(m[2]), month_number(m[1]), None)


def _en_month(m: re.Match[str], reading: _Reading) -> _Span | None:
    relation, month, today = fold(m[1]), month_number(m[2]), reading.today
    if relation == "this":
        return _month(today.year, month)
    if relation == "last":
        return _month(today.year - (month >= today.month), month)
    if relation == "next":
        return _month(today.year + (month <= today.month), month)
    return _month_alone(month, reading, m.start()) if reading.calendar else None


def _month_named(month: int, year: str | None, m: re.Match[str], reading: _Reading) -> _Span | None:
    """A month named with its year, or without one as :func:`_month_alone` reads it."""
    if year:
        return _month(int(year), month)
    return _month_alone(month, reading, m.start()) if reading.calendar else None


def _part(span: _Span | None, part: str) -> _Span | None:
    """The days of a month's part (:data:`MONTH_PARTS`)."""
    if span is None:
        return None
    _, first, after = span
    begin, end = MONTH_PARTS[part]
    return "days", first.replace(day=begin), after if end is None else first.replace(day=end)


def _nth(span: _Span | None, ordinal: str, unit: Literal["week", "weekend"]) -> _Span | None:
    """The n-th week of a month (days 8 to 14 for the second; the last seven days for the last) or its
    n-th weekend (its n-th Saturday and the Sunday after), :data:`ORDINALS`."""
    if span is None:
        return None
    _, first, after = span
    n = ORDINALS[ordinal]
    if unit == "week":
        start = after - timedelta(days=7) if n < 0 else first + timedelta(days=7 * (n - 1))
        return "week", start, start + timedelta(days=7)
    if n < 0:
        last = after - timedelta(days=1)
        saturday = last - timedelta(days=(last.weekday() - 5) % 7)
    else:
        saturday = first + timedelta(days=(5 - first.weekday()) % 7, weeks=n - 1)
    return "weekend", saturday, saturday + timedelta(days=2)


def _en_part(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _part(_month_named(month_number(m[3]), m[4], m, reading), fold(m[1] or m[2]))


def _en_nth(m: re.Match[str], reading: _Reading) -> _Span | None:
    unit: Literal["week", "weekend"] = "weekend" if fold(m[2]) == "weekend" else "week"
    return _nth(_month_named(month_number(m[3]), m[4], m, reading), fold(m[1]), unit)


def _ja_part(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _part(_month_named(count_of(m[2]), m[1], m, reading), m[3])


def _ja_nth(m: re.Match[str], reading: _Reading) -> _Span | None:
    ordinal = m[3] or "最終"
    return _nth(_month_named(count_of(m[2]), m[1], m, reading), ordinal, "week")


def _en_week_before(m: re.Match[str], reading: _Reading) -> _Span | None:
    """"the week before 16 November 2023": the seven days before that day."""
    day = _en_month_day(m[2], m[1], m[3], m, reading) if m[1] else _en_month_day(m[4], m[5], m[6], m, reading)
    if day is None:
        return None
    return "week", day[1] - timedelta(days=7), day[1]


def _en_year(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _year(int(m[1]))


def _en_season(m: re.Match[str], reading: _Reading) -> _Span | None:
    relation = {"this": "this", "next": "next"}.get(fold(m[1]), "last")
    return _season_of(SEASONS[fold(m[2])], relation, reading.today)


def _en_season_year(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _season(SEASONS[fold(m[1])], int(m[2]))


def _ja_season(m: re.Match[str], reading: _Reading) -> _Span | None:
    first_month = SEASONS[m[5]]
    if m[1] == "この":
        return _season_of(first_month, "this", reading.today)
    if m[1] in _YEAR_WORDS_JA:
        return _season(first_month, reading.today.year + _YEAR_WORDS_JA[m[1]])
    return _season(first_month, int(m[2]) if m[2] else _era_year(m[3], m[4]))


def _relative(relative: RelativeDate) -> Callable[[re.Match[str], _Reading], _Span | None]:
    def resolve(m: re.Match[str], reading: _Reading) -> _Span | None:
        unit, offset, today = relative.unit, relative.offset, reading.today
        return unit, span_start(unit, offset, today), span_end(unit, offset, today) + timedelta(days=1)

    return resolve


def _weekday(m: re.Match[str], relation: str, weekday: int, reading: _Reading) -> _Span | None:
    if relation == "on" and not reading.weekdays:
        return None
    return _day(weekday_date(weekday, relation, reading.today, reading.past(m.start())))


def _en_weekday(m: re.Match[str], reading: _Reading) -> _Span | None:
    relation = WEEKDAY_RELATIONS_EN[fold(m[1])] if m[1] else "on"
    return _weekday(m, relation, WEEKDAYS.index(fold(m[2])), reading)


def _ja_weekday(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _weekday(m, WEEKDAY_RELATIONS_JA.get(m[1] or "", "on"), WEEKDAYS_JA.index(m[2]), reading)


def _counted(unit: Unit, count: int, today: date, later: bool) -> _Span:
    """"three days ago" (or "in three days", 三日後 when ``later``): a day, or the month or year."""
    if unit in ("day", "week"):
        days = count * (7 if unit == "week" else 1)
        return _day(today + timedelta(days=days if later else -days))
    if unit == "month":
        start = span_start("month", count, today) if later else ago("month", count, today)
        return _month(start.year, start.month)
    return _year(today.year + count if later else ago("year", count, today).year)


def _ago(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _counted(AGO_UNITS[fold(m[2])], count_of(m[1]), reading.today, later=False)


def _later(m: re.Match[str], reading: _Reading) -> _Span | None:
    return _counted(AGO_UNITS[fold(m[2])], count_of(m[1]), reading.today, later=True)


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], _Reading], _Span | None]]

#: The patterns of the words that say when, each with what it means. Where several match, the one
#: that starts first wins, and of those the longest ("先週の金曜日" over "先週", "去年の冬" over "去年").
_RULES: tuple[_Rule, ...] = (
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), _iso),
    (re.compile(rf"{_ERA}(?:({_N})月(?:({_N})日)?)?"), _ja_era),
    (re.compile(rf"(?<!\d)(\d{{4}})年(?:({_N})月(?:({_N})日)?)?"), _ja_year),
    (re.compile(rf"(?<![\d年{_K}])({_N})月({_N})日"), _ja_month_day),
    (re.compile(rf"(?<![\d年{_K}])({_N})月(?![\d{_K}日曜前後間])"), _ja_month),
    (re.compile(rf"(?:(\d{{4}})年)?(?<![\d{_K}])({_N})月の?({'|'.join(p for p in MONTH_PARTS if not p.isascii())})"), _ja_part),
    (re.compile(rf"(?:(\d{{4}})年)?(?<![\d{_K}])({_N})月の?(?:第([1-4一二三四])|最終)週"), _ja_nth),
    (
        re.compile(
            rf"\b(?:the\s+)?(?:(beginning|start|middle|end)\s+of|(early|mid|late)[\s-]+)\s*{_MONTH_EN}\b"
            rf"(?:,?\s+(\d{{4}})\b)?",
            _I,
        ),
        _en_part,
    ),
    (
        re.compile(
            rf"\b(?:the\s+)?({'|'.join(o for o in ORDINALS if o.isascii() and not o.isdigit())})\s+(week|weekend)\s+"
            rf"of\s+{_MONTH_EN}\b(?:,?\s+(\d{{4}})\b)?",
            _I,
        ),
        _en_nth,
    ),
    (
        re.compile(
            rf"\b(?:the\s+)?week\s+(?:before|prior\s+to)\s+(?:(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_EN}"
            rf"(?:,?\s+(\d{{4}}))?|{_MONTH_EN}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?)\b",
            _I,
        ),
        _en_week_before,
    ),
    (re.compile(rf"\b{_MONTH_EN}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?", _I), _en_mdy),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_EN}\b(?:,?\s+(\d{{4}})\b)?", _I), _en_dmy),
    (re.compile(rf"\b{_MONTH_EN}\s+(?:of\s+)?(\d{{4}})\b", _I), _en_month_year),
    (
        re.compile(
            rf"\b(in|of|since|during|until|by|last|this|next|early|mid|late)[\s-]+{_MONTH_EN}\b(?!\.?,?\s+(?:of\s+)?\d)",
            _I,
        ),
        _en_month,
    ),
    (re.compile(r"\b(?:in|since|during|until|by|of)\s+(\d{4})\b(?![-/.]\d)", _I), _en_year),
    (re.compile(rf"\b(last|this|next|this past|past)\s+({_SEASON_EN})\b", _I), _en_season),
    (re.compile(rf"\b({_SEASON_EN})\s+(?:of\s+)?(\d{{4}})\b", _I), _en_season_year),
    (
        re.compile(rf"({'|'.join(_YEAR_WORDS_JA)}|この|(\d{{4}})年|{_ERA})の?([{_SEASON_JA}])"),
        _ja_season,
    ),
    *(
        (re.compile("|".join(relative_word_pattern(w, r.inside_words) for w in r.words), _I), _relative(r))
        for r in RELATIVE_DATES
        if r.dated
    ),
    (
        re.compile(rf"(?<!every )\b(?:({'|'.join(WEEKDAY_RELATIONS_EN)})\s+)?({'|'.join(WEEKDAYS)})\b", _I),
        _en_weekday,
    ),
    (
        re.compile(rf"(?<!毎週)(?<!毎)({'|'.join(WEEKDAY_RELATIONS_JA)})?([{WEEKDAYS_JA}])曜(?:日)?"),
        _ja_weekday,
    ),
    (re.compile(rf"(?<![\d,.])\b({_COUNT_EN})\s+({_UNITS_EN})s?\s+ago\b", _I), _ago),
    (re.compile(rf"(?<![0-9{_K}])([0-9]{{1,3}}|[{_K}]{{1,4}})({_UNITS_JA})前"), _ago),
    (re.compile(rf"\bin\s+({_COUNT_EN})\s+({_UNITS_EN})s?\b(?!\s+ago)", _I), _later),
    (re.compile(rf"(?<![0-9{_K}])([0-9]{{1,3}}|[{_K}]{{1,4}})({_UNITS_JA})後"), _later),
)

# --------------------------------------------------------------------------------------------
# Tense
# --------------------------------------------------------------------------------------------

#: Said of what is to come ("will", "going to", 予定): the tense rule reads it as not past.
_FUTURE_EN = re.compile(
    r"\b(?:will|shall|going to|gonna|plan(?:ning)? to|want to|hope to|intend to|about to)\b|'ll\b", _I
)
#: An English past tense: a common irregular past or a regular "-ed" form.
_PAST_EN = re.compile(
    r"\b(?:was|were|had|did|got|went|came|saw|met|made|took|left|bought|ate|began|ran|flew|drove|spent|"
    r"found|gave|told|said|heard|felt|kept|lost|won|wrote|sent|\w{2,}[^e\W]ed)\b",
    _I,
)
#: "-ed" forms that say how someone is ("I'm excited", "so tired"), not what happened.
_STATE_EN = re.compile(
    r"(?:'m|'re|'s|\b(?:am|is|are|be|been|being|so|very|really|feel|feeling|get|getting))\s+\w+ed\b", _I
)
#: The verbs in 〜ぐ whose past ends in いだ (泳いだ, 急いだ, 脱いだ): a kanji before いだ is no past
#: otherwise (嫌いだ, 幸いだ: an adjective or a noun with だ).
_GU_VERBS = "泳急脱継嗅稼騒防注繋仰剥漕研塞凌担跨嫁紡"
#: A Japanese sentence that ends in a past form (行った, 行きました, でした, 楽しかったです, 読んだ, 楽しんだ, 泳いだ).
#: "I've got", "she has got": what someone has, not what happened.
HAVE_GOT = re.compile(r"(?:'ve|'s|\b(?:have|has))\s+got\b", _I)
_PAST_JA = re.compile(
    rf"(?:た|ました|でした|かったです|[\u4e00-\u9fff]し?んだ|[{_GU_VERBS}]いだ)(?:んです|んだ|よ|ね|の|な|わ|けど)*$"
)
_FUTURE_JA = re.compile(r"予定|つもり|たい$|ます$|ましょう")
_SENTENCE_END = re.compile(r"[。．.!?！？\n]")
_TRAILING = re.compile(r"[\s。．.!?！？、,」』）)]+$")


def said_of_past(sentence: str) -> bool:
    """Whether a sentence reports something that happened (its tense).

    Japanese: it ends in a past form (〜た, 〜ました, 〜でした, 読んだ, 泳いだ; not 嫌いだ) and says no plan (予定, つもり). English:
    it has a past tense ("went", "visited"; not "I've got", what someone has) and no word of what is to
    come ("will", "going to").

    Args:
        sentence: One sentence.

    Returns:
        ``True`` for the past, ``False`` for the present or the future.
    """
    if JAPANESE_SCRIPT.search(sentence):
        core = _TRAILING.sub("", sentence)
        return bool(_PAST_JA.search(core)) and not _FUTURE_JA.search(core)
    present = HAVE_GOT.sub(" ", _STATE_EN.sub(" ", sentence))
    return not _FUTURE_EN.search(sentence) and bool(_PAST_EN.search(present))


def _sentence_at(text: str, position: int) -> str:
    """The sentence of ``text`` that ``position`` is in."""
    starts = [m.end() for m in _SENTENCE_END.finditer(text, 0, position)]
    end = _SENTENCE_END.search(text, position)
    return text[starts[-1] if starts else 0 : end.start() if end else len(text)]


# --------------------------------------------------------------------------------------------
# The resolver
# --------------------------------------------------------------------------------------------


def _found(text: str, reading: _Reading) -> Iterator[tuple[int, int, _Span]]:
    for pattern, meaning in _RULES:
        for match in pattern.finditer(text):
            span = meaning(match, reading)
            if span is not None:
                yield match.start(), match.end(), span


def _instant(day: date, zone: tzinfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


def event_time(
    text: str,
    now: datetime,
    *,
    tz: tzinfo | None = None,
    past: bool | None = None,
    weekdays: bool = True,
    calendar: bool = True,
) -> EventTime | None:
    """The event time a statement states, resolved against when it was said.

    Absolute dates (2026-03-14, "March 14, 2026", "14 March", 2026年3月14日, 3月14日, 2026年3月, 令和8年,
    平成31年4月), months ("in March", "March 2026", "last March"), years ("in 2019"), weekdays ("on
    Friday", "last Friday", "next Friday", 金曜日, 先週の金曜日, 来週の月曜), relative words (yesterday,
    tomorrow, today, last/this/next week|weekend|month|year, 昨日, 明日, 先週, 来月, 再来週, 去年, 一昨年),
    counted words ("three days ago", "in two weeks", 3日前, 二週間後) and seasons ("this summer", "last
    winter", "summer 2025", 去年の冬, 今年の夏, この春). The first date words in the text decide (the
    longest of those that start there); words that name no date that exists (2月30日) are passed over.

    Args:
        text: A statement in the user's words (English or Japanese).
        now: When it was said (timezone-aware).
        tz: The calendar "today" is read in (the user's timezone); ``None`` reads it in ``now``'s own
            timezone (a turn's time is UTC).
        past: The statement reports something that happened; ``None`` decides by the tense of the
            sentence the words are in (:func:`said_of_past`).
        weekdays: A bare weekday ("on Friday", 「金曜に」) names a date (not for "my class moved to
            Thursday", which names a weekday).
        calendar: A month and day (or a month) without a year names a date (not for a date that comes
            back every year: a birthday).

    Returns:
        The span (start inclusive, end exclusive, both UTC), or ``None`` when the text states no time.

    Raises:
        ValueError: ``now`` has no timezone.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware (a UTC turn time, or one with its offset)")
    zone = tz or now.tzinfo
    assert zone is not None
    local = now.astimezone(zone)

    def tense(position: int) -> bool:
        return past if past is not None else said_of_past(_sentence_at(text, position))

    reading = _Reading(today=local.date(), past=tense, weekdays=weekdays, calendar=calendar)
    found = min(_found(text, reading), key=lambda f: (f[0], f[0] - f[1]), default=None)
    if found is None:
        return None
    start, end, (unit, first, after) = found
    return EventTime(start=_instant(first, zone), end=_instant(after, zone), unit=unit, words=text[start:end])
