"""Scoring functions of the ranking profiles, and the keyword analyzer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memory_core.domain.ranking import (
    MEMORY_PRIORITY,
    MEMORY_RECENCY,
    FunctionKind,
    Interpolation,
    ScoringFunction,
    apply_profile,
    profile_for,
)
from memory_core.domain.search import RankingProfile
from memory_core.language.text import analyze, index_terms, query_terms

DAY = 86400.0
NOW = 1_800_000_000.0


def test_profiles_are_the_designs() -> None:
    assert profile_for(RankingProfile.IMPORTANT) is MEMORY_PRIORITY
    assert profile_for(RankingProfile.RECENT) is MEMORY_RECENCY
    assert profile_for(RankingProfile.NONE) is None
    assert [(f.field, f.boost, f.interpolation.value) for f in MEMORY_PRIORITY.functions] == [
        ("importance", 2.0, "linear"),
        ("retention_score", 1.5, "linear"),
        ("access_count", 1.5, "logarithmic"),
    ]
    (fresh,) = MEMORY_RECENCY.functions
    assert (fresh.kind, fresh.field, fresh.boost, fresh.boosting_duration_days) == (
        FunctionKind.FRESHNESS,
        "updated_at",
        2.0,
        90.0,
    )


def test_magnitude_linear_and_constant_beyond_range() -> None:
    f = ScoringFunction(FunctionKind.MAGNITUDE, "importance", 8.0, Interpolation.LINEAR, 0.0, 1.0)
    assert f.boosts(np.array([0.0, 0.5, 1.0]), now_epoch=NOW) == pytest.approx([1.0, 4.5, 8.0])
    counts = ScoringFunction(
        FunctionKind.MAGNITUDE, "access_count", 4.0, Interpolation.LOGARITHMIC, 0.0, 20.0
    )
    g = counts.position(np.array([0.0, 1.0, 20.0, 500.0]), now_epoch=NOW)
    assert g == pytest.approx([0.0, math.log(2) / math.log(21), 1.0, 1.0])
    bounded = ScoringFunction(
        FunctionKind.MAGNITUDE, "x", 2.0, Interpolation.LINEAR, 0.0, 10.0, constant_boost_beyond_range=False
    )
    assert bounded.position(np.array([11.0, -1.0]), now_epoch=NOW) == pytest.approx([0.0, 0.0])


def test_freshness_is_linear_over_the_duration() -> None:
    (f,) = MEMORY_RECENCY.functions
    updated = NOW - np.array([0.0, 45.0, 90.0, 200.0, -5.0]) * DAY
    assert f.position(updated, now_epoch=NOW) == pytest.approx([1.0, 0.5, 0.0, 0.0, 1.0])


def test_reference_example_multipliers() -> None:
    columns = {
        "importance": np.array([1.0, 0.05]),
        "retention_score": np.array([0.5 ** (75 / 45) + 0.35, 0.35 + 0.65 * 0.05]),
        "access_count": np.array([20.0, 0.0]),
        "updated_at": np.array([NOW - 75 * DAY, NOW]),
    }
    relevance = np.array([1.0, 1.0])
    important, _, _ = apply_profile(relevance, MEMORY_PRIORITY, columns, now_epoch=NOW)
    recent, _, _ = apply_profile(relevance, MEMORY_RECENCY, columns, now_epoch=NOW)
    assert important[0] > important[1]
    assert recent[1] > recent[0]
    none, multiplier, _ = apply_profile(relevance, None, columns, now_epoch=NOW)
    assert list(none) == [1.0, 1.0] and list(multiplier) == [1.0, 1.0]


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("コーヒーが好き", ["コー", "ーヒ", "ヒー", "ーが", "が好", "好き"]),
        ("京都", ["京都"]),
        ("猫", ["猫"]),
        ("Bob's COFFEE, please!", ["bob", "coffee", "please"]),
        ("ＡＢＣ１２３", ["abc123"]),
        ("京都 trip 2026", ["京都", "trip", "2026"]),
    ],
)
def test_analyzer(text: str, terms: list[str]) -> None:
    assert analyze(text) == terms


def test_analyzer_never_splits_japanese_into_single_characters() -> None:
    for term in analyze("来週の京都旅行では旅館に泊まりたいです"):
        assert len(term) == 2


# -- the keyword index's analysis ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("辛い料理が苦手です", "辛い料理は苦手だ"),  # particles and the copula do not decide
        ("京都に行きたい", "京都へ行きました"),  # inflections meet at the base form
        ("シュミレーションの練習", "シミュレーションの練習"),  # spelling variants meet
        ("ＰＹＴＨＯＮが得意", "pythonが得意"),  # width
    ],
)
def test_japanese_is_analysed_as_japanese(a: str, b: str) -> None:
    assert set(query_terms(a)) == set(query_terms(b))
    assert set(query_terms(a)) <= set(index_terms(b))


def test_japanese_terms_are_words_not_bigrams() -> None:
    assert index_terms("京都の旅館が好きです。") == ["京都", "の", "旅館", "が", "好き", "です"]
    # a query searches for what it is about; particles and auxiliaries only when nothing else is left
    assert query_terms("京都の旅館が好きです。") == ["京都", "旅館", "好き"]
    assert query_terms("ですか？") == ["です", "か"]
    # mixed text: each language as itself
    assert index_terms("Kyotoの旅館 paintings") == ["kyoto", "の", "旅館", "paint"]
    # hangul keeps bigrams
    assert index_terms("안녕하세요") == analyze("안녕하세요")


def test_the_analysis_is_the_same_in_any_thread() -> None:
    import concurrent.futures

    texts = ["京都の旅館が好きです", "辛い料理は苦手です", "来週大阪へ出張します"] * 20
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(index_terms, texts)) == [index_terms(t) for t in texts]


def test_long_japanese_text_is_analysed_in_pieces() -> None:
    text = "京都の旅館が好きです。" * 3000  # 33,000 characters, about 99 KB: over the analyser's limit
    terms = index_terms(text)
    assert terms.count("旅館") == 3000 and len(query_terms(text)) == 9000
