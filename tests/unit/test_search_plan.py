"""The mode -> legs plan both stores read."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core.domain.fusion import FUSIONS, RRF_K, reciprocal_rank_fusion
from memory_core.domain.ranking import MEMORY_PRIORITY
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode
from memory_core.domain.search_plan import TEXT_LEG_TOP, plan_for
from memory_core.errors import ValidationError


def test_each_mode_runs_its_legs() -> None:
    keyword = plan_for(MemorySearchOptions(mode=SearchMode.KEYWORD), "window seat")
    assert keyword.vector is None and not keyword.fused and keyword.text is not None
    assert (keyword.text.top, keyword.text.match, keyword.text.without_words) == (TEXT_LEG_TOP, "any", "all")
    vector = plan_for(MemorySearchOptions(mode=SearchMode.VECTOR, vector_k=7), "window seat")
    assert vector.text is None and vector.vector is not None and vector.vector.k == 7 and not vector.fused
    for mode in (SearchMode.HYBRID, SearchMode.SEMANTIC):
        plan = plan_for(MemorySearchOptions(mode=mode), "window seat")
        assert plan.fused and plan.text is not None and plan.vector is not None
        assert plan.text.without_words == "none" and plan.semantic == (mode == SearchMode.SEMANTIC)
        assert plan.vector.weight == FUSIONS["*"].vector_weight and plan.text.weight == 1.0


def test_semantic_search_sorted_by_a_field_is_refused_naming_order_by() -> None:
    for values in ({"mode": "semantic", "order_by": "importance desc"}, {"mode": "semantic", "order_by": "updated_at asc"}):
        with pytest.raises(ValidationError) as info:
            MemorySearchOptions.from_values(values)
        assert info.value.field == "order_by" and "semantic" in info.value.message
    # Options changed without validation are refused by the plan both stores read.
    smuggled = MemorySearchOptions(mode=SearchMode.SEMANTIC).model_copy(update={"order_by": OrderBy.IMPORTANCE_DESC})
    with pytest.raises(ValidationError) as info:
        plan_for(smuggled, "window seat")
    assert info.value.field == "order_by"
    for mode in (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID):
        assert plan_for(MemorySearchOptions(mode=mode, order_by=OrderBy.IMPORTANCE_DESC), "window seat").mode == mode


def test_the_query_language_and_explicit_weights_set_the_fusion() -> None:
    japanese = plan_for(MemorySearchOptions(), "京都の旅館")
    assert japanese.text is not None and japanese.text.match == "all"
    assert japanese.vector is not None and japanese.vector.weight == FUSIONS["ja"].vector_weight
    weighted = plan_for(MemorySearchOptions(vector_weight=2.5), "window seat")
    assert weighted.vector is not None and weighted.vector.weight == 2.5


def test_a_fusion_without_query_text_runs_the_vector_leg_alone() -> None:
    plan = plan_for(MemorySearchOptions(mode=SearchMode.HYBRID), "  ")
    assert plan.text is None and plan.vector is not None and plan.fused


def test_the_profile_and_the_vector_check() -> None:
    assert plan_for(MemorySearchOptions(), "x").profile is MEMORY_PRIORITY
    assert plan_for(MemorySearchOptions(ranking_profile=RankingProfile.NONE), "x").profile is None
    with pytest.raises(ValidationError, match="hybrid search needs a query vector"):
        plan_for(MemorySearchOptions(), "x").check_vector(None)
    plan_for(MemorySearchOptions(mode=SearchMode.KEYWORD), "x").check_vector(None)


def test_reciprocal_rank_fusion_sums_the_legs_a_document_is_in() -> None:
    relevance, selected = reciprocal_rank_fusion(
        [(np.array([0, -1, 1]), 1.0), (np.array([1, 0, -1]), 0.5)], 3
    )
    assert selected.tolist() == [True, True, True]
    assert relevance.tolist() == [1 / RRF_K + 0.5 / (RRF_K + 1), 0.5 / RRF_K, 1 / (RRF_K + 1)]
