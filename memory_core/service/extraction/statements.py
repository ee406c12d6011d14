"""The statements one sentence (or memory) joins: "I'm vegetarian and I live in Berlin" is two."""

from __future__ import annotations

import re
from datetime import date

from memory_core.language.sentences import JAPANESE_SCRIPT, TRAILING_PUNCTUATION, split_sentences
from memory_core.service.extraction.categories import category

__all__ = ["statement_parts"]

#: Any day: whether a statement is a dated plan does not depend on the day it is read.
_ANY_DAY = date(2000, 1, 3)

#: Where one sentence joins two statements: "I'm vegetarian and I live in Berlin", 「ベジタリアンで、大阪に
#: 住んでいます」. A reason (ので、, から、, "because") joins nothing: it belongs to its statement.
_JOIN_EN = re.compile(
    r"\s*(?:,\s*|;\s*)?\b(?:and|but|plus|also)\s+(?=(?:[a-z]+\s+){0,3}?(?:i|i'm|i've|i'd|i'll|my|we|we're|our)\b)|"
    r";\s+",
    re.IGNORECASE,
)
_JOIN_JA = re.compile(r"(?<![のかだ][でてしり])(?<=[でてしり])、")
_HIRAGANA_END = re.compile(r"[\u3040-\u309f]$")
#: A part that only makes sense with the other ("...and my daughter is too", "but my husband isn't",
#: "so is my wife", "but my husband hates it"): the sentence is one statement.
_ELLIPTIC = re.compile(
    r"\b(?:too|either|not|isn't|aren't|wasn't|doesn't|don't|didn't|does|do|did|is|am|are|was|it|them|that|one)$|"
    r"^(?:so|neither|nor)\b",
    re.IGNORECASE,
)
#: A part about "my X" with no verb of its own.
_NO_PREDICATE = re.compile(
    r"^(?:my|our)\b(?!.*\b(?:is|are|was|were|has|have|had|does|did|loves?|likes?|hates?|works?|lives?|"
    r"\w{2,}[^e\W]ed|got|went|can|can't|will|won't)\b)",
    re.IGNORECASE,
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
    pieces = [
        piece
        for sentence in split_sentences(body)
        for piece in _sentence_parts(TRAILING_PUNCTUATION.sub("", sentence), japanese)
        if piece[1]
    ]
    return [(body, body)] if _one_statement(pieces, distinct) else pieces


def _join_spans(sentence: str, japanese: bool) -> list[tuple[int, int]]:
    """Where the parts of a sentence are, cut at its joins; a part about "my X" with no verb of its own
    stays with the next ("my husband and I have two cats")."""
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
    return spans


def _sentence_parts(sentence: str, japanese: bool) -> list[tuple[str, str]]:
    """The ``(words as said, statement)`` parts of one sentence (a Japanese part cut at its て-form is
    finished as a statement, except the last)."""
    parts: list[tuple[str, str]] = []
    for start, end in _join_spans(sentence, japanese):
        said = sentence[start:end].strip(" 、,")
        last = end == len(sentence)
        parts.append((said, said if last or not japanese else _finish_ja(said)))
    return parts


def _one_statement(pieces: list[tuple[str, str]], distinct: bool) -> bool:
    """Whether the parts stay one statement: fewer than two, an elliptical part, a part no rule category
    fits, or (``distinct``) two parts of the same kind."""
    if len(pieces) < 2 or any(_ELLIPTIC.search(statement) for _, statement in pieces):
        return True
    kinds = [category(statement, _ANY_DAY) for _, statement in pieces]
    return any(k is None for k in kinds) or (distinct and len(set(kinds)) < len(kinds))
