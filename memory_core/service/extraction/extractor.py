"""Memory extraction: from one conversation turn to memory candidates, with the chat model when there
is one, by the rules (:func:`~memory_core.service.extraction.rules.extract_with_rules`) otherwise or when
its answer is unusable (see ``docs/rules.md``)."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from memory_core.domain.messages import CandidateKind, MemoryCandidate, MessageRole, Turn
from memory_core.domain.validation import ensure_utc
from memory_core.errors import PermanentError, TransientError, ValidationError
from memory_core.language.event_time import event_time
from memory_core.language.sentences import JAPANESE_SCRIPT
from memory_core.ports import ChatModel, Clock, SystemClock
from memory_core.service.extraction.rules import MAX_CANDIDATES, extract_with_rules, with_speaker
from memory_core.service.prompts.extraction import (
    ExtractedMemory,
    ExtractionOutput,
    build_extraction_system_prompt,
    build_extraction_user_prompt,
    strip_recalled_memories,
)

__all__ = [
    "LLM_SOURCE",
    "ExtractionResult",
    "MemoryExtractor",
    "expiry_after",
    "llm_source",
]

logger = logging.getLogger(__name__)

#: The ``source`` of what a chat model extracted (followed by the model's name, see :func:`llm_source`).
LLM_SOURCE = "llm"


def llm_source(model: str) -> str:
    """The ``source`` of what a chat model produced: ``llm.<model>`` ("llm.gpt-4.1-mini"), the name
    reduced to the characters a source may hold (so "llama3:8b" is "llm.llama3-8b")."""
    return f"{LLM_SOURCE}.{re.sub(r'[^A-Za-z0-9_.-]', '-', model)}"[:64]


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What extraction found in one turn and how.

    Attributes:
        candidates: Facts and forget requests, in the order they were said.
        path: ``"llm"`` when the chat model's answer was used, ``"rules"`` otherwise.
        fallback_reason: Why the rule path was used although a chat model is configured (``None``
            when the LLM path succeeded or no model is configured).
        attempts: Chat model calls made (0 on the pure rule path).
    """

    candidates: list[MemoryCandidate]
    path: Literal["llm", "rules"]
    fallback_reason: str | None = None
    attempts: int = 0


def expiry_after(last_day: date) -> datetime:
    """When a memory about ``last_day`` expires: the end of that day (UTC) plus one day of grace."""
    return datetime(last_day.year, last_day.month, last_day.day, tzinfo=UTC) + timedelta(days=2)


# --------------------------------------------------------------------------------------------
# The extractor
# --------------------------------------------------------------------------------------------


def _same_script(memory: str, evidence: str) -> bool:
    """False when the evidence is Japanese and the memory is not, or the other way round."""
    if not evidence:
        return True
    return bool(JAPANESE_SCRIPT.search(memory)) == bool(JAPANESE_SCRIPT.search(evidence))


def _user_text(turn: Turn) -> str:
    return "\n".join(strip_recalled_memories(m.text) for m in turn.messages if m.role is MessageRole.USER)


def _to_candidates(output: ExtractionOutput, turn: Turn, source: str = LLM_SOURCE) -> list[MemoryCandidate]:
    """Validate the model's answer against the turn and turn it into candidates.

    Raises:
        ValidationError: An item is written in another script than the user's sentence.
    """
    user_text = _user_text(turn)
    has_japanese = bool(JAPANESE_SCRIPT.search(user_text))
    candidates: list[MemoryCandidate] = []
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(output.memories):
        evidence = item.evidence if item.evidence and item.evidence in user_text else ""
        if evidence and not _same_script(item.memory, evidence):
            raise ValidationError(
                f"memories[{index}].memory", "is not written in the language of the user's sentence"
            )
        if not evidence and not has_japanese and JAPANESE_SCRIPT.search(item.memory):
            raise ValidationError(f"memories[{index}].memory", "is Japanese but the user wrote no Japanese")
        key = (item.kind, item.memory.casefold())
        if key in seen:
            continue
        seen.add(key)
        candidate = _candidate_from(item, evidence, source)
        if candidate.kind is CandidateKind.FACT:
            # the time the user's words state (else the model's text): the rule path's resolver
            when = event_time(evidence or item.memory, turn.occurred_at)
            if when is not None:
                candidate = candidate.model_copy(update={"event_at": when.start, "event_until": when.end})
        # where it was said and by whom, as on the rule path
        said_in = turn.user_message_with(evidence)
        if said_in is not None:
            name = turn.messages[said_in].name
            candidate = candidate.model_copy(
                update={"memory": with_speaker(candidate.memory, name), "message": said_in, "speaker": name}
            )
        candidates.append(candidate)
    return candidates[:MAX_CANDIDATES]


