from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.models.local_embedder import E5LocalEmbedder
from memory_core.ports import Embedder, EmbedderWrapper


class MemoizedEmbedder(EmbedderWrapper):
    """The e5 model with a per-text cache (its vectors are deterministic), so the suite stays fast."""

    def __init__(self, inner: E5LocalEmbedder) -> None:
        super().__init__(inner)
        self._queries: dict[str, np.ndarray] = {}
        self._passages: dict[str, np.ndarray] = {}

    async def embed_query(self, text: str) -> np.ndarray:
        if text not in self._queries:
            self._queries[text] = await self.inner.embed_query(text)
        return self._queries[text]

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._passages]
        if missing:
            for text, vector in zip(missing, await self.inner.embed_passages(missing), strict=True):
                self._passages[text] = vector
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self._passages[t] for t in texts])


_E5: MemoizedEmbedder | None = None


def _e5() -> MemoizedEmbedder:
    global _E5
    if _E5 is None:
        _E5 = MemoizedEmbedder(E5LocalEmbedder(threads=2))
    return _E5


@pytest.fixture(params=["hash", "e5"])
def embedder(request: pytest.FixtureRequest) -> Embedder:
    """Every scenario runs with the hashing embedder and with the local e5 model."""
    if request.param == "hash":
        return HashingEmbedder()
    return _e5()
