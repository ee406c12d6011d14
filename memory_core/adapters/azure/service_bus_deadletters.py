"""The turns queue's own dead-letter sub-queue (``azure-servicebus``, async): peek and replay.

Service Bus moves a message there itself: after ``maxDeliveryCount`` deliveries
(``MaxDeliveryCountExceeded``), when its time to live ran out (``TTLExpiredException``, the queue sets
``deadLetteringOnMessageExpiration``), or when a receiver dead-lettered it. The sub-queue has no
sessions, so one receiver reads every scope's dead letters.

- :meth:`ServiceBusDeadLetterQueue.peek` browses (``peek_messages``, from sequence number 1 page by
  page): nothing is locked, no delivery count changes.
- :meth:`ServiceBusDeadLetterQueue.replay` receives in peek-lock mode (one message, then growing
  batches) until it holds the dead letter with the requested sequence number (at most ``max_scan``
  messages), sends a copy to the main queue
  (the same body, message id, session id, subject, content type and application properties, less the
  broker's dead-letter properties), and only then completes the dead letter. Every other message it
  received is abandoned (back into the sub-queue, where its delivery count grows by one and nothing
  else changes).
  A failed send abandons the dead letter too, so nothing is lost; a failed completion after the send
  leaves it in the sub-queue, and replaying it again is harmless (the pipeline skips a turn it has
  processed, by its id).

One :class:`ServiceBusClient` is created on first use (identity-based, ``DefaultAzureCredential``) and
reused; each operation opens its own receiver or sender and closes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError

from memory_core.adapters.azure.service_bus import CONTENT_TYPE, map_servicebus_error
from memory_core.domain.messages import QueueDeadLetter
from memory_core.errors import ConfigurationError, MemoryCoreError, PermanentError

if TYPE_CHECKING:  # pragma: no cover
    from azure.core.credentials_async import AsyncTokenCredential

__all__ = ["BROKER_PROPERTIES", "ServiceBusDeadLetterQueue", "copy_for_replay", "dead_letter_of"]

logger = logging.getLogger(__name__)

#: Application properties the broker adds when it dead-letters a message (not the publisher's).
BROKER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _body(message: Any) -> bytes:
    body = message.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    return b"".join(bytes(part) for part in body)


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def dead_letter_of(message: Any) -> QueueDeadLetter:
    """The port's view of a received (or peeked) ``ServiceBusReceivedMessage`` of the sub-queue."""
    return QueueDeadLetter(
        sequence_number=int(message.sequence_number),
        message_id=_text(message.message_id) or "",
        session_id=_text(message.session_id) or None,
        subject=_text(message.subject),
        reason=_text(message.dead_letter_reason) or "",
        description=_text(message.dead_letter_error_description) or "",
        delivery_count=message.delivery_count,
        enqueued_at=_utc(message.enqueued_time_utc),
        body=_body(message),
    )


def copy_for_replay(message: Any) -> ServiceBusMessage:
    """The message to send to the main queue for a dead letter: the publisher's own fields, not the
    broker's dead-letter properties."""
    properties: Mapping[Any, Any] = message.application_properties or {}
    kept = {key: value for key, value in properties.items() if _text(key) not in BROKER_PROPERTIES}
    return ServiceBusMessage(
        _body(message),
        message_id=_text(message.message_id),
        session_id=_text(message.session_id),
        subject=_text(message.subject),
        content_type=_text(message.content_type) or CONTENT_TYPE,
        correlation_id=_text(message.correlation_id),
        application_properties=kept or None,
    )


async def _close_quietly(link: Any, what: str) -> None:
    """Close a receiver or sender; a failure to close never turns a done operation into a failed one."""
    try:
        await link.close()
    except Exception:  # the link is dropped either way
        logger.debug("closing the Service Bus %s failed", what, exc_info=True)


