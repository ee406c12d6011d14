"""A deterministic hashing embedder for tests and offline tooling.

Feature hashing of the analyzer's terms (words and CJK bigrams) and of character trigrams, with
BLAKE2b (never Python's salted ``hash()``), so the same text gives the same vector in every process
and on every machine. Texts that share words are close; it has no notion of synonyms.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from memory_core.language.text import analyze, normalize

__all__ = ["HashingEmbedder"]


class HashingEmbedder:
    """Unit vectors from hashed terms. ``name`` includes the dimension count."""

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 8:
            raise ValueError("dimensions must be at least 8")
        self._dimensions = dimensions

    @property
    def name(self) -> str:
        return f"hash-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _features(self, text: str) -> list[tuple[str, float]]:
        terms = analyze(text)
        feats = [(f"t:{t}", 1.0) for t in terms]
        compact = "".join(normalize(text).split())
        feats.extend((f"c:{compact[i : i + 3]}", 0.5) for i in range(max(len(compact) - 2, 0)))
        return feats

    def embed_sync(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dimensions, dtype=np.float32)
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            index = value % self._dimensions
            sign = 1.0 if (value >> 63) & 1 else -1.0
            vector[index] += sign * weight
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return vector / norm

    async def embed_query(self, text: str) -> np.ndarray:
        return self.embed_sync(text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        return np.stack([self.embed_sync(t) for t in texts])

    async def close(self) -> None:
        """Nothing to release (the model lives in this process)."""

