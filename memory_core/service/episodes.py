"""Episodes: each user message kept in the user's own words, where a fact came from in its turn, and
forgetting inside episodes (a forgotten fact, or part of one, leaves the episodes that state it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np

from memory_core.domain.messages import (
    CandidateKind,
    Decision,
    HistoryEntry,
    MemoryCandidate,
    MemoryEvent,
    MessageRole,
    Turn,
)
from memory_core.domain.records import (
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    Provenance,
    forgotten_record,
    status_note,
)
from memory_core.domain.validation import CONTROL_CHARACTERS, MAX_MEMORY_CHARS
from memory_core.language.chatter import is_chatter
from memory_core.language.event_time import event_time
from memory_core.language.secrets import SECRETS_ONLY, withheld, without_secrets
from memory_core.ports import Embedder, HistoryStore, MemoryStore
from memory_core.service.consolidation.decisions import SimilarityThresholds
from memory_core.service.consolidation.features import normalized_statement, speaker_of, split_speaker
from memory_core.service.consolidation.forget import redact_sentences, statement_clauses
from memory_core.service.consolidation.supersession import Supersession, superseded_episodes
from memory_core.service.earlier_values import (
    earlier_values_of,
    forget_earlier_values,
    keep_earlier_value,
    superseded_in,
)
from memory_core.service.extraction.categories import is_recurring
from memory_core.service.journal import episode_id_for, record_once
from memory_core.service.neighbours import nearest_memories
from memory_core.service.prompts.extraction import strip_recalled_memories

__all__ = [
    "EpisodePolicy",
    "catch_up_redactions",
    "close_superseded_episodes",
    "episode_candidates",
    "forget_in_episodes",
    "forgotten_by",
    "forgotten_parts",
    "forgotten_words",
    "provenance_of",
    "redact_episodes",
    "supersede_with_episode",
    "withhold_forgotten",
]


@dataclass(frozen=True, slots=True)
class EpisodePolicy:
    """Whether each user message is also kept as an episode, and how important episodes start out.

    Attributes:
        enabled: Keep episodes (``MEMORY_EPISODES``).
        importance: Their importance (``MEMORY_EPISODE_IMPORTANCE``); below a fact's, so a fact
            outranks the episode it came from and episodes fade sooner under the same policy.
    """

    enabled: bool = True
    importance: float = 0.3


def episode_candidates(
    turn: Turn, facts: Sequence[MemoryCandidate], policy: EpisodePolicy
) -> list[MemoryCandidate]:
    """The episodes of a turn: each user message, in the user's own words, with its speaker.

    Recalled-memory blocks are left out (they are not the user's words), and so is a message that asked
    to forget something (keeping its words would keep what was to be forgotten) and chatter: greetings,
    thanks, acknowledgements, questions, log and tool lines (:func:`~memory_core.language.chatter.is_chatter`).
    """
    if not policy.enabled:
        return []
    forgetting = {c.message for c in facts if c.kind is CandidateKind.FORGET}
    episodes = []
    for index, message in enumerate(turn.messages):
        if message.role is not MessageRole.USER or index in forgetting:
            continue
        # The user's words as stored memory text: control characters (other than line breaks and tabs)
        # cannot be stored, so they are dropped rather than losing the episode.
        said = CONTROL_CHARACTERS.sub("", strip_recalled_memories(message.text)).strip()
        # A sentence that gave a secret is not kept (the secret itself is withheld already): what is
        # left of it would still say what the secret is for. The decision notes it.
        text = without_secrets(said)
        if not said or (text and is_chatter(text)) or (not text and not withheld(said)):
            continue
        memory = f"{message.name}: {text or said}" if message.name else text or said
        # an episode's event time is the one it states (when it was said is its valid_from)
        when = event_time(text, turn.occurred_at, calendar=not is_recurring(text)) if text else None
        episodes.append(
            MemoryCandidate(
                kind=CandidateKind.EPISODE,
                memory=memory[:MAX_MEMORY_CHARS],
                category="episode" if text else SECRETS_ONLY,
                importance=policy.importance,
                confidence=1.0,
                source="episode",
                event_at=None if when is None else when.start,
                event_until=None if when is None else when.end,
                evidence=said,
                message=index,
                speaker=message.name,
            )
        )
    return episodes


def provenance_of(turn: Turn, candidate: MemoryCandidate) -> Provenance:
    """Where in ``turn`` a candidate came from: its message and the span of its evidence there."""
    index = candidate.message
    if candidate.evidence and not (
        index < len(turn.messages) and candidate.evidence in turn.messages[index].text
    ):  # a model's candidate: find the message that says it
        found = turn.user_message_with(candidate.evidence)
        index = index if found is None else found
    message = turn.messages[index] if index < len(turn.messages) else None
    start = end = 0
    if message is not None and candidate.evidence:
        found = message.text.find(candidate.evidence)
        if found >= 0:
            start, end = found, found + len(candidate.evidence)
    speaker = None if message is None else (message.name or message.role.value)
    return Provenance(
        turn_id=turn.turn_id,
        message=index if message else 0,
        start=start,
        end=end,
        speaker=speaker,
        session_id=turn.session_id,
    )


def _partly_forgotten(candidate: MemoryCandidate, decision: Decision) -> bool:
    return candidate.kind is CandidateKind.FORGET and decision.event is MemoryEvent.UPDATE


def forgotten_parts(before: MemoryRecord, after: MemoryRecord) -> list[str]:
    """The statements of a compound memory that a partial forget took out (those of ``before`` that
    ``after`` no longer says)."""
    speaker = speaker_of(before)
    left = {normalized_statement(c) for c in statement_clauses(split_speaker(after.memory, speaker)[1])}
    return [c for c in statement_clauses(split_speaker(before.memory, speaker)[1]) if normalized_statement(c) not in left]


async def forget_in_episodes(
    store: MemoryStore,
    history: HistoryStore | None,
    embedder: Embedder,
    fact: MemoryRecord,
    turn: Turn,
    forgotten: Sequence[str] | None = None,
) -> int:
    """Forget a deleted fact in the episodes that state it (DESIGN section 7): in each episode of the
    fact's provenance, the sentences that say it are removed; an episode with nothing left is deleted.
    The rest of what the user said stays; an episode with nothing left keeps only its tombstone.
    Returns how many episodes changed.

    Each change is recorded in the history before it is written, so a crash between the two leaves
    the record and a replay (the turn redelivered) only writes: idempotent, and no change goes
    unrecorded."""
    scope = fact.scope
    if forgotten is None:  # the whole fact was forgotten: its text, the sentence it came from, what it held before
        forgotten = [w for said in (fact, *await earlier_values_of(store, fact)) for w in _words_of(said)]
        reason = f"forgotten on request (turn {turn.turn_id}): {fact.memory[:80]}"
    else:  # part of a compound memory: the reason does not quote what was to be forgotten
        reason = f"part of memory {fact.id} forgotten on request (turn {turn.turn_id})"
    changed = 0
    for turn_id, message in _sources(fact):
        episode = await store.get(scope, episode_id_for(scope, turn_id, message))
        if episode is None or episode.kind is not MemoryKind.EPISODE or episode.status is MemoryStatus.DELETED:
            continue
        speaker = speaker_of(episode)
        prefix = f"{speaker}: " if speaker else ""
        remaining, removed = redact_sentences(episode.memory[len(prefix) :], forgotten)
        if not removed:
            continue
        metadata = {**episode.metadata, "redacted_by_turn": turn.turn_id}
        if remaining:
            text = prefix + remaining
            vector = (await embedder.embed_passages([text]))[0]
            after = episode.model_copy(
                update={"memory": text, "metadata": metadata, "embedding": [float(x) for x in vector]}
            )
            event = MemoryEvent.UPDATE
        else:
            metadata = status_note(metadata, reason, turn.occurred_at)
            after = forgotten_record(episode.model_copy(update={"status": MemoryStatus.DELETED, "metadata": metadata}))
            event = MemoryEvent.DELETE
        # Not a step of the turn (no turn id): the turn's steps are its candidates' decisions.
        entry = HistoryEntry.of_change(event, scope, episode.id, episode, after, reason=reason, at=turn.occurred_at)
        await record_once(history, entry)
        await store.upsert([after])
        changed += 1
    return changed


async def close_superseded_episodes(
    store: MemoryStore,
    history: HistoryStore | None,
    before: MemoryRecord | None,
    after: MemoryRecord | None,
    turn: Turn,
) -> int:
    """Close the episodes that stated the value a fact held before this turn superseded it: each episode
    of the fact's former provenance gets ``valid_until`` (when the new value was said) and
    ``superseded_by`` (the fact), so it stays what was said then but is never shown as what holds now.
    Recorded in the history before it is written, and idempotent, like the redactions. Returns how many
    episodes were closed."""
    if not superseded_in(before, after, turn):
        return 0
    assert before is not None and after is not None
    scope, at = after.scope, after.valid_from or turn.occurred_at
    reason = f"superseded by memory {after.id} (turn {turn.turn_id}): {after.memory[:80]}"
    closed = 0
    for source in before.provenance:
        episode = await store.get(scope, episode_id_for(scope, source.turn_id, source.message))
        if episode is None or episode.kind is not MemoryKind.EPISODE or episode.superseded:
            continue
        if episode.status is MemoryStatus.DELETED or source.turn_id == turn.turn_id:
            continue
        await _supersede(store, history, episode, after.id, at, reason)
        closed += 1
    return closed


async def _supersede(
    store: MemoryStore, history: HistoryStore | None, record: MemoryRecord, by: str, at: datetime, reason: str
) -> None:
    """Close ``record``: it held until ``at``, when memory ``by`` replaced it (recorded, then written)."""
    ended = record.model_copy(update={"valid_until": at, "superseded_by": by})
    await record_once(history, HistoryEntry.of_change(MemoryEvent.UPDATE, record.scope, record.id, record, ended, reason=reason, at=at))
    await store.upsert([ended])


#: How many of the scope's nearest episodes a new one is compared with (and facts with an episode).
_NEAREST = 10


async def supersede_with_episode(
    store: MemoryStore,
    history: HistoryStore | None,
    thresholds: SimilarityThresholds,
    episode: MemoryRecord | None,
    turn: Turn,
) -> int:
    """Close what a new episode supersedes (:func:`~memory_core.service.consolidation.supersession.superseded_episodes`):
    the earlier episode gets ``valid_until`` (when the later one was said) and ``superseded_by``, and so
    does each fact that came from it alone, so what was said stays, dated, but is never shown as what
    holds now. A turn that arrives after a later statement is closed itself. Recorded in the history
    before it is written, and idempotent (a redelivered turn does it again). Returns how many memories
    were closed."""
    if episode is None or episode.kind is not MemoryKind.EPISODE or episode.embedding is None:
        return 0
    if episode.status is not MemoryStatus.ACTIVE or episode.superseded:
        return 0
    vector = np.asarray(episode.embedding, dtype=np.float32)
    nearest = await nearest_memories(store, episode.scope, episode.memory, vector, k=_NEAREST, kind=MemoryKind.EPISODE)
    closed = 0
    for change in superseded_episodes(episode, nearest, thresholds):
        closed += await _close(store, history, change.earlier, change, turn)
        for fact in await _facts_from(store, change.earlier):
            closed += await _close(store, history, fact, change, turn)
    return closed


async def _facts_from(store: MemoryStore, episode: MemoryRecord) -> list[MemoryRecord]:
    """The current facts whose every source is ``episode`` (what the user said there and nowhere else)."""
    if episode.embedding is None or not episode.provenance:
        return []
    source = (episode.provenance[0].turn_id, episode.provenance[0].message)
    vector = np.asarray(episode.embedding, dtype=np.float32)
    nearest = await nearest_memories(store, episode.scope, episode.memory, vector, k=_NEAREST, kind=MemoryKind.FACT)
    return [
        n.record
        for n in nearest
        if n.record.provenance
        and not n.record.superseded
        and all((p.turn_id, p.message) == source for p in n.record.provenance)
    ]


async def _close(
    store: MemoryStore, history: HistoryStore | None, record: MemoryRecord, change: Supersession, turn: Turn
) -> int:
    """Mark ``record`` as replaced by ``change.later`` from when that was said."""
    current = await store.get(record.scope, record.id)
    if current is None or current.superseded or current.status is not MemoryStatus.ACTIVE:
        return 0
    reason = f"superseded by episode {change.later.id} (turn {turn.turn_id}): {change.reason}"
    await _supersede(store, history, current, change.later.id, change.later.valid_from or turn.occurred_at, reason)
    return 1


def _sources(fact: MemoryRecord) -> list[tuple[str, int]]:
    """The (turn, message) of every episode that stated the fact: its provenance, and the sources of
    values it held before it was superseded."""
    found = [(p.turn_id, p.message) for p in fact.provenance]
    for entry in fact.metadata.get("superseded_sources", []):
        if isinstance(entry, list) and len(entry) == 2 and (entry[0], entry[1]) not in found:
            found.append((str(entry[0]), int(entry[1])))
    return found


async def redact_episodes(
    store: MemoryStore,
    history: HistoryStore,
    embedder: Embedder,
    candidate: MemoryCandidate,
    decision: Decision,
    turn: Turn,
) -> None:
    """Forget in the episodes what one step's decision forgot: a deleted fact, or the part of a
    compound memory a forget request took out of it (the episodes lose that part only)."""
    if decision.event is MemoryEvent.DELETE and decision.after is not None:
        await forget_in_episodes(store, history, embedder, decision.after, turn)
    elif _partly_forgotten(candidate, decision) and decision.before and decision.after:
        gone = forgotten_parts(decision.before, decision.after)
        await forget_in_episodes(store, history, embedder, decision.after, turn, gone)


def forgotten_by(record: MemoryRecord, turn: Turn) -> bool:
    """Whether a forget request of ``turn`` deleted ``record`` or took part of it out."""
    marks = (record.metadata.get("deleted_by_turn"), record.metadata.get("partly_forgotten_by_turn"))
    deleted = record.status is MemoryStatus.DELETED or marks[1] is not None
    return deleted and turn.turn_id in marks


def _words_of(record: MemoryRecord) -> list[str]:
    """What a memory said (without its speaker's name), and the sentence it came from."""
    return [split_speaker(record.memory, speaker_of(record))[1], str(record.metadata.get("evidence") or "")]


def forgotten_words(before: MemoryRecord | None, after: MemoryRecord) -> list[str]:
    """What a forget request took from a memory: all it said (and the words it came from), or the
    statements of a compound memory it took out."""
    if after.status is MemoryStatus.DELETED:
        return _words_of(after)
    return forgotten_parts(before, after) if before is not None else []


async def withhold_forgotten(
    store: MemoryStore, history: HistoryStore, record: MemoryRecord, words: Sequence[str], turn: Turn
) -> MemoryRecord:
    """After a forget request of ``turn`` took ``record`` (or the ``words`` of part of it): a deleted
    memory keeps only its tombstone (its id, time and reason, not its words or vector), and so do the
    values a deleted fact held before (:func:`~memory_core.service.earlier_values.forget_earlier_values`);
    the recorded changes of it and of the episodes it came from keep none of the forgotten words (a
    deleted one none at all; :meth:`~memory_core.ports.HistoryStore.rewrite_entries`). Idempotent.
    Returns the record as kept."""
    scope = record.scope
    deleted = record.status is MemoryStatus.DELETED
    earlier = await earlier_values_of(store, record) if deleted and record.kind is MemoryKind.FACT else []
    words = [*words, *(e.memory for e in earlier)]

    def redacted(text: str) -> str:
        return redact_sentences(text, [w for w in words if w])[0]

    kept = record
    if deleted:
        kept = forgotten_record(record)
        await store.upsert([kept])
    for turn_id, message in _sources(record):
        episode = await store.get(scope, episode_id_for(scope, turn_id, message))
        if episode is None or episode.id == record.id:
            continue
        redact = None if episode.status is MemoryStatus.DELETED else redacted
        await history.rewrite_entries(scope, [episode.id], partial(HistoryEntry.forgotten, redact=redact))
    # The journals of the turns that said it keep none of the words either.
    said_in = [turn_id for turn_id, _ in _sources(record)] + [p.turn_id for e in earlier for p in e.provenance]
    await history.rewrite_candidates(scope, said_in, partial(MemoryCandidate.forgotten, redact=redacted))
    if earlier:
        await forget_earlier_values(store, history, record, earlier, turn)
    holder = record.metadata.get("earlier_value_of")
    if deleted and holder:  # a value a fact held before: the fact's recorded changes quote it
        await history.rewrite_entries(scope, [str(holder)], partial(HistoryEntry.forgotten, redact=redacted))
    # The memory's own entries last: a redelivered turn reads from them whether this was done, so a
    # crash before this line has it done again (and the episodes' entries are rewritten first).
    own = None if kept is not record else redacted
    await history.rewrite_entries(scope, [record.id], partial(HistoryEntry.forgotten, redact=own))
    return kept


async def catch_up_redactions(
    store: MemoryStore,
    history: HistoryStore,
    embedder: Embedder,
    wanted: MemoryRecord,
    before: Mapping[str, Any] | None,
    turn: Turn,
) -> None:
    """:func:`redact_episodes` (or :func:`keep_earlier_value` and :func:`close_superseded_episodes`) again for a recorded step of a
    redelivered turn (they follow the step's write; a crash in between is caught up here, and doing
    them twice changes nothing).

    Args:
        wanted: The recorded after-state of a memory the turn changed.
        before: Its first recorded before-state in the turn (``None``: the turn added it).
    """
    if wanted.status is MemoryStatus.DELETED and wanted.kind is MemoryKind.FACT:
        await forget_in_episodes(store, history, embedder, wanted, turn)
    elif wanted.metadata.get("partly_forgotten_by_turn") == turn.turn_id and before is not None:
        parts = forgotten_parts(MemoryRecord.model_validate(before), wanted)
        await forget_in_episodes(store, history, embedder, wanted, turn, parts)
    elif before is not None:
        replaced = MemoryRecord.model_validate(before)
        await keep_earlier_value(store, history, embedder, replaced, wanted, turn)
        await close_superseded_episodes(store, history, replaced, wanted, turn)
