"""The query embedding cache: the model's own vectors for repeats, bounded, passages never cached."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.models.query_cache import QueryCachingEmbedder
from memory_core.bootstrap import build_embedder, load_settings
from memory_core.errors import ConfigurationError
from memory_core.runtime.sharing import FairEmbedder


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting what reaches it."""

    def __init__(self) -> None:
        super().__init__(dimensions=32)
        self.queries: list[str] = []
        self.passages: list[str] = []
        self.closed = False

    async def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return await super().embed_query(text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.passages.extend(texts)
        return await super().embed_passages(texts)

    async def close(self) -> None:
        self.closed = True


def test_a_repeated_query_gets_the_models_vector_without_asking_it_again() -> None:
    async def main() -> None:
        inner = CountingEmbedder()
        cache = QueryCachingEmbedder(inner, size=2)
        first = await cache.embed_query("what do I eat?")
        again = await cache.embed_query("what do I eat?")
        assert np.array_equal(first, again) and np.array_equal(first, await inner.embed_query("what do I eat?"))
        assert inner.queries == ["what do I eat?", "what do I eat?"]  # the second is this test's own call
        again[0] = 42.0  # a caller changing its copy does not change the cache
        assert np.array_equal(await cache.embed_query("what do I eat?"), first)
        assert (cache.hits, cache.misses) == (2, 1)
        assert cache.name == inner.name and cache.dimensions == 32

    asyncio.run(main())


def test_the_least_recently_used_query_leaves_first_and_passages_are_never_cached() -> None:
    async def main() -> None:
        inner = CountingEmbedder()
        cache = QueryCachingEmbedder(inner, size=2)
        for text in ["a", "b", "a", "c", "a", "b"]:  # "b" is evicted by "c", then asked again
            await cache.embed_query(text)
        assert inner.queries == ["a", "b", "c", "b"]
        await cache.embed_passages(["x", "x"])
        await cache.embed_passages(["x"])
        assert inner.passages == ["x", "x", "x"]
        await cache.close()
        assert inner.closed

    asyncio.run(main())
    with pytest.raises(ValueError):
        QueryCachingEmbedder(CountingEmbedder(), size=0)


def test_a_cached_query_does_not_wait_its_turn_at_the_model() -> None:
    async def main() -> None:
        inner = CountingEmbedder()
        fair = FairEmbedder(QueryCachingEmbedder(inner))
        await fair.embed_query("tea")
        await fair.embed_query("tea")
        assert fair.gate.granted["interactive"] == 1  # the repeat skipped the gate
        assert inner.queries == ["tea"]

    asyncio.run(main())


def test_the_setting_sizes_the_cache_and_zero_turns_it_off() -> None:
    cached = build_embedder(load_settings({"MEMORY_EMBEDDER": "hash", "MEMORY_QUERY_CACHE_SIZE": "16"}))
    assert isinstance(cached, QueryCachingEmbedder) and cached.size == 16
    plain = build_embedder(load_settings({"MEMORY_EMBEDDER": "hash", "MEMORY_QUERY_CACHE_SIZE": "0"}))
    assert isinstance(plain, HashingEmbedder)
    with pytest.raises(ConfigurationError, match="MEMORY_QUERY_CACHE_SIZE"):
        load_settings({"MEMORY_QUERY_CACHE_SIZE": "-1"})
