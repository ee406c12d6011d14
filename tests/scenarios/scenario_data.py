"""The consolidation scenario suite, as data.

Each scenario is a conversation (turns of user / assistant messages) and what must hold once it has
gone through rule extraction, rule consolidation and the SQLite store:

* ``active``: the exact texts of the scope's active memories at the end;
* ``events`` (optional): the decisions of each turn, in order (``[]`` when a turn decides nothing);
* ``lang``: ``ja`` scenarios must leave only Japanese memories ("Japanese stays Japanese").

A turn is a user text, or a list of ``(role, text)`` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SCENARIOS", "Scenario"]

Turn = str | list[tuple[str, str]]


@dataclass(frozen=True)
class Scenario:
    name: str
    lang: str
    turns: list[Turn]
    active: list[str]
    events: list[list[str]] | None = None
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)


RECALL_JA = "## Relevant memories\n- 旅館が好き\n- 辛い料理が苦手\n\n"
RECALL_EN = "## Relevant memories\n- I like coffee\n- I live in Tokyo\n\n"

SCENARIOS: list[Scenario] = [
    # -- restated facts: NONE, never DELETE, never a duplicate ---------------------------------
    Scenario("ja_restated_same_text", "ja", ["旅館が好きです。", "旅館が好きです。"], ["旅館が好きです"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_restated_plain_form", "ja", ["辛い料理が苦手です。", "辛い料理が苦手だ。"], ["辛い料理が苦手です"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_restated_inside_longer_turn", "ja",
             ["窓側の席が好きです。", "ちなみに、窓側の席が好きです。よろしく。"], ["窓側の席が好きです"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_restated_three_times", "ja",
             ["エビアレルギーがあります。", "エビアレルギーがあります。", "エビアレルギーがあります！"],
             ["エビアレルギーがあります"], [["ADD"], ["NONE"], ["NONE"]]),
    Scenario("en_restated_same_text", "en", ["I love hiking.", "I love hiking!"], ["I love hiking"],
             [["ADD"], ["NONE"]]),
    Scenario("en_restated_case", "en", ["I am allergic to peanuts.", "i am allergic to peanuts"],
             ["I am allergic to peanuts"], [["ADD"], ["NONE"]]),
    Scenario("en_restated_contraction", "en", ["I'm vegetarian.", "I am vegetarian."], ["I'm vegetarian"],
             [["ADD"], ["NONE"]]),
    # -- paraphrases: NONE or UPDATE ----------------------------------------------------------
    Scenario("ja_paraphrase_particle", "ja", ["辛い料理が苦手です。", "辛い料理は苦手です。"], ["辛い料理が苦手です"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_paraphrase_adds_detail", "ja", ["旅館が好きです。", "京都の旅館が好きです。"], ["京都の旅館が好きです"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_paraphrase_less_detail", "ja", ["京都の旅館が好きです。", "旅館が好きです。"], ["京都の旅館が好きです"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_paraphrase_more_specific", "ja", ["辛いものが苦手です。", "辛い料理が苦手です。"], ["辛い料理が苦手です"],
             [["ADD"], ["UPDATE"]]),
    Scenario("en_paraphrase_adds_detail", "en", ["I like jazz.", "I like jazz, especially Bill Evans."],
             ["I like jazz, especially Bill Evans"], [["ADD"], ["UPDATE"]]),
    Scenario("en_paraphrase_less_detail", "en", ["I love Kyoto ryokans.", "I love ryokans."], ["I love Kyoto ryokans"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_paraphrase_plan_reworded", "ja", ["来週京都に旅行する予定です。", "来週京都へ旅行に行きます。"],
             ["来週京都へ旅行に行きます"], [["ADD"], ["UPDATE"]],
             note="half the content words differ: only the embedding says it is the same plan"),
    Scenario("en_paraphrase_habit", "en", ["I usually drink coffee in the morning.", "I drink coffee every morning."],
             ["I usually drink coffee in the morning"], [["ADD"], ["NONE"]]),
    # -- changed preferences supersede (one active memory, never NONE) -------------------------
    Scenario("ja_tea_then_coffee", "ja", ["紅茶が好きです。", "コーヒーが好きです。"], ["コーヒーが好きです"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_tea_replaced_by_coffee", "ja", ["紅茶が好きです。", "最近は紅茶よりコーヒーが好きです。"],
             ["最近は紅茶よりコーヒーが好きです"], [["ADD"], ["UPDATE"]]),
    Scenario("ja_spicy_like_then_dislike", "ja", ["辛い料理が好きです。", "辛い料理が苦手です。"], ["辛い料理が苦手です"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_spicy_dislike_then_like", "ja", ["辛い料理が苦手です。", "辛い料理が好きになりました。"],
             ["辛い料理が好きになりました"], [["ADD"], ["UPDATE"]]),
    Scenario("ja_spicy_not_like", "ja", ["辛い料理が好きです。", "辛い料理は好きではありません。"],
             ["辛い料理は好きではありません"], [["ADD"], ["UPDATE"]]),
    Scenario("ja_window_then_aisle", "ja", ["窓側の席が好きです。", "通路側の席が好きです。"], ["通路側の席が好きです"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_moved_city", "ja", ["東京に住んでいます。", "大阪に住んでいます。"], ["大阪に住んでいます"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_shinkansen_vs_plane", "ja", ["飛行機より新幹線が好きです。", "新幹線より飛行機が好きです。"],
             ["新幹線より飛行機が好きです"], [["ADD"], ["UPDATE"]]),
    Scenario("en_coffee_then_tea", "en", ["I like coffee.", "I like tea."], ["I like tea"], [["ADD"], ["UPDATE"]]),
    Scenario("en_love_then_hate", "en", ["I love spicy food.", "I hate spicy food."], ["I hate spicy food"],
             [["ADD"], ["UPDATE"]]),
    Scenario("en_window_then_aisle", "en", ["I like window seats.", "Actually I prefer aisle seats now."],
             ["I prefer aisle seats now"], [["ADD"], ["UPDATE"]]),
    Scenario("en_moved_city", "en", ["I live in Tokyo.", "I live in Osaka now."], ["I live in Osaka now"],
             [["ADD"], ["UPDATE"]]),
    Scenario("en_favorite_color", "en", ["My favorite color is blue.", "My favorite color is green."],
             ["My favorite color is green"], [["ADD"], ["UPDATE"]]),
    Scenario("en_fan_then_not", "en", ["I'm a fan of crowds.", "I'm not a fan of crowds."],
             ["I'm not a fan of crowds"], [["ADD"], ["UPDATE"]]),
    # -- different facts stay side by side ------------------------------------------------------
    Scenario("ja_additive_tea_too", "ja", ["コーヒーが好きです。", "紅茶も好きです。"], ["コーヒーが好きです", "紅茶も好きです"],
             [["ADD"], ["ADD"]]),
    Scenario("ja_unrelated_likes", "ja", ["旅館が好きです。", "コーヒーが好きです。"], ["旅館が好きです", "コーヒーが好きです"],
             [["ADD"], ["ADD"]]),
    Scenario("ja_like_and_habit", "ja", ["コーヒーが好きです。", "朝はいつもコーヒーを飲みます。"],
             ["コーヒーが好きです", "朝はいつもコーヒーを飲みます"], [["ADD"], ["ADD"]]),
    Scenario("en_unrelated_facts", "en", ["I work at Contoso.", "I have 2 kids.", "I love hiking."],
             ["I work at Contoso", "I have 2 kids", "I love hiking"], [["ADD"], ["ADD"], ["ADD"]]),
    # -- numbers, dates, weekdays ------------------------------------------------------------------
    Scenario("ja_weekday_changed", "ja",
             ["毎週月曜10時に英会話のレッスンがあります。", "英会話のレッスンは毎週金曜10時になりました。"],
             ["英会話のレッスンは毎週金曜10時になりました"], [["ADD"], ["UPDATE"]]),
    Scenario("ja_wakeup_time_changed", "ja", ["毎朝6時に起きます。", "毎朝7時に起きます。"], ["毎朝7時に起きます"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_cat_count_changed", "ja", ["猫を2匹飼っています。", "猫を3匹飼っています。"], ["猫を3匹飼っています"],
             [["ADD"], ["UPDATE"]]),
    Scenario("ja_trip_week_changed", "ja", ["来週京都に旅行する予定です。", "再来週京都に旅行する予定です。"],
             ["再来週京都に旅行する予定です"], [["ADD"], ["UPDATE"]]),
    Scenario("ja_trip_postponed", "ja", ["来週京都に旅行する予定です。", "京都旅行は来月に延期しました。"],
             ["京都旅行は来月に延期しました"], [["ADD"], ["UPDATE"]]),
    Scenario("en_kids_count_changed", "en", ["I have 2 kids.", "I have 3 kids."], ["I have 3 kids"],
             [["ADD"], ["UPDATE"]]),
    Scenario("en_gym_day_changed", "en", ["I go to the gym every Monday.", "I go to the gym every Friday."],
             ["I go to the gym every Friday"], [["ADD"], ["UPDATE"]]),
    Scenario("en_appointment_moved", "en",
             ["I have a dentist appointment on Monday at 10am.", "I have a dentist appointment on Friday at 10am."],
             ["I have a dentist appointment on Friday at 10am"], [["ADD"], ["UPDATE"]]),
    # -- forget requests remove exactly the right memory ------------------------------------------
    Scenario("ja_forget_exact", "ja", ["辛い料理が苦手です。旅館が好きです。", "辛い料理が苦手って言ったのは忘れて。"],
             ["旅館が好きです"], [["ADD", "ADD"], ["DELETE"]]),
    Scenario("ja_forget_topic", "ja",
             ["来週京都に旅行する予定です。", "コーヒーが好きです。", "京都旅行のことは忘れてください。"],
             ["コーヒーが好きです"], [["ADD"], ["ADD"], ["DELETE"]]),
    Scenario("ja_forget_one_of_similar", "ja",
             ["コーヒーが好きです。", "辛い料理が苦手です。", "甘いものが好きです。", "甘いものが好きって話は忘れて。"],
             ["コーヒーが好きです", "辛い料理が苦手です"], [["ADD"], ["ADD"], ["ADD"], ["DELETE"]]),
    Scenario("ja_no_longer_vegetarian", "ja", ["ベジタリアンです。", "エビアレルギーがあります。", "もうベジタリアンではありません。"],
             ["エビアレルギーがあります"], [["ADD"], ["ADD"], ["DELETE"]]),
    Scenario("ja_forget_without_match", "ja", ["旅館が好きです。", "猫の話は忘れて。"], ["旅館が好きです"],
             [["ADD"], ["NONE"]]),
    Scenario("ja_forget_partial_match_keeps_other_fact", "ja",
             ["京都に住んでいます。", "紅茶が好きです。", "京都の紅葉の話は忘れて。"],
             ["京都に住んでいます", "紅茶が好きです"], [["ADD"], ["ADD"], ["NONE"]],
             note="shares 京都 with a memory, but asks to forget something else"),
    Scenario("ja_forget_paraphrased_memory", "ja",
             ["辛いものが苦手です。", "紅茶が好きです。", "辛い料理が苦手って言ったのは忘れて。"],
             ["紅茶が好きです"], [["ADD"], ["ADD"], ["DELETE"]]),
    Scenario("en_forget_partial_match_keeps_other_fact", "en",
             ["I live in Kyoto.", "I like tea.", "Forget what I said about Kyoto temples."],
             ["I live in Kyoto", "I like tea"], [["ADD"], ["ADD"], ["NONE"]]),
    Scenario("en_forget_that_i_like", "en", ["I like coffee.", "I'm allergic to peanuts.", "Please forget that I like coffee."],
             ["I'm allergic to peanuts"], [["ADD"], ["ADD"], ["DELETE"]]),
    Scenario("en_no_longer", "en", ["I'm vegetarian.", "I love hiking.", "I'm no longer vegetarian."], ["I love hiking"],
             [["ADD"], ["ADD"], ["DELETE"]]),
    Scenario("en_not_anymore", "en", ["I usually drink coffee in the morning.", "I work at Contoso.",
                                      "I don't drink coffee anymore."],
             ["I work at Contoso"], [["ADD"], ["ADD"], ["DELETE"]]),
    # -- assistant-only claims and injected recall text create nothing ----------------------------
    Scenario("ja_assistant_only", "ja",
             [[("user", "ありがとう。"), ("assistant", "お客様は旅館が好きで、辛い料理が苦手ですね。")]], [], [[]]),
    Scenario("en_assistant_only", "en",
             [[("user", "Thanks!"), ("assistant", "You like coffee and you live in Tokyo, I remember.")]], [], [[]]),
    Scenario("ja_injected_recall", "ja", [RECALL_JA + "今日はいい天気ですね。"], [], [[]]),
    Scenario("en_injected_recall", "en", [RECALL_EN + "What should I pack?"], [], [[]]),
    Scenario("ja_injected_recall_plus_fact", "ja", [RECALL_JA + "温泉が好きです。"], ["温泉が好きです"], [["ADD"]]),
    Scenario("en_assistant_claim_user_fact", "en",
             [[("assistant", "You said you like tea."), ("user", "I like coffee.")]], ["I like coffee"], [["ADD"]]),
    Scenario("ja_question_creates_nothing", "ja", ["旅館は好きですか？"], [], [[]]),
    # -- a whole trip conversation ------------------------------------------------------------------
    Scenario("ja_travel_conversation", "ja",
             [
                 "来週京都に旅行する予定です。旅館が好きです。",
                 [("user", "辛い料理が苦手です。"), ("assistant", "承知しました。辛くないお店を探しますね。")],
                 "旅館が好きです。",
                 "紅茶が好きです。",
                 "最近は紅茶よりコーヒーが好きです。",
                 RECALL_JA + "辛い料理が苦手って言ったのは忘れて。",
             ],
             ["来週京都に旅行する予定です", "旅館が好きです", "最近は紅茶よりコーヒーが好きです"],
             [["ADD", "ADD"], ["ADD"], ["NONE"], ["ADD"], ["UPDATE"], ["DELETE"]]),
]
