"""Publishes turns and recall updates to the Service Bus turns queue (``azure-servicebus``, async).

Every message goes on the session of its scope (:func:`memory_core.domain.records.session_id_for`), so the
queue trigger applies the writes of one scope in order, one at a time, while different scopes run in
parallel. The message id is derived from the scope and the ``turn_id`` / ``recall_id``
(:func:`memory_core.domain.records.message_id_for`): with duplicate detection on the queue (the Bicep enables
it) a turn published twice inside the detection window is stored once, a turn of another scope with
the same id is not affected, and the pipeline's history makes any later duplicate a no-op.

One :class:`ServiceBusClient` and one sender are created on first use and reused. The SDK retries
retryable failures itself (bounded attempts and back-off, per-operation timeout); what is still
failing then surfaces as :class:`~memory_core.errors.TransientError` (throttling, timeouts, lost
connections, a locked or disabled entity) or :class:`~memory_core.errors.PermanentError` (a missing
queue, a message too large, missing permission). :meth:`ServiceBusTurnPublisher.close` closes only
what the publisher created.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from azure.core.exceptions import ClientAuthenticationError
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
)

from memory_core.domain.messages import RecallUpdate, Turn, message_id_for, session_id_for
from memory_core.errors import ConfigurationError, MemoryCoreError, PermanentError, TransientError

if TYPE_CHECKING:  # pragma: no cover
    from azure.core.credentials_async import AsyncTokenCredential

__all__ = [
    "CONTENT_TYPE",
    "PublisherSettings",
    "ServiceBusTurnPublisher",
    "build_message",
    "map_servicebus_error",
]

logger = logging.getLogger(__name__)

_TRANSIENT = (
    ServiceBusServerBusyError,
    OperationTimeoutError,
    ServiceBusConnectionError,
    ServiceBusCommunicationError,
    MessagingEntityDisabledError,
)

#: Content type of every message memory-core publishes.
CONTENT_TYPE = "application/json"
#: The largest message a Standard-tier queue accepts, headers and properties included.
MAX_MESSAGE_BYTES = 256 * 1024
#: What the broker's own headers and the AMQP framing add to a message, beyond the properties we set.
HEADER_ALLOWANCE = 2048


@dataclass(frozen=True, slots=True)
class PublisherSettings:
    """Bounds of one send.

    Args:
        retry_total: Retries the SDK makes after the first attempt (retryable errors only).
        retry_backoff_factor: Back-off base in seconds (exponential).
        retry_backoff_max: Longest wait between two attempts, in seconds.
        operation_timeout: Seconds one send attempt may take (the SDK's ``timeout``).
        overall_timeout: Seconds a whole publish may take, retries and token acquisition included.
    """

    retry_total: int = 3
    retry_backoff_factor: float = 0.5
    retry_backoff_max: float = 8.0
    operation_timeout: float = 10.0
    overall_timeout: float = 45.0

    def __post_init__(self) -> None:
        if self.retry_total < 0:
            raise ValueError("retry_total must not be negative")
        if self.operation_timeout <= 0 or self.overall_timeout <= 0:
            raise ValueError("timeouts must be positive")


def build_message(item: Turn | RecallUpdate) -> ServiceBusMessage:
    """The Service Bus message of a turn or recall update.

    The body is the JSON of ``item`` (``memory-core.turn.v1`` / ``memory-core.recall.v1``), the
    session id is the scope's, the message id is unique per scope (:func:`message_id_for`: duplicate
    detection drops a repeat of the scope's own turn, never another user's that reuses the id) and the
    subject is the schema (so the queue can be inspected without reading bodies).
    """
    if isinstance(item, Turn):
        message_id = message_id_for(item.scope, "turn", item.turn_id)
    else:
        message_id = message_id_for(item.scope, "recall", item.recall_id)
    body = json.dumps(item.to_json_dict(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    session_id = session_id_for(item.scope)
    size = len(body) + len(message_id) + len(session_id) + len(item.schema_) + len(CONTENT_TYPE) + HEADER_ALLOWANCE
    if size > MAX_MESSAGE_BYTES:
        raise PermanentError(
            f"message {message_id}: {len(body)} bytes of body plus headers is over the {MAX_MESSAGE_BYTES}-byte "
            "Service Bus message limit (Standard tier); a turn is at most 192 KiB of JSON, so this one was "
            "built without that check"
        )
    return ServiceBusMessage(
        body,
        session_id=session_id,
        message_id=message_id,
        content_type=CONTENT_TYPE,
        subject=item.schema_,
    )


def map_servicebus_error(operation: str, error: BaseException) -> MemoryCoreError:
    """The project error for a Service Bus failure the SDK did not retry away."""
    detail = f"{operation} failed: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}".rstrip(
        ": "
    )
    if isinstance(error, MessageSizeExceededError):
        return PermanentError(detail + " (the message is larger than the queue accepts)")
    if isinstance(error, MessagingEntityNotFoundError):
        return PermanentError(detail + " (check MEMORY_TURNS_QUEUE and the namespace)")
    if isinstance(error, ServiceBusAuthenticationError | ServiceBusAuthorizationError | ClientAuthenticationError):
        # Transient: right after a deploy the role assignment takes minutes to reach the namespace, and an
        # identity outage passes; a turn refused now is sent again by its caller (the provider's outbox).
        return TransientError(
            detail + " (the identity may not send to the queue yet: role assignments take a few minutes to "
            "propagate; it needs Azure Service Bus Data Owner, or Data Sender, on the turns queue)"
        )
    if isinstance(error, ServiceBusQuotaExceededError):
        return TransientError(detail + " (the queue is full; retry later)")
    if isinstance(error, _TRANSIENT):
        return TransientError(detail)
    if isinstance(error, ServiceBusError):
        # Other SDK errors say themselves whether another attempt may help.
        return TransientError(detail) if getattr(error, "_retryable", False) else PermanentError(detail)
    if isinstance(error, TimeoutError | OSError):
        return TransientError(detail)
    return PermanentError(detail)


class ServiceBusTurnPublisher:
    """A :class:`~memory_core.ports.TurnPublisher` on a Service Bus queue with sessions.

    Args:
        fully_qualified_namespace: ``NAME.servicebus.windows.net``.
        queue_name: The turns queue (sessions and duplicate detection enabled).
        credential: An async token credential (Microsoft Entra ID). Not closed by the publisher
            unless ``owns_credential``.
        settings: Retry and timeout bounds.
        client: An already built ``azure.servicebus.aio.ServiceBusClient`` (or a test double with
            ``get_queue_sender``); the publisher does not close a client it was given.
        owns_credential: Close ``credential`` with the publisher (set when it was built for it alone,
            as :func:`memory_core.bootstrap.build_publisher` does).
    """

    def __init__(
        self,
        fully_qualified_namespace: str,
        queue_name: str,
        credential: AsyncTokenCredential | None = None,
        *,
        settings: PublisherSettings | None = None,
        client: Any | None = None,
        owns_credential: bool = False,
    ) -> None:
        if client is None and (not fully_qualified_namespace or credential is None):
            raise ConfigurationError("a Service Bus namespace and a credential (or a client) are needed")
        if not queue_name:
            raise ConfigurationError("MEMORY_TURNS_QUEUE is empty")
        self.namespace = fully_qualified_namespace
        self.queue_name = queue_name
        self.settings = settings or PublisherSettings()
        self._credential = credential
        self._client = client
        self._owns_client = client is None
        self._owned_credential: Any | None = credential if owns_credential else None
        self._sender: Any | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def _get_sender(self) -> Any:
        async with self._lock:
            if self._closed:
                raise PermanentError("the Service Bus publisher is closed")
            if self._client is None:
                from azure.servicebus.aio import ServiceBusClient

                self._client = ServiceBusClient(
                    self.namespace,
                    self._credential,  # type: ignore[arg-type]
                    retry_total=self.settings.retry_total,
                    retry_backoff_factor=self.settings.retry_backoff_factor,
                    retry_backoff_max=self.settings.retry_backoff_max,
                    retry_mode="exponential",
                )
            if self._sender is None:
                self._sender = self._client.get_queue_sender(self.queue_name)
            return self._sender

    async def _send(self, operation: str, message: ServiceBusMessage) -> None:
        try:
            sender = await self._get_sender()
            await asyncio.wait_for(
                sender.send_messages(message, timeout=self.settings.operation_timeout),
                timeout=self.settings.overall_timeout,
            )
        except MemoryCoreError:
            raise
        except (ServiceBusError, TimeoutError, OSError) as exc:
            error = map_servicebus_error(operation, exc)
            logger.warning("%s (message %s): %s", operation, message.message_id, error)
            if isinstance(exc, ServiceBusError) and not isinstance(exc, MessageSizeExceededError):
                await self._reset_sender()  # the link may be gone: the next publish opens a fresh one
            raise error from exc
        except Exception as exc:  # credential failures and the like: never a bare SDK error
            error = map_servicebus_error(operation, exc)
            raise error from exc

    async def _reset_sender(self) -> None:
        """Drop a sender whose link the SDK shut down, so the next publish opens a fresh one."""
        async with self._lock:
            sender, self._sender = self._sender, None
        if sender is not None:
            try:
                await sender.close()
            except Exception:  # a broken link may fail to close; it is dropped either way
                logger.debug("closing a failed Service Bus sender raised", exc_info=True)

    async def publish_turn(self, turn: Turn) -> None:
        """Send one turn on its scope's session (message id from scope and ``turn_id``).

        Returns ``None``: the broker drops a duplicate silently, so whether this one was is not known here.
        """
        await self._send("publish turn", build_message(turn))

    async def publish_recall(self, update: RecallUpdate) -> None:
        """Send one recall update on its scope's session (message id from scope and ``recall_id``)."""
        await self._send("publish recall update", build_message(update))

    async def republish(
        self, body: bytes, *, message_id: str, session_id: str, subject: str | None = None
    ) -> None:
        """Send a set-aside message again, byte for byte, with its original id and session
        (``memory-core deadletters replay``).

        Keeping the message id keeps the pipeline's idempotency; it also means that within the queue's
        duplicate detection window after the original was enqueued, Service Bus accepts the send and
        then drops it silently as a duplicate. The broker does not say so, so the caller has to wait
        the window out (:mod:`memory_core.tools.deadletters` does).
        """
        if not session_id:
            raise PermanentError(f"message {message_id}: the turns queue needs a session id")
        message = ServiceBusMessage(
            body, session_id=session_id, message_id=message_id, content_type=CONTENT_TYPE, subject=subject
        )
        await self._send("replay message", message)

    async def close(self) -> None:
        """Close the sender, and the client and credential if the publisher created them."""
        async with self._lock:
            self._closed = True
            sender, self._sender = self._sender, None
        errors: list[BaseException] = []
        if sender is not None:
            try:
                await sender.close()
            except Exception as exc:
                errors.append(exc)
        if self._owns_client and self._client is not None:
            try:
                await self._client.close()
            except Exception as exc:
                errors.append(exc)
            self._client = None
        if self._owned_credential is not None:
            try:
                await self._owned_credential.close()
            except Exception as exc:
                errors.append(exc)
            self._owned_credential = None
        if errors:
            logger.warning("closing the Service Bus publisher: %s", errors[0])

    async def __aenter__(self) -> ServiceBusTurnPublisher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
