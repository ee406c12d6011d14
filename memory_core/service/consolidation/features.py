"""Statement features: what consolidation compares in one statement (polarity, numbers, dates,
content words, slots, markers of change and addition), and whose statement it is. The slots and choices
come from the relation vocabulary (:mod:`memory_core.language.relations`)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memory_core.domain.records import MemoryRecord
from memory_core.language.date_mentions import kanji_counts_as_digits, take_dates, take_numbers
from memory_core.language.event_time import said_of_past
from memory_core.language.lexicon import canonical, content_units, join_phrases, lemma, split_compounds
from memory_core.language.relations import CHOICE, one_value_relations
from memory_core.language.sentences import strip_discourse_markers
from memory_core.language.text import analyze, normalize

__all__ = [
    "StatementFeatures",
    "normalized_statement",
    "says_it_ended",
    "speaker_of",
    "split_speaker",
    "statement_features",
]

# Polarity: negative expressions first (they contain the positive ones).
_NEGATIVE_JA = re.compile(
    r"(?:大|だい)?(?:好|す)き(?:じゃ|では|で?も)(?:な(?:い|かった|くな(?:った|りました|ってきた))|ありません)|"
    r"(?:好|す)きになれない|苦手|にがて|(?:大)?嫌い|きらい|無理|ダメ|だめ|NG|避け|控え|やめた|止めた|弱い|弱く|"
    r"(?:食べ|飲め|飲|食べれ|乗れ|行け|でき|出来)(?:られ)?(?:ない|ません)|"
    r"(?:な(?:い|かった)|ません|ず)(?:です|でした|よ|ね)*$"
)
_POSITIVE_JA = re.compile(
    r"(?:大|だい)?(?:好|す)き|(?:大)?好物|気に入って|お気に入り|愛用|好み|好んで|得意|派|(?:が|の方が|のほうが)(?:いい|良い)|"
    r"最優先|優先|重視|できれば|出来れば"
)
#: A negation of the statement: its predicate negated ("I don't like", "I'm not a fan", "can't eat"),
#: not a "not" somewhere in it ("not only jazz", "not sure why, but I love...", "window, not aisle").
_NEGATIVE_EN = re.compile(
    r"\b(?:hate|hates|dislike|dislikes|detest|can't stand|cannot stand|can not stand|not a fan|"
    r"allergic)\b|\b(?:don't|do not|doesn't|does not|didn't|did not|never|no longer|can't|cannot|"
    r"won't|isn't|aren't|wasn't|am not|'m not|is not|are not)\b(?!\s+(?:only|just|sure)\b)|"
    r"\b(?:quit|stopped(?! by)|gave up(?: on)?|dropped out of)\b|\bany ?more\b"
)
_POSITIVE_EN = re.compile(
    r"\b(?:like|likes|love|loves|enjoy|enjoys|prefer|prefers|adore|fond|favou?rite|fan)\b"
)

# Change, additive and single-valued markers.
_CHANGE_MARKERS = re.compile(
    r"今は|今では|いまは|最近は|最近|もう|これからは|今度から|代わりに|変えた|変わった|変更|"
    r"\bnow\b|\bnowadays\b|\bthese days\b|\banymore\b|\bany more\b|\binstead\b|\bno longer\b|"
    r"\bswitched\b|\bchanged\b|\bfrom now on\b"
)
#: The statement says something has ended ("I quit piano", "no more coffee", 「テニスはやめた」).
_ENDED = re.compile(
    r"\b(?:quit|quitting|stopped(?! by)|gave up|giving up|no more|done with|cancell?ed|got rid of|sold|"
    r"deleted|no longer|any ?more|passed away|died)\b|やめ(?:た|ました|ちゃった|ています|てる)|辞め(?:た|ました)|"
    r"止め(?:た|ました)|解約|退会|手放し|亡くな|死んじゃ|(?:消|削除)し(?:た|ました|ちゃった)|もう.+(?:ない|ません)"
)
_ADDITIVE_MARKERS = re.compile(
    r"(?<=[\u30a0-\u30ff\u4e00-\u9fffa-z0-9])も(?!う)|また|他に|ほかに|\balso\b|\btoo\b|\bas well\b|"
    r"\bin addition\b"
)
#: Said of the past ("when I was a kid", 「子どもの頃は」, "I used to"): not a value the user holds now, so
#: it neither replaces nor is replaced by one ("I grew up near Hamburg" beside "I live in Munich").
_BYGONE = re.compile(
    r"(?<!中)頃|昔|以前は|前は|かつて|当時|住んでいました|住んでいた|働いていました|働いていた|"
    r"\bused to\b|\bwhen i was\b|\bas a (?:kid|child|teen|teenager)\b|\bgrew up\b|(?<!'ve )(?<!have )\blived in\b|"
    r"\bback (?:then|in the day|in (?:high )?school|in college)\b|(?<!'ve )(?<!have )\bworked (?:at|for|as)\b|\bgrowing up\b"
)
_MOVE_JA = re.compile(r"引っ越し|引っ越|引越し")
#: A move to a named place, as written ("I moved to Munich"; not "a bigger apartment", "the night shift").
_MOVED_TO = re.compile(r"\b(?:moved|moving|relocated|relocating) (?:back )?to (?:the )?[A-Z\u3040-\u9fff]")
#: A statement about someone else ("My sister moved to Paris", 「姉は福岡に住んでいます」) fills none of the
#: user's slots.
_OTHER_PERSON = re.compile(
    r"^(?:my|our|his|her|their) (?:\w+ ){0,2}?(?:sister|brother|mom|mother|dad|father|husband|wife|partner|son|"
    r"daughter|friend|kid|child|children|boss|colleague|girlfriend|boyfriend|family|parent|cousin|aunt|uncle|"
    r"grandma|grandpa|grandmother|grandfather|roommate|neighbou?r)s?\b|^(?:he|she|they)\b|"
    r"^(?:姉|兄|妹|弟|母|父|夫|妻|主人|息子|娘|友達|友人|彼氏|彼女|彼|家族|子供|子ども|同僚|上司|両親|祖母|祖父)(?:は|が|も)",
    re.IGNORECASE,
)
#: "favorite X is", 「好きなXは」: the slot is X.
_FAVOURITE_SLOT = re.compile(
    r"\bfavou?rite ((?:[a-z'-]+ ){0,2}?[a-z'-]+?)(?:s)? (?:is|are|was|were|has to be|would be)\b|"
    r"\bfavou?rite ((?:[a-z'-]+ )?[a-z'-]+)|(?:一番|いちばん)?好きな(.{1,12}?)は"
)

# "X じゃなくて Y", "Y instead of X": X is what the statement replaces.
_REPLACED_JA = re.compile(
    r"([^\s、,。]{1,12}?)(?<!き)(?<!い)(?:じゃなくて|ではなくて|ではなく|じゃなく|より(?:も)?|(?:を|は)やめて)"
)
_REPLACED_EN = re.compile(
    r"\b(?:instead of|rather than|than)\s+(\w+(?:\s+\w+)?)|[,;]\s*not\s+(\w+(?:\s+\w+)?)"
)


_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)


def normalized_statement(text: str) -> str:
    """The text compared for "same statement": NFKC, lower case, no spaces, punctuation or politeness."""
    value = normalize(text)
    value = re.sub(
        r"(?:なんです|んです|のです|です|でした|だよ|だね|だ|ます|よ|ね)(?=[\s。．.!！?？]*$)", "", value
    )
    return _PUNCT.sub("", value)


@dataclass(frozen=True, slots=True)
class StatementFeatures:
    """What the contradiction guards compare in one statement.

    Attributes:
        text: :func:`normalized_statement` of the statement.
        polarity: -1 negative (苦手, don't like, 食べない), +1 positive (好き, like), 0 neutral.
        numbers: Numbers that are not part of a date or time, sorted.
        when: Dates, weekdays, times and relative date words, canonicalized and sorted.
        units: Content words in order (polarity, numbers, dates and function words removed), words of
            the small bilingual lexicon replaced by their key (``≡coffee`` for コーヒー and coffee).
        surface: The same content words as written.
        terms: Index terms of the content words (words and CJK bigrams), for overlap.
        change: The statement says something changed (今は, もう, now, instead...).
        additive: The statement adds to what is known (紅茶も, also, too...).
        slots: The one-value-at-a-time predicates the statement fills (``home``, ``job``, ``name``,
            ``fav:color``...): a new value in the same slot replaces the old one.
        replaced: Words the statement says it replaces ("X じゃなくて", "instead of X", ", not X").
        speaker: Who said it, when the memory names its speaker ("Caroline: ..."), lower case.
        bygone: The statement is about the past ("when I was a kid", 「子どもの頃は」, "I used to").
        other_person: The statement is about someone else ("My sister moved to Paris", 「姉は…」).
        choice: The statement chooses among alike things ("I prefer the window seat", 「紅茶派」), one
            choice at a time (:data:`~memory_core.language.relations.CHOICE`); a liking does not.
        ended: The statement says something has ended ("I quit piano", "no more coffee", 「やめた」).
        happened: The statement reports what happened ("I went to a parade last week", 「京都に行った」:
            its tense, :func:`~memory_core.language.event_time.said_of_past`).
    """

    text: str
    polarity: int
    numbers: tuple[str, ...]
    when: tuple[str, ...]
    units: tuple[str, ...]
    surface: tuple[str, ...]
    terms: frozenset[str]
    change: bool
    additive: bool
    slots: frozenset[str]
    replaced: tuple[str, ...]
    speaker: str | None = None
    bygone: bool = False
    other_person: bool = False
    choice: bool = False
    ended: bool = False
    happened: bool = False

    @property
    def single_valued(self) -> bool:
        """The predicate holds one value at a time (住んで, favorite, name...)."""
        return bool(self.slots)


#: What now holds, said beside what ended ("I'm a tea person now, no more coffee", 「今は紅茶派です」).
_NOW_HOLDS = re.compile(r"今は|今では|いまは|これからは|代わりに|\bnow\b|\binstead\b|\bthese days\b|\bnowadays\b")


@functools.lru_cache(maxsize=4096)
def says_it_ended(statement: str) -> bool:
    """Whether ``statement`` says only that something has ended ("I quit piano", "No more yoga for me",
    「テニスはやめた」): not a liking given up ("I don't like mushrooms anymore" answers "does the user
    like mushrooms?"), and not beside what holds now ("I'm a tea person now, no more coffee")."""
    text = normalize(statement)
    if _POSITIVE_JA.search(text) or _POSITIVE_EN.search(text) or _NOW_HOLDS.search(text):
        return False
    return statement_features(statement).ended


@functools.lru_cache(maxsize=4096)
def statement_features(statement: str, speaker: str | None = None) -> StatementFeatures:
    """The features of one statement (pure, so the last few thousand are kept: consolidation compares
    the same neighbours again and again; see :class:`StatementFeatures`)."""
    speaker, statement = split_speaker(statement, speaker)
    text = join_phrases(_MOVE_JA.sub("引越", normalize(statement)))
    bygone = bool(_BYGONE.search(text))
    text, when = take_dates(kanji_counts_as_digits(text))
    text, numbers = take_numbers(text)
    text, replaced = _take_replaced(text)
    change = bool(_CHANGE_MARKERS.search(text))
    choice = bool(CHOICE.search(text))
    ended = bool(_ENDED.search(text))
    additive = bool(_ADDITIVE_MARKERS.search(text))
    other = bool(_OTHER_PERSON.search(strip_discourse_markers(statement)))
    slots = frozenset() if other else _slots(text, statement)
    text, polarity = _take_polarity(text)  # "no longer" and "anymore" negate before they mark a change
    text = _CHANGE_MARKERS.sub(" ", text)
    surface = split_compounds(content_units(text))
    units = [canonical(u) for u in surface]
    return StatementFeatures(
        text=normalized_statement(statement),
        polarity=polarity,
        numbers=tuple(numbers),
        when=tuple(sorted(when)),
        units=tuple(units),
        surface=tuple(surface),
        terms=_terms(units),
        change=change,
        additive=additive,
        slots=slots,
        replaced=tuple(replaced),
        speaker=speaker.casefold() if speaker else None,
        bygone=bygone,
        other_person=other,
        choice=choice,
        ended=ended,
        happened=said_of_past(statement),
    )


def _take_replaced(text: str) -> tuple[str, list[str]]:
    """``text`` without what it says it replaces ("X じゃなくて", "instead of X"), and those words."""
    replaced: list[str] = []
    for rx in (_REPLACED_JA, _REPLACED_EN):
        for match in rx.finditer(text):
            words = next(g for g in match.groups() if g)
            replaced.extend(canonical(u) for u in content_units(words))
        text = rx.sub(" ", text)
    return text, replaced


def _slots(text: str, statement: str) -> frozenset[str]:
    """The one-value predicates a statement about the user fills (``home``, ``fav:color``...)."""
    slots = one_value_relations(text)
    if _MOVED_TO.search(statement):
        slots.add("home")
    for match in _FAVOURITE_SLOT.finditer(text):
        words = next(g for g in match.groups() if g)
        slots.add("fav:" + " ".join(lemma(w) for w in words.split()))
    return frozenset(slots)


def _take_polarity(text: str) -> tuple[str, int]:
    """``text`` without its polarity words, and its polarity (-1 negative, +1 positive, 0 neutral)."""
    polarity = 0
    if _NEGATIVE_JA.search(text) or _NEGATIVE_EN.search(text):
        polarity = -1
    elif _POSITIVE_JA.search(text) or _POSITIVE_EN.search(text):
        polarity = 1
    for pattern in (_NEGATIVE_JA, _POSITIVE_JA, _NEGATIVE_EN, _POSITIVE_EN):
        text = pattern.sub(" ", text)
    return text, polarity


def _terms(units: list[str]) -> frozenset[str]:
    """The index terms of content words: a lexicon key as it is, other words analysed (CJK bigrams)."""
    terms: set[str] = set()
    for unit in units:
        if unit.startswith("≡"):
            terms.add(unit)
        else:
            terms.update(analyze(unit))
    return frozenset(terms)


def split_speaker(statement: str, speaker: str | None) -> tuple[str | None, str]:
    """``("Caroline", "I just got accepted...")`` when the statement starts with its known speaker's name
    ("Caroline: ...", see :func:`~memory_core.service.extraction.rules.with_speaker`), else
    ``(None, statement)``. The speaker comes from where the memory came from, never from the text:
    "My budget: 20,000 yen" names no speaker."""
    if speaker and statement.startswith(f"{speaker}: "):
        return speaker, statement[len(speaker) + 2 :]
    return None, statement


def speaker_of(record: MemoryRecord) -> str | None:
    """The speaker a memory names: a speaker of its provenance whose name starts its text."""
    for source in reversed(record.provenance):
        if source.speaker and record.memory.startswith(f"{source.speaker}: "):
            return source.speaker
    return None
