"""The work of the Functions app's queue and timer triggers.

A message that fails transiently is raised again after a growing pause (:func:`redelivery_delay`), so
the host abandons it and Service Bus redelivers it without burning ``maxDeliveryCount`` in seconds; one
that can never be processed, or fails in a way nothing expected (a bug, a module missing from the
deployment), is set aside as a dead letter (recorded, then completed). Nightly
forgetting runs in bounded pages within a time budget and resumes where it stopped.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from memory_core import telemetry
from memory_core.domain.log_ids import redact, session_tag
from memory_core.errors import MemoryCoreError, PermanentError, TransientError
from memory_core.runtime.sharing import background_work

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.entrypoints.functions.runtime import FunctionsRuntime
    from memory_core.service import MemoryService

__all__ = ["MAX_REDELIVERY_DELAY_SECONDS", "QueueMessage", "forget_nightly", "ingest_message", "redelivery_delay"]

logger = logging.getLogger("memory_core.functions")

#: Longest wait before a message that failed transiently is handed back for redelivery.
MAX_REDELIVERY_DELAY_SECONDS = 60.0


class QueueMessage(Protocol):
    """What the Service Bus trigger hands over (``azure.functions.ServiceBusMessage``)."""

    @property
    def message_id(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def delivery_count(self) -> int | None: ...
    @property
    def enqueued_time_utc(self) -> datetime | None: ...
    def get_body(self) -> bytes: ...


def redelivery_delay(delivery_count: int | None) -> float:
    """Seconds to wait before giving back a message that failed transiently (2, 4, 8... up to 60)."""
    attempt = max(int(delivery_count or 1), 1)
    return float(min(2.0**attempt, MAX_REDELIVERY_DELAY_SECONDS))


async def ingest_message(
    runtime: FunctionsRuntime, msg: QueueMessage, *, sleep: Callable[[float], Awaitable[None]]
) -> None:
    """Process one turn or recall update from the scope's session.

    Raises:
        MemoryCoreError: The app is not configured (after a pause: the message stays on the queue).
        TransientError: The message failed transiently (after a pause: Service Bus redelivers it).
        PermanentError: It cannot be processed and there is no dead-letter store to keep it.
    """
    try:
        service = await runtime.service()
    except MemoryCoreError as exc:  # misconfigured: keep the message, slowly, until the settings are fixed
        logger.error("memory-core is not configured; message %s is kept on the queue: %s", msg.message_id, exc)
        await sleep(redelivery_delay(msg.delivery_count))
        raise
    with telemetry.operation(
        "memory.ingest",
        **{"messaging.message.id": msg.message_id, "messaging.delivery_count": msg.delivery_count},
    ) as op:
        try:
            with background_work():  # batched apart from passages an HTTP call asks for
                outcome = await service.process_message(msg.get_body())
        except TransientError as exc:
            delay = redelivery_delay(msg.delivery_count)
            logger.warning(
                "message %s (session %s, delivery %s): transient failure, redelivered after %.0fs: %s",
                msg.message_id,
                session_tag(msg.session_id),
                msg.delivery_count,
                delay,
                redact(exc, session_id=msg.session_id),
            )
            # An abandoned session message comes back at once; waiting here (the session lock is
            # renewed meanwhile, other sessions go on) spaces the attempts out, so a throttled
            # dependency does not burn the queue's maxDeliveryCount in seconds.
            await sleep(delay)
            # The host records what is raised (its log, Application Insights): the same kind, ids replaced.
            raise TransientError(redact(exc, session_id=msg.session_id)) from None
        except PermanentError as exc:
            await _set_aside(service, msg, exc)
            return
        except Exception as exc:  # a bug or a missing module: redelivering at once would only repeat it
            logger.error(  # the traceback as text, its ids replaced (a message may name the user)
                "message %s (session %s): unexpected failure\n%s",
                msg.message_id,
                session_tag(msg.session_id),
                redact(traceback.format_exc(), session_id=msg.session_id),
            )
            await _set_aside(service, msg, exc, sleep=sleep)
            return
        if outcome.ingest is not None:
            telemetry.record_ingest(outcome.ingest, op.elapsed)
        op.set(
            **{
                "memory.kind": outcome.kind,
                "memory.status": outcome.status,
                "memory.recalled": outcome.recalled,
            }
        )
        logger.info("message %s (%s %s): %s", msg.message_id, outcome.kind, outcome.message_id, outcome.status)


async def _set_aside(
    service: MemoryService,
    msg: QueueMessage,
    error: Exception,
    *,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> None:
    """Keep a poison message with its reason, then let the host complete it.

    The Python worker's message binding cannot settle a message itself, so completing after a durable
    record is what keeps the session moving without losing the message. An unexpected error (not a
    :class:`PermanentError`) is kept the same way, its reason ``Unexpected<Type>``, so it can be
    replayed once the cause is fixed; without a dead-letter store it is left to Service Bus after a
    pause (``sleep``), not redelivered at once.
    """
    unexpected = not isinstance(error, MemoryCoreError)
    reason = f"Unexpected{type(error).__name__}" if unexpected else type(error).__name__
    description = str(error) or repr(error)
    logger.error(
        "message %s (session %s, delivery %s) cannot be processed and is set aside as dead letter: %s: %s",
        msg.message_id,
        session_tag(msg.session_id),
        msg.delivery_count,
        reason,
        redact(description, session_id=msg.session_id),
    )
    kept = await service.set_aside(
        message_id=msg.message_id,
        reason=reason,
        description=description,
        body=msg.get_body(),
        session_id=msg.session_id,
        delivery_count=msg.delivery_count,
        enqueued_time=msg.enqueued_time_utc,
    )
    if not kept:
        # No dead-letter store in this deployment: keep the message on the queue. Raising makes the
        # host abandon it; Service Bus dead-letters it after maxDeliveryCount (MaxDeliveryCountExceeded).
        if sleep is not None:
            await sleep(redelivery_delay(msg.delivery_count))
        raise PermanentError(  # what the host records: ids replaced, the cause left out
            f"{reason}: {redact(description, session_id=msg.session_id)} (no dead-letter store configured; "
            "left to Service Bus)"
        ) from None
    telemetry.record_dead_letter(reason, message_id=msg.message_id)


async def forget_nightly(
    runtime: FunctionsRuntime,
    *,
    past_due: bool,
    page_size: int,
    budget: float,
    clock: Callable[[], float],
) -> None:
    """Archive and expire memories whose retention has decayed (never deletes physically).

    Pages of ``page_size`` from the saved cursor, until ``budget`` seconds of ``clock`` have passed;
    the cursor is saved after each page, so the next run resumes where this one stopped.
    """
    if past_due:
        logger.warning("nightly forgetting is running late (past due); it runs now")
    service = await runtime.service()
    started = clock()

    def out_of_time() -> bool:
        return clock() - started >= budget

    with telemetry.operation("memory.forgetting", **{"memory.dry_run": False}) as op:
        run = await service.run_forgetting(page_size=page_size, should_stop=out_of_time)
        telemetry.record_forgetting(run.as_dict(), op.elapsed, pages=run.pages)
