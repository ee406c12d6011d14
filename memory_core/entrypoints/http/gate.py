"""The bound on heavy operations: at most so many run at once, and one more is refused at once.

An export page, a purge or a forgetting run reads or removes many memories; a handful of them at
once would take the CPU and the store from every search. The API lets ``limit`` of them run
(:attr:`~memory_core.contract.routes.Route.heavy`) and answers the next with 429 and ``Retry-After``
rather than queueing it; searches and the other routes never pass through the gate.
"""

from __future__ import annotations

import threading

__all__ = ["HeavyGate"]


class HeavyGate:
    """A count of heavy operations in progress, never above ``limit``; entering never waits.

    Args:
        limit: Heavy operations allowed at once (at least 1).

    Raises:
        ValueError: ``limit`` is below 1.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a heavy-operation limit must be at least 1")
        self.limit = limit
        self._running = 0
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        """Heavy operations in progress now."""
        return self._running

    def try_enter(self) -> bool:
        """Count one more heavy operation, unless ``limit`` run already (then ``False``)."""
        with self._lock:
            if self._running >= self.limit:
                return False
            self._running += 1
            return True

    def leave(self) -> None:
        """One heavy operation ended."""
        with self._lock:
            self._running = max(0, self._running - 1)
