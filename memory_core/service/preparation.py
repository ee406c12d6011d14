"""A turn's candidates: what ingestion needs from an extractor, the candidates a turn's journal records,
and turns prepared ahead (several extracted, and all their candidates embedded in one call)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from memory_core.domain.messages import MemoryCandidate, Turn
from memory_core.ports import Embedder, HistoryStore
from memory_core.service.episodes import EpisodePolicy, episode_candidates
from memory_core.service.journal import purged_before

__all__ = ["CandidateExtractor", "PreparedTurn", "prepare_ahead", "prepare_turns", "turn_candidates"]

logger = logging.getLogger(__name__)


class _Extraction(Protocol):
    @property
    def candidates(self) -> Sequence[MemoryCandidate]: ...

    @property
    def path(self) -> str: ...

    @property
    def fallback_reason(self) -> str | None: ...


class CandidateExtractor(Protocol):
    """What ingestion needs from an extractor (``MemoryExtractor`` is one)."""

    async def extract(self, turn: Turn) -> _Extraction: ...


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """One turn worked out ahead of its ingestion (:func:`prepare_turns`).

    Attributes:
        turn: The turn it was prepared for.
        extraction: What the extractor made of it.
        vectors: Passage vectors by text: its candidates' (facts and episodes), or none when the
            embedding failed (ingestion embeds them itself then).
    """

    turn: Turn
    extraction: _Extraction
    vectors: Mapping[str, np.ndarray]

    @property
    def turn_id(self) -> str:
        """The turn's id."""
        return self.turn.turn_id

    def is_for(self, turn: Turn) -> bool:
        """Whether this was prepared for ``turn`` (the same turn: scope, id, time and messages)."""
        return self.turn == turn


async def prepare_ahead(
    turns: Sequence[Turn],
    *,
    history: HistoryStore | None,
    extractor: CandidateExtractor | None,
    embedder: Embedder,
    episodes: EpisodePolicy | None = None,
) -> list[PreparedTurn | None]:
    """:func:`prepare_turns` where it pays: with a history, and an extractor that is not a chat model.

    With a chat model extracting, nothing is prepared ahead: each extraction is a model call that a
    failure or a stop before its turn would waste (and repeat on every redelivery), its answer may
    depend on when it is asked, and the embedding it would batch is small beside it.

    Returns:
        One entry per turn: its preparation, or ``None`` for a turn that is ingested the usual way.
    """
    if extractor is None or history is None or not turns or getattr(extractor, "uses_llm", False):
        return [None] * len(turns)
    return await prepare_turns(turns, history=history, extractor=extractor, embedder=embedder, episodes=episodes)


async def prepare_turns(
    turns: Sequence[Turn],
    *,
    history: HistoryStore,
    extractor: CandidateExtractor,
    embedder: Embedder,
    episodes: EpisodePolicy | None = None,
) -> list[PreparedTurn | None]:
    """Extract several turns and embed all their candidates in one call, ahead of ingesting them.

    The local model embeds far more cheaply per passage in one call than in one call per turn. Rule
    extraction depends only on the turn and a vector only on its text, so a prepared turn is ingested
    exactly as it would have been on its own; it is still consolidated and written one turn at a time,
    in order. (Turns are not prepared ahead for a chat model's extraction: see :func:`prepare_ahead`.)

    Best effort, never raises: nothing is written, and a turn that is not prepared is simply ingested
    the usual way (:func:`~memory_core.service.ingest.ingest_turn` extracts and embeds it then, and
    raises what there is to raise). Not prepared: a turn already ingested or begun (its candidates are
    in its journal), one its scope's purge drops, and every turn from the first whose extraction failed
    on. The turns are extracted one after another, as they would be when ingested one at a time.

    Args:
        turns: Validated turns (of any scopes; each scope's still to be ingested in order).
        history: The turn journal (to skip turns already begun).
        extractor: Turns a turn into candidates.
        embedder: Embeds the passages (one call for all of them).
        episodes: Also embed each user message kept as an episode (as ingestion does).

    Returns:
        One entry per turn, in order: its preparation, or ``None``.
    """
    extracted = await _extract_ahead(turns, history, extractor, episodes)
    texts = [c.memory for item in extracted if item is not None for c in item[2]]
    vectors = await _embed_ahead(embedder, texts, len(turns))
    return [None if item is None else _prepared(*item, vectors) for item in extracted]


#: A turn extracted ahead: the turn, what the extractor made of it, its candidates (facts, then episodes).
_Extracted = tuple[Turn, _Extraction, list[MemoryCandidate]]


def _prepared(
    turn: Turn, extraction: _Extraction, candidates: Sequence[MemoryCandidate], vectors: Mapping[str, np.ndarray]
) -> PreparedTurn:
    return PreparedTurn(turn, extraction, {c.memory: vectors[c.memory] for c in candidates if c.memory in vectors})


async def _extract_ahead(
    turns: Sequence[Turn], history: HistoryStore, extractor: CandidateExtractor, episodes: EpisodePolicy | None
) -> list[_Extracted | None]:
    """Each turn extracted, in order; ``None`` for one begun or purged, and for every turn from the first
    whose extraction failed on."""
    extracted: list[_Extracted | None] = []
    for turn in turns:
        try:
            if await _begun_or_purged(history, turn):
                extracted.append(None)
                continue
            extraction = await extractor.extract(turn)
            candidates = turn_candidates(turn, extraction, episodes)
        except Exception as exc:  # ingesting the turn raises it again, where it is handled
            logger.info("turn %s not prepared ahead: %s: %s", turn.turn_id, type(exc).__name__, exc)
            break
        extracted.append((turn, extraction, candidates))
    return extracted + [None] * (len(turns) - len(extracted))


async def _begun_or_purged(history: HistoryStore, turn: Turn) -> bool:
    """Whether a turn is not to be prepared: its scope's purge drops it, or its ingestion has begun
    (its candidates are in its journal) or is done."""
    scope = turn.scope
    return (
        purged_before(turn.occurred_at, await history.tombstone(scope))
        or await history.turn_processed(scope, turn.turn_id)
        or await history.journal(scope, turn.turn_id) is not None
    )


async def _embed_ahead(embedder: Embedder, texts: Sequence[str], turns: int) -> dict[str, np.ndarray]:
    """The vectors of ``texts`` by text, from one call; none when it fails (each turn embeds its own
    candidates when it is ingested)."""
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return {}
    try:
        matrix = await embedder.embed_passages(distinct)
        if len(matrix) != len(distinct):
            raise ValueError(f"{len(matrix)} vectors for {len(distinct)} passages")
        return {text: np.array(matrix[i]) for i, text in enumerate(distinct)}
    except Exception as exc:  # each turn embeds its own candidates when it is ingested
        logger.info("candidates of %s turns not embedded ahead: %s: %s", turns, type(exc).__name__, exc)
        return {}


def turn_candidates(turn: Turn, extraction: _Extraction, episodes: EpisodePolicy | None) -> list[MemoryCandidate]:
    """A turn's candidates, as its journal records them: the extracted facts, then its episodes (when
    they are kept)."""
    facts = list(extraction.candidates)
    return facts + (episode_candidates(turn, facts, episodes) if episodes is not None else [])
