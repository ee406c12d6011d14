"""Memory extraction: from one conversation turn to memory candidates.

Two paths produce the same :class:`~memory_core.models.MemoryCandidate` objects:

* **LLM path** (a :class:`~memory_core.ports.ChatModel` is configured): the prompt of
  :mod:`memory_core.prompts.extraction`, answered as structured output and validated. An invalid
  answer is asked again (bounded); a candidate in another script than the user's sentence counts as
  invalid (Japanese stays Japanese).
* **Rule path** (:func:`extract_with_rules`): deterministic Japanese and English patterns, one
  sentence per candidate, only from user messages.

Fallback policy: when the LLM path cannot produce a valid answer — invalid answers after the retries,
a :class:`~memory_core.errors.TransientError` that survived the model's own transport retries, or a
:class:`~memory_core.errors.PermanentError` — the extractor uses the rule path and records why in
:attr:`ExtractionResult.fallback_reason`, so ingestion never stalls on the model. Set
``on_transient="raise"`` to let a transient failure propagate instead (the queue redelivers the turn and
the LLM path gets another chance).

Both paths first remove recall blocks (see :func:`~memory_core.prompts.strip_recalled_memories`).

Rule categories: ``constraint`` (allergies, diets, things the user cannot do or avoids), ``preference``
(likes and dislikes), ``plan`` (dated intentions; these expire), ``routine`` (recurring needs),
``profile`` (who the user is) and ``general`` (explicit "remember that ..." without a better category).
The first matching category in that order wins.

Expiry: a date word (明日, 来週, 来月, tomorrow, next week, on Friday, ...) is resolved against the
turn's ``occurred_at`` (UTC) to the last day the plan is relevant; the memory expires at the end of
that day plus one day of grace, because a turn carries no time zone and a plan must not expire before
its local day has ended anywhere (see :func:`resolve_date_word` and :func:`expiry_after`).
"""

from __future__ import annotations

import calendar
import logging
import re
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from .errors import PermanentError, TransientError, ValidationError
from .models import CONTROL_CHARACTERS, CandidateKind, MemoryCandidate, MessageRole, Turn, ensure_utc
from .ports import ChatModel, Clock, SystemClock
from .prompts.extraction import (
    ExtractedMemory,
    ExtractionOutput,
    build_extraction_system_prompt,
    build_extraction_user_prompt,
    strip_recalled_memories,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_IMPORTANCE",
    "LLM_SOURCE",
    "RULE_SOURCE",
    "ExtractionResult",
    "MemoryExtractor",
    "expiry_after",
    "extract_with_rules",
    "resolve_calendar_date",
    "resolve_date_word",
    "split_sentences",
]

logger = logging.getLogger(__name__)

DEFAULT_IMPORTANCE = 0.65
DEFAULT_CONFIDENCE = 0.55
RULE_SOURCE = "rule-fallback"
LLM_SOURCE = "llm"
#: Sentences longer than this are not turned into rule candidates (pasted text, not a statement).
MAX_RULE_SENTENCE_CHARS = 400
#: At most this many candidates per turn, on either path.
MAX_CANDIDATES = 20


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What extraction found in one turn and how.

    Attributes:
        candidates: Facts and forget requests, in the order they were said.
        path: ``"llm"`` when the chat model's answer was used, ``"rules"`` otherwise.
        fallback_reason: Why the rule path was used although a chat model is configured (``None``
            when the LLM path succeeded or no model is configured).
        attempts: Chat model calls made (0 on the pure rule path).
    """

    candidates: list[MemoryCandidate]
    path: Literal["llm", "rules"]
    fallback_reason: str | None = None
    attempts: int = 0


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------

_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "prof", "jr", "sr", "vs", "etc", "e.g", "i.e", "approx", "no"}
)


def _is_abbreviation(before: str) -> bool:
    match = re.search(r"([A-Za-z][A-Za-z.]*)$", before)
    if not match:
        return False
    word = match.group(1).rstrip(".").lower()
    return word in _ABBREVIATIONS or len(word) == 1 or "." in word


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping each sentence's closing punctuation.

    Sentences end at ``。！？!?``, at a newline, and at ``.`` followed by whitespace or the end of the
    text. A ``.`` between digits (``3.5``) never ends a sentence, nor does one after a single letter
    or a common abbreviation (``Dr.``, ``e.g.``). Fenced code blocks and quoted lines (``> ...``) are
    dropped: they are not the user's own statements.

    Args:
        text: A message text.

    Returns:
        Non-empty, stripped sentences in order.
    """
    text = _FENCED_CODE.sub("\n", text)
    sentences: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith(">"):
            continue
        start = 0
        i = 0
        while i < len(line):
            ch = line[i]
            end_here = False
            if ch in "。！？!?":
                end_here = True
            elif ch == "." and (i + 1 == len(line) or line[i + 1].isspace()):
                end_here = not _is_abbreviation(line[start:i])
            if end_here:
                # Keep runs of closing punctuation ("?!", "。」") with the sentence.
                while i + 1 < len(line) and line[i + 1] in "。！？!?.」』）)\"'”":
                    i += 1
                piece = line[start : i + 1].strip()
                if piece:
                    sentences.append(piece)
                start = i + 1
            i += 1
        rest = line[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------

_WEEKDAYS_EN = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
}
_WEEKDAYS_JA = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}

