"""Approximate vector search for the embedded store's large scopes (``MEMORY_VECTOR_INDEX_MIN_SCOPE``).

Off by default: exact search is fast enough at the sizes the product's benchmarks cover (a
100,000-memory scope searches in 6-8 ms on 2 CPUs, see ``docs/benchmarks.md``), and an HNSW graph costs
1.8 kB and about a millisecond of one CPU per vector to build. Set the variable to a scope size (and
install the ``ann`` extra, ``usearch``) and every scope of at least that many memories gets one:

- **Built in the background**: the scope's vectors are copied and a graph is built on a thread of its
  own, one CPU, deterministic (:class:`~memory_core.adapters.vector_index.ApproximateVectorIndex`);
  exact search answers meanwhile. Not saved in the file: a new process builds again.
- **Kept current**: the positions whose vectors changed since the copy (a write, here or in another
  process, as the scope index applies it) are removed from the graph and added again before the next
  search; when removals leave more than a fifth of the graph as tombstones it is built again.
- **Searched with a margin, rescored exactly**: the vector leg asks the graph for
  :func:`~memory_core.adapters.vector_index.candidates_to_request` candidates (at least 3 ``k``,
  widened by the share of the scope the search's filters keep), drops those the filters reject and
  scores the rest exactly, as exact search would; with fewer than ``k`` left, or filters that keep
  less than half the scope (where the graph is no faster), it searches exactly.
- **Checked against exact search**: the first 8 searches of a graph and every 32nd after them are
  also answered exactly and their top ``k`` compared. When the mean recall of the last 16 checks falls
  below 0.99 (below 0.9 after two checks: vectors a graph cannot index, like random ones), the scope
  goes back to exact search for the life of the process, with a warning. :meth:`ScopeVectorIndexes.stats`
  says what each graph did.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .sqlite_scope_index import ScopeIndex
from .vector_index import ApproximateVectorIndex, candidates_to_request

__all__ = ["ScopeVectorIndexes", "ann_available"]

logger = logging.getLogger(__name__)

#: Searches of a new graph that are all checked, and how often one is checked after them.
FIRST_CHECKS = 8
CHECK_EVERY = 32
#: Checks the recall is averaged over, and the recall under which the scope goes back to exact search.
CHECK_WINDOW = 16
MIN_RECALL = 0.99
#: Recall under which two checks are enough to give up (vectors the graph cannot index).
BROKEN_RECALL = 0.9
#: Filters keeping less than this share of the scope are searched exactly (the graph is no faster).
MIN_KEPT_FRACTION = 0.5
#: Tombstones (removed nodes) past this share of the graph make it be built again.
MAX_DELETED_FRACTION = 0.2


def ann_available() -> bool:
    """Whether ``usearch`` (the ``ann`` extra) is installed."""
    try:
        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class _Graph:
    """One scope's graph, or the build of one under way."""

    building: Future[ApproximateVectorIndex] | None = None
    index: ApproximateVectorIndex | None = None
    searches: int = 0
    checks: deque[float] = field(default_factory=lambda: deque(maxlen=CHECK_WINDOW))
    exact_fallbacks: int = 0
    off: str | None = None  # why the scope went back to exact search for good


