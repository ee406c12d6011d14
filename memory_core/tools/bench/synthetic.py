"""Synthetic benchmark data: random sentences of a mixed English and Japanese vocabulary, random unit
vectors, the categories of the synthetic memories."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus

__all__ = [
    "CATEGORIES",
    "WORDS_EN",
    "WORDS_JA",
    "random_sentence",
    "sentence_pool",
    "synthetic_memory",
    "unit_vectors",
]

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


def synthetic_memory(
    rng: np.random.Generator,
    *,
    memory_id: str,
    scope: tuple[str, str],
    updated: datetime,
    categories: Sequence[str] = CATEGORIES,
    status: MemoryStatus = MemoryStatus.ACTIVE,
    episode_share: float | None = None,
    embedding: list[float] | None = None,
) -> MemoryRecord:
    """A benchmark memory (unvalidated) of scope ``(user_id, agent_id)``, created and last updated at
    ``updated``, with random text (:func:`random_sentence`), category, importance, retention score and
    access count.

    Args:
        rng: Where the random values come from, drawn in the order of the fields.
        memory_id: The memory's id.
        scope: Its user and agent ids.
        updated: When it was created and last updated.
        categories: The categories it may get (uniformly).
        status: Its status.
        episode_share: The odds of an episode rather than a fact (``None``: a fact, and nothing drawn).
        embedding: Its vector (``None``: none).
    """
    user_id, agent_id = scope
    memory = random_sentence(rng)
    category = str(rng.choice(categories))
    importance = float(rng.random())
    kind = MemoryKind.FACT
    if episode_share is not None and rng.random() < episode_share:
        kind = MemoryKind.EPISODE
    return MemoryRecord.model_construct(
        id=memory_id,
        user_id=user_id,
        agent_id=agent_id,
        memory=memory,
        summary="",
        category=category,
        importance=importance,
        confidence=0.6,
        status=status,
        source="bench",
        kind=kind,
        retention_score=float(rng.random()),
        access_count=int(rng.integers(0, 30)),
        created_at=updated,
        updated_at=updated,
        last_accessed_at=None,
        expires_at=None,
        metadata={},
        provenance=[],
        embedding=embedding,
    )


def sentence_pool(size: int, seed: int) -> list[str]:
    """``size`` random sentences (:func:`random_sentence`) from a generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    return [random_sentence(rng) for _ in range(size)]


def unit_vectors(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    """``n`` random float32 unit vectors of ``dims`` dimensions (Gaussian, normalised)."""
    matrix = rng.standard_normal((n, dims)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix
