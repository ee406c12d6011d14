"""Synthetic benchmark data: random sentences of a mixed English and Japanese vocabulary, random unit
vectors, the categories of the synthetic memories."""

from __future__ import annotations

import numpy as np

__all__ = ["CATEGORIES", "WORDS_EN", "WORDS_JA", "random_sentence", "sentence_pool", "unit_vectors"]

WORDS_EN = (
    "coffee tea travel hotel window seat flight kyoto tokyo osaka spicy food allergy peanuts meeting monday "
    "friday morning evening budget family daughter son birthday gift running yoga piano book novel python "
    "azure cloud deploy vegetarian sushi ramen train bus car bicycle weekend holiday doctor dentist "
    "appointment project deadline report manager team quiet room ocean view onsen"
).split()
WORDS_JA = (
    "コーヒー 紅茶 旅行 旅館 窓側 座席 京都 東京 大阪 辛い 料理 アレルギー 会議 月曜 金曜 朝 夜 予算 家族 娘 息子 "
    "誕生日 プレゼント ランニング ヨガ ピアノ 小説 温泉 新幹線 週末 休暇 歯医者 予約 締め切り 報告"
).split()
#: The categories a synthetic memory gets (uniformly).
CATEGORIES = ("preference", "constraint", "profile", "plan", "routine")


def random_sentence(rng: np.random.Generator) -> str:
    """5-11 random words, Japanese (run together) or English (spaced) with even odds."""
    words = WORDS_JA if rng.random() < 0.5 else WORDS_EN
    picked = rng.choice(len(words), size=int(rng.integers(5, 12)), replace=True)
    sep = "" if words is WORDS_JA else " "
    return sep.join(words[i] for i in picked)


def sentence_pool(size: int, seed: int) -> list[str]:
    """``size`` random sentences (:func:`random_sentence`) from a generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    return [random_sentence(rng) for _ in range(size)]


def unit_vectors(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    """``n`` random float32 unit vectors of ``dims`` dimensions (Gaussian, normalised)."""
    matrix = rng.standard_normal((n, dims)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix
