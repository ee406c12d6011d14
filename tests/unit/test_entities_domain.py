"""The merge rules of entities (memory_core.domain.entities)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core.domain.entities import Entity, entity_id, matching, resolve
from memory_core.domain.records import Scope
from memory_core.language.entities import Mention, mentions

SCOPE = Scope(user_id="u1", agent_id="a1")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _learn(*texts: str) -> list[Entity]:
    known: dict[str, Entity] = {}
    for day, text in enumerate(texts):
        changed, _ = resolve(SCOPE, mentions(text), list(known.values()), T0 + timedelta(days=day))
        known.update({e.id: e for e in changed})
    return list(known.values())


def test_a_relation_then_its_name_is_one_person() -> None:
    (sister,) = _learn("My sister is visiting.", "My sister Ana works at home.", "Ana loves jazz.", "姉が来た")
    assert (sister.kind, sister.name, sister.relation) == ("person", "Ana", "sister")
    assert sister.first_mentioned == T0 and sister.last_mentioned == T0 + timedelta(days=3)


def test_different_names_never_merge() -> None:
    people = _learn("My friend Sara plays chess.", "My friend Sarah plays tennis.", "Her name is Sara, not Sarah.")
    assert sorted(e.name or "" for e in people) == ["Sara", "Sarah"]


def test_two_sisters_stay_two() -> None:
    people = _learn("My sister Ana lives in Oslo.", "My sister Maria lives in Rome.")
    assert sorted(e.name or "" for e in people if e.kind == "person") == ["Ana", "Maria"]


def test_a_pet_and_a_person_of_one_name_by_relation() -> None:
    entities = _learn("My dog Rex is old.", "Rex loves the beach.")
    assert [(e.kind, e.name, e.relation) for e in entities] == [("pet", "Rex", "dog")]


def test_the_same_text_gives_the_same_ids() -> None:
    first = {e.id for e in _learn("My sister Ana works at Contoso.")}
    assert first == {e.id for e in _learn("My sister Ana works at Contoso.")}
    assert entity_id(SCOPE, "person", "ana") != entity_id(Scope(user_id="u2", agent_id="a1"), "person", "ana")


def test_matching_a_query_creates_nothing() -> None:
    known = _learn("My sister Ana works at Contoso.", "My wife Mei is a pilot.")
    wife = matching(Mention("person", None, "wife"), known)
    assert [e.name for e in wife] == ["Mei"]
    assert matching(Mention("person", "Anna", None), known) == []
    assert [e.name for e in matching(Mention("person", "ana", None), known)] == ["Ana"]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="entity kind"):
        Entity("x", "u", "a", "robot", None, None, T0, T0)