class ServiceBusDeadLetterQueue:
    """A :class:`~memory_core.tools.deadletter_sources.DeadLetterQueue` on the turns queue's dead-letter
    sub-queue (``<queue>/$DeadLetterQueue``).

    Args:
        fully_qualified_namespace: ``NAME.servicebus.windows.net``.
        queue_name: The turns queue.
        credential: An async token credential (Microsoft Entra ID); closed with this object only if
            ``owns_credential``.
        client: An already built ``azure.servicebus.aio.ServiceBusClient`` (not closed here).
        owns_credential: Close ``credential`` with this object.
        receive_batch: Messages received per call while looking for the one to replay.
        max_wait: Seconds a receive waits for the first message (the sub-queue is empty after that).
        max_scan: Messages a replay receives at most while looking for its dead letter.
        operation_timeout: Seconds one send, peek or settlement may take.
    """

    def __init__(
        self,
        fully_qualified_namespace: str,
        queue_name: str,
        credential: AsyncTokenCredential | None = None,
        *,
        client: Any | None = None,
        owns_credential: bool = False,
        receive_batch: int = 50,
        max_wait: float = 5.0,
        max_scan: int = 1000,
        operation_timeout: float = 30.0,
    ) -> None:
        if client is None and (not fully_qualified_namespace or credential is None):
            raise ConfigurationError(
                "the Service Bus dead letters need ServiceBusConnection__fullyQualifiedNamespace "
                "(azd env get-value AZURE_SERVICEBUS_FULLY_QUALIFIED_NAMESPACE)"
            )
        if not queue_name:
            raise ConfigurationError("MEMORY_TURNS_QUEUE is empty")
        self.namespace = fully_qualified_namespace
        self.queue_name = queue_name
        self.receive_batch = receive_batch
        self.max_wait = max_wait
        self.max_scan = max_scan
        self.operation_timeout = operation_timeout
        self._credential = credential
        self._client = client
        self._owns_client = client is None
        self._owned_credential: Any | None = credential if owns_credential else None

    @classmethod
    def create(
        cls, fully_qualified_namespace: str, queue_name: str, *, client_id: str | None = None
    ) -> ServiceBusDeadLetterQueue:
        """One on ``fully_qualified_namespace`` with an async ``DefaultAzureCredential`` (your sign-in, or
        the user-assigned managed identity ``client_id``), closed with it."""
        if not fully_qualified_namespace:
            return cls("", queue_name)  # raises the ConfigurationError that names the setting
        from azure.identity.aio import DefaultAzureCredential

        credential = DefaultAzureCredential(managed_identity_client_id=client_id or None)
        return cls(fully_qualified_namespace, queue_name, credential, owns_credential=True)

    def _get_client(self) -> Any:
        if self._client is None:
            from azure.servicebus.aio import ServiceBusClient

            self._client = ServiceBusClient(self.namespace, self._credential)  # type: ignore[arg-type]
        return self._client

    def _receiver(self, mode: ServiceBusReceiveMode) -> Any:
        return self._get_client().get_queue_receiver(
            self.queue_name,
            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
            receive_mode=mode,
            max_wait_time=self.max_wait,
        )

    async def peek(self, *, limit: int) -> list[QueueDeadLetter]:
        """Browse up to ``limit`` dead letters from sequence number 1 on (nothing locked)."""
        out: list[QueueDeadLetter] = []
        try:
            receiver = self._receiver(ServiceBusReceiveMode.PEEK_LOCK)
            try:
                after = 1
                while len(out) < limit:
                    batch = await receiver.peek_messages(
                        max_message_count=min(self.receive_batch, limit - len(out)),
                        sequence_number=after,
                        timeout=self.operation_timeout,
                    )
                    if not batch:
                        break
                    out.extend(dead_letter_of(m) for m in batch)
                    after = int(batch[-1].sequence_number) + 1
            finally:
                await _close_quietly(receiver, "receiver")
        except MemoryCoreError:
            raise
        except (ServiceBusError, TimeoutError, OSError) as exc:
            raise map_servicebus_error("peek the dead-letter queue", exc) from exc
        return out

    async def _find(self, receiver: Any, sequence_number: int, held: list[Any]) -> Any | None:
        """Receive until the dead letter ``sequence_number`` is in hand; the others go to ``held``.

        The batches grow from one message (the oldest, which ``replay --all`` asks for first) to
        ``receive_batch``, so a replay in order locks and abandons nothing but its own dead letter.
        """
        size = 1
        while len(held) < self.max_scan:
            batch = await receiver.receive_messages(
                max_message_count=min(size, self.receive_batch, self.max_scan - len(held)),
                max_wait_time=self.max_wait,
            )
            size *= 2
            if not batch:
                return None
            found = None
            for message in batch:
                if found is None and int(message.sequence_number) == sequence_number:
                    found = message
                else:
                    held.append(message)
            if found is not None:
                return found
        raise PermanentError(
            f"dead letter {sequence_number} is not among the first {self.max_scan} messages of the dead-letter "
            "queue; it is kept (replay the older ones first)"
        )

    async def _settle_all(self, receiver: Any, held: list[Any]) -> None:
        for message in held:
            try:
                await receiver.abandon_message(message)
            except Exception:  # its lock runs out instead: it is back in the sub-queue either way
                logger.debug("abandoning dead letter %s failed", message.sequence_number, exc_info=True)

    async def replay(self, sequence_number: int) -> bool:
        """Send the dead letter ``sequence_number`` to the main queue, then complete it."""
        held: list[Any] = []
        try:
            receiver = self._receiver(ServiceBusReceiveMode.PEEK_LOCK)
            try:
                message = await self._find(receiver, sequence_number, held)
                if message is None:
                    return False
                try:
                    await self._send(copy_for_replay(message))
                except BaseException:
                    held.append(message)  # not sent: back into the sub-queue
                    raise
                try:
                    await receiver.complete_message(message)
                except (ServiceBusError, TimeoutError, OSError) as exc:
                    error = map_servicebus_error("complete the dead letter", exc)
                    raise MemoryCoreError(
                        f"sent to the turns queue, but completing the dead letter failed ({error}); it is kept "
                        "and replaying it again is harmless (the pipeline skips a turn it has processed)"
                    ) from exc
                return True
            finally:
                await self._settle_all(receiver, held)
                await _close_quietly(receiver, "receiver")
        except MemoryCoreError:
            raise
        except (ServiceBusError, TimeoutError, OSError) as exc:
            error = map_servicebus_error("receive from the dead-letter queue", exc)
            raise type(error)(f"{error}; the dead letter is kept") from exc

    async def _send(self, message: ServiceBusMessage) -> None:
        sender = self._get_client().get_queue_sender(self.queue_name)
        try:
            await asyncio.wait_for(
                sender.send_messages(message, timeout=self.operation_timeout),
                timeout=self.operation_timeout * 2,
            )
        except (ServiceBusError, TimeoutError, OSError) as exc:
            error = map_servicebus_error("replay dead letter", exc)
            raise type(error)(f"{error}; the dead letter is kept") from exc
        finally:
            await _close_quietly(sender, "sender")

    async def close(self) -> None:
        """Close the client and the credential if this object created them."""
        client, self._client = (self._client if self._owns_client else None), None
        try:
            if client is not None:
                await client.close()
        finally:
            credential, self._owned_credential = self._owned_credential, None
            if credential is not None:
                await credential.close()
