"""Errors raised by memory-core.

Every error derives from :class:`MemoryCoreError`. Two families tell a queue what to do with a message:
:class:`TransientError` (retry: throttling, timeouts, 5xx) and :class:`PermanentError` (do not retry:
bad input, schema violations). Validation errors are permanent and name the offending field.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ConfigurationError",
    "ConflictError",
    "DamagedFileError",
    "ForbiddenError",
    "InputError",
    "MemoryCoreError",
    "NotFoundError",
    "PermanentError",
    "StorageFullError",
    "TransientError",
    "UnsupportedError",
    "ValidationError",
]


class MemoryCoreError(Exception):
    """Root of every error memory-core raises on purpose."""


class TransientError(MemoryCoreError):
    """A failure that may succeed when retried (throttling, timeouts, unavailable services)."""


class PermanentError(MemoryCoreError):
    """A failure that retrying cannot fix (bad input, unknown schema)."""


class InputError(PermanentError):
    """What the caller gave cannot be used (a file that cannot be read, arguments that contradict each
    other): the command line answers it with exit status 2, unlike a failure of the service (1)."""


class StorageFullError(TransientError):
    """The disk holding a store, history or queue file is full (SQLite's "database or disk is full").

    The write was rolled back as a whole, so nothing is half-written; it succeeds when retried once
    space is freed (a queued turn is delivered again).

    Args:
        path: The file that could not grow.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"the disk holding {path} is full (database or disk is full): nothing was written; "
            "free some space and retry"
        )


class DamagedFileError(TransientError):
    """A store or history file that SQLite's integrity check (or a write) found damaged: writes to it are
    refused, so nothing more is written into damaged pages; they succeed once the file is restored
    (a queued turn waits in the queue meanwhile). The command line exits with status 2.

    Args:
        path: The damaged file.
        found: What the check found (SQLite's first problem).
    """

    def __init__(self, path: str, found: str) -> None:
        self.path = path
        self.found = found
        super().__init__(
            f"{path} is damaged ({found}): nothing was written to it; run `memory-core doctor`, then restore "
            "it from a backup or rebuild it from an export (see docs/operations.md, \"A damaged file\")"
        )


class ValidationError(PermanentError, ValueError):
    """Input that breaks a documented rule.

    Args:
        field: Name of the offending field (``user_id``, ``top``, ...); the first, when there are more.
        message: What is wrong with it, in words a caller can act on (when there are more problems,
            it names each of them too).
        problems: Every problem, as ``(field, message)`` pairs, the first being ``field`` and its own
            message (default: that one problem).
    """

    def __init__(self, field: str, message: str, problems: tuple[tuple[str, str], ...] | None = None) -> None:
        self.field = field
        self.message = message
        self.problems: tuple[tuple[str, str], ...] = problems or ((field, message),)
        super().__init__(f"{field}: {message}")

    @classmethod
    def of(cls, problems: list[tuple[str, str]]) -> ValidationError:
        """One error for every problem found: the first one's field, a message naming them all.

        Args:
            problems: ``(field, message)`` pairs, at least one.
        """
        field, first = problems[0]
        if len(problems) == 1:
            return cls(field, first)
        others = "; ".join(f"{where}: {what}" for where, what in problems[1:])
        return cls(field, f"{first} (also {others})", tuple(problems))


class NotFoundError(PermanentError, LookupError):
    """The requested memory does not exist in the caller's scope."""


class ConflictError(PermanentError):
    """The store's state does not allow the operation (for example an embedding of another size)."""


class UnsupportedError(PermanentError):
    """This deployment cannot do what was asked (its store lacks the capability; HTTP 501)."""


class AuthenticationError(PermanentError):
    """The caller did not prove who they are: no bearer token, or one that does not validate (HTTP 401).

    Args:
        message: What is wrong, in words a caller can act on (never the token itself).
        error: The RFC 6750 error code for ``WWW-Authenticate`` (``invalid_token``), or ``None`` when
            the request carried no credentials at all.
    """

    def __init__(self, message: str, *, error: str | None = "invalid_token") -> None:
        self.error = error
        super().__init__(message)


class ForbiddenError(PermanentError):
    """The caller is known but may not do this, or not for this scope (HTTP 403); the message says what is missing."""


class ConfigurationError(MemoryCoreError):
    """Settings are missing or inconsistent."""
