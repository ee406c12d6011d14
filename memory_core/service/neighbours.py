"""The scope's memories nearest to a text, with their cosine similarity: what consolidation compares a
candidate with, and what a new episode may supersede."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.ports import MemoryStore
from memory_core.service.consolidation.decisions import Neighbour

__all__ = ["cosine_similarity", "nearest_memories"]


def cosine_similarity(
    vector: Sequence[float] | np.ndarray, embedding: Sequence[float] | None, vector_score: float | None
) -> float | None:
    """The cosine of ``vector`` and a memory's: from its stored ``embedding``, else from the vector
    leg's score of its hit (``1 / (2 - cosine)``); ``None`` when there is neither."""
    if embedding is not None:
        values, wanted = np.asarray(embedding, dtype=np.float32), np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(values)) * float(np.linalg.norm(wanted))
        return float(values @ wanted) / norm if norm else 0.0
    if vector_score:
        return 2.0 - 1.0 / vector_score
    return None


async def nearest_memories(
    store: MemoryStore,
    scope: Scope,
    text: str,
    vector: np.ndarray,
    *,
    k: int,
    kind: MemoryKind | None = MemoryKind.FACT,
    include_archived: bool = False,
    include_superseded: bool = False,
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
        include_superseded: Also memories superseded by something said later; otherwise current ones.
    """
    options = MemorySearchOptions(
        mode=SearchMode.HYBRID,
        ranking_profile=RankingProfile.NONE,
        top=k,
        vector_k=max(k, 50),
        include_archived=include_archived,
        include_superseded=include_superseded,
        kind=kind,
    )
    allowed = {MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED} if include_archived else {MemoryStatus.ACTIVE}
    result = await store.search(SearchRequest(scope, text, [float(x) for x in vector], options))
    found: list[Neighbour] = []
    for hit in result.hits:
        if hit.record.status not in allowed:
            continue
        record = await store.get(scope, hit.record.id)
        if record is None or record.status not in allowed:
            continue
        similarity = cosine_similarity(vector, record.embedding, hit.breakdown.vector_score)
        found.append(Neighbour(record, 0.0 if similarity is None else similarity))
    return found