# Ordered: longer and more specific words first.
_DATE_WORDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"明後日|あさって|day after tomorrow", re.IGNORECASE), "day-after-tomorrow"),
    (re.compile(r"明日|あした|tomorrow", re.IGNORECASE), "tomorrow"),
    (re.compile(r"再来週|week after next", re.IGNORECASE), "week-after-next"),
    (re.compile(r"来週末|next weekend", re.IGNORECASE), "next-weekend"),
    (re.compile(r"今週末|this weekend", re.IGNORECASE), "this-weekend"),
    (re.compile(r"来週|next week", re.IGNORECASE), "next-week"),
    (re.compile(r"今週|this week", re.IGNORECASE), "this-week"),
    (re.compile(r"再来月|month after next", re.IGNORECASE), "month-after-next"),
    (re.compile(r"来月|next month", re.IGNORECASE), "next-month"),
    (re.compile(r"今月|this month", re.IGNORECASE), "this-month"),
    (re.compile(r"来年|next year", re.IGNORECASE), "next-year"),
    (re.compile(r"今年|this year", re.IGNORECASE), "this-year"),
    (
        re.compile(
            r"\b(?:on|this|next|coming)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
            re.IGNORECASE,
        ),
        "weekday-en",
    ),
    (re.compile(r"(?:今度の|次の|来週の)?([月火水木金土日])曜(?:日)?(?:に|は|の)"), "weekday-ja"),
]


def _end_of_month(day: date) -> date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def _add_months(day: date, months: int) -> date:
    month_index = day.month - 1 + months
    return date(day.year + month_index // 12, month_index % 12 + 1, 1)


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
    monday = reference - timedelta(days=reference.weekday())
    if word == "tomorrow":
        return reference + timedelta(days=1)
    if word == "day-after-tomorrow":
        return reference + timedelta(days=2)
    if word == "this-week":
        return monday + timedelta(days=6)
    if word == "next-week":
        return monday + timedelta(days=13)
    if word == "week-after-next":
        return monday + timedelta(days=20)
    if word == "this-weekend":
        return monday + timedelta(days=6)
    if word == "next-weekend":
        return monday + timedelta(days=13)
    if word == "this-month":
        return _end_of_month(reference)
    if word == "next-month":
        return _end_of_month(_add_months(reference, 1))
    if word == "month-after-next":
        return _end_of_month(_add_months(reference, 2))
    if word == "this-year":
        return date(reference.year, 12, 31)
    if word == "next-year":
        return date(reference.year + 1, 12, 31)
    if word == "weekday":
        if weekday is None or not 0 <= weekday <= 6:
            raise ValueError("weekday must be 0 (Monday) to 6 (Sunday)")
        ahead = (weekday - reference.weekday()) % 7 or 7
        return reference + timedelta(days=ahead)
    raise ValueError(f"unknown date word {word!r}")


def expiry_after(last_day: date) -> datetime:
    """When a memory about ``last_day`` expires: the end of that day (UTC) plus one day of grace."""
    return datetime(last_day.year, last_day.month, last_day.day, tzinfo=UTC) + timedelta(days=2)


_MONTHS_EN = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_EN = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_CALENDAR_JA = re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})日")
_CALENDAR_EN_MD = re.compile(
    rf"\b{_MONTH_EN}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", re.IGNORECASE
)
_CALENDAR_EN_DM = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_EN}\b(?:,?\s+(\d{{4}}))?", re.IGNORECASE
)


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


