"""One Azure AI Search request rendered from a search plan (:mod:`memory_core.domain.search_plan`).

The plan's text leg is the ``search`` text (plain words, never query syntax) with ``searchMode=all``
where it matches only memories holding every word; its vector leg is one vector query (``k``, and its
``weight`` where there is a text leg to fuse with, which the service fuses by Reciprocal Rank
Fusion); its profile is the scoring profile; semantic reranking is the semantic configuration. The
filter is compiled from the options and the scope (:func:`memory_core.adapters.azure.odata.search_filter`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from azure.search.documents.models import VectorizedQuery

from memory_core.adapters.azure import odata
from memory_core.adapters.azure.search_index import SELECT_FIELDS, SEMANTIC_CONFIGURATION, VECTOR_FIELD
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions
from memory_core.domain.search_plan import SearchPlan
from memory_core.domain.search_time import TimeWindow
from memory_core.errors import ValidationError

__all__ = ["SearchRequest", "check_query_vector", "plain_query_text", "search_request"]

_QUERY_SPECIALS = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def plain_query_text(text: str) -> str:
    """``text`` as plain words for the ``search`` parameter: every query-syntax operator escaped.

    User and agent text is never query syntax: ``-``, ``+``, ``|``, quotes, ``*``, parentheses and the
    rest are backslash-escaped, so ``non-smoking "quiet" room*`` searches for those words the way the
    embedded store does, instead of excluding, grouping or prefix-matching.
    """
    return _QUERY_SPECIALS.sub(r"\\\1", text)


def check_query_vector(plan: SearchPlan, vector: Sequence[float] | None, dimensions: int | None) -> None:
    """Refuse a query vector the plan's vector leg cannot use.

    Raises:
        ValidationError: None where the vector leg runs; not finite numbers, all zeros, or another
            size than the index's ``dimensions``.
    """
    plan.check_vector(vector)
    if plan.vector is None or vector is None:
        return
    if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector) or not any(vector):
        raise ValidationError("vector", "must be a non-zero vector of finite numbers")
    if dimensions is not None and len(vector) != dimensions:
        raise ValidationError(
            "vector", f"has {len(vector)} dimensions; this index's embeddings have {dimensions}"
        )


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """The keyword arguments of one ``SearchClient.search`` call, and what the result should say."""

    kwargs: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def search_request(
    plan: SearchPlan,
    text: str,
    vector: Sequence[float] | None,
    scope: Scope,
    options: MemorySearchOptions,
    *,
    now: datetime,
    exhaustive: bool,
    debug: bool,
    window: TimeWindow | None = None,
) -> SearchRequest:
    """The request of ``plan`` for the (stripped) query ``text`` in ``scope``.

    Args:
        plan: The plan of the search.
        text: The query text, stripped.
        vector: The query vector (checked by :func:`check_query_vector`).
        scope: Whose memories.
        options: The validated search options (filters, ``top``, ``order_by``).
        now: The moment expiry is measured against.
        exhaustive: Ask for exact nearest neighbours instead of HNSW.
        debug: Ask for per-leg subscores and the document boost (``debug="vector"``).
        window: Only memories whose span overlaps it (:func:`memory_core.adapters.azure.odata.window_filter`).
    """
    words = plan.text is not None and bool(text)
    kwargs: dict[str, Any] = {
        # An empty keyword query matches everything the filters allow (``*``).
        "search_text": plain_query_text(text) if words else None,
        "filter": odata.search_filter(scope, options, now, window),
        "select": list(SELECT_FIELDS),
        "top": options.top,
        "scoring_statistics": "global",
    }
    if plan.vector is not None:
        assert vector is not None
        kwargs["vector_queries"] = [_vector_query(plan, vector, fused=words, exhaustive=exhaustive)]
        if words and plan.text is not None and plan.text.match == "all":
            kwargs["search_mode"] = "all"  # the text leg counts a memory only with every query word
    if plan.profile is not None:
        kwargs["scoring_profile"] = plan.profile.name
    order = odata.order_by(options.order_by)
    if order:
        kwargs["order_by"] = order
    notes = _semantic(plan, words, kwargs)
    if debug:
        kwargs["debug"] = "vector"
    return SearchRequest(kwargs, notes)


def _vector_query(
    plan: SearchPlan, vector: Sequence[float], *, fused: bool, exhaustive: bool
) -> VectorizedQuery:
    """The vector leg as a vector query; its weight only where there is a text leg to fuse with."""
    assert plan.vector is not None
    weight = plan.vector.weight
    return VectorizedQuery(
        vector=[float(x) for x in vector],
        k_nearest_neighbors=plan.vector.k,
        fields=VECTOR_FIELD,
        weight=weight if fused and weight != 1.0 else None,
        exhaustive=True if exhaustive else None,
    )


def _semantic(plan: SearchPlan, words: bool, kwargs: dict[str, Any]) -> list[str]:
    """Ask for semantic reranking when the plan does (it needs query text); the notes of the result."""
    if not plan.semantic:
        return []
    if not words:
        return ["the semantic ranker needs query text; results are not reranked"]
    kwargs["query_type"] = "semantic"
    kwargs["semantic_configuration_name"] = SEMANTIC_CONFIGURATION
    kwargs["semantic_error_mode"] = "partial"
    return []
