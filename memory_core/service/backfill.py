"""Vectors computed after the memories were stored: what an import leaves for later, filled in pages.

An import into a store that can give memories their vectors later
(:class:`~memory_core.capabilities.VectorBackfill`: the embedded store) stores its records first, so they
are durable, listed and found by keyword search at once, and the vectors follow. :func:`fill_missing_vectors`
walks the memories without one by row key, embeds each distinct text once in calls of
:data:`EMBED_BATCH` passages, and writes every page of :data:`FILL_PAGE` memories in one transaction.
A fill that stops (interrupted, or the embedder failed) leaves every memory whole, with or without its
vector, and the next fill goes on with the memories still missing one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_core.capabilities import MissingVector, VectorBackfill
from memory_core.ports import Embedder, ProgressCallback

__all__ = ["EMBED_BATCH", "FILL_PAGE", "VECTOR_CACHE", "FillReport", "embed_distinct", "fill_missing_vectors"]

#: Passages per embedder call. The local model (multilingual-e5-small) embeds a short batch fastest per
#: text: its activations stay in the processor's cache (measured on 2 cores: about 21 ms a text in
#: batches of 8 to 16, 24 in batches of 32, 30 to 35 in batches of 256).
EMBED_BATCH = 16
#: Memories read and given their vectors per store call (one transaction).
FILL_PAGE = 256
#: Distinct texts whose vectors one fill remembers, so a text repeated across pages is embedded once.
VECTOR_CACHE = 4096


@dataclass(frozen=True, slots=True)
class FillReport:
    """What a fill did.

    Attributes:
        filled: Memories given their vector.
        embedded: Texts the embedder was asked for (each distinct text once).
        missing: Memories still without a vector when the fill ended (changed while it ran, or
            stored meanwhile).
    """

    filled: int
    embedded: int
    missing: int


async def embed_distinct(
    embedder: Embedder, texts: Sequence[str], cache: OrderedDict[str, list[float]] | None = None
) -> dict[str, list[float]]:
    """The vector of every text of ``texts``, each distinct text embedded once, :data:`EMBED_BATCH` per
    call; texts ``cache`` holds are not embedded again, and those embedded are added to it (the oldest
    dropped beyond :data:`VECTOR_CACHE`)."""
    vectors: dict[str, list[float]] = {}
    wanted: list[str] = []
    for text in dict.fromkeys(texts):
        known = cache.get(text) if cache is not None else None
        if known is None:
            wanted.append(text)
        else:
            vectors[text] = known
    for start in range(0, len(wanted), EMBED_BATCH):
        chunk = wanted[start : start + EMBED_BATCH]
        matrix = await embedder.embed_passages(chunk)
        for text, vector in zip(chunk, matrix, strict=True):
            vectors[text] = vector.tolist()
    if cache is not None:
        for text in wanted:
            cache[text] = vectors[text]
        while len(cache) > VECTOR_CACHE:
            cache.popitem(last=False)
    return vectors


async def fill_missing_vectors(
    store: VectorBackfill,
    embedder: Embedder,
    *,
    progress: ProgressCallback | None = None,
    stop: Callable[[], bool] | None = None,
) -> FillReport:
    """Give every memory of ``store`` that has no vector its vector (any status: a deleted one may be restored).

    Args:
        store: The store (one that offers :class:`~memory_core.capabilities.VectorBackfill`).
        embedder: Computes the vectors.
        progress: Told ``(memories done, memories without a vector at the start)`` at the start and
            after every page.
        stop: Asked before every page; ``True`` ends the fill there (the pages written so far stay
            written, the rest is left for the next fill).

    Returns:
        What was done, and how many memories still have no vector.
    """
    total = await store.count_missing_vectors()
    if progress is not None:
        progress(0, total)
    cache: OrderedDict[str, list[float]] = OrderedDict()
    filled = embedded = done = 0
    after: int | None = None
    while stop is None or not stop():
        page: list[MissingVector] = await store.missing_vectors(after=after, limit=FILL_PAGE)
        if not page:
            break
        after = page[-1].key
        fresh = sum(1 for text in dict.fromkeys(item.text for item in page) if text not in cache)
        vectors = await embed_distinct(embedder, [item.text for item in page], cache)
        embedded += fresh
        filled += await store.fill_vectors([(item, vectors[item.text]) for item in page])
        done += len(page)
        if progress is not None:
            progress(min(done, max(total, done)), max(total, done))
    return FillReport(filled=filled, embedded=embedded, missing=await store.count_missing_vectors())
