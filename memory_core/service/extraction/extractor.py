"""Memory extraction: from one conversation turn to memory candidates.

Two paths produce the same :class:`~memory_core.domain.records.MemoryCandidate` objects:

* **LLM path** (a :class:`~memory_core.ports.ChatModel` is configured): the prompt of
  :mod:`memory_core.service.prompts.extraction`, answered as structured output and validated. An invalid
  answer is asked again (bounded); a candidate in another script than the user's sentence counts as
  invalid (Japanese stays Japanese).
* **Rule path** (:func:`extract_with_rules`): deterministic Japanese and English patterns, one
  statement per candidate, only from user messages.

Fallback policy: when the LLM path cannot produce a valid answer — invalid answers after the retries,
a :class:`~memory_core.errors.TransientError` that survived the model's own transport retries, or a
:class:`~memory_core.errors.PermanentError` — the extractor uses the rule path and records why in
:attr:`ExtractionResult.fallback_reason`, so ingestion never stalls on the model. Set
``on_transient="raise"`` to let a transient failure propagate instead (the queue redelivers the turn and
the LLM path gets another chance).

Both paths first remove recall blocks (see :func:`~memory_core.service.prompts.strip_recalled_memories`).

Rule categories: ``constraint`` (allergies, diets, things the user cannot do or avoids), ``preference``
(likes and dislikes, wants and priorities: 最優先, できれば, 〜したい, "I'd rather"), ``routine``
(recurring needs), ``profile`` (who the user is, moves and life changes), ``event`` (what happened to
the user: "I just got accepted for an internship", 「初めてフルマラソンを走りました」), ``plan`` (dated
intentions) and ``general`` (explicit "remember that ..." without a better category). The first
matching category in that order wins (a dated intention is a plan unless it is a constraint).

Dates: relative date words (昨日, 先週, 来月, yesterday, last month, next Friday, three days ago, ...)
are resolved against the turn's ``occurred_at`` (UTC) and the absolute date is written after them in
the memory text (:func:`annotate_dates`), so a memory keeps meaning the right day. A rule-path plan
does not expire: once its day has passed it is a dated record of what was planned. (An expiry given
explicitly, by the LLM path or on import, still applies: :func:`expiry_after` gives the end of the last
relevant day plus one day of grace, because a turn carries no time zone.)
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MessageRole, Turn
from memory_core.domain.validation import CONTROL_CHARACTERS, MAX_MEMORY_CHARS, ensure_utc
from memory_core.errors import PermanentError, TransientError, ValidationError
from memory_core.language.date_annotation import annotate_dates, is_dated, mentions_relative_date
from memory_core.language.sentences import (
    JAPANESE_SCRIPT,
    LEADING_MARKERS_EN,
    LEADING_MARKERS_JA,
    TRAILING_PUNCTUATION,
    is_question,
    split_sentences,
    strip_discourse_markers,
)
from memory_core.ports import ChatModel, Clock, SystemClock
from memory_core.service.prompts.extraction import (
    ExtractedMemory,
    ExtractionOutput,
    build_extraction_system_prompt,
    build_extraction_user_prompt,
    strip_recalled_memories,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_IMPORTANCE",
    "LLM_SOURCE",
    "RULE_SOURCE",
    "ExtractionResult",
    "MemoryExtractor",
    "expiry_after",
    "extract_with_rules",
    "llm_source",
    "statement_parts",
    "with_speaker",
]

logger = logging.getLogger(__name__)

DEFAULT_IMPORTANCE = 0.65
DEFAULT_CONFIDENCE = 0.55
RULE_SOURCE = "rule-fallback"
LLM_SOURCE = "llm"


def llm_source(model: str) -> str:
    """The ``source`` of what a chat model produced: ``llm.<model>`` ("llm.gpt-4.1-mini"), the name
    reduced to the characters a source may hold (so "llama3:8b" is "llm.llama3-8b")."""
    return f"{LLM_SOURCE}.{re.sub(r'[^A-Za-z0-9_.-]', '-', model)}"[:64]
#: Sentences longer than this are not turned into rule candidates (pasted text, not a statement).
MAX_RULE_SENTENCE_CHARS = 400
#: At most this many candidates per turn, on either path.
MAX_CANDIDATES = 20


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What extraction found in one turn and how.

    Attributes:
        candidates: Facts and forget requests, in the order they were said.
        path: ``"llm"`` when the chat model's answer was used, ``"rules"`` otherwise.
        fallback_reason: Why the rule path was used although a chat model is configured (``None``
            when the LLM path succeeded or no model is configured).
        attempts: Chat model calls made (0 on the pure rule path).
    """

    candidates: list[MemoryCandidate]
    path: Literal["llm", "rules"]
    fallback_reason: str | None = None
    attempts: int = 0


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


def expiry_after(last_day: date) -> datetime:
    """When a memory about ``last_day`` expires: the end of that day (UTC) plus one day of grace."""
    return datetime(last_day.year, last_day.month, last_day.day, tzinfo=UTC) + timedelta(days=2)