def _find_calendar_date(sentence: str, reference: date) -> date | None:
    match = _CALENDAR_JA.search(sentence)
    if match:
        year = int(match.group(1)) if match.group(1) else None
        return resolve_calendar_date(int(match.group(2)), int(match.group(3)), reference, year)
    match = _CALENDAR_EN_MD.search(sentence)
    if match:
        month = _MONTHS_EN[match.group(1)[:3].lower()]
        year = int(match.group(3)) if match.group(3) else None
        return resolve_calendar_date(month, int(match.group(2)), reference, year)
    match = _CALENDAR_EN_DM.search(sentence)
    if match:
        month = _MONTHS_EN[match.group(2)[:3].lower()]
        year = int(match.group(3)) if match.group(3) else None
        return resolve_calendar_date(month, int(match.group(1)), reference, year)
    return None


def _find_date(sentence: str, reference: date) -> date | None:
    calendar_date = _find_calendar_date(sentence, reference)
    if calendar_date is not None:
        return calendar_date
    for pattern, word in _DATE_WORDS:
        match = pattern.search(sentence)
        if not match:
            continue
        if word == "weekday-en":
            return resolve_date_word("weekday", reference, _WEEKDAYS_EN[match.group(1).lower()])
        if word == "weekday-ja":
            return resolve_date_word("weekday", reference, _WEEKDAYS_JA[match.group(1)])
        return resolve_date_word(word, reference)
    return None


# --------------------------------------------------------------------------------------------
# Rule patterns
# --------------------------------------------------------------------------------------------


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_QUESTION_JA_END = (
    "ですか",
    "ますか",
    "でしょうか",
    "ませんか",
    "のか",
    "んか",
    "かな",
    "かしら",
    "だろうか",
)
_QUESTION_EN_START = _rx(
    r"^(?:do|does|did|can|could|would|will|should|shall|is|are|am|was|were|have|has|may|might)\s+"
    r"(?:you|we|i|it|there|they|he|she)\b"
)
_REQUEST = _rx(
    r"(?:ください|下さい|くださいね|してほしい|して欲しい|お願い|おねがい|教えて|調べて|探して|予約して|"
    r"おすすめは|オススメは)\s*[。！!]?$|^(?:please|pls|can you|could you|would you|will you|let'?s|"
    r"tell me|show me|find me|book|help me|recommend)\b"
)
_SMALL_TALK = _rx(r"ありがと|thank|thanks|こんにちは|こんばんは|おはよう|^hi\b|^hello\b|^hey\b|^ok\b|^okay\b")
_TRANSIENT = _rx(
    r"今日|今夜|今朝|今は|今、|いまは|さっき|ただいま|\btoday\b|\btonight\b|\bright now\b|\bat the moment\b|"
    r"\bthis morning\b|\bjust now\b"
)
_FIRST_PERSON_EN = _rx(r"\b(?:i|i'm|i've|i'd|i'll|my|me|we|we're|our)\b")

