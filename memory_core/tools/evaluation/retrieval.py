"""Search questions over one store in every mode x profile and score them; the tables of the scores.

``eval locomo`` and the retrieval part of ``eval japanese`` import their turns as memories and ask
their questions through :func:`search_configurations`; ``eval pipeline`` prints its scores with
:func:`group_table` too.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.ports import FixedClock
from memory_core.tools.evaluation.metrics import DEFAULT_KS, METRICS, MetricAccumulator, metric_label
from memory_core.tools.progress import NO_PROGRESS, Bar, Progress
from memory_core.tools.reporting import markdown_table, percentile

__all__ = [
    "DEFAULT_MODES",
    "DEFAULT_PROFILES",
    "Configuration",
    "Question",
    "SearchGrid",
    "add_configuration_arguments",
    "group_table",
    "results_and_best_tables",
    "results_table",
    "search_configurations",
]

#: A search mode and the ranking profile it is run with.
Configuration = tuple[SearchMode, RankingProfile]
#: The modes and profiles run unless ``--modes`` and ``--profiles`` say otherwise.
DEFAULT_MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
DEFAULT_PROFILES = (RankingProfile.NONE, RankingProfile.IMPORTANT, RankingProfile.RECENT)
#: Records written to the store per upsert.
_UPSERT_BATCH = 2000


@dataclass(frozen=True, slots=True)
class SearchGrid:
    """The configurations an evaluation searches in: every mode with every profile.

    Attributes:
        modes: The search modes, in order.
        profiles: The ranking profiles each mode is run with, in order.
    """

    modes: tuple[SearchMode, ...] = DEFAULT_MODES
    profiles: tuple[RankingProfile, ...] = DEFAULT_PROFILES

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SearchGrid:
        """The ``--modes`` and ``--profiles`` of :func:`add_configuration_arguments`."""
        return cls(tuple(SearchMode(m) for m in args.modes), tuple(RankingProfile(p) for p in args.profiles))

    @property
    def configurations(self) -> list[Configuration]:
        """Each mode with each profile, mode by mode."""
        return [(mode, profile) for mode in self.modes for profile in self.profiles]


@dataclass(frozen=True, slots=True)
class Question:
    """One question as the store is asked it.

    Attributes:
        scope: The scope searched.
        text: The question.
        vector: Its query embedding (not sent in keyword mode).
        relevant: The ids of the memories that answer it.
        groups: The groups it is scored in besides ``overall`` (its category or kind).
        asked_at: The store's clock while it is searched.
    """

    scope: Scope
    text: str
    vector: np.ndarray
    relevant: frozenset[str]
    groups: tuple[str, ...]
    asked_at: datetime


async def _memory_store(records: Sequence[MemoryRecord], clock: FixedClock) -> Any:
    """An in-memory SQLite store holding ``records``."""
    from memory_core.adapters.sqlite.store import SQLiteMemoryStore

    store = SQLiteMemoryStore(":memory:", clock=clock)
    try:
        for start in range(0, len(records), _UPSERT_BATCH):
            await store.upsert(list(records[start : start + _UPSERT_BATCH]))
    except BaseException:
        await store.close()
        raise
    return store


async def _search_configuration(
    store: Any,
    questions: Sequence[Question],
    configuration: Configuration,
    *,
    clock: FixedClock,
    fields: Mapping[str, Any],
    bar: Bar,
) -> dict[str, Any]:
    """Every question in one mode x profile: its metrics and the store's search latency."""
    mode, profile = configuration
    options = MemorySearchOptions(mode=mode, ranking_profile=profile, top=max(DEFAULT_KS), **fields)
    metrics = MetricAccumulator()
    latency: list[float] = []
    for question in questions:
        clock.set(question.asked_at)
        vector = None if mode == SearchMode.KEYWORD else question.vector.tolist()
        started = time.perf_counter()
        result = await store.search(SearchRequest(question.scope, question.text, vector, options))
        latency.append((time.perf_counter() - started) * 1000.0)
        metrics.add([h.record.id for h in result.hits], question.relevant, question.groups)
        bar.advance()
    return {
        "mode": mode.value,
        "profile": profile.value,
        "metrics": metrics.result(),
        "latency_ms": {"p50": percentile(latency, 50), "p95": percentile(latency, 95)},
    }