# --------------------------------------------------------------------------------------------
# Rule patterns
# --------------------------------------------------------------------------------------------


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_REQUEST = _rx(
    r"(?:ください|下さい|くださいね|してほしい|して欲しい|お願い|おねがい|教えて|調べて|探して|予約して|"
    r"おすすめは|オススメは)\s*[。！!]?$|^(?:please|pls|can you|could you|would you|will you|let'?s|"
    r"tell me|show me|find me|book|help me|recommend)\b"
)
#: Thanks and greetings: a sentence that opens with them (or, in Japanese, thanks anywhere) is the
#: conversation's manners, not a statement ("I'm so thankful to have them" is a statement).
_SMALL_TALK = _rx(
    r"ありがと|^(?:どうも|こんにちは|こんばんは|おはよう|はじめまして)|"
    r"^(?:thanks?\b|thank you|thx\b|ty\b|hi\b|hello\b|hey\b|ok\b|okay\b|good (?:morning|evening|night)\b)|"
    r"\bthank you\b"
)
#: A passing state ("今日は疲れた", "right now"): nothing to remember.
_TRANSIENT = _rx(
    r"今日|今夜|今朝|さっき|ただいま|\btoday\b|\btonight\b|\bright now\b|\bat the moment\b|"
    r"\bthis morning\b|\bjust now\b"
)
#: "Now" (今は, 今、): a correction when it comes with a preference, a constraint or who the user is
#: ("今は辛い料理が苦手です"), a passing state otherwise ("今は温泉に行きたい気分").
_NOW = re.compile(r"今は|今、|いまは|今では")
_FIRST_PERSON_EN = _rx(r"\b(?:i|i'm|i've|i'd|i'll|my|me|we|we're|our)\b")

