"""The word tables of entity mentions, as data: the relation words of both languages under one key
(:data:`RELATION_WORDS`), the relations a wider one covers (:data:`WIDER_RELATIONS`: a husband is a
spouse) and the single-kanji nouns that are no name after a relation word (:data:`ONE_KANJI_NOUNS`).

A relation may be a **path**: the relation of an entity to another entity the user knows, its steps
joined by a dot (``sister.spouse``: the sister's husband or wife; ``friend.dog``). :func:`same_relation`
compares two paths step by step, each step equal or one the wider relation of the other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ONE_KANJI_NOUNS",
    "PATH_SEPARATOR",
    "RELATION_WORDS",
    "WIDER_RELATIONS",
    "RelationWord",
    "path_steps",
    "relation_of",
    "relation_words",
    "same_relation",
]


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
    RelationWord("spouse", "person", ("spouse",), ("配偶者",)),
    RelationWord("son", "person", ("son",), ("息子さん", "息子")),
    RelationWord("daughter", "person", ("daughter",), ("娘さん", "お嬢さん", "娘")),
    RelationWord("mother", "person", ("mother", "mom", "mum"), ("お母さん", "母親", "母")),
    RelationWord("father", "person", ("father", "dad"), ("お父さん", "父親", "父")),
    RelationWord("grandmother", "person", ("grandmother", "grandma", "granny"), ("おばあちゃん", "祖母")),
    RelationWord("grandfather", "person", ("grandfather", "grandpa"), ("おじいちゃん", "祖父")),
    RelationWord("grandchild", "person", ("grandson", "granddaughter", "grandchild"), ("お孫さん", "孫")),
    RelationWord("uncle", "person", ("uncle",), ("叔父", "伯父")),
    RelationWord("aunt", "person", ("aunt", "auntie"), ("叔母", "伯母")),
    RelationWord("cousin", "person", ("cousin",), ("いとこ", "従兄弟", "従姉妹", "従兄", "従姉", "従弟", "従妹")),
    RelationWord("nephew", "person", ("nephew",), ("甥っ子", "甥")),
    RelationWord("niece", "person", ("niece",), ("姪っ子", "姪")),
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

#: The relations a wider relation covers: "my sister's spouse" is her husband or her wife, so a
#: path asked with one finds the other's wider step (``sister.husband`` finds ``sister.spouse``).
WIDER_RELATIONS: dict[str, str] = {"husband": "spouse", "wife": "spouse"}

#: How the steps of a relation path are joined (``sister.spouse``).
PATH_SEPARATOR = "."

#: Single-kanji nouns that follow a relation word and are no name (「母の車は」, 「姉の夢は」); any
#: other single kanji there is read as a one-kanji given name (「友達の翔は」).
ONE_KANJI_NOUNS = frozenset(
    "車家夢話声顔手足目口耳鼻髪服靴店本絵歌字癖味体腕肩腰膝歯胃心命姿名方元前後横隣側上下中外内分番時日"
    "年月朝昼夜春夏秋冬金物事机席部課件鳥魚花木草庭畑村町市県国駅道川山海空雨雪風火水酒茶肉米薬病傷熱力"
    "気愛恋役職姓頃所為方側器具箱鍵紙傘鞄財布皿箸頭首背肌腹指爪骨血汗涙息笑泣怒時分秒週度回件通"
)

_BY_WORD: dict[str, RelationWord] = {w.casefold(): r for r in RELATION_WORDS for w in (*r.english, *r.japanese)}
_BY_KEY: dict[str, RelationWord] = {r.key: r for r in RELATION_WORDS}


def relation_of(word: str) -> RelationWord | None:
    """The relation a relation word says (either language), or ``None``."""
    return _BY_WORD.get(word.casefold())


def path_steps(relation: str) -> list[str]:
    """The steps of a relation path (``sister.spouse`` → ``["sister", "spouse"]``)."""
    return relation.split(PATH_SEPARATOR)


def relation_words(relation: str | None, *, last_step: bool = False) -> tuple[str, ...]:
    """The words (both languages) that say the steps of ``relation`` (only its last with
    ``last_step``), and those of the narrower relations a wide step covers (spouse: husband, wife)."""
    if not relation:
        return ()
    steps = path_steps(relation)
    words: list[str] = []
    for step in steps[-1:] if last_step else steps:
        for key in (step, *(k for k, wider in WIDER_RELATIONS.items() if wider == step)):
            found = _BY_KEY.get(key)
            if found is not None:
                words += [*found.english, *found.japanese]
    return tuple(dict.fromkeys(words))


def _same_step(a: str, b: str) -> bool:
    return a == b or WIDER_RELATIONS.get(a) == b or WIDER_RELATIONS.get(b) == a


def same_relation(a: str | None, b: str | None) -> bool:
    """Whether two relations (or paths) are the same: as many steps, each equal or one the wider
    relation of the other (``sister.husband`` and ``sister.spouse``; never ``wife`` and ``husband``)."""
    if a is None or b is None:
        return False
    steps_a, steps_b = path_steps(a), path_steps(b)
    return len(steps_a) == len(steps_b) and all(_same_step(x, y) for x, y in zip(steps_a, steps_b, strict=True))
