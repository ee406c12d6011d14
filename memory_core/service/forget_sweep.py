"""A forget request that names a person or a kind of information as a whole ("forget everything about
Alex", "delete my medical information", 「元彼の話は全部忘れて」): every memory of the scope that speaks
of it goes, facts and the sentences of episodes alike (DESIGN section 7)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from memory_core.domain.messages import (
    CandidateKind,
    Decision,
    HistoryEntry,
    MemoryCandidate,
    MemoryEvent,
    Turn,
)
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import (
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    deleted_on_request,
    forgotten_record,
)
from memory_core.language.sentences import join_sentences, split_sentences
from memory_core.language.topics import BroadRequest, broad_request, names_in
from memory_core.ports import Embedder, HistoryStore, MemoryStore
from memory_core.service.consolidation.features import speaker_of, split_speaker
from memory_core.service.entity_forget import entity_trace
from memory_core.service.episodes import forget_in_episodes, forgotten_words, withhold_forgotten
from memory_core.service.journal import record_once

__all__ = ["reported", "sweep_forgotten", "swept_by"]

logger = logging.getLogger(__name__)

#: Memories one sweep reads per page.
_PAGE = 500


async def _current(store: MemoryStore, turn: Turn) -> list[MemoryRecord]:
    """Every memory of the turn's scope but those deleted before this turn."""
    records: list[MemoryRecord] = []
    cursor: str | None = None
    while True:
        page = await store.scan(turn.scope, PageRequest(after=cursor, limit=_PAGE))
        records.extend(
            r for r in page.records
            if r.status is not MemoryStatus.DELETED or r.metadata.get("deleted_by_turn") == turn.turn_id
        )
        cursor = page.next_cursor
        if cursor is None:
            return records


def _named(
    records: list[MemoryRecord], request: BroadRequest, linked: frozenset[str] = frozenset()
) -> tuple[list[MemoryRecord], BroadRequest]:
    """The memories a broad request names (and those of the entities it names, ``linked``: see
    :mod:`~memory_core.service.entity_forget`), and the request with the names it was found to stand
    for. A memory this turn's request already deleted still tells the name a relation stands for ("my
    cousin": "my cousin Fatima")."""
    found = [r for r in records if request.names(r.memory) or r.id in linked]
    if request.by_relation:  # the person the relation names is named in those memories: theirs go too
        names = tuple(sorted(set().union(*(names_in(r.memory) for r in found))))
        request = replace(request, terms=(*request.terms, *names))
        found = [r for r in records if request.names(r.memory) or r.id in linked]
    return [r for r in found if r.status is not MemoryStatus.DELETED], request


async def _forget_fact(
    store: MemoryStore, history: HistoryStore, embedder: Embedder, fact: MemoryRecord, turn: Turn, reason: str
) -> None:
    deleted = deleted_on_request(fact, turn.turn_id, reason, turn.occurred_at)
    await record_once(history, HistoryEntry.of_change(MemoryEvent.DELETE, fact.scope, fact.id, fact, deleted, reason=reason, at=turn.occurred_at))
    await store.upsert([deleted])
    await forget_in_episodes(store, history, embedder, deleted, turn)
    await withhold_forgotten(store, history, deleted, forgotten_words(None, deleted), turn)


