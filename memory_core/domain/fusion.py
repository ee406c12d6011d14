"""How hybrid search fuses its two legs, as data: one definition that both stores use.

Hybrid search is Reciprocal Rank Fusion (RRF, ``k = 60``) of a keyword leg (BM25) and a vector leg:
``relevance = 1 / (60 + keyword_rank) + w / (60 + vector_rank)``. What works depends on the language of
the query, measured in ``docs/evaluation.md``:

* **Japanese** questions are paraphrases far more often than not, and Japanese words that match in
  part (好き, 行く, する) say little: with equal weights, the keyword leg's partial matches pulled the
  vector leg's good answers down (any@1 0.385 against 0.600 for the vector leg alone on the Japanese
  set with distractors). So a Japanese query's keyword leg only counts a memory that holds *every*
  content word of the query (Azure AI Search: ``searchMode=all``): an exact match (a name, 「エビアレルギー」)
  still lifts a memory, a partial one no longer drowns the vector leg.
* **Other languages** (English): the keyword leg is the stronger one on LoCoMo (any@5 0.614 against
  0.507 for imported turns) and any match counts (``searchMode=any``). The vector leg's weight is
  0.1: the vector leg then reorders what the text leg found rather than adding to it (its first
  hit alone is worth the text leg's 541st; near the top, its vote lifts a text match by up to about
  six places), which is what its lower precision in English earns. Measured (``eval locomo`` hybrid + none
  any@5, keyword 0.614): weight 0.05 0.623, 0.07 0.628, **0.1 0.630**, 0.15 0.622, 0.2 0.611, 0.5
  0.594, 1.0 0.595; end to end (``eval pipeline``, the ``important`` profile with the boosts of
  :mod:`memory_core.domain.ranking`): 0.1 0.640 against keyword's 0.619.

Both are expressible in an Azure AI Search query (``searchMode`` and the vector query's ``weight``), so
the embedded store and Azure rank alike. An explicit ``vector_weight`` in the search options wins over
the language's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from memory_core.language.text import has_japanese

__all__ = ["FUSIONS", "RRF_K", "Fusion", "fusion_for", "query_language", "reciprocal_rank_fusion"]

#: Reciprocal Rank Fusion's constant: a leg's memory at 0-based rank ``r`` adds ``w / (RRF_K + r)``.
RRF_K = 60


@dataclass(frozen=True, slots=True)
class Fusion:
    """The fusion of one query language.

    Attributes:
        vector_weight: The vector leg's RRF weight (the keyword leg's is 1).
        text_match: ``any``: a memory matches the keyword leg with any query word (BM25 as usual);
            ``all``: only with every one (Azure AI Search's ``searchMode``). Applies to hybrid and
            semantic search; keyword search always matches any word.
    """

    vector_weight: float
    text_match: Literal["any", "all"]


#: Per query language (``ja``, or ``*`` for any other), measured on the evaluation sets.
FUSIONS: Mapping[str, Fusion] = {
    "ja": Fusion(vector_weight=1.0, text_match="all"),
    "*": Fusion(vector_weight=0.1, text_match="any"),
}


def query_language(query: str) -> str:
    """``ja`` for a query with kana or kanji, ``*`` otherwise."""
    return "ja" if has_japanese(query) else "*"


def fusion_for(query: str, vector_weight: float | None = None) -> Fusion:
    """The fusion of ``query``: its language's (:data:`FUSIONS`), with ``vector_weight`` when one is
    given explicitly."""
    fusion = FUSIONS[query_language(query)]
    if vector_weight is None:
        return fusion
    return Fusion(vector_weight=vector_weight, text_match=fusion.text_match)


def reciprocal_rank_fusion(legs: Iterable[tuple[np.ndarray, float]], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Relevance ``sum(w / (RRF_K + rank))`` of ``size`` documents over the legs they are in, and which are.

    Args:
        legs: Per leg, each document's 0-based rank (-1: not in the leg) and the leg's weight ``w``;
            summed in this order.
        size: How many documents.
    """
    relevance = np.zeros(size, dtype=np.float64)
    selected = np.zeros(size, dtype=bool)
    for ranks, weight in legs:
        in_leg = ranks >= 0
        relevance[in_leg] += weight / (RRF_K + ranks[in_leg])
        selected |= in_leg
    return relevance, selected
