"""Entity mentions on the rule path: the people, pets, places and organisations a text names, in
English and Japanese.

A mention says what kind of entity it is (``person``, ``pet``, ``place``, ``org``), its name when the
text gives one (honorifics stripped: 田中さん → 田中) and its relation to the user when the text says it
("my sister Ana", "Ana, my sister", 「姉の花子」, "my dog Rex", 「うちの猫のミケ」). The relation words are
one table, :data:`RELATION_WORDS`, both languages under one key (sister, 姉, 妹, お姉さん → ``sister``).

What the rules can tell, and what they cannot:

* An English name is a capitalised word (or two) that is not a common word and not the first word of
  a sentence, unless a pattern names it there ("Ana, my sister", "Ana is..."). A name after "not" is
  the name a text says is *not* meant ("Sara, not Sarah"), so it is no mention.
* A Japanese name needs a frame: a relation word before it (姉の花子, 同僚の田中さん) or an honorific
  after it (田中さん, ミケちゃん).
* A place is what comes after "live in", "moved to", "from", "visited" (住んでいる, 出身, 在住...),
  an organisation what comes after "work at/for" (勤めている, で働いている); "Paris, Texas" is one name.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "KINDS",
    "RELATION_WORDS",
    "Mention",
    "RelationWord",
    "mentions",
    "name_key",
    "relation_of",
]

#: The kinds of entities.
KINDS = ("person", "pet", "place", "org")


@dataclass(frozen=True, slots=True)
class RelationWord:
    """One relation to the user, the words that say it, and the kind of entity it names.

    Attributes:
        key: Its one name in both languages (``sister``).
        kind: ``person`` or ``pet``.
        english: The English words ("sister", "sis").
        japanese: The Japanese words (姉, 妹, お姉さん).
    """

    key: str
    kind: str
    english: tuple[str, ...]
    japanese: tuple[str, ...]


#: Every relation word, both languages under one key.
RELATION_WORDS: tuple[RelationWord, ...] = (
    RelationWord("sister", "person", ("sister", "sis"), ("お姉さん", "お姉ちゃん", "姉さん", "妹さん", "姉", "妹")),
    RelationWord("brother", "person", ("brother",), ("お兄さん", "お兄ちゃん", "兄さん", "弟さん", "兄", "弟")),
    RelationWord("wife", "person", ("wife",), ("奥さん", "奥様", "家内", "女房", "妻", "嫁")),
    RelationWord("husband", "person", ("husband",), ("旦那さん", "旦那", "主人", "夫")),
    RelationWord("son", "person", ("son",), ("息子さん", "息子")),
    RelationWord("daughter", "person", ("daughter",), ("娘さん", "お嬢さん", "娘")),
    RelationWord("mother", "person", ("mother", "mom", "mum"), ("お母さん", "母親", "母")),
    RelationWord("father", "person", ("father", "dad"), ("お父さん", "父親", "父")),
    RelationWord("grandmother", "person", ("grandmother", "grandma", "granny"), ("おばあちゃん", "祖母")),
    RelationWord("grandfather", "person", ("grandfather", "grandpa"), ("おじいちゃん", "祖父")),
    RelationWord("colleague", "person", ("colleague", "coworker", "co-worker"), ("同僚",)),
    RelationWord("boss", "person", ("boss", "manager"), ("上司",)),
    RelationWord("friend", "person", ("best friend", "friend"), ("親友", "友達", "友人")),
    RelationWord("partner", "person", ("partner", "girlfriend", "boyfriend", "fiancé", "fiancée"), ("彼氏", "恋人", "婚約者")),
    RelationWord("ex", "person", ("ex-wife", "ex-husband", "ex-girlfriend", "ex-boyfriend", "ex"), ("元彼", "元カレ", "元カノ", "元妻", "元夫")),
    RelationWord("neighbour", "person", ("neighbour", "neighbor"), ("隣人",)),
    RelationWord("dog", "pet", ("dog", "puppy"), ("愛犬", "犬")),
    RelationWord("cat", "pet", ("cat", "kitten"), ("愛猫", "猫", "ねこ")),
    RelationWord("rabbit", "pet", ("rabbit", "bunny"), ("うさぎ", "ウサギ")),
    RelationWord("hamster", "pet", ("hamster",), ("ハムスター",)),
    RelationWord("parrot", "pet", ("parrot",), ("インコ", "オウム")),
)

_BY_WORD: dict[str, RelationWord] = {w.casefold(): r for r in RELATION_WORDS for w in (*r.english, *r.japanese)}


def relation_of(word: str) -> RelationWord | None:
    """The relation a relation word says (either language), or ``None``."""
    return _BY_WORD.get(word.casefold())


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity a text names.

    Attributes:
        kind: ``person``, ``pet``, ``place`` or ``org``.
        name: Its name as written (honorifics stripped), or ``None`` (a relation alone: "my wife").
        relation: Its relation to the user (a :data:`RELATION_WORDS` key), or ``None``.
        start: Where it starts in the text.
    """

    kind: str
    name: str | None
    relation: str | None
    start: int = 0

    @property
    def key(self) -> str | None:
        """Its name as compared (:func:`name_key`), or ``None``."""
        return None if self.name is None else name_key(self.name)


