"""Chatter: what is said in a conversation without saying anything to remember (greetings, thanks,
acknowledgements, reactions, farewells, questions, log and tool lines, heartbeats), Japanese and English."""

from __future__ import annotations

import re

from memory_core.language.sentences import (
    JAPANESE_SCRIPT,
    LEADING_MARKERS_EN,
    TRAILING_PUNCTUATION,
    is_question,
    split_sentences,
)

__all__ = ["SMALL_TALK", "is_chatter", "is_chatter_sentence"]

#: Thanks and greetings: a sentence that opens with them (or, in Japanese, thanks anywhere) is the
#: conversation's manners, not a statement ("I'm so thankful to have them" is a statement).
SMALL_TALK = re.compile(
    r"ありがと|^(?:どうも|こんにちは|こんばんは|おはよう|はじめまして|よろしく)|"
    r"^(?:thanks?\b|thank you|thx\b|ty\b|hi\b|hello\b|hey\b|ok\b|okay\b|good (?:morning|evening|night)\b)|"
    r"\bthank you\b",
    re.IGNORECASE,
)
#: A sentence that only acknowledges, agrees or reacts ("ok", "sure", "got it", 「了解」, 「なるほど」).
_ACKNOWLEDGEMENT = re.compile(
    r"^(?:ok(?:ay)?|k|kk|sure|yes|yeah|yep|yup|no|nope|nah|right|cool|nice|great|awesome|perfect|"
    r"fine|alright|all right|got it|gotcha|understood|sounds good|makes sense|i see|noted|will do|"
    r"no problem|np|never ?mind|nvm|lol|haha+|hmm+|wow|oh|ah|bye|goodbye|see you|see ya|cheers|"
    r"good job|well done|you'?re welcome|welcome|go on|continue|next|done|same|me too|agreed|exactly|"
    r"はい|いいえ|うん|ううん|ええ|いや|了解|りょうかい|承知(?:しました)?|わかった|分かった|わかりました|分かりました|"
    r"なるほど|そうなんだ|そうですね|そうだね|いいね|いいですね|オッケー|おけ|OK|大丈夫|だいじょうぶ|さようなら|"
    r"またね|おやすみ|お疲れ(?:様)?(?:です)?|すごい|すごいね|へえ|へー|ふーん|よし|続けて|次|"
    r"うーん|う〜ん|ううん|うむ|ねえ|ねぇ|えっと|えーと|あのー?|まあ|w+|ｗ+|草|笑|\(笑\)|（笑）)"
    r"(?:[\s,、!！.。~〜ー]*(?:ok(?:ay)?|thanks?|thank you|です|ね|よ|!|！))*[\s~〜ー…!！]*$",
    re.IGNORECASE,
)
#: What a reaction calls what the other person said or showed ("That's awesome", "What a great idea").
_REACTION_WORDS = (
    r"great|awesome|amazing|cool|nice|lovely|wonderful|fantastic|incredible|beautiful|fun|exciting|sweet|"
    r"cute|impressive|inspiring|brilliant|neat|adorable|gorgeous|stunning|terrific|special|tough|hard|rough|"
    r"sad|scary|crazy|wild|interesting|awful|terrible|horrible|rad|epic|insane|perfect|fascinating|touching|"
    r"heartwarming|powerful|moving|relaxing|peaceful|intense|unbelievable|stressful|overwhelming|"
    r"a blast|a bummer|a shame|a relief|"
    r"an? (?:great|awesome|amazing|cool|nice|lovely|wonderful|fantastic|incredible|beautiful|fun|exciting|"
    r"special|tough|rough|good) (?:idea|time|experience|thing|moment|pic|photo|picture|shot|view|spot|place|"
    r"way|choice|plan|trip|day|feeling|achievement|accomplishment|goal|news|story|start|step|one)"
)
_DEGREE = r"(?:(?:so|really|super|very|totally|pretty|absolutely|just|truly|quite|such|extra)\s+)*"
#: A sentence that only reacts to what the other person said: praise, sympathy, congratulations,
#: encouragement ("That's so cool, Jon!", "Sounds amazing", "Congrats!", "Keep it up!", 「それは素敵だね」,
#: 「おめでとう！」). It says nothing about the one who says it.
_REACTION = re.compile(
    rf"^(?:(?:that|this|it|which|all this|all that)(?:'s|’s| is| was| sounds| looks| seems| must (?:have been|be)"
    rf"| must've been)|sounds|looks|seems|what|how|so|such|you(?:'re| are) {_DEGREE}(?:so |a )?)\s+"
    rf"{_DEGREE}(?:{_REACTION_WORDS})\b"
    r"(?:\s+(?:for you|to hear|to see|of you|indeed|too|then|though))*(?:\s*,\s*\w+)?$|"
    r"^(?:congrat(?:s|ulations)|good for you|way to go|good luck|best of luck|well deserved|"
    r"glad to hear (?:it|that)|i'?m (?:so |really )?(?:happy|glad|sorry|proud) (?:for you|to hear (?:it|that)))"
    r"(?:\s*,\s*\w+)?$|"
    r"^(?:oh wow|oh no|nice one|love it|love that|i love (?:it|that)|so true|totally|for sure|definitely|"
    r"absolutely|no way|same here|tell me more|keep it up|keep going|you got this|go for it|you rock|"
    r"amazing|incredible|brilliant|wonderful|lovely|beautiful)(?:\s*,\s*\w+)?$|"
    r"^(?:それは|それ|これ|めっちゃ|とても|すごく|本当に|ほんとに|ほんと)*"
    r"(?:すごい|凄い|すてき|素敵|素晴らしい|すばらしい|楽しそう|おいしそう|美味しそう|かわいい|可愛い|いいな(?:あ|ぁ)?|"
    r"うらやましい|羨ましい|よかった|良かった|残念|大変|さすが|おめでとう(?:ございます)?|がんばって|頑張って|"
    r"お大事に)(?:だった|でした|だ|です)?(?:ね|な|よ|ねえ|ですね|だね|じゃん)*$",
    re.IGNORECASE,
)
#: Gratitude and farewells, however long ("Your support means a lot to me", "I really appreciate your
#: help", "Thanks for always being there", "Take care!", "Talk to you soon", 「気をつけてね」,
#: 「本当に助かりました」): the conversation's manners.
_MANNERS = re.compile(
    r"^(?:(?:your|ur) (?:\w+ ){0,3}(?:means?|meant) (?:so much|a lot|the world|everything)(?: to me)?|"
    r"(?:that|this|it) (?:really )?means (?:so much|a lot|the world|everything)(?: to me)?|"
    r"i (?:really |truly )?appreciate (?:it|that|this|you|your \w+(?: \w+){0,3})|"
    r"(?:you'?re|you are) (?:the best|a star|a lifesaver|so kind|so sweet|too kind|very kind)|"
    r"(?:thanks|thank you) (?:so much |a lot )?for (?:\w+ ){0,5}\w+|"
    r"i'?ll (?:definitely )?(?:keep|bear) (?:that|it|this) in mind|"
    r"take care|talk (?:to you )?(?:soon|later)|catch you later|see (?:you|ya)(?: soon| later| then| around)?|"
    r"have a (?:great|good|nice|lovely) (?:day|one|night|evening|week|weekend)|likewise|you too|"
    r"(?:本当に|ほんとに|とても)?(?:助かりました|助かった|助かります|感謝しています|感謝してます|"
    r"気をつけて(?:ね)?|じゃあね|ではまた|また今度|またよろしく(?:ね|お願いします)?))(?:\s*,\s*\w+)?$",
    re.IGNORECASE,
)
#: An interjection before a reaction ("Wow, that's cool!", "Aww, that's adorable!").
_INTERJECTION = re.compile(r"^(?:wow|oh|aw+|ooh|omg|yay|whoa|haha+|hey)\W+", re.IGNORECASE)
#: Remarks on the weather ("hot today, huh", 「今日も暑いね」): the conversation's manners.
_WEATHER = re.compile(
    r"^(?:今日|きょう|今朝|最近)?(?:も|は)?(?:暑|寒|涼し|暖か|蒸し暑)い(?:ね|な|よね|ですね|です)?$|^いい天気(?:だ|です)?(?:ね|な)?$|"
    r"^(?:(?:it'?s|so|such) )?(?:hot|cold|warm|chilly|humid|nice weather|lovely weather)(?: (?:today|out(?:side)?|again))?"
    r"(?:,? (?:huh|isn'?t it|right))?$",
    re.IGNORECASE,
)
#: A task for the assistant about a text it is given ("Summarize this", 「この文章を要約して」): what the
#: user asks done, not what they say about themselves.
_TASK = re.compile(
    r"^(?:please |pls |can you |could you )?(?:summari[sz]e|translate|proofread|rewrite|reformat|paraphrase)"
    r"\s+(?:this|that|the|it|these|those|my|following|below|into|to)\b|"
    r"^(?:この|その|次の|以下の|下の|上の)?(?:文章|テキスト|メール|コード|段落|文|内容|記事)を?"
    r"(?:要約|翻訳|校正|添削|整形|まとめ|直|英訳|和訳)",
    re.IGNORECASE,
)
#: A line a program wrote, not a person: log lines (a timestamp or level first), stack traces, JSON or
#: a tool call, a heartbeat.
_MACHINE_LINE = re.compile(
    r"^\s*(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\]?|"
    r"\[?(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\]?[\s:]|"
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|at [\w.$]+\([\w.]+:\d+\)|"
    r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning|Fault)(?::\s|$)|"
    r"[{\[]\s*[\"{\[]|</?[a-z][\w-]*(?:\s[^>]*)?>|\$ |>>> |"
    r"(?:ping|pong|heartbeat|keep-?alive|healthcheck|health check)\s*$)",
    re.IGNORECASE,
)
#: Nothing but symbols, emoji and punctuation.
_NO_WORDS = re.compile(r"^[\W_]*$")


