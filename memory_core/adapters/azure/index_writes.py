"""Index actions in batches, documents that failed sent again, and what a partly written batch raises.

Writes go out in batches of at most 1,000 actions (and a few megabytes). A ``207`` answer is read
document by document: documents that failed with a retryable status (409, 422, 503) are sent again
with back-off, and documents that still fail are reported in the raised error, never dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.adapters.azure.retry import RetrySettings, Sleep
from memory_core.errors import PermanentError, TransientError

__all__ = [
    "MAX_BATCH_ACTIONS",
    "MAX_BATCH_BYTES",
    "RETRYABLE_DOCUMENT_STATUS",
    "DocumentFailure",
    "PartialWriteError",
    "RetryablePartialWriteError",
    "batches",
    "write_batch",
]

logger = logging.getLogger(__name__)

#: Most actions Azure AI Search accepts in one indexing request.
MAX_BATCH_ACTIONS = 1000
#: Keep request bodies well under the service's 16 MB limit.
MAX_BATCH_BYTES = 8 * 1024 * 1024
#: Per-document statuses in a 207 answer that are worth sending again.
RETRYABLE_DOCUMENT_STATUS = frozenset({409, 422, 503})


@dataclass(frozen=True, slots=True)
class DocumentFailure:
    """One document an indexing request did not write."""

    key: str
    status_code: int
    message: str

    def __str__(self) -> str:
        return f"{self.key} (HTTP {self.status_code}: {self.message})"


def _failure_summary(operation: str, failures: Sequence[DocumentFailure]) -> str:
    listed = ", ".join(str(f) for f in failures[:20])
    more = f" and {len(failures) - 20} more" if len(failures) > 20 else ""
    return f"{operation}: {len(failures)} document(s) were not written: {listed}{more}"


class PartialWriteError(PermanentError):
    """Some documents of a write were rejected for good (the others were written)."""

    def __init__(self, operation: str, failures: Sequence[DocumentFailure]) -> None:
        self.failures = list(failures)
        super().__init__(_failure_summary(operation, self.failures))


class RetryablePartialWriteError(TransientError):
    """Some documents still failed with a retryable status after the retries (the others were written)."""

    def __init__(self, operation: str, failures: Sequence[DocumentFailure]) -> None:
        self.failures = list(failures)
        super().__init__(_failure_summary(operation, self.failures))


def batches(actions: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split actions into requests of at most :data:`MAX_BATCH_ACTIONS` and :data:`MAX_BATCH_BYTES`."""
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for action in actions:
        action_size = len(json.dumps(action, ensure_ascii=False).encode()) + 1
        if current and (len(current) >= MAX_BATCH_ACTIONS or size + action_size > MAX_BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(action)
        size += action_size
    if current:
        batches.append(current)
    return batches


#: Sends one indexing request of these actions (retrying the request itself); the per-document results.
Send = Callable[[list[dict[str, Any]]], Awaitable[Sequence[Any]]]


@dataclass(slots=True)
class _Outcome:
    """What one indexing request did to the documents it sent."""

    written: int = 0
    again: list[dict[str, Any]] = field(default_factory=list)
    retryable: list[DocumentFailure] = field(default_factory=list)
    permanent: list[DocumentFailure] = field(default_factory=list)


def _sort_results(
    operation: str, pending: Sequence[dict[str, Any]], results: Sequence[Any], ignore_missing: bool
) -> _Outcome:
    """Each sent document as written, to send again (a retryable status, or no result), skipped (gone,
    with ``ignore_missing``) or failed for good."""
    by_key = {str(r.key): r for r in results}
    outcome = _Outcome()
    for action in pending:
        key = str(action["id"])
        result = by_key.get(key)
        if result is None:
            outcome.retryable.append(DocumentFailure(key, 0, "no result for this document in the response"))
            outcome.again.append(action)
        elif result.succeeded:
            outcome.written += 1
        elif int(result.status_code) in RETRYABLE_DOCUMENT_STATUS:
            outcome.retryable.append(
                DocumentFailure(key, int(result.status_code), result.error_message or "")
            )
            outcome.again.append(action)
        elif ignore_missing and int(result.status_code) == 404:
            logger.warning("%s: document %s no longer exists; skipped", operation, key)
        else:
            outcome.permanent.append(
                DocumentFailure(key, int(result.status_code), result.error_message or "")
            )
    return outcome


async def write_batch(
    operation: str,
    actions: list[dict[str, Any]],
    send: Send,
    retry: RetrySettings,
    sleep: Sleep,
    *,
    ignore_missing: bool,
) -> int:
    """Send one batch, and its documents that failed with a retryable status again (with back-off, up to
    ``retry.document_attempts`` requests); returns how many were written.

    Raises:
        PartialWriteError: Some documents were rejected for good.
        RetryablePartialWriteError: Some documents still failed with a retryable status.
    """
    pending = actions
    written = 0
    permanent: list[DocumentFailure] = []
    retryable: list[DocumentFailure] = []
    for attempt in range(1, retry.document_attempts + 1):
        outcome = _sort_results(operation, pending, await send(pending), ignore_missing)
        written += outcome.written
        permanent += outcome.permanent
        retryable = outcome.retryable
        if not outcome.again:
            break
        pending = outcome.again
        if attempt < retry.document_attempts:
            wait = retry.delay(attempt)
            logger.warning(
                "%s: %s document(s) failed with a retryable status (attempt %s of %s); retrying in %.2fs",
                operation,
                len(pending),
                attempt,
                retry.document_attempts,
                wait,
            )
            await sleep(wait)
    if permanent:
        raise PartialWriteError(operation, permanent + retryable)
    if retryable:
        raise RetryablePartialWriteError(operation, retryable)
    return written