_CONSTRAINT = _rx(
    r"アレルギー|食べられない|食べられません|飲めない|飲めません|乗れない|乗れません|避けたい|避けて(?:い|る)|"
    r"控えて(?:い|る)|ベジタリアン|ヴィーガン|ビーガン|菜食|車椅子|車いす|禁酒|"
    r"(?:が|は)(?:ダメ|だめ|NG)(?:です|だ|なんです)?|"
    r"できない|できません|出来ない|出来ません|"
    r"\ballerg(?:y|ic)\b|\bi (?:can't|cannot|can not|am unable to|must not|mustn't|should not|shouldn't)\b|"
    r"\bi'm unable to\b|\bi avoid\b|\bi (?:don't|do not|never) (?:eat|drink)\b|"
    r"\bvegetarian\b|\bvegan\b|\bgluten[- ]free\b|\blactose intolerant\b|\bceliac\b|\bkosher\b|\bhalal\b|"
    r"\bwheelchair\b|\bi'm (?:diabetic|pregnant)\b|\bmy budget\b|\bi'm afraid of\b|\bphobia\b|"
    r"予算は|恐怖症|高所恐怖"
)
_CONSTRAINT_EXCLUDE = _rx(
    r"\bcan't (?:wait|believe|remember|decide|stop)\b|待ちきれない|信じられない|我慢できない"
)
_PREFERENCE = _rx(
    r"大好き|好き|嫌い|きらい|苦手|好み|気に入って|お気に入り|愛用|派(?:です|だ|なんです)|"
    r"\bi (?:really |absolutely |just |do )?(?:like|love|prefer|enjoy|hate|dislike|adore|detest)\b|"
    r"\bi (?:can't|cannot) stand\b|\bmy (?:favou?rite|preferred)\b|\bi'm (?:a (?:big |huge )?)?fan of\b|"
    r"\bi'm not (?:a )?fan of\b|\bi'd rather\b|\bi would rather\b|\bnot a fan of\b|"
    r"\bi (?:really |just )?(?:don't|do not|never) (?:like|love|enjoy|care for)\b|"
    r"\bi'm (?:not )?(?:really |so |very )?into\b|"
    r"(?<!それ)(?<!これ)(?<!あれ)(?<!どれ)(?<!そっち)(?<!こっち)(?:が|の方が|のほうが)(?:いい|良い)(?:です|な|んです)?$"
)
#: Reactions to what the assistant just said ("I like it", "それが好き") are not durable facts.
_PRONOUN_REACTION = _rx(
    r"\b(?:like|love|hate|prefer|enjoy|dislike)s? (?:it|that|this|them|these|those|both)"
    r"(?: (?:a lot|very much|so much|too|more))?$|^(?:それ|これ|あれ|そっち|こっち|どっち)(?:が|は|も)"
)
_PLAN_INTENT = _rx(
    r"予定|つもり|会議|打ち合わせ|ミーティング|約束|予約|用事|ライブ|コンサート|行きます|行く|いく|行って(?:き|く)|旅行|出張|帰省|引っ越|参加|会います|会う|受けます|受ける|"
    r"始めます|始める|泊まり|泊まる|訪ね|向かい|向かう|飛び|出発|到着|発表|試験|面接|手術|結婚式|誕生日|"
    r"\bi(?:'m| am) (?:going|traveling|travelling|flying|visiting|moving|leaving|meeting|attending|"
    r"planning|starting|having|getting)\b|\bi (?:will|plan to|intend to|have to|need to|'ll|have an?|"
    r"have my|am going)\b|\bi'll\b|\bwe(?:'re| are| will|'ll) (?:going|traveling|travelling|flying|"
    r"visiting|moving|leaving|meeting|getting)\b|\bmy (?:trip|flight|meeting|appointment|exam|interview|"
    r"wedding|birthday|surgery|vacation|holiday)\b"
)
_ROUTINE = _rx(
    r"毎週|毎日|毎朝|毎晩|毎夜|毎月|毎年|いつも|普段|ふだん|たいてい|大抵|習慣|定期的|週に\s*[0-9一二三四五六七]|"
    r"月に\s*[0-9一二三四五六七]|[月火水木金土日]曜(?:日)?(?:は|に)?(?:いつも|毎回|必ず)|"
    r"\bevery (?:day|morning|evening|night|week|weekend|month|year|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday)\b|\busually\b|\balways\b|\boften\b|\btypically\b|\bregularly\b|"
    r"\btend to\b|\bon (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends)\b|"
    r"\b(?:once|twice|\d+ times) a (?:day|week|month|year)\b|\beach (?:day|morning|week|month)\b"
)
_PROFILE = _rx(
    r"^(?:私|わたし|僕|ぼく|俺|おれ|自分)(?:は|、).+(?:です|だ|でございます|やってます|しています|してます)$|"
    r"住んで|住まい|出身|勤めて|勤務|働いて|職業|仕事は|名前は|と申します|と言います|といいます|歳です|歳だ|"
    r"(?:子供|子ども|息子|娘|妻|夫|家族)(?:が|は)|飼って|話せます|話せる|"
    r"\bi live\b|\bi'm from\b|\bi am from\b|\bi (?:work|worked) (?:as|at|for|in)\b|\bmy name is\b|"
    r"\bcall me\b|\bi'm \d+\b|\bi am \d+\b|\bi(?:'m| am) an? (?!bit\b|little\b|lot\b|tad\b)\w+|"
    r"\bi have (?:a |an |two |three |\d+ )?(?:kids?|children|sons?|daughters?|dogs?|cats?|wife|husband|"
    r"partner|pets?)\b|\bmy (?:wife|husband|partner|son|daughter|kids|children|dog|cat|job|home)\b|"
    r"\bi speak\b|\bi was born\b|\bi grew up\b|\bi study\b|\bi'm studying\b"
)

