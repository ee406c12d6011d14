"""Relevance: a query-to-memory cosine rescaled for the embedder and the query's script, 0 to 1."""

from __future__ import annotations

import pytest

from memory_core.domain.relevance import RelevanceCalibration, calibration_for, relevance
from memory_core.domain.search import MemorySearchOptions
from memory_core.errors import ValidationError

E5 = RelevanceCalibration(latin=0.77, japanese=0.80)


def test_the_calibration_is_found_by_name_prefix_and_none_without_one() -> None:
    assert calibration_for("multilingual-e5-small-q4") == E5
    assert calibration_for("hash-32") is None
    assert calibration_for("text-embedding-3-small") is None


@pytest.mark.parametrize(
    ("cosine", "query", "expected"),
    [
        (0.77, "Where does the user live?", 0.5),
        (0.87, "Where does the user live?", 1.0),
        (0.67, "Where does the user live?", 0.0),
        (0.82, "Where does the user live?", 0.75),
        (0.80, "ユーザーはどこに住んでいる？", 0.5),
        (0.77, "ユーザーはどこに住んでいる？", 0.35),
        (0.99, "anything", 1.0),
        (-0.4, "anything", 0.0),
    ],
)
def test_relevance_is_the_cosine_around_the_scripts_midpoint(cosine: float, query: str, expected: float) -> None:
    assert relevance(cosine, query, "I live in Kyoto.", E5) == pytest.approx(expected)


def test_a_japanese_memory_takes_the_japanese_midpoint_for_an_english_query_too() -> None:
    assert relevance(0.80, "How tall is the user?", "猫を二匹飼っています", E5) == pytest.approx(0.5)


def test_min_score_is_a_relevance_between_0_and_1() -> None:
    assert MemorySearchOptions(min_score=0.5).min_score == 0.5
    for bad in (-0.1, 1.5, "high"):
        with pytest.raises((ValidationError, ValueError)):
            MemorySearchOptions.model_validate({"min_score": bad})
