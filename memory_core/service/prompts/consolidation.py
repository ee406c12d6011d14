"""The consolidation prompt (LLM path) and the decision schema the chat model must answer with.

The model sees one candidate and the scope's nearest existing memories (hidden characters removed, see
:func:`~memory_core.language.sanitize.strip_invisible`), each under a short id (``m1``, ``m2``, ...; see
:func:`short_ids`) instead of its real id, and answers with one decision: ADD, UPDATE, DELETE or
NONE, the target's short id, the merged text and a reason. Checking that the target id is one of the
ids shown (models do invent ids) is the consolidator's job; this module only guarantees the answer is
well-formed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memory_core.domain.messages import MemoryCandidate
from memory_core.domain.validation import MAX_MEMORY_CHARS, check_length
from memory_core.language.relations import relation_summary
from memory_core.language.sanitize import strip_invisible

__all__ = [
    "ConsolidationDecision",
    "ConsolidationEvent",
    "ShownMemory",
    "build_consolidation_system_prompt",
    "build_consolidation_user_prompt",
    "short_ids",
]

ConsolidationEvent = Literal["ADD", "UPDATE", "DELETE", "NONE"]

_SHORT_ID = re.compile(r"m[1-9][0-9]{0,3}")


def short_ids(memory_ids: Sequence[str]) -> dict[str, str]:
    """Map short ids (``m1``, ``m2``, ... in the given order) to the real memory ids.

    Args:
        memory_ids: Real ids of the memories to show, nearest first.

    Returns:
        ``{"m1": memory_ids[0], "m2": memory_ids[1], ...}``.
    """
    return {f"m{i}": memory_id for i, memory_id in enumerate(memory_ids, start=1)}


@dataclass(frozen=True, slots=True)
class ShownMemory:
    """An existing memory as the model sees it."""

    short_id: str
    memory: str
    category: str


class ConsolidationDecision(BaseModel):
    """The model's decision for one candidate (the structured-output schema)."""

    model_config = ConfigDict(extra="forbid")

    event: ConsolidationEvent = Field(
        description="ADD a new memory, UPDATE an existing one (merge or supersede), DELETE an existing "
        "one, or NONE when the candidate is already known."
    )
    target_id: str | None = Field(
        description="Short id (m1, m2, ...) of the existing memory for UPDATE, DELETE and NONE; null for ADD."
    )
    memory: str | None = Field(
        description="For ADD: the text to store. For UPDATE: the merged text that replaces the target, "
        "in the user's language. Null for DELETE and NONE."
    )
    reason: str = Field(description="One short sentence saying why.")

    @field_validator("target_id")
    @classmethod
    def _target(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        text = value.strip()
        if not _SHORT_ID.fullmatch(text):
            raise ValueError(f"{text[:40]!r} is not a short id like m1")
        return text

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return check_length(value.strip(), MAX_MEMORY_CHARS)

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        text = value.strip()
        if not text:
            raise ValueError("must not be empty")
        return text[:500]

    @model_validator(mode="after")
    def _shape(self) -> ConsolidationDecision:
        if self.event == "ADD":
            if self.memory is None:
                raise ValueError("ADD needs the memory text")
            if self.target_id is not None:
                raise ValueError("ADD must not name a target_id")
        elif self.event == "UPDATE":
            if self.target_id is None or self.memory is None:
                raise ValueError("UPDATE needs target_id and the merged memory text")
        elif self.event == "DELETE" and self.target_id is None:
            raise ValueError("DELETE needs target_id")
        return self


_SYSTEM_PROMPT = """\
You maintain a user's long-term memory. You get one new candidate and the user's existing memories
that are most similar to it, each with a short id (m1, m2, ...). Decide what happens; return JSON that
matches the given schema.

Events:
- ADD: the candidate is new information. target_id null; memory is the text to store.
- UPDATE: the candidate refines, corrects or contradicts one existing memory. target_id is that
  memory's id; memory is the text that replaces it (merge details when both hold, keep only the new
  fact when they contradict).
- DELETE: the candidate is a forget request (kind "forget") and an existing memory states what it
  asks to forget. target_id is that memory's id; memory null.
- NONE: the candidate says nothing new (a restatement or a paraphrase of an existing memory).
  target_id is the memory it repeats; memory null.

Rules:
1. Use only the ids shown. Never invent an id.
2. A restated or paraphrased fact is NONE, never DELETE and never a second copy.
3. A contradiction (negated statement, other day, time or number, another value of an attribute that
   holds one value: "辛い料理が好き" vs "辛い料理が苦手", "月曜10時" vs "金曜10時", "I live in Berlin" vs
   "I moved to Munich") is UPDATE of the old memory; it is never NONE and the two must not both stay.
4. Another value of an attribute that accumulates is ADD: "猫が好き" then "犬が好き", "I like tea" then
   "I like coffee" are two memories. Never UPDATE or DELETE a liking because another one was said.
5. A forget request with no matching memory is NONE with target_id null.
6. Write memory text in the user's language (Japanese stays Japanese), close to the user's words.
7. reason is one short sentence.

The attributes:
"""


def build_consolidation_system_prompt() -> str:
    """The system prompt of the consolidation call (the same for every candidate): the events, the
    rules, and the relation vocabulary the rule path follows too
    (:func:`~memory_core.language.relations.relation_summary`)."""
    return _SYSTEM_PROMPT + relation_summary() + "\n"


def build_consolidation_user_prompt(candidate: MemoryCandidate, existing: Sequence[ShownMemory]) -> str:
    """The user prompt: the candidate and the existing memories, JSON-encoded.

    Existing memories are stored text shown to the model as JSON data: their control, bidi, zero-width
    and other format characters are removed (:func:`~memory_core.language.sanitize.strip_invisible`), but not
    their brackets or markup, because the model may write one back as an UPDATE and stored text must
    not drift with each merge; the candidate is the user's words of this turn and is shown as it is.

    Args:
        candidate: The extracted candidate to decide on.
        existing: The nearest existing memories under their short ids (see :func:`short_ids`).

    Returns:
        The prompt text.
    """
    payload = {
        "candidate": {
            "kind": candidate.kind.value,
            "memory": candidate.memory,
            "category": candidate.category,
        },
        "existing_memories": [
            {
                "id": shown.short_id,
                "memory": strip_invisible(shown.memory),
                "category": strip_invisible(shown.category),
            }
            for shown in existing
        ],
    }
    return "Decide for this candidate (JSON):\n\n" + json.dumps(payload, ensure_ascii=False, indent=1)
