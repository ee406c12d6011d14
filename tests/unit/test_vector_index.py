"""The approximate vector index: recall against exact search, round trips, changes, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core.adapters.sqlite.vector_index import ApproximateVectorIndex, candidates_to_request

DIMS = 96
K = 50


def _clustered(n: int, *, seed: int, clusters: int = 40, dims: int = DIMS) -> np.ndarray:
    """Unit vectors around ``clusters`` random centres (the shape of real sentence embeddings)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dims)).astype(np.float32)
    members = rng.integers(0, clusters, size=n)
    spread = rng.uniform(0.3, 0.8, size=(n, 1)).astype(np.float32)
    matrix = centres[members] + spread * rng.standard_normal((n, dims)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def _exact(matrix: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    sims = matrix @ query
    top = np.argpartition(-sims, k - 1)[:k]
    return top[np.argsort(-sims[top])]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    points = _clustered(3060, seed=1)
    return points[:3000], points[3000:]  # the queries come from the same clusters, not the set


@pytest.fixture(scope="module")
def index(data: tuple[np.ndarray, np.ndarray]) -> ApproximateVectorIndex:
    matrix, _ = data
    return ApproximateVectorIndex.build(matrix, np.arange(10, 10 + len(matrix), dtype=np.int64))


def test_recall_at_k_against_exact_is_at_least_0_99(
    data: tuple[np.ndarray, np.ndarray], index: ApproximateVectorIndex
) -> None:
    matrix, queries = data
    recalls = []
    for q in queries:
        keys, cosines = index.search(q, K)
        assert keys.dtype == np.int64 and len(keys) == K
        assert np.all(np.diff(cosines) <= 1e-6), "best first"
        np.testing.assert_allclose(cosines, matrix[keys - 10] @ q, atol=1e-5)  # true cosines
        truth = _exact(matrix, q, K) + 10
        recalls.append(len(np.intersect1d(keys, truth)) / K)
    assert np.mean(recalls) >= 0.99


def test_building_twice_single_threaded_gives_the_same_index(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, queries = data
    first = ApproximateVectorIndex.build(matrix[:1000])
    second = ApproximateVectorIndex.build(matrix[:1000])
    assert first.to_bytes() == second.to_bytes()
    for q in queries[:10]:
        np.testing.assert_array_equal(first.search(q, 10)[0], second.search(q, 10)[0])


@pytest.mark.parametrize("view", [True, False])
def test_round_trip_through_bytes_gives_identical_results(
    data: tuple[np.ndarray, np.ndarray], index: ApproximateVectorIndex, view: bool
) -> None:
    _, queries = data
    blob = index.to_bytes()
    loaded = ApproximateVectorIndex.from_bytes(blob, view=view)
    assert loaded.viewing is view
    assert (
        len(loaded) == len(index) and loaded.dimensions == DIMS and loaded.connectivity == index.connectivity
    )
    for q in queries:
        keys, cosines = loaded.search(q, K)
        want_keys, want_cosines = index.search(q, K)
        np.testing.assert_array_equal(keys, want_keys)
        np.testing.assert_array_equal(cosines, want_cosines)
    assert loaded.to_bytes() == blob


def test_add_and_remove(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, _ = data
    index = ApproximateVectorIndex.build(matrix[:500])
    index.add(np.array([1000, 1001]), matrix[500:502])
    assert len(index) == 502 and 1001 in index and 502 not in index
    assert index.search(matrix[501], 1)[0].tolist() == [1001]

    assert index.remove([1001, 3, 999_999]) == 2  # absent keys are ignored
    assert len(index) == 500 and 1001 not in index and index.deleted == 2
    keys, _ = index.search(matrix[501], 500)
    assert 1001 not in keys and 3 not in keys

    index.add([3], matrix[3])  # a removed key can come back
    assert index.search(matrix[3], 1)[0].tolist() == [3]

    with pytest.raises(ValueError, match="already in the index"):
        index.add([5], matrix[5])
    with pytest.raises(ValueError, match="distinct"):
        index.add([2000, 2000], matrix[:2])


def test_changing_a_viewed_index_copies_it_first(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, _ = data
    blob = ApproximateVectorIndex.build(matrix[:300]).to_bytes()
    loaded = ApproximateVectorIndex.from_bytes(blob)
    assert loaded.viewing
    loaded.add([300], matrix[300])
    loaded.remove([0])
    assert not loaded.viewing and len(loaded) == 300
    assert ApproximateVectorIndex.from_bytes(blob).search(matrix[0], 1)[0].tolist() == [0]  # blob untouched


def test_small_and_empty_indexes(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, _ = data
    empty = ApproximateVectorIndex(DIMS)
    assert len(empty) == 0
    keys, cosines = empty.search(matrix[0], 5)
    assert keys.size == 0 and cosines.size == 0
    three = ApproximateVectorIndex.build(matrix[:3])
    assert sorted(three.search(matrix[0], 10)[0].tolist()) == [0, 1, 2]


def test_rows_that_are_not_unit_are_normalized(data: tuple[np.ndarray, np.ndarray]) -> None:
    matrix, _ = data
    index = ApproximateVectorIndex.build(matrix[:200] * 3.0)
    keys, cosines = index.search(matrix[7] * 0.5, 1)
    assert keys.tolist() == [7] and cosines[0] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ix, m: ix.search(m[0, :10], 5), "must have 96 dimensions"),
        (lambda ix, m: ix.search(m[:2], 5), "one vector"),
        (lambda ix, m: ix.search(m[0], 0), "k must be at least 1"),
        (lambda ix, m: ix.search(np.full(DIMS, np.nan, dtype=np.float32), 5), "finite"),
        (lambda ix, m: ix.add([900], np.zeros((1, DIMS), dtype=np.float32)), "zero vectors"),
        (lambda ix, m: ix.add([900], np.where(np.arange(DIMS) == 3, np.inf, m[0])), "finite"),
        (lambda ix, m: ix.add([900, 901], m[:1]), "2 keys for 1 vectors"),
        (lambda ix, m: ix.add([-1], m[:1]), "non-negative"),
        (lambda ix, m: ix.add([1.5], m[:1]), "integers"),
        (lambda ix, m: ix.add([900], m[:1, :10]), "must have 96 dimensions"),
        (lambda ix, m: ix.add([900], m[:1].astype(np.int32)), "floating point"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    data: tuple[np.ndarray, np.ndarray], call: object, message: str
) -> None:
    matrix, _ = data
    index = ApproximateVectorIndex.build(matrix[:50])
    with pytest.raises(ValueError, match=message):
        call(index, matrix)  # type: ignore[operator]
    assert len(index) == 50


def test_bad_construction_and_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="2-d"):
        ApproximateVectorIndex.build(np.ones(DIMS, dtype=np.float32))
    with pytest.raises(ValueError, match="dtype"):
        ApproximateVectorIndex(DIMS, dtype="f8")
    with pytest.raises(ValueError, match="connectivity"):
        ApproximateVectorIndex(DIMS, connectivity=1)
    with pytest.raises(ValueError, match="not a serialized vector index"):
        ApproximateVectorIndex.from_bytes(b"not an index at all" * 10)


def test_candidates_to_request() -> None:
    assert candidates_to_request(50) == 512  # the graph walks at least expansion_search anyway
    assert candidates_to_request(50, 0.5) == 1024
    assert candidates_to_request(10, 0.9, expansion_search=20) == 34
    assert candidates_to_request(500, 0.5, expansion_search=20) == 3000
    assert candidates_to_request(50, 0.5, size=120) == 120
    with pytest.raises(ValueError, match="kept_fraction"):
        candidates_to_request(50, 0.0)
    with pytest.raises(ValueError, match="k must"):
        candidates_to_request(0)