# Forget requests ---------------------------------------------------------------------------------

#: The request forms of 忘れる ("忘れて", "忘れてください", "忘れていいよ"), not "忘れてた" / "忘れてない？".
_FORGET_JA = re.compile(r"^(?P<what>.*?)(?:(?:忘れて|わすれて)(?!ない|いな|しま|た|る|ません)|忘れろ)")
_FORGET_JA_TRAIL = re.compile(
    r"(?:って|と)?(?:前に|以前|さっき)?(?:言った|いった|話した|伝えた)?"
    r"(?:のこと|の件|の話|ということ|という話|って話|という件|こと|件|話|の)?(?:は|を|も)?\s*$"
)
_FORGET_JA_LEAD = re.compile(r"^(?:前に|以前|さっき|この前)?(?:言った|いった|話した|伝えた)")
_NO_LONGER_JA = re.compile(
    r"もう(?:、)?.+?(?:ではない|じゃない|ではありません|じゃありません|ではなくなり|じゃなくなっ|ではなくなっ|"
    r"ていない|ていません|でいない|でいません|てない|てません)"
)
_FORGET_EN = _rx(
    r"^(?:(?:please|pls|just|can you|could you|would you|you can|you may|go ahead and)\s+)*forget\s+(?:about\s+)?(?:that\s+|what\s+i\s+said\s+about\s+|"
    r"the\s+fact\s+that\s+)?(?P<what>.*)$"
)
_NO_LONGER_EN = _rx(r"\b(?P<subj>i|i'm|i am)\s+no longer\s+(?P<rest>.+)$")
_ANYMORE_EN = _rx(
    r"\b(?P<subj>i)\s+(?:don't|do not)\s+(?P<rest>.+?)\s+any\s?more\b|"
    r"\b(?P<subj2>i'm|i am)\s+not\s+(?P<rest2>.+?)\s+any\s?more\b"
)
_PRONOUN_ONLY = re.compile(
    r"^(?:それ|これ|あれ|さっきの|今の|その件|この件|that|this|it|everything)?$", re.IGNORECASE
)

_REMEMBER_EN = _rx(r"^(?:please\s+)?remember\s+(?:that\s+)?(?P<what>.+)$")
_REMEMBER_JA = re.compile(r"^(?P<what>.+?)(?:って|と|ことを|のを|を)?(?:覚えて(?:おいて|て)|記憶して)")

