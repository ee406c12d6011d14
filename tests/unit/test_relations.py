"""The relation vocabulary: which attributes hold one value and which accumulate, shared by the rules
and the LLM's instructions."""

from __future__ import annotations

import pytest

from memory_core.language.relations import CHOICE, RELATIONS, one_value_relations, relation_summary
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
