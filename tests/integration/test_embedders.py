"""The embedders: the bundled multilingual-e5-small, and the hashing embedder's determinism."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.models.local_embedder import E5LocalEmbedder


@pytest.fixture(scope="module")
def e5() -> E5LocalEmbedder:
    return E5LocalEmbedder(threads=1)


def test_e5_gives_unit_vectors_of_384_dimensions(e5: E5LocalEmbedder) -> None:
    query = asyncio.run(e5.embed_query("京都の旅館"))
    passages = asyncio.run(e5.embed_passages(["京都の旅館に泊まりたい", "I like coffee"]))
    assert query.shape == (384,) and passages.shape == (2, 384)
    assert query.dtype == np.float32
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-3)
    assert np.linalg.norm(passages, axis=1) == pytest.approx([1.0, 1.0], abs=1e-3)
    assert e5.name == "multilingual-e5-small-q4" and e5.dimensions == 384
    assert asyncio.run(e5.embed_passages([])).shape == (0, 384)


def test_e5_ranks_related_japanese_and_english_text_higher(e5: E5LocalEmbedder) -> None:
    query = e5.query_sync("旅行ではどんな宿に泊まりたい？")
    passages = e5.passages_sync(
        ["京都では旅館に泊まりたい", "毎朝コーヒーを飲む", "the quarterly report is due"]
    )
    sims = passages @ query
    assert int(np.argmax(sims)) == 0
    cross = e5.passages_sync(["I want to stay at a ryokan in Kyoto"]) @ e5.query_sync("京都の旅館")
    unrelated = e5.passages_sync(["the quarterly report is due"]) @ e5.query_sync("京都の旅館")
    assert float(cross[0]) > float(unrelated[0])


def test_e5_is_deterministic(e5: E5LocalEmbedder) -> None:
    a = e5.query_sync("辛い料理が苦手")
    b = e5.query_sync("辛い料理が苦手")
    assert np.array_equal(a, b)


CHILD = "from memory_core.adapters.models.hash_embedder import HashingEmbedder; print(HashingEmbedder().embed_sync('コーヒーが好き coffee').tobytes().hex())"


def test_hashing_embedder_is_identical_across_processes() -> None:
    here = HashingEmbedder().embed_sync("コーヒーが好き coffee").tobytes().hex()
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", CHILD],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        assert out == here


def test_hashing_embedder_similarity_follows_shared_words() -> None:
    h = HashingEmbedder()
    base = h.embed_sync("I like green tea")
    assert float(base @ h.embed_sync("I like green tea a lot")) > float(
        base @ h.embed_sync("the report is due")
    )
    assert np.linalg.norm(h.embed_sync("")) == pytest.approx(1.0)