_CONSTRAINT = _rx(
    r"アレルギー|食べられない|食べられません|飲めない|飲めません|乗れない|乗れません|避けたい|避けて(?:い|る)|"
    r"控えて(?:い|る)|ベジタリアン|ヴィーガン|ビーガン|菜食|車椅子|車いす|禁酒|"
    r"(?:が|は)(?:ダメ|だめ|NG)(?:です|だ|なんです)?|"
    r"できない|できません|出来ない|出来ません|"
    r"\ballerg(?:y|ic)\b|\bi (?:can't|cannot|can not|am unable to|must not|mustn't|should not|shouldn't)\b|"
    r"\bi'm unable to\b|\bi avoid\b|\bi (?:don't|do not|never) (?:eat|drink)\b|"
    r"\bvegetarian\b|\bvegan\b|\bgluten[- ]free\b|\blactose intolerant\b|\bceliac\b|\bkosher\b|\bhalal\b|"
    r"\bwheelchair\b|\bi'm (?:diabetic|pregnant)\b|\bmy budget\b|\bi'm afraid of\b|\bphobia\b|"
    r"予算は|恐怖症|高所恐怖"
)
_CONSTRAINT_EXCLUDE = _rx(
    r"\bcan't (?:wait|believe|remember|decide|stop)\b|待ちきれない|信じられない|我慢できない"
)
_PREFERENCE = _rx(
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
    r"\bi(?:'ve| have) (?:always )?been (?:really |so )?(?:into|passionate about|obsessed with)\b"
)
#: Wants and priorities (最優先, 〜したい, できれば, "I'd rather", "I want"): the user's preferences for
#: what the assistant does. Requests phrased as wants ("予約したいです", "I'd like to book") are not.
_WANT = _rx(
    r"最優先|優先し|重視|こだわり|譲れない|できれば|出来れば|なるべく|希望|"
    r"たい(?:です|んです|と思っています|と思ってます|と思う|と思います|な)?$|"
    r"(?:が|の方が|のほうが|は)(?:いい|良い)(?:です|な|んです|かな)?$|(?:付き|つき|の)で$|にしたい|"
    r"\bi(?:'d| would) (?:rather|prefer)\b|\bi (?:really |just |definitely )?want\b|\bideally\b|"
    r"\bif possible\b|\b(?:my|a|the) (?:top |first |main |biggest )?priority\b|\bmatters most\b|"
    r"\bi(?:'d| would) (?:really )?(?:like|love) (?!to (?:book|reserve|order|know|ask|see|check|find|get|buy|"
    r"make|go|have|try|cancel|change)\b)"
)
_WANT_EXCLUDE = _rx(
    r"(?:予約|調べ|知り|聞き|相談|教えて|確認|注文|頼み|キャンセル|変更|探し|見|手配|購入|質問)(?:し|を)?たい|"
    r"\bwant (?:to (?:book|reserve|order|know|ask|see|check|find|cancel|change)|you)\b"
)
#: First-person events: what happened to the user ("I just got accepted for an internship", "Last year
#: I visited Italy", 「初めてフルマラソンを走りました」). People ask about these later.
_EVENT = _rx(
    r"\b(?:i|we)(?:'ve| have)? (?:just |finally |recently |also |actually |even |already |once |never |"
    r"first |all |both )?(?:\w{2,}[^e\W]ed|used|got|went|saw|made|took|met|ran|won|lost|bought|had|began|became|found|"
    r"gave|left|began|built|wrote|read|sang|swam|drew|did|came|flew|drove|rode|sold|spent|taught|thought|"
    r"felt|brought|caught|chose|fell|heard|held|kept|knew|led|paid|put|quit|said|sent|set|shot|sat|slept|"
    r"spoke|stood|told|tore|understood|woke|wore|been|done|gone|seen|taken|given|begun|grown)\b|"
    r"^(?:just |finally |recently )?(?:\w{2,}[^e\W]ed|got|lost|made|took|won|bought|finished|started|went|saw|"
    r"met|had|began|became) (?:my|a|an|the|to|into|back|some|our)\b|"
    r"\bmy (?:\w+ )?(?:\w{2,}[^e\W]ed|got|went|won|lost|made|took|began|became)\b"
)
_EVENT_EXCLUDE = _rx(
    r"\bi (?:just )?(?:wanted|needed|asked|meant|wondered|thought|guess|forgot|told you|said|mentioned|"
    r"noticed|got (?:it|that|this|you)|understood)\b|\bi(?:'ve| have) (?:been )?(?:thinking|wondering)\b|\bi (?:just )?saw (?:it|that|this|your)\b"
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
#: Reactions to what the assistant just said ("I like it", "それが好き") are not durable facts.
_PRONOUN_REACTION = _rx(
    r"\b(?:like|love|hate|prefer|enjoy|dislike)(?:s|d|ed)? (?:it|that|this|them|these|those|both)"
    r"(?: (?:idea|one|ones|place|plan|option|suggestion|choice))?"
    r"(?: (?:a lot|very much|so much|too|more))?$|^(?:それ|これ|あれ|そっち|こっち|どっち)(?:が|は|も)"
)
_PLAN_INTENT = _rx(
    r"予定|つもり|会議|打ち合わせ|ミーティング|約束|予約|用事|ライブ|コンサート|行きます|行く|いく|行って(?:き|く)|旅行|出張|帰省|引っ越|参加|会います|会う|受けます|受ける|"
    r"始めます|始める|泊まり|泊まる|訪ね|向かい|向かう|飛び|出発|到着|発表|試験|面接|手術|結婚式|誕生日|"
    r"\bi(?:'m| am) (?:going|traveling|travelling|flying|visiting|moving|leaving|meeting|attending|"
    r"planning|starting|having|getting)\b|\bi (?:will|plan to|intend to|have to|need to|'ll|have an?|"
    r"have my|am going)\b|\bi'll\b|\bwe(?:'re| are| will|'ll) (?:going|traveling|travelling|flying|"
    r"visiting|moving|leaving|meeting|getting)\b|\bmy (?:trip|flight|meeting|appointment|exam|interview|"
    r"wedding|birthday|surgery|vacation|holiday)\b"
)
_ROUTINE = _rx(
    r"毎週|毎日|毎朝|毎晩|毎夜|毎月|毎年|いつも|普段|ふだん|たいてい|大抵|習慣|定期的|週に\s*[0-9一二三四五六七]|"
    r"月に\s*[0-9一二三四五六七]|[月火水木金土日]曜(?:日)?(?:は|に)?(?:いつも|毎回|必ず)|"
    r"\bevery (?:day|morning|evening|night|week|weekend|month|year|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday)\b|\busually\b|\balways\b|\boften\b|\btypically\b|\bregularly\b|"
    r"(?:が|は)多い(?:です|んです)?$|\btend to\b|\bon (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends)\b|"
    r"\b(?:once|twice|\d+ times) a (?:day|week|month|year)\b|\beach (?:day|morning|week|month)\b"
)
_PROFILE = _rx(
    r"^(?:私|わたし|僕|ぼく|俺|おれ|自分)(?:は|、).+(?:です|だ|でございます|やってます|しています|してます)$|"
    r"住んで|住まい|出身|勤めて|勤務|働いて|職業|仕事は|名前は|と申します|と言います|といいます|歳です|歳だ|"
    r"(?:子供|子ども|息子|娘|妻|夫|家族)(?:が|は)|飼って|話せます|話せる|"
    r"\bi live\b|\bi'm from\b|\bi am from\b|\bi (?:work|worked) (?:as|at|for|in)\b|\bmy name is\b|"
    r"\bcall me\b|\bi'm \d+\b|\bi am \d+\b|\bi(?:'m| am) an? (?!bit\b|little\b|lot\b|tad\b)\w+|"
    r"\bi have (?:a |an |two |three |\d+ )?(?:kids?|children|sons?|daughters?|dogs?|cats?|wife|husband|"
    r"partner|pets?)\b|\bmy (?:wife|husband|partner|son|daughter|kids|children|dog|cat|job|home)\b|"
    r"\bi speak\b|\bi was born\b|\bi grew up\b|\bi study\b|\bi'm studying\b|"
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
    r"(?:朝型|夜型)"
)
#: An undated plan, clearly one: 「京都へ家族旅行に行く予定です」, "I'm planning to visit Kyoto".
_PLAN_UNDATED = _rx(
    r"(?:予定|つもり)(?:です|だ|でいます|なんです)?$|ことにしました|計画して|"
    r"\bi'?m (?:planning|hoping) (?:to|on)\b|\bi plan to\b|\bwe'?re planning (?:to|on)\b|\bi intend to\b|"
    r"\bi'?ve decided to\b|\bi'?m gonna (?!be\b)\w+"
)

# Forget requests ---------------------------------------------------------------------------------

#: The request forms of 忘れる ("忘れて", "忘れてください", "忘れていいよ"), not "忘れてた" / "忘れてない？".
_FORGET_JA = re.compile(r"^(?P<what>.*?)(?:(?:忘れて|わすれて)(?!ない|いな|しま|た|る|ません)|忘れろ)")
_FORGET_JA_TRAIL = re.compile(
    r"(?:って|と)?(?:前に|以前|さっき)?(?:言った|いった|話した|伝えた)?"
    r"(?:のこと|の件|の話|ということ|という話|って話|という件|こと|件|話|の)?(?:は|を|も)?\s*$"
)
_FORGET_JA_LEAD = re.compile(r"^(?:前に|以前|さっき|この前)?(?:言った|いった|話した|伝えた)")
_NO_LONGER_JA = re.compile(
    r"もう(?:、)?.+?(?:ではない|じゃない|ではありません|じゃありません|ではなくなり|じゃなくなっ|ではなくなっ|"
    r"ていない|ていません|でいない|でいません|てない|てません)"
)
_FORGET_EN = _rx(
    r"^(?:(?:please|pls|just|can you|could you|would you|you can|you may|go ahead and)\s+)*forget\s+(?:about\s+)?(?:that\s+|what\s+i\s+said\s+about\s+|"
    r"the\s+fact\s+that\s+)?(?P<what>.*)$"
)
_NO_LONGER_EN = _rx(r"\b(?P<subj>i|i'm|i am)\s+no longer\s+(?P<rest>.+)$")
_ANYMORE_EN = _rx(
    r"\b(?P<subj>i)\s+(?:don't|do not)\s+(?P<rest>.+?)\s+any\s?more\b|"
    r"\b(?P<subj2>i'm|i am)\s+not\s+(?P<rest2>.+?)\s+any\s?more\b"
)
_PRONOUN_ONLY = re.compile(
    r"^(?:それ|これ|あれ|さっきの|今の|その件|この件|that|this|it|everything)?$", re.IGNORECASE
)

_REMEMBER_EN = _rx(r"^(?:please\s+)?remember\s+(?:that\s+)?(?P<what>.+)$")
_REMEMBER_JA = re.compile(r"^(?P<what>.+?)(?:って|と|ことを|のを|を)?(?:覚えて(?:おいて|て)|記憶して)")

#: A date word followed by "from" starts a lasting state ("来月から大阪に住む"), not a temporary plan.
_STARTING = _rx(
    r"(?:来月|再来月|来年)から|以降|\bstarting (?:next|from next) (?:month|year)\b|\bfrom next (?:month|year)\b"
)


def _clean(sentence: str) -> str:
    """The candidate text of a sentence: discourse markers and closing punctuation removed."""
    text = TRAILING_PUNCTUATION.sub("", strip_discourse_markers(sentence)).strip()
    if text[:1].islower() and not JAPANESE_SCRIPT.search(text[:1]):
        text = text[0].upper() + text[1:]
    if re.match(r"^i(?:\b|')", text):
        text = "I" + text[1:]
    return text


def _forget_target(sentence: str, previous: str | None) -> str | None:
    """What an explicit forget request asks to forget, or ``None`` when it is not one."""
    core = TRAILING_PUNCTUATION.sub("", sentence.strip())
    core = LEADING_MARKERS_JA.sub("", core)
    core = LEADING_MARKERS_EN.sub("", core)

    match = _FORGET_JA.search(core)
    if match:
        what = _FORGET_JA_TRAIL.sub("", match.group("what")).strip(" 、,")
        what = _FORGET_JA_LEAD.sub("", what).strip(" 、,")
        what = re.sub(r"(?:って|と)(?:言った|いった|話した)?$", "", what).strip(" 、,")
        if _PRONOUN_ONLY.match(what):
            return _clean(previous) if previous else None
        return what

    match = _FORGET_EN.search(core)
    if match:
        what = match.group("what").strip()
        what = re.sub(r"^(?:i\s+(?:said|told you|mentioned)\s+(?:that\s+)?)", "", what, flags=re.IGNORECASE)
        what = re.sub(
            r"\s+(?:i\s+(?:said|told you|mentioned)(?:\s+(?:before|earlier))?)$",
            "",
            what,
            flags=re.IGNORECASE,
        )
        if _PRONOUN_ONLY.match(what.strip()):
            return _clean(previous) if previous else None
        return _clean(what)

    if _NO_LONGER_JA.search(core):
        text = re.sub(r"もう(?:、)?", "", core, count=1)
        text = re.sub(
            r"(?:ではなくなりました|ではなくなった|じゃなくなった|じゃなくなりました|ではありません|"
            r"じゃありません|ではない|じゃない)(?:です|よ|ね|な)*$",
            "",
            text,
        )
        text = re.sub(r"(?:ていません|ていない|てません|てない)(?:です|よ|ね)*$", "ている", text)
        text = re.sub(r"(?:でいません|でいない)(?:です|よ|ね)*$", "でいる", text)
        return text.strip(" 、,") or None

    match = _NO_LONGER_EN.search(core)
    if match:
        subject = "I'm" if match.group("subj").lower() in ("i'm", "i am") else "I"
        return f"{subject} {match.group('rest').strip()}"

    match = _ANYMORE_EN.search(core)
    if match:
        if match.group("subj"):
            return f"I {match.group('rest').strip()}"
        return f"I'm {match.group('rest2').strip()}"
    return None


def _classify(sentence: str) -> str | None:
    """The rule category of a sentence: the first that matches, in the order of the module docstring."""
    if _CONSTRAINT.search(sentence) and not _CONSTRAINT_EXCLUDE.search(sentence):
        return "constraint"
    reaction = bool(_PRONOUN_REACTION.search(sentence))
    if _PREFERENCE.search(sentence) and not reaction:
        return "preference"
    if _WANT.search(sentence) and not _WANT_EXCLUDE.search(sentence) and not reaction:
        return "preference"
    if _ROUTINE.search(sentence):
        return "routine"
    if _PROFILE.search(sentence):
        return "profile"
    if reaction:
        return None
    if JAPANESE_SCRIPT.search(sentence):
        core = TRAILING_PUNCTUATION.sub("", sentence)
        if len(core) >= 6 and _EVENT_JA.search(core) and not _EVENT_JA_EXCLUDE.search(core):
            return "event"
    elif _EVENT.search(sentence) and not _EVENT_EXCLUDE.search(sentence):
        return "event"
    return None


#: Where one sentence joins two statements: "I'm vegetarian and I live in Berlin", 「ベジタリアンで、大阪に
#: 住んでいます」. A reason (ので、, から、, "because") joins nothing: it belongs to its statement.
_JOIN_EN = _rx(
    r"\s*(?:,\s*|;\s*)?\b(?:and|but|plus|also)\s+(?=(?:[a-z]+\s+){0,3}?(?:i|i'm|i've|i'd|i'll|my|we|we're|our)\b)|"
    r";\s+"
)
_JOIN_JA = re.compile(r"(?<![のかだ][でてしり])(?<=[でてしり])、")
_HIRAGANA_END = re.compile(r"[\u3040-\u309f]$")
#: A part that only makes sense with the other ("...and my daughter is too", "but my husband isn't",
#: "so is my wife", "but my husband hates it"): the sentence is one statement.
_ELLIPTIC = _rx(
    r"\b(?:too|either|not|isn't|aren't|wasn't|doesn't|don't|didn't|does|do|did|is|am|are|was|it|them|that|one)$|"
    r"^(?:so|neither|nor)\b"
)


#: A part about "my X" with no verb of its own.
_NO_PREDICATE = _rx(
    r"^(?:my|our)\b(?!.*\b(?:is|are|was|were|has|have|had|does|did|loves?|likes?|hates?|works?|lives?|"
    r"\w{2,}[^e\W]ed|got|went|can|can't|will|won't)\b)"
)


def _finish_ja(piece: str) -> str:
    """A Japanese part cut at its て-form, as a statement: 「ベジタリアンで」 → 「ベジタリアンです」,
    「大阪に住んでいて」 → 「大阪に住んでいます」."""
    if piece.endswith("で") and not _HIRAGANA_END.search(piece[:-1]):
        return piece[:-1] + "です"
    if piece.endswith(("いて", "いで")):
        return piece[:-1] + "ます"
    return piece


def statement_parts(text: str, *, distinct: bool = False) -> list[tuple[str, str]]:
    """The statements a sentence (or a memory) joins, as ``(words as said, statement)`` pairs.

    "I'm vegetarian and I live in Berlin" → ``("I'm vegetarian", "I'm vegetarian")``, ``("I live in
    Berlin", ...)``; 「ベジタリアンで、大阪に住んでいます」 → ``("ベジタリアンで", "ベジタリアンです")``, ... A text is
    split only where every part is a statement on its own (a rule category fits it), never at a reason
    (ので、, "because") or before an elliptical part ("...and my daughter is too"); with ``distinct``, only
    when the parts are of different kinds (a constraint and a home). Otherwise the text whole.
    """
    body = re.sub(r"\s+", " ", text).strip()
    japanese = bool(JAPANESE_SCRIPT.search(body))
    pieces: list[tuple[str, str]] = []
    for sentence in split_sentences(body):
        sentence = TRAILING_PUNCTUATION.sub("", sentence)
        spans: list[tuple[int, int]] = []
        position = 0
        for match in (_JOIN_JA if japanese else _JOIN_EN).finditer(sentence):
            if spans and _NO_PREDICATE.search(sentence[spans[-1][0] : spans[-1][1]]):
                spans[-1] = (spans[-1][0], match.start())  # "my husband" and "I have two cats" are one
            else:
                spans.append((position, match.start()))
            position = match.end()
        if spans and _NO_PREDICATE.search(sentence[spans[-1][0] : spans[-1][1]]):
            spans[-1] = (spans[-1][0], len(sentence))
        else:
            spans.append((position, len(sentence)))
        for start, end in spans:
            said = sentence[start:end].strip(" 、,")
            last = end == len(sentence)
            pieces.append((said, said if last or not japanese else _finish_ja(said)))
    pieces = [(said, statement) for said, statement in pieces if statement]
    whole = [(body, body)]
    if len(pieces) < 2 or any(_ELLIPTIC.search(statement) for _, statement in pieces):
        return whole
    kinds = [_category(statement, _ANY_DAY) for _, statement in pieces]
    if any(k is None for k in kinds) or (distinct and len(set(kinds)) < len(kinds)):
        return whole
    return pieces


#: Any day: whether a statement is a dated plan does not depend on the day it is read.
_ANY_DAY = date(2000, 1, 3)


#: Dates that come back every year: 「誕生日は3月3日です」 is who the user is, not a plan for next March.
_RECURRING = _rx(
    r"誕生日|記念日|命日|毎年|生まれ|\bbirthday\b|\banniversary\b|\bevery year\b|\bannual(?:ly)?\b|\bborn\b"
)
#: Said of the past: a bare date in it is the last such day, not the next ("I was born on May 5").
_PAST_EN = _rx(r"\b(?:was|were|had|did|got|went|came|born|married|moved|\w{2,}[^e\W]ed)\b")


def _past(body: str, category: str | None) -> bool:
    if category == "event":
        return True
    if JAPANESE_SCRIPT.search(body):
        return bool(_EVENT_JA.search(TRAILING_PUNCTUATION.sub("", body)))
    return bool(_PAST_EN.search(body))


#: The listener: a preference, a habit or an event said of "you" is about the other person or the
#: conversation ("I love your commitment", "I'm always here for you", "I'll send you the link").
_SECOND_PERSON = _rx(r"\byou(?:r|rs|'re|'ll|'ve|'d)?\b|あなた")


def _category(body: str, reference: date) -> str | None:
    """The category of a statement (:func:`_classify`), or ``plan`` for a dated intention.

    A dated plan is a plan; its date is written into the text, so once the day has passed it still says
    what was planned and when: a dated record, not something to throw away. A change that starts then
    ("来月から大阪に住む") keeps its own category.
    """
    category = _classify(body)
    if category in ("preference", "routine", "event") and _SECOND_PERSON.search(body):
        return None
    if category in ("constraint", "event") or not _PLAN_INTENT.search(body):
        return category
    if not is_dated(body, reference):
        return category or ("plan" if _PLAN_UNDATED.search(body) else None)
    if _RECURRING.search(body) and not mentions_relative_date(body):
        return category or "profile"  # a birthday on a calendar date: every year, not a plan
    return (category or "general") if _STARTING.search(body) else "plan"


def _statement(body: str, sentence: str, reference: date, remembered: bool) -> MemoryCandidate | None:
    """The candidate of one statement, or ``None`` when there is nothing durable in it."""
    if JAPANESE_SCRIPT.search(body) is None and not remembered and not _FIRST_PERSON_EN.search(body):
        return None  # statements about the world, not the user
    category = _category(body, reference)
    if category is None and not remembered:
        return None
    if category != "plan":
        passing = _TRANSIENT.search(body) and category not in ("constraint", "profile", "event")
        if passing or (_NOW.search(body) and category not in ("constraint", "preference", "profile")):
            return None
    text = _clean(body)
    if not text:
        return None
    if category != "routine":
        recurring = bool(_RECURRING.search(body))
        text = annotate_dates(
            text,
            reference,
            past=_past(body, category),
            weekdays=category == "plan" and not recurring,
            calendar=not recurring,
        )
    return MemoryCandidate(
        kind=CandidateKind.FACT,
        memory=text[:MAX_MEMORY_CHARS],
        category=category or "general",
        evidence=sentence,
    )


def _rule_candidates_for_sentence(sentence: str, previous: str | None, reference: date) -> list[MemoryCandidate]:
    if len(sentence) > MAX_RULE_SENTENCE_CHARS:
        return []
    forget = _forget_target(sentence, previous)
    if forget is not None and not TRAILING_PUNCTUATION.sub("", forget).strip():
        return []  # nothing left to name what should be forgotten
    if forget is not None:
        if is_question(sentence) and not re.search(r"忘れて|forget", sentence, re.IGNORECASE):
            return []
        return [MemoryCandidate(kind=CandidateKind.FORGET, memory=forget, category="general", evidence=sentence)]
    if is_question(sentence) or _SMALL_TALK.search(LEADING_MARKERS_EN.sub("", sentence.strip())):
        return []

    remembered: str | None = None
    core = TRAILING_PUNCTUATION.sub("", sentence)
    for pattern in (_REMEMBER_EN, _REMEMBER_JA):
        match = pattern.search(core)
        if match:
            remembered = match.group("what").strip(" 、,")
            break
    if remembered is None and _REQUEST.search(core):
        return []
    body = TRAILING_PUNCTUATION.sub("", remembered if remembered is not None else sentence)
    parts = [(body, body)] if remembered is not None else statement_parts(body, distinct=True)
    # the evidence of a statement is what said it: the sentence, or its part when the sentence joins several
    found = [
        _statement(statement, said if len(parts) > 1 else sentence, reference, remembered is not None)
        for said, statement in parts
    ]
    return [c for c in found if c is not None]


def extract_with_rules(turn: Turn) -> list[MemoryCandidate]:
    """Deterministic extraction: Japanese and English patterns, one statement per candidate.

    Only user messages are read, after removing recall blocks. Questions, requests to the assistant,
    thanks and greetings, passing states ("today", "今日") and statements that are not about the user
    produce nothing. A sentence that joins statements of different kinds ("I'm vegetarian and I live in
    Berlin") gives one candidate per statement. Relative dates are made absolute in the text
    (:func:`annotate_dates`, against ``turn.occurred_at``), and a message with a ``name`` gives memories
    that name their speaker (:func:`with_speaker`). Explicit forget requests produce ``kind=forget``
    candidates naming what to forget. Candidates carry importance 0.65, confidence 0.55 and source
    ``rule-fallback``.

    Args:
        turn: The turn.

    Returns:
        Candidates in the order they were said, without duplicates, at most :data:`MAX_CANDIDATES`.
    """
    reference = ensure_utc(turn.occurred_at).date()
    candidates: list[MemoryCandidate] = []
    seen: set[tuple[str, str]] = set()
    for index, message in enumerate(turn.messages):
        if message.role is not MessageRole.USER:
            continue
        previous: str | None = None
        for raw in split_sentences(strip_recalled_memories(message.text)):
            # What is matched (and becomes memory text) has no control characters; the evidence stays
            # exactly as the user wrote it.
            sentence = re.sub(r"\s+", " ", unicodedata.normalize("NFC", CONTROL_CHARACTERS.sub("", raw))).strip()
            found = _rule_candidates_for_sentence(sentence, previous, reference)
            previous = sentence
            for candidate in found:
                # keep the evidence exactly as the user wrote it, where it was said and by whom
                part = candidate.evidence != sentence and candidate.evidence in raw
                candidate = candidate.model_copy(
                    update={
                        "memory": with_speaker(candidate.memory, message.name),
                        "evidence": candidate.evidence if part else raw,
                        "message": index,
                        "speaker": message.name,
                    }
                )
                key = (candidate.kind.value, candidate.memory.casefold())
                if key in seen:
                    continue
                seen.add(key)
                candidates.append(candidate)
                if len(candidates) >= MAX_CANDIDATES:
                    return candidates
    return candidates


def with_speaker(memory: str, speaker: str | None) -> str:
    """``memory`` naming who said it ("Caroline: I just got accepted..."), when the message has a name.

    In a conversation of several people, "I" alone says nothing about whose memory it is; the name makes
    it searchable and keeps two people's statements apart (consolidation compares a speaker's statements
    only with that speaker's). Without a name (one user talking to an agent) the text is left as said.
    """
    if not speaker or memory.startswith(f"{speaker}: "):
        return memory
    return f"{speaker}: {memory}"[:MAX_MEMORY_CHARS]


# --------------------------------------------------------------------------------------------
# The extractor
# --------------------------------------------------------------------------------------------


def _same_script(memory: str, evidence: str) -> bool:
    """False when the evidence is Japanese and the memory is not, or the other way round."""
    if not evidence:
        return True
    return bool(JAPANESE_SCRIPT.search(memory)) == bool(JAPANESE_SCRIPT.search(evidence))


def _user_text(turn: Turn) -> str:
    return "\n".join(strip_recalled_memories(m.text) for m in turn.messages if m.role is MessageRole.USER)


def _to_candidates(output: ExtractionOutput, turn: Turn, source: str = LLM_SOURCE) -> list[MemoryCandidate]:
    """Validate the model's answer against the turn and turn it into candidates.

    Raises:
        ValidationError: An item is written in another script than the user's sentence.
    """
    user_text = _user_text(turn)
    has_japanese = bool(JAPANESE_SCRIPT.search(user_text))
    candidates: list[MemoryCandidate] = []
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(output.memories):
        evidence = item.evidence if item.evidence and item.evidence in user_text else ""
        if evidence and not _same_script(item.memory, evidence):
            raise ValidationError(
                f"memories[{index}].memory", "is not written in the language of the user's sentence"
            )
        if not evidence and not has_japanese and JAPANESE_SCRIPT.search(item.memory):
            raise ValidationError(f"memories[{index}].memory", "is Japanese but the user wrote no Japanese")
        key = (item.kind, item.memory.casefold())
        if key in seen:
            continue
        seen.add(key)
        candidate = _candidate_from(item, evidence, source)
        # where it was said and by whom, as on the rule path
        said_in = turn.user_message_with(evidence)
        if said_in is not None:
            name = turn.messages[said_in].name
            candidate = candidate.model_copy(
                update={"memory": with_speaker(candidate.memory, name), "message": said_in, "speaker": name}
            )
        candidates.append(candidate)
    return candidates[:MAX_CANDIDATES]


def _candidate_from(item: ExtractedMemory, evidence: str, source: str = LLM_SOURCE) -> MemoryCandidate:
    last_day = item.expiry_date()
    return MemoryCandidate(
        kind=CandidateKind(item.kind),
        memory=item.memory,
        category=item.category,
        importance=item.importance,
        confidence=item.confidence,
        expires_at=None if last_day is None else expiry_after(last_day),
        source=source,
        evidence=evidence or item.evidence,
    )


class MemoryExtractor:
    """Turns a conversation turn into memory candidates (LLM path with a rule fallback).

    Args:
        chat_model: The model of the LLM path; ``None`` means rules only.
        clock: Where "now" comes from (plans already expired at that time are dropped).
        max_attempts: Chat model calls per turn while its answers are invalid (at least 1); the
            model's transport retries come on top and are the adapter's business.
        on_transient: ``"fallback"`` (default) uses the rule path when the model stays unavailable;
            ``"raise"`` re-raises the :class:`TransientError` so the turn is redelivered.
        temperature: Sampling temperature of the extraction call; ``None`` (default) sends none, so
            models that take only their own (reasoning models) are asked the same way as others.
    """

    def __init__(
        self,
        *,
        chat_model: ChatModel | None = None,
        clock: Clock | None = None,
        max_attempts: int = 2,
        on_transient: Literal["fallback", "raise"] = "fallback",
        temperature: float | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if on_transient not in ("fallback", "raise"):
            raise ValueError("on_transient must be 'fallback' or 'raise'")
        self._chat_model = chat_model
        self._clock: Clock = clock or SystemClock()
        self._max_attempts = max_attempts
        self._on_transient = on_transient
        self._temperature = temperature

    @property
    def uses_llm(self) -> bool:
        """Whether a chat model is configured."""
        return self._chat_model is not None

    async def extract(self, turn: Turn) -> ExtractionResult:
        """Candidates of one turn.

        Args:
            turn: A validated turn.

        Returns:
            The candidates, the path that produced them and, after a fallback, why.

        Raises:
            TransientError: Only with ``on_transient="raise"``, when the model stays unavailable.
        """
        if self._chat_model is None:
            return ExtractionResult(candidates=self._rules(turn), path="rules")
        if not _user_text(turn).strip():
            return ExtractionResult(candidates=[], path="llm")
        started = time.perf_counter()
        system = build_extraction_system_prompt()
        previous_error: str | None = None
        attempts = 0
        reason: str
        while True:
            attempts += 1
            try:
                output = await self._chat_model.complete_json(
                    system=system,
                    user=build_extraction_user_prompt(turn, previous_error=previous_error),
                    schema=ExtractionOutput,
                    temperature=self._temperature,
                )
                now = ensure_utc(self._clock.now())
                candidates = [
                    c
                    for c in _to_candidates(output, turn, llm_source(self._chat_model.name))
                    if c.expires_at is None or c.expires_at > now
                ]
            except ValidationError as exc:
                previous_error = str(exc)
                logger.warning(
                    "extraction answer for turn %s was invalid (attempt %s of %s): %s",
                    turn.turn_id,
                    attempts,
                    self._max_attempts,
                    exc,
                )
                if attempts < self._max_attempts:
                    continue
                reason = f"invalid answer after {attempts} attempts: {exc}"
                break
            except TransientError as exc:
                if self._on_transient == "raise":
                    raise
                logger.warning("chat model unavailable for turn %s: %s", turn.turn_id, exc)
                reason = f"chat model unavailable: {exc}"
                break
            except PermanentError as exc:
                logger.warning("chat model refused turn %s: %s", turn.turn_id, exc)
                reason = f"chat model error: {exc}"
                break
            else:
                logger.debug(
                    "extracted %s candidates from turn %s with the chat model in %.3fs",
                    len(candidates),
                    turn.turn_id,
                    time.perf_counter() - started,
                )
                return ExtractionResult(candidates=candidates, path="llm", attempts=attempts)
        return ExtractionResult(
            candidates=self._rules(turn), path="rules", fallback_reason=reason, attempts=attempts
        )

    def _rules(self, turn: Turn) -> list[MemoryCandidate]:
        return extract_with_rules(turn)
