"""The contradiction guards and the rule decision as pure functions (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MemoryEvent
from memory_core.domain.records import MemoryRecord, Provenance
from memory_core.service.consolidation.comparison import compare_statements
from memory_core.service.consolidation.decisions import (
    DEFAULT_THRESHOLDS,
    Neighbour,
    SimilarityThresholds,
    thresholds_for,
)
from memory_core.service.consolidation.features import normalized_statement, statement_features
from memory_core.service.consolidation.rules import decide_with_rules, find_contradiction

NOW = datetime(2026, 5, 1, 9, tzinfo=UTC)
LOOSE = SimilarityThresholds(related=0.2, update=0.5, duplicate=0.9)


def _record(text: str, ident: str = "m1", category: str = "preference") -> MemoryRecord:
    return MemoryRecord(
        id=ident, user_id="u", agent_id="a", memory=text, category=category, created_at=NOW, updated_at=NOW
    )


def _fact(text: str, category: str = "preference") -> MemoryCandidate:
    return MemoryCandidate(memory=text, category=category)


# -- features -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "polarity"),
    [
        ("辛い料理が好き", 1),
        ("辛い料理が大好きです", 1),
        ("辛い料理が苦手", -1),
        ("辛い料理が嫌い", -1),
        ("辛い料理は好きではない", -1),
        ("辛い料理は好きじゃないです", -1),
        ("肉は食べない", -1),
        ("お酒は飲めません", -1),
        ("I like spicy food", 1),
        ("I love spicy food", 1),
        ("I don't like spicy food", -1),
        ("I hate spicy food", -1),
        ("I'm not a fan of crowds", -1),
        ("I work at Contoso", 0),
        ("猫を飼っています", 0),
    ],
)
def test_polarity(text: str, polarity: int) -> None:
    assert statement_features(text).polarity == polarity


def test_dates_weekdays_and_times_are_canonical() -> None:
    assert statement_features("毎週月曜10時に会議").when == ("day:mon", "time:10:00")
    assert statement_features("every Monday at 10am").when == ("day:mon", "time:10:00")
    assert statement_features("午後3時半に集合").when == ("time:15:30",)
    assert statement_features("5月3日に出発").when == ("date:-5-3",)
    assert statement_features("来週京都へ行く").when == ("rel:w+1",)
    assert statement_features("猫を2匹飼っています").numbers == ("2",)
    assert statement_features("猫を二匹飼っています").numbers == ("2",)


def test_content_words_ignore_function_words() -> None:
    assert statement_features("コーヒーが好きです").surface == ("コーヒー",)
    assert statement_features("辛い料理は苦手です").surface == ("辛い", "料理")
    assert statement_features("I really like coffee").surface == ("coffee",)
    # the small bilingual lexicon: one key per object in both languages
    assert statement_features("コーヒーが好きです").units == statement_features("I like coffee").units
    assert normalized_statement("旅館が好きです。") == normalized_statement("旅館が好き")


# -- contradictions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("辛い料理が好き", "辛い料理が苦手", "negation"),
        ("辛い料理が好き", "辛い料理は嫌いです", "negation"),
        ("辛い料理が好き", "辛いものは好きではない", "negation"),
        ("I like spicy food", "I don't like spicy food", "negation"),
        ("I love spicy food", "I hate spicy food", "negation"),
        ("肉を食べる", "肉は食べない", "negation"),
        ("月曜10時に会議がある", "金曜10時に会議がある", "date/time"),
        ("毎朝6時に起きる", "毎朝7時に起きる", "date/time"),
        ("I go to the gym every Monday", "I go to the gym every Friday", "date/time"),
        ("来週京都に旅行する", "来月京都に旅行する", "date/time"),
        ("My dentist appointment is on Monday", "My dentist appointment moved to Friday", "date/time"),
        ("I moved to Leeds last year (2025)", "I moved to Bristol last month (May 2026)", "one value"),
        ("猫を2匹飼っている", "猫を3匹飼っている", "number"),
        ("I have 2 kids", "I have 3 kids", "number"),
        ("コーヒー派です", "紅茶派です", "same slot"),  # a choice, not a liking
        ("I prefer coffee", "I prefer tea", "same slot"),
        ("コーヒーが好き", "今は紅茶が好き", "same slot"),  # a liking the user says changed
        ("窓側の席が好き", "通路側の席が好き", "same slot"),  # seats are exclusive choices
        ("I'm vegetarian", "I eat fish now", "one value"),  # a diet holds one value
        ("I'm single", "I got married last year", "one value"),
        ("東京に住んでいる", "大阪に住んでいる", "same slot"),
        ("紅茶が好き", "紅茶じゃなくてコーヒーが好き", "replaced"),
        ("紅茶が好き", "最近は紅茶よりコーヒーが好き", "replaced"),
        ("I like tea", "I drink coffee instead of tea", "replaced"),
        ("My favorite color is blue", "My favorite color is green", "one value"),
    ],
)
def test_contradictions_are_found(old: str, new: str, kind: str) -> None:
    reason = find_contradiction(old, new)
    assert reason is not None and kind in reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("旅館が好き", "旅館が好き"),
        ("辛い料理が苦手です", "辛い料理は苦手"),
        ("旅館が好き", "京都の旅館が好き"),
        ("京都の旅館が好き", "コーヒーが好き"),  # different things, both liked
        ("コーヒーが好き", "紅茶も好き"),  # additive
        ("コーヒーが好き", "紅茶が好き"),  # likings accumulate
        ("I like coffee", "I like tea"),
        ("I like cats", "I like dogs"),
        ("猫が好き", "犬が好き"),
        ("I love spicy ramen", "My favorite food is sushi"),  # a favourite does not undo a liking
        ("I like coffee", "I also like tea"),
        ("I love spicy food", "I really like spicy food"),
        ("月曜10時にジム", "金曜10時に歯医者"),  # other day, but another appointment
        ("私はエンジニアです", "猫を飼っています"),
        ("I prefer aisle seats now", "通路側の席が好きです"),  # the same choice in the other language
        ("I like coffee", "コーヒーが好き"),
        # two occasions of what happened, on other dates: both true
        ("I went to a pride parade last week (week of 26 June 2023)", "I went to a pride parade last Friday (11 August 2023)"),
        ("I signed up for a pottery class yesterday (2 July 2023)", "I made it in pottery class yesterday (24 August 2023)"),
        ("先月（2026年3月）、箱根の温泉に行った", "昨日（2026年5月29日）また箱根の温泉に行った"),
    ],
)
def test_no_contradiction(old: str, new: str) -> None:
    assert find_contradiction(old, new) is None


def test_comparison_exposes_the_differing_words() -> None:
    c = compare_statements("コーヒーが好き", "紅茶が好き")
    assert [c.surface(u) for u in c.only_old] == ["コーヒー"] and [c.surface(u) for u in c.only_new] == ["紅茶"]
    assert c.alike_objects == ("コーヒー", "紅茶")
    assert not c.polarity_conflict


# -- the decision ---------------------------------------------------------------------------------


def test_no_neighbour_adds() -> None:
    verdict = decide_with_rules(_fact("旅館が好き"), [], LOOSE)
    assert verdict.event is MemoryEvent.ADD and verdict.text == "旅館が好き"


def test_same_text_is_none_even_with_low_similarity() -> None:
    verdict = decide_with_rules(_fact("旅館が好きです"), [Neighbour(_record("旅館が好き"), 0.1)], LOOSE)
    assert verdict.event is MemoryEvent.NONE and verdict.target is not None


@pytest.mark.parametrize("similarity", [0.999, 0.95, 0.6])
def test_contradiction_supersedes_at_any_similarity(similarity: float) -> None:
    old = _record("辛い料理が好き")
    verdict = decide_with_rules(_fact("辛い料理が苦手"), [Neighbour(old, similarity)], LOOSE)
    assert verdict.event is MemoryEvent.UPDATE and verdict.supersedes
    assert verdict.target == old and verdict.text == "辛い料理が苦手"


def test_high_similarity_alone_is_not_a_duplicate() -> None:
    """e5 scores コーヒー/紅茶 ~0.95: the content words decide, not the score."""
    verdict = decide_with_rules(_fact("紅茶派です"), [Neighbour(_record("コーヒー派です"), 0.99)], LOOSE)
    assert verdict.event is MemoryEvent.UPDATE and verdict.supersedes
    another = decide_with_rules(_fact("紅茶が好き"), [Neighbour(_record("コーヒーが好き"), 0.99)], LOOSE)
    assert another.event is MemoryEvent.ADD  # likings accumulate, however alike the embeddings
    unrelated = decide_with_rules(_fact("コーヒーが好き"), [Neighbour(_record("京都の旅館が好き"), 0.99)], LOOSE)
    assert unrelated.event is MemoryEvent.ADD


def test_detail_updates_and_less_detail_is_none() -> None:
    more = decide_with_rules(_fact("京都の旅館が好き"), [Neighbour(_record("旅館が好き"), 0.9)], LOOSE)
    assert more.event is MemoryEvent.UPDATE and not more.supersedes
    less = decide_with_rules(_fact("旅館が好き"), [Neighbour(_record("京都の旅館が好き"), 0.9)], LOOSE)
    assert less.event is MemoryEvent.NONE


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I went to the Louvre last month (April 2026)", "I went to the Louvre again yesterday (30 April 2026)"),
        ("先月（2026年3月）、箱根の温泉に行った", "昨日（2026年5月29日）また箱根の温泉に行った"),
        ("先週（2026年4月20日の週）、初めてヨガのクラスに参加した", "昨日（2026年5月30日）もヨガのクラスに参加した"),
    ],
)
def test_another_occasion_is_a_fact_of_its_own(old: str, new: str) -> None:
    """A second time something happened is neither a restatement of the first nor more detail about it."""
    verdict = decide_with_rules(_fact(new, "event"), [Neighbour(_record(old, category="event"), 0.95)], LOOSE)
    assert verdict.event is MemoryEvent.ADD


def test_a_date_without_the_first_one_still_adds_to_it() -> None:
    """The same occasion told again with its date is more detail, not another occasion."""
    verdict = decide_with_rules(
        _fact("I went to the Louvre yesterday (30 April 2026)", "event"),
        [Neighbour(_record("I went to the Louvre", category="event"), 0.95)],
        LOOSE,
    )
    assert verdict.event is MemoryEvent.UPDATE and not verdict.supersedes


def test_update_needs_the_same_category() -> None:
    neighbour = Neighbour(_record("コーヒーが好き", category="preference"), 0.9)
    verdict = decide_with_rules(_fact("朝はいつもコーヒーを飲みます", "routine"), [neighbour], LOOSE)
    assert verdict.event is MemoryEvent.ADD


def test_forget_deletes_exactly_the_best_match() -> None:
    memories = [
        Neighbour(_record("コーヒーが好き", "m1"), 0.8),
        Neighbour(_record("甘いものが好き", "m2"), 0.7),
        Neighbour(_record("辛い料理が苦手", "m3"), 0.6),
    ]
    forget = MemoryCandidate(kind=CandidateKind.FORGET, memory="甘いものが好き")
    verdict = decide_with_rules(forget, memories, LOOSE)
    assert verdict.event is MemoryEvent.DELETE and verdict.target is not None and verdict.target.id == "m2"


def test_forget_without_a_match_is_none() -> None:
    forget = MemoryCandidate(kind=CandidateKind.FORGET, memory="猫")
    verdict = decide_with_rules(forget, [Neighbour(_record("旅館が好き"), 0.9)], LOOSE)
    assert verdict.event is MemoryEvent.NONE and verdict.target is None


def test_thresholds_are_per_embedder() -> None:
    e5 = thresholds_for("multilingual-e5-small-q4")
    hashing = thresholds_for("hash-256")
    other = thresholds_for("text-embedding-3-small")
    assert e5 == DEFAULT_THRESHOLDS["multilingual-e5-small"]
    assert hashing == DEFAULT_THRESHOLDS["hash-"]
    assert other == DEFAULT_THRESHOLDS["*"]
    assert e5.related > other.related > hashing.related
    custom = {"mine": SimilarityThresholds(0.1, 0.2, 0.3)}
    assert thresholds_for("mine", custom).duplicate == 0.3


def test_forget_needs_more_than_one_shared_word() -> None:
    memories = [Neighbour(_record("京都に住んでいます", "m1", "profile"), 0.85)]
    partial = MemoryCandidate(kind=CandidateKind.FORGET, memory="京都の紅葉")
    assert decide_with_rules(partial, memories, LOOSE).event is MemoryEvent.NONE
    paraphrase = MemoryCandidate(kind=CandidateKind.FORGET, memory="辛い料理が苦手")
    spicy = [Neighbour(_record("辛いものが苦手です", "m2"), 0.9)]
    assert decide_with_rules(paraphrase, spicy, LOOSE).event is MemoryEvent.DELETE


# -- what the sentences must do ---------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("辛い料理が大好きです", "最近胃腸が弱くなったので、今は辛い料理が苦手です"),
        ("I prefer aisle seats", "I now prefer window seats on flights, not aisle seats"),
        ("I live in Berlin", "I moved to Munich last month (October 2026)"),
        ("東京に住んでいます", "福岡に引っ越しました"),
        ("洋室がいいです", "やっぱり和室がいいです"),
        ("好きな映画はトトロです", "好きな映画は千と千尋です"),
        ("My favourite city is Kyoto", "My favourite city is Osaka"),
        ("I work at Contoso", "I'm working at Fabrikam now"),
        ("I live in Berlin", "I moved to Munich"),
    ],
)
def test_a_correction_supersedes(old: str, new: str) -> None:
    assert find_contradiction(old, new) is not None
    # the same person's statements, named
    assert find_contradiction(f"Jon: {old}", f"Jon: {new}", old_speaker="Jon", new_speaker="Jon") is not None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # one shared word is not one slot
        ("It's filled with my favorite fantasy novels", '"That" is one of my favorite fantasy shows'),
        (
            "Lost my job as a banker yesterday (19 January 2023), so I'm gonna take a shot at starting my own business",
            "Losing my job gave me the push to finally start my dream business: my own dance studio",
        ),
        # a "not" somewhere is not a negation of the statement, nor a replacement of an unrelated word
        ("I like jazz", "I'm not only into jazz, I also love blues"),
        ("I love rainy days", "Not sure why, but I really love rainy days"),
        ("I love long walks on the beach", "I started running, not long ago"),
        # someone else's news is not the user's
        ("I live in Berlin", "My sister moved to Paris"),
        ("I work at Google", "My husband got a new job at Apple"),
        ("I live in Berlin", "I moved to a bigger apartment"),
        ("東京に住んでいます", "姉は福岡に住んでいます"),
        # a label is not a speaker
        ("My budget: 20,000 yen per night", "My budget: 30,000 yen per night and a late checkout"),
    ],
)
def test_only_the_same_slot_and_a_real_negation_supersede(old: str, new: str) -> None:
    assert find_contradiction(old, new) is None or old.startswith("My budget")
    if not old.startswith("My budget"):
        assert find_contradiction(f"Tim: {old}", f"Tim: {new}", old_speaker="Tim", new_speaker="Tim") is None


@pytest.mark.parametrize(
    ("old", "new"),
    [("Caroline: I like tea", "Melanie: I like coffee"), ("Caroline: I live in Boston", "Melanie: I live in Denver")],
)
def test_two_peoples_statements_never_contradict(old: str, new: str) -> None:
    assert find_contradiction(old, new, old_speaker="Caroline", new_speaker="Melanie") is None


def test_a_label_is_not_a_speaker() -> None:
    # without a known speaker, "My budget:" is part of the statement: a new budget replaces the old one
    assert statement_features("My budget: 20,000 yen per night").speaker is None
    assert find_contradiction("My budget: 20,000 yen per night", "My budget: 30,000 yen per night") is not None


def test_a_negation_is_a_negation_of_the_statement() -> None:
    assert statement_features("I don't like crowded places").polarity == -1
    assert statement_features("I'm not a fan of museums").polarity == -1
    assert statement_features("Not sure why, but I really love rainy days").polarity == 1
    assert statement_features("I'm not only into jazz, I also love blues").polarity == 1
    window = statement_features("I now prefer window seats on flights, not aisle seats")
    assert window.polarity == 1 and "≡aisle" in window.replaced


def test_absolute_dates_are_what_dates_compare() -> None:
    next_week = statement_features("来週（2026年5月4日の週）京都に行きます")
    assert next_week.when == ("abs:2026-5-4/week",)
    assert statement_features("I moved last month (October 2026)").when == ("abs:2026-10-0/month",)
    # "next week" said in two different weeks is two different weeks
    assert find_contradiction(
        "来週（2026年5月4日の週）京都に行きます", "来週（2026年5月11日の週）京都に行きます"
    ) is not None


def test_forget_removes_only_the_part_that_was_asked() -> None:
    compound = _record("I'm vegetarian and I live in Berlin", category="constraint")
    verdict = decide_with_rules(
        MemoryCandidate(kind=CandidateKind.FORGET, memory="I'm vegetarian"), [Neighbour(compound, 0.9)], LOOSE
    )
    assert verdict.event is MemoryEvent.UPDATE
    assert verdict.text == "I live in Berlin"

    ja = _record("ベジタリアンで、大阪に住んでいます", category="constraint")
    verdict = decide_with_rules(
        MemoryCandidate(kind=CandidateKind.FORGET, memory="ベジタリアン"), [Neighbour(ja, 0.9)], LOOSE
    )
    assert (verdict.event, verdict.text) == (MemoryEvent.UPDATE, "大阪に住んでいます")

    # asked to forget all of it: the memory goes
    verdict = decide_with_rules(
        MemoryCandidate(kind=CandidateKind.FORGET, memory="I'm vegetarian and I live in Berlin"),
        [Neighbour(compound, 0.9)],
        LOOSE,
    )
    assert verdict.event is MemoryEvent.DELETE


def test_forget_requests_never_touch_another_speakers_memory() -> None:
    theirs = _record("Melanie: I'm vegetarian", ident="m2", category="constraint").model_copy(
        update={"provenance": [Provenance(turn_id="t1", speaker="Melanie")]}
    )
    request = MemoryCandidate(kind=CandidateKind.FORGET, memory="Caroline: I'm vegetarian", speaker="Caroline")
    assert decide_with_rules(request, [Neighbour(theirs, 0.99)], LOOSE).event is MemoryEvent.NONE
    mine = MemoryCandidate(kind=CandidateKind.FORGET, memory="Melanie: I'm vegetarian", speaker="Melanie")
    assert decide_with_rules(mine, [Neighbour(theirs, 0.99)], LOOSE).event is MemoryEvent.DELETE


def test_a_contradiction_replaces_only_its_part_of_a_compound_memory() -> None:
    compound = _record("I live in Berlin and I work at Google", category="profile")
    verdict = decide_with_rules(_fact("I moved to Munich", "profile"), [Neighbour(compound, 0.9)], LOOSE)
    assert verdict.event is MemoryEvent.UPDATE and verdict.supersedes
    assert verdict.text == "I work at Google, and I moved to Munich"


@pytest.mark.parametrize(
    ("memory", "asked", "left"),
    [
        ("I moved to St. Louis and I have two kids", "I have two kids", "I moved to St. Louis"),
        ("大阪に住んでいて、猫を飼っています", "猫を飼っています", "大阪に住んでいます"),
        # not two statements: the whole memory is what the request names
        ("I'm vegan and my husband and I have two cats", "my husband and I have two cats", "I'm vegan"),
        ("東京で、猫を飼っています", "猫を飼っています", None),
        ("I'm allergic to cats and my daughter is too", "I'm allergic to cats", None),
    ],
)
def test_a_partial_forget_keeps_whole_statements(memory: str, asked: str, left: str | None) -> None:
    verdict = decide_with_rules(
        MemoryCandidate(kind=CandidateKind.FORGET, memory=asked), [Neighbour(_record(memory), 0.95)], LOOSE
    )
    if left is None:
        assert verdict.event in (MemoryEvent.DELETE, MemoryEvent.NONE)
    else:
        assert (verdict.event, verdict.text) == (MemoryEvent.UPDATE, left)
