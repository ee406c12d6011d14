"""What a search runs, as data: the legs of its mode, their sizes and weights, the profile and reranking.

Both stores read the one :class:`SearchPlan` that :func:`plan_for` makes of the options and the query:
the embedded store runs the legs and fuses them itself, the Azure AI Search adapter renders the plan
into one search request (the text leg's ``search``/``searchMode``, the vector query's ``k`` and
``weight``, the scoring profile, the semantic configuration).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from memory_core.domain.fusion import fusion_for
from memory_core.domain.ranking import ScoringProfile, profile_for
from memory_core.domain.search import MemorySearchOptions, SearchMode, check_semantic_order
from memory_core.errors import ValidationError

__all__ = ["MODE_LEGS", "TEXT_LEG_TOP", "SearchPlan", "TextLeg", "VectorLeg", "plan_for"]

#: Memories the text leg contributes to a fusion (Azure AI Search's hybrid default, ``maxTextRecallSize``).
TEXT_LEG_TOP = 1000


@dataclass(frozen=True, slots=True)
class TextLeg:
    """The keyword leg (BM25 over the searchable fields).

    Attributes:
        top: How many of its best memories take part.
        match: ``any``: a memory matches with any query word; ``all``: only with every one
            (Azure AI Search's ``searchMode``).
        weight: Its weight in the fusion.
        without_words: What a query without words matches: ``all`` memories the filters allow when
            the leg runs alone (Azure AI Search's ``*``), ``none`` in a fusion.
    """

    top: int
    match: Literal["any", "all"]
    weight: float
    without_words: Literal["all", "none"]


@dataclass(frozen=True, slots=True)
class VectorLeg:
    """The vector leg: the ``k`` nearest neighbours of the query vector, with its weight in the fusion."""

    k: int
    weight: float


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """The legs a search runs and how their results become one ranking.

    Attributes:
        mode: The search mode the plan is for.
        text: The keyword leg, or ``None`` (vector search; hybrid or semantic search without query text).
        vector: The vector leg, or ``None`` (keyword search).
        fused: Whether relevance is the Reciprocal Rank Fusion of the legs (hybrid and semantic
            search) rather than the one leg's score.
        profile: The scoring profile applied to the relevance (after the fusion), or ``None``.
        semantic: Whether semantic reranking is asked for.
    """

    mode: SearchMode
    text: TextLeg | None
    vector: VectorLeg | None
    fused: bool
    profile: ScoringProfile | None
    semantic: bool

    def legs(self) -> Sequence[TextLeg | VectorLeg]:
        """The legs that run, the text leg first (the order of the fusion's sum)."""
        return [leg for leg in (self.text, self.vector) if leg is not None]

    def check_vector(self, vector: object | None) -> None:
        """Raise when the plan has a vector leg and there is no query vector.

        Raises:
            ValidationError: The vector leg runs and ``vector`` is ``None``.
        """
        if self.vector is not None and vector is None:
            raise ValidationError("vector", f"{self.mode.value} search needs a query vector")


#: Which legs each mode runs: (text leg, vector leg); with both, relevance is their fusion.
MODE_LEGS: Mapping[SearchMode, tuple[bool, bool]] = {
    SearchMode.KEYWORD: (True, False),
    SearchMode.VECTOR: (False, True),
    SearchMode.HYBRID: (True, True),
    SearchMode.SEMANTIC: (True, True),
}


def plan_for(options: MemorySearchOptions, query: str) -> SearchPlan:
    """The plan of a search for ``query`` with ``options``.

    The query's language sets the vector leg's weight (unless ``options.vector_weight`` does) and
    whether a fused text leg counts a memory with any query word or only with all of them
    (:mod:`memory_core.domain.fusion`); hybrid or semantic search without query text runs the
    vector leg alone (still fused: its relevance is its reciprocal rank).

    Raises:
        ValidationError: Semantic search sorted by a field (options changed without validation, such
            as by ``model_copy``, reach no store that way either).
    """
    check_semantic_order(options.mode, options.order_by)
    fusion = fusion_for(query, options.vector_weight)
    with_text, with_vector = MODE_LEGS[options.mode]
    fused = with_text and with_vector
    text = None
    if with_text and (not fused or query.strip()):
        text = TextLeg(
            top=TEXT_LEG_TOP,
            match=fusion.text_match if fused else "any",
            weight=1.0,
            without_words="none" if fused else "all",
        )
    vector = (
        VectorLeg(k=options.vector_k, weight=fusion.vector_weight if fused else 1.0) if with_vector else None
    )
    return SearchPlan(
        mode=options.mode,
        text=text,
        vector=vector,
        fused=fused,
        profile=profile_for(options.ranking_profile),
        semantic=options.mode == SearchMode.SEMANTIC,
    )
