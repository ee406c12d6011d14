"""How hybrid search fuses its legs, per query language."""

from __future__ import annotations

import pytest

from memory_core.domain.fusion import FUSIONS, Fusion, fusion_for, query_language


@pytest.mark.parametrize(
    ("query", "language"),
    [("京都の旅館", "ja"), ("ホテル", "ja"), ("旅館 in Kyoto", "ja"), ("ryokan in Kyoto", "*"), ("", "*"), ("서울", "*")],
)
def test_the_language_of_a_query(query: str, language: str) -> None:
    assert query_language(query) == language


def test_each_language_has_its_fusion_and_an_explicit_weight_wins() -> None:
    assert fusion_for("京都の旅館") == FUSIONS["ja"] and FUSIONS["ja"].text_match == "all"
    assert fusion_for("window seat") == FUSIONS["*"] and FUSIONS["*"].text_match == "any"
    assert fusion_for("京都の旅館", 2.5) == Fusion(vector_weight=2.5, text_match="all")
    assert all(0 < f.vector_weight <= 10 for f in FUSIONS.values())
