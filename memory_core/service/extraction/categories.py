"""What kind of statement a sentence is: the rule categories as a table of patterns (constraint,
preference, routine, profile, then event and, in English, a statement about the user), and a plan
for a dated intention."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from memory_core.language.date_annotation import is_dated, mentions_relative_date
from memory_core.language.dates import KANJI_DIGITS, WEEKDAYS, WEEKDAYS_JA
from memory_core.language.event_time import HAVE_GOT, event_time, said_of_past
from memory_core.language.sentences import JAPANESE_SCRIPT, TRAILING_PUNCTUATION

__all__ = [
    "CATEGORY_RULES",
    "FIRST_PERSON_EN",
    "LIFE_EVENT",
    "category",
    "classify",
    "is_past",
    "is_recurring",
]

_WEEKDAY_NAMES = "|".join(WEEKDAYS)
_WEEKDAY_PLURALS = "|".join(f"{name}s" for name in WEEKDAYS)

_CONSTRAINT = re.compile(
    r"アレルギー|食べられない|食べられません|飲めない|飲めません|乗れない|乗れません|避けたい|避けて(?:い|る)|"
    r"控えて(?:い|る)|ベジタリアン|ヴィーガン|ビーガン|菜食|車椅子|車いす|禁酒|"
    r"(?:が|は)(?:ダメ|だめ|NG)(?:です|だ|なんです)?|"
    r"できない|できません|出来ない|出来ません|"
    r"\ballerg(?:y|ic)\b|\bi (?:can't|cannot|can not|am unable to|must not|mustn't|should not|shouldn't)\b|"
    r"\bi'm unable to\b|\bi avoid\b|\bi (?:don't|do not|never) (?:eat|drink)\b|"
    r"\bvegetarian\b|\bvegan\b|\bgluten[- ]free\b|\blactose intolerant\b|\bceliac\b|\bkosher\b|\bhalal\b|"
    r"\bwheelchair\b|\bi'm (?:diabetic|pregnant)\b|\bmy budget\b|\bi'm afraid of\b|\bphobia\b|"
    r"予算は|恐怖症|高所恐怖|ペスカタリアン|(?:肉|魚|お肉|お魚)(?:も|を|は)(?:また)?食べ(?:る|ます|ています|てる|られる)(?:ようになりました|ようになった)?$|"
    r"\bpescatarian\b|\bi (?:now |only |still |also )?eat (?:meat|fish|seafood|pork|beef|chicken|eggs|dairy|everything)\b",
    re.IGNORECASE,
)
_CONSTRAINT_EXCLUDE = re.compile(
    r"\bcan't (?:wait|believe|remember|decide|stop)\b|待ちきれない|信じられない|我慢できない",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"大好き|好き|嫌い|きらい|苦手|好み|気に入って|お気に入り|愛用|派(?:です|だ|なんです)|"
    r"\bi (?:really |absolutely |just |do )?(?:like|love|prefer|enjoy|hate|dislike|adore|detest)\b|"
    r"\bi (?:can't|cannot) stand\b|\bmy (?:favou?rite|preferred)\b|\bi'm (?:a (?:big |huge )?)?fan of\b|"
    r"\bi'm not (?:a )?fan of\b|\bi'd rather\b|\bi would rather\b|\bnot a fan of\b|"
    r"\bi (?:really |just )?(?:don't|do not|never) (?:like|love|enjoy|care for)\b|"
    r"\bi'm (?:not )?(?:really |so |very )?into\b|"
    r"(?<!それ)(?<!これ)(?<!あれ)(?<!どれ)(?<!そっち)(?<!こっち)(?:が|の方が|のほうが)(?:いい|良い)(?:です|な|なあ|なぁ|んです)?$|"
    r"(?:に|が|は)弱い(?:です|んです)?$|\bi (?:\w+ly )?(?:can't|cannot) stand\b|"
    # corrections and degrees: "I now prefer", "I still love", "I absolutely adore"
    r"\bi (?:now |still |also |totally |definitely |kinda |kind of |much |\w+ly )?(?:like|love|prefer|enjoy|hate|"
    r"dislike|adore|detest)\b|"
    # feelings about people and things in the user's life
    r"\bi'?m (?:so |really |very |super |truly |incredibly )?(?:thankful|grateful|passionate|proud|obsessed)\b|"
    r"\bi(?:'ve| have) (?:always )?been (?:really |so )?(?:into|passionate about|obsessed with)\b|"
    # what the user and theirs like together ("we love playing 'It takes two'")
    r"\bwe (?:really |all |both |just |also )?(?:like|love|enjoy|adore)\b",
    re.IGNORECASE,
)
#: Wants and priorities (最優先, 〜したい, できれば, "I'd rather", "I want"): the user's preferences for
#: what the assistant does. Requests phrased as wants ("予約したいです", "I'd like to book") are not.
_WANT = re.compile(
    r"最優先|優先し|重視|こだわり|譲れない|できれば|出来れば|なるべく|希望|"
    r"たい(?:です|んです|と思っています|と思ってます|と思う|と思います|な)?$|"
    r"(?:が|の方が|のほうが|は)(?:いい|良い)(?:です|な|んです|かな)?$|(?:付き|つき|の)で$|にしたい|"
    r"\bi(?:'d| would) (?:rather|prefer)\b|\bi (?:really |just |definitely )?want\b|\bideally\b|"
    r"\bif possible\b|\b(?:my|a|the) (?:top |first |main |biggest )?priority\b|\bmatters most\b|"
    r"\bi(?:'d| would) (?:really )?(?:like|love) (?!to (?:book|reserve|order|know|ask|see|check|find|get|buy|"
    r"make|go|have|try|cancel|change)\b)",
    re.IGNORECASE,
)
_WANT_EXCLUDE = re.compile(
    r"(?:予約|調べ|知り|聞き|相談|教えて|確認|注文|頼み|キャンセル|変更|探し|見|手配|購入|質問)(?:し|を)?たい|"
    r"\bwant (?:to (?:book|reserve|order|know|ask|see|check|find|cancel|change)|you)\b",
    re.IGNORECASE,
)
#: First-person events: what happened to the user ("I just got accepted for an internship", "Last year
#: I visited Italy", 「初めてフルマラソンを走りました」). People ask about these later.
_EVENT = re.compile(
    r"\b(?:i|we)(?:'ve| have)? (?:just |finally |recently |also |actually |even |already |once |never |"
    r"first |all |both )?(?:\w{2,}[^e\W]ed|used|got|went|saw|made|took|met|ran|won|lost|bought|had|began|became|found|"
    r"gave|left|began|built|wrote|read|sang|swam|drew|did|came|flew|drove|rode|sold|spent|taught|thought|"
    r"felt|brought|caught|chose|fell|heard|held|kept|knew|led|paid|put|quit|said|sent|set|shot|sat|slept|"
    r"spoke|stood|told|tore|understood|woke|wore|been|done|gone|seen|taken|given|begun|grown)\b|"
    r"^(?:just |finally |recently )?(?:\w{2,}[^e\W]ed|got|lost|made|took|won|bought|finished|started|went|saw|"
    r"met|had|began|became) (?:my|a|an|the|to|into|back|some|our)\b|"
    r"\bmy (?:\w+ ){0,2}(?:\w{2,}[^e\W]ed|got|went|won|lost|made|took|began|became)\b",
    re.IGNORECASE,
)
#: Life events in the user's circle, said without "I" ("Rex passed away", "My grandma died last week").
LIFE_EVENT = re.compile(
    r"\b(?:passed away|died|was put down|got married|got engaged|got divorced|had (?:a|her|his|their) baby|"
    r"was born|were born)\b|亡くなり|亡くなった|死んじゃ|死にました|他界し|結婚しました|出産し|生まれました",
    re.IGNORECASE,
)
_EVENT_EXCLUDE = re.compile(
    r"\bi (?:just )?(?:wanted|needed|asked|meant|wondered|thought|guess|forgot|told you|said|mentioned|"
    r"noticed|got (?:it|that|this|you)|understood)\b|\bi(?:'ve| have) (?:been )?(?:thinking|wondering)\b|\bi (?:just )?saw (?:it|that|this|your)\b",
    re.IGNORECASE,
)
_EVENT_JA = re.compile(
    r"(?:ました|ましたよ|ましたね|ましたー|(?<!か)った(?:んです|んだ|よ|の)?|(?<![かな])た(?:んです|んだ|よ|の)?|"
    r"[\u4e00-\u9fff][んい]だ(?:んです|よ|の)?)$"
)
#: Past forms that report a state or a reaction, not an event; remarks to the listener (〜ましたね) and the
#: weather neither.
_EVENT_JA_EXCLUDE = re.compile(
    r"(?:ね|よね|かな|っけ)$|寒く|暑く|涼しく|暖かく|天気|雨が|雪が|晴れ|曇|(?:"
    r"分かり|わかり|了解し|承知し|かしこまり|助かり|疲れ|眠く|お腹(?:が)?すい|腹減っ|よかっ|良かっ|"
    r"忘れ|びっくりし|驚き|困り|思い|思っ|考え|言い|言っ|なっ|なり|でし|だっ)"
    r"(?:まし)?(?:た|たよ|たね|たんです|たんだ)?$|^(?:はい|いいえ|うん|ええ)"
)
#: What the user is doing these days ("I'm playing The Witcher 3", "I'm listening to an album called
#: Sleep", "We're putting together a talent show"): a present activity, not a passing state
#: ("I'm doing ok", "I'm feeling tired") or an intention (a plan, :data:`_PLAN_INTENT`).
_ACTIVITY = re.compile(
    r"\b(?:i'?m|i am|we'?re|we are) (?:(?:\w+ly|currently|now|also|still|just|so|totally) )*"
    r"(?!(?:going|gonna|feeling|doing|thinking|wondering|hoping|kidding|joking|trying|getting|looking|saying|"
    r"telling|asking|talking|being|having a (?:good|great|bad|hard|tough))\b)[a-z]{3,}ing\b",
    re.IGNORECASE,
)
#: A statement about the user or theirs (a first-person word in it), and an opinion about what was just
#: said ("I think so", "I guess it's fine"), which is not one.
FIRST_PERSON_EN = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|we|we're|we've|our|us)\b", re.IGNORECASE)
_OPINION = re.compile(
    r"^(?:\W*\w+\W+)?(?:i|we) (?:(?:really|just|totally|kinda|do) )?(?:think|guess|hope|mean|know|wish|bet|suppose|"
    r"wonder|agree|understand|see|believe|feel like)\b",
    re.IGNORECASE,
)
_CONTENT_WORD = re.compile(
    r"\b(?!(?:the|and|but|that|this|with|for|from|have|has|had|was|were|are|is|it's|its|just|so|really|very|"
    r"too|also|about|what|when|then|than|they|them|their|there|been|being|some|such|into|onto|over|out|"
    r"still|though|haha|hahaha|yeah|pretty|totally|much|well)\b)[a-z]{4,}\b",
    re.IGNORECASE,
)
#: Reactions to what the assistant just said ("I like it", "それが好き") are not durable facts.
_PRONOUN_REACTION = re.compile(
    r"\b(?:like|love|hate|prefer|enjoy|dislike)(?:s|d|ed)? (?:it|that|this|them|these|those|both)"
    r"(?: (?:idea|one|ones|place|plan|option|suggestion|choice))?"
    r"(?: (?:a lot|very much|so much|too|more))?$|^(?:それ|これ|あれ|そっち|こっち|どっち)(?:が|は|も)",
    re.IGNORECASE,
)
_PLAN_INTENT = re.compile(
    r"予定|つもり|会議|打ち合わせ|ミーティング|約束|予約|用事|ライブ|コンサート|行きます|行く|いく|行って(?:き|く)|旅行|出張|帰省|引っ越|参加|会います|会う|受けます|受ける|"
    r"始めます|始める|泊まり|泊まる|訪ね|向かい|向かう|飛び|出発|到着|発表|試験|面接|手術|結婚式|誕生日|"
    r"\bi(?:'m| am) (?:going|traveling|travelling|flying|visiting|moving|leaving|meeting|attending|"
    r"planning|starting|having|getting|taking|seeing|hosting)\b|\bi (?:will|plan to|intend to|have to|need to|'ll|have an?|"
    r"have my|am going)\b|\bi(?:'ve| have) got (?:an?|my)\b|\bi'll\b|\bwe(?:'re| are| will|'ll) (?:going|traveling|travelling|flying|"
    r"visiting|moving|leaving|meeting|getting)\b|\bmy (?:[\w']+ )?(?:trip|flight|meeting|appointment|exam|interview|"
    r"wedding|birthday|surgery|vacation|holiday)\b",
    re.IGNORECASE,
)
_ROUTINE = re.compile(
    rf"毎週|毎日|毎朝|毎晩|毎夜|毎月|毎年|いつも|普段|ふだん|たいてい|大抵|習慣|定期的|週に\s*[0-9{KANJI_DIGITS[:7]}]|"
    rf"月に\s*[0-9{KANJI_DIGITS[:7]}]|[{WEEKDAYS_JA}]曜(?:日)?(?:は|に)?(?:いつも|毎回|必ず)|"
    rf"\bevery (?:day|morning|evening|night|week|weekend|month|year|spring|summer|autumn|fall|winter|{_WEEKDAY_NAMES})\b|"
    r"\busually\b|\balways\b|\boften\b|\btypically\b|\bregularly\b|"
    r"(?:が|は)多い(?:です|んです)?$|\btend to\b|"
    rf"\bon (?:{_WEEKDAY_PLURALS}|weekends)\b|"
    r"\b(?:once|twice|\d+ times) a (?:day|week|month|year)\b|\beach (?:day|morning|week|month)\b",
    re.IGNORECASE,
)
_PROFILE = re.compile(
    r"^(?:私|わたし|僕|ぼく|俺|おれ|自分)(?:は|、).+(?:です|だ|でございます|やってます|しています|してます)$|"
    r"住んで|住まい|出身|実家(?:は|が)|勤めて|勤務|働いて|職業|仕事は|名前は|と申します|と言います|といいます|歳です|歳だ|"
    r"(?:子供|子ども|息子|娘|妻|夫|家族)(?:が|は)|飼って|話せます|話せる|"
    r"\bi live\b|\bi'm from\b|\bi am from\b|\bi (?:work|worked) (?:as|at|for|in)\b|\bmy name is\b|"
    r"\bcall me\b|\bi'm \d+\b|\bi am \d+\b|\bi(?:'m| am) an? (?!bit\b|little\b|lot\b|tad\b)\w+|"
    r"\bi have (?:a |an |two |three |\d+ )?(?:kids?|children|sons?|daughters?|dogs?|cats?|wife|husband|"
    r"partner|pets?)\b|\bmy (?:wife|husband|partner|son|daughter|kids|children|dog|cat|job|home)\b|"
    r"\bi speak\b|\bi was born\b|\bi grew up\b|\bi study\b|\bi'm studying\b|"
    # names, family, relationships and contact details ("I go by Ally", "I have a sister", 「妹がいます」)
    r"\bi go by\b|と呼んで|って呼んで|(?:姉|兄|妹|弟|息子|娘|孫|双子)(?:が|は)(?:い|一人|二人|三人|[0-9]人)|"
    r"\bi have (?:a |an |two |three |four |\d+ )?(?:older |younger |little |big |twin )?(?:sisters?|brothers?|siblings?|"
    r"grandchildren|grandkids|twins|stepsons?|stepdaughters?|nieces?|nephews?)\b|"
    r"\bi'?m (?:single|married|divorced|engaged|widowed|separated)\b|\bi am (?:single|married|divorced|engaged|widowed)\b|"
    r"\bmy (?:e-?mail|phone|mobile|cell)(?: number| address)? is\b|電話番号は|メールアドレスは|"
    r"\bi'?m (?:currently |now )?reading\b|を読んで(?:います|いる|る)$|"
    # moves and life changes ("I moved to Munich", 「福岡に引っ越しました」, "I got a job as")
    r"\bi(?:'ve| have)? (?:just |recently |finally )?(?:moved|relocated)\b|\bi'?m (?:moving|relocating) to\b|"
    r"引っ越し|引越し|引っ越|転勤|転職|就職|入社|退職|結婚し|離婚し|卒業し|入学し|"
    r"\bi (?:just |finally )?(?:got|landed|started) (?:a|my|the) (?:new )?job\b|\bi(?:'m| am) working (?:as|at|for)\b|"
    r"\bi (?:got|am|'m) (?:married|engaged|divorced)\b|\bi retired\b|\bi graduated\b|"
    # who the user is by what they do: "I'm more of a night owl", "I'm learning Spanish", "I play the cello"
    r"\bi'?m (?:more of |kind of |sort of |definitely |really |totally )an? \w+|"
    r"\bi'?m (?:currently |still |now )?(?:starting|opening|launching|building|writing|learning|training for|"
    r"studying|working on|taking (?:a |an )?(?:class|course|lessons?))\b|"
    r"\bi (?:also |still |now )?(?:play|practice|collect|volunteer|paint|knit|sing|dance|coach|teach)\b|"
    r"\bi (?:\w+ly )?work\b|"
    r"(?:を|として)(?:して|やって)(?:います|いる|ます|る)$|習って|勉強中|勉強して|練習中|練習して|趣味|働いて|転職|"
    r"一人暮らし|二人暮らし|実家暮らし|同居|\bi live (?:alone|with)\b|"
    r"(?:朝型|夜型)|"
    # what the user drives or rides, the team they are on, a transfer, their doctor, their commute
    r"\bi (?:(?:still|now|also|currently|usually) )?(?:drive|ride) (?:an?|my|the)\b|"
    r"\bi(?:'m| am) (?:(?:now|currently|still|also) )?on the (?:[\w-]+ ){1,3}team\b|"
    r"異動|に乗って(?:います|いる|る|ます)|主治医(?:は|が)|通勤",
    re.IGNORECASE,
)
#: An undated plan, clearly one: 「京都へ家族旅行に行く予定です」, "I'm planning to visit Kyoto".
_PLAN_UNDATED = re.compile(
    r"(?:予定|つもり)(?:です|だ|でいます|なんです)?$|ことにしました|計画して|"
    r"\bi'?m (?:planning|hoping) (?:to|on)\b|\bi plan to\b|\bwe'?re planning (?:to|on)\b|\bi intend to\b|"
    r"\bi'?ve decided to\b|\bi'?m gonna (?!be\b)\w+",
    re.IGNORECASE,
)
#: A date word followed by "from" starts a lasting state ("来月から大阪に住む"), not a temporary plan.
_STARTING = re.compile(
    r"(?:来月|再来月|来年)から|以降|\bstarting (?:next|from next) (?:month|year)\b|\bfrom next (?:month|year)\b",
    re.IGNORECASE,
)
#: Dates that come back every year: 「誕生日は3月3日です」 is who the user is, not a plan for next March.
_RECURRING = re.compile(
    r"誕生日|記念日|命日|毎年|生まれ|\bbirthday\b|\banniversary\b|\bevery year\b|\bannual(?:ly)?\b|\bborn\b",
    re.IGNORECASE,
)
#: A birthday or an anniversary as the occasion of something that happens once ("to Lisbon for a
#: friend's birthday", "my birthday trip", 誕生日旅行): the date said is that one's, not every year's.
_OCCASION = re.compile(
    r"\bfor (?:(?:my|a|an|his|her|their|our|the) )?(?:\w+'s )?(?:\w+ )?(?:birthday|anniversary)\b|"
    r"\b(?:birthday|anniversary) (?:trip|party|dinner|lunch|present|gift|celebration|getaway|weekend|"
    r"holiday|vacation)\b|(?:誕生日|記念日)の?(?:会|パーティー|旅行|お祝い|祝い|プレゼント|ディナー)|"
    r"(?:誕生日|記念日)(?:を|の)?祝",
    re.IGNORECASE,
)
#: A Japanese statement that ends in a verb of what is to come (バーベキューをする, 教室に通う, 受けます):
#: an intention when it is dated ahead. A state (住んでいる, 〜てる, 行っています) or a copula (です) is none.
_ACTIVITY_JA = re.compile(r"(?:[うくぐすつぬぶむる]|ます)(?:よ|ね|んだ|んです|の)?$")
_STATE_JA = re.compile(r"(?:[てで]い?(?:る|ます)|です)(?:よ|ね|んだ|んです|の)?$")
#: Said of the past: a bare date in it is the last such day, not the next ("I was born on May 5").
_PAST_EN = re.compile(
    r"\b(?:was|were|had|did|got|went|came|born|married|moved|\w{2,}[^e\W]ed)\b", re.IGNORECASE
)
#: The listener: a preference, a habit or an event said of "you" is about the other person or the
#: conversation ("I love your commitment", "I'm always here for you", "I'll send you the link").
_SECOND_PERSON = re.compile(r"\byou(?:r|rs|'re|'ll|'ve|'d)?\b|あなた", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CategoryRule:
    """A category and the pattern that says it (unless ``unless`` matches too).

    Attributes:
        category: The category a matching sentence has.
        pattern: What says it.
        unless: What says it is not (``"can't wait"`` is no constraint).
        of_reactions: Whether a reaction to what was just said ("I like it", 「それが好き」) can be of this
            category.
    """

    category: str
    pattern: re.Pattern[str]
    unless: re.Pattern[str] | None = None
    of_reactions: bool = True

    def matches(self, sentence: str, reaction: bool) -> bool:
        """Whether ``sentence`` (a reaction or not) is of this category."""
        if reaction and not self.of_reactions:
            return False
        return bool(self.pattern.search(sentence)) and not (self.unless and self.unless.search(sentence))


#: The categories in the order they are tried: the first that matches wins; a sentence none matches may
#: still be an event, or in English a statement about the user (``general``: :func:`classify`).
CATEGORY_RULES: tuple[CategoryRule, ...] = (
    CategoryRule("constraint", _CONSTRAINT, _CONSTRAINT_EXCLUDE),
    CategoryRule("preference", _PREFERENCE, of_reactions=False),
    CategoryRule("preference", _WANT, _WANT_EXCLUDE, of_reactions=False),
    CategoryRule("routine", _ROUTINE),
    CategoryRule("profile", _PROFILE),
)


def classify(sentence: str) -> str | None:
    """The rule category of a sentence (:data:`CATEGORY_RULES`, then ``event``, then in English
    ``general``: what the user is doing, or a statement about them with four or more content words that
    is not an opinion on what was said), or ``None``."""
    reaction = bool(_PRONOUN_REACTION.search(sentence))
    for rule in CATEGORY_RULES:
        if rule.matches(sentence, reaction):
            return rule.category
    if reaction:
        return None
    if _is_event(sentence):
        return "event"
    if JAPANESE_SCRIPT.search(sentence):
        return None
    if _ACTIVITY.search(sentence):
        return "general"
    if not FIRST_PERSON_EN.search(sentence) or _OPINION.search(sentence):
        return None
    return "general" if len(_CONTENT_WORD.findall(sentence)) >= 4 else None


def _is_event(sentence: str) -> bool:
    """Whether a sentence reports what happened to the user (「初めてフルマラソンを走りました」, "I just got
    accepted for an internship")."""
    if JAPANESE_SCRIPT.search(sentence):
        core = TRAILING_PUNCTUATION.sub("", sentence)
        return len(core) >= 6 and bool(_EVENT_JA.search(core)) and not _EVENT_JA_EXCLUDE.search(core)
    if LIFE_EVENT.search(sentence):
        return True
    return bool(_EVENT.search(sentence)) and not _EVENT_EXCLUDE.search(sentence)


def category(body: str, reference: date) -> str | None:
    """The category of a statement (:func:`classify`), or ``plan`` for a dated intention.

    A dated plan is a plan; its date is written into the text, so once the day has passed it still says
    what was planned and when: a dated record, not something to throw away. A change that starts then
    ("来月から大阪に住む") keeps its own category, and so does a dated statement about the past ("I had
    my interview last week", 「今週、福岡に引っ越しました」: an event, or who the user is now). A Japanese
    statement that ends in a verb of what is to come (「5月16日にバーベキューをする」) is an intention
    when its date is not over.
    """
    found = classify(body)
    if found in ("preference", "routine", "event", "general") and _SECOND_PERSON.search(body):
        return None
    intent, activity = bool(_PLAN_INTENT.search(body)), _ends_in_activity(body)
    # an event said in the past is one; "I've got a physio session on May 22" is what the user has ahead
    happened = found == "event" and is_past(body, None)
    if found == "constraint" or happened or not (intent or activity):
        return found
    if not is_dated(body, reference):  # an undated intention is a plan, not a statement about the user
        return "plan" if found in (None, "general") and _PLAN_UNDATED.search(body) else found
    return _dated_intention(body, found, reference, activity_only=not intent)


def _dated_intention(body: str, found: str | None, reference: date, *, activity_only: bool) -> str | None:
    """The category of a dated statement of an intention (``activity_only``: said only by its ending):
    ``plan`` unless its date comes back every year, it starts a lasting change, or it is not ahead
    (:func:`_ahead`)."""
    if is_recurring(body) and not mentions_relative_date(body):
        return found or "profile"  # a birthday on a calendar date: every year, not a plan
    if _STARTING.search(body) or not _ahead(body, reference, activity_only=activity_only):
        return found or ("event" if said_of_past(body) else "general")
    return "plan"


def _ends_in_activity(body: str) -> bool:
    """Whether a Japanese statement ends in a verb of what is to come (:data:`_ACTIVITY_JA`)."""
    if not JAPANESE_SCRIPT.search(body):
        return False
    core = TRAILING_PUNCTUATION.sub("", body)
    return bool(_ACTIVITY_JA.search(core)) and not _STATE_JA.search(core)


def _ahead(body: str, reference: date, *, activity_only: bool) -> bool:
    """Whether a dated statement says what is still to come on ``reference``: not one in the past tense
    whose date had begun by then, and, when only its ending says it is an intention, one whose date is
    not over."""
    said = datetime.combine(reference, time(), UTC)
    when = event_time(body, said, calendar=not is_recurring(body))
    if when is None:
        return True
    if said_of_past(body) and when.start <= said:
        return False
    return not activity_only or when.end > said


def is_past(body: str, kind: str | None) -> bool:
    """Whether a statement reports something that happened (an event, a Japanese past form, an English past
    tense): a bare date in it is the last such day, not the next."""
    if kind == "event":
        return True
    if JAPANESE_SCRIPT.search(body):
        return bool(_EVENT_JA.search(TRAILING_PUNCTUATION.sub("", body)))
    return bool(_PAST_EN.search(HAVE_GOT.sub(" ", body)))


def is_recurring(body: str) -> bool:
    """Whether a statement names a date that comes back every year (a birthday, an anniversary), not
    as the occasion of something that happens once ("for my birthday trip", 誕生日旅行)."""
    return bool(_RECURRING.search(body)) and not _OCCASION.search(body)