def name_key(name: str) -> str:
    """A name as names are compared: NFKC, case-folded, spaces collapsed (never closer than that:
    "Sara" and "Sarah" stay two names)."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_EN_REL = _alternation([w for r in RELATION_WORDS for w in r.english])
_JA_REL = _alternation([w for r in RELATION_WORDS for w in r.japanese])
_NAME = r"(?-i:[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?(?: (?-i:[A-Z][a-z]+))?)"
_PLACE = r"(?-i:[A-Z][\w.'-]*(?: (?:(?:de|la|le|of|upon|am|on|-)\s)?[A-Z][\w.'-]*){0,3}(?:, (?-i:[A-Z][a-z]+(?: [A-Z][a-z]+)?))?)"
_ORG = r"(?-i:[A-Z][\w&.'-]*(?: (?:&|of|and|for|the) ?)?(?: ?[A-Z0-9][\w&.'-]*){0,3})"
_POSSESSOR = r"\b(?:my|our|the user's|user's)\s+(?:(?:older|younger|little|big|baby|elder|twin|new|old|late)\s+)?"

#: English patterns, most specific first: (regex, which group is the name, which the relation word).
_EN_PATTERNS: tuple[tuple[re.Pattern[str], int | None, int | None], ...] = (
    (re.compile(_POSSESSOR + rf"({_EN_REL})(?:,)?\s+(?:(?:is |was )?(?:named|called)\s+)?({_NAME})\b", re.I), 2, 1),
    (re.compile(rf"\b({_NAME}),\s+(?:my|our)\s+(?:(?:older|younger|little|big|best|elder)\s+)?({_EN_REL})\b", re.I), 1, 2),
    (re.compile(rf"\b({_NAME}) is my (?:(?:older|younger|little|big|best|elder)\s+)?({_EN_REL})\b", re.I), 1, 2),
    (re.compile(_POSSESSOR + rf"({_EN_REL})(?:'s)?\b", re.I), None, 1),
)
_EN_PLACE = re.compile(
    r"\b(?:live|lives|living|lived|moved|moving|move|relocated|relocating|based|born|grew up|raised|from|visited|visiting|"
    r"trip to|travel(?:l?ed|l?ing)? to|flew to|flying to|been to|going to|went to|stay(?:ed|ing)? in|in)\s+"
    rf"(?:to |in |at )?({_PLACE})"
)
_EN_ORG = re.compile(
    rf"\b(?:work|works|worked|working|job|intern(?:ing|ed)?|employed|hired|joined|joining|studies|study|studying)\s+(?:at|for|with|by)\s+({_ORG})"
)
_JA_NAME = r"(?:[ァ-ヶー]{2,8}|[一-龥々]{2,4}|[ぁ-ゖ]{2,4})"
_HONORIFIC = r"(?:さん|ちゃん|くん|君|様|さま|氏)"
_JA_PATTERNS: tuple[tuple[re.Pattern[str], int | None, int | None], ...] = (
    (re.compile(rf"(?<![一-龥々])({_JA_REL})の({_JA_NAME}?){_HONORIFIC}"), 2, 1),
    (re.compile(rf"(?<![一-龥々])({_JA_REL})の({_JA_NAME})(?=[がはをにともの、。！？!?　 ]|で[^き]|って|という|$)"), 2, 1),
    (re.compile(rf"({_JA_NAME})という({_JA_REL})"), 1, 2),
    (re.compile(rf"(?<![一-龥々ぁ-ゖ])({_JA_NAME}){_HONORIFIC}"), 1, None),
    (re.compile(rf"(?<![一-龥々])({_JA_REL})(?![一-龥々])"), None, 1),
)
_JA_PLACE = re.compile(r"([一-龥々ァ-ヶー]{2,8})(?:に住|在住|出身|に引っ?越|へ引っ?越|に旅行|へ旅行|に転勤)")
_JA_ORG = re.compile(r"([一-龥々ァ-ヶーA-Za-z]{2,12})(?:で働|に勤め|に勤務|勤務|に就職|に入社|に転職)")

# Capitalised words that are no name (sentence starts, days, months, words of address...).
_NOT_NAMES = frozenset(
    """i i'm i've i'd i'll a an the my our your his her their its we you he she they it this that these those
    what when where who whom whose which why how is are was were do does did have has had can could will would
    should shall may might must and or but so if then there here yes no not ok okay oh hi hello hey thanks thank
    please sorry well also just still now today yesterday tomorrow tonight last next every on in at for to of
    with from by after before since about as monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november december christmas easter
    mr mrs ms dr english japanese french german spanish chinese korean italian user assistant god
    mom mum dad grandma grandpa sis forget delete remove remember let lets let's sure great nice good""".split()
)
_JA_NOT_NAMES = frozenset(
    """仕事 会社 職場 趣味 名前 誕生日 実家 学校 部屋 料理 旅行 病気 結婚 家族 彼氏 彼女 車 家 こと もの ため 方 たち 達 犬 猫
    ペット 友達 友人 同僚 上司 先生 先輩 後輩 みんな 皆 全員 二人 ふたり 一人 ひとり 今日 昨日 明日 最近 今年 去年 来年 毎日 毎週
    誕生 写真 散歩 世話 お世話 ご飯 ごはん 相手 お店 店 病院 大学 高校 会議 電話 メール 連絡 話 手紙 プレゼント""".split()
)


