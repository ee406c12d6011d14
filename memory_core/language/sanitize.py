"""Memory text made safe to show a language model, and the markers around a recalled block.

Stored memory text is data about the user, but it reaches a model next to real instructions: the agent
provider injects recalled memories into the conversation, and consolidation shows existing memories
to the chat model. :func:`sanitize_memory_text` is the one place that turns stored text into inert,
single-line data before any of that happens:

* control characters are removed (line breaks and tabs become spaces, whitespace runs one space);
* invisible and format characters are removed: bidi controls (U+202A-U+202E, U+2066-U+2069, U+200E,
  U+200F, U+061C), zero-width characters (U+200B-U+200D, U+2060, U+FEFF), the soft hyphen, tag
  characters and every other character of Unicode category ``Cf``. What forms an emoji or a name is
  kept, and only that: a zero-width joiner between two emoji (as in 👩‍💻), an emoji variation selector
  (U+FE0E, U+FE0F) after a symbol or a keycap base, an ideographic variation selector after a CJK
  ideograph (葛󠄀, as names are written), and the tag sequence of a subdivision flag (🏴 ... U+E007F).
  Every other variation selector goes (one after each letter would be a hidden channel to the model);
* markup that could open or close a section is neutralised: leading heading (``#``), quote (``>``)
  and list markers of every line are dropped, code fences (```` ``` ````, ``~~~``) shrink to one
  character, and ``< > [ ]`` become their fullwidth forms (``＜ ＞ ［ ］``), so no tag, marker or
  metadata prefix can be spelled;
* text shaped like a recall marker (``memory-core:recalled`` / ``memory-core:end``) is removed.

Japanese text stays as it was stored (no NFKC: it would turn the fullwidth brackets back into ASCII and
rewrite fullwidth punctuation). :func:`quote_memory` wraps the result in JSON double quotes, so a model
sees one quoted string per memory, with the provider's own metadata outside the quotes.

The provider puts its block between :func:`recall_start_marker` and :func:`recall_end_marker` lines
that carry a nonce made per run (:func:`new_recall_nonce`); extraction removes exactly the text between
a start marker and the end marker with the same nonce (:data:`RECALL_START`, :data:`RECALL_END`),
whatever heading or language the block uses.
"""

from __future__ import annotations

import json
import re
import secrets
import unicodedata

__all__ = [
    "RECALL_END",
    "RECALL_END_PREFIX",
    "RECALL_START",
    "RECALL_START_PREFIX",
    "new_recall_nonce",
    "quote_memory",
    "recall_end_marker",
    "recall_start_marker",
    "sanitize_memory_text",
    "strip_invisible",
]

#: How the line that opens a recalled block starts (the nonce and ``>>`` follow).
RECALL_START_PREFIX = "<<memory-core:recalled:"
#: How the line that closes a recalled block starts (the same nonce and ``>>`` follow).
RECALL_END_PREFIX = "<<memory-core:end:"

_NONCE = r"[A-Za-z0-9_-]{1,64}"
_NONCE_RE = re.compile(_NONCE)
#: A start marker anywhere in a text; group 1 is its nonce.
RECALL_START = re.compile(re.escape(RECALL_START_PREFIX) + f"({_NONCE})>>")
#: An end marker anywhere in a text; group 1 is its nonce.
RECALL_END = re.compile(re.escape(RECALL_END_PREFIX) + f"({_NONCE})>>")

# Marker-shaped text inside a memory, in any spelling of its brackets, with or without a nonce.
_MARKER_LIKE = re.compile(
    r"[<＜«‹〈《]*\s*memory[-_\s]?core\s*[:：]\s*(?:recalled|end)(?:\s*[:：]\s*[\w-]*)?\s*[>＞»›〉》]*",
    re.IGNORECASE,
)
# Markup at the start of a line: a heading, quote or list marker (repeated: "> ## - text").
_LEADING_MARKUP = re.compile(r"^(?:\s*(?:#+(?=\s|$)|>|[-*+•](?=\s)|\d{1,3}[.)](?=\s)))+\s*")
_FENCE = re.compile(r"(`|~)\1{2,}")
_BRACKETS = str.maketrans({"<": "＜", ">": "＞", "[": "［", "]": "］"})
# Invisible characters outside category Cf: the combining grapheme joiner, Hangul fillers, Khmer
# inherent vowels and Mongolian free variation selectors.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0")
_ZWJ = "\u200d"
_VS16 = "\ufe0f"


#: What an emoji variation selector may follow besides a symbol: keycap bases and two punctuation emoji.
_EMOJI_BASES = frozenset("#*0123456789\u203c\u2049")
#: The black flag that a subdivision flag's tag sequence follows, and the tag characters.
_BLACK_FLAG = "\U0001f3f4"
_TAG_END = "\U000e007f"


def _is_variation_selector(char: str) -> bool:
    code = ord(char)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def _forms_a_variant(previous: str, selector: str) -> bool:
    """Whether ``selector`` after ``previous`` chooses how that character is drawn (and so is kept):
    emoji or text presentation of a symbol, or an ideographic variant of a CJK ideograph."""
    if not previous:
        return False
    if selector in ("\ufe0e", _VS16):
        return unicodedata.category(previous) in ("So", "Sk", "Sm") or previous in _EMOJI_BASES
    if ord(selector) >= 0xE0100:
        return unicodedata.name(previous, "").startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH"))
    return False


