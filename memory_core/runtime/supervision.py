"""Keeping a long-running task alive: restarted whenever it dies, after a back-off that grows with
each crash in a row, so a crash loop cannot spin."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from memory_core.runtime.worker_state import WorkerStatus

__all__ = ["supervise"]

logger = logging.getLogger(__name__)


async def supervise(
    name: str,
    run: Callable[[asyncio.Event], Awaitable[None]],
    stop: asyncio.Event,
    *,
    backoff: Callable[[int], float],
    healthy_after: float,
    worker: WorkerStatus | None = None,
) -> None:
    """Run ``run(stop)`` until ``stop`` is set, restarting it whenever it dies.

    A task that raises (or returns before ``stop``) is logged and restarted after ``backoff(n)`` for
    its ``n``-th crash in a row; a run that lasted ``healthy_after`` seconds resets the count, so in
    a crash loop the restarts slow down to the longest back-off. Cancelling the supervisor cancels
    the task.

    Args:
        name: Shown in log lines.
        run: The task's body.
        stop: Set when the task is to stop (it is then not restarted).
        backoff: Seconds before the restart after the given number of crashes in a row.
        healthy_after: Seconds a run must last to count as working (not part of a crash loop).
        worker: The worker ``run`` belongs to, told of each crash and restart.
    """
    crashes = 0
    while not stop.is_set():
        started = time.monotonic()
        error = await _run_once(run, stop)
        if error is None:
            return
        if stop.is_set():
            logger.error(
                "%s: the task died while stopping: %s: %s", name, type(error).__name__, error, exc_info=error
            )
            return
        if time.monotonic() - started >= healthy_after:
            crashes = 0  # it had been working: not a crash loop
        crashes += 1
        delay = backoff(crashes)
        if worker is not None:
            worker.note_crash(error)
        logger.error(
            "%s: the task died (crash %s in a row), restarting in %.1fs: %s: %s",
            name,
            crashes,
            delay,
            type(error).__name__,
            error,
            exc_info=error,
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
        if stop.is_set():
            return
        if worker is not None:
            worker.restarts += 1
        logger.warning("%s: restarted after %s crash(es) in a row", name, crashes)


async def _run_once(
    run: Callable[[asyncio.Event], Awaitable[None]], stop: asyncio.Event
) -> BaseException | None:
    """How one run of the task ended: ``None`` when it returned because ``stop`` was set, else its error."""
    try:
        await run(stop)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return exc
    if stop.is_set():
        return None
    return RuntimeError("it returned before it was asked to stop")
