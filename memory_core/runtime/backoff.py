"""Retry delays: before a failed message is delivered again, and before a worker or a task tries again."""

from __future__ import annotations

__all__ = ["default_backoff", "default_retry_delay", "exponential_backoff"]


def default_backoff(delivery_count: int) -> float:
    """Seconds a failed message waits before its next delivery: 0.5, 1, 2, ... up to 30."""
    return float(min(30.0, 0.5 * 2 ** max(0, delivery_count - 1)))


def exponential_backoff(attempt: int, *, initial: float = 0.2, maximum: float = 30.0) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): ``initial`` doubling up to ``maximum``.

    Args:
        attempt: How many attempts in a row have failed (values below 1 count as 1).
        initial: The first delay.
        maximum: The largest delay.
    """
    exponent = min(max(0, attempt - 1), 64)  # 2**64 * initial is past any maximum; no float overflow
    return float(min(maximum, initial * 2.0**exponent))


def default_retry_delay(failures: int) -> float:
    """Seconds a worker waits after ``failures`` queue errors in a row: 0.2, 0.4, ... up to 30."""
    return exponential_backoff(failures)
