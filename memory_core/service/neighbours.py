"""The scope's memories nearest to a text, with their cosine similarity: what consolidation compares a
candidate with, and what a new episode may supersede."""

from __future__ import annotations

import numpy as np

from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.ports import MemoryStore
from memory_core.service.consolidation.decisions import Neighbour

__all__ = ["nearest_memories"]


def _cosine(stored: list[float], vector: np.ndarray) -> float:
    values = np.asarray(stored, dtype=np.float32)
    norm = float(np.linalg.norm(values)) * float(np.linalg.norm(vector))
    return float(values @ vector) / norm if norm else 0.0


async def nearest_memories(
    store: MemoryStore,
    scope: Scope,
    text: str,
    vector: np.ndarray,
    *,
    k: int,
    kind: MemoryKind | None = MemoryKind.FACT,
    include_archived: bool = False,
) -> list[Neighbour]:
    """The scope's nearest current memories to ``text`` (hybrid search, no ranking profile), as full
    records with their cosine similarity to ``vector``.

    Args:
        store: The store.
        scope: The scope searched.
        text: The text (keyword leg).
        vector: Its embedding (vector leg and cosine).
        k: How many.
        kind: Facts, episodes, or both (``None``).
        include_archived: Also archived memories; otherwise only active ones.
    """
    options = MemorySearchOptions(
        mode=SearchMode.HYBRID,
        ranking_profile=RankingProfile.NONE,
        top=k,
        vector_k=max(k, 50),
        include_archived=include_archived,
        kind=kind,
    )
    allowed = {MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED} if include_archived else {MemoryStatus.ACTIVE}
    result = await store.search(scope, text, [float(x) for x in vector], options)
    found: list[Neighbour] = []
    for hit in result.hits:
        if hit.record.status not in allowed:
            continue
        record = await store.get(scope, hit.record.id)
        if record is None or record.status not in allowed:
            continue
        if record.embedding is not None:
            similarity = _cosine(record.embedding, vector)
        elif hit.breakdown.vector_score:
            similarity = 2.0 - 1.0 / hit.breakdown.vector_score
        else:
            similarity = 0.0
        found.append(Neighbour(record, similarity))
    return found