def _flag_tags(line: str, start: int) -> int:
    """The length of the subdivision-flag tag sequence (tag letters, then U+E007F) at ``start``; 0 if none."""
    end = start
    while end < len(line) and 0xE0020 <= ord(line[end]) <= 0xE007E:
        end += 1
    return end + 1 - start if end > start and end < len(line) and line[end] == _TAG_END else 0


def _emoji_joint(previous: str, following: str) -> bool:
    """True when a zero-width joiner sits between two emoji (``previous`` may be a modifier or VS16)."""
    if not previous or not following:
        return False
    before = unicodedata.category(previous) in ("So", "Sk") or previous == _VS16
    return before and unicodedata.category(following) == "So"


def _visible(line: str) -> str:
    """``line`` without control, format and invisible characters (tabs and the like become spaces)."""
    kept: list[str] = []
    skip = 0
    for index, char in enumerate(line):
        if skip:
            skip -= 1
            continue
        category = unicodedata.category(char)
        if category == "Cc" or category in ("Zl", "Zp"):
            if char.isspace():
                kept.append(" ")
            continue
        if char == _ZWJ:
            following = line[index + 1] if index + 1 < len(line) else ""
            if _emoji_joint(kept[-1] if kept else "", following):
                kept.append(char)
            continue
        if category in ("Cf", "Cs") or char in _INVISIBLE:
            continue
        if _is_variation_selector(char):
            if _forms_a_variant(kept[-1] if kept else "", char):
                kept.append(char)
            continue
        kept.append(char)
        if char == _BLACK_FLAG and (tags := _flag_tags(line, index + 1)):
            kept.append(line[index + 1 : index + 1 + tags])
            skip = tags
    return "".join(kept)


def strip_invisible(text: str) -> str:
    """``text`` on one line without control, bidi, zero-width and other format characters, and nothing
    else changed.

    For prompts that carry stored text as JSON data (the consolidation prompt), where markup cannot open
    a section but hidden characters could still hide or reorder words, and where the model may write the
    text back (an UPDATE), so brackets and markers must survive as stored.
    """
    return " ".join(_visible(text).split())


def sanitize_memory_text(text: str) -> str:
    """Stored memory text as one line of inert data for a prompt.

    See the module documentation for what is removed and neutralised. The result has no line breaks,
    no control, bidi, zero-width or other format characters, no ASCII ``< > [ ]``, no code fence and no
    recall marker, and starts with no heading, quote or list marker; letters of every script (kana and
    kanji included) are kept as they are.

    Args:
        text: A memory text (or any other stored text, such as a category).

    Returns:
        The sanitised text (empty when nothing visible is left).
    """
    clean = _sanitize_once(text)
    while (again := _sanitize_once(clean)) != clean:  # what one pass removed can uncover more (rare)
        clean = again
    return clean


def _sanitize_once(text: str) -> str:
    lines: list[str] = []
    for raw in text.splitlines():
        line = _LEADING_MARKUP.sub("", _MARKER_LIKE.sub(" ", _visible(raw)))
        if line.strip():
            lines.append(line)
    # Once more on the joined line: a marker split over two lines, and what its removal uncovered.
    joined = _LEADING_MARKUP.sub("", " ".join(_MARKER_LIKE.sub(" ", " ".join(lines)).split()))
    return _FENCE.sub(r"\1", joined).translate(_BRACKETS)


def quote_memory(text: str, *, sanitized: bool = False) -> str:
    """``text`` sanitised and inside JSON double quotes (inner quotes and backslashes escaped).

    Example: ``He said "hi"`` becomes ``"He said \\"hi\\""``. ``sanitized``: ``text`` is already what
    :func:`sanitize_memory_text` returned (it is not sanitised again).
    """
    return json.dumps(text if sanitized else sanitize_memory_text(text), ensure_ascii=False)


def new_recall_nonce() -> str:
    """A fresh random nonce (16 hex digits) for the markers of one injected block."""
    return secrets.token_hex(8)


def _checked(nonce: str) -> str:
    if not _NONCE_RE.fullmatch(nonce):
        raise ValueError(f"a recall nonce is 1-64 letters, digits, _ or -; got {nonce[:70]!r}")
    return nonce


def recall_start_marker(nonce: str) -> str:
    """The line that opens a recalled block: ``<<memory-core:recalled:NONCE>>``.

    Raises:
        ValueError: ``nonce`` is not 1-64 letters, digits, ``_`` or ``-``.
    """
    return f"{RECALL_START_PREFIX}{_checked(nonce)}>>"


def recall_end_marker(nonce: str) -> str:
    """The line that closes a recalled block: ``<<memory-core:end:NONCE>>``.

    Raises:
        ValueError: ``nonce`` is not 1-64 letters, digits, ``_`` or ``-``.
    """
    return f"{RECALL_END_PREFIX}{_checked(nonce)}>>"
