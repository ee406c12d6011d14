"""An approximate nearest-neighbour index (HNSW, from ``usearch``) over unit vectors, by cosine.

A caller asks this index for candidates, rescores them exactly from its own matrix and falls back to
exact search when too few survive its filters; :func:`candidates_to_request` gives the number of
candidates to ask for so that the top ``k`` after a filter match the exact filtered top ``k`` (recall
≥ 0.99 in the measurements of ``memory-core bench ann``). The embedded store does so for scopes of at
least ``MEMORY_VECTOR_INDEX_MIN_SCOPE`` memories (:mod:`memory_core.adapters.sqlite.ann`; off by
default: on the machines it targets the measured gain at 100,000 vectors does not pay for the index's
build time, 45-100 s per 100,000 vectors, and size, 1.8 kB per vector; ``docs/benchmarks.md`` has the
figures). Installed with the ``ann`` extra (``pip install 'memory-core[ann]'``).

Keys are non-negative integers (SQLite row ids); vectors are rows of ``dimensions`` finite floats,
normalized here (so the scores are cosines even for rows that are not exactly unit). The index is
serialized with :meth:`ApproximateVectorIndex.to_bytes`; :meth:`ApproximateVectorIndex.from_bytes`
views the buffer without copying it (5 ms for 100,000 vectors, against 74 ms to copy them in) and
copies it only when the index is first changed.

Building with ``threads=1`` is deterministic: the same vectors and keys in the same order give the
same graph, byte for byte, and so the same search results. A multi-threaded build is not (the
insertion order between threads varies): its mean recall is the same, but in 2 of 4 two-thread builds
of the real e5 set one or two queries of 200 came back with recall@50 below 0.5 (never with one
thread), so build with one thread where results must be reproducible.

``usearch`` is imported when an index is first made, never at import time. An index is not safe to
change while another thread uses it: hold one lock around :meth:`~ApproximateVectorIndex.add`,
:meth:`~ApproximateVectorIndex.remove` and the searches that may overlap them.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

__all__ = [
    "DEFAULT_CONNECTIVITY",
    "DEFAULT_EXPANSION_ADD",
    "DEFAULT_EXPANSION_SEARCH",
    "ApproximateVectorIndex",
    "candidates_to_request",
]

# The defaults, from ``memory-core bench ann --sweep`` (k = 50, single-threaded builds), chosen for the
# scopes the index is for (exact search is as fast below some 20,000 vectors):
# * 100,000 e5-derived vectors: M 32 / ef 512 gives recall@50 0.993 at 2.3 ms a query, against 4.9 ms
#   for exact search; M 16 needs ef 1024 for 0.996 (3.5 ms), M 16 / ef 512 gives 0.988, ef 256 0.967;
# * 14,336 real e5 vectors: M 32 / ef 512 gives 0.998 (M 16 / ef 256 already 0.994);
# * ef_add 256 adds at most 0.003 of recall for 45 % more build time; M 32 costs 8 % more bytes than 16.
#: Graph edges per node ("M" in the HNSW paper); fixed when the index is made.
DEFAULT_CONNECTIVITY: Final = 32
#: Candidate list while inserting ("efConstruction").
DEFAULT_EXPANSION_ADD: Final = 128
#: Candidate list while searching ("ef"); a search for ``count`` candidates walks ``max(ef, count)``.
DEFAULT_EXPANSION_SEARCH: Final = 512

# bf16 and i8 are left out: recall@50 at the defaults 0.984 (bf16) and 0.873 (i8, never above 0.876).
_DTYPES: Final = ("f32", "f16")
_MAX_KEY: Final = 2**63 - 1


def candidates_to_request(
    k: int,
    kept_fraction: float = 1.0,
    *,
    expansion_search: int = DEFAULT_EXPANSION_SEARCH,
    size: int | None = None,
) -> int:
    """How many candidates to ask the index for, to keep recall@``k`` ≥ 0.99 after a filter.

    The caller asks for this many, drops the candidates its filter rejects, rescores the rest
    exactly and keeps the top ``k``; when fewer than ``k`` survive it searches exactly instead. The
    rule is ``ceil(max(3 k, expansion_search) / kept_fraction)``: the filtered top ``k`` lie in the
    unfiltered top ``k / kept_fraction``, so the graph walk (``max(expansion_search, count)`` wide)
    widens by the same factor. From ``memory-core bench ann --filters`` (k = 50, filters keeping
    90 % / 50 % of the documents at random, M 32 / ef 512): on 100,000 e5-derived vectors a request
    of 400 gives recall 0.992 / 0.989, 600 gives 0.995 / 0.993, and this rule (569 / 1024) gives
    0.995 / 0.997 at 4.3 / 7.1 ms (exact: 4.9 ms unfiltered); on the 14,336 real e5 vectors every
    request from 75 up gives ≥ 0.996. Asking for ``3 k / kept_fraction`` or more also makes the exact
    fallback rare (asking for ``2 k`` with half the documents kept fell back on 45 % of the queries).
    The cost grows as ``1 / kept_fraction``: with half the documents kept or fewer, exact search of
    a 100,000-vector scope is as fast on the measuring machine.

    Args:
        k: Results wanted after the filter (the leg's ``vector_k``).
        kept_fraction: Estimated share of the scope's documents the filter keeps, in (0, 1].
        expansion_search: The index's ``expansion_search``.
        size: Documents in the index; the answer never exceeds it.

    Returns:
        The number of candidates to request.

    Raises:
        ValueError: ``k`` below 1 or ``kept_fraction`` outside (0, 1].
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not 0.0 < kept_fraction <= 1.0:
        raise ValueError(f"kept_fraction must be in (0, 1], got {kept_fraction}")
    wanted = math.ceil(max(3 * k, expansion_search) / kept_fraction)
    return wanted if size is None else min(wanted, max(size, 0))


class ApproximateVectorIndex:
    """An HNSW graph of unit vectors under integer keys, searched by cosine.

    Args:
        dimensions: Length of every vector.
        connectivity: Edges per node; fixed once the index exists.
        expansion_add: Candidate list while inserting.
        expansion_search: Candidate list while searching (can be changed later).
        dtype: Storage of the vectors inside the index: ``f32`` (exact cosines), or ``f16`` (half
            the size, cosines to about 1e-3, recall@50 about 0.005 lower; rescore from the float32
            matrix).

    Raises:
        ValueError: A parameter out of range.
    """

    def __init__(
        self,
        dimensions: int,
        *,
        connectivity: int = DEFAULT_CONNECTIVITY,
        expansion_add: int = DEFAULT_EXPANSION_ADD,
        expansion_search: int = DEFAULT_EXPANSION_SEARCH,
        dtype: str = "f32",
    ) -> None:
        if dimensions < 1:
            raise ValueError(f"dimensions must be at least 1, got {dimensions}")
        if connectivity < 2:
            raise ValueError(f"connectivity must be at least 2, got {connectivity}")
        if expansion_add < 1 or expansion_search < 1:
            raise ValueError("expansion_add and expansion_search must be at least 1")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        from usearch.index import Index

        self._dimensions = int(dimensions)
        self._index: Any = Index(
            ndim=self._dimensions,
            metric="ip",
            dtype=dtype,
            connectivity=int(connectivity),
            expansion_add=int(expansion_add),
            expansion_search=int(expansion_search),
        )
        self._buffer: Any = None  # the serialized index this one views, until it is first changed

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        keys: np.ndarray | None = None,
        *,
        threads: int = 1,
        connectivity: int = DEFAULT_CONNECTIVITY,
        expansion_add: int = DEFAULT_EXPANSION_ADD,
        expansion_search: int = DEFAULT_EXPANSION_SEARCH,
        dtype: str = "f32",
    ) -> ApproximateVectorIndex:
        """An index of ``vectors`` under ``keys``.

        Args:
            vectors: ``n x d`` matrix, one vector a row (``n`` may be 0).
            keys: ``n`` distinct non-negative integer keys; ``None``: the row numbers ``0..n-1``.
            threads: Threads for the build; 1 (the default) makes it deterministic.
            connectivity: See the class.
            expansion_add: See the class.
            expansion_search: See the class.
            dtype: See the class.

        Returns:
            The index.

        Raises:
            ValueError: A malformed matrix or key array (shape, non-finite or zero rows, negative or
                repeated keys).
        """
        matrix = np.asarray(vectors)
        if matrix.ndim != 2:
            raise ValueError(f"vectors must be a 2-d matrix (n x d), got shape {matrix.shape}")
        index = cls(
            matrix.shape[1],
            connectivity=connectivity,
            expansion_add=expansion_add,
            expansion_search=expansion_search,
            dtype=dtype,
        )
        if keys is None:
            keys = np.arange(matrix.shape[0], dtype=np.int64)
        index.add(keys, matrix, threads=threads)
        return index

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray | memoryview, *, view: bool = True, expansion_search: int | None = None
    ) -> ApproximateVectorIndex:
        """The index that :meth:`to_bytes` serialized.

        Args:
            data: The serialized index.
            view: Search ``data`` in place (no copy; ``data`` is kept referenced and must not change
                while the index lives); the first :meth:`add` or :meth:`remove` copies it.
                ``False``: copy now.
            expansion_search: Overrides the saved value (it is not part of the serialized index;
                the default is :data:`DEFAULT_EXPANSION_SEARCH`).

        Returns:
            The index.

        Raises:
            ValueError: ``data`` is not a serialized index of this kind.
        """
        from usearch.index import Index

        try:
            meta = Index.metadata(data)
        except Exception as exc:
            raise ValueError(f"not a serialized vector index: {exc}") from exc
        if not meta or not meta.get("matrix_included"):
            raise ValueError("not a serialized vector index (no header or no vectors)")
        if "IP" not in str(meta.get("kind_metric")):
            raise ValueError(f"the serialized index uses metric {meta.get('kind_metric')}, not inner product")
        self = cls.__new__(cls)
        self._dimensions = int(meta["dimensions"])
        self._index = Index(
            ndim=self._dimensions,
            metric="ip",
            dtype=meta["kind_scalar"],
            expansion_search=int(expansion_search or DEFAULT_EXPANSION_SEARCH),
        )
        try:
            if view:
                self._index.view(data)
                self._buffer = data
            else:
                self._index.load(data)
                self._buffer = None
        except Exception as exc:
            raise ValueError(f"not a serialized vector index: {exc}") from exc
        return self

    def to_bytes(self) -> bytes:
        """The index serialized (header, graph and vectors), for :meth:`from_bytes`."""
        return bytes(self._index.save())

    # -- changes ----------------------------------------------------------------------------------
    def add(self, keys: np.ndarray | list[int], vectors: np.ndarray, *, threads: int = 1) -> None:
        """Insert ``vectors`` under ``keys`` (keys not already in the index).

        Args:
            keys: ``n`` distinct non-negative integers.
            vectors: ``n x d`` matrix (or one vector of ``d`` with one key).
            threads: Threads for the insertion; 1 keeps the result deterministic.

        Raises:
            ValueError: Malformed input, or a key already present.
        """
        key_array = self._keys(keys)
        matrix = self._rows(vectors, "vectors")
        if matrix.shape[0] != key_array.shape[0]:
            raise ValueError(f"{key_array.shape[0]} keys for {matrix.shape[0]} vectors")
        if key_array.size == 0:
            return
        if np.unique(key_array).size != key_array.size:
            raise ValueError("keys must be distinct")
        present = np.asarray(self._index.contains(key_array.view(np.uint64)), dtype=bool)
        if present.any():
            raise ValueError(f"keys already in the index: {key_array[present][:5].tolist()}")
        self._materialize()
        self._index.add(key_array.view(np.uint64), matrix, threads=max(1, int(threads)))

    def remove(self, keys: np.ndarray | list[int]) -> int:
        """Remove ``keys`` (absent keys are ignored); returns how many were removed.

        Removed nodes stay in the graph as tombstones until the index is rebuilt: they are
        never returned, but searches still walk through them. Rebuild when :attr:`deleted` grows
        past a tenth of :meth:`__len__` or so.
        """
        key_array = self._keys(keys)
        if key_array.size == 0:
            return 0
        self._materialize()
        removed = self._index.remove(key_array.view(np.uint64))
        return int(np.sum(removed))

    def _materialize(self) -> None:
        """Copy a viewed (immutable) index into memory so it can change."""
        if self._buffer is not None:
            from usearch.index import Index

            copy = Index(
                ndim=self._dimensions,
                metric="ip",
                dtype=self._index.dtype,
                expansion_search=self._index.expansion_search,
            )
            copy.load(self._buffer)
            self._index = copy
            self._buffer = None

    # -- search -----------------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The (approximately) ``k`` nearest keys to ``query`` by cosine, best first.

        Args:
            query: One vector of ``d`` finite floats (normalized here).
            k: Results wanted (fewer when the index holds fewer). The search walks
                ``max(expansion_search, k)`` candidates.

        Returns:
            ``(keys, cosines)``: int64 keys and float32 cosines, best first.

        Raises:
            ValueError: Malformed query or ``k`` below 1.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        vector = self._rows(query, "query")
        if vector.shape[0] != 1:
            raise ValueError(f"query must be one vector of {self._dimensions}, got shape {np.shape(query)}")
        if len(self._index) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        matches = self._index.search(vector[0], int(k), threads=1)
        keys = np.asarray(matches.keys, dtype=np.uint64).view(np.int64)
        cosines = (1.0 - np.asarray(matches.distances, dtype=np.float32)).astype(np.float32)
        return keys.copy(), cosines

    # -- properties -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, int | np.integer) or key < 0:
            return False
        return bool(self._index.contains(int(key)))

    @property
    def dimensions(self) -> int:
        """Length of every vector."""
        return self._dimensions

    @property
    def deleted(self) -> int:
        """Removed keys still in the graph as tombstones (see :meth:`remove`)."""
        stats = self._index.stats
        return max(0, int(stats.nodes) - len(self._index))

    @property
    def viewing(self) -> bool:
        """Whether the index searches a serialized buffer in place (see :meth:`from_bytes`)."""
        return self._buffer is not None

    @property
    def expansion_search(self) -> int:
        """Candidate list while searching (settable)."""
        return int(self._index.expansion_search)

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"expansion_search must be at least 1, got {value}")
        self._index.expansion_search = int(value)

    @property
    def connectivity(self) -> int:
        """Edges per node."""
        return int(self._index.connectivity)

    # -- validation -------------------------------------------------------------------------------
    def _keys(self, keys: np.ndarray | list[int]) -> np.ndarray:
        array = np.atleast_1d(np.asarray(keys))
        if array.ndim != 1:
            raise ValueError(f"keys must be a 1-d array, got shape {array.shape}")
        if array.size == 0:
            return np.zeros(0, dtype=np.int64)
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"keys must be integers, got {array.dtype}")
        if array.min() < 0 or (np.issubdtype(array.dtype, np.unsignedinteger) and array.max() > _MAX_KEY):
            raise ValueError("keys must be non-negative 64-bit integers")
        return np.ascontiguousarray(array, dtype=np.int64)

    def _rows(self, vectors: np.ndarray, what: str) -> np.ndarray:
        matrix = np.asarray(vectors)
        if matrix.ndim == 1:
            matrix = matrix.reshape(1, -1)
        if matrix.ndim != 2 or matrix.shape[1] != self._dimensions:
            raise ValueError(f"{what} must have {self._dimensions} dimensions, got shape {np.shape(vectors)}")
        if not np.issubdtype(matrix.dtype, np.floating):
            raise ValueError(f"{what} must be floating point, got {matrix.dtype}")
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.shape[0] == 0:
            return np.ascontiguousarray(matrix)
        if not np.isfinite(matrix).all():
            raise ValueError(
                f"{what} must be finite (NaN or infinity in row {int(np.argmin(np.isfinite(matrix).all(axis=1)))})"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if (norms == 0).any():
            raise ValueError(f"{what} must not be zero vectors (row {int(np.argmin(norms[:, 0]))})")
        if np.abs(norms - 1.0).max() > 1e-6:
            matrix = matrix / norms
        return np.ascontiguousarray(matrix, dtype=np.float32)
