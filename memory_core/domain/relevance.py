"""Relevance: how well a memory answers a query, from 0 to 1, comparable across queries (pure).

A hit's ``score`` orders the hits of one search (fused ranks times the profile's boosts): it says
nothing across queries. ``relevance`` does: the cosine similarity of the query and the memory,
rescaled for the embedder and the query's script so that ``0.5`` is where a memory starts to answer
the question (calibrated on ``memory-core eval truth``: see ``docs/evaluation.md``), ``0`` is
unrelated and ``1`` is the same meaning. An embedder without a calibration gives no relevance
(``None``), and nothing is left out for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memory_core.language.text import has_japanese

__all__ = [
    "DEFAULT_RELEVANCE_FLOOR",
    "RELEVANCE_CALIBRATIONS",
    "RelevanceCalibration",
    "calibration_for",
    "relevance",
]

#: The provider's default floor: a run whose best memory is less relevant than this is given none.
DEFAULT_RELEVANCE_FLOOR = 0.5


@dataclass(frozen=True, slots=True)
class RelevanceCalibration:
    """Where an embedder's query-to-memory cosine starts to mean an answer.

    Attributes:
        latin: The cosine at relevance 0.5 for a query in Latin script.
        japanese: The same when the query or the memory has Japanese in it (multilingual models score
            Japanese higher, against English queries too).
        width: The cosine span from relevance 0 to 1 (centred on the midpoint).
    """

    latin: float
    japanese: float
    width: float = 0.2


#: Calibrations by embedder name prefix. multilingual-e5-small (``eval truth``, 147 answerable and 20
#: unanswerable probes): the best memory of an unanswerable English question scores 0.72-0.82, of
#: an answerable one 0.75-0.92; in Japanese 0.77-0.80 against 0.78-0.93. The midpoints keep 97 % of
#: the answerable probes and silence 85 % of the unanswerable ones (0.78 for both: 97 % and 75 %).
#: Feature hashing measures shared words, not meaning: no calibration.
RELEVANCE_CALIBRATIONS: Mapping[str, RelevanceCalibration] = {
    "multilingual-e5-small": RelevanceCalibration(latin=0.77, japanese=0.80),
}


def calibration_for(
    embedder_name: str, table: Mapping[str, RelevanceCalibration] | None = None
) -> RelevanceCalibration | None:
    """The calibration of an embedder (the longest name prefix that matches), or ``None``."""
    table = RELEVANCE_CALIBRATIONS if table is None else table
    prefixes = [key for key in table if embedder_name.startswith(key)]
    return table[max(prefixes, key=len)] if prefixes else None


def relevance(cosine: float, query: str, memory: str, calibration: RelevanceCalibration) -> float:
    """The relevance (0-1) of ``memory`` whose vector has ``cosine`` with the vector of ``query``. Either
    in Japanese takes the Japanese midpoint: a Japanese memory scores higher against any query."""
    japanese = has_japanese(query) or has_japanese(memory)
    midpoint = calibration.japanese if japanese else calibration.latin
    value = 0.5 + (cosine - midpoint) / calibration.width
    return round(min(1.0, max(0.0, value)), 4)
