"""The embedded store's leg ranking selects the top in linear time with the full sort's exact order."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core.adapters.sqlite.legs import _ranks


def _reference(scores: np.ndarray, eligible: np.ndarray, top: int) -> np.ndarray:
    ranks = np.full(scores.shape[0], -1, dtype=np.int64)
    positions = np.flatnonzero(eligible)
    order = positions[np.argsort(-scores[positions], kind="stable")][:top]
    ranks[order] = np.arange(len(order))
    return ranks


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("top", [0, 1, 5, 50, 1000])
def test_ranks_match_a_stable_full_sort_ties_and_nan_included(seed: int, top: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    # Few distinct values: many ties at the cut, broken by position.
    scores = rng.integers(0, 6, n).astype(np.float64) / 3.0
    if seed % 4 == 0 and n:
        scores[rng.integers(0, n, 3)] = np.nan
    eligible = rng.random(n) < 0.7
    assert np.array_equal(_ranks(scores, eligible, top), _reference(scores, eligible, top))
