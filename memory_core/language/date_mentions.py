"""Dates, times, weekdays, relative date words and numbers in a (normalized) statement, as canonical
tokens ("date:-5-3", "time:10:00", "day:mon", "rel:w+1", "abs:2026-5-4/week"), so that two statements
can be compared by when they say and how many."""

from __future__ import annotations

import re
from collections.abc import Callable

from memory_core.language.dates import (
    KANJI_DIGITS,
    MONTHS,
    RELATIVE_DATES,
    WEEKDAYS,
    WEEKDAYS_JA,
    RelativeDate,
)

__all__ = ["kanji_counts_as_digits", "take_dates", "take_numbers"]

_MONTH_NUMBERS = {name: number for number, name in enumerate(MONTHS, start=1)}
_MONTH_NAMES = "|".join(MONTHS)


def _relative_token(relative: RelativeDate) -> str:
    """``d-1`` for yesterday, ``w+1`` for next week, ``weekend`` / ``weekend+1`` for (next) weekend."""
    if relative.unit == "weekend":
        return "weekend" if relative.offset == 0 else f"weekend{relative.offset:+d}"
    return f"{relative.unit[0]}{relative.offset:+d}"


#: The relative date words statements are compared by, with their tokens.
_RELATIVE = {word: _relative_token(r) for r in RELATIVE_DATES if r.compared for word in r.words}
_RELATIVE_RX = re.compile(
    "|".join(
        re.escape(k) if not k.isascii() else rf"\b{re.escape(k)}\b"
        for k in sorted(_RELATIVE, key=len, reverse=True)
    )
)
_WEEKDAY_JA_RX = re.compile(rf"([{WEEKDAYS_JA}])曜(?:日)?")
_WEEKDAY_EN_RX = re.compile(r"\b(" + "|".join(WEEKDAYS) + r")s?\b")
_DATE_ISO_RX = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_DATE_JA_RX = re.compile(r"(?:(\d{4})年)?(\d{1,2})月(?:(\d{1,2})日)?")
_DATE_EN_RX = re.compile(
    rf"\b({_MONTH_NAMES})\s*(\d{{1,2}})?(?:st|nd|rd|th)?\b|\b(\d{{1,2}})(?:st|nd|rd|th)?\s+of\s+({_MONTH_NAMES})\b"
)
_TIME_JA_RX = re.compile(r"(午前|午後)?(\d{1,2})時(?:(半)|(\d{1,2})分)?")
_TIME_EN_RX = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|\b(\d{1,2}):(\d{2})\b")
#: An absolute date written after a relative one: "(30 april 2026)", "(week of 4 may 2026)", "(2026年5月)".
_ANNOTATION_RX = re.compile(
    rf"\((?:(week|weekend) of )?(?:(\d{{1,2}}) )?(?:({_MONTH_NAMES}) )?(\d{{4}})\)|"
    r"\((\d{4})年(?:(\d{1,2})月(?:(\d{1,2})日)?)?(?:の(週末|週))?\)"
)
_NUMBER_RX = re.compile(r"\d+(?:\.\d+)?")
#: A kanji digit before a counter (二匹, 三人, 一つ).
_KANJI_COUNT_RX = re.compile(rf"([{KANJI_DIGITS}])(?=[人匹頭歳才回杯冊台本枚つ])")


def _annotation_token(match: re.Match[str]) -> str:
    if match[4] is not None:  # English: (week of 4 may 2026), (30 april 2026), (october 2026), (2025)
        unit = match[1] or ("day" if match[2] else "month" if match[3] else "year")
        month = _MONTH_NUMBERS[match[3]] if match[3] else 0
        return f"abs:{match[4]}-{month}-{match[2] or 0}/{unit}"
    unit = {"週": "week", "週末": "weekend"}.get(
        match[8] or "", "day" if match[7] else "month" if match[6] else "year"
    )
    return f"abs:{match[5]}-{int(match[6] or 0)}-{int(match[7] or 0)}/{unit}"


def _iso_date_token(match: re.Match[str]) -> str:
    return f"date:{int(match[1])}-{int(match[2])}-{int(match[3])}"


def _time_ja_token(match: re.Match[str]) -> str:
    hour = int(match[2])
    if match[1] == "午後" and hour < 12:
        hour += 12
    minute = 30 if match[3] else int(match[4] or 0)
    return f"time:{hour:02d}:{minute:02d}"


def _time_en_token(match: re.Match[str]) -> str:
    if match[4] is not None:
        return f"time:{int(match[4]):02d}:{int(match[5]):02d}"
    hour = int(match[1]) % 12
    if match[3].startswith("p"):
        hour += 12
    return f"time:{hour:02d}:{int(match[2] or 0):02d}"


def _date_ja_token(match: re.Match[str]) -> str:
    return f"date:{match[1] or ''}-{int(match[2])}-{match[3] or ''}"


def _date_en_token(match: re.Match[str]) -> str:
    if match[1] is not None:
        return f"date:-{_MONTH_NUMBERS[match[1]]}-{match[2] or ''}"
    return f"date:-{_MONTH_NUMBERS[match[4]]}-{match[3]}"


def _weekday_ja_token(match: re.Match[str]) -> str:
    return f"day:{WEEKDAYS[WEEKDAYS_JA.index(match[1])][:3]}"


def _weekday_en_token(match: re.Match[str]) -> str:
    return f"day:{match[1][:3]}"


def _relative_date_token(match: re.Match[str]) -> str:
    return f"rel:{_RELATIVE[match[0]]}"


#: What is taken out of a statement after its annotations, in this order, with the token of each.
_MENTIONS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_DATE_ISO_RX, _iso_date_token),
    (_TIME_JA_RX, _time_ja_token),
    (_TIME_EN_RX, _time_en_token),
    (_DATE_JA_RX, _date_ja_token),
    (_DATE_EN_RX, _date_en_token),
    (_WEEKDAY_JA_RX, _weekday_ja_token),
    (_WEEKDAY_EN_RX, _weekday_en_token),
    (_RELATIVE_RX, _relative_date_token),
)


def _take(pattern: re.Pattern[str], token: Callable[[re.Match[str]], str], text: str, when: list[str]) -> str:
    """``text`` with each match of ``pattern`` replaced by a space, its token appended to ``when``."""

    def taken(match: re.Match[str]) -> str:
        when.append(token(match))
        return " "

    return pattern.sub(taken, text)


def take_dates(text: str) -> tuple[str, list[str]]:
    """``text`` (normalized) with its dates, times, weekdays and relative date words replaced by spaces,
    and their tokens in the order they were taken. A relative word that has its absolute date written
    after it ("next week (week of 4 may 2026)") gives no token of its own: the date says it, on any day
    the statement is read."""
    when: list[str] = []
    text = _take(_ANNOTATION_RX, _annotation_token, text, when)
    absolute = bool(when)
    for pattern, token in _MENTIONS:
        text = _take(pattern, token, text, when)
    if absolute:
        when = [w for w in when if not w.startswith("rel:")]
    return text, when


def take_numbers(text: str) -> tuple[str, list[str]]:
    """``text`` with its numbers replaced by spaces, and the numbers, sorted (as text)."""
    return _NUMBER_RX.sub(" ", text), sorted(_NUMBER_RX.findall(text))


def kanji_counts_as_digits(text: str) -> str:
    """``text`` with a kanji digit before a counter written in digits (猫を二匹 → 猫を2匹)."""
    return _KANJI_COUNT_RX.sub(lambda m: str(KANJI_DIGITS.index(m[1]) + 1), text)
