"""Entity mentions on the rule path (memory_core.language.entities)."""

from __future__ import annotations

import pytest

from memory_core.language.entities import RELATION_WORDS, mentions, name_key, relation_of


def _said(text: str) -> list[tuple[str, str | None, str | None]]:
    return [(m.kind, m.name, m.relation) for m in mentions(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My sister Ana works at Contoso.", [("person", "Ana", "sister"), ("org", "Contoso", None)]),
        ("Ana, my sister, lives in Paris, Texas.", [("person", "Ana", "sister"), ("place", "Paris, Texas", None)]),
        ("My dog Rex loves the park.", [("pet", "Rex", "dog")]),
        ("My ex, Jordan, still texts me sometimes.", [("person", "Jordan", "ex")]),
        ("My coworker Priyanka helped me.", [("person", "Priyanka", "colleague")]),
        ("What does my wife drive?", [("person", None, "wife")]),
        ("Who is the user's ex?", [("person", None, "ex")]),
        ("Alex is moving to Berlin.", [("person", "Alex", None), ("place", "Berlin", None)]),
        ("Forget everything about Alex.", [("person", "Alex", None)]),
        ("I visited Paris last year.", [("place", "Paris", None)]),
        ("姉の花子は東京に住んでいる。", [("person", "花子", "sister"), ("place", "東京", None)]),
        ("うちの猫のミケが好き", [("pet", "ミケ", "cat")]),
        ("同僚の田中さんはトヨタで働いている", [("person", "田中", "colleague"), ("org", "トヨタ", None)]),
        ("妻の仕事は？", [("person", None, "wife")]),
        ("元彼の健太とはもう会わない", [("person", "健太", "ex")]),
        ("I'm a nurse.", []),
    ],
)
def test_mentions_name_kind_and_relation(text: str, expected: list[tuple[str, str | None, str | None]]) -> None:
    assert _said(text) == expected


def test_a_name_after_not_is_not_meant() -> None:
    assert _said("Her name is Sara, not Sarah.") == [("person", "Sara", None)]


def test_kinship_inside_other_words_is_no_relation() -> None:
    assert _said("大丈夫です。母国は日本。") == []
    assert _said("祖母の家に行った") == [("person", None, "grandmother")]


def test_honorifics_are_stripped() -> None:
    assert _said("田中さんと会った") == [("person", "田中", None)]
    assert _said("ミケちゃんが可愛い") == [("person", "ミケ", None)]


def test_a_capitalised_sentence_start_is_no_name() -> None:
    assert _said("Today was long. Dinner was nice.") == []


def test_relation_words_share_one_key_in_both_languages() -> None:
    sister = relation_of("sister")
    assert sister is not None and sister.key == "sister"
    assert relation_of("姉") is sister and relation_of("お姉さん") is sister and relation_of("妹") is sister
    assert relation_of("嫁") is relation_of("wife")
    keys = [r.key for r in RELATION_WORDS]
    assert len(keys) == len(set(keys))


def test_look_alike_names_keep_their_keys() -> None:
    assert name_key("Sara") != name_key("Sarah")
    assert name_key(" ANA ") == name_key("ana")