_LEAD_EN = _rx(
    r"^(?:(?:well|so|and|but|also|actually|oh|btw|by the way|just so you know|fyi|anyway|ok|okay|yeah|yes|no)"
    r"\s*,?\s+)+"
)
_I_THINK_EN = _rx(r"^i (?:think|guess|suppose|believe|feel like)(?: that)?\s+")
_LEAD_JA = re.compile(
    r"^(?:あと|それと|ちなみに|実は|じつは|えっと|えーと|あの|そういえば|ところで|なお|ただ|まあ|でも|やっぱり|やはり)"
    r"(?:、|,|\s)+"
)
_TRAILING_PUNCT = re.compile(r"[\s。．.！!？?、,」』）)\"'”]+$")
#: A date word followed by "from" starts a lasting state ("来月から大阪に住む"), not a temporary plan.
_STARTING = _rx(
    r"(?:来月|再来月|来年)から|以降|\bstarting (?:next|from next) (?:month|year)\b|\bfrom next (?:month|year)\b"
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _clean(sentence: str) -> str:
    """The candidate text of a sentence: discourse markers and closing punctuation removed."""
    text = sentence.strip()
    previous = None
    while previous != text:
        previous = text
        text = _LEAD_JA.sub("", text)
        text = _LEAD_EN.sub("", text)
        text = _I_THINK_EN.sub("", text)
    text = _TRAILING_PUNCT.sub("", text).strip()
    if text[:1].islower() and not _CJK.search(text[:1]):
        text = text[0].upper() + text[1:]
    if re.match(r"^i(?:\b|')", text):
        text = "I" + text[1:]
    return text


def _is_question(sentence: str) -> bool:
    stripped = sentence.rstrip()
    if stripped.endswith(("?", "？")):
        return True
    core = _TRAILING_PUNCT.sub("", stripped)
    if core.endswith(_QUESTION_JA_END):
        return True
    return bool(_QUESTION_EN_START.match(_LEAD_EN.sub("", core)))


def _forget_target(sentence: str, previous: str | None) -> str | None:
    """What an explicit forget request asks to forget, or ``None`` when it is not one."""
    core = _TRAILING_PUNCT.sub("", sentence.strip())
    core = _LEAD_JA.sub("", core)
    core = _LEAD_EN.sub("", core)

    match = _FORGET_JA.search(core)
    if match:
        what = _FORGET_JA_TRAIL.sub("", match.group("what")).strip(" 、,")
        what = _FORGET_JA_LEAD.sub("", what).strip(" 、,")
        what = re.sub(r"(?:って|と)(?:言った|いった|話した)?$", "", what).strip(" 、,")
        if _PRONOUN_ONLY.match(what):
            return _clean(previous) if previous else None
        return what

    match = _FORGET_EN.search(core)
    if match:
        what = match.group("what").strip()
        what = re.sub(r"^(?:i\s+(?:said|told you|mentioned)\s+(?:that\s+)?)", "", what, flags=re.IGNORECASE)
        what = re.sub(
            r"\s+(?:i\s+(?:said|told you|mentioned)(?:\s+(?:before|earlier))?)$",
            "",
            what,
            flags=re.IGNORECASE,
        )
        if _PRONOUN_ONLY.match(what.strip()):
            return _clean(previous) if previous else None
        return _clean(what)

    if _NO_LONGER_JA.search(core):
        text = re.sub(r"もう(?:、)?", "", core, count=1)
        text = re.sub(
            r"(?:ではなくなりました|ではなくなった|じゃなくなった|じゃなくなりました|ではありません|"
            r"じゃありません|ではない|じゃない)(?:です|よ|ね|な)*$",
            "",
            text,
        )
        text = re.sub(r"(?:ていません|ていない|てません|てない)(?:です|よ|ね)*$", "ている", text)
        text = re.sub(r"(?:でいません|でいない)(?:です|よ|ね)*$", "でいる", text)
        return text.strip(" 、,") or None

    match = _NO_LONGER_EN.search(core)
    if match:
        subject = "I'm" if match.group("subj").lower() in ("i'm", "i am") else "I"
        return f"{subject} {match.group('rest').strip()}"

    match = _ANYMORE_EN.search(core)
    if match:
        if match.group("subj"):
            return f"I {match.group('rest').strip()}"
        return f"I'm {match.group('rest2').strip()}"
    return None


def _classify(sentence: str) -> str | None:
    if _CONSTRAINT.search(sentence) and not _CONSTRAINT_EXCLUDE.search(sentence):
        return "constraint"
    if _PREFERENCE.search(sentence) and not _PRONOUN_REACTION.search(sentence):
        return "preference"
    if _ROUTINE.search(sentence):
        return "routine"
    if _PROFILE.search(sentence):
        return "profile"
    return None


def _rule_candidates_for_sentence(
    sentence: str, previous: str | None, reference: date
) -> MemoryCandidate | None:
    if len(sentence) > MAX_RULE_SENTENCE_CHARS:
        return None
    forget = _forget_target(sentence, previous)
    if forget is not None and not _TRAILING_PUNCT.sub("", forget).strip():
        return None  # nothing left to name what should be forgotten
    if forget is not None:
        if _is_question(sentence) and not re.search(r"忘れて|forget", sentence, re.IGNORECASE):
            return None
        return MemoryCandidate(
            kind=CandidateKind.FORGET, memory=forget, category="general", evidence=sentence
        )
    if _is_question(sentence) or _SMALL_TALK.search(sentence):
        return None

    remembered: str | None = None
    core = _TRAILING_PUNCT.sub("", sentence)
    for pattern in (_REMEMBER_EN, _REMEMBER_JA):
        match = pattern.search(core)
        if match:
            remembered = match.group("what").strip(" 、,")
            break
    if remembered is None and _REQUEST.search(core):
        return None
    body = remembered if remembered is not None else sentence
    is_english = not _CJK.search(body)
    if is_english and remembered is None and not _FIRST_PERSON_EN.search(body):
        return None  # statements about the world, not the user

    body = _TRAILING_PUNCT.sub("", body)
    last_day = _find_date(body, reference)
    category = _classify(body)
    expires_at: datetime | None = None
    is_plan = category != "constraint" and last_day is not None and bool(_PLAN_INTENT.search(body))
    if category is None and remembered is None and not is_plan:
        return None
    if is_plan and last_day is not None:
        if _STARTING.search(body):
            category = category or "general"  # a lasting change that starts then
        else:
            category = "plan"
            expires_at = expiry_after(last_day)
    elif _TRANSIENT.search(body) and category not in ("constraint", "profile"):
        return None
    text = _clean(body)
    if not text:
        return None
    return MemoryCandidate(
        kind=CandidateKind.FACT,
        memory=text,
        category=category or "general",
        expires_at=expires_at,
        evidence=sentence,
    )


def extract_with_rules(turn: Turn, now: datetime | None = None) -> list[MemoryCandidate]:
    """Deterministic extraction: Japanese and English patterns, one sentence per candidate.

    Only user messages are read, after removing recall blocks. Questions, requests to the assistant,
    small talk, passing states ("today", "今日") and statements that are not about the user produce
    nothing. Explicit forget requests produce ``kind=forget`` candidates naming what to forget.
    Candidates carry importance 0.65, confidence 0.55 and source ``rule-fallback``.

    Args:
        turn: The turn.
        now: When given, plans whose expiry is already past at ``now`` are dropped (a late replay of an
            old turn). Dates are always resolved against ``turn.occurred_at``.

    Returns:
        Candidates in the order they were said, without duplicates, at most :data:`MAX_CANDIDATES`.
    """
    reference = ensure_utc(turn.occurred_at).date()
    cutoff = None if now is None else ensure_utc(now)
    candidates: list[MemoryCandidate] = []
    seen: set[tuple[str, str]] = set()
    for index, message in enumerate(turn.messages):
        if message.role is not MessageRole.USER:
            continue
        previous: str | None = None
        for raw in split_sentences(strip_recalled_memories(message.text)):
            # What is matched (and becomes memory text) has no control characters; the evidence stays
            # exactly as the user wrote it.
            sentence = unicodedata.normalize("NFC", CONTROL_CHARACTERS.sub("", raw))
            candidate = _rule_candidates_for_sentence(sentence, previous, reference)
            previous = sentence
            if candidate is None:
                continue
            # keep the evidence exactly as the user wrote it, and where it was said
            candidate = candidate.model_copy(update={"evidence": raw, "message": index, "speaker": message.name})
            if cutoff is not None and candidate.expires_at is not None and candidate.expires_at <= cutoff:
                continue
            key = (candidate.kind.value, candidate.memory.casefold())
            if key in seen:
                continue
            seen.add(key)
            candidates.append(candidate)
            if len(candidates) >= MAX_CANDIDATES:
                return candidates
    return candidates


# --------------------------------------------------------------------------------------------
# The extractor
# --------------------------------------------------------------------------------------------


def _same_script(memory: str, evidence: str) -> bool:
    """False when the evidence is Japanese and the memory is not, or the other way round."""
    if not evidence:
        return True
    return bool(_CJK.search(memory)) == bool(_CJK.search(evidence))


def _user_text(turn: Turn) -> str:
    return "\n".join(strip_recalled_memories(m.text) for m in turn.messages if m.role is MessageRole.USER)


def _to_candidates(output: ExtractionOutput, turn: Turn) -> list[MemoryCandidate]:
    """Validate the model's answer against the turn and turn it into candidates.

    Raises:
        ValidationError: An item is written in another script than the user's sentence.
    """
    user_text = _user_text(turn)
    has_japanese = bool(_CJK.search(user_text))
    candidates: list[MemoryCandidate] = []
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(output.memories):
        evidence = item.evidence if item.evidence and item.evidence in user_text else ""
        if evidence and not _same_script(item.memory, evidence):
            raise ValidationError(
                f"memories[{index}].memory", "is not written in the language of the user's sentence"
            )
        if not evidence and not has_japanese and _CJK.search(item.memory):
            raise ValidationError(f"memories[{index}].memory", "is Japanese but the user wrote no Japanese")
        key = (item.kind, item.memory.casefold())
        if key in seen:
            continue
        seen.add(key)
        candidates.append(_candidate_from(item, evidence))
    return candidates[:MAX_CANDIDATES]


def _candidate_from(item: ExtractedMemory, evidence: str) -> MemoryCandidate:
    last_day = item.expiry_date()
    return MemoryCandidate(
        kind=CandidateKind(item.kind),
        memory=item.memory,
        category=item.category,
        importance=item.importance,
        confidence=item.confidence,
        expires_at=None if last_day is None else expiry_after(last_day),
        source=LLM_SOURCE,
        evidence=evidence or item.evidence,
    )


class MemoryExtractor:
    """Turns a conversation turn into memory candidates (LLM path with a rule fallback).

    Args:
        chat_model: The model of the LLM path; ``None`` means rules only.
        clock: Where "now" comes from (plans already expired at that time are dropped).
        max_attempts: Chat model calls per turn while its answers are invalid (at least 1); the
            model's transport retries come on top and are the adapter's business.
        on_transient: ``"fallback"`` (default) uses the rule path when the model stays unavailable;
            ``"raise"`` re-raises the :class:`TransientError` so the turn is redelivered.
        temperature: Sampling temperature of the extraction call.
    """

    def __init__(
        self,
        *,
        chat_model: ChatModel | None = None,
        clock: Clock | None = None,
        max_attempts: int = 2,
        on_transient: Literal["fallback", "raise"] = "fallback",
        temperature: float = 0.0,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if on_transient not in ("fallback", "raise"):
            raise ValueError("on_transient must be 'fallback' or 'raise'")
        self._chat_model = chat_model
        self._clock: Clock = clock or SystemClock()
        self._max_attempts = max_attempts
        self._on_transient = on_transient
        self._temperature = temperature

    @property
    def uses_llm(self) -> bool:
        """Whether a chat model is configured."""
        return self._chat_model is not None

    async def extract(self, turn: Turn) -> ExtractionResult:
        """Candidates of one turn.

        Args:
            turn: A validated turn.

        Returns:
            The candidates, the path that produced them and, after a fallback, why.

        Raises:
            TransientError: Only with ``on_transient="raise"``, when the model stays unavailable.
        """
        if self._chat_model is None:
            return ExtractionResult(candidates=self._rules(turn), path="rules")
        if not _user_text(turn).strip():
            return ExtractionResult(candidates=[], path="llm")
        started = time.perf_counter()
        system = build_extraction_system_prompt()
        previous_error: str | None = None
        attempts = 0
        reason: str
        while True:
            attempts += 1
            try:
                output = await self._chat_model.complete_json(
                    system=system,
                    user=build_extraction_user_prompt(turn, previous_error=previous_error),
                    schema=ExtractionOutput,
                    temperature=self._temperature,
                )
                now = ensure_utc(self._clock.now())
                candidates = [
                    c for c in _to_candidates(output, turn) if c.expires_at is None or c.expires_at > now
                ]
            except ValidationError as exc:
                previous_error = str(exc)
                logger.warning(
                    "extraction answer for turn %s was invalid (attempt %s of %s): %s",
                    turn.turn_id,
                    attempts,
                    self._max_attempts,
                    exc,
                )
                if attempts < self._max_attempts:
                    continue
                reason = f"invalid answer after {attempts} attempts: {exc}"
                break
            except TransientError as exc:
                if self._on_transient == "raise":
                    raise
                logger.warning("chat model unavailable for turn %s: %s", turn.turn_id, exc)
                reason = f"chat model unavailable: {exc}"
                break
            except PermanentError as exc:
                logger.warning("chat model refused turn %s: %s", turn.turn_id, exc)
                reason = f"chat model error: {exc}"
                break
            else:
                logger.debug(
                    "extracted %s candidates from turn %s with the chat model in %.3fs",
                    len(candidates),
                    turn.turn_id,
                    time.perf_counter() - started,
                )
                return ExtractionResult(candidates=candidates, path="llm", attempts=attempts)
        return ExtractionResult(
            candidates=self._rules(turn), path="rules", fallback_reason=reason, attempts=attempts
        )

    def _rules(self, turn: Turn) -> list[MemoryCandidate]:
        return extract_with_rules(turn, self._clock.now())
