"""Ranking profiles as data: one definition that both stores use.

The embedded store evaluates these functions itself; the Azure AI Search adapter renders them into
the index's scoring profiles. How a scoring function turns a field value into a boost follows Azure AI
Search's documented semantics (magnitude ranges, freshness durations, interpolations, "constant
beyond range"). How Azure combines boosts with relevance is not published; this module is the one
place where that choice is made (:data:`FUNCTION_AGGREGATIONS`, :func:`apply_profile`), and
``scripts/calibrate_scoring.py`` measures it on a live service.

Per function, with ``g`` the interpolated position in ``[0, 1]``: ``b = 1 + (boost - 1) * g``. The
profile's multiplier aggregates the ``b`` values (``sum`` by default), and the final score is
``relevance * multiplier``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from memory_core.domain.search import RankingProfile

__all__ = [
    "FUNCTION_AGGREGATIONS",
    "MEMORY_PRIORITY",
    "MEMORY_RECENCY",
    "PROFILES",
    "FunctionKind",
    "Interpolation",
    "ScoringFunction",
    "ScoringProfile",
    "apply_profile",
    "profile_for",
]

_SECONDS_PER_DAY = 86400.0


class FunctionKind(StrEnum):
    MAGNITUDE = "magnitude"
    FRESHNESS = "freshness"


class Interpolation(StrEnum):
    LINEAR = "linear"
    CONSTANT = "constant"
    QUADRATIC = "quadratic"
    LOGARITHMIC = "logarithmic"


@dataclass(frozen=True, slots=True)
class ScoringFunction:
    """One scoring function of a profile.

    Magnitude functions use ``range_start``/``range_end``; freshness functions use
    ``boosting_duration_days`` (documents updated within it get more boost, the newest the most).
    """

    kind: FunctionKind
    field: str
    boost: float
    interpolation: Interpolation = Interpolation.LINEAR
    range_start: float = 0.0
    range_end: float = 1.0
    constant_boost_beyond_range: bool = True
    boosting_duration_days: float = 0.0

    def position(self, values: np.ndarray, *, now_epoch: float) -> np.ndarray:
        """``g`` in ``[0, 1]`` for each value (epoch seconds for freshness; NaN scores 0)."""
        values = np.asarray(values, dtype=np.float64)
        if self.kind == FunctionKind.FRESHNESS:
            age_days = np.maximum(now_epoch - values, 0.0) / _SECONDS_PER_DAY
            x = 1.0 - age_days / self.boosting_duration_days
            inside = x >= 0.0
        else:
            span = self.range_end - self.range_start
            x = (values - self.range_start) / span
            inside = (x >= 0.0) & (x <= 1.0)
            if self.constant_boost_beyond_range:
                inside = x >= 0.0
            x = np.minimum(x, 1.0)
        x = np.clip(x, 0.0, 1.0)
        if self.interpolation == Interpolation.CONSTANT:
            g = np.ones_like(x)
        elif self.interpolation == Interpolation.QUADRATIC:
            g = x * x
        elif self.interpolation == Interpolation.LOGARITHMIC:
            if self.kind == FunctionKind.MAGNITUDE:
                span = self.range_end - self.range_start
                g = np.log1p(x * span) / np.log1p(span)
            else:
                g = np.log1p(x * (np.e - 1.0))
        else:
            g = x
        g = np.where(inside & ~np.isnan(values), g, 0.0)
        result: np.ndarray = np.clip(g, 0.0, 1.0)
        return result

    def boosts(self, values: np.ndarray, *, now_epoch: float) -> np.ndarray:
        """Per-document boost ``1 + (boost - 1) * g``."""
        result: np.ndarray = 1.0 + (self.boost - 1.0) * self.position(values, now_epoch=now_epoch)
        return result


def _along_documents(reduce: Callable[..., Any]) -> Callable[[Sequence[np.ndarray]], np.ndarray]:
    """An aggregation that applies the numpy reduction ``reduce`` across the functions, per document."""

    def aggregate(boosts: Sequence[np.ndarray]) -> np.ndarray:
        result: np.ndarray = reduce(boosts, axis=0)
        return result

    return aggregate


def _first(boosts: Sequence[np.ndarray]) -> np.ndarray:
    return boosts[0]


#: How the per-function boosts of a profile combine into one multiplier (Azure's
#: ``functionAggregation``). This is the pluggable place the design names.
FUNCTION_AGGREGATIONS: dict[str, Callable[[Sequence[np.ndarray]], np.ndarray]] = {
    "sum": _along_documents(np.sum),
    "average": _along_documents(np.mean),
    "maximum": _along_documents(np.max),
    "minimum": _along_documents(np.min),
    "firstMatching": _first,
}


@dataclass(frozen=True, slots=True)
class ScoringProfile:
    """A named set of scoring functions, as in an Azure AI Search index."""

    name: str
    functions: tuple[ScoringFunction, ...]
    aggregation: str = "sum"

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f.field for f in self.functions)

    def multiplier(
        self, columns: Mapping[str, np.ndarray], *, now_epoch: float
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Multiplier per document and each function's boost, from the documents' field columns."""
        per_function = {f.field: f.boosts(columns[f.field], now_epoch=now_epoch) for f in self.functions}
        combined = FUNCTION_AGGREGATIONS[self.aggregation](list(per_function.values()))
        return combined, per_function