def _candidate_from(item: ExtractedMemory, evidence: str, source: str = LLM_SOURCE) -> MemoryCandidate:
    last_day = item.expiry_date()
    return MemoryCandidate(
        kind=CandidateKind(item.kind),
        memory=item.memory,
        category=item.category,
        importance=item.importance,
        confidence=item.confidence,
        expires_at=None if last_day is None else expiry_after(last_day),
        source=source,
        evidence=evidence or item.evidence,
    )


class MemoryExtractor:
    """Turns a conversation turn into memory candidates (LLM path with a rule fallback).

    Args:
        chat_model: The model of the LLM path; ``None`` means rules only.
        clock: Where "now" comes from (plans already expired at that time are dropped).
        max_attempts: Chat model calls per turn while its answers are invalid (at least 1); the
            model's transport retries come on top and are the adapter's business.
        on_transient: ``"fallback"`` (default) uses the rule path when the model stays unavailable;
            ``"raise"`` re-raises the :class:`TransientError` so the turn is redelivered.
        temperature: Sampling temperature of the extraction call; ``None`` (default) sends none, so
            models that take only their own (reasoning models) are asked the same way as others.
    """

    def __init__(
        self,
        *,
        chat_model: ChatModel | None = None,
        clock: Clock | None = None,
        max_attempts: int = 2,
        on_transient: Literal["fallback", "raise"] = "fallback",
        temperature: float | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if on_transient not in ("fallback", "raise"):
            raise ValueError("on_transient must be 'fallback' or 'raise'")
        self._chat_model = chat_model
        self._clock: Clock = clock or SystemClock()
        self._max_attempts = max_attempts
        self._on_transient = on_transient
        self._temperature = temperature

    @property
    def uses_llm(self) -> bool:
        """Whether a chat model is configured."""
        return self._chat_model is not None

    async def extract(self, turn: Turn) -> ExtractionResult:
        """Candidates of one turn.

        Args:
            turn: A validated turn.

        Returns:
            The candidates, the path that produced them and, after a fallback, why.

        Raises:
            TransientError: Only with ``on_transient="raise"``, when the model stays unavailable.
        """
        if self._chat_model is None:
            return ExtractionResult(candidates=extract_with_rules(turn), path="rules")
        if not _user_text(turn).strip():
            return ExtractionResult(candidates=[], path="llm")
        started = time.perf_counter()
        system = build_extraction_system_prompt()
        previous_error: str | None = None
        attempts = 0
        reason: str
        while True:
            attempts += 1
            try:
                output = await self._chat_model.complete_json(
                    system=system,
                    user=build_extraction_user_prompt(turn, previous_error=previous_error),
                    schema=ExtractionOutput,
                    temperature=self._temperature,
                )
                now = ensure_utc(self._clock.now())
                candidates = [
                    c
                    for c in _to_candidates(output, turn, llm_source(self._chat_model.name))
                    if c.expires_at is None or c.expires_at > now
                ]
            except ValidationError as exc:
                previous_error = str(exc)
                logger.warning(
                    "extraction answer for turn %s was invalid (attempt %s of %s): %s",
                    turn.turn_id,
                    attempts,
                    self._max_attempts,
                    exc,
                )
                if attempts < self._max_attempts:
                    continue
                reason = f"invalid answer after {attempts} attempts: {exc}"
                break
            except TransientError as exc:
                if self._on_transient == "raise":
                    raise
                logger.warning("chat model unavailable for turn %s: %s", turn.turn_id, exc)
                reason = f"chat model unavailable: {exc}"
                break
            except PermanentError as exc:
                logger.warning("chat model refused turn %s: %s", turn.turn_id, exc)
                reason = f"chat model error: {exc}"
                break
            else:
                logger.debug(
                    "extracted %s candidates from turn %s with the chat model in %.3fs",
                    len(candidates),
                    turn.turn_id,
                    time.perf_counter() - started,
                )
                return ExtractionResult(candidates=candidates, path="llm", attempts=attempts)
        return ExtractionResult(
            candidates=extract_with_rules(turn), path="rules", fallback_reason=reason, attempts=attempts
        )
