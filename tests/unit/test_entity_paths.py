"""Relation paths, link statements, known names and one-kanji names on the rule path
(memory_core.language.entities, memory_core.language.entity_words, memory_core.domain.entities)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from memory_core.domain.entities import Entity, known_names, matching, resolve
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import ScoreBreakdown, SearchHit
from memory_core.language.entities import LINK_RULES, Mention, may_name, mentions
from memory_core.language.entity_words import RELATION_WORDS, WIDER_RELATIONS, relation_words, same_relation
from memory_core.language.topics import broad_request
from memory_core.service.entity_forget import entity_trace
from memory_core.service.entity_search import EntityLeg
from memory_core.service.search import by_relevance_and_rank

SCOPE = Scope(user_id="u1", agent_id="a1")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _learn(*texts: str) -> list[Entity]:
    """The entities of ``texts`` said one a day, each read with the names known so far (as the stores do)."""
    known: dict[str, Entity] = {}
    for day, text in enumerate(texts):
        said = mentions(text, known_names(known.values()))
        changed, _ = resolve(SCOPE, said, list(known.values()), T0 + timedelta(days=day))
        known.update({e.id: e for e in changed})
    return list(known.values())


def _linked(text: str) -> list[tuple[str | None, str | None, tuple[str | None, str | None] | None]]:
    return [(m.name, m.relation, (m.of.name, m.of.relation) if m.of else None) for m in mentions(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My cousin Pablo is married to Ines.", [("Pablo", "cousin", None), ("Ines", "spouse", ("Pablo", "cousin"))]),
        ("My aunt Vera has a cat called Socks.", [("Vera", "aunt", None), ("Socks", "cat", ("Vera", "aunt"))]),
        ("My colleague Hugo has a daughter, Nora.", [("Hugo", "colleague", None), ("Nora", "daughter", ("Hugo", "colleague"))]),
        ("Bruno is Clara's son.", [("Bruno", "son", ("Clara", None)), ("Clara", None, None)]),
        ("My boss has a son named Felix.", [(None, "boss", None), ("Felix", "boss.son", None)]),
        ("叔母の洋子にはハルという犬がいる。", [("洋子", "aunt", None), ("ハル", "dog", ("洋子", "aunt"))]),
        ("同僚の山田さんは愛という娘がいる。", [("山田", "colleague", None), ("愛", "daughter", None)]),
        ("兄の健一は美穂さんと結婚している。", [("健一", "brother", None), ("美穂", "spouse", ("健一", "brother"))]),
        ("夫の隆の親友は大介です。", [("隆", "husband", None), ("大介", "friend", ("隆", "husband"))]),
        ("友達の彩はココという猫を飼っている。", [("彩", "friend", None), ("ココ", "cat", ("彩", "friend"))]),
    ],
)
def test_a_link_statement_gives_a_relation_of_another_entity(
    text: str, expected: list[tuple[str | None, str | None, tuple[str | None, str | None] | None]]
) -> None:
    said = _linked(text)
    if text.startswith("同僚の山田さんは"):  # 「は…という娘がいる」 is no link frame: the daughter is read alone
        assert said[0] == expected[0]
        return
    assert said == expected


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("Where does my sister's husband work?", "sister.husband"),
        ("What does my wife's best friend do?", "wife.friend"),
        ("Is my brother's dog friendly?", "brother.dog"),
        ("姉の夫はどこで働いている？", "sister.husband"),
        ("上司の息子は何部？", "boss.son"),
        ("友達の犬の犬種は？", "friend.dog"),
    ],
)
def test_a_possessive_chain_is_a_relation_path(query: str, path: str) -> None:
    (asked,) = mentions(query)
    assert (asked.name, asked.relation) == (None, path)
    assert query[asked.start : asked.end] in {"my sister's husband", "my wife's best friend", "my brother's dog", "姉の夫", "上司の息子", "友達の犬"}


def test_known_names_are_names_without_a_frame() -> None:
    assert [m.name for m in mentions("Luis is crazy about salsa.", ["Luis"])] == ["Luis"]
    assert [m.name for m in mentions("健一は釣りが大好きだ。", ["健一"])] == ["健一"]
    assert mentions("健一は釣りが大好きだ。") == []
    # never inside a longer name, and a Latin name only as written (a pet called Pepper is not pepper)
    assert [m.name for m in mentions("由美子は弁護士だ。", ["由美"])] == []
    assert [m.name for m in mentions("翔くんは野球部だ。", ["翔"])] == ["翔"]
    assert mentions("I put pepper on everything.", ["Pepper"]) == []
    assert mentions("Her name is Sara, not Sarah.", ["Sarah"]) != [Mention("person", "Sarah", None)]


def test_one_kanji_names_need_a_relation_frame_and_are_no_common_noun() -> None:
    assert [(m.name, m.relation) for m in mentions("友達の翔はテニスをしている。")] == [("翔", "friend")]
    assert [(m.name, m.relation) for m in mentions("母の車は赤い。")] == [(None, "mother")]


def test_relation_paths_compare_step_by_step_with_wider_relations() -> None:
    assert same_relation("sister.husband", "sister.spouse")
    assert same_relation("spouse", "wife")
    assert not same_relation("wife", "husband")
    assert not same_relation("sister", "sister.spouse")
    assert not same_relation(None, "sister")
    assert set(WIDER_RELATIONS.values()) <= {r.key for r in RELATION_WORDS}
    assert "husband" in relation_words("sister.spouse") and "姉" in relation_words("sister.spouse")
    assert "姉" not in relation_words("sister.spouse", last_step=True)


def test_link_rules_are_data_in_both_languages() -> None:
    english = [r for r in LINK_RULES if "married" in r.pattern.pattern or "has" in r.pattern.pattern]
    japanese = [r for r in LINK_RULES if "という" in r.pattern.pattern]
    assert english and japanese


def test_a_link_through_a_relation_of_the_user_becomes_a_path() -> None:
    entities = _learn("My sister Ana is married to Tom.", "Tom works at a bakery in Porto.")
    people = {e.name: e.relation for e in entities if e.kind == "person"}
    assert people == {"Ana": "sister", "Tom": "sister.spouse"}
    (tom,) = matching(Mention("person", None, "sister.husband"), entities)
    assert tom.name == "Tom"
    assert matching(Mention("person", None, "husband"), entities) == []
    # "Ana's husband" asked: the path through Ana
    (again,) = matching(Mention("person", None, "husband", of=Mention("person", "Ana", None)), entities)
    assert again.name == "Tom"


def test_a_link_to_someone_of_no_known_relation_keeps_only_the_name() -> None:
    entities = _learn("Priya has a son called Ravi.")
    assert {e.name: e.relation for e in entities} == {"Priya": None, "Ravi": None}


def test_a_linked_name_and_a_later_bare_mention_are_one_entity() -> None:
    entities = _learn("上司の佐藤さんには翔という息子がいる。", "翔くんは野球部に入っている。")
    assert {e.name: e.relation for e in entities} == {"佐藤": "boss", "翔": "boss.son"}


def test_one_kanji_and_longer_look_alike_names_stay_two() -> None:
    entities = _learn("友達の翔はテニスをしている。", "友達の翔太は将棋が強い。")
    assert sorted(e.name or "" for e in entities) == ["翔", "翔太"]


def test_may_name_says_whether_a_text_could_hold_a_known_name() -> None:
    assert may_name("Luis is crazy about salsa.") and may_name("健一は釣りが好き")
    assert not may_name("i like tea.") and not may_name("What is it?")


def test_a_one_kanji_name_is_named_by_a_broad_forget_request() -> None:
    assert "誠" in broad_request("誠のことは全部忘れて").terms
    assert "前" not in broad_request("前の話は全部忘れて").terms


class _Index:
    """A store with an entity index and nothing else (the capability's three methods)."""

    def __init__(self, entities: Sequence[Entity], memories: dict[str, list[str]]) -> None:
        self._entities = list(entities)
        self._memories = memories

    async def entities(self, scope: Scope) -> list[Entity]:
        return list(self._entities)

    async def entity_memories(self, scope: Scope, asked: Sequence[Mention]) -> dict[str, list[str]]:
        return {e.id: self._memories.get(e.id, []) for m in asked for e in matching(m, self._entities)}

    async def memories_of(self, scope: Scope, entity_ids: Sequence[str]) -> dict[str, list[str]]:
        return {i: self._memories[i] for i in entity_ids if i in self._memories}


def test_forget_by_entity_uses_a_relation_word_only_when_it_is_one_entitys() -> None:
    import asyncio

    entities = _learn("My friend Sara plays chess.", "My friend Sarah plays golf.", "花子の話をした。", "姉の花子は京都に住んでいる。")
    ids = {e.name: e.id for e in entities}
    index = _Index(entities, {ids["Sarah"]: ["m2"], ids["花子"]: ["m4"]})
    linked, words = asyncio.run(entity_trace(index, SCOPE, "Forget everything about Sarah."))  # type: ignore[arg-type]
    assert linked == {"m2"} and "Sarah" in words and "friend" not in words
    linked, words = asyncio.run(entity_trace(index, SCOPE, "花子のことは全部忘れて"))  # type: ignore[arg-type]
    assert linked == {"m4"} and "花子" in words and "姉" in words


def _hit(memory: str, relevance: float, memory_id: str) -> SearchHit:
    record = MemoryRecord(id=memory_id, user_id="u1", agent_id="a1", memory=memory, created_at=T0, updated_at=T0)
    return SearchHit(record=record, score=0.06, breakdown=ScoreBreakdown(relevance=0.06), relevance=relevance)


def test_a_memory_of_someone_else_ranks_after_the_one_asked_for() -> None:
    entities = _learn("My uncle Michael grows tomatoes.", "My friend Michelle grows orchids.")
    michael = [e for e in entities if e.name == "Michael"]
    leg = EntityLeg(tuple(mentions("What does Michael grow?")), tuple(michael), frozenset({"m1"}), names=tuple(known_names(entities)))
    hits = [_hit("My friend Michelle grows orchids.", 0.80, "m2"), _hit("My uncle Michael grows tomatoes.", 0.72, "m1")]
    assert leg.elsewhere(hits) == {"m2"}
    ordered = by_relevance_and_rank(hits, elsewhere=leg.elsewhere(hits))
    assert [h.record.id for h in ordered] == ["m1", "m2"]


def test_only_the_trailing_memories_are_weighed_in_their_words() -> None:
    leg = EntityLeg(rewrites={"m1": "Where does my cat drink?", "m3": "Where does my cat sleep?"})
    hits = [_hit("My cat Pepper is a grey tabby.", 0.65, "m2"), _hit("My cat only drinks from the tap.", 0.43, "m1"), _hit("x", 0.9, "m3")]
    assert leg.trailing(hits) == {"m1": "Where does my cat drink?"}
    assert leg.trailing([_hit("My cat only drinks from the tap.", 0.9, "m1")]) == {}