#: How strongly a profile may reorder what the search found. Hybrid relevance is Reciprocal Rank
#: Fusion, where neighbouring ranks differ by under 2 % (``1/60`` against ``1/61``) and the tenth hit
#: still has about 87 % of the first one's relevance: boosts of 8 made a profile sort the candidates
#: by its fields and pushed the answer out of the first five. Boosts of 2 (1.5 for the secondary
#: fields) let a profile order memories of similar relevance without overruling relevance. Measured
#: end to end (``eval pipeline``, LoCoMo, hybrid; ``docs/evaluation.md``): ``important`` any@5 0.562
#: with boosts 8/4/4, 0.627 with 3/2/2, **0.640** with 2/1.5/1.5; ``recent`` 0.229 with boost 8,
#: **0.299** with 2 (the Japanese set: any@1 0.769 -> 0.831, any@5 1.0 either way).
#:
#: IMPORTANT: importance (linear, boost 2), retention (linear, boost 1.5), recalls (logarithmic
#: 0..20, boost 1.5), each constant beyond its range.
MEMORY_PRIORITY = ScoringProfile(
    name="memory-priority",
    functions=(
        ScoringFunction(FunctionKind.MAGNITUDE, "importance", 2.0, Interpolation.LINEAR, 0.0, 1.0),
        ScoringFunction(FunctionKind.MAGNITUDE, "retention_score", 1.5, Interpolation.LINEAR, 0.0, 1.0),
        ScoringFunction(FunctionKind.MAGNITUDE, "access_count", 1.5, Interpolation.LOGARITHMIC, 0.0, 20.0),
    ),
)

#: RECENT: freshness on ``updated_at``, boost 2 over 90 days.
MEMORY_RECENCY = ScoringProfile(
    name="memory-recency",
    functions=(
        ScoringFunction(
            FunctionKind.FRESHNESS, "updated_at", 2.0, Interpolation.LINEAR, boosting_duration_days=90.0
        ),
    ),
)

PROFILES: dict[RankingProfile, ScoringProfile | None] = {
    RankingProfile.IMPORTANT: MEMORY_PRIORITY,
    RankingProfile.RECENT: MEMORY_RECENCY,
    RankingProfile.NONE: None,
}


def profile_for(ranking: RankingProfile) -> ScoringProfile | None:
    """The scoring profile behind a :class:`RankingProfile` (``None`` means relevance only)."""
    return PROFILES[RankingProfile(ranking)]


def apply_profile(
    relevance: np.ndarray,
    profile: ScoringProfile | None,
    columns: Mapping[str, np.ndarray],
    *,
    now_epoch: float,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Final scores, the multiplier, and per-function boosts for documents with ``relevance``."""
    relevance = np.asarray(relevance, dtype=np.float64)
    if profile is None:
        return relevance, np.ones_like(relevance), {}
    multiplier, per_function = profile.multiplier(columns, now_epoch=now_epoch)
    return relevance * multiplier, multiplier, per_function
