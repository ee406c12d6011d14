"""A bounded cache of query embeddings, in front of any embedder.

Agents ask the same things again ("what does the user like to eat?"), and every ``before_run``
embeds its query before it can search: with the local model that is most of the time memory adds to
a run. :class:`QueryCachingEmbedder` keeps the vectors of the last ``size`` distinct query texts
(least recently used out first) and returns a copy of the cached vector for a repeat, so the result
is the vector the model gave, bit for bit. Passages are never cached (they are embedded once, when
stored). The cache lives in one process and holds text only as dictionary keys in memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ..ports import Embedder

__all__ = ["QueryCachingEmbedder"]


class QueryCachingEmbedder:
    """``inner`` with its query embeddings cached (see the module docstring).

    Args:
        inner: The embedder; closed with this one.
        size: How many distinct query texts are kept (at least 1).

    Attributes:
        hits: Queries answered from the cache.
        misses: Queries the model embedded.
    """

    def __init__(self, inner: Embedder, *, size: int = 1024) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.inner = inner
        self.size = size
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def cached(self, text: str) -> np.ndarray | None:
        """The cached vector of ``text`` (a copy, counted as a hit), or ``None``."""
        with self._lock:
            vector = self._vectors.get(text)
            if vector is None:
                return None
            self._vectors.move_to_end(text)
            self.hits += 1
            return vector.copy()

    async def embed_query(self, text: str) -> np.ndarray:
        found = self.cached(text)
        if found is not None:
            return found
        vector = np.asarray(await self.inner.embed_query(text), dtype=np.float32)
        with self._lock:
            self.misses += 1
            self._vectors[text] = vector.copy()
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_passages(texts)

    async def warm_up(self) -> None:
        """Load the model now, when the inner embedder can (the local one)."""
        warm_up = getattr(self.inner, "warm_up", None)
        if callable(warm_up):
            await warm_up()

    async def close(self) -> None:
        """Close the inner embedder (this wrapper owns it)."""
        with self._lock:
            self._vectors.clear()
        await self.inner.close()
