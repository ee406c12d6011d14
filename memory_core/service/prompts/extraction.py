"""The extraction prompt, its output schema and the recall-block stripper shared by both paths.

The chat model is asked for durable facts about the user only (preferences, constraints, profile,
recurring needs, dated plans) and for explicit forget requests, written in the language the user
used. Memory text that the agent provider injected from recall (a block between its recall markers,
or an older block under :data:`RECALL_HEADER`) is removed from every message before either path sees
it, so a recalled memory is never extracted again as if the user had said it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory_core.domain.messages import MessageRole, Turn, TurnMessage
from memory_core.domain.validation import MAX_MEMORY_CHARS, check_length, ensure_utc
from memory_core.language.sanitize import RECALL_END_PREFIX, RECALL_START, recall_end_marker

__all__ = [
    "CATEGORIES",
    "MAX_EXTRACTED_MEMORIES",
    "RECALL_HEADER",
    "Category",
    "ExtractedMemory",
    "ExtractionOutput",
    "build_extraction_system_prompt",
    "build_extraction_user_prompt",
    "strip_recalled_memories",
]

#: The heading the agent provider shows inside its marked recall block (and the one older versions
#: injected recalled memories under, without markers).
RECALL_HEADER = "## Relevant memories"

#: The categories extraction assigns, with what each one holds.
CATEGORIES: dict[str, str] = {
    "preference": "likes, dislikes and preferred options (food, seats, styles, tools)",
    "constraint": "things the user cannot or must not do or have (allergies, diet, accessibility, budget limits)",
    "profile": "who the user is (name, home, work, family, languages)",
    "routine": "recurring needs and habits (every Monday, usually, always)",
    "plan": "dated plans and commitments (a trip next week, a meeting on Friday)",
    "event": "things that happened to the user (got a new job, ran a marathon, visited Italy last year)",
    "general": "any other durable fact the user stated about themselves",
}

Category = Literal["preference", "constraint", "profile", "routine", "plan", "event", "general"]

#: The most memories one answer may contain; more is treated as an invalid answer.
MAX_EXTRACTED_MEMORIES = 50

_HEADER_LINE = re.compile(r"^\s{0,3}#{1,6}\s")
_RECALL_LINE = re.compile(r"^\s{0,3}#{1,6}\s*relevant memories\s*:?\s*$", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•・]|\d{1,3}[.)])\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")


def strip_recalled_memories(text: str) -> str:
    """Remove blocks of recalled memories that the agent provider injected into ``text``.

    **Marked blocks** (what the provider injects): everything from a start marker
    ``<<memory-core:recalled:NONCE>>`` to the end marker with the same nonce
    ``<<memory-core:end:NONCE>>`` is removed, markers included, whatever heading or language the
    block shows; text before and after it is kept (a block on lines of its own takes its line break
    with it). A start marker without its end marker (a truncated block) removes the rest of its
    paragraph only, up to the next blank line; an end marker without a start removes its paragraph up
    to the marker. Stored memory text cannot contain a marker (see
    :func:`~memory_core.language.sanitize.sanitize_memory_text`), so a memory cannot end a block early.

    **Heading blocks** (what older versions injected, without markers): a block starts at a heading
    line reading ``Relevant memories`` (any heading level, any case, for example
    :data:`RECALL_HEADER`). It runs to the next heading, to the first blank line that is not followed
    by another list item (``-``, ``*``, ``1.`` ...), or, once it had list items, to the first line that
    is neither a list item nor indented. So a bulleted list survives blank lines between its items, and
    the user's own words after the list are kept.

    Args:
        text: A message text.

    Returns:
        The text without recall blocks, surrounding blank lines trimmed (the input itself when there
        is none).
    """
    return _strip_heading_blocks(_strip_marked_blocks(text))


#: A start marker with its matching end marker is the provider's block wherever it sits; a lone start
#: marker counts (a block cut short) only on a line of its own, as the provider writes it, so a marker
#: quoted inside prose stays the user's text.
_START_LINE = re.compile(r"[ \t]*" + RECALL_START.pattern + r"[ \t]*$", re.MULTILINE)
#: An end marker whose start was cut off counts only on a line of its own and with a nonce of the
#: provider's own form (16 hex digits), so a hand-written ``<<memory-core:end:x>>`` never takes the
#: user's paragraph with it.
_ORPHAN_END_LINE = re.compile(
    r"^[ \t]*" + re.escape(RECALL_END_PREFIX) + r"[0-9a-f]{16}>>[ \t]*$",
    re.MULTILINE,
)


def _strip_marked_blocks(text: str) -> str:
    if "memory-core:" not in text:
        return text
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    pieces: list[str] = []
    pos = 0
    search_from = 0
    found = False
    while (start := RECALL_START.search(text, search_from)) is not None:
        own_line = start.start() == 0 or text[start.start() - 1] == "\n"
        end_marker = recall_end_marker(start.group(1))
        end = text.find(end_marker, start.end())
        if end >= 0:
            stop = end + len(end_marker)
        elif own_line and _START_LINE.match(text, start.start()):
            brk = _PARAGRAPH_BREAK.search(text, start.end())  # cut short: this paragraph only
            stop = len(text) if brk is None else brk.start()
        else:  # a marker quoted in the user's own words
            search_from = start.end()
            continue
        found = True
        pieces.append(text[pos : start.start()])
        pos = search_from = stop
        if own_line and text.startswith("\n", pos):
            pos += 1  # the block's lines go with it
            search_from = pos
    pieces.append(text[pos:])
    result = "".join(pieces)
    kept: list[str] = []
    last = 0
    for orphan in _ORPHAN_END_LINE.finditer(result):  # an end marker whose start was cut off
        found = True
        begin = last
        for brk in _PARAGRAPH_BREAK.finditer(result, last, orphan.start()):
            begin = brk.end()
        kept.append(result[last:begin])
        last = orphan.end() + (1 if result.startswith("\n", orphan.end()) else 0)
    kept.append(result[last:])
    return "".join(kept).strip("\n") if found else text


def _strip_heading_blocks(text: str) -> str:
    lines = text.splitlines()
    if not any(_RECALL_LINE.match(line) for line in lines):
        return text
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not _RECALL_LINE.match(line):
            kept.append(line)
            i += 1
            continue
        i += 1  # drop the header itself
        listed = False
        while i < len(lines):
            current = lines[i]
            if _HEADER_LINE.match(current):
                break
            if not current.strip():
                j = i
                while j < len(lines) and not lines[j].strip():
                    j += 1
                if j < len(lines) and _LIST_ITEM.match(lines[j]):
                    i = j
                    continue
                break
            if _LIST_ITEM.match(current):
                listed = True
            elif listed and not current[:1].isspace():
                break  # the user's own words right after the list
            i += 1
    return "\n".join(kept).strip("\n")


class ExtractedMemory(BaseModel):
    """One memory the model found (the structured-output schema of a single item)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["fact", "forget"] = Field(
        description="'fact' for a durable statement to remember; 'forget' when the user asks to forget "
        "something or says it is no longer true (then 'memory' names what to forget)."
    )
    memory: str = Field(
        description="One self-contained statement in the user's own language and close to the user's "
        "words (Japanese stays Japanese)."
    )
    category: Category = Field(description="One of: " + ", ".join(CATEGORIES) + ".")
    importance: float = Field(description="0.0-1.0: how much this matters for future conversations.")
    confidence: float = Field(description="0.0-1.0: how sure it is that the user stated this.")
    expires_at: str | None = Field(
        description="Only for a fact that stops being true on a known day: that last day, as YYYY-MM-DD; "
        "otherwise null (plans and events keep their date in the memory text)."
    )
    evidence: str = Field(description="The user's sentence this comes from, copied verbatim.")

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        text = value.strip()
        if not text:
            raise ValueError("must not be empty")
        check_length(text, MAX_MEMORY_CHARS)
        if _CONTROL.search(text):
            raise ValueError("must not contain control characters")
        return text

    @field_validator("importance", "confidence")
    @classmethod
    def _unit(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{value!r} is outside 0.0-1.0")
        return float(value)

    @field_validator("expires_at")
    @classmethod
    def _expiry(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        text = value.strip()
        try:
            parsed = date.fromisoformat(text[:10])
        except ValueError:
            raise ValueError(f"{text!r} is not an ISO date (YYYY-MM-DD)") from None
        return parsed.isoformat()

    @field_validator("evidence")
    @classmethod
    def _evidence(cls, value: str) -> str:
        return value.strip()

    def expiry_date(self) -> date | None:
        """``expires_at`` as a date (the last day the memory is relevant), or ``None``."""
        return None if self.expires_at is None else date.fromisoformat(self.expires_at)


class ExtractionOutput(BaseModel):
    """The whole answer of the extraction prompt."""

    model_config = ConfigDict(extra="forbid")

    memories: list[ExtractedMemory] = Field(
        description="Durable facts and forget requests; an empty list when there is nothing to remember."
    )

    @field_validator("memories")
    @classmethod
    def _count(cls, value: list[ExtractedMemory]) -> list[ExtractedMemory]:
        if len(value) > MAX_EXTRACTED_MEMORIES:
            raise ValueError(f"has {len(value)} items; the maximum is {MAX_EXTRACTED_MEMORIES}")
        return value


_SYSTEM_PROMPT = """\
You extract long-term memories about the USER from one conversation turn.

Return JSON that matches the given schema: {{"memories": [...]}}.

What to extract (only durable facts the USER stated or explicitly confirmed about themselves):
{categories}

Rules:
1. Only the user's own words count. Never extract something only the assistant said, suggested or
   assumed, unless the user clearly confirmed it (then write it as the user's fact).
2. Ignore questions, requests to the assistant, greetings, thanks and small talk. Ignore moods and
   states that only hold right now ("today I'm tired").
3. Text between <<memory-core:recalled:...>> and <<memory-core:end:...>> markers, or under a
   "Relevant memories" heading, was recalled from memory by the system; it was not said in this turn.
   Never extract it again.
4. Write each memory in the language the user used, close to the user's words. Never translate:
   Japanese stays Japanese, English stays English. One fact per memory; a short, self-contained
   sentence from the user's point of view.
5. A request to forget something ("忘れて", "forget that ...") or a statement that something is no
   longer true ("もう〜ではない", "I no longer ...", "I don't ... anymore") is kind "forget"; its
   "memory" states the old fact to forget, in the user's language (for "I no longer eat meat" write
   "I eat meat").
6. Relative dates ("yesterday", "next week", 「先月」) are computed from the reference date below and
   the absolute date is written in the memory after the user's words ("I moved to Munich last month
   (October 2026)", 「来週（2026年12月7日の週）京都に行きます」). Plans with dates are category "plan",
   things that happened are "event"; both keep expires_at null (a past plan is still a dated record).
   Set expires_at (YYYY-MM-DD, the last day it is relevant) only for a fact that stops being true on a
   known day.
7. importance: 0.9 for safety constraints (allergies, medical), 0.7-0.8 for strong preferences and
   profile facts, 0.5-0.6 for minor preferences and plans. confidence: how clearly the user said it.
8. "evidence" is the user's sentence copied verbatim.
9. If there is nothing durable to remember, return {{"memories": []}}.
"""


def build_extraction_system_prompt() -> str:
    """The system prompt of the extraction call (the same for every turn)."""
    categories = "\n".join(f"- {name}: {doc}" for name, doc in CATEGORIES.items())
    return _SYSTEM_PROMPT.format(categories=categories)


def _conversation(messages: Sequence[TurnMessage]) -> list[dict[str, str]]:
    shown: list[dict[str, str]] = []
    for message in messages:
        if message.role not in (MessageRole.USER, MessageRole.ASSISTANT):
            continue
        text = strip_recalled_memories(message.text).strip()
        if text:
            shown.append({"role": message.role.value, "text": text})
    return shown


def build_extraction_user_prompt(turn: Turn, *, previous_error: str | None = None) -> str:
    """The user prompt for one turn: reference date plus the conversation as a JSON array.

    System and tool messages are left out; recall blocks are stripped from every message. Messages
    are JSON-encoded so that nothing a user writes can pose as an instruction boundary.

    Args:
        turn: The turn to extract from.
        previous_error: Why the previous answer was rejected, when asking again.

    Returns:
        The prompt text.
    """
    occurred: datetime = ensure_utc(turn.occurred_at)
    conversation = json.dumps(_conversation(turn.messages), ensure_ascii=False, indent=1)
    parts = [
        f"Reference date (when the turn happened, UTC): {occurred.date().isoformat()} ({occurred:%A})",
        'Conversation (JSON; extract only from messages with role "user"):',
        conversation,
    ]
    if previous_error:
        parts.append(
            "Your previous answer was rejected: "
            + previous_error
            + "\nAnswer again with JSON that follows the schema and the rules."
        )
    return "\n\n".join(parts)
