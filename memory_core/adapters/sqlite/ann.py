"""Approximate vector search for the embedded store's large scopes (``MEMORY_VECTOR_INDEX_MIN_SCOPE``).

Off by default: exact search is fast enough at the sizes the product's benchmarks cover (a
100,000-memory scope searches in 6-8 ms on 2 CPUs, see ``docs/benchmarks.md``), and an HNSW graph costs
1.8 kB and about a millisecond of one CPU per vector to build. Set the variable to a scope size (and
install the ``ann`` extra, ``usearch``) and every scope of at least that many memories gets one:

- **Built in the background**: on a thread of its own, one build at a time, one CPU, deterministic
  (:class:`~memory_core.adapters.sqlite.vector_index.ApproximateVectorIndex`); the scope's vectors are copied
  (under the store's lock) when the build starts, and exact search answers meanwhile. Not saved in the
  file: a new process builds again. A scope with a graph stays in the store's memory (it is not
  evicted to make room for other scopes), since loading it again would mean building again.
- **Kept current**: the positions whose vectors changed since the copy (a write, here or in another
  process, as the scope index applies it; a recall or forgetting changes no vector) are candidates of
  every search until the graph has them (scored exactly like the rest, so nothing changed is missed),
  and each search moves up to 32 of them into the graph (removed and added again). When more than a
  twentieth of the graph waits, or a tenth has been moved since the build, it is built again in the
  background.
- **Searched with a margin, rescored exactly**: the vector leg asks the graph for
  :func:`~memory_core.adapters.sqlite.vector_index.candidates_to_request` candidates (at least 3 ``k``,
  widened by the share of the scope the search's filters keep), drops those the filters reject and
  scores the rest exactly, as exact search would; with fewer than ``k`` left, or filters that keep
  less than half the scope (archived and deleted memories count in the graph: a scope that forgetting
  has mostly archived is searched exactly), it searches exactly.
- **Checked against exact search**: the first 8 searches of a graph and every 32nd after them are
  also answered exactly and their top ``k`` compared. When the mean recall of the last 16 checks falls
  below 0.99 (below 0.9 after two checks: vectors a graph cannot index, like random ones), the graph is
  built again once; if the new one misses too, the scope goes back to exact search for the rest of the
  process (for its current epoch), with a warning. So does a graph that raises an error.
  :meth:`ScopeVectorIndexes.stats` says what each graph did.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_core.adapters.sqlite.scope_index import ScopeIndex
from memory_core.adapters.sqlite.vector_index import ApproximateVectorIndex, candidates_to_request

__all__ = ["ScopeVectorIndexes", "ann_available"]

logger = logging.getLogger(__name__)

#: Searches of a new graph that are all checked, and how often one is checked after them.
FIRST_CHECKS = 8
CHECK_EVERY = 32
#: Checks the recall is averaged over, and the recall under which a graph is given up.
CHECK_WINDOW = 16
MIN_RECALL = 0.99
#: Recall under which two checks are enough to give a graph up (vectors it cannot index).
BROKEN_RECALL = 0.9
#: Filters keeping less than this share of the graph are searched exactly (the graph is no faster).
MIN_KEPT_FRACTION = 0.5
#: Changed vectors moved into the graph by one search (each costs about a millisecond).
INLINE_UPDATES = 32
#: Changed vectors waiting past this share of the graph, or moved into it past ``REBUILD_UPDATED``
#: of it, make it be built again in the background.
REBUILD_FRACTION = 0.05
REBUILD_UPDATED = 0.1

Key = tuple[str, str]
#: Vectors added to a graph between two looks at whether its build was cancelled (about a second).
BUILD_CHUNK = 1_024
#: The longest a closing store (or the process's exit) waits for a build to stop.
STOP_SECONDS = 10.0

_LIVE: weakref.WeakSet[ScopeVectorIndexes] = weakref.WeakSet()
_EXIT_HOOK: list[bool] = []


def _close_all() -> None:
    """At exit: stop the builds (a thread left inside the native library when the process ends aborts it)."""
    for indexes in list(_LIVE):
        indexes.close()


class _Cancelled(Exception):
    """A build stopped because its store closed or its scope no longer needs it."""


def ann_available() -> bool:
    """Whether ``usearch`` (the ``ann`` extra) is installed."""
    try:
        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class _Graph:
    """One scope's graph (for one epoch of the scope), or the build of one under way."""

    epoch: int
    owner: weakref.ReferenceType[ScopeIndex] | None = None  # the scope index its positions are of
    building: Future[ApproximateVectorIndex] | None = None
    stop_building: threading.Event = field(default_factory=threading.Event)
    index: ApproximateVectorIndex | None = None
    searches: int = 0
    checks: deque[float] = field(default_factory=lambda: deque(maxlen=CHECK_WINDOW))
    exact_fallbacks: int = 0
    updated: int = 0  # vectors removed and added again after the build
    builds: int = 0
    rebuilt_for_recall: bool = False
    off: str | None = None  # why the scope went back to exact search for good


