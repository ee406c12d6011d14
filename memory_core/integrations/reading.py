"""What an agent run reads, within deadlines: a failure or a timeout only means no memories this run."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from memory_core.client.base import MemoryClient
from memory_core.domain.log_ids import redact
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions, SearchHit, SearchResult

__all__ = ["below_floor", "memories_for_run"]

logger = logging.getLogger(__name__)


async def memories_for_run(
    client: MemoryClient,
    scope: Scope,
    query: str,
    options: MemorySearchOptions,
    *,
    floor: float | None,
    recall: bool,
    search_timeout: float,
    ready_timeout: float,
    background: Callable[[Coroutine[Any, Any, None]], object],
) -> list[SearchHit]:
    """The memories to give a run for ``query``, best first (none if the search failed or timed out).

    Args:
        client: Where memory lives.
        scope: The scope searched.
        query: The search text.
        options: The search options.
        floor: Give nothing when the best hit's relevance (0-1, :attr:`SearchHit.relevance`) is below
            this: the question is about nothing remembered (``None``, or hits without a relevance:
            no floor).
        recall: Count the memories given as recalled (by the search itself, or after the floor,
            in the ``background``).
        search_timeout: Seconds the search may take.
        ready_timeout: Seconds to wait first for the client to be ready (``0``: never wait).
        background: Runs a coroutine in the background (the recall after the floor).
    """
    if ready_timeout > 0:
        await _wait_ready(client, scope, ready_timeout)
    started = time.perf_counter()
    result = await _search(
        client, scope, query, options, recall=recall and floor is None, timeout=search_timeout
    )
    if result is None:
        return []
    hits = list(result.hits)
    if floor is not None:
        hits = [] if below_floor(hits, floor) else hits
        if hits and recall:
            background(_record_recall(client, scope, hits, timeout=search_timeout))
    logger.debug(
        "memory search: %s hit(s), %s injected in %.1f ms",
        len(result.hits),
        len(hits),
        (time.perf_counter() - started) * 1000,
    )
    return hits


def below_floor(hits: Sequence[SearchHit], floor: float) -> bool:
    """Whether the best relevance among ``hits`` is below ``floor`` (never when none has a relevance)."""
    known = [h.relevance for h in hits if h.relevance is not None]
    return bool(known) and max(known) < floor


async def _wait_ready(client: MemoryClient, scope: Scope, timeout: float) -> None:
    """Let the client catch up (at most ``timeout`` seconds); a failure only means searching now."""
    started = time.perf_counter()
    try:
        ready = await asyncio.wait_for(client.wait_ready(scope, timeout=timeout), timeout=timeout + 1.0)
    except Exception as exc:  # never fails the run: search what there is
        logger.warning(
            "waiting for memory to be ready failed (%s: %s)",
            type(exc).__name__,
            redact(exc, scope.user_id, scope.agent_id),
        )
        return
    if not ready:
        logger.info(
            "memory was not ready after %.2fs (model loading or turns still being ingested); "
            "searching what there is",
            timeout,
        )
    else:
        logger.debug("memory ready in %.1f ms", (time.perf_counter() - started) * 1000)


async def _search(
    client: MemoryClient,
    scope: Scope,
    query: str,
    options: MemorySearchOptions,
    *,
    recall: bool,
    timeout: float,
) -> SearchResult | None:
    """The search of a run, or ``None`` (logged) when it failed or took longer than ``timeout``."""
    try:
        return await asyncio.wait_for(client.search(scope, query, options, recall=recall), timeout=timeout)
    except TimeoutError:
        logger.warning("memory search timed out after %.2fs; answering without memories", timeout)
    except Exception as exc:  # a memory failure never fails the run
        logger.warning(
            "memory search failed (%s: %s); answering without memories",
            type(exc).__name__,
            redact(exc, scope.user_id, scope.agent_id),
        )
    return None


async def _record_recall(
    client: MemoryClient, scope: Scope, hits: Sequence[SearchHit], *, timeout: float
) -> None:
    """Count ``hits`` as recalled (when the search itself could not: a score filter came after it)."""
    try:
        await asyncio.wait_for(client.record_recall(scope, [h.record.id for h in hits]), timeout=timeout)
    except Exception as exc:
        logger.info("recording the recall failed: %s", redact(exc, scope.user_id, scope.agent_id))
