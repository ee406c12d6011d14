"""Where dead letters are kept: the port the ``deadletters`` command reads, and its two sources.

- ``local``: the embedded durable queue (``<store file>.queue``) dead-letters a message itself, with
  the reason, after a permanent failure or too many deliveries. Replay moves it back to the end of its
  session with the delivery count reset (:meth:`~memory_core.adapters.sqlite.queue.SQLiteQueue.requeue`,
  the same as ``memory-core queue requeue``).
- ``azure``: the Functions host cannot dead-letter a Service Bus message itself, so it sets a poison
  message aside in the history table's ``~deadletter`` partition and completes it (``function_app.py``).
  Replay sends the recorded body again to the turns queue with its original message id and session id,
  and removes the record only after the send succeeded, and only if the record has not changed since it
  was read (a message set aside again meanwhile keeps its new record).

- ``servicebus``: the turns queue's own dead-letter sub-queue, where Service Bus moves a message itself
  (``maxDeliveryCount`` deliveries, an expired time to live, or a receiver that dead-lettered it).
  Listing peeks (nothing is locked); replay sends a copy to the turns queue with the original message id
  and session id, then completes the dead letter
  (:class:`~memory_core.adapters.azure.service_bus_deadletters.ServiceBusDeadLetterQueue`, behind the
  :class:`DeadLetterQueue` protocol). The duplicate detection window applies as for
  ``azure``.

Two things make an Azure record not replayable, and the command says which:

- Its body is not the message any more: cut to fit a table entity, or not valid UTF-8 (see
  :meth:`~memory_core.adapters.azure.table_history.AzureTableHistoryStore.record_dead_letter`).
- Service Bus duplicate detection: the original message id stays in the queue's detection history for
  the window (``duplicateDetectionHistoryTimeWindow``, one hour in ``infra/app/servicebus.bicep``) after
  it was enqueued. A resend inside the window is accepted and then dropped silently, and removing the
  record would lose the turn; such a letter is skipped with the time it becomes replayable.

Both sources reach their technology through the adapters' own classes (described here as small
protocols), so nothing here imports an SDK.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from memory_core.errors import MemoryCoreError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.domain.messages import QueueDeadLetter

__all__ = [
    "DEFAULT_DUPLICATE_WINDOW",
    "AzureDeadLetters",
    "DeadLetterInfo",
    "DeadLetterQueue",
    "DeadLetterSource",
    "DeadLetterTable",
    "LocalDeadLetters",
    "LocalQueue",
    "MessageSender",
    "ServiceBusDeadLetters",
    "format_time",
    "summarize_body",
]

#: The turns queue's duplicate detection window (``duplicateDetectionHistoryTimeWindow: 'PT1H'``).
DEFAULT_DUPLICATE_WINDOW = timedelta(hours=1)
#: The Service Bus dead letters listed (peeked) at most.
MAX_QUEUE_DEAD_LETTERS = 5000
#: What :func:`summarize_body` reads of a message body: ids and counts, never what was said.
_SUMMARY_FIELDS = ("schema", "user_id", "agent_id", "session_id", "turn_id", "recall_id", "occurred_at", "at")


@dataclass(frozen=True, slots=True)
class DeadLetterInfo:
    """One dead letter, the same shape from either place.

    Attributes:
        key: What ``replay`` takes (local: the queue's ``seq``; azure: the message id). The message
            id is accepted too.
        message_id: The queue message id (derived from scope and turn or recall id).
        session_id: The queue session (the scope), if known.
        reason: Short reason (an error class name, ``MaxDeliveryCountExceeded``, ...).
        description: What was wrong.
        delivery_count: Deliveries before it was set aside, if known.
        recorded_at: When it was dead-lettered or set aside.
        enqueued_at: When the message was (last) enqueued.
        size: The message body's length in bytes.
        not_replayable: Why it can never be replayed as it is (``None``: it can).
        summary: What the body says of the turn's scope (:func:`summarize_body`), for ``show``.
    """

    key: str
    message_id: str
    session_id: str | None
    reason: str
    description: str
    delivery_count: int | None
    recorded_at: datetime | None
    enqueued_at: datetime | None
    size: int | None
    not_replayable: str | None = None
    summary: Mapping[str, Any] | None = None

    def as_dict(self, *, summary: bool = False) -> dict[str, Any]:
        """JSON-ready values (``summary``: with what the body says of the scope)."""
        extra = {"summary": dict(self.summary or {})} if summary else {}
        return {
            "id": self.key,
            "message_id": self.message_id,
            "session_id": self.session_id,
            "reason": self.reason,
            "description": self.description,
            "delivery_count": self.delivery_count,
            "recorded_at": None if self.recorded_at is None else self.recorded_at.isoformat(),
            "enqueued_at": None if self.enqueued_at is None else self.enqueued_at.isoformat(),
            "size": self.size,
            "replayable": self.not_replayable is None,
            "not_replayable": self.not_replayable,
            **extra,
        }


class DeadLetterSource(Protocol):
    """Where one deployment keeps its dead letters."""

    name: str

    async def letters(self) -> list[DeadLetterInfo]:
        """Every dead letter, oldest first."""
        ...

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        """Why ``letter`` cannot be replayed now (``None``: it can)."""
        ...

    async def replay(self, letter: DeadLetterInfo) -> str:
        """Send ``letter`` again; returns what was done. Raises when it was not sent (it is kept)."""
        ...

    async def close(self) -> None: ...


def format_time(value: datetime | None) -> str:
    """``value`` in UTC to the second (``-`` for none)."""
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def summarize_body(body: bytes | str) -> dict[str, Any]:
    """What a pipeline message's body says of its turn's scope: the schema, user, agent, session and turn
    (or recall) ids, its time, and how many messages (or memory ids) it carries; never their text.
    ``{"readable": False}`` for a body that is not a JSON object."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {"readable": False}
    if not isinstance(value, dict):
        return {"readable": False}
    out: dict[str, Any] = {
        name: value[name] for name in _SUMMARY_FIELDS if isinstance(value.get(name), str | int | float)
    }
    for name in ("messages", "memory_ids"):
        if isinstance(value.get(name), list):
            out[name] = len(value[name])
    return out


def _duplicate_blocked(since: datetime | None, window: timedelta, now: datetime) -> str | None:
    """Why a message first enqueued at ``since`` cannot be resent under its id yet (``None``: it can)."""
    if since is None or window <= timedelta(0):
        return None
    until = since + window
    if now < until:
        return (
            f"Service Bus would drop it as a duplicate of the original message until {format_time(until)} "
            f"(the queue's duplicate detection window, {window}); replay it after that"
        )
    return None


# -- the embedded queue ---------------------------------------------------------------------------
class LocalQueue(Protocol):
    """What :class:`LocalDeadLetters` needs of :class:`~memory_core.adapters.sqlite.queue.SQLiteQueue`."""

    def dead_letters(self, *, limit: int = 100, after_seq: int = 0) -> list[Any]: ...

    def requeue(self, key: str | int) -> Any: ...

    def close_sync(self) -> None: ...


def _epoch(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(float(value), UTC)


class LocalDeadLetters:
    """The embedded queue's dead letters (``<store file>.queue``).

    Args:
        queue: The queue (closed with this source).
        page: Dead letters read per query.
    """

    name = "local"

    def __init__(self, queue: LocalQueue, *, page: int = 500) -> None:
        self._queue = queue
        self._page = page

    async def letters(self) -> list[DeadLetterInfo]:
        out: list[DeadLetterInfo] = []
        after = 0
        while True:
            batch = await asyncio.to_thread(self._queue.dead_letters, limit=self._page, after_seq=after)
            out.extend(
                DeadLetterInfo(
                    key=str(m.seq),
                    message_id=m.message_id,
                    session_id=m.session_id,
                    reason=m.dead_letter_reason or "",
                    description=m.dead_letter_description or "",
                    delivery_count=m.delivery_count,
                    recorded_at=_epoch(m.dead_lettered_at),
                    enqueued_at=_epoch(m.enqueued_at),
                    size=len(m.body),
                    summary=summarize_body(m.body),
                )
                for m in batch
            )
            if len(batch) < self._page:
                return out
            after = batch[-1].seq

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        return None  # the embedded queue has no duplicate detection on requeue

    async def replay(self, letter: DeadLetterInfo) -> str:
        message = await asyncio.to_thread(self._queue.requeue, int(letter.key))
        return f"requeued as seq {message.seq} at the end of session {message.session_id}"

    async def close(self) -> None:
        self._queue.close_sync()


# -- the Azure history table + Service Bus --------------------------------------------------------
class DeadLetterTable(Protocol):
    """What :class:`AzureDeadLetters` needs of the history table
    (:class:`~memory_core.adapters.azure.table_history.AzureTableHistoryStore`)."""

    async def dead_letters(self) -> Sequence[Mapping[str, Any]]: ...

    async def delete_dead_letter(self, message_id: str, *, etag: str | None = None) -> bool: ...

    async def close(self) -> None: ...


class MessageSender(Protocol):
    """What :class:`AzureDeadLetters` needs of the turns queue
    (:class:`~memory_core.adapters.azure.service_bus.ServiceBusTurnPublisher`)."""

    async def republish(
        self, body: bytes, *, message_id: str, session_id: str, subject: str | None = None
    ) -> None: ...

    async def close(self) -> None: ...


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _subject(body: str) -> str | None:
    """The schema of a pipeline message (what the publisher puts in ``subject``), if the body has one."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    schema = value.get("schema") if isinstance(value, dict) else None
    return schema if isinstance(schema, str) else None


class AzureDeadLetters:
    """Poison messages the Functions host set aside in the history table.

    Args:
        table: The history table (closed with this source).
        sender: Builds the turns queue's sender on the first replay (closed with this source); listing
            needs no Service Bus settings.
        duplicate_window: The turns queue's duplicate detection window.
    """

    name = "azure"

    def __init__(
        self,
        table: DeadLetterTable,
        sender: Callable[[], MessageSender | Awaitable[MessageSender]],
        *,
        duplicate_window: timedelta = DEFAULT_DUPLICATE_WINDOW,
    ) -> None:
        self.table = table
        self.sender = sender
        self.duplicate_window = duplicate_window
        self._records: dict[str, Mapping[str, Any]] = {}
        self._sender: MessageSender | None = None

    async def letters(self) -> list[DeadLetterInfo]:
        out: list[DeadLetterInfo] = []
        self._records.clear()
        for record in await self.table.dead_letters():
            message_id = str(record["message_id"])
            self._records[message_id] = record
            length = record.get("body_bytes")
            size = None if length is None or int(length) < 0 else int(length)
            not_replayable = None
            if not record.get("body_complete", True):
                length = "?" if size is None else size
                not_replayable = (
                    f"its body ({length} bytes) was cut or was not UTF-8 when it was set aside, "
                    "so the record is not the message any more"
                )
            elif not record.get("session_id"):
                not_replayable = "it has no session id, which the turns queue requires"
            out.append(
                DeadLetterInfo(
                    key=message_id,
                    message_id=message_id,
                    session_id=record.get("session_id") or None,
                    reason=str(record.get("reason") or ""),
                    description=str(record.get("description") or ""),
                    delivery_count=record.get("delivery_count"),
                    recorded_at=_parse_time(record.get("recorded_at")),
                    enqueued_at=_parse_time(record.get("enqueued_time")),
                    size=size,
                    not_replayable=not_replayable,
                    summary=summarize_body(str(record.get("body") or "")),
                )
            )
        out.sort(
            key=lambda letter: (letter.recorded_at or datetime.min.replace(tzinfo=UTC), letter.message_id)
        )
        return out

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        return _duplicate_blocked(letter.enqueued_at or letter.recorded_at, self.duplicate_window, now)

    async def _get_sender(self) -> MessageSender:
        if self._sender is None:
            built = self.sender()
            self._sender = await built if isinstance(built, Awaitable) else built
        return self._sender

    async def replay(self, letter: DeadLetterInfo) -> str:
        record = self._records[letter.message_id]
        body = str(record.get("body") or "")
        sender = await self._get_sender()
        await sender.republish(
            body.encode("utf-8"),
            message_id=letter.message_id,
            session_id=letter.session_id or "",
            subject=_subject(body),
        )
        try:
            removed = await self.table.delete_dead_letter(letter.message_id, etag=record.get("etag"))
        except MemoryCoreError as exc:
            raise MemoryCoreError(
                f"sent to the turns queue, but removing its record failed ({exc}); the record is kept and "
                "replaying it again is harmless (the pipeline skips a turn it has processed)"
            ) from exc
        if not removed:
            return "sent to the turns queue; it was set aside again meanwhile, and that new record is kept"
        return "sent to the turns queue; its record is removed"

    async def close(self) -> None:
        sender, self._sender = self._sender, None
        try:
            if sender is not None:
                await sender.close()
        finally:
            await self.table.close()


# -- the turns queue's own dead-letter sub-queue ----------------------------------------------------
class DeadLetterQueue(Protocol):
    """What :class:`ServiceBusDeadLetters` needs of the turns queue's dead-letter sub-queue
    (:class:`~memory_core.adapters.azure.service_bus_deadletters.ServiceBusDeadLetterQueue`): read
    without taking, and send back."""

    async def peek(self, *, limit: int) -> list[QueueDeadLetter]:
        """Up to ``limit`` dead letters, oldest (lowest sequence number) first, none locked or removed."""
        ...

    async def replay(self, sequence_number: int) -> bool:
        """Send the dead letter ``sequence_number`` to the main queue again (its body, message id, session
        and subject), then complete it in the sub-queue, in that order: a failed send keeps it.

        Returns:
            ``False`` when no dead letter has that number (any more).

        Raises:
            MemoryCoreError: It was not sent, or it was sent and completing it failed (it is kept either
                way; replaying it again is harmless, since the pipeline skips a turn it has processed).
        """
        ...

    async def close(self) -> None: ...


class ServiceBusDeadLetters:
    """The messages Service Bus dead-lettered itself, in the turns queue's dead-letter sub-queue.

    Args:
        queue: The sub-queue (closed with this source).
        duplicate_window: The turns queue's duplicate detection window: a replay keeps the message id,
            so a dead letter enqueued less than this ago is skipped (the resend would be dropped).
        limit: Dead letters listed at most.
    """

    name = "servicebus"

    def __init__(
        self,
        queue: DeadLetterQueue,
        *,
        duplicate_window: timedelta = DEFAULT_DUPLICATE_WINDOW,
        limit: int = MAX_QUEUE_DEAD_LETTERS,
    ) -> None:
        self.queue = queue
        self.duplicate_window = duplicate_window
        self.limit = limit

    async def letters(self) -> list[DeadLetterInfo]:
        out = []
        for letter in sorted(await self.queue.peek(limit=self.limit), key=lambda m: m.sequence_number):
            out.append(
                DeadLetterInfo(
                    key=str(letter.sequence_number),
                    message_id=letter.message_id,
                    session_id=letter.session_id,
                    reason=letter.reason,
                    description=letter.description,
                    delivery_count=letter.delivery_count,
                    recorded_at=None,  # Service Bus does not say when it dead-lettered a message
                    enqueued_at=letter.enqueued_at,
                    size=len(letter.body),
                    not_replayable=None
                    if letter.session_id
                    else "it has no session id, which the turns queue requires",
                    summary=summarize_body(letter.body),
                )
            )
        return out

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        return _duplicate_blocked(letter.enqueued_at, self.duplicate_window, now)

    async def replay(self, letter: DeadLetterInfo) -> str:
        if not await self.queue.replay(int(letter.key)):
            raise MemoryCoreError(
                "it is not in the dead-letter queue any more (replayed or removed since it was listed)"
            )
        return "sent to the turns queue; the dead letter is completed"

    async def close(self) -> None:
        await self.queue.close()
