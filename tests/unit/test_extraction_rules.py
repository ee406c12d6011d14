"""The rule path of extraction: Japanese and English patterns, one sentence per candidate."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MessageRole, Turn, TurnMessage
from memory_core.domain.validation import CONTROL_CHARACTERS, MESSAGE_CONTROL_CHARACTERS
from memory_core.language.date_annotation import annotate_dates
from memory_core.language.dates import resolve_calendar_date, resolve_date_word
from memory_core.language.sentences import split_sentences
from memory_core.service.extraction.extractor import expiry_after
from memory_core.service.extraction.rules import extract_with_rules

# 2026-11-26 is a Thursday.
THURSDAY = datetime(2026, 11, 26, 9, 30, tzinfo=UTC)


def turn(*messages: tuple[str, str], at: datetime = THURSDAY) -> Turn:
    return Turn(
        turn_id="t-1",
        user_id="u1",
        agent_id="travel",
        occurred_at=at,
        messages=[TurnMessage(role=MessageRole(role), text=text) for role, text in messages],
    )


def facts(text: str, at: datetime = THURSDAY) -> list[MemoryCandidate]:
    return extract_with_rules(turn(("user", text), at=at))


def one(text: str) -> MemoryCandidate:
    found = facts(text)
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------------------------
# Durable statements
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "memory", "category"),
    [
        # Japanese preferences
        ("コーヒーが好きです。", "コーヒーが好きです", "preference"),
        ("辛い料理は苦手です。", "辛い料理は苦手です", "preference"),
        ("パクチーが嫌いです！", "パクチーが嫌いです", "preference"),
        ("ホテルは和室が好みです。", "ホテルは和室が好みです", "preference"),
        ("ちなみに、窓側の席が好き。", "窓側の席が好き", "preference"),
        ("温泉が大好きなんです", "温泉が大好きなんです", "preference"),
        ("窓側の席がいいです。", "窓側の席がいいです", "preference"),
        ("妻は魚が苦手です。", "妻は魚が苦手です", "preference"),
        # Japanese constraints
        ("私はエビアレルギーがあります。", "私はエビアレルギーがあります", "constraint"),
        ("お酒は飲めません。", "お酒は飲めません", "constraint"),
        ("長時間の移動は避けたいです。", "長時間の移動は避けたいです", "constraint"),
        ("実は、ベジタリアンなんです。", "ベジタリアンなんです", "constraint"),
        ("生魚は食べられない。", "生魚は食べられない", "constraint"),
        ("予算は一泊2万円までです。", "予算は一泊2万円までです", "constraint"),
        ("高所恐怖症なので展望台はパスで。", "高所恐怖症なので展望台はパスで", "constraint"),
        # Japanese profile
        ("東京に住んでいます。", "東京に住んでいます", "profile"),
        ("私はエンジニアです。", "私はエンジニアです", "profile"),
        ("僕は30歳です。", "僕は30歳です", "profile"),
        ("大阪出身です。", "大阪出身です", "profile"),
        ("猫を2匹飼っています。", "猫を2匹飼っています", "profile"),
        # Japanese routines
        ("毎週月曜日は10時からヨガに行っています。", "毎週月曜日は10時からヨガに行っています", "routine"),
        ("出張ではいつも新幹線を使います。", "出張ではいつも新幹線を使います", "routine"),
        ("週に3回ジムに通っている。", "週に3回ジムに通っている", "routine"),
        # English preferences
        ("I like window seats.", "I like window seats", "preference"),
        (
            "I think I prefer aisle seats on long flights.",
            "I prefer aisle seats on long flights",
            "preference",
        ),
        ("I hate cilantro!", "I hate cilantro", "preference"),
        ("My favourite city is Kyoto.", "My favourite city is Kyoto", "preference"),
        ("Actually, I'm not a fan of museums.", "I'm not a fan of museums", "preference"),
        ("I don't like crowded places.", "I don't like crowded places", "preference"),
        ("I'm not really into spicy food.", "I'm not really into spicy food", "preference"),
        # English constraints
        ("I'm allergic to peanuts.", "I'm allergic to peanuts", "constraint"),
        ("I can't eat gluten.", "I can't eat gluten", "constraint"),
        ("I avoid red-eye flights.", "I avoid red-eye flights", "constraint"),
        ("I'm vegetarian.", "I'm vegetarian", "constraint"),
        ("i don't drink alcohol", "I don't drink alcohol", "constraint"),
        ("I'm afraid of heights.", "I'm afraid of heights", "constraint"),
        # English profile
        ("I live in Seattle.", "I live in Seattle", "profile"),
        ("I work as a nurse.", "I work as a nurse", "profile"),
        ("My name is Ken.", "My name is Ken", "profile"),
        ("I'm a software engineer at Contoso.", "I'm a software engineer at Contoso", "profile"),
        ("I have two kids.", "I have two kids", "profile"),
        # English routines
        ("I usually go running every Monday.", "I usually go running every Monday", "routine"),
        (
            "We travel to Hokkaido every winter, and I always book the same ryokan.",
            "We travel to Hokkaido every winter, and I always book the same ryokan",
            "routine",
        ),
        ("I go swimming twice a week.", "I go swimming twice a week", "routine"),
    ],
)
def test_durable_statement(text: str, memory: str, category: str) -> None:
    candidate = one(text)
    assert candidate.kind is CandidateKind.FACT
    assert candidate.memory == memory
    assert candidate.category == category
    assert candidate.expires_at is None
    assert candidate.evidence == text.strip()


def test_defaults_of_rule_candidates() -> None:
    candidate = one("コーヒーが好きです。")
    assert candidate.importance == 0.65
    assert candidate.confidence == 0.55
    assert candidate.source == "rule-fallback"


def test_one_candidate_per_sentence_in_the_users_language() -> None:
    found = facts("京都が好きです。東京に住んでいます！毎朝コーヒーを飲みます")
    assert [c.memory for c in found] == ["京都が好きです", "東京に住んでいます", "毎朝コーヒーを飲みます"]
    assert [c.category for c in found] == ["preference", "profile", "routine"]


def test_multiple_english_sentences_and_decimals() -> None:
    found = facts("It costs 3.5 dollars. I prefer tea over coffee. I live in the U.S. with my family.")
    assert [c.memory for c in found] == ["I prefer tea over coffee", "I live in the U.S. with my family"]


def test_duplicates_in_one_turn_are_kept_once() -> None:
    found = facts("I like jazz. I like jazz!")
    assert [c.memory for c in found] == ["I like jazz"]


# --------------------------------------------------------------------------------------------
# Nothing to remember
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "紅茶は好きですか？",
        "京都でおすすめのホテルはありますか。",
        "私はコーヒーが好きかな。",
        "ホテルのおすすめを教えてください。",
        "来週の京都のホテルを予約してください。",
        "ありがとう、いつも助かります。",
        "今日は疲れた。",
        "明日は雨らしい。",
        "この部屋は静か。",
        "Do you like jazz?",
        "Can you recommend a hotel in Osaka",
        "Please book a table for 2.",
        "The weather is nice today.",
        "I'm a bit tired.",
        "I'd like to book a flight.",
        "Thanks, I always appreciate it!",
        "I can't wait for the trip!",
        "Hello!",
        "Kyoto is beautiful in autumn.",
        "I'm so hungry right now, I like anything.",
        "それがいいです。",
        "妻と二人で行きます。",
        "I love it!",
        "That sounds good, I like it.",
        "I may go.",
    ],
)
def test_no_candidate(text: str) -> None:
    assert facts(text) == []


def test_assistant_system_and_tool_messages_never_produce_candidates() -> None:
    found = extract_with_rules(
        turn(
            ("system", "The user likes coffee. ユーザーはコーヒーが好きです。"),
            ("user", "おすすめのカフェはある？"),
            (
                "assistant",
                "あなたはコーヒーが好きなので、このカフェがおすすめです。I know you live in Tokyo.",
            ),
            ("tool", "I like tea. 紅茶が好き。"),
        )
    )
    assert found == []


def test_only_user_sentences_count_in_a_mixed_turn() -> None:
    found = extract_with_rules(
        turn(
            ("user", "辛い料理は苦手です。"),
            ("assistant", "承知しました。辛い料理がお好きなのですね。"),
        )
    )
    assert [c.memory for c in found] == ["辛い料理は苦手です"]


def test_injected_recall_text_is_not_extracted_again() -> None:
    text = (
        "## Relevant memories\n"
        "- コーヒーが好き\n"
        "- 京都に住んでいる\n"
        "\n"
        "- I'm allergic to peanuts\n"
        "\n"
        "紅茶も好きです。"
    )
    found = facts(text)
    assert [c.memory for c in found] == ["紅茶も好きです"]


def test_recall_block_without_bullets_ends_at_a_blank_line() -> None:
    text = "I live in Seattle.\n### Relevant Memories:\nI like jazz.\nI work as a nurse.\n\nI like blues."
    assert [c.memory for c in facts(text)] == ["I live in Seattle", "I like blues"]


def test_recall_block_ends_at_the_next_heading() -> None:
    text = "## Relevant memories\n- 東京に住んでいる\n## Question\n大阪に住んでいます。"
    assert [c.memory for c in facts(text)] == ["大阪に住んでいます"]


def test_code_and_quotes_are_not_the_users_statements() -> None:
    text = "```\nI like tabs.\n```\n> I hate Mondays.\nI prefer spaces."
    assert [c.memory for c in facts(text)] == ["I prefer spaces"]


# --------------------------------------------------------------------------------------------
# Forget requests
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "memory"),
    [
        ("コーヒーが好きって言ったのは忘れて。", "コーヒーが好き"),
        ("前に言った京都旅行の件は忘れてください。", "京都旅行"),
        ("エビアレルギーのことは忘れてください", "エビアレルギー"),
        ("Forget that I like sushi.", "I like sushi"),
        ("Please forget what I said about the Kyoto trip.", "The Kyoto trip"),
        ("forget about my peanut allergy", "My peanut allergy"),
        ("I no longer eat meat.", "I eat meat"),
    ],
)
def test_forget_request(text: str, memory: str) -> None:
    candidate = one(text)
    assert candidate.kind is CandidateKind.FORGET
    assert candidate.memory == memory
    assert candidate.source == "rule-fallback"
    assert candidate.evidence == text


@pytest.mark.parametrize(
    "text",
    [
        "もうベジタリアンではありません。",
        "もうコーヒーが好きではない。",
        "コーヒーはもう好きじゃない。",
        "もう大阪には住んでいません。",
        "もう猫は飼っていない",
        "I'm no longer a vegetarian.",
        "I don't drink coffee anymore.",
        "I'm not vegan any more.",
    ],
)
def test_a_statement_that_ends_something_is_a_fact(text: str) -> None:
    """What no longer holds is itself a fact (its negation supersedes what it ends)."""
    candidate = one(text)
    assert candidate.kind is CandidateKind.FACT


def test_forget_that_refers_to_the_previous_sentence() -> None:
    found = facts("窓側の席が好き。さっきのは忘れて。")
    assert [(c.kind, c.memory) for c in found] == [
        (CandidateKind.FACT, "窓側の席が好き"),
        (CandidateKind.FORGET, "窓側の席が好き"),
    ]


def test_forget_without_a_referent_produces_nothing() -> None:
    assert facts("それは忘れてください。") == []
    assert facts("Forget that.") == []


@pytest.mark.parametrize(
    "text",
    [
        "I always forget my umbrella.",
        "Don't forget my window seat, I like it.",
        "I forgot my passport once.",
        "Did you forget that I like sushi?",
        "パスポートを忘れてない？",
        "鍵を忘れてしまった。",
        "傘を忘れてた。",
    ],
)
def test_forgetting_something_is_not_a_forget_request(text: str) -> None:
    assert all(c.kind is CandidateKind.FACT for c in facts(text))


def test_remember_that_is_an_explicit_fact() -> None:
    candidate = one("Remember that my passport expires in May.")
    assert candidate.kind is CandidateKind.FACT
    assert candidate.memory == "My passport expires in May"


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "memory"),
    [
        ("来週、京都に旅行に行きます。", "来週（2026年11月30日の週）、京都に旅行に行きます"),
        ("明日、歯医者に行く予定です。", "明日（2026年11月27日）、歯医者に行く予定です"),
        ("明後日から出張です。", "明後日（2026年11月28日）から出張です"),
        ("来月は札幌に出張する予定です。", "来月（2026年12月）は札幌に出張する予定です"),
        ("金曜日に大阪で会議があります。", "金曜日（2026年11月27日）に大阪で会議があります"),
        ("今週末は箱根に泊まる予定。", "今週末（2026年11月28日の週末）は箱根に泊まる予定"),
        ("Next week I'm flying to Tokyo.", "Next week (week of 30 November 2026) I'm flying to Tokyo"),
        ("I'm going to Osaka tomorrow.", "I'm going to Osaka tomorrow (27 November 2026)"),
        ("I'll be in Paris next month.", "I'll be in Paris next month (December 2026)"),
        ("I have a meeting on Friday.", "I have a meeting on Friday (27 November 2026)"),
        ("My flight is next Monday.", "My flight is next Monday (30 November 2026)"),
        ("12月3日に大阪で会議があります。", "12月3日（2026年12月3日）に大阪で会議があります"),
        ("1月5日から札幌に出張します。", "1月5日（2027年1月5日）から札幌に出張します"),
        ("My flight to Paris is on December 3rd.", "My flight to Paris is on December 3rd (3 December 2026)"),
        ("I'm visiting Tokyo on 5 January 2028.", "I'm visiting Tokyo on 5 January 2028"),
    ],
)
def test_dated_plans_carry_their_absolute_date_and_never_vanish(text: str, memory: str) -> None:
    candidate = one(text)
    assert candidate.category == "plan"
    assert candidate.memory == memory
    # once its day has passed, the plan is a dated record of what was planned, not something to drop
    assert candidate.expires_at is None


def test_a_change_that_starts_later_is_not_a_plan() -> None:
    candidate = one("来月から大阪に引っ越す予定です。")
    assert candidate.category == "profile"
    assert candidate.memory == "来月（2026年12月）から大阪に引っ越す予定です"


def test_a_constraint_and_a_plan_in_one_sentence_are_two_memories() -> None:
    found = facts("I'm allergic to peanuts, and next week I'm going to Thailand.")
    assert [(c.category, c.memory) for c in found] == [
        ("constraint", "I'm allergic to peanuts"),
        ("plan", "Next week (week of 30 November 2026) I'm going to Thailand"),
    ]
    assert all(c.expires_at is None for c in found)


def test_a_late_replay_keeps_the_plan_as_a_dated_record() -> None:
    t = turn(("user", "明日、歯医者に行く予定です。"))
    assert extract_with_rules(t) == extract_with_rules(t)
    assert [c.memory for c in extract_with_rules(t)] == ["明日（2026年11月27日）、歯医者に行く予定です"]


@pytest.mark.parametrize(
    ("text", "memory"),
    [
        ("Actually I moved to Munich last month.", "I moved to Munich last month (October 2026)"),
        ("Last year I visited Italy.", "Last year (2025) I visited Italy"),
        ("I went to a support group yesterday.", "I went to a support group yesterday (25 November 2026)"),
        ("I ran my first marathon three days ago!", "I ran my first marathon three days ago (23 November 2026)"),
        ("I painted a sunrise today.", "I painted a sunrise today (26 November 2026)"),
        ("On May 3rd I ran a marathon.", "On May 3rd (3 May 2026) I ran a marathon"),
        ("先月、初めてフルマラソンを走りました。", "先月（2026年10月）、初めてフルマラソンを走りました"),
        ("先週の金曜日に京都に行きました。", "先週の金曜日（2026年11月20日）に京都に行きました"),
        ("昨日、姉が結婚しました。", "昨日（2026年11月25日）、姉が結婚しました"),
        ("去年、富士山に登りました。", "去年（2025年）、富士山に登りました"),
        ("3日前にフランス語の勉強を始めました。", "3日前（2026年11月23日）にフランス語の勉強を始めました"),
    ],
)
def test_relative_dates_become_absolute(text: str, memory: str) -> None:
    assert one(text).memory == memory


def test_dates_are_annotated_once() -> None:
    assert annotate_dates("I moved last month (October 2026)", date(2026, 11, 26)) == "I moved last month (October 2026)"
    assert annotate_dates("先月（2026年10月）に引っ越しました", date(2026, 11, 26)) == "先月（2026年10月）に引っ越しました"
    assert annotate_dates("I love tea", date(2026, 11, 26)) == "I love tea"


def test_routines_keep_their_weekdays_as_said() -> None:
    assert one("I usually go running every Monday.").memory == "I usually go running every Monday"
    assert one("毎週月曜日は10時からヨガに行っています。").memory == "毎週月曜日は10時からヨガに行っています"


@pytest.mark.parametrize(
    ("word", "reference", "expected"),
    [
        ("tomorrow", date(2026, 12, 31), date(2027, 1, 1)),
        ("day-after-tomorrow", date(2026, 2, 27), date(2026, 3, 1)),
        ("this-week", date(2026, 11, 26), date(2026, 11, 29)),
        ("next-week", date(2026, 11, 29), date(2026, 12, 6)),  # said on a Sunday
        ("next-week", date(2026, 11, 30), date(2026, 12, 13)),  # said on a Monday
        ("week-after-next", date(2026, 11, 26), date(2026, 12, 13)),
        ("this-weekend", date(2026, 11, 26), date(2026, 11, 29)),
        ("next-weekend", date(2026, 11, 26), date(2026, 12, 6)),
        ("this-month", date(2028, 2, 3), date(2028, 2, 29)),
        ("next-month", date(2026, 12, 15), date(2027, 1, 31)),
        ("next-month", date(2027, 1, 31), date(2027, 2, 28)),
        ("month-after-next", date(2026, 11, 26), date(2027, 1, 31)),
        ("this-year", date(2026, 11, 26), date(2026, 12, 31)),
        ("next-year", date(2026, 11, 26), date(2027, 12, 31)),
    ],
)
def test_resolve_date_word(word: str, reference: date, expected: date) -> None:
    assert resolve_date_word(word, reference) == expected


def test_resolve_weekday() -> None:
    thursday = date(2026, 11, 26)
    assert resolve_date_word("weekday", thursday, 4) == date(2026, 11, 27)
    assert resolve_date_word("weekday", thursday, 3) == date(2026, 12, 3)  # never today
    assert resolve_date_word("weekday", thursday, 0) == date(2026, 11, 30)
    with pytest.raises(ValueError):
        resolve_date_word("weekday", thursday)
    with pytest.raises(ValueError):
        resolve_date_word("someday", thursday)


def test_resolve_calendar_date() -> None:
    thursday = date(2026, 11, 26)
    assert resolve_calendar_date(11, 26, thursday) == thursday
    assert resolve_calendar_date(11, 25, thursday) == date(2027, 11, 25)  # passed: next year
    assert resolve_calendar_date(2, 29, thursday) is None
    assert resolve_calendar_date(2, 29, thursday, 2028) == date(2028, 2, 29)


def test_expiry_is_end_of_day_plus_grace() -> None:
    assert expiry_after(date(2026, 12, 31)) == datetime(2027, 1, 2, tzinfo=UTC)


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Yes. Fine! Why? Ok", ["Yes.", "Fine!", "Why?", "Ok"]),
        ("京都が好き。大阪も好き！本当？", ["京都が好き。", "大阪も好き！", "本当？"]),
        ("Version 3.5 is fine. Next.", ["Version 3.5 is fine.", "Next."]),
        ("Dr. Tanaka is my doctor. OK", ["Dr. Tanaka is my doctor.", "OK"]),
        ("line one\nline two", ["line one", "line two"]),
        ("Really?! Yes.", ["Really?!", "Yes."]),
        ("「好き」。次", ["「好き」。", "次"]),
        ("", []),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def test_rules_are_deterministic() -> None:
    t = turn(("user", "コーヒーが好きです。来週、京都に行きます。I live in Osaka. Forget that I like tea."))
    assert extract_with_rules(t) == extract_with_rules(t)


_WORDS = st.sampled_from(
    [
        "コーヒーが好き", "来週", "忘れて", "もう", "ではない", "アレルギー", "毎週", "私は", "です",
        "I like", "I no longer", "forget that", "next week", "tomorrow", "I'm allergic to", "on Friday",
        "。", "？", "!", "?", ".", "\n", " ", "3.5", "## Relevant memories\n- ", "- ", "```",
    ]
)  # fmt: skip


# Any text a turn may carry: control characters other than tab, line feed and carriage return are
# refused when the turn is built (tested with the models).
_TEXT = st.text(max_size=12).map(lambda t: MESSAGE_CONTROL_CHARACTERS.sub("", t))


@given(parts=st.lists(st.one_of(_WORDS, _TEXT), max_size=25))
@settings(max_examples=300, deadline=None)
def test_rules_never_fail_and_only_user_text_counts(parts: list[str]) -> None:
    text = "".join(parts)
    if not text:
        return
    as_user = extract_with_rules(turn(("user", text)))
    for candidate in as_user:
        assert candidate.memory.strip()
        assert not CONTROL_CHARACTERS.search(candidate.memory)  # memory text can store it
        assert candidate.evidence and candidate.evidence in text
    assert extract_with_rules(turn(("assistant", text), ("system", text), ("tool", text))) == []


# --------------------------------------------------------------------------------------------
# What people actually say
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "memories", "category"),
    [
        # wants and priorities
        ("大阪旅行では駅近のホテルを最優先したいです。", ["大阪旅行では駅近のホテルを最優先したいです"], "preference"),
        ("できれば温泉付きで。", ["できれば温泉付きで"], "preference"),
        ("ホテルは朝食付きがいいです。", ["ホテルは朝食付きがいいです"], "preference"),
        ("I'd rather take the train than fly.", ["I'd rather take the train than fly"], "preference"),
        ("I want a quiet room away from the elevator.", ["I want a quiet room away from the elevator"], "preference"),
        # a reason before the statement, and "now" as a correction
        (
            "最近胃腸が弱くなったので、今は辛い料理が苦手です。",
            ["最近胃腸が弱くなったので、今は辛い料理が苦手です"],
            "preference",
        ),
        (
            "Actually, I now prefer window seats on flights, not aisle seats.",
            ["I now prefer window seats on flights, not aisle seats"],
            "preference",
        ),
        ("やっぱり和室がいいです。", ["和室がいいです"], "preference"),
        # negated preferences
        ("人混みは好きじゃないです。", ["人混みは好きじゃないです"], "preference"),
        # moves and life changes
        ("福岡に引っ越しました。", ["福岡に引っ越しました"], "profile"),
        # first-person events
        ("I just got accepted for a fashion internship!", ["I just got accepted for a fashion internship"], "event"),
        ("初めてフルマラソンを走りました！", ["初めてフルマラソンを走りました"], "event"),
        # gratitude inside a statement is a statement
        ("I'm so thankful to have them.", ["I'm so thankful to have them"], "preference"),
    ],
)
def test_what_people_actually_say_is_kept(text: str, memories: list[str], category: str) -> None:
    found = facts(text)
    assert [c.memory for c in found] == memories
    assert {c.category for c in found} == {category}


@pytest.mark.parametrize(
    "text",
    ["Thanks!", "ありがとう！", "Thank you so much, that helps.", "I'd like to book a flight.", "予約したいです。",
     "わかりました。", "I thought so.", "I liked it!", "面白かった！", "今は温泉に行きたい気分です。",
     # said of the listener, not of the user
     "I love your commitment!", "Remember, I'm always here for you.", "I love how you explain things.",
     "Got it!", "最近寒くなってきましたね。"],
)
def test_manners_requests_and_reactions_are_not_memories(text: str) -> None:
    assert facts(text) == []


def test_a_sentence_of_two_kinds_of_fact_is_two_memories() -> None:
    assert [(c.category, c.memory) for c in facts("I'm vegetarian and I live in Berlin.")] == [
        ("constraint", "I'm vegetarian"),
        ("profile", "I live in Berlin"),
    ]
    assert [c.memory for c in facts("ベジタリアンで、大阪に住んでいます。")] == ["ベジタリアンです", "大阪に住んでいます"]
    # a reason, or two statements of one kind, stay one memory
    assert len(facts("最近胃腸が弱くなったので、今は辛い料理が苦手です。")) == 1
    assert len(facts("京都に住んでいて、猫を飼っています。")) == 1


def test_memories_name_their_speaker() -> None:
    t = Turn(
        turn_id="t-1",
        user_id="u1",
        agent_id="travel",
        occurred_at=THURSDAY,
        messages=[TurnMessage(role=MessageRole.USER, text="Last year I visited Italy. I love pasta.", name="Caroline")],
    )
    found = extract_with_rules(t)
    assert [c.memory for c in found] == ["Caroline: Last year (2025) I visited Italy", "Caroline: I love pasta"]
    assert {c.speaker for c in found} == {"Caroline"}
    # without a name (one user and an agent) the text is as said
    assert [c.memory for c in facts("I love pasta.")] == ["I love pasta"]


@pytest.mark.parametrize(
    ("text", "memory"),
    [
        ("十五日前に京都に行きました。", "十五日前（2026年11月11日）に京都に行きました"),
        ("二十日前に引っ越しました。", "二十日前（2026年11月6日）に引っ越しました"),
        ("100日前に仕事を辞めました。", "100日前（2026年8月18日）に仕事を辞めました"),
        # dates that come back every year keep no year
        ("I was born on May 5.", "I was born on May 5"),
        ("My birthday is March 3.", "My birthday is March 3"),
        ("誕生日は3月3日です。", "誕生日は3月3日です"),
        # a possessive stays with its word
        ("I loved yesterday's concert.", "I loved yesterday's (25 November 2026) concert"),
    ],
)
def test_dates_the_way_people_write_them(text: str, memory: str) -> None:
    (candidate,) = facts(text)
    assert candidate.memory == memory
    assert candidate.category != "plan"


@pytest.mark.parametrize(
    "text",
    ["I met her laſt Tueſday.", "I went there ſeven days ago.", "I ran a marathon on \u212aelvin day.",
     "I don't" + " " * 392 + "x", "a" * 400, "ー" * 400, "I'm vegan and " * 25],
)
def test_odd_text_never_fails(text: str) -> None:
    facts(text)  # no exception, whatever comes back


@pytest.mark.parametrize(
    ("text", "memories"),
    [
        ("I'm allergic to cats and my daughter is too.", ["I'm allergic to cats and my daughter is too"]),
        ("I'm vegan and so is my wife.", ["I'm vegan and so is my wife"]),
        ("I'm vegetarian but my husband isn't.", ["I'm vegetarian but my husband isn't"]),
        ("I'm vegan and my husband and I have two cats.", ["I'm vegan", "My husband and I have two cats"]),
    ],
)
def test_a_sentence_is_split_only_into_whole_statements(text: str, memories: list[str]) -> None:
    assert [c.memory for c in facts(text)] == memories


@pytest.mark.parametrize(
    ("text", "memory"),
    [
        ("I'm learning to play \"Clair de Lune\" on the piano.", "I'm learning to play \"Clair de Lune\" on the piano"),
        ("I'm expanding my studio's social media presence.", "I'm expanding my studio's social media presence"),
        ("We're putting together a talent show for the kids.", "We're putting together a talent show for the kids"),
        ("Yeah, we love playing board games together!", "We love playing board games together"),
        ("My colleague Rob invited me to a beginner's yoga class.", "My colleague Rob invited me to a beginner's yoga class"),
        (
            "The script scrapes my bank statements into a spreadsheet.",
            "The script scrapes my bank statements into a spreadsheet",
        ),
        ("No more yoga for me, my knee can't take it.", "No more yoga for me, my knee can't take it"),
    ],
)
def test_what_the_user_says_of_themselves_is_a_fact(text: str, memory: str) -> None:
    assert [c.memory for c in facts(text) if c.kind is CandidateKind.FACT] == [memory]


@pytest.mark.parametrize(
    "text",
    [
        "I did!",
        "We got this!",
        "I drew it.",
        "I love to.",
        "I think that's a great idea for the weekend.",
        "Yeah, I guess that makes sense for the weekend trip.",
        "Still can't feel my legs, haha.",
        "I'm doing ok, thanks.",
        "I'm feeling a bit tired.",
    ],
)
def test_a_statement_that_says_nothing_on_its_own_is_not_a_fact(text: str) -> None:
    assert facts(text) == []


# --------------------------------------------------------------------------------------------
# Which dated statements are plans
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category"),
    [
        # said of the past, its date begun: who the user is now or what happened, not a plan
        ("今週、福岡に引っ越しました。", "profile"),
        ("11月20日に引っ越し業者に見積もりを頼んだ。", "profile"),
        ("Yesterday I moved to Leeds.", "profile"),
        # a date ahead is still ahead
        ("来週、福岡に引っ越します。", "plan"),
    ],
)
def test_a_dated_statement_about_the_past_is_not_a_plan(text: str, category: str) -> None:
    assert one(text).category == category


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("12月5日にバーベキューをする。", date(2026, 12, 5)),
        ("来週の月曜日に大家さんと契約の話をする。", date(2026, 11, 30)),
        ("12月9日から陶芸教室に通う。", date(2026, 12, 9)),
        ("土曜日にフットサルの試合に出ます。", date(2026, 11, 28)),
    ],
)
def test_a_japanese_dated_activity_ahead_is_a_plan(text: str, day: date) -> None:
    candidate = one(text)
    assert candidate.category == "plan"
    assert candidate.event_at is not None and candidate.event_at.date() == day


@pytest.mark.parametrize("text", ["2020年から東京で一人でバーベキューをする。", "毎週月曜日は10時からヨガに行っています。"])
def test_a_japanese_activity_whose_date_is_over_or_that_recurs_is_no_plan(text: str) -> None:
    assert all(c.category != "plan" for c in facts(text))


@pytest.mark.parametrize(
    "text",
    [
        "I'm going to Lisbon on December 12 for a friend's birthday.",
        "My birthday trip to Rome is on January 8.",
        "12月12日に誕生日旅行で沖縄に行く。",
    ],
)
def test_a_birthday_as_the_occasion_of_one_trip_is_no_yearly_date(text: str) -> None:
    candidate = one(text)
    assert candidate.category == "plan"
    assert candidate.event_at is not None and candidate.event_at.year in (2026, 2027)


def test_a_birthday_itself_still_comes_back_every_year() -> None:
    candidate = one("My birthday is on December 12.")
    assert candidate.category != "plan" and candidate.event_at is None


@pytest.mark.parametrize(
    "text",
    [
        "I drive an old blue Golf.",
        "I ride a red Vespa.",
        "I'm on the payments team at work.",
        "今週、人事部に異動になった。",
        "プリウスに乗っています。",
        "主治医は田中先生です。",
        "電車で通勤しています。",
    ],
)
def test_what_the_user_drives_their_team_their_doctor_and_commute_are_profile(text: str) -> None:
    assert one(text).category == "profile"


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("I've got a physio session on December 2.", date(2026, 12, 2)),
        ("On December 10 I'm taking Mum to the theatre.", date(2026, 12, 10)),
        ("My cousin's wedding in Cork is on December 19.", date(2026, 12, 19)),
    ],
)
def test_what_the_user_has_got_ahead_on_a_day_is_a_plan_for_that_day(text: str, day: date) -> None:
    candidate = one(text)
    assert candidate.category == "plan"
    assert candidate.event_at is not None and candidate.event_at.date() == day


def test_an_undated_intention_is_a_plan_not_a_statement_about_the_user() -> None:
    assert one("I'm planning to repaint the shed.").category == "plan"
    assert one("I've got a new job at Contoso.").category == "event"  # what happened stays an event
