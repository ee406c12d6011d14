"""Extraction that extracts nothing: each message of a turn kept as it was said (``infer=False``).

What a caller adds with ``infer=False`` is stored as given: one fact candidate per user or assistant
message, its text as the memory (line breaks kept; ``\\r\\n`` read as ``\\n``), the message's speaker
and index as its provenance. Consolidation adds it as it is, never merged with or superseding another
memory (:meth:`~memory_core.service.consolidation.consolidator.MemoryConsolidator.consolidate` reads the
``source``), except that a current fact saying the same words is reinforced instead of stored twice;
the decisions are in the history like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.domain.messages import MemoryCandidate, MessageRole, Turn
from memory_core.domain.validation import MAX_MEMORY_CHARS
from memory_core.errors import ValidationError

__all__ = ["VERBATIM_SOURCE", "Verbatim", "VerbatimExtractor"]

#: The ``source`` of a memory stored as given.
VERBATIM_SOURCE = "verbatim"
#: The roles whose messages are kept (system and tool messages are not something said).
_KEPT = frozenset({MessageRole.USER, MessageRole.ASSISTANT})


@dataclass(frozen=True, slots=True)
class Verbatim:
    """The candidates of a turn stored as given (its journal records the path ``verbatim``)."""

    candidates: Sequence[MemoryCandidate]
    path: str = "verbatim"
    fallback_reason: str | None = None


class VerbatimExtractor:
    """One candidate per user or assistant message of a turn, its text unchanged."""

    async def extract(self, turn: Turn) -> Verbatim:
        """The turn's messages as candidates.

        Raises:
            ValidationError: No user or assistant message, or a message longer than a memory may be
                (the field is ``messages.<index>``).
        """
        candidates: list[MemoryCandidate] = []
        for index, message in enumerate(turn.messages):
            if message.role not in _KEPT:
                continue
            text = message.text.replace("\r\n", "\n").replace("\r", "\n").strip()
            if not text:
                continue
            if len(text) > MAX_MEMORY_CHARS:
                raise ValidationError(
                    f"messages.{index}",
                    f"is {len(text)} characters; a memory stored as given holds at most {MAX_MEMORY_CHARS}",
                )
            candidates.append(
                MemoryCandidate(
                    memory=text,
                    source=VERBATIM_SOURCE,
                    evidence=text,
                    message=index,
                    speaker=message.name or message.role.value,
                )
            )
        if not candidates:
            raise ValidationError("messages", "has no user or assistant message to store")
        return Verbatim(tuple(candidates))
