"""What a consolidation decision is made from and what it gives: the embedder's similarity thresholds,
a neighbouring memory and the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memory_core.domain.messages import MemoryEvent
from memory_core.domain.records import MemoryRecord

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Neighbour",
    "SimilarityThresholds",
    "Verdict",
    "shortened",
    "thresholds_for",
]


@dataclass(frozen=True, slots=True)
class SimilarityThresholds:
    """Cosine similarities that mean something for one embedder.

    Attributes:
        related: Below this a neighbour is not considered the same topic (except identical text).
        update: At or above this, same category and mostly shared content, a candidate refines the
            neighbour (UPDATE).
        duplicate: At or above this a statement without comparable content words is a restatement.
    """

    related: float
    update: float
    duplicate: float


#: Calibrated on the scenario suite (``tests/scenarios``) by sweeping each value with the others fixed;
#: the bands in which every scenario passes are noted. Keys are embedder names or name prefixes.
DEFAULT_THRESHOLDS: Mapping[str, SimilarityThresholds] = {
    # multilingual-e5-small: unrelated Japanese sentences score 0.84-0.88, related ones 0.92+.
    # Bands: related <= 0.90 (0.93 misses "I like jazz" -> "...especially Bill Evans"), update
    # 0.93-0.99 (0.995 misses a reworded plan), duplicate above 0.93 (0.90 lets "京都の紅葉の話は
    # 忘れて" delete "京都に住んでいます").
    "multilingual-e5-small": SimilarityThresholds(related=0.885, update=0.96, duplicate=0.975),
    # Feature hashing: paraphrases with other words score near 0, shared bigrams lift anything.
    # Bands: related <= 0.30 (0.40 misses a paraphrased forget), update 0.15-0.25 (0.30 misses
    # "来週京都に旅行する予定です" -> "来週京都へ旅行に行きます", cosine 0.28).
    "hash-": SimilarityThresholds(related=0.2, update=0.25, duplicate=0.9),
    # Anything else (for example an Azure OpenAI embedding): the values of DESIGN section 6.
    "*": SimilarityThresholds(related=0.6, update=0.78, duplicate=0.92),
}


def thresholds_for(
    embedder_name: str, table: Mapping[str, SimilarityThresholds] | None = None
) -> SimilarityThresholds:
    """The thresholds of an embedder: exact name, else the longest matching prefix, else ``"*"``."""
    table = DEFAULT_THRESHOLDS if table is None else table
    if embedder_name in table:
        return table[embedder_name]
    prefixes = [key for key in table if key != "*" and embedder_name.startswith(key)]
    if prefixes:
        return table[max(prefixes, key=len)]
    if "*" in table:
        return table["*"]
    return DEFAULT_THRESHOLDS["*"]


@dataclass(frozen=True, slots=True)
class Neighbour:
    """An existing active memory and its cosine similarity to the candidate."""

    record: MemoryRecord
    similarity: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the rules (or the model) decided, before the records are built.

    Attributes:
        event: ADD, UPDATE, DELETE or NONE.
        target: The existing memory affected (UPDATE, DELETE, NONE of a restatement).
        text: The memory text after the decision (ADD and UPDATE).
        reason: Why, in words.
        supersedes: The UPDATE replaces a contradicted memory (its text is not merged).
    """

    event: MemoryEvent
    target: MemoryRecord | None
    text: str | None
    reason: str
    supersedes: bool = False


def shortened(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