def is_chatter_sentence(sentence: str) -> bool:
    """Whether one sentence says nothing to remember: manners (greetings, thanks, gratitude, farewells,
    the weather), an acknowledgement, a reaction to what the other said, a question, a task about a
    given text, or symbols alone."""
    core = TRAILING_PUNCTUATION.sub("", LEADING_MARKERS_EN.sub("", sentence.strip())).strip()
    if not core or _NO_WORDS.match(core):
        return True
    if is_question(sentence):
        return True
    bare = LEADING_MARKERS_EN.sub("", sentence.strip())
    short = len(core) <= 16 if JAPANESE_SCRIPT.search(core) else len(core.split()) <= 6
    whole = TRAILING_PUNCTUATION.sub("", sentence.strip())
    if _WEATHER.match(core) or _TASK.match(bare):
        return True
    said = _INTERJECTION.sub("", core).strip()
    if _REACTION.match(said) or _MANNERS.match(said):
        return True
    return bool(SMALL_TALK.search(bare) and short) or any(_ACKNOWLEDGEMENT.match(t) for t in (core, whole))


def is_chatter(text: str) -> bool:
    """Whether a message says nothing to remember: every line a program wrote, or every sentence
    chatter (:func:`is_chatter_sentence`). A message with one statement among its chatter is not."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return True
    if all(_MACHINE_LINE.match(line) for line in lines):
        return True
    return all(is_chatter_sentence(sentence) for sentence in split_sentences(text))
