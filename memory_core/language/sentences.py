"""Sentences: a message split into sentences, the words a sentence opens with, questions."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "JAPANESE_SCRIPT",
    "LEADING_MARKERS_EN",
    "LEADING_MARKERS_JA",
    "TRAILING_PUNCTUATION",
    "is_question",
    "join_sentences",
    "split_sentences",
    "statement_text",
    "strip_discourse_markers",
]

#: A kana or CJK ideograph: a text with one is written in Japanese (for the rules; the keyword index
#: uses :data:`~memory_core.language.text.JAPANESE_RUN`).
JAPANESE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
#: What closes a sentence (and the quotes and brackets around it).
TRAILING_PUNCTUATION = re.compile(r"[\s。．.！!？?、,」』）)\"'”]+$")
#: English words a sentence opens with that say nothing of their own ("Well,", "Actually", "Ugh,").
LEADING_MARKERS_EN = re.compile(
    r"^(?:(?:well|so|and|but|also|actually|oh|btw|by the way|just so you know|fyi|anyway|anyways|ok|okay|yeah|"
    r"yes|ugh|omg|oh my god|oh my gosh|wow|whoa|haha|hahaha|lol|hmm|hm|honestly|guess what|oh no|yay|aw|aww|"
    r"gosh|phew|ah|um|uh|so yeah|you know what)"
    # "no" only with its comma: "No more yoga for me" says no more yoga
    r"\s*[,!]?\s+|no\s*[,!]\s*)+",
    re.IGNORECASE,
)
#: Japanese discourse markers followed by a comma or a space (「ちなみに、」).
LEADING_MARKERS_JA = re.compile(
    r"^(?:あと|それと|ちなみに|実は|じつは|えっと|えーと|あの|そういえば|ところで|なお|ただ|まあ|でも|やっぱり|やはり)"
    r"(?:、|,|\s)+"
)
#: Discourse markers that need no comma: 「やっぱり和室がいいです」.
_LEADING_MARKERS_JA_BARE = re.compile(
    r"^(?:(?:やっぱり|やっぱ|やはり|実は|じつは|ちなみに)(?=[\u3040-\u30ff\u4e00-\u9fff])|でも(?=[\u30a0-\u30ff\u4e00-\u9fff]))"
)
_I_THINK_EN = re.compile(r"^i (?:think|guess|suppose|believe|feel like)(?: that)?\s+", re.IGNORECASE)

_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "st", "prof", "jr", "sr", "vs", "etc", "e.g", "i.e", "approx", "no"}
)
_QUESTION_JA_END = (
    "ですか",
    "ますか",
    "でしょうか",
    "ませんか",
    "のか",
    "んか",
    "だろうか",
)
#: 「かな」「かしら」 close a question (「どこがいいかな」, 「コーヒーが好きかな」), except after a quoted title,
#: where they soften an answer (「今一番好きな映画は『パーフェクトデイズ』かな」).
_WONDERING_JA_END = ("かな", "かしら")
_QUESTION_WORD_JA = re.compile(r"何|なに|なん|どこ|いつ|誰|だれ|どう|どれ|どの|どんな|なぜ|どうして|いくら|いくつ")
_QUESTION_EN_START = re.compile(
    r"^(?:do|does|did|can|could|would|will|should|shall|is|are|am|was|were|have|has|may|might)\s+"
    r"(?:you|we|i|it|there|they|he|she)\b",
    re.IGNORECASE,
)


def _is_abbreviation(before: str) -> bool:
    match = re.search(r"([A-Za-z][A-Za-z.]*)$", before)
    if not match:
        return False
    word = match.group(1).rstrip(".").lower()
    return word in _ABBREVIATIONS or len(word) == 1 or "." in word


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping each sentence's closing punctuation.

    Sentences end at ``。！？!?``, at a newline, and at ``.`` followed by whitespace or the end of the
    text. A ``.`` between digits (``3.5``) never ends a sentence, nor does one after a single letter
    or a common abbreviation (``Dr.``, ``e.g.``). Fenced code blocks and quoted lines (``> ...``) are
    dropped: they are not the user's own statements.

    Args:
        text: A message text.

    Returns:
        Non-empty, stripped sentences in order.
    """
    text = _FENCED_CODE.sub("\n", text)
    sentences: list[str] = []
    for line in text.splitlines():
        if not line.lstrip().startswith(">"):
            sentences.extend(_line_sentences(line))
    return sentences


def _line_sentences(line: str) -> list[str]:
    """The sentences of one line (see :func:`split_sentences`)."""
    sentences: list[str] = []
    start = 0
    i = 0
    while i < len(line):
        if _ends_sentence(line, start, i):
            # Keep runs of closing punctuation ("?!", "。」") with the sentence.
            while i + 1 < len(line) and line[i + 1] in "。！？!?.」』）)\"'”":
                i += 1
            piece = line[start : i + 1].strip()
            if piece:
                sentences.append(piece)
            start = i + 1
        i += 1
    rest = line[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def _ends_sentence(line: str, start: int, i: int) -> bool:
    """Whether the character at ``i`` ends the sentence that began at ``start``."""
    ch = line[i]
    if ch in "。！？!?":
        return True
    if ch == "." and (i + 1 == len(line) or line[i + 1].isspace()):
        return not _is_abbreviation(line[start:i])
    return False


def join_sentences(sentences: Sequence[str]) -> str:
    """Sentences as one text again (a space after each that does not end in Japanese punctuation)."""
    return "".join(s if s.endswith(("。", "！", "？")) else s + " " for s in sentences).strip()


def strip_discourse_markers(text: str) -> str:
    """``text`` without the words it opens with that say nothing of their own ("Actually, so", "Ugh,",
    "I think", 「ちなみに、」, 「やっぱり」)."""
    text = text.strip()
    previous = None
    while previous != text:
        previous = text
        text = LEADING_MARKERS_JA.sub("", text)
        text = _LEADING_MARKERS_JA_BARE.sub("", text)
        text = LEADING_MARKERS_EN.sub("", text)
        text = _I_THINK_EN.sub("", text)
    return text


def is_question(sentence: str) -> bool:
    """Whether a sentence asks something: a question mark, a Japanese question ending (ですか; かな with a question word) or
    an English question's opening ("Do you", "Can I")."""
    stripped = sentence.rstrip()
    if stripped.endswith(("?", "？")):
        return True
    core = TRAILING_PUNCTUATION.sub("", stripped)
    if core.endswith(_QUESTION_JA_END):
        return True
    if core.endswith(_WONDERING_JA_END):  # after a quoted title it softens an answer: 「『三体』かな」
        return not core[: -len("かな")].endswith(("』", "」")) or bool(_QUESTION_WORD_JA.search(core))
    return bool(_QUESTION_EN_START.match(LEADING_MARKERS_EN.sub("", core)))


def statement_text(sentence: str) -> str:
    """A sentence as a statement to remember: discourse markers and closing punctuation removed, the first
    letter (and a lone "i") in capitals."""
    text = TRAILING_PUNCTUATION.sub("", strip_discourse_markers(sentence)).strip()
    if text[:1].islower() and not JAPANESE_SCRIPT.search(text[:1]):
        text = text[0].upper() + text[1:]
    if re.match(r"^i(?:\b|')", text):
        text = "I" + text[1:]
    return text