class ScopeVectorIndexes:
    """The approximate vector indexes of one store's large scopes (see the module docstring).

    Args:
        min_scope: Scopes of at least this many memories get a graph (0: none).
        lock: The store's lock: builds copy a scope's vectors under it.
        build: Builds a graph from ``(vectors, keys)``; the default is a one-thread HNSW build.
    """

    def __init__(
        self,
        min_scope: int,
        *,
        lock: threading.RLock | None = None,
        build: Callable[[np.ndarray, np.ndarray], ApproximateVectorIndex] | None = None,
    ) -> None:
        if min_scope < 0:
            raise ValueError("min_scope must not be negative")
        self.min_scope = int(min_scope)
        self._store_lock = lock or threading.RLock()
        self._custom_build = build
        self._graphs: dict[Key, _Graph] = {}
        self._one_at_a_time = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._threads: set[threading.Thread] = set()
        self.enabled = self.min_scope > 0 and ann_available()
        if self.min_scope > 0 and not self.enabled:
            logger.warning(
                "MEMORY_VECTOR_INDEX_MIN_SCOPE is %s but usearch is not installed "
                "(pip install 'memory-core[ann]'): every scope is searched exactly",
                self.min_scope,
            )

    def holds(self, key: Key, index: ScopeIndex) -> bool:
        """Whether ``index`` (the scope's cached index) has a graph, or one being built: it is kept in memory."""
        graph = self._graphs.get(key)
        return (
            graph is not None
            and graph.off is None
            and graph.epoch == index.epoch
            and graph.owner is not None
            and graph.owner() is index
            and (graph.index is not None or graph.building is not None)
        )

    def forget(self, matches: Callable[[Key], bool]) -> None:
        """Drop the graphs of the scopes ``matches`` picks (purged, or evicted from the store's cache)."""
        for key in [k for k in self._graphs if matches(k)]:
            self._cancel_build(self._graphs.pop(key))

    # -- the vector leg ------------------------------------------------------------------------------
    def candidates(
        self, key: Key, index: ScopeIndex, query: np.ndarray, usable: np.ndarray, k: int
    ) -> np.ndarray | None:
        """Positions for the vector leg to score exactly (the filter's survivors among the graph's
        candidates, at least ``k``), or ``None``: search the scope exactly.

        Called under the store's lock, with the scope index current.
        """
        if not self.enabled or k < 1 or not index.dims:
            return None
        if len(index) < self.min_scope:
            if key in self._graphs:  # the scope shrank (a purge and new memories): no graph any more
                self.forget(lambda other: other == key)
            return None
        graph = self._graph(key, index)
        if graph is None or graph.index is None:
            return None
        if graph.index.dimensions != len(query):
            self._give_up(key, index, f"its vectors have {graph.index.dimensions} dimensions, the query {len(query)}")
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
        keys = keys[(keys >= 0) & (keys < len(index))]
        survivors = keys[usable[keys]]
        if len(survivors) < k:
            graph.exact_fallbacks += 1
            return None
        graph.searches += 1
        waiting = index.vectors_changed
        if waiting:  # changed since the graph has them: scored exactly with the rest
            pending = np.fromiter(waiting, dtype=np.int64, count=len(waiting))
            survivors = np.concatenate((survivors, pending[usable[pending]]))
        return np.unique(survivors)

    def wants_check(self, key: Key) -> bool:
        """Whether this search of the scope's graph is also to be answered exactly, to compare."""
        graph = self._graphs.get(key)
        if graph is None or graph.index is None:
            return False
        return graph.searches <= FIRST_CHECKS or graph.searches % CHECK_EVERY == 0

    def record_check(self, key: Key, index: ScopeIndex, approximate: np.ndarray, exact: np.ndarray) -> None:
        """Compare a search's top ``k`` positions from the graph with exact search's."""
        graph = self._graphs.get(key)
        if graph is None or graph.index is None or not len(exact):
            return
        recall = len(np.intersect1d(approximate, exact)) / len(exact)
        graph.checks.append(recall)
        mean = sum(graph.checks) / len(graph.checks)
        if not (
            (len(graph.checks) >= 2 and mean < BROKEN_RECALL)
            or (len(graph.checks) == CHECK_WINDOW and mean < MIN_RECALL)
        ):
            return
        why = f"recall {mean:.3f} over the last {len(graph.checks)} checks against exact search"
        if not graph.rebuilt_for_recall:
            graph.rebuilt_for_recall = True
            logger.warning("the approximate vector index of a scope of %s memories had %s: building it again", len(index), why)
            graph.index = None
            self._start_build(index, graph)
            return
        self._give_up(key, index, why)

    def fail(self, key: Key, index: ScopeIndex, exc: BaseException) -> None:
        """The scope's graph raised: the scope goes back to exact search (the search goes on)."""
        self._give_up(key, index, f"it failed: {type(exc).__name__}: {exc}")

    def _give_up(self, key: Key, index: ScopeIndex, why: str) -> None:
        graph = self._graphs.get(key)
        if graph is None:
            return
        graph.off = why
        graph.index = None
        self._cancel_build(graph)
        index.vectors_changed = None
        logger.warning("a scope of %s memories goes back to exact vector search: its approximate index had %s", len(index), why)

    # -- building and keeping graphs ------------------------------------------------------------------
    def _graph(self, key: Key, index: ScopeIndex) -> _Graph | None:
        """The scope's graph, current; starts a build when there is none (``None`` meanwhile)."""
        graph = self._graphs.get(key)
        if graph is None or graph.epoch != index.epoch:  # a new scope, or rows removed: positions moved
            if graph is not None:
                self._cancel_build(graph)
            graph = self._graphs[key] = _Graph(epoch=index.epoch)
        if graph.off is not None:
            return None
        if graph.owner is None or graph.owner() is not index:
            # the scope index was loaded again (its positions may differ): this one needs its own graph
            self._cancel_build(graph)
            graph.index, graph.owner = None, weakref.ref(index)
        if graph.building is not None:
            if not graph.building.done():
                return None
            built, graph.building = graph.building, None
            try:
                graph.index = built.result()
            except Exception as exc:  # a bug or no memory: exact search, for good
                self._give_up(key, index, f"its build failed: {type(exc).__name__}: {exc}")
                return None
            graph.searches = 0
            graph.checks.clear()
        if graph.index is None:
            self._start_build(index, graph)
            return None
        self._catch_up(index, graph)
        return graph if graph.index is not None else None

    def _start_build(self, index: ScopeIndex, graph: _Graph) -> None:
        if self._closed:
            return
        future: Future[ApproximateVectorIndex] = Future()
        stop = threading.Event()
        owner = weakref.ref(index)

        def build() -> None:
            try:
                with self._one_at_a_time:  # one CPU for all builds; the others wait their turn
                    if self._stop.is_set() or not future.set_running_or_notify_cancel():
                        return
                    try:
                        with self._store_lock:  # a consistent copy; what changes after it is applied later
                            scope = owner()
                            if self._stop.is_set() or stop.is_set():
                                raise _Cancelled("the build was stopped before it began")
                            if scope is None:
                                raise _Cancelled("the scope index was dropped before its build began")
                            positions = np.flatnonzero(scope.has_vector[: len(scope)]).astype(np.int64)
                            vectors = np.ascontiguousarray(scope.vectors[positions], dtype=np.float32)
                            scope.vectors_changed = set()
                            del scope
                        future.set_result(self._built(vectors, positions, stop))
                    except BaseException as exc:  # handed to the search that installs it
                        future.set_exception(exc)
            finally:
                self._threads.discard(threading.current_thread())

        if not _EXIT_HOOK:
            atexit.register(_close_all)
            _EXIT_HOOK.append(True)
        _LIVE.add(self)
        # a daemon thread that looks for a stop between chunks: a closing store, or the process's exit,
        # waits about a second for it instead of the whole build
        thread = threading.Thread(target=build, name="memory-core-ann", daemon=True)
        self._threads.add(thread)
        try:
            thread.start()
        except BaseException:
            self._threads.discard(thread)
            raise
        graph.building, graph.stop_building = future, stop
        graph.builds += 1
        logger.info("building an approximate vector index of a scope of %s memories", len(index))

    def _built(self, vectors: np.ndarray, positions: np.ndarray, stop: threading.Event) -> ApproximateVectorIndex:
        """The graph of ``vectors`` under ``positions``, added a chunk at a time (one thread, so the
        same graph as one call), stopping when the store closes or the build is no longer wanted."""
        if self._custom_build is not None:
            return self._custom_build(vectors, positions)
        built = ApproximateVectorIndex(vectors.shape[1])
        for start in range(0, len(positions), BUILD_CHUNK):
            if self._stop.is_set() or stop.is_set():
                raise _Cancelled("the build was stopped")
            built.add(positions[start : start + BUILD_CHUNK], vectors[start : start + BUILD_CHUNK], threads=1)
        return built

    def _catch_up(self, index: ScopeIndex, graph: _Graph) -> None:
        """Move up to ``INLINE_UPDATES`` of the vectors changed since the graph's copy into it (removed,
        then added again); the rest stay candidates of every search until they are moved."""
        changed = index.vectors_changed
        if not changed or graph.index is None:
            return
        size = max(len(graph.index), 1)
        if len(changed) > REBUILD_FRACTION * size or graph.updated > REBUILD_UPDATED * size:
            graph.index = None  # built again from the current vectors; exact meanwhile
            graph.updated = 0
            self._start_build(index, graph)
            return
        positions = np.sort(np.fromiter(changed, dtype=np.int64, count=len(changed)))[:INLINE_UPDATES]
        changed.difference_update(positions.tolist())
        graph.index.remove(positions)
        present = positions[index.has_vector[positions]]
        if len(present):
            graph.index.add(present, index.vectors[present])
        graph.updated += len(positions)

    @staticmethod
    def _cancel_build(graph: _Graph) -> None:
        """Abandon the graph's build under way, if any (it stops at its next chunk)."""
        if graph.building is not None:
            graph.building.cancel()
            graph.stop_building.set()
            graph.building = None

    # -- reporting and closing ----------------------------------------------------------------------
    def stats(self) -> list[dict[str, Any]]:
        """Per scope with a graph: its memories, state (``building``, ``ready``, ``exact``), searches,
        checks and their mean recall, vectors updated in place, builds, and why it went back to exact."""
        found = []
        for graph in list(self._graphs.values()):
            owner = graph.owner() if graph.owner is not None else None
            state = "exact" if graph.off else ("ready" if graph.index is not None else "building")
            found.append(
                {
                    "memories": len(owner) if owner is not None else None,
                    "state": state,
                    "searches": graph.searches,
                    "checks": len(graph.checks),
                    "mean_recall": round(sum(graph.checks) / len(graph.checks), 4) if graph.checks else None,
                    "exact_fallbacks": graph.exact_fallbacks,
                    "updated": graph.updated,
                    "builds": graph.builds,
                    "why_exact": graph.off,
                }
            )
        return found

    def close(self) -> None:
        """Stop building: a build under way stops at its next chunk (waited for, at most
        ``STOP_SECONDS``), and no build starts again."""
        self._closed = True
        self._stop.set()
        for graph in list(self._graphs.values()):
            self._cancel_build(graph)
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(STOP_SECONDS)
