"""The relation vocabulary: which attributes hold one value and which accumulate, shared by the rules
and the LLM's instructions."""

from __future__ import annotations

import pytest

from memory_core.language.relations import (
    CHOICE,
    RELATIONS,
    asked_relations,
    one_value_relations,
    relation_summary,
    tells,
)
from memory_core.service.prompts.consolidation import build_consolidation_system_prompt


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("i live in berlin", "home"),
        ("call me ally", "name"),
        ("アリーと呼んでください", "name"),
        ("i work at contoso", "job"),
        ("i'm vegetarian", "diet"),
        ("i eat fish now", "diet"),
        ("i'm married", "relationship"),
        ("my phone number is 555-0199", "phone"),
        ("i'm reading dune", "reading"),
        ("the report deadline is friday", "deadline"),
    ],
)
def test_one_value_relations_are_slots(text: str, slot: str) -> None:
    assert slot in one_value_relations(text)


@pytest.mark.parametrize("text", ["i like cats", "i have a sister", "i speak french", "猫が好き"])
def test_accumulating_relations_fill_no_slot(text: str) -> None:
    assert one_value_relations(text) == set()


def test_choices_are_told_from_likings() -> None:
    assert CHOICE.search("i prefer the window seat") and CHOICE.search("紅茶派です") and CHOICE.search("和室がいいです")
    assert not CHOICE.search("i like tea") and not CHOICE.search("紅茶が好きです")


def test_the_llm_is_told_the_same_vocabulary() -> None:
    prompt = build_consolidation_system_prompt()
    assert relation_summary() in prompt
    for relation in RELATIONS:
        assert relation.examples in prompt
    assert len({r.name for r in RELATIONS}) == len(RELATIONS)


@pytest.mark.parametrize(
    ("question", "relation", "answer"),
    [
        ("Where does the user live?", "home", "We finally moved to Bristol last weekend"),
        ("What does the user do for work?", "job", "I'm a chef at a little bistro"),
        ("What is the user's job title?", "job", "I just got promoted to senior designer"),
        ("ユーザーの仕事は？", "job", "私は看護師です"),
        ("What is the user's relationship status?", "relationship", "I got engaged to Priya last Saturday"),
        ("What is the user's diet?", "diet", "I've gone fully vegan since March"),
        ("ユーザーのメールアドレスは？", "email", "これからはtaro.k@mail.example.comでお願いします"),
        ("How old is the user?", "age", "I turned 34 in May, I'm 34 years old"),
    ],
)
def test_a_question_asks_for_a_relation_a_memory_tells(question: str, relation: str, answer: str) -> None:
    asked = asked_relations(question)
    assert relation in [r.name for r in asked]
    assert any(tells(r, answer) for r in asked if r.name == relation)


@pytest.mark.parametrize(
    "question",
    [
        "How tall is the user?",
        "What is the user's religion?",
        "What is the user's favourite football team?",
        "What is the user's VPN password?",
        "ユーザーのマイナンバーは？",
        "ユーザーのAPIキーは？",
    ],
)
def test_questions_about_nothing_in_the_vocabulary_ask_for_no_relation(question: str) -> None:
    assert asked_relations(question) == ()


@pytest.mark.parametrize(
    ("relation", "text"),
    [
        ("job", "I'm a big fan of board games"),
        ("job", "テニスが好きです"),
        ("home", "I like living rooms with big windows"),
    ],
)
def test_what_does_not_tell_a_relation(relation: str, text: str) -> None:
    assert not tells(next(r for r in RELATIONS if r.name == relation), text)