async def search_configurations(
    records: Sequence[MemoryRecord],
    questions: Sequence[Question],
    grid: SearchGrid,
    *,
    clock: FixedClock,
    progress: Progress = NO_PROGRESS,
    **fields: Any,
) -> list[dict[str, Any]]:
    """Put ``records`` in an in-memory store; ask every question in each configuration of ``grid``, in order.

    Args:
        records: The memories (with their embeddings).
        questions: The questions, in the order they are asked.
        grid: The modes x profiles to run.
        clock: The store's clock (set to each question's ``asked_at``).
        progress: Where progress is reported.
        **fields: Other :class:`~memory_core.domain.search.MemorySearchOptions` fields (``vector_k``, ...).

    Returns:
        One entry per configuration: ``mode``, ``profile``, ``metrics`` (overall and per group) and
        ``latency_ms`` (p50 and p95 of the store's search, query embedding excluded).
    """
    configurations = grid.configurations
    store = await _memory_store(records, clock)
    bar = progress.bar("searching", len(configurations) * len(questions), unit="questions")
    try:
        results = [
            await _search_configuration(store, questions, c, clock=clock, fields=fields, bar=bar)
            for c in configurations
        ]
        bar.finish()
    finally:
        bar.close()
        await store.close()
    return results


def group_table(
    metrics: Mapping[str, Mapping[str, float]], heading: str, names: Sequence[str] = METRICS
) -> str:
    """One row per group (``overall`` first): its question count and the metrics ``names``."""
    return markdown_table(
        [heading, "n", *(metric_label(n) for n in names)],
        [[group, int(m["n"]), *(m[n] for n in names)] for group, m in metrics.items()],
    )


def results_table(results: Sequence[Mapping[str, Any]]) -> str:
    """One row per configuration: the overall metrics and the search latency."""
    return markdown_table(
        ["mode", "profile", *(metric_label(n) for n in METRICS), "p50 ms", "p95 ms"],
        [
            [
                r["mode"],
                r["profile"],
                *(r["metrics"]["overall"][n] for n in METRICS),
                r["latency_ms"]["p50"],
                r["latency_ms"]["p95"],
            ]
            for r in results
        ],
    )


def results_and_best_tables(
    results: Sequence[Mapping[str, Any]],
    *,
    rank_by: Sequence[str],
    groups: str,
    heading: str,
    names: Sequence[str] = METRICS,
) -> str:
    """:func:`results_table`, then the :func:`group_table` of the best configuration.

    Args:
        results: The configurations' results (:func:`search_configurations`).
        rank_by: The overall metrics the best configuration has the highest of, the first deciding.
        groups: What the groups are, for the table's title (``category``).
        heading: The group column's heading.
        names: The metrics of the group table.
    """
    best = max(results, key=lambda r: tuple(r["metrics"]["overall"][n] for n in rank_by))
    return (
        results_table(results)
        + f"\nper {groups}, {best['mode']} + {best['profile']}:\n\n"
        + group_table(best["metrics"], heading, names)
    )


def add_configuration_arguments(parser: argparse.ArgumentParser, *, profiles_help: str | None = None) -> None:
    """``--modes`` and ``--profiles`` (default: :data:`DEFAULT_MODES` and :data:`DEFAULT_PROFILES`)."""
    parser.add_argument(
        "--modes",
        nargs="+",
        default=[m.value for m in DEFAULT_MODES],
        choices=[m.value for m in SearchMode],
        help="search modes to run (default: keyword vector hybrid)",
    )
    parser.add_argument(
        "--profiles",
        nargs="+",
        default=[p.value for p in DEFAULT_PROFILES],
        choices=[p.value for p in RankingProfile],
        help=profiles_help,
    )
