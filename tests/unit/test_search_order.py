"""The order of a search's hits in the service: relevance with the rank, the cues, facts before their
episodes unless the episode says more of what was asked."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Provenance
from memory_core.domain.search import ScoreBreakdown, SearchHit
from memory_core.service.consolidation.features import says_it_ended
from memory_core.service.search import (
    ARCHIVED_CUE,
    ENDED_CUE,
    RELATION_RELEVANCE,
    by_relevance_and_rank,
    discounted,
    facts_first,
    with_question_cues,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def hit(
    memory: str,
    score: float,
    relevance: float | None,
    *,
    kind: MemoryKind = MemoryKind.FACT,
    turn: str = "t1",
    status: MemoryStatus = MemoryStatus.ACTIVE,
) -> SearchHit:
    record = MemoryRecord(
        user_id="u",
        agent_id="a",
        memory=memory,
        kind=kind,
        status=status,
        created_at=NOW,
        updated_at=NOW,
        provenance=[Provenance(turn_id=turn)],
    )
    return SearchHit(record=record, score=score, breakdown=ScoreBreakdown(relevance=score), relevance=relevance)


def texts(hits: list[SearchHit]) -> list[str]:
    return [h.record.memory for h in hits]


@pytest.mark.parametrize(
    ("statement", "ended"),
    [
        ("I don't eat pork anymore.", True),
        ("No more yoga for me, my knee can't take it.", True),
        ("I cancelled my Netflix subscription yesterday.", True),
        ("Rex passed away last week.", True),
        ("もうテニスはやめた。", True),
        ("ネットフリックスは解約しました", True),
        # A liking given up answers "does the user like ...?"; a change says what holds now.
        ("I don't like mushrooms anymore, I pick them off.", False),
        ("もう納豆は好きじゃない", False),
        ("I'm a tea person now, no more coffee in the morning.", False),
        ("今は紅茶派です、コーヒーはやめました", False),
        ("I go running three mornings a week.", False),
    ],
)
def test_what_says_only_that_something_ended(statement: str, ended: bool) -> None:
    assert says_it_ended(statement) is ended


def test_relevance_reorders_what_shared_words_ranked_first() -> None:
    hits = [
        hit("I like olives on pizza too", 0.0665, 0.558),
        hit("I don't like mushrooms anymore, I pick them off", 0.0617, 0.76),
    ]
    assert texts(by_relevance_and_rank(hits)) == [
        "I don't like mushrooms anymore, I pick them off",
        "I like olives on pizza too",
    ]


def test_without_a_relevance_on_every_hit_the_rank_decides() -> None:
    hits = [hit("first", 0.07, None), hit("second", 0.06, 0.9)]
    assert texts(by_relevance_and_rank(hits)) == ["first", "second"]


def test_what_ended_comes_after_a_current_memory_of_about_the_same_relevance() -> None:
    ended = hit("I stopped drinking coffee, doctor's orders", 0.0618, 0.581)
    current = hit("And green tea in the afternoon.", 0.0616, 0.541, kind=MemoryKind.EPISODE, turn="t2")
    ordered = by_relevance_and_rank(discounted([ended, current]))
    assert texts(ordered) == ["And green tea in the afternoon.", "I stopped drinking coffee, doctor's orders"]
    assert ordered[1].score == pytest.approx(0.0618 * ENDED_CUE)
    assert ordered[1].relevance == pytest.approx(0.581)  # what is shown is not discounted
    # ... but first when nothing current is nearly as relevant.
    far = hit("I collect stamps", 0.0616, 0.2, turn="t3")
    assert texts(by_relevance_and_rank(discounted([ended, far])))[0] == "I stopped drinking coffee, doctor's orders"


def test_an_archived_memory_competes_at_its_discount() -> None:
    archived = hit("old", 0.1, None, status=MemoryStatus.ARCHIVED)
    active = hit("active", 0.095, None, turn="t2")
    ordered = discounted([archived, active])
    assert texts(ordered) == ["active", "old"] and ordered[1].breakdown.boost == pytest.approx(ARCHIVED_CUE)


def test_an_episode_more_relevant_than_its_fact_keeps_its_place() -> None:
    episode = hit("番号変わりました。080-3333-4444になります。", 0.0593, 0.692, kind=MemoryKind.EPISODE)
    fact = hit("番号変わりました", 0.0658, 0.638)
    assert texts(facts_first([episode, fact], 5)) == [episode.record.memory, fact.record.memory]
    # An episode no more relevant than the fact it gave goes after it.
    same = hit("I live in Bristol.", 0.07, 0.60, kind=MemoryKind.EPISODE)
    distilled = hit("I live in Bristol", 0.06, 0.62)
    assert texts(facts_first([same, distilled], 5)) == ["I live in Bristol", "I live in Bristol."]



def test_a_memory_that_tells_the_relation_asked_for_is_more_relevant() -> None:
    chef = hit("I'm a chef at a little bistro", 0.006, 0.46)
    games = hit("I'm a big fan of board games", 0.007, 0.45)
    unknown = hit("I work nights", 0.005, None)
    cued = with_question_cues("What does the user do for work?", [games, chef, unknown])
    assert [h.relevance for h in cued] == [0.45, round(0.46 + RELATION_RELEVANCE, 4), None]
    assert with_question_cues("How tall is the user?", [chef]) == [chef]  # it asks for no relation
    assert with_question_cues("Where does the user work?", [hit("I work at Contoso", 1.0, 0.95)])[0].relevance == 1.0


@pytest.mark.parametrize(
    "question", ["What is the user's VPN password?", "What's my PIN?", "ユーザーのマイナンバーは？", "What API key does the user use?"]
)
def test_no_memory_answers_a_question_for_a_secret(question: str) -> None:
    hits = [hit("I'm a network admin", 0.06, 0.62), hit("I use a Mac", 0.05, None)]
    assert [h.relevance for h in with_question_cues(question, hits)] == [0.0, None]


def test_a_plan_whose_day_has_passed_counts_as_ended_at_the_moment_asked_about() -> None:
    def plan(memory: str, day: datetime, relevance: float) -> SearchHit:
        found = hit(memory, 0.03, relevance)
        record = found.record.model_copy(
            update={"category": "plan", "event_at": day, "event_until": day.replace(day=day.day + 1)}
        )
        return found.model_copy(update={"record": record})

    passed = plan("Dentist appointment on November 20", datetime(2026, 11, 20, tzinfo=UTC), 0.62)
    coming = plan("Flying to Lisbon on December 12", datetime(2026, 12, 12, tzinfo=UTC), 0.58)
    assert texts(by_relevance_and_rank([passed, coming])) == [passed.record.memory, coming.record.memory]
    # On December 1 the dentist is behind the user: the trip to come is the plan.
    assert texts(by_relevance_and_rank([passed, coming], passed_at=NOW)) == [
        coming.record.memory,
        passed.record.memory,
    ]
    # Asked about November 19, neither had passed.
    before = datetime(2026, 11, 19, tzinfo=UTC)
    assert texts(by_relevance_and_rank([passed, coming], passed_at=before))[0] == passed.record.memory
