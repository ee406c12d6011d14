"""Forget requests: what an explicit request to forget ("忘れて", "forget that", "I no longer ...") names."""

from __future__ import annotations

import re

from memory_core.language.sentences import (
    LEADING_MARKERS_EN,
    LEADING_MARKERS_JA,
    TRAILING_PUNCTUATION,
    statement_text,
)

__all__ = ["forget_target"]

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
_NO_LONGER_EN = re.compile(r"\b(?P<subj>i|i'm|i am)\s+no longer\s+(?P<rest>.+)$", re.IGNORECASE)
_ANYMORE_EN = re.compile(
    r"\b(?P<subj>i)\s+(?:don't|do not)\s+(?P<rest>.+?)\s+any\s?more\b|"
    r"\b(?P<subj2>i'm|i am)\s+not\s+(?P<rest2>.+?)\s+any\s?more\b",
    re.IGNORECASE,
)
_PRONOUN_ONLY = re.compile(
    r"^(?:それ|これ|あれ|さっきの|今の|その件|この件|that|this|it|everything)?$", re.IGNORECASE
)


def forget_target(sentence: str, previous: str | None) -> str | None:
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
