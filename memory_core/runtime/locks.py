"""The locks a queue worker holds on the messages it received: kept while they are processed, and
given back for a message it will not start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.adapters.sqlite.queue_messages import LockLostError, QueueMessage

__all__ = ["QueueCall", "give_back", "locks_kept"]

logger = logging.getLogger(__name__)

#: Runs a queue operation where the worker's queue calls run (its storage thread, or the loop).
QueueCall = Callable[..., Awaitable[Any]]


@contextlib.asynccontextmanager
async def locks_kept(
    queue: SQLiteQueue, held: list[QueueMessage], *, call: QueueCall, name: str, renew: bool = True
) -> AsyncIterator[None]:
    """Renew the locks of the messages in ``held`` while the block runs (``renew``: at all).

    ``held`` may shrink meanwhile (a batch's messages leave it as they are settled); a message whose
    lock was lost (settled, or taken by another receiver) is let go.
    """
    renewer = asyncio.create_task(_renew(queue, held, call=call, name=name)) if renew else None
    try:
        yield
    finally:
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer


async def _renew(queue: SQLiteQueue, held: list[QueueMessage], *, call: QueueCall, name: str) -> None:
    interval = max(0.05, queue.lock_seconds / 2)
    lost: set[int] = set()
    while True:
        await asyncio.sleep(interval)
        for message in list(held):
            if message.seq in lost:
                continue
            try:
                await call(queue.renew_lock, message)
            except LockLostError:
                lost.add(message.seq)
            except Exception as exc:  # keep processing; the lock may expire
                logger.warning("%s: renewing the lock of %s failed: %s", name, message.message_id, exc)


def give_back(queue: SQLiteQueue, message: QueueMessage, *, counted: bool, name: str) -> None:
    """Give back a received message that was not started; its delivery does not count (the head of
    a batch counted one when it was received, the others not). A failure is logged: the lock
    expires, and the message is delivered again then."""
    try:
        if counted:
            queue.abandon(message, count_delivery=False)
        else:
            queue.release(message)
    except Exception as exc:
        logger.warning(
            "%s: could not give back message %s (delivered again when its lock expires): %s: %s",
            name,
            message.message_id,
            type(exc).__name__,
            exc,
        )
