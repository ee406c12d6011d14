"""The vectors an import left for later, computed in the background of ``memory-core serve``.

``memory-core import`` stores its records first (listed and found by keyword search at once) and then
computes their vectors; with ``--defer-vectors``, or when it is stopped part way, it leaves them for
later. A running ``serve`` fills them: at start, then every ``interval`` seconds, it counts the memories
of its store without a vector and computes theirs (:meth:`MemoryService.fill_vectors
<memory_core.service.MemoryService.fill_vectors>`: pages of memories, one transaction each). Its embedder
calls take turns with the searches' and the queue workers' like every other call, so searches keep
answering while a large import is filled; a stop ends the fill at the next page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from memory_core.service.backfill import FillReport

__all__ = ["VectorFiller"]

logger = logging.getLogger(__name__)


class _Filling(Protocol):
    """What the filler needs of the service."""

    async def missing_vectors(self) -> int: ...

    async def fill_vectors(self, *, stop: Callable[[], bool] | None = None) -> FillReport: ...


class VectorFiller:
    """Fills the store's missing vectors now and then, while the runtime runs.

    Args:
        service: The runtime's service.
        interval: Seconds between two looks at the store (the first is at start).

    Attributes:
        missing: Memories without a vector when last counted (``None``: not counted yet).
        filled: Memories given their vector since the runtime started.
    """

    def __init__(self, service: _Filling, *, interval: float) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self._service = service
        self._interval = interval
        self.missing: int | None = None
        self.filled = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Fill, then wait ``interval`` seconds, until ``stop`` is set."""
        while not stop.is_set():
            await self.fill_once(stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._interval)

    async def fill_once(self, stop: asyncio.Event) -> FillReport | None:
        """Count the memories without a vector and compute theirs (``None``: there were none)."""
        self.missing = await self._service.missing_vectors()
        if not self.missing:
            return None
        logger.info("computing the vectors of %s memories stored without one", self.missing)
        report = await self._service.fill_vectors(stop=stop.is_set)
        self.filled += report.filled
        self.missing = report.missing
        logger.info("computed %s vectors; %s memories still without one", report.filled, report.missing)
        return report

    def health(self) -> dict[str, int | None]:
        """What health shows of the filler."""
        return {"missing": self.missing, "filled": self.filled}