class ScopeVectorIndexes:
    """The approximate vector indexes of one store's large scopes (see the module docstring).

    Args:
        min_scope: Scopes of at least this many memories get a graph (0: none).
        build: Builds a graph from ``(vectors, keys)``; the default is a one-thread HNSW build.
    """

    def __init__(
        self,
        min_scope: int,
        *,
        build: Callable[[np.ndarray, np.ndarray], ApproximateVectorIndex] | None = None,
    ) -> None:
        if min_scope < 0:
            raise ValueError("min_scope must not be negative")
        self.min_scope = int(min_scope)
        self._build = build or (lambda vectors, keys: ApproximateVectorIndex.build(vectors, keys, threads=1))
        self._graphs: weakref.WeakKeyDictionary[ScopeIndex, _Graph] = weakref.WeakKeyDictionary()
        self._one_at_a_time = threading.Lock()
        self._closed = False
        self.enabled = self.min_scope > 0 and ann_available()
        if self.min_scope > 0 and not self.enabled:
            logger.warning(
                "MEMORY_VECTOR_INDEX_MIN_SCOPE is %s but usearch is not installed "
                "(pip install 'memory-core[ann]'): every scope is searched exactly",
                self.min_scope,
            )

    # -- the vector leg ------------------------------------------------------------------------------
    def candidates(self, index: ScopeIndex, query: np.ndarray, usable: np.ndarray, k: int) -> np.ndarray | None:
        """Positions for the vector leg to score exactly (the filter's survivors among the graph's
        candidates, at least ``k``), or ``None``: search the scope exactly.

        Called under the store's lock, with the scope index current.
        """
        if not self.enabled or len(index) < self.min_scope or k < 1 or not index.dims:
            return None
        graph = self._graph(index)
        if graph is None or graph.index is None:
            return None
        kept = int(usable.sum())
        if kept < k or kept < MIN_KEPT_FRACTION * len(graph.index):
            graph.exact_fallbacks += 1
            return None
        wanted = candidates_to_request(
            k,
            min(1.0, kept / max(len(graph.index), 1)),
            expansion_search=graph.index.expansion_search,
            size=len(graph.index),
        )
        keys, _ = graph.index.search(query, wanted)
        keys = keys[keys < len(index)]
        survivors = keys[usable[keys]]
        if len(survivors) < k:
            graph.exact_fallbacks += 1
            return None
        graph.searches += 1
        return np.unique(survivors)

    def wants_check(self, index: ScopeIndex) -> bool:
        """Whether this search of the scope's graph is also to be answered exactly, to compare."""
        graph = self._graphs.get(index)
        if graph is None or graph.index is None:
            return False
        return graph.searches <= FIRST_CHECKS or graph.searches % CHECK_EVERY == 0

    def record_check(self, index: ScopeIndex, approximate: np.ndarray, exact: np.ndarray) -> None:
        """Compare a search's top ``k`` positions from the graph with exact search's."""
        graph = self._graphs.get(index)
        if graph is None or graph.index is None or not len(exact):
            return
        recall = len(np.intersect1d(approximate, exact)) / len(exact)
        graph.checks.append(recall)
        mean = sum(graph.checks) / len(graph.checks)
        if (len(graph.checks) >= 2 and mean < BROKEN_RECALL) or (
            len(graph.checks) == CHECK_WINDOW and mean < MIN_RECALL
        ):
            graph.off = f"recall {mean:.3f} over the last {len(graph.checks)} checks against exact search"
            graph.index = None
            logger.warning(
                "a scope of %s memories goes back to exact vector search: its approximate index had %s",
                len(index),
                graph.off,
            )

    # -- building and keeping graphs ------------------------------------------------------------------
    def _graph(self, index: ScopeIndex) -> _Graph | None:
        """The scope's graph, current; starts a build when there is none (``None`` meanwhile)."""
        graph = self._graphs.get(index)
        if graph is None:
            graph = self._graphs[index] = _Graph()
        if graph.off is not None:
            return None
        if graph.building is not None:
            if not graph.building.done():
                return None
            built, graph.building = graph.building, None
            try:
                graph.index = built.result()
            except Exception as exc:  # a bug or no memory: exact search, for good
                graph.off = f"its build failed: {type(exc).__name__}: {exc}"
                logger.warning("a scope of %s memories is searched exactly: %s", len(index), graph.off)
                index.vectors_changed = None
                return None
            graph.searches = 0
            graph.checks.clear()
        if graph.index is None:
            self._start_build(index, graph)
            return None
        self._catch_up(index, graph)
        return graph if graph.index is not None else None

    def _start_build(self, index: ScopeIndex, graph: _Graph) -> None:
        positions = np.flatnonzero(index.has_vector[: len(index)]).astype(np.int64)
        vectors = np.array(index.vectors[positions], dtype=np.float32)  # a copy: the scope changes meanwhile
        index.vectors_changed = set()  # from now on, what changes is applied when the graph is in
        future: Future[ApproximateVectorIndex] = Future()
        graph.building = future

        def build() -> None:
            with self._one_at_a_time:  # one CPU for all builds; the others wait their turn
                if self._closed or not future.set_running_or_notify_cancel():
                    return
                try:
                    future.set_result(self._build(vectors, positions))
                except BaseException as exc:  # handed to the search that installs it
                    future.set_exception(exc)

        # a daemon thread: a process that ends does not wait for a build nobody will use
        threading.Thread(target=build, name="memory-core-ann", daemon=True).start()
        logger.info("building an approximate vector index of a scope of %s memories", len(index))

    def _catch_up(self, index: ScopeIndex, graph: _Graph) -> None:
        """Apply the vectors that changed since the graph's copy (removed, then added again)."""
        changed = index.vectors_changed
        if not changed or graph.index is None:
            return
        index.vectors_changed = set()
        positions = np.fromiter(changed, dtype=np.int64, count=len(changed))
        positions.sort()
        graph.index.remove(positions)
        present = positions[index.has_vector[positions]]
        if len(present):
            graph.index.add(present, index.vectors[present])
        if graph.index.deleted > MAX_DELETED_FRACTION * max(len(graph.index), 1):
            graph.index = None  # built again from the current vectors; exact meanwhile
            self._start_build(index, graph)

    # -- reporting and closing ----------------------------------------------------------------------
    def stats(self) -> list[dict[str, Any]]:
        """Per graph: memories, state (``building``, ``ready``, ``exact``), searches, checks and their
        mean recall, and why a scope went back to exact search."""
        found = []
        for index, graph in list(self._graphs.items()):
            state = "exact" if graph.off else ("ready" if graph.index is not None else "building")
            found.append(
                {
                    "memories": len(index),
                    "state": state,
                    "searches": graph.searches,
                    "checks": len(graph.checks),
                    "mean_recall": round(sum(graph.checks) / len(graph.checks), 4) if graph.checks else None,
                    "exact_fallbacks": graph.exact_fallbacks,
                    "why_exact": graph.off,
                }
            )
        return found

    def close(self) -> None:
        """Start no more builds (one under way finishes on its daemon thread, unused)."""
        self._closed = True
        for graph in list(self._graphs.values()):
            if graph.building is not None:
                graph.building.cancel()
