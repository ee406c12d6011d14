"""The order of a search's hits in the service: relevance with the rank, the cues, facts before their
episodes unless the episode says more of what was asked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Provenance, Scope
from memory_core.domain.relevance import RelevanceCalibration
from memory_core.domain.search import MemorySearchOptions, ScoreBreakdown, SearchHit
from memory_core.language.query_time import asks_when
from memory_core.ports import MemoryStore
from memory_core.service.consolidation.features import says_it_ended
from memory_core.service.search import (
    ARCHIVED_CUE,
    ENDED_CUE,
    RELATION_RELEVANCE,
    by_relevance_and_rank,
    discounted,
    ended_at,
    time_asked,
    with_question_cues,
    with_relevance,
    without_time_words,
)
from memory_core.service.speakers import speaker_asked
from memory_core.service.statements import facts_first

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


def test_a_fact_stands_for_the_episode_it_says_all_of() -> None:
    episode = hit("I live in Bristol.", 0.07, 0.60, kind=MemoryKind.EPISODE)
    fact = hit("I live in Bristol", 0.06, 0.62)
    other = hit("I cycle to work", 0.05, 0.4, turn="t2")
    assert texts(facts_first([episode, fact, other], 5)) == ["I live in Bristol", "I cycle to work"]
    # ... and the place freed goes to the next memory.
    assert texts(facts_first([episode, fact, other], 2)) == ["I live in Bristol", "I cycle to work"]


def test_an_episode_that_says_more_than_its_fact_stands_for_it_at_the_better_place() -> None:
    episode = hit("番号変わりました。080-3333-4444になります。", 0.0593, 0.65, kind=MemoryKind.EPISODE)
    fact = hit("番号変わりました", 0.0658, 0.70)
    other = hit("電話は夜がいいです", 0.0600, 0.5, turn="t2")
    ordered = facts_first([fact, other, episode], 5)
    assert texts(ordered) == [episode.record.memory, other.record.memory]
    assert ordered[0].score == fact.score and ordered[0].relevance == episode.relevance  # its place's score


def test_an_episode_more_relevant_than_its_fact_stands_for_it() -> None:
    fact = hit("I'm training for a half marathon", 0.0696, 0.489)
    episode = hit("I'm training for a half marathon.", 0.0632, 0.516, kind=MemoryKind.EPISODE)
    assert texts(facts_first([fact, episode], 5)) == ["I'm training for a half marathon."]


def test_facts_that_together_say_all_of_their_episode_stand_each_at_its_place() -> None:
    first = hit("I moved to Osaka", 0.08, 0.7)
    other = hit("I like ramen", 0.07, 0.6, turn="t2")
    episode = hit("I moved to Osaka and I work at Contoso.", 0.06, 0.65, kind=MemoryKind.EPISODE)
    second = hit("I work at Contoso", 0.05, 0.66)
    ordered = facts_first([first, other, episode, second], 5)
    assert texts(ordered) == ["I moved to Osaka", "I like ramen", "I work at Contoso"]
    # One of them alone does not say all of it: the episode stands for both, at the first one's place.
    assert texts(facts_first([first, other, episode], 5)) == [episode.record.memory, "I like ramen"]


def test_a_fact_that_says_what_its_episode_does_not_keeps_its_place() -> None:
    episode = hit("Moved again!", 0.07, 0.5, kind=MemoryKind.EPISODE)
    fact = hit("I moved to Kyoto in March", 0.06, 0.6)
    assert texts(facts_first([episode, fact], 5)) == ["I moved to Kyoto in March", "Moved again!"]  # facts first
    # A fact that also came from another message is not its episode's statement either.
    merged = hit("I like olives and anchovies", 0.06, 0.6)
    merged = merged.model_copy(
        update={"record": merged.record.model_copy(update={"provenance": [Provenance(turn_id="t1"), Provenance(turn_id="t0")]})}
    )
    olives = hit("I like olives and anchovies.", 0.07, 0.5, kind=MemoryKind.EPISODE)
    assert texts(facts_first([olives, merged], 5)) == [merged.record.memory, olives.record.memory]
    # ... unless the episode is more relevant than the fact.
    relevant = olives.model_copy(update={"relevance": 0.7})
    assert texts(facts_first([relevant, merged], 5)) == [olives.record.memory, merged.record.memory]


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


def dated(memory: str, day: datetime, relevance: float, *, category: str = "episode") -> SearchHit:
    """A hit of one day's event (an episode unless said otherwise)."""
    found = hit(memory, 0.03, relevance, kind=MemoryKind.EPISODE if category == "episode" else MemoryKind.FACT)
    record = found.record.model_copy(
        update={"category": category, "event_at": day, "event_until": day.replace(day=day.day + 1)}
    )
    return found.model_copy(update={"record": record})


def test_a_question_about_what_is_to_come_puts_what_has_ended_after_what_is_ahead() -> None:
    dentist = dated("I have a dentist appointment on November 20.", datetime(2026, 11, 20, tzinfo=UTC), 0.66)
    trip = dated("I'm going to Lisbon on December 12.", datetime(2026, 12, 12, tzinfo=UTC), 0.55)
    undated = hit("I like sailing", 0.03, 0.1)
    options = MemorySearchOptions()
    ahead = time_asked("What plans does the user have coming up?", options, NOW)
    assert ahead.ahead and ended_at(ahead, options, NOW) == NOW
    ordered = by_relevance_and_rank([dentist, trip, undated], ended_at=ended_at(ahead, options, NOW))
    assert texts(ordered) == [trip.record.memory, dentist.record.memory, undated.record.memory]
    assert ordered[1].relevance == 0.66  # what is shown is not discounted
    # A when-question, or one without a word of what is ahead, keeps the order of relevance.
    for query in ("When was the user's dentist appointment?", "What does the user have at the dentist?"):
        asked = time_asked(query, options, NOW)
        assert ended_at(asked, options, NOW) is None
        ordered = by_relevance_and_rank([dentist, trip], ended_at=ended_at(asked, options, NOW))
        assert texts(ordered)[0] == dentist.record.memory
    # Asked as of November 19, the dentist was still ahead.
    before = datetime(2026, 11, 19, tzinfo=UTC)
    assert texts(by_relevance_and_rank([dentist, trip], ended_at=before))[0] == dentist.record.memory


