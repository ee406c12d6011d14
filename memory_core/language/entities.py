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
* A Japanese name needs a frame: a relation word before it (姉の花子, 同僚の田中さん; one kanji too,
  友達の翔は, unless it is a common noun: 母の車は) or an honorific after it (田中さん, ミケちゃん).
* A name the scope already knows (``known_names``) is a name wherever it stands, with or without a
  frame ("Luis is crazy about salsa", 「健一は釣りが大好きだ」), never inside a longer word (由美 in 由美子).
* A statement that links two entities (:data:`LINK_RULES`: "Ana is married to Tom", "Priya has a son
  called Ravi", 「佐藤さんには翔という息子がいる」, 「由美の親友は恵さんです」) gives the second one a relation
  *of the first* (:attr:`Mention.of`); "my sister's husband", 「上司の息子」 name a relation path
  (``sister.husband``, ``boss.son``).
* A place is what comes after "live in", "moved to", "from", "visited" (住んでいる, 出身, 在住...),
  an organisation what comes after "work at/for" (勤めている, で働いている); "Paris, Texas" is one name.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from memory_core.language.entity_words import (
    ONE_KANJI_NOUNS,
    PATH_SEPARATOR,
    RELATION_WORDS,
    RelationWord,
    relation_of,
)

__all__ = [
    "KINDS",
    "LINK_RULES",
    "RELATION_WORDS",
    "LinkRule",
    "Mention",
    "RelationWord",
    "may_name",
    "mentions",
    "name_key",
    "relation_of",
    "relation_of_key",
]

#: The kinds of entities.
KINDS = ("person", "pet", "place", "org")


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity a text names.

    Attributes:
        kind: ``person``, ``pet``, ``place`` or ``org``.
        name: Its name as written (honorifics stripped), or ``None`` (a relation alone: "my wife").
        relation: Its relation to the user (a :data:`RELATION_WORDS` key, or a path of them joined by
            dots: ``sister.spouse``), or, with :attr:`of`, its relation to that entity; or ``None``.
        start: Where it starts in the text.
        end: Where it ends in the text (0: unknown).
        of: The entity its relation is relative to ("Tom" in "Ana is married to Tom" is ``spouse``
            of Ana), or ``None``: the relation is to the user.
    """

    kind: str
    name: str | None
    relation: str | None
    start: int = 0
    end: int = 0
    of: Mention | None = field(default=None, compare=True)

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
_NAME = r"(?-i:[A-Z][a-z]+(?:[-'](?!s\b)[A-Z]?[a-z]+)?(?: (?-i:[A-Z][a-z]+))?)"
_PLACE = r"(?-i:[A-Z][\w.'-]*(?: (?:(?:de|la|le|of|upon|am|on|-)\s)?[A-Z][\w.'-]*){0,3}(?:, (?-i:[A-Z][a-z]+(?: [A-Z][a-z]+)?))?)"
_ORG = r"(?-i:[A-Z][\w&.'-]*(?: (?:&|of|and|for|the) ?)?(?: ?[A-Z0-9][\w&.'-]*){0,3})"
_POSSESSOR = r"\b(?:my|our|the user's|user's)\s+(?:(?:older|younger|little|big|baby|elder|twin|new|old|late)\s+)?"
_ADJ = r"(?:(?:older|younger|little|big|best|elder|baby|twin|new|old)\s+)?"

#: English patterns, most specific first: (regex, which group is the name, which the relation word;
#: a relation path's further steps are the groups after it).
_EN_PATTERNS: tuple[tuple[re.Pattern[str], int | None, int | None], ...] = (
    (
        re.compile(
            _POSSESSOR + rf"({_EN_REL})'s\s+{_ADJ}({_EN_REL})(?:'s\s+{_ADJ}({_EN_REL}))?"
            rf"(?:(?:,\s*|\s+(?:is\s+|was\s+)?(?:named|called)\s+)({_NAME}))?\b",
            re.I,
        ),
        4,
        1,
    ),
    (re.compile(_POSSESSOR + rf"({_EN_REL})(?:,)?\s+(?:(?:is |was )?(?:named|called)\s+)?({_NAME})\b", re.I), 2, 1),
    (re.compile(rf"\b({_NAME}),\s+(?:my|our)\s+{_ADJ}({_EN_REL})\b", re.I), 1, 2),
    (re.compile(rf"\b({_NAME}) is my {_ADJ}({_EN_REL})\b", re.I), 1, 2),
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
#: A name in a strong frame (before という, after a relation word and の): one kanji will do (翔).
_JA_NAME1 = r"(?:[ァ-ヶー]{2,8}|[一-龥々]{1,4}|[ぁ-ゖ]{2,4})"
_HONORIFIC = r"(?:さん|ちゃん|くん|君|様|さま|氏)"
_JA_AFTER_NAME = r"(?=[がはをにともの、。！？!?　 ]|で[^き]|って|という|$)"
_JA_PATTERNS: tuple[tuple[re.Pattern[str], int | None, int | None], ...] = (
    (re.compile(rf"(?<![一-龥々])({_JA_REL})の({_JA_REL})(?:の({_JA_REL}))?(?![一-龥々])"), None, 1),
    (re.compile(rf"(?<![一-龥々])({_JA_REL})の({_JA_NAME}?){_HONORIFIC}"), 2, 1),
    (re.compile(rf"(?<![一-龥々])({_JA_REL})の({_JA_NAME}){_JA_AFTER_NAME}"), 2, 1),
    (re.compile(rf"(?<![一-龥々])({_JA_REL})の([一-龥々])(?=[がはをにともの、。]|という)"), 2, 1),
    (re.compile(rf"({_JA_NAME})という({_JA_REL})"), 1, 2),
    (re.compile(rf"(?<![一-龥々ぁ-ゖ])({_JA_NAME}){_HONORIFIC}"), 1, None),
    (re.compile(rf"(?<![一-龥々])({_JA_REL})(?![一-龥々])"), None, 1),
)
_JA_PLACE = re.compile(r"([一-龥々ァ-ヶー]{2,8})(?:に住|在住|出身|に引っ?越|へ引っ?越|に旅行|へ旅行|に転勤)")
_JA_ORG = re.compile(r"([一-龥々ァ-ヶーA-Za-z]{2,12})(?:で働|に勤め|に勤務|勤務|に就職|に入社|に転職)")


@dataclass(frozen=True, slots=True)
class LinkRule:
    """A statement that links two entities: the group ``holder`` names the first (a name, a relation
    of the user, or both: "my sister Ana"), ``name`` the second, whose relation to the first is the
    relation word in the group ``rel``, else :attr:`relation`.

    Attributes:
        pattern: The statement.
        relation: The relation when the pattern has no ``rel`` group (``spouse`` for "married to").
    """

    pattern: re.Pattern[str]
    relation: str | None = None


_EN_HOLDER = rf"(?P<holder>{_POSSESSOR}(?:{_EN_REL})(?:,?\s+{_NAME})?|{_NAME})"
_JA_HOLDER = rf"(?P<holder>(?:{_JA_REL})の{_JA_NAME1}{_HONORIFIC}?|{_JA_NAME}{_HONORIFIC}?|{_JA_REL})"
_EN_COUNT = r"(?:a|an|one|two|three|her|his|their)\s+"

#: The statements that link two entities (both languages), as data.
LINK_RULES: tuple[LinkRule, ...] = (
    LinkRule(re.compile(rf"\b{_EN_HOLDER} (?:is|was|got|has been|'s) married to (?P<name>{_NAME})\b", re.I), "spouse"),
    LinkRule(re.compile(rf"\b{_EN_HOLDER} (?:is|was|got|has been|'s) engaged to (?P<name>{_NAME})\b", re.I), "partner"),
    LinkRule(
        re.compile(
            rf"\b{_EN_HOLDER} (?:has|had|has got|'s got) {_EN_COUNT}{_ADJ}(?P<rel>{_EN_REL})"
            rf"(?:,\s*|\s+(?:called|named)\s+)(?P<name>{_NAME})\b",
            re.I,
        )
    ),
    LinkRule(
        re.compile(
            rf"\b(?P<holder>{_NAME})'s\s+{_ADJ}(?P<rel>{_EN_REL})(?:,\s*|\s+(?:is\s+|was\s+)?(?:called|named)\s+|\s+)(?P<name>{_NAME})\b",
            re.I,
        )
    ),
    LinkRule(re.compile(rf"\b(?P<name>{_NAME}) is (?P<holder>{_NAME})'s {_ADJ}(?P<rel>{_EN_REL})\b", re.I)),
    LinkRule(re.compile(rf"{_JA_HOLDER}(?:に|には|にも)(?P<name>{_JA_NAME1}){_HONORIFIC}?という(?P<rel>{_JA_REL})が(?:い|お)")),
    LinkRule(re.compile(rf"{_JA_HOLDER}(?:に|には|にも)(?P<rel>{_JA_REL})の(?P<name>{_JA_NAME1}){_HONORIFIC}?が(?:い|お)")),
    LinkRule(re.compile(rf"{_JA_HOLDER}(?:は|が|も)(?P<name>{_JA_NAME1}){_HONORIFIC}?という(?P<rel>{_JA_REL})を飼")),
    LinkRule(re.compile(rf"{_JA_HOLDER}(?:は|が|も)(?P<name>{_JA_NAME1}){_HONORIFIC}?と結婚"), "spouse"),
    LinkRule(re.compile(rf"{_JA_HOLDER}の(?P<rel>{_JA_REL})は(?P<name>{_JA_NAME1}){_HONORIFIC}?(?=です|だ|。|、|$)")),
    LinkRule(re.compile(rf"{_JA_HOLDER}の(?P<rel>{_JA_REL})の(?P<name>{_JA_NAME1}){_HONORIFIC}?{_JA_AFTER_NAME}")),
)

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
    誕生 写真 散歩 世話 お世話 ご飯 ごはん 相手 お店 店 病院 大学 高校 会議 電話 メール 連絡 話 手紙 プレゼント
    犬種 猫種 種類 年齢 性格 職業 身長 体重 部活 好物 名字 苗字 住所 出身 うち 私 僕 俺 自分 わたし 彼 皆さん""".split()
)


