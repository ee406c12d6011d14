"""What a broad forget request names: a kind of information ("my medical information", 「健康のこと」)
or a person ("everything about Alex", "my ex", 「元彼の話」), and the words that speak of it. One table,
Japanese and English."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_core.language.entity_words import ONE_KANJI_NOUNS
from memory_core.language.relations import RELATIONS, tells

__all__ = [
    "PAST_QUALIFIERS",
    "TOPICS",
    "BroadRequest",
    "Topic",
    "broad_request",
    "broad_terms",
    "mentions",
    "names_in",
]


@dataclass(frozen=True, slots=True)
class Topic:
    """A kind of information people ask to have forgotten as a whole.

    Attributes:
        name: Its name.
        asked: How a request names it ("medical", 「健康」).
        words: The words of a memory that speak of it (lower case; Japanese as written).
        relations: The relations of the vocabulary (:mod:`memory_core.language.relations`) whose
            statements speak of it too, whatever their words (「ホストをしてました」 is about work).
    """

    name: str
    asked: re.Pattern[str]
    words: tuple[str, ...]
    relations: tuple[str, ...] = ()


TOPICS: tuple[Topic, ...] = (
    Topic(
        "health",
        re.compile(r"\b(?:medical|health|medication|medicines?|diagnos\w*|conditions?)\b|健康|病気|医療|持病|薬|(?:^|の)体(?:$|の)", re.I),
        (
            "diabetes", "diabetic", "blood pressure", "hypertension", "asthma", "cancer", "medication", "medicine",
            "metformin", "insulin", "pills", "therapist", "therapy", "psychiatrist", "psychologist", "counsellor",
            "counselor", "adhd", "精神科", "心療内科", "カウンセリング",
            "diagnosed", "diagnosis", "surgery", "illness", "disease", "prescription", "depression", "anxiety",
            "allergic", "allergy", "pregnant", "pregnancy", "病気", "持病", "薬", "診断", "手術", "血圧",
            "通院", "治療", "糖尿病", "喘息", "処方", "アレルギー", "妊娠", "つわり", "生理",
        ),
    ),
    Topic(
        "contact",
        re.compile(r"\bcontact (?:details|info\w*)\b|\bphone numbers?\b|\be-?mails?\b|連絡先|電話番号|メールアドレス", re.I),
        ("phone", "mobile", "email", "e-mail", "@", "line id", "電話", "携帯", "メール", "LINE", "ID"),
        ("phone", "email"),
    ),
    Topic(
        "address",
        re.compile(r"\baddress\b|\bwhere i live\b|住所|どこに住んで", re.I),
        (
            "street", "avenue", "postcode", "zip code", "apartment", "live at", "address", "nearest station",
            "住所", "番地", "丁目", "郵便番号", "号室", "最寄り", "区の", "市の", "マンション", "アパート", "階に住",
        ),
        ("home",),  # where the user lives is part of it ("I live in Berlin", 「福岡に引っ越した」)
    ),
    Topic(
        "money",
        re.compile(r"\b(?:money|finances?|financial|salary|debts?|bank)\b|お金|給料|借金|年収|貯金", re.I),
        ("salary", "debt", "loan", "owe", "bank", "savings", "mortgage", "給料", "借金", "年収", "貯金", "ローン", "銀行"),
    ),
    Topic(
        "work",
        re.compile(r"\bmy (?:(?:old|former|previous|past|current) )?(?:job|work|career|employer)\b|\bwork stuff\b|仕事|職場|会社|勤め先|キャリア", re.I),
        (
            "job", "work at", "work as", "work for", "working at", "office", "employer", "colleague", "manager",
            "promotion", "product line", "launching", "client", "仕事", "会社", "職場", "勤め", "勤務", "働い",
            "上司", "同僚", "部署", "転職", "昇進", "出社", "在宅勤務", "研究職",
        ),
        ("job",),
    ),
    Topic(
        "religion",
        re.compile(r"\b(?:religion|religious|faith|church)\b|宗教|信仰", re.I),
        (
            "religion", "catholic", "christian", "protestant", "muslim", "buddhist", "jewish", "hindu", "mass",
            "church", "mosque", "temple", "synagogue", "lent", "ramadan", "pray", "prayer", "baptised", "baptized",
            "宗教", "信仰", "教会", "洗礼", "礼拝", "ミサ", "お祈り", "クリスチャン", "仏教",
        ),
    ),
    Topic(
        "dating",
        re.compile(r"\b(?:dating|love life|romantic life|romance)\b|恋愛|婚活|恋バナ", re.I),
        (
            "date", "dating", "hinge", "tinder", "bumble", "crush", "boyfriend", "girlfriend", "恋愛", "婚活",
            "マッチングアプリ", "デート", "彼氏", "彼女", "片思い", "合コン",
        ),
    ),
)

#: Relations a request may name a person by ("my ex", "my cousin", 「元彼」): the memories that use the
#: word, and the names in them, are that person's.
_RELATION_EN = r"ex|ex-boyfriend|ex-girlfriend|ex-husband|ex-wife|cousin|neighbou?r|flatmate|roommate|colleague|boss"
_RELATION_JA = r"元彼|元カノ|元夫|元妻|元カレ|いとこ|従兄弟|従姉妹|同僚|上司|義母|義理の母|義父|義理の父|姑|舅|隣"
_RELATIONS = re.compile(rf"\bmy (?:{_RELATION_EN})\b|{_RELATION_JA}", re.I)
_RELATION_WORDS = (
    *(w.replace("neighbou?r", "neighbour") for w in _RELATION_EN.split("|")),
    "neighbor",
    *_RELATION_JA.split("|"),
)
#: A request that names only a person or a thing ("Leo, it's over", 「ミホ」): every mention of it goes.
_BARE_NAME = re.compile(
    r"^([A-Z][a-z]+)(?:[,.!]|\s*$)|^([\u30a0-\u30ff]{2,8})$|"
    r"^([\u4e00-\u9fff]{2,3})(?:さん|くん|君|ちゃん|様|部長|課長|先生)?$"
)
_NOT_NAMES = frozenset({"My", "The", "That", "This", "What", "Everything", "All", "Anything", "It"})
#: "everything about Alex", 「タクヤのこと(は全部)」: a name the request is about.
_ABOUT_NAME = re.compile(
    r"\babout ([A-Z][a-z]+(?: [A-Z][a-z]+)?)\b|"
    r"(?<![\u30a0-\u30ff\u4e00-\u9fff])([\u30a0-\u30ff]{2,}|[\u4e00-\u9fff]{1,3})(?:さん|くん|君|ちゃん|様|部長|課長|先生)?の(?:こと|話)"
)
_BROAD = re.compile(r"\b(?:everything|all|anything)\b|全部|すべて|全て|ぜんぶ|のこと|の話|について", re.I)
#: The name a memory gives a person it names by a relation ("my ex, Jordan", 「元彼のタクヤ」).
_NAME = re.compile(
    rf"\b(?:{_RELATION_EN}),?\s+(?:called |named |is )?(?:(?:Mr|Mrs|Ms|Dr)\.?\s+)?([A-Z][a-z]+)\b|"
    rf"(?:{_RELATION_JA})の([\u30a0-\u30ff\u4e00-\u9fff]{{2,6}}?)(?:と|は|が|さん|くん|ちゃん|の)"
)


#: A request that asks for the past of what it names ("my old job", 「昔の仕事」, 「前の職場」): only what
#: the memories say of the past goes, not what holds now (「今は料理人です」 stays).
#: The words themselves (a forget request's own decision leaves them out of what it names, too).
PAST_QUALIFIERS: tuple[str, ...] = ("old", "former", "previous", "past", "earlier", "昔", "以前", "前", "かつて")
_PAST_QUALIFIER = re.compile(
    r"\b(?:" + "|".join(w for w in PAST_QUALIFIERS if w.isascii()) + r")\b|"
    r"(?:" + "|".join(w for w in PAST_QUALIFIERS if not w.isascii()) + r")の",
    re.I,
)
#: A statement about the past: what used to be, not what is.
_PAST_STATEMENT = re.compile(
    r"\bused to\b|\bformerly\b|\bback then\b|\bi was\b|\bwe were\b|\bi (?:worked|lived|studied|had)\b|"
    r"\b(?:years|months) ago\b|昔|以前|かつて|ていました|てました|てた$|でした|だった|ていた",
    re.I,
)
_RELATION_BY_NAME = {r.name: r for r in RELATIONS}


@dataclass(frozen=True, slots=True)
class BroadRequest:
    """What a broad forget request names (:func:`broad_request`).

    Attributes:
        terms: The words whose memories it names.
        by_relation: It names a person by a relation (their name is read from the memories: :func:`names_in`).
        relations: The relations whose statements it names (:attr:`Topic.relations`).
        past: It asks for the past only ("my old job"): a memory must speak of the past too.
    """

    terms: tuple[str, ...]
    by_relation: bool = False
    relations: tuple[str, ...] = ()
    past: bool = False

    def __bool__(self) -> bool:
        return bool(self.terms)

    def names(self, text: str) -> bool:
        """Whether a memory's (or a sentence's) ``text`` speaks of what the request names."""
        about = mentions(text, self.terms) or any(tells(_RELATION_BY_NAME[name], text) for name in self.relations)
        return about and (not self.past or _PAST_STATEMENT.search(text) is not None)


def _about_name(request: str) -> str | None:
    """The name a broad request is about ("everything about Alex", 「誠のことは全部」), never a single
    kanji that is a common word (前, 車, 昔: 「前の話は全部忘れて」 names no one)."""
    match = _ABOUT_NAME.search(request)
    if match is None or not _BROAD.search(request):
        return None
    name = next(g for g in match.groups() if g)
    one_kanji_word = len(name) == 1 and (name in ONE_KANJI_NOUNS or name in PAST_QUALIFIERS)
    return None if one_kanji_word else name


def broad_request(request: str) -> BroadRequest:
    """What a forget request names as a whole: a kind of information (:data:`TOPICS`: its words and the
    statements of its relations), a person by name or by a relation (whose name is then read from the
    memories: :func:`names_in`), a thing named alone; empty when it names one thing, not a person or a
    kind of information."""
    topics = [topic for topic in TOPICS if topic.asked.search(request)]
    terms: list[str] = [word for topic in topics for word in topic.words]
    about = _about_name(request)
    if about:
        terms.append(about)
    bare = _BARE_NAME.match(request.strip())
    if bare and next(g for g in bare.groups() if g) not in _NOT_NAMES:
        terms.append(next(g for g in bare.groups() if g))
    by_relation = bool(_RELATIONS.search(request))
    if by_relation:
        terms.extend(_RELATION_WORDS)
    relations = tuple(dict.fromkeys(name for topic in topics for name in topic.relations))
    past = bool(terms) and _PAST_QUALIFIER.search(request) is not None
    return BroadRequest(tuple(dict.fromkeys(terms)), by_relation, relations, past)


def broad_terms(request: str) -> tuple[tuple[str, ...], bool]:
    """The words whose memories a forget request names as a whole, and whether it names a person by a
    relation (:func:`broad_request`)."""
    found = broad_request(request)
    return found.terms, found.by_relation


def mentions(text: str, terms: tuple[str, ...]) -> bool:
    """Whether ``text`` speaks of any of ``terms`` (whole words in English, also beside Japanese: 「LINEのID」;
    as written in Japanese)."""
    lowered = text.casefold()
    for term in terms:
        word = term.casefold()
        if word.isascii():
            if re.search(rf"(?<![A-Za-z0-9_-]){re.escape(word)}(?![A-Za-z0-9_-])", lowered):
                return True
        elif word in text:
            return True
    return False


def names_in(text: str) -> set[str]:
    """The names a memory gives the people it names by a relation ("my ex, Jordan": Jordan)."""
    return {next(g for g in m.groups() if g) for m in _NAME.finditer(text)}
