"""Consolidation: how a new candidate changes what is already remembered (ADD / UPDATE / DELETE / NONE),
decided by the chat model when there is one and its answer is sound, by the rules otherwise (see
``docs/rules.md``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np

from memory_core.domain.messages import CandidateKind, Decision, MemoryCandidate, MemoryEvent
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import (
    MemoryKind,
    MemoryRecord,
    Provenance,
    Scope,
)
from memory_core.domain.validation import ensure_utc
from memory_core.errors import PermanentError, TransientError, ValidationError
from memory_core.language.secrets import SECRETS_ONLY, withheld
from memory_core.ports import ChatModel, Embedder, MemoryStore
from memory_core.service.consolidation.decisions import (
    DEFAULT_THRESHOLDS,
    Neighbour,
    SimilarityThresholds,
    Verdict,
    thresholds_for,
)
from memory_core.service.consolidation.features import normalized_statement
from memory_core.service.consolidation.records import RecordChange
from memory_core.service.consolidation.rules import decide_with_rules, find_contradiction
from memory_core.service.extraction.verbatim import VERBATIM_SOURCE
from memory_core.service.neighbours import nearest_memories
from memory_core.service.prompts.consolidation import (
    ConsolidationDecision,
    ShownMemory,
    build_consolidation_system_prompt,
    build_consolidation_user_prompt,
    short_ids,
)

__all__ = ["Consolidation", "MemoryConsolidator"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# The consolidator
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Consolidation:
    """One candidate's decision and how it was reached.

    Attributes:
        decision: The decision; ``after`` is the full record to store (with its embedding).
        path: ``"rules"``, ``"llm"`` or ``"rules-fallback"`` (the model's answer was rejected).
        fallback_reason: Why the model's answer was rejected.
        neighbours: The memories the candidate was compared with.
        model: The chat model that decided (``path == "llm"``), recorded in the history.
    """

    decision: Decision
    path: Literal["rules", "llm", "rules-fallback"]
    fallback_reason: str | None = None
    neighbours: tuple[Neighbour, ...] = field(default_factory=tuple)
    model: str | None = None


@dataclass(frozen=True, slots=True)
class _NewMemory:
    """What a memory an ADD makes is made of: the candidate, its scope, the time of the decision, the
    new id and the vector of the memory's text."""

    candidate: MemoryCandidate
    scope: Scope
    now: datetime
    memory_id: str
    vector: np.ndarray

    def record(self, **fields: Any) -> MemoryRecord:
        """The new memory, with ``fields`` (its text and what its kind sets) added."""
        candidate = self.candidate
        return MemoryRecord(
            id=self.memory_id,
            user_id=self.scope.user_id,
            agent_id=self.scope.agent_id,
            category=candidate.category,
            importance=candidate.importance,
            confidence=candidate.confidence,
            source=candidate.source,
            created_at=self.now,
            updated_at=self.now,
            valid_from=self.now,
            event_at=candidate.event_at,
            event_until=candidate.event_until,
            embedding=[float(x) for x in self.vector],
            **fields,
        )


def _withheld_note(text: str) -> str:
    """What the decision says of the secrets withheld from ``text`` (nothing when there were none)."""
    kinds = withheld(text)
    return f" ({', '.join(kinds)} withheld: secrets are never stored)" if kinds else ""


class MemoryConsolidator:
    """Decides ADD / UPDATE / DELETE / NONE for candidates against a scope's existing memories.

    Args:
        chat_model: The model of the LLM path; ``None`` means rules only.
        thresholds: Per-embedder thresholds (see :data:`DEFAULT_THRESHOLDS` and :func:`thresholds_for`).
        neighbours: How many nearest current memories (active or archived) a candidate is compared with.
        policy: Computes retention of the records it builds (defaults to the design's policy).
        max_attempts: Chat model calls per candidate while its answers are invalid.
        on_transient: ``"fallback"`` uses the rules when the model stays unavailable; ``"raise"``
            re-raises so the turn is redelivered.
    """

    def __init__(
        self,
        *,
        chat_model: ChatModel | None = None,
        thresholds: Mapping[str, SimilarityThresholds] | None = None,
        neighbours: int = 8,
        policy: HumanMemoryPolicy | None = None,
        max_attempts: int = 2,
        on_transient: Literal["fallback", "raise"] = "fallback",
    ) -> None:
        if neighbours < 1:
            raise ValueError("neighbours must be at least 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._chat_model = chat_model
        self._thresholds = dict(DEFAULT_THRESHOLDS if thresholds is None else thresholds)
        self._k = neighbours
        self._policy = policy or HumanMemoryPolicy()
        self._max_attempts = max_attempts
        self._on_transient = on_transient

    def thresholds(self, embedder_name: str) -> SimilarityThresholds:
        """The thresholds used with an embedder."""
        return thresholds_for(embedder_name, self._thresholds)

    async def neighbours(
        self,
        scope: Scope,
        text: str,
        vector: np.ndarray,
        *,
        store: MemoryStore,
        include_archived: bool = False,
        kind: MemoryKind | None = MemoryKind.FACT,
        include_superseded: bool = False,
    ) -> list[Neighbour]:
        """The scope's nearest memories to ``text`` with their cosine similarity (full records).

        Args:
            scope: The scope searched.
            text: The candidate text (keyword leg).
            vector: The candidate's embedding (vector leg and cosine).
            store: The store.
            include_archived: Also archived memories (a forget request must reach them too);
                otherwise only active ones.
            include_superseded: Also what held before something said later (a forget request
                reaches that too); otherwise current ones.
            kind: Which memories: facts (a fact is consolidated with facts), episodes (an episode
                is compared with episodes only for a repeat), or both (``None``: a forget request
                reaches what was only ever said in an episode too).
        """
        return await nearest_memories(
            store, scope, text, vector, k=self._k, kind=kind, include_archived=include_archived,
            include_superseded=include_superseded,
        )

    async def consolidate(
        self,
        candidate: MemoryCandidate,
        *,
        scope: Scope,
        store: MemoryStore,
        embedder: Embedder,
        now: datetime,
        new_memory_id: str,
        turn_id: str | None = None,
        vector: np.ndarray | None = None,
        provenance: Provenance | None = None,
    ) -> Consolidation:
        """Decide for one candidate and build the records the decision writes.

        An episode (``kind=episode``) is added (an event, never merged with another), unless it repeats
        an episode word for word: then that one is reinforced (NONE).

        Args:
            candidate: The candidate.
            scope: The scope it belongs to.
            store: Where the scope's memories are searched.
            embedder: Embeds the candidate (as a passage) unless ``vector`` is given.
            now: The time the decision takes effect (the turn's time, so a replay builds equal records).
            new_memory_id: The id an ADD uses (deterministic in ingestion).
            turn_id: The turn the candidate came from (provenance).
            vector: The candidate's passage embedding, when already computed.
            provenance: Where in the turn the candidate came from (added to the memory's provenance).

        Returns:
            The decision with ``before`` (without embedding) and ``after`` (with embedding).
        """
        now = ensure_utc(now)
        if provenance is None and turn_id:
            provenance = Provenance(turn_id=turn_id)
        if vector is None:
            vector = (await embedder.embed_passages([candidate.memory]))[0]
        vector = np.asarray(vector, dtype=np.float32)
        refused = _refused_for_a_secret(candidate)
        if refused is not None:
            return refused
        if candidate.kind is CandidateKind.EPISODE:
            new = _NewMemory(candidate, scope, now, new_memory_id, vector)
            return Consolidation(decision=await self._episode_decision(new, store, turn_id, provenance), path="rules")
        if candidate.source == VERBATIM_SOURCE:
            new = _NewMemory(candidate, scope, now, new_memory_id, vector)
            return await self._verbatim(new, store, turn_id, provenance)
        forget = candidate.kind is CandidateKind.FORGET
        found = await self.neighbours(
            scope,
            candidate.memory,
            vector,
            store=store,
            # A faded fact is still what the user said: a change supersedes it, a restatement revives
            # it (a conversation replayed from long ago fades as it is read, but stays one memory).
            include_archived=True,
            kind=None if forget else MemoryKind.FACT,
            include_superseded=forget,
        )
        thresholds = self.thresholds(embedder.name)
        path: Literal["rules", "llm", "rules-fallback"] = "rules"
        fallback: str | None = None
        verdict: Verdict | None = None
        if self._chat_model is not None:
            verdict, fallback = await self._decide_llm(candidate, found)
            path = "llm" if verdict is not None else "rules-fallback"
        if verdict is None:
            verdict = decide_with_rules(candidate, found, thresholds)
            if fallback is not None:
                verdict = Verdict(
                    verdict.event,
                    verdict.target,
                    verdict.text,
                    f"{verdict.reason} (rules; model answer rejected: {fallback})",
                    verdict.supersedes,
                )
        verdict, later = _said_before_what_it_replaces(verdict, candidate, now)
        if (
            verdict.text is not None
            and verdict.text != candidate.memory
            and verdict.event is not MemoryEvent.NONE
        ):
            text_vector = (await embedder.embed_passages([verdict.text]))[0]
        else:
            text_vector = vector
        decision = self._build(
            _NewMemory(candidate, scope, now, new_memory_id, text_vector), verdict, turn_id, provenance
        )
        if later is not None and decision.after is not None:
            closed = decision.after.model_copy(update={"valid_until": later.valid_from, "superseded_by": later.id})
            decision = decision.model_copy(update={"after": closed})
        model = self._chat_model.name if path == "llm" and self._chat_model is not None else None
        return Consolidation(
            decision=decision, path=path, fallback_reason=fallback, neighbours=tuple(found), model=model
        )

    async def _verbatim(
        self, new: _NewMemory, store: MemoryStore, turn_id: str | None, provenance: Provenance | None
    ) -> Consolidation:
        """A text stored as given (``infer=False``) is added as it is, never merged with or superseding
        another memory, unless a current fact of the scope says the same words: that one is reinforced."""
        candidate = new.candidate
        found = await self.neighbours(
            new.scope, candidate.memory, new.vector, store=store, include_archived=True, kind=MemoryKind.FACT
        )
        wanted = normalized_statement(candidate.memory)
        same = next((n.record for n in found if normalized_statement(n.record.memory) == wanted), None)
        if same is None:
            verdict = Verdict(MemoryEvent.ADD, None, None, "stored as given (infer=False)")
        else:
            verdict = Verdict(MemoryEvent.NONE, same, None, f"stored as given; repeats memory {same.id}")
        return Consolidation(decision=self._build(new, verdict, turn_id, provenance), path="rules", neighbours=tuple(found))

    async def _episode_decision(
        self, new: _NewMemory, store: MemoryStore, turn_id: str | None, provenance: Provenance | None
    ) -> Decision:
        """An episode is added, unless the scope holds one with the same words: a repeat reinforces it."""
        repeated = await self._repeated_episode(new.candidate, new.scope, new.vector, store)
        if repeated is None:
            return self._episode(new, provenance)
        verdict = Verdict(MemoryEvent.NONE, repeated, None, f"repeats episode {repeated.id}")
        return self._build(new, verdict, turn_id, provenance)

    async def _repeated_episode(
        self, candidate: MemoryCandidate, scope: Scope, vector: np.ndarray, store: MemoryStore
    ) -> MemoryRecord | None:
        """An active episode of the scope that says the same words as ``candidate`` (its speaker's)."""
        wanted = normalized_statement(candidate.memory)
        found = await self.neighbours(scope, candidate.memory, vector, store=store, kind=MemoryKind.EPISODE)
        for neighbour in found:
            if normalized_statement(neighbour.record.memory) == wanted:
                return neighbour.record
        return None

    # -- records ------------------------------------------------------------------------------
    def _episode(self, new: _NewMemory, provenance: Provenance | None) -> Decision:
        """An episode: the user's words, dated, with the speaker; always a new memory."""
        candidate, now = new.candidate, new.now
        speaker = candidate.speaker or "user"
        return self._added(
            new,
            "episode: the user's words" + _withheld_note(candidate.evidence or candidate.memory),
            memory=candidate.memory,
            # The speaker and the date, searchable as words ("Caroline", "May 2023", "2023-05-08").
            summary=f"{speaker} on {now:%Y-%m-%d} ({now.day} {now:%B %Y})",
            kind=MemoryKind.EPISODE,
            provenance=[provenance] if provenance is not None else [],
        )

    def _added(self, new: _NewMemory, reason: str, **fields: Any) -> Decision:
        """The ADD of a new memory (``fields``: what the kind of memory sets itself)."""
        after = self._policy.initial(new.record(**fields), new.now)
        return Decision(
            event=MemoryEvent.ADD,
            candidate=new.candidate,
            memory_id=new.memory_id,
            after=after,
            reason=reason,
        )

    def _build(
        self,
        new: _NewMemory,
        verdict: Verdict,
        turn_id: str | None,
        source: Provenance | None = None,
    ) -> Decision:
        """The decision with the records a verdict writes (``after`` is the full record to store)."""
        candidate, target = new.candidate, verdict.target
        sources = [source] if source is not None else []
        if verdict.event is MemoryEvent.ADD:
            provenance = {"turn_id": turn_id} if turn_id else {}
            return self._added(
                new,
                verdict.reason,
                memory=verdict.text or candidate.memory,
                expires_at=candidate.expires_at,
                metadata={**provenance, "evidence": candidate.evidence} if candidate.evidence else provenance,
                provenance=sources,
            )
        if target is None:  # NONE without a target (a forget request that matched nothing)
            return Decision(event=verdict.event, candidate=candidate, reason=verdict.reason)
        change = RecordChange(
            candidate, verdict, target, max(new.now, target.updated_at), turn_id, new.vector, sources
        )
        if verdict.event is MemoryEvent.DELETE:
            after = change.deleted()
        elif verdict.event is MemoryEvent.UPDATE and candidate.kind is CandidateKind.FORGET:
            after = change.partly_forgotten()
        elif verdict.event is MemoryEvent.UPDATE:
            after = self._policy.apply(change.updated(), change.stamp)
        else:
            after = self._policy.apply(change.rehearsed(), change.stamp)
        return Decision(
            event=verdict.event,
            candidate=candidate,
            memory_id=target.id,
            before=target.without_embedding(),
            after=after,
            reason=verdict.reason,
        )

    # -- LLM path -----------------------------------------------------------------------------
    async def _decide_llm(
        self, candidate: MemoryCandidate, found: Sequence[Neighbour]
    ) -> tuple[Verdict | None, str | None]:
        assert self._chat_model is not None
        ids = short_ids([n.record.id for n in found])
        by_id = {n.record.id: n.record for n in found}
        shown = [
            ShownMemory(short_id=s, memory=by_id[i].memory, category=by_id[i].category)
            for s, i in ids.items()
        ]
        system = build_consolidation_system_prompt()
        user = build_consolidation_user_prompt(candidate, shown)
        problem = "no answer"
        for attempt in range(1, self._max_attempts + 1):
            try:
                answer = await self._chat_model.complete_json(
                    system=system, user=user, schema=ConsolidationDecision
                )
            except ValidationError as exc:
                problem = f"invalid answer: {exc}"
                logger.warning(
                    "consolidation answer invalid (attempt %s of %s): %s", attempt, self._max_attempts, exc
                )
                continue
            except TransientError as exc:
                if self._on_transient == "raise":
                    raise
                logger.warning("chat model unavailable for consolidation: %s", exc)
                return None, f"chat model unavailable: {exc}"
            except PermanentError as exc:
                logger.warning("chat model refused consolidation: %s", exc)
                return None, f"chat model error: {exc}"
            verdict, problem_or_none = _verdict_from_answer(answer, candidate, ids, by_id)
            if verdict is not None:
                return verdict, None
            problem = problem_or_none or "unusable answer"
            logger.warning(
                "consolidation answer rejected (attempt %s of %s): %s", attempt, self._max_attempts, problem
            )
            if problem.startswith("invented id"):
                break  # asking again with the same prompt rarely helps; the rules decide
        return None, problem


def _said_before_what_it_replaces(
    verdict: Verdict, candidate: MemoryCandidate, now: datetime
) -> tuple[Verdict, MemoryRecord | None]:
    """A superseding verdict whose target was said after the candidate (a turn that arrives late:
    validity follows when things were said, not when they arrived) becomes an ADD of the candidate, and
    the target is returned: the new memory held until it."""
    target = verdict.target
    if verdict.event is not MemoryEvent.UPDATE or not verdict.supersedes or target is None:
        return verdict, None
    if target.valid_from is None or target.valid_from <= now:
        return verdict, None
    reason = f"{verdict.reason}; said before memory {target.id}, which holds now"
    return Verdict(MemoryEvent.ADD, None, candidate.memory, reason), target


def _refused_for_a_secret(candidate: MemoryCandidate) -> Consolidation | None:
    """NONE for a candidate that gave a secret (what is left of it still says what the secret is for):
    a fact with a withheld secret in it, or an episode of secrets alone."""
    if candidate.kind is CandidateKind.FORGET:
        return None
    if candidate.category != SECRETS_ONLY and not (candidate.kind is CandidateKind.FACT and withheld(candidate.memory)):
        return None
    note = _withheld_note(candidate.evidence or candidate.memory)
    decision = Decision(event=MemoryEvent.NONE, candidate=candidate, reason=f"not kept: it gave a secret{note}")
    return Consolidation(decision=decision, path="rules")


def _verdict_from_answer(
    answer: ConsolidationDecision,
    candidate: MemoryCandidate,
    ids: Mapping[str, str],
    by_id: Mapping[str, MemoryRecord],
) -> tuple[Verdict | None, str | None]:
    """Check a model answer against what it was shown; a verdict, or why the answer is unusable."""
    target: MemoryRecord | None = None
    if answer.target_id is not None:
        real = ids.get(answer.target_id)
        if real is None:
            return None, f"invented id {answer.target_id!r} (shown: {', '.join(ids) or 'none'})"
        target = by_id[real]
    event = MemoryEvent(answer.event)
    problem = _unfit_event(event, candidate, target)
    if problem is not None:
        return None, problem
    reason = f"model: {answer.reason}"
    if event is MemoryEvent.ADD:
        return Verdict(event, None, answer.memory or candidate.memory, reason), None
    if event is MemoryEvent.NONE:
        return Verdict(event, target, None, reason), None
    assert target is not None
    if event is MemoryEvent.UPDATE:
        supersedes = find_contradiction(target.memory, candidate.memory) is not None
        return Verdict(event, target, answer.memory or candidate.memory, reason, supersedes=supersedes), None
    return Verdict(event, target, None, reason), None


def _unfit_event(event: MemoryEvent, candidate: MemoryCandidate, target: MemoryRecord | None) -> str | None:
    """Why the model's event does not fit the candidate, or ``None``: a forget request is never added or
    merged, a statement deletes nothing, and a contradiction is never NONE."""
    if candidate.kind is CandidateKind.FORGET and event in (MemoryEvent.ADD, MemoryEvent.UPDATE):
        return f"{event.value} for a forget request"
    if candidate.kind is CandidateKind.FACT and event is MemoryEvent.DELETE:
        return "DELETE for a statement that is not a forget request"
    if event is MemoryEvent.NONE and candidate.kind is CandidateKind.FACT and target is not None:
        contradiction = find_contradiction(target.memory, candidate.memory)
        if contradiction is not None:
            return f"NONE for a contradiction ({contradiction})"
    return None
