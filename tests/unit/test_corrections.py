"""Corrections: which value a correction puts in place of which, and the memory it corrects (pure)."""

from __future__ import annotations

import pytest

from memory_core.language.corrections import corrected, correction_pair


@pytest.mark.parametrize(
    ("said", "pair"),
    [
        ("Sorry, I meant Wednesday, not Monday.", ("Wednesday", "Monday")),
        ("My mistake, it starts at 7 pm, not 6 pm.", ("7 pm", "6 pm")),
        ("Oops, not Porto but Braga.", ("Braga", "Porto")),
        ("訂正です、名古屋じゃなくて岐阜です", ("岐阜", "名古屋")),
        ("ごめん、水曜じゃなくて金曜だった", ("金曜", "水曜")),
    ],
)
def test_a_correction_names_the_right_and_the_wrong_value(said: str, pair: tuple[str, str]) -> None:
    assert correction_pair(said) == pair


@pytest.mark.parametrize(
    "said",
    ["I like tea, not coffee.", "Actually, I'm not a fan of museums.", "紅茶じゃなくてコーヒーが好き", "I meant it."],
)
def test_what_is_not_a_correction(said: str) -> None:
    assert correction_pair(said) is None


def test_the_corrected_memory() -> None:
    assert corrected("The yoga class is on Monday (1 June 2026)", ("Wednesday", "Monday")) == "The yoga class is on Wednesday"
    assert corrected("出張は名古屋です", ("岐阜", "名古屋")) == "出張は岐阜です"
    assert corrected("I live in Lisbon", ("Braga", "Porto")) is None