class _Spans:
    """The mentions of one text and the spans they take (one mention per span)."""

    def __init__(self) -> None:
        self.found: list[Mention] = []
        self._taken: list[tuple[int, int]] = []

    def add(self, mention: Mention, start: int, end: int, *also: tuple[int, int]) -> None:
        """Add ``mention`` if its span (and the spans ``also`` it takes) is free."""
        spans = [(start, end), *also]
        if all(self._free(a, b) for a, b in spans):
            self._taken += spans
            self.found.append(mention)

    def _free(self, start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in self._taken)


def mentions(text: str, known_names: Iterable[str] = ()) -> list[Mention]:
    """The entities ``text`` names, in the order they appear (one mention per span, the most
    specific pattern first; a place or an organisation is never also a person).

    Args:
        text: What was said (or asked).
        known_names: The names (and aliases) of the scope's entities so far: each is a name wherever
            it stands in ``text``, as a whole word.
    """
    spans = _Spans()
    _links(text, spans)
    _frames(text, spans)
    for m in _known(text, known_names):
        if not _negated(text, m.start()):
            spans.add(Mention("person", m.group(0), None, m.start(), m.end()), m.start(), m.end())
    _places(text, spans)
    for m in re.finditer(_NAME, text):
        if _is_name(m.group(0), text, m.start()) and not _sentence_start(text, m.start(), m.group(0)):
            spans.add(Mention("person", m.group(0), None, m.start(), m.end()), m.start(), m.end())
    return sorted(spans.found, key=lambda mention: mention.start)


