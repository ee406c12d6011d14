"""Bounded retries and error mapping for Azure AI Search calls.

The adapters create their SDK clients with ``retry_total=0`` and retry here instead, for two reasons:
``azure-core`` does not retry a ``POST`` that was throttled without a ``Retry-After`` header or that
timed out, and search and indexing are both ``POST``. Every request memory-core sends is idempotent
(searches; uploads, merges and deletes that carry absolute values), so repeating one is safe.

Throttling (429), unavailability (503 and other 5xx, 408) and timeouts or connection failures are
retried with exponential back-off, honouring ``Retry-After``; when the attempts run out they surface
as :class:`~memory_core.errors.TransientError` so a queue redelivers the message. So do 401, 403 and a
credential that cannot produce a token (not retried here: role assignments take minutes to apply
after a deployment). Other 4xx answers become :class:`~memory_core.errors.PermanentError` (404
:class:`~memory_core.errors.NotFoundError`, 409/412 :class:`~memory_core.errors.ConflictError`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

from memory_core.domain.log_ids import redact
from memory_core.errors import ConflictError, MemoryCoreError, NotFoundError, PermanentError, TransientError

__all__ = [
    "RETRYABLE_STATUS",
    "RetrySettings",
    "Sleep",
    "call_with_retries",
    "describe_error",
    "is_access_denied",
    "permanent_error",
    "retry_after_seconds",
]

T = TypeVar("T")

#: HTTP statuses worth another attempt.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})

Sleep = Callable[[float], Awaitable[None]]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """How hard to try before giving up.

    Args:
        attempts: Tries per request (the first one included).
        base_delay: Seconds before the second try; doubled for each later one.
        max_delay: Longest wait between tries, ``Retry-After`` included.
        document_attempts: Tries for documents that an indexing batch reports as failed with a
            retryable status (409, 422, 503).
    """

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    document_attempts: int = 4

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.document_attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay)
        return float(min(self.base_delay * (2 ** (attempt - 1)), self.max_delay))


def retry_after_seconds(error: BaseException) -> float | None:
    """The server's requested wait (``retry-after-ms``, ``x-ms-retry-after-ms``, ``Retry-After``)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("x-ms-retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if not raw:
            continue
        try:
            return max(float(raw) * scale, 0.0)
        except ValueError:
            pass
        try:
            moment = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            continue
        from datetime import UTC, datetime

        return max((moment - datetime.now(UTC)).total_seconds(), 0.0)
    return None


def describe_error(error: BaseException) -> str:
    """A one-line account of an SDK error: status, service error code and message."""
    if isinstance(error, HttpResponseError):
        status = error.status_code
        code = getattr(getattr(error, "error", None), "code", None)
        message = getattr(getattr(error, "error", None), "message", None) or error.reason or ""
        if not message:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
        parts = [f"HTTP {status}" if status is not None else type(error).__name__]
        if code:
            parts.append(str(code))
        if message:
            parts.append(str(message).splitlines()[0])
        return ": ".join(parts)
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def is_access_denied(error: HttpResponseError) -> bool:
    """A 401 or 403, or a credential that could not produce a token (``ClientAuthenticationError``, which
    ``CredentialUnavailableError`` extends): transient for the pipeline, never a reason to set a message
    aside."""
    return isinstance(error, ClientAuthenticationError) or error.status_code in (401, 403)


def permanent_error(operation: str, error: HttpResponseError) -> MemoryCoreError:
    """The project error for an answer that retrying cannot fix."""
    detail = f"{operation} failed: {describe_error(error)}"
    status = error.status_code
    if status == 404:
        return NotFoundError(detail)
    if status in (409, 412):
        return ConflictError(detail)
    return PermanentError(detail)


async def call_with_retries(
    operation: str,
    call: Callable[[], Awaitable[T]],
    settings: RetrySettings,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Run ``call`` until it succeeds, a permanent error occurs or the attempts run out.

    Args:
        operation: What is being done, for messages and logs (``"search"``, ``"index batch"``...).
        call: Makes one attempt (a new request each time).
        settings: Attempts and back-off.
        sleep: Awaitable sleep (injected by tests).

    Returns:
        What ``call`` returned.

    Raises:
        TransientError: Throttling, unavailability or timeouts outlasted the attempts.
        PermanentError: The service rejected the request (its subclasses for 404, 409 and 412).
    """
    last: BaseException | None = None
    for attempt in range(1, settings.attempts + 1):
        retry_after: float | None = None
        try:
            return await call()
        except HttpResponseError as exc:
            if is_access_denied(exc):
                # Role assignments take minutes to apply after a deployment, and an identity endpoint
                # can be down: the same call succeeds later, so the queue redelivers instead of
                # setting the message aside.
                raise TransientError(
                    f"{operation} was not authorised yet: {describe_error(exc)} (check the credential and "
                    "the role assignments; role assignments can take several minutes to apply)"
                ) from exc
            if exc.status_code not in RETRYABLE_STATUS:
                raise permanent_error(operation, exc) from exc
            last, retry_after = exc, retry_after_seconds(exc)
        except (ServiceRequestError, ServiceResponseError, TimeoutError) as exc:
            last = exc
        except AzureError as exc:  # anything else the pipeline raised without a response
            raise PermanentError(f"{operation} failed: {describe_error(exc)}") from exc
        if attempt < settings.attempts:
            wait = settings.delay(attempt, retry_after)
            logger.warning(
                "%s: attempt %s of %s failed (%s); retrying in %.2fs",
                operation,
                attempt,
                settings.attempts,
                redact(describe_error(last)),
                wait,
            )
            await sleep(wait)
    assert last is not None
    raise TransientError(
        f"{operation} failed after {settings.attempts} attempts: {describe_error(last)}"
    ) from last
