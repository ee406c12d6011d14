"""Forget requests: what an explicit request to forget ("忘れて", "forget that", "I no longer ...") names."""

from __future__ import annotations

import re

from memory_core.language.sentences import (
    LEADING_MARKERS_EN,
    LEADING_MARKERS_JA,
    TRAILING_PUNCTUATION,
    statement_text,
)

__all__ = ["ended_target", "forget_target"]

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
_FORGET_EN = re.compile(
    r"^(?:(?:please|pls|just|can you|could you|would you|you can|you may|go ahead and)\s+)*forget\s+(?:about\s+)?(?:that\s+|what\s+i\s+said\s+about\s+|"
    r"the\s+fact\s+that\s+)?(?P<what>.*)$",
    re.IGNORECASE,
)
#: Other ways to ask for forgetting: "delete / erase / remove my X (from your memory)", "stop remembering
#: X", "don't keep X"; the object must be the user's own (my..., everything about..., what I said...), so
#: "delete the file" or "remove the meeting" is a request about something else.
_ERASE_EN = re.compile(
    r"^(?:(?:please|pls|just|can you|could you|would you|you can|you may|go ahead and|kindly)\s+)*"
    r"(?:(?:delete|erase|remove|wipe|clear|purge|discard|get rid of|drop)\s+"
    r"(?P<what>(?:all (?:of )?)?(?:my|everything|anything|all|what i (?:said|told you)|whatever i said|the fact that|"
    r"any (?:info|information|memories|mention|record)s?)\b.*?)"
    r"(?:\s+(?:from|in|out of) (?:your |the )?(?:memory|memories|records?|notes?|mind))?"
    r"|(?:stop remembering|don'?t remember|do not remember|don'?t keep|do not keep|don'?t store|do not store|"
    r"no need to remember)\s+(?:that\s+)?(?P<what2>.+?))$",
    re.IGNORECASE,
)
#: 「〜を消して」「〜を削除して」「〜は覚えないで」: the object must be something said or kept about the user.
_ERASE_JA = re.compile(
    r"^(?P<what>.*?(?:のこと|の情報|の話|の記録|のデータ|について|の件|全部|すべて|全て|ぜんぶ|私の|わたしの|僕の|俺の).*?)"
    r"(?:は|を|も)?(?:全部|すべて|全て|ぜんぶ)?(?:消して|削除して|消去して|消しといて|消しておいて)"
    r"|^(?P<what2>.+?)(?:は|を|も)?(?:覚えないで|覚えなくて(?:いい|良い)|記憶しないで|覚えておかなくて(?:いい|良い))"
)
_NO_LONGER_EN = re.compile(r"\b(?P<subj>i|i'm|i am)\s+no longer\s+(?P<rest>.+)$", re.IGNORECASE)
_ANYMORE_EN = re.compile(
    r"\b(?P<subj>i)\s+(?:don't|do not)\s+(?P<rest>.+?)\s+any\s?more\b|"
    r"\b(?P<subj2>i'm|i am)\s+not\s+(?P<rest2>.+?)\s+any\s?more\b",
    re.IGNORECASE,
)
_PRONOUN_ONLY = re.compile(
    r"^(?:それ|これ|あれ|さっきの|今の|その件|この件|that|this|it|everything)?$", re.IGNORECASE
)


def _erased(core: str, previous: str | None) -> str | None:
    """What a request to delete, erase or stop remembering something names, or ``None``."""
    for pattern in (_ERASE_EN, _ERASE_JA):
        match = pattern.search(core)
        if match is None:
            continue
        what = (match.group("what") or match.group("what2") or "").strip(" 、,")
        what = _FORGET_JA_TRAIL.sub("", what).strip(" 、,") if pattern is _ERASE_JA else what
        if _PRONOUN_ONLY.match(what):
            return statement_text(previous) if previous else None
        return statement_text(what) if what else None
    return None


#: Words after what a request names that only make it polite or emphatic ("..., please", "..., forget it").
_POLITE_TAIL = re.compile(
    r"(?:[\s,]+(?:please|pls|thanks|thank you|ok|okay|then|for me|forget it|if you can|will you|would you))+$",
    re.IGNORECASE,
)


def forget_target(sentence: str, previous: str | None) -> str | None:
    """What an explicit forget request asks to forget, or ``None`` when it is not one."""
    target = _forget_target(sentence, previous)
    return None if target is None else _POLITE_TAIL.sub("", target).strip(" 、,") or None


def _forget_target(sentence: str, previous: str | None) -> str | None:
    core = TRAILING_PUNCTUATION.sub("", sentence.strip())
    core = LEADING_MARKERS_JA.sub("", core)
    core = LEADING_MARKERS_EN.sub("", core)

    match = _FORGET_JA.search(core)
    if match:
        what = _FORGET_JA_TRAIL.sub("", match.group("what")).strip(" 、,")
        what = _FORGET_JA_LEAD.sub("", what).strip(" 、,")
        what = re.sub(r"(?:って|と)(?:言った|いった|話した)?$", "", what).strip(" 、,")
        if _PRONOUN_ONLY.match(what):
            return statement_text(previous) if previous else None
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
            return statement_text(previous) if previous else None
        return statement_text(what)

    return _erased(core, previous)


def ended_target(sentence: str) -> str | None:
    """What a statement says no longer holds ("I no longer eat meat" → "I eat meat", 「もうベジタリアンでは
    ない」 → 「ベジタリアン」), or ``None``. Such a statement is kept as a fact when it is one (its negation
    supersedes what it ends); one that says nothing else is a request to forget what it ends."""
    core = TRAILING_PUNCTUATION.sub("", sentence.strip())
    core = LEADING_MARKERS_EN.sub("", LEADING_MARKERS_JA.sub("", core))
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