def mentions(text: str) -> list[Mention]:
    """The entities ``text`` names, in the order they appear (one mention per span, the most
    specific pattern first; a place or an organisation is never also a person)."""
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in taken)

    def add(mention: Mention, start: int, end: int) -> None:
        if free(start, end):
            taken.append((start, end))
            found.append(mention)

    for rx, name_at, rel_at in (*_EN_PATTERNS, *_JA_PATTERNS):
        for m in rx.finditer(text):
            relation = relation_of(m.group(rel_at)) if rel_at else None
            name = m.group(name_at) if name_at else None
            if name is not None and name_at and not _is_name(name, text, m.start(name_at)):
                if relation is None:
                    continue
                name = None
            kind = relation.kind if relation is not None else "person"
            add(Mention(kind, name, relation.key if relation else None, m.start()), m.start(), m.end())
    for rx, kind in ((_EN_ORG, "org"), (_JA_ORG, "org"), (_EN_PLACE, "place"), (_JA_PLACE, "place")):
        for m in rx.finditer(text):
            name = _trimmed(m.group(1))
            if name and name_key(name) not in _NOT_NAMES and name not in _JA_NOT_NAMES and not _negated(text, m.start(1)):
                add(Mention(kind, name, None, m.start(1)), m.start(1), m.start(1) + len(name))
    for m in re.finditer(_NAME, text):
        if _is_name(m.group(0), text, m.start()) and not _sentence_start(text, m.start(), m.group(0)):
            add(Mention("person", m.group(0), None, m.start()), m.start(), m.end())
    return sorted(found, key=lambda mention: mention.start)


def _trimmed(name: str) -> str:
    words = name.split(" ")
    while words and name_key(words[-1]) in _NOT_NAMES:
        words.pop()
    return " ".join(words).rstrip(".,'")


def _is_name(name: str, text: str, start: int) -> bool:
    if _negated(text, start):
        return False
    if re.fullmatch(r"[ぁ-ゖァ-ヶー一-龥々]+", name):
        return name not in _JA_NOT_NAMES and relation_of(name) is None
    first = name.split(" ")[0]
    return name_key(first) not in _NOT_NAMES and relation_of(first) is None


def _negated(text: str, start: int) -> bool:
    """Whether the name at ``start`` follows "not" ("Sara, not Sarah": Sarah is not meant)."""
    return bool(re.search(r"\bnot\s+$|じゃなくて$|ではなく$", text[max(0, start - 12) : start], re.I))


def _sentence_start(text: str, start: int, name: str) -> bool:
    """Whether a capitalised word starts a sentence, where any word is capitalised: it counts as a
    name there only when a verb of a person follows ("Ana is...", "Alex lent...")."""
    before = text[:start].rstrip(" \"'(")
    if before and before[-1] not in ".!?:\n":
        return False
    rest = text[start + len(name) :]
    return not re.match(
        r"\s+(?:and I\b|(?:is|was|has been)\s+(?:my|a|an|the|\w+ing)\b|has\b|had\b|said\b|says\b|loves?\b|"
        r"likes?\b|hates?\b|works?\b|lives?\b|just\b|always\b|never\b|still\b|got\b|moved\b|wants?\b|started\b|"
        r"told\b|called\b|texted\b|lent\b|helped\b|came\b|went\b|gave\b|bought\b|drives?\b|plays?\b|turned\b|"
        r"broke\b|will\b|can\b|(?!(?:is|was|has|does|goes|gets|looks|seems|tastes|feels|sounds|means|makes|takes)\b)[a-z]+(?:es|s|ed)\b)",
        rest,
    )
