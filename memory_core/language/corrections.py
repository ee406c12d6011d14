"""Corrections: a statement that says an earlier one named the wrong value ("Sorry, I meant Tuesday, not
Thursday", 「さっきの間違い、大阪じゃなくて京都です」), and the value it puts in place of which."""

from __future__ import annotations

import re

__all__ = ["CORRECTION", "corrected", "correction_pair", "says_correction"]

#: The category of a candidate that corrects a memory (consolidation applies it to the memory it corrects).
CORRECTION = "correction"

#: What says so on its own ("my mistake", "I got that wrong", 「間違えました」, 「訂正」).
_STRONG_WORDS = (
    r"\b(?:my mistake|my bad|correction|typo|i meant|i got (?:that|it) wrong|scratch that|i misspoke|"
    r"i said \w+(?: \w+)? but|actually,? it'?s|wait,? no)\b|間違|訂正|違った|違いました|言い間違"
)
_STRONG = re.compile(_STRONG_WORDS, re.IGNORECASE)
#: What says a statement with a right and a wrong value corrects an earlier one (an apology is enough
#: there: "Sorry, Tuesday, not Thursday").
_MARKER = re.compile(_STRONG_WORDS + r"|\b(?:sorry|oops|wait)\b|ごめん|すみません", re.IGNORECASE)
#: An apology or a hesitation ("sorry", 「ごめん」) says so only when what follows restates a value ("sorry,
#: it's Elmwood", 「ごめん、ベルギー出身だった」), not in "sorry for the late reply".
_SOFT = re.compile(
    r"^\W*(?:sorry|oops|wait)\b[\s,.!:;-]*(?:it'?s|it is|i meant|actually|no\b|the \w+ is)|"
    r"^\W*(?:ごめん|すみません|あ、)[^。]*(?:でした|だった|じゃなくて|ではなく)",
    re.IGNORECASE,
)
_WORDS = r"([\w'.:-]+(?: [\w'.:-]+)?)"
_BEFORE_EN = r"(?:^|.*\b(?:meant|it'?s|is|was|on|at|in|to)\s+|.*,\s*)"
_PREP = r"(?:on |at |in |to )?"
#: "X, not Y", "not Y but X", "X instead of Y", "X rather than Y"; 「YじゃなくてX」, 「YではなくX」.
_PAIRS: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(rf"\bnot {_PREP}{_WORDS},? but {_PREP}{_WORDS}\b", re.I), 2, 1),
    (re.compile(rf"{_BEFORE_EN}{_WORDS}, not {_PREP}{_WORDS}\b", re.I), 1, 2),
    (re.compile(rf"{_BEFORE_EN}{_WORDS} (?:instead of|rather than) {_WORDS}\b", re.I), 1, 2),
    (
        re.compile(
            r"(?:^|[はがをにでも、,\s])([^\s、。,はがをにでもの]{1,12})(?:じゃなくて|ではなくて|ではなく)[、,]?\s*"
            r"([^\s、。,]{1,12}?)(?:です|でした|だよ|だった|だ|に|で|が|を|。|、|$)"
        ),
        2,
        1,
    ),
)


#: An absolute date written after a relative one ("(3 December 2026)", "（2026年12月7日の週）").
_DATE_NOTE = re.compile(r"\s*\((?:week of |weekend of )?[^()]*\b\d{4}\)|（[^（）]*\d{4}年[^（）]*）")


_DAY_OR_DATE = re.compile(
    r"\d|曜|月|日|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:january|february|march|april|may|june|july|"
    r"august|september|october|november|december)\b",
    re.IGNORECASE,
)


def says_correction(text: str) -> bool:
    """Whether ``text`` says that something said before was wrong (a correction whose old value it may
    not repeat: "My mistake, it's at 5 pm", 「訂正します、火曜日でした」)."""
    return bool(_STRONG.search(text) or _SOFT.search(text))


def correction_pair(text: str) -> tuple[str, str] | None:
    """``(new value, old value)`` of a correction, or ``None`` when the text is not one."""
    if not _MARKER.search(text):
        return None
    for pattern, new, old in _PAIRS:
        match = pattern.search(text)
        if match:
            right, wrong = match.group(new).strip(), match.group(old).strip()
            if right and wrong and right.casefold() != wrong.casefold():
                return right, wrong
    return None


def corrected(memory: str, pair: tuple[str, str]) -> str | None:
    """``memory`` with the wrong value of ``pair`` replaced by the right one, or ``None`` when it does
    not say the wrong value."""
    right, wrong = pair
    if wrong.isascii():
        pattern = re.compile(rf"(?<![\w-]){re.escape(wrong)}(?![\w-])", re.IGNORECASE)
    else:
        pattern = re.compile(re.escape(wrong))
    if not pattern.search(memory):
        return None
    text = pattern.sub(lambda m: right[:1].upper() + right[1:] if m.group()[:1].isupper() else right, memory, count=1)
    # A corrected day or date: the absolute date written after the wrong one goes with it.
    return _DATE_NOTE.sub("", text).strip() if _DAY_OR_DATE.search(wrong) else text