def _links(text: str, spans: _Spans) -> None:
    """The second entities of the link statements (:data:`LINK_RULES`): the spans of its name and of
    the relation word are theirs; the first entity is left to the frames."""
    for link in LINK_RULES:
        for m in link.pattern.finditer(text):
            linked = _linked(text, m, link)
            if linked is not None:
                word = (m.start("rel"), m.end("rel")) if "rel" in m.re.groupindex else (linked.start, linked.end)
                spans.add(linked, linked.start, linked.end, word)


def _frames(text: str, spans: _Spans) -> None:
    """The mentions the relation and name patterns read (both languages, most specific first)."""
    for rx, name_at, rel_at in (*_EN_PATTERNS, *_JA_PATTERNS):
        for m in rx.finditer(text):
            relation = relation_of(m.group(rel_at)) if rel_at else None
            name = m.group(name_at) if name_at else None
            if name is not None and name_at and not _is_name(name, text, m.start(name_at)):
                if relation is None:
                    continue
                name = None
            path = _path(relation, m, rel_at)
            kind = _kind_of(path) if path else "person"
            spans.add(Mention(kind, name, path, m.start(), m.end()), m.start(), m.end())


def _places(text: str, spans: _Spans) -> None:
    """The places and organisations (after "live in", "work at", 住んでいる, で働いている...)."""
    for rx, kind in ((_EN_ORG, "org"), (_JA_ORG, "org"), (_EN_PLACE, "place"), (_JA_PLACE, "place")):
        for m in rx.finditer(text):
            name = _trimmed(m.group(1))
            if name and name_key(name) not in _NOT_NAMES and name not in _JA_NOT_NAMES and not _negated(text, m.start(1)):
                end = m.start(1) + len(name)
                spans.add(Mention(kind, name, None, m.start(1), end), m.start(1), end)


def may_name(text: str) -> bool:
    """Whether ``text`` may name a name a scope already knows: it has a Japanese word, or a
    capitalised word that is not a common one (a store that reads a scope's names only for the texts
    that may need them asks this first)."""
    if re.search(r"[一-龥々ァ-ヶ]", text):
        return True
    return any(name_key(word) not in _NOT_NAMES for word in re.findall(r"\b[A-Z][a-z]+", text))