@pytest.mark.parametrize(
    ("query", "rest"),
    [
        ("What did the user do last weekend?", "What did the user do ?"),
        ("先月どこに行ったっけ", "どこに行ったっけ"),
        ("Where did the user live as of March?", "Where did the user live ?"),
        ("What does the user like?", None),  # no time words
        ("last weekend", None),  # nothing but time words
    ],
)
def test_the_query_without_its_time_words(query: str, rest: str | None) -> None:
    assert without_time_words(query, time_asked(query, MemorySearchOptions(), NOW)) == rest


def test_a_memory_of_the_time_asked_is_as_relevant_as_the_query_without_its_time_words() -> None:
    calibration = RelevanceCalibration(latin=0.77, japanese=0.80)
    hiking = hit("went hiking", 0.03, None)
    hiking = hiking.model_copy(update={"record": hiking.record.model_copy(update={"embedding": [1.0, 0.0]})})
    query, vector, rest = "What did I do last weekend?", [0.6, 0.8], ("What did I do ?", [0.95, 0.3122])
    store = cast(MemoryStore, cast(Any, object()))  # every hit has its vector: the store is not read

    def relevance_of(whole: list[float], **kwargs: Any) -> float | None:
        found = asyncio.run(with_relevance(store, Scope.of("u", "a"), query, whole, [hiking], calibration, **kwargs))
        return found[0].relevance

    assert relevance_of(vector) == 0.0  # the whole query: its time words pull the cosine down to 0.6
    assert relevance_of(vector, rest=rest) == pytest.approx(1.0)  # the words of what was done alone: 0.95
    far = ("What did I do ?", [0.0, 1.0])
    assert relevance_of([0.8, 0.6], rest=far) == pytest.approx(0.65)  # never less than the whole query's


def said(memory: str, speaker: str, relevance: float, *, event_at: datetime | None = None) -> SearchHit:
    record = MemoryRecord(
        user_id="u",
        agent_id="a",
        memory=f"{speaker}: {memory}",
        created_at=NOW,
        updated_at=NOW,
        event_at=event_at,
        event_until=None if event_at is None else datetime(2026, 11, 24, tzinfo=UTC),
        provenance=[Provenance(turn_id="t1", speaker=speaker)],
    )
    return SearchHit(record=record, score=1.0, breakdown=ScoreBreakdown(relevance=1.0), relevance=relevance)


def test_a_question_naming_one_speaker_puts_what_they_said_first_without_changing_relevance() -> None:
    hits = [said("Congrats on finishing your degree!", "Maria", 0.62), said("I graduated last week!", "John", 0.58)]
    speaker = speaker_asked("When did John get his degree?", hits)
    assert speaker == "John"
    ordered = by_relevance_and_rank(hits, speaker=speaker)
    assert texts(ordered) == ["John: I graduated last week!", "Maria: Congrats on finishing your degree!"]
    assert [h.relevance for h in ordered] == [0.58, 0.62]


@pytest.mark.parametrize(
    "query",
    [
        "What did Maria and John talk about?",  # two named: no one to prefer
        "When did Sam get a degree?",  # no speaker named
        "When did Johnny get his degree?",  # a longer name is another name
    ],
)
def test_no_one_speaker_named_prefers_no_one(query: str) -> None:
    hits = [said("Congrats on finishing your degree!", "Maria", 0.62), said("I graduated last week!", "John", 0.58)]
    assert speaker_asked(query, hits) is None


def test_roles_and_a_single_speaker_are_no_one_to_prefer() -> None:
    alone = [said("I graduated last week!", "John", 0.58), said("I like tea", "John", 0.3)]
    assert speaker_asked("When did John graduate?", alone) is None
    roles = [said("You should rest", "assistant", 0.5), said("I like tea", "user", 0.3)]
    assert speaker_asked("What did the user say?", roles) is None


def test_japanese_names_are_found_inside_the_question() -> None:
    hits = [said("卒業おめでとう", "真理", 0.6), said("先週卒業した", "健太", 0.55)]
    assert speaker_asked("健太が卒業したのはいつ？", hits) == "健太"


def test_a_when_question_puts_a_memory_that_says_when_first_and_keeps_its_relevance() -> None:
    dated = said("I signed up for a pottery class yesterday", "Mel", 0.55, event_at=datetime(2026, 11, 23, tzinfo=UTC))
    undated = said("Pottery is so relaxing", "Mel", 0.6)
    assert texts(by_relevance_and_rank([undated, dated])) == [undated.record.memory, dated.record.memory]
    ordered = by_relevance_and_rank([undated, dated], when=asks_when("When did Mel sign up for pottery?"))
    assert texts(ordered) == [dated.record.memory, undated.record.memory]
    assert ordered[0].relevance == 0.55


@pytest.mark.parametrize(
    ("query", "when"),
    [
        ("When did Mel sign up for pottery?", True),
        ("What month was the wedding?", True),
        ("いつ引っ越した？", True),
        ("What does Mel like?", False),
        ("How long has Mel painted?", False),
    ],
)
def test_when_questions(query: str, when: bool) -> None:
    assert asks_when(query) is when
