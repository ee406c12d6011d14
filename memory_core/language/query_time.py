"""The time a search query asks about: the period it names ("last weekend", 先月, "next week") and
whether it asks what held "as of" a time, read by the same resolver as what users state
(:func:`~memory_core.language.event_time.event_time`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo

from memory_core.language.event_time import EventTime, event_time, said_of_past
from memory_core.language.sentences import JAPANESE_SCRIPT

__all__ = ["QueryTime", "asks_ahead", "asks_of_past", "query_time"]

#: "as of March", "as at 1 May", 「3月時点で」「3月の時点で」: what held then, not what happened then.
_AS_OF_BEFORE = re.compile(r"\bas\s+(?:(?:of|at)\s+)?$", re.IGNORECASE)
_OF_AT = re.compile(r"^(?:of|at)\s", re.IGNORECASE)
_AS_OF_AFTER = re.compile(r"^\s*(?:の)?時点(?:で|の|では)?")
#: Words of a question about what is to come: "coming up", "next week", "my calendar", 予定, 今後, 来週.
_AHEAD = re.compile(
    r"\b(?:upcoming|coming up|ahead|next|tomorrow|tonight|soon|later|plans?|planned|planning|"
    r"schedule[ds]?|scheduled|calendar|agenda|will|shall|going to|gonna)\b|'ll\b|"
    r"予定|今後|これから|近々|今度|計画|スケジュール|控えて|来週|再来週|来月|来年|明日|明後日|あした|あさって",
    re.IGNORECASE,
)
#: Participles that say something is arranged ("What does the user have planned?", "Anything
#: scheduled?"): no past tense for :func:`asks_ahead`.
_ARRANGED = re.compile(r"\b(?:planned|scheduled|booked|arranged|lined up)\b", re.IGNORECASE)
#: A Japanese question that ends in a past form asks of the past, plan or not (「先週の予定は何だった？」).
_PAST_ENDING_JA = re.compile(r"(?:た|でした|ました)$")
#: A when-question ("When is...?", "What month...?", いつ, 何月): it asks for a date, past or not, so
#: it is no question about what is to come.
_WHEN = re.compile(
    r"\bwhen\b|\b(?:what|which) (?:day|date|month|year|time|week|weekday)\b|\bhow long ago\b|"
    r"いつ|何月|何日|何曜|何年|何時|何週",
    re.IGNORECASE,
)
#: A Japanese question's ending ("行ったっけ", "行ったの？"): the tense is read without it.
_QUESTION_TAIL_JA = re.compile(r"(?:っけ|かな|かしら|か|の|？|\?|\s)+$")


@dataclass(frozen=True, slots=True)
class QueryTime:
    """What a query says about time.

    Attributes:
        window: The period it asks about (start inclusive, end exclusive, UTC), or ``None``.
        as_of: For an "as of" question, the moment whose current memories it asks for: the end of the
            window, or ``now`` when that is later than now (the memory knows nothing after now).
        rest: The query without its time words, for the text search.
    """

    window: EventTime | None
    as_of: datetime | None
    rest: str


def asks_of_past(query: str) -> bool:
    """Whether a question is asked in the past tense ("When did I...?", 「どこに行ったっけ」)."""
    if JAPANESE_SCRIPT.search(query):
        return said_of_past(_QUESTION_TAIL_JA.sub("", query))
    return said_of_past(query)


def asks_when(query: str) -> bool:
    """Whether a question asks for a date or a time ("When did Melanie sign up for pottery?", "What month
    was the wedding?", 「いつ引っ越した？」)."""
    return _WHEN.search(query) is not None


def asks_ahead(query: str) -> bool:
    """Whether a question asks what is to come ("What's on my calendar next week?", "What plans does the
    user have coming up?", 「来週の予定は？」, 「今後の予定を教えて」): it has a word of what is ahead and
    is neither asked in the past tense (:func:`asks_of_past`) nor a when-question ("When is my dentist
    appointment?", 「歯医者はいつ？」, which asks for a date, past or not)."""
    if _WHEN.search(query) or asks_of_past(_ARRANGED.sub(" ", query)):
        return False
    if JAPANESE_SCRIPT.search(query) and _PAST_ENDING_JA.search(_QUESTION_TAIL_JA.sub("", query.strip())):
        return False
    return bool(_AHEAD.search(query))


def query_time(query: str, now: datetime, *, tz: tzinfo | None = None) -> QueryTime:
    """The period a search query asks about, and whether it asks "as of" then.

    "What did I do last weekend?", 「先月どこに行ったっけ」, "What's on my calendar next week?" name a
    window; "Where did I live as of March?" and 「3月時点でどこに住んでいた？」 ask what was current at
    its end. A bare weekday or month takes the question's tense as a statement does ("Where did I go on
    Friday?" is the last Friday, "What am I doing on Friday?" the next one).

    Args:
        query: The search text.
        now: The query's "now" (its ``reference_time``; timezone-aware).
        tz: The calendar "today" is read in; ``None``: ``now``'s own timezone.

    Returns:
        The window (or ``None``), the "as of" moment (or ``None``) and the query without its time words.

    Raises:
        ValueError: ``now`` has no timezone.
    """
    window = event_time(query, now, tz=tz, past=asks_of_past(query))
    if window is None:
        return QueryTime(window=None, as_of=None, rest=query.strip())
    start = query.find(window.words)
    before, after = query[:start], query[start + len(window.words) :]
    marker_before, marker_after = _AS_OF_BEFORE.search(before), _AS_OF_AFTER.match(after)
    if marker_before and not marker_before[0].rstrip().lower().endswith(("of", "at")):
        # "as" alone only before words that begin with "of" ("as of March": the words are "of March")
        marker_before = marker_before if _OF_AT.match(window.words) else None
    as_of = min(window.end, now) if marker_before or marker_after else None
    if marker_before:
        before = before[: marker_before.start()]
    if marker_after:
        after = after[marker_after.end() :]
    japanese = bool(JAPANESE_SCRIPT.search(query))
    rest = (before + after) if japanese else re.sub(r"\s+", " ", f"{before} {after}")
    return QueryTime(window=window, as_of=as_of, rest=rest.strip())