def _path(relation: RelationWord | None, m: re.Match[str], rel_at: int | None) -> str | None:
    """The relation of a match: its relation word's key, and those of the words after it that the
    pattern reads as further steps ("my sister's husband": ``sister.husband``)."""
    if relation is None or rel_at is None:
        return None
    steps = [relation.key]
    for at in range(rel_at + 1, (m.re.groups or 0) + 1):
        word = m.group(at)
        step = relation_of(word) if word else None
        if step is None:
            break
        steps.append(step.key)
    return PATH_SEPARATOR.join(steps)


def _kind_of(path: str) -> str:
    last = relation_of_key(path.split(PATH_SEPARATOR)[-1])
    return last.kind if last is not None else "person"


def relation_of_key(key: str) -> RelationWord | None:
    """The relation of a key (``sister``), or ``None``."""
    return next((r for r in RELATION_WORDS if r.key == key), None)


def _linked(text: str, m: re.Match[str], link: LinkRule) -> Mention | None:
    """The second entity of a link statement, its relation relative to the first (``None``: the
    match names no two entities)."""
    name = m.group("name")
    if not _is_name(name, text, m.start("name")) or _one_kanji_noun(name):
        return None
    word = m.groupdict().get("rel")
    relation = relation_of(word) if word else relation_of_key(link.relation or "")
    holder = _holder(text, m.group("holder"), m.start("holder"))
    if relation is None or holder is None:
        return None
    if holder.name is None and holder.relation is not None:  # "my sister has a son called Ravi"
        return Mention(relation.kind, name, f"{holder.relation}{PATH_SEPARATOR}{relation.key}", m.start("name"), m.end("name"))
    return Mention(relation.kind, name, relation.key, m.start("name"), m.end("name"), of=holder)


_HOLDER_PARTS = (
    re.compile(_POSSESSOR + rf"({_EN_REL}),?\s+({_NAME})$", re.I),
    re.compile(rf"({_JA_REL})の({_JA_NAME1}){_HONORIFIC}?$"),
)
_HOLDER_RELATION = (re.compile(_POSSESSOR + rf"({_EN_REL})$", re.I), re.compile(rf"({_JA_REL})$"))


def _holder(text: str, said: str, start: int) -> Mention | None:
    """The first entity of a link statement: a relation of the user and a name ("my sister Ana",
    「妻の由美」), a relation alone ("my boss"), or a name alone (honorific stripped)."""
    for rx in _HOLDER_PARTS:
        if (m := rx.match(said)) is not None:
            relation = relation_of(m.group(1))
            name = m.group(2) if _is_name(m.group(2), text, start + m.start(2)) else None
            if relation is not None:
                return Mention(relation.kind, name, relation.key, start, start + len(said))
    for rx in _HOLDER_RELATION:
        if (m := rx.match(said)) is not None and (relation := relation_of(m.group(1))) is not None:
            return Mention(relation.kind, None, relation.key, start, start + len(said))
    name = re.sub(rf"{_HONORIFIC}$", "", said)
    if re.fullmatch(r"[ぁ-ゖ]+", name) or not _is_name(name, text, start):
        return None
    return Mention("person", name, None, start, start + len(name))


def _one_kanji_noun(name: str) -> bool:
    return len(name) == 1 and name in ONE_KANJI_NOUNS


_LATIN_NAME = re.compile(r"[A-Za-z][\w' -]*")


def _known(text: str, names: Iterable[str]) -> list[re.Match[str]]:
    """Where the known ``names`` stand in ``text``: a Latin name as a whole word (as written), a
    Japanese one not inside a longer run of its script (由美 not in 由美子; an honorific may follow)."""
    wanted = sorted({n for n in names if n and n.strip()}, key=len, reverse=True)
    if not wanted:
        return []
    latin = [n for n in wanted if _LATIN_NAME.fullmatch(n)]
    other = [n for n in wanted if not _LATIN_NAME.fullmatch(n)]
    parts = []
    if latin:
        parts.append(rf"(?<![\w'-])(?:{_alternation(latin)})(?![\w-])")
    if other:
        parts.append(rf"(?<![一-龥々ァ-ヶー])(?:{_alternation(other)})(?={_HONORIFIC}|[^一-龥々ァ-ヶー]|$)")
    return list(re.finditer("|".join(parts), text))


def _trimmed(name: str) -> str:
    words = name.split(" ")
    while words and name_key(words[-1]) in _NOT_NAMES:
        words.pop()
    return " ".join(words).rstrip(".,'")


def _is_name(name: str, text: str, start: int) -> bool:
    if _negated(text, start):
        return False
    if re.fullmatch(r"[ぁ-ゖァ-ヶー一-龥々]+", name):
        return name not in _JA_NOT_NAMES and relation_of(name) is None and not _one_kanji_noun(name)
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
