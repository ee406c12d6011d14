"""Search filters in Mem0's syntax: what is refused, with the field or operator named.

How stores apply them is the filter contract (``tests/contract/filter_contract.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_core.domain.filters import AllOf, AnyOf, Condition, metadata_terms, parse_filters, session_ids
from memory_core.domain.records import Provenance
from memory_core.domain.search import MemorySearchOptions
from memory_core.errors import ValidationError


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"colour": "red"}, "filters.colour"),
        ({"user_id": "bob"}, "filters.user_id"),
        ({"importance": {"above": 1}}, "filters.importance.above"),
        ({"metadata.topic": {"gt": 1}}, "filters.metadata.topic.gt"),
        ({"OR": []}, "filters.OR"),
        ({"AND": [{"category": {"in": "plan"}}]}, "filters.AND.0.category.in"),
        ({"metadata.a'b": 1}, "filters.metadata.a'b"),
        ({"importance": "high"}, "filters.importance.eq"),
    ],
)
def test_bad_filters_name_the_field_or_operator(filters: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        MemorySearchOptions.from_values({"filters": filters})
    assert caught.value.field == field


def test_a_plain_mapping_is_every_condition_and_a_single_group_is_its_part() -> None:
    tree = parse_filters({"category": "plan", "OR": [{"importance": {"gte": 0.5}}]})
    assert tree == AllOf((Condition("category", "eq", "plan"), Condition("importance", "gte", 0.5)))
    assert isinstance(parse_filters({"OR": [{"kind": "fact"}, {"kind": "episode"}]}), AnyOf)
    assert parse_filters({"metadata.tags": {"contains": "x"}}) == Condition("metadata", "eq", "x", "tags")


def test_too_many_conditions_are_refused() -> None:
    with pytest.raises(ValidationError, match="more than 64"):
        parse_filters({"OR": [{"importance": {"gte": i / 100}} for i in range(65)]})


def test_metadata_terms_are_the_scalar_values_and_list_elements_of_plain_keys() -> None:
    terms = metadata_terms({"topic": "tea", "tags": ["a", 2, 2.0, True, {"x": 1}], "bad key": "x", "n": None})
    assert terms == ['tags="a"', "tags=2", "tags=true", 'topic="tea"']
    assert session_ids([Provenance(turn_id="t", session_id="s-2"), Provenance(turn_id="u")]) == ["s-2"]
