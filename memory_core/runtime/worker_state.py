"""What a queue worker is doing, for ``GET /health`` and its supervisor: its state, since when, errors.

A worker is ``starting`` until it first reaches the queue, then ``running``, ``backing_off`` while it
waits to retry after a queue error or a crash (since its first error in a row), and ``stopped``. It is
stalled when stopped, or backing off for longer than the health check allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["WorkerState", "WorkerStats", "WorkerStatus"]

#: What a worker is doing: ``starting`` (not yet received once), ``running``, ``backing_off`` (waiting
#: to retry after a queue error or a crash), ``stopped``.
WorkerState = Literal["starting", "running", "backing_off", "stopped"]


@dataclass(slots=True)
class WorkerStats:
    """What one worker did since it started."""

    completed: int = 0
    dead_lettered: int = 0
    abandoned: int = 0
    lock_lost: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "completed": self.completed,
            "dead_lettered": self.dead_lettered,
            "abandoned": self.abandoned,
            "lock_lost": self.lock_lost,
        }


class WorkerStatus:
    """The state and counts of one worker (the base of :class:`~memory_core.runtime.worker.QueueWorker`).

    Args:
        name: Shown in log lines and health.
        clock: Monotonic seconds, for how long the worker has been in its state.

    Attributes:
        state: What the worker is doing (:data:`WorkerState`).
        stats: What it did (:class:`WorkerStats`).
        errors: Queue errors (receive or settle) since it was created.
        consecutive_errors: Queue errors since the last success.
        last_error: The last queue error or crash, as ``"<type>: <message>"``.
        restarts: How often its task was restarted after dying (counted by the runtime).
    """

    def __init__(self, *, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self.stats = WorkerStats()
        self.state: WorkerState = "starting"
        self.errors = 0
        self.consecutive_errors = 0
        self.last_error: str | None = None
        self.restarts = 0
        self._since = clock()
        self._since_utc = datetime.now(UTC)

    @property
    def state_seconds(self) -> float:
        """How long the worker has been in its current state (a back-off counts from its first error)."""
        return max(0.0, self.clock() - self._since)

    def is_stalled(self, after_seconds: float) -> bool:
        """Whether the worker is not draining: stopped, or backing off for at least ``after_seconds``."""
        if self.state == "stopped":
            return True
        return self.state == "backing_off" and self.state_seconds >= after_seconds

    def health(self) -> dict[str, Any]:
        """The worker for ``GET /health``: state, since when, last error, restarts and counts."""
        return {
            "name": self.name,
            "state": self.state,
            "since": self._since_utc.isoformat().replace("+00:00", "Z"),
            "state_seconds": round(self.state_seconds, 3),
            "last_error": self.last_error,
            "consecutive_errors": self.consecutive_errors,
            "restarts": self.restarts,
            "processed": self.stats.completed,
            "failed": self.stats.dead_lettered + self.stats.abandoned,
            "errors": self.errors,
        }

    def note_crash(self, exc: BaseException) -> None:
        """Record that the worker's task died with ``exc`` (the runtime restarts it)."""
        self.last_error = f"crashed: {type(exc).__name__}: {exc}"
        self._enter("backing_off")

    def _enter(self, state: WorkerState) -> None:
        if state != self.state:
            self.state = state
            self._since = self.clock()
            self._since_utc = datetime.now(UTC)
