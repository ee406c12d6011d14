"""Forget requests are recognised however people ask, in both languages, and only for what is theirs."""

from __future__ import annotations

import pytest

from memory_core.service.extraction.forget import forget_target


@pytest.mark.parametrize(
    ("said", "named"),
    [
        ("Please delete my medical information.", "My medical information"),
        ("Remove my address from your memory.", "My address"),
        ("Stop remembering my birthday.", "My birthday"),
        ("Please erase everything I said about my ex.", "Everything I said about my ex"),
        ("Forget everything about Alex.", "Everything about Alex"),
        ("健康のことは全部消して。", "健康"),
        ("住所は覚えないで。", "住所"),
        ("私の電話番号を削除してください。", "私の電話番号"),
    ],
)
def test_requests_to_forget(said: str, named: str) -> None:
    assert forget_target(said, None) == named


@pytest.mark.parametrize(
    "said", ["Delete the file.", "Can you remove the meeting on Friday?", "電気を消して。", "I deleted my old account."]
)
def test_requests_about_something_else(said: str) -> None:
    assert forget_target(said, None) is None


def test_a_pronoun_names_the_sentence_before() -> None:
    assert forget_target("Don't keep that.", "My PIN is in the drawer.") == "My PIN is in the drawer"
