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

import numpy as np

from memory_core.ports import Embedder, EmbedderWrapper

__all__ = ["QueryCachingEmbedder"]


class QueryCachingEmbedder(EmbedderWrapper):
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
        super().__init__(inner)
        self.size = size
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

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

    async def close(self) -> None:
        """Close the inner embedder (unlike other wrappers, this one owns it: bootstrap builds both)."""
        with self._lock:
            self._vectors.clear()
        await self.inner.close()
