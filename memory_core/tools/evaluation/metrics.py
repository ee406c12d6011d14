"""Retrieval metrics over ranked ids: any@k, all@k and the reciprocal rank of the first relevant hit.

Every metric takes the ranked ids a search returned (best first) and the set of relevant (evidence)
ids. ``any@k`` is 1 when at least one evidence id is among the first ``k`` results, ``all@k`` when
every evidence id is; ``reciprocal_rank`` is ``1 / rank`` of the first evidence hit (0 when none was
returned). :class:`MetricAccumulator` averages them over questions, overall and per group.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_KS",
    "METRICS",
    "MetricAccumulator",
    "all_at_k",
    "any_at_k",
    "metric_label",
    "reciprocal_rank",
]

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
#: The metrics :class:`MetricAccumulator` reports for :data:`DEFAULT_KS`, in the order tables show them.
METRICS: tuple[str, ...] = (*(f"any@{k}" for k in DEFAULT_KS), *(f"all@{k}" for k in DEFAULT_KS), "mrr")


def metric_label(name: str) -> str:
    """A metric's column heading (``mrr`` is written ``MRR``)."""
    return "MRR" if name == "mrr" else name


def _check(relevant: Collection[str], k: int = 1) -> None:
    if k < 1:
        raise ValueError("k must be at least 1")
    if not relevant:
        raise ValueError("a question needs at least one relevant id")


def any_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any relevant id is in the first ``k`` ranked ids, else 0.0.

    Args:
        ranked: Ids in the order the search returned them.
        relevant: The evidence ids (must not be empty).
        k: Cut-off (at least 1).

    Raises:
        ValueError: ``relevant`` is empty or ``k`` is below 1.
    """
    _check(relevant, k)
    return 1.0 if any(r in relevant for r in ranked[:k]) else 0.0


def all_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if every relevant id is in the first ``k`` ranked ids, else 0.0.

    Raises:
        ValueError: ``relevant`` is empty or ``k`` is below 1.
    """
    _check(relevant, k)
    top = set(ranked[:k])
    return 1.0 if all(r in top for r in relevant) else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """``1 / rank`` (1-based) of the first relevant id in ``ranked``; 0.0 when none is there.

    Raises:
        ValueError: ``relevant`` is empty.
    """
    _check(relevant)
    for position, item in enumerate(ranked, start=1):
        if item in relevant:
            return 1.0 / position
    return 0.0


@dataclass
class MetricAccumulator:
    """Sums of any@k, all@k and reciprocal rank, overall and per group (e.g. per question category).

    Args:
        ks: The cut-offs to report.
    """

    ks: tuple[int, ...] = DEFAULT_KS
    _sums: dict[str, dict[str, float]] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def add(self, ranked: Sequence[str], relevant: Collection[str], groups: Iterable[str] = ()) -> None:
        """Score one question and add it to ``overall`` and to each of ``groups``."""
        values = {f"any@{k}": any_at_k(ranked, relevant, k) for k in self.ks}
        values.update({f"all@{k}": all_at_k(ranked, relevant, k) for k in self.ks})
        values["mrr"] = reciprocal_rank(ranked, relevant)
        for group in ("overall", *groups):
            sums = self._sums.setdefault(group, dict.fromkeys(values, 0.0))
            for name, value in values.items():
                sums[name] += value
            self._counts[group] = self._counts.get(group, 0) + 1

    def result(self) -> dict[str, dict[str, float]]:
        """Means per group: ``{group: {"n": count, "any@1": ..., "all@1": ..., "mrr": ...}}``."""
        out: dict[str, dict[str, float]] = {}
        for group in sorted(self._sums, key=lambda g: (g != "overall", g)):
            n = self._counts[group]
            out[group] = {"n": float(n), **{name: total / n for name, total in self._sums[group].items()}}
        return out