async def _forget_in_episode(
    store: MemoryStore,
    history: HistoryStore,
    embedder: Embedder,
    episode: MemoryRecord,
    named: Callable[[str], bool],
    turn: Turn,
    reason: str,
) -> None:
    speaker = speaker_of(episode)
    name, body = split_speaker(episode.memory, speaker)
    kept = [s for s in split_sentences(body) if not named(s)]
    text = join_sentences(kept)
    if text:
        text = f"{name}: {text}" if name else text
        vector = (await embedder.embed_passages([text]))[0]
        after = episode.model_copy(update={"memory": text, "embedding": [float(x) for x in vector]})
        event = MemoryEvent.UPDATE
    else:
        after = forgotten_record(deleted_on_request(episode, turn.turn_id, reason, turn.occurred_at))
        event = MemoryEvent.DELETE
    await record_once(history, HistoryEntry.of_change(event, episode.scope, episode.id, episode, after, reason=reason, at=turn.occurred_at))
    await store.upsert([after])

    def withheld(sentence_text: str) -> str:
        return join_sentences([s for s in split_sentences(sentence_text) if not named(s)])

    redact = None if event is MemoryEvent.DELETE else withheld
    await history.rewrite_entries(episode.scope, [episode.id], partial(HistoryEntry.forgotten, redact=redact))
    said_in = [p.turn_id for p in episode.provenance]  # its turn's journal keeps none of those sentences
    await history.rewrite_candidates(episode.scope, said_in, partial(MemoryCandidate.forgotten, redact=withheld))


def _broad(candidate: MemoryCandidate) -> BroadRequest | None:
    """What a forget request names as a whole (``None``: not a forget request, or it names one thing)."""
    if candidate.kind is not CandidateKind.FORGET:
        return None
    request = broad_request(candidate.memory)
    return request if request else None


async def swept_by(store: MemoryStore, candidate: MemoryCandidate, turn: Turn) -> list[MemoryRecord]:
    """The memories :func:`sweep_forgotten` will take for ``candidate`` (read before anything is
    written, so its decision can say what goes; empty unless it is a broad forget request)."""
    request = _broad(candidate)
    return [] if request is None else (await _named_in_scope(store, candidate, turn, request))[0]


async def _named_in_scope(
    store: MemoryStore, candidate: MemoryCandidate, turn: Turn, request: BroadRequest
) -> tuple[list[MemoryRecord], BroadRequest]:
    """:func:`_named` over the scope's current memories, with the entities the request names."""
    linked, words = await entity_trace(store, turn.scope, candidate.memory)
    if words:
        request = replace(request, terms=tuple(dict.fromkeys((*request.terms, *words))))
    return _named(await _current(store, turn), request, linked)


def reported(decision: Decision, swept: Sequence[MemoryRecord]) -> Decision:
    """``decision`` saying what the sweep takes besides its own memory (how many memories), so a broad
    forget request is never reported as matching nothing when it took something."""
    others = [r for r in swept if r.id != decision.memory_id]
    if not others:
        return decision
    what = f"{len(others)} {'memory' if len(others) == 1 else 'memories'} that speak of it"
    if decision.event is MemoryEvent.NONE:
        reason = f"forget request: {what} forgotten"
    else:
        reason = f"{decision.reason}; {what} forgotten with it"
    return decision.model_copy(update={"reason": reason})


async def sweep_forgotten(
    store: MemoryStore, history: HistoryStore, embedder: Embedder, candidate: MemoryCandidate, turn: Turn
) -> int:
    """Forget everything of the scope a broad forget request names (:func:`~memory_core.language.topics.broad_terms`):
    each fact that speaks of it is deleted to its tombstone (with the words its episodes said of it),
    each episode loses the sentences that speak of it (or goes, when nothing is left), and their
    recorded changes keep none of those words. Recorded before it is written and idempotent (a
    redelivered turn sweeps again and finds nothing left). Returns how many memories changed."""
    request = _broad(candidate)
    if request is None:
        return 0  # it names one thing: its decision did all there is to do (the scope is not read)
    found, request = await _named_in_scope(store, candidate, turn, request)
    reason = f"forgotten on request (turn {turn.turn_id})"
    for record in found:
        current = await store.get(turn.scope, record.id)
        if current is None or current.status is MemoryStatus.DELETED:
            continue  # (a fact's episode already went with it)
        if current.kind is MemoryKind.FACT:
            await _forget_fact(store, history, embedder, current, turn, reason)
        else:
            await _forget_in_episode(store, history, embedder, current, request.names, turn, reason)
    if found:
        logger.info("turn %s: a forget request took %s memories", turn.turn_id, len(found))
    return len(found)
