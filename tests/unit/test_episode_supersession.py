"""Which earlier episodes a new one supersedes (the pure rule): a change, an ending and a correction
replace what they name, another value adds, and a turn that arrives late is itself the one replaced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core.domain.records import MemoryKind, MemoryRecord, Provenance
from memory_core.service.consolidation.decisions import Neighbour, thresholds_for
from memory_core.service.consolidation.supersession import statements_of, superseded_episodes

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
THRESHOLDS = thresholds_for("multilingual-e5-small")


def episode(text: str, day: int) -> MemoryRecord:
    at = START + timedelta(days=day)
    return MemoryRecord(
        id=f"ep-{day:03d}",
        user_id="u",
        agent_id="a",
        memory=text,
        kind=MemoryKind.EPISODE,
        created_at=at,
        updated_at=at,
        valid_from=at,
        provenance=[Provenance(turn_id=f"t{day}")],
    )


def replaced(earlier: list[str], later: str, similarity: float = 0.9) -> list[str]:
    """The earlier texts the later one supersedes (each earlier said on its own day, the later last)."""
    records = [episode(text, day) for day, text in enumerate(earlier)]
    new = episode(later, len(earlier))
    return [s.earlier.memory for s in superseded_episodes(new, [Neighbour(r, similarity) for r in records], THRESHOLDS)]


@pytest.mark.parametrize(
    ("earlier", "later", "gone"),
    [
        (["I work at Fabrikam as a tester.", "I have two cats."], "I started a new job at Northwind.", ["I work at Fabrikam as a tester."]),
        (["I play badminton on Tuesdays.", "I play chess too."], "I quit badminton, my shoulder hurts.", ["I play badminton on Tuesdays."]),
        (["My number is 070-1234-5678."], "New number: 070-9999-0000.", ["My number is 070-1234-5678."]),
        (["Reach me at kim@old.example."], "Please use kim@new.example from now on.", ["Reach me at kim@old.example."]),
        (["The party is on Saturday."], "My mistake, it's on Sunday.", ["The party is on Saturday."]),
        (["毎朝コーヒーを飲みます", "紅茶も好き"], "コーヒーはやめました", ["毎朝コーヒーを飲みます"]),
        (["福岡に住んでいます"], "先月、札幌に引っ越しました", ["福岡に住んでいます"]),
        (["面談は火曜です"], "訂正します、木曜でした。", ["面談は火曜です"]),
    ],
)
def test_a_change_an_ending_or_a_correction_supersedes_what_it_names(
    earlier: list[str], later: str, gone: list[str]
) -> None:
    assert replaced(earlier, later) == gone


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (["I have a cat."], "I also have a hamster."),
        (["I like jazz."], "I like hip hop as well."),
        (["I go swimming at the weekend."], "I stopped cycling, but swimming is fun."),
        (["I go to the gym on Mondays."], "Sorry for the late reply, I was at the gym."),
        (["猫を飼っています"], "犬も飼い始めました"),
        # An earlier episode of several statements is never replaced whole: the others still hold.
        (["I live in Oslo. I teach maths."], "I moved to Bergen last week."),
    ],
)
def test_another_value_or_an_unrelated_remark_replaces_nothing(earlier: list[str], later: str) -> None:
    assert replaced(earlier, later) == []


def test_a_turn_said_before_what_is_stored_is_itself_the_one_replaced() -> None:
    newer = episode("I live in Osaka now.", 5)
    late = episode("I live in Kyoto.", 4)  # said a day earlier, arrives after
    found = superseded_episodes(late, [Neighbour(newer, 0.9)], THRESHOLDS)
    assert [(s.earlier.id, s.later.id) for s in found] == [(late.id, newer.id)]


def test_an_episode_already_superseded_is_left_as_it_is() -> None:
    old = episode("I live in Leeds.", 0).model_copy(update={"valid_until": START, "superseded_by": "ep-009"})
    assert superseded_episodes(episode("I moved to York.", 3), [Neighbour(old, 0.9)], THRESHOLDS) == []


def test_statements_are_read_clause_by_clause() -> None:
    assert statements_of(episode("I gave up on French, but Japanese is going well.", 0)) == [
        "I gave up on French",
        "Japanese is going well.",
    ]


def _said_by(text: str, speaker: str, day: int) -> MemoryRecord:
    record = episode(f"{speaker}: {text}", day)
    return record.model_copy(update={"id": f"ep-{speaker}-{day}", "provenance": [Provenance(turn_id=f"t{day}", speaker=speaker)]})


@pytest.mark.parametrize("later", ["I live in Boston.", "My mistake, it's Boston."])
def test_what_one_person_says_never_replaces_what_another_said(later: str) -> None:
    melanie = _said_by("I live in Denver.", "Melanie", 0)
    caroline = _said_by(later, "Caroline", 1)
    assert superseded_episodes(caroline, [Neighbour(melanie, 0.9)], THRESHOLDS) == []
    again = _said_by(later, "Melanie", 1)  # the same person: her change replaces what she said
    assert [s.earlier.id for s in superseded_episodes(again, [Neighbour(melanie, 0.9)], THRESHOLDS)] == [melanie.id]
