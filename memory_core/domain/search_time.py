"""The time a search asks about, as data both stores apply: the window its time words name and the
moment an "as of" read is current at.

A memory's span is its event span (``event_at`` to ``event_until``; a point without ``event_until``),
or, lacking one, its validity (``valid_from`` to ``valid_until``, open-ended while current), or, lacking
that, the moment it was made (``created_at``). A memory of something that happened at one time (an
episode, or a fact of a category in :data:`MOMENT_CATEGORIES`: "I went hiking", a plan without a date)
that states no date of its own is a point at its ``valid_from`` (when it was said), not a state that
holds from then on: "went hiking" said on Tuesday is not of next week. It is *in* a window ``[start, end)`` when the two
overlap: it starts before the window ends and ends after the window starts (a point: at or after the
start). The search service filters to the window when some memory of the search is in it and runs the
search without it otherwise (:data:`WINDOW_RULE`, measured in ``docs/evaluation.md``).

A memory is *current at* ``T`` when its validity (``valid_from``, else ``created_at``) began at or
before ``T`` and has not ended by then (no ``valid_until``, or a later one): the value a supersession
closed is found for a time inside its span, the value that replaced it only from its own start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np

from memory_core.domain.records import MemoryKind, MemoryRecord

__all__ = [
    "MOMENT_CATEGORIES",
    "WINDOW_RULE",
    "TimeWindow",
    "WindowRule",
    "current_at_mask",
    "in_window",
    "in_window_mask",
    "inside_window",
    "moment_mask",
]


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open UTC span a query asks about: ``start`` inclusive, ``end`` exclusive."""

    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class WindowRule:
    """How a query's window prefers the memories in it.

    Attributes:
        how: ``filter``: only memories in the window (the search runs again without it when none is);
            ``boost``: every memory, those in the window with their score multiplied by ``boost``.
        boost: The factor of a memory in the window (``boost`` only; as a ranking profile's boost, on the
            fused score).
        inside: The factor of a memory whose event span lies inside the window (the memory *of* that
            time, before those that only overlap it: a month-long trip or a fact that held all along).
    """

    how: Literal["filter", "boost"]
    boost: float = 1.0
    inside: float = 1.0


#: The rule searches use. Measured on the 21 probes of ``tests/scenarios/test_time_in_queries.py``
#: (first hit, hashing embedder / e5): time words ignored 0.571 / 0.714; filter 0.952 / 0.952; boost
#: 1.5, 2 or 4 0.952 / 0.952; filter with ``inside`` 1.25, 1.5 or 2 **1.0 / 1.0**; boost 2 with inside
#: 1.5 0.952 / 1.0. A filter also keeps a memory of another time out of the answer however well its
#: words match, and is what Azure AI Search can express (a scoring function cannot name a window).
WINDOW_RULE = WindowRule("filter", inside=1.5)


#: The categories of a memory of something that happened (or is to happen) once: without an event time
#: of its own it is a point at its ``valid_from``, not a validity that lasts. Episodes are points too,
#: whatever their category.
MOMENT_CATEGORIES: tuple[str, ...] = ("episode", "event", "plan")


def moment_mask(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Which memories are of something that happened once (``columns["_kind"]`` and ``["_category"]``:
    an episode, or a category in :data:`MOMENT_CATEGORIES`)."""
    kind, category = columns["_kind"], columns["_category"]
    result: np.ndarray = (kind == MemoryKind.EPISODE.value) | np.isin(category, MOMENT_CATEGORIES)
    return result


def _starts(event_at: np.ndarray, valid_from: np.ndarray, created_at: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.where(
        ~np.isnan(event_at), event_at, np.where(~np.isnan(valid_from), valid_from, created_at)
    )
    return result


def in_window_mask(columns: dict[str, np.ndarray], window: TimeWindow) -> np.ndarray:
    """Which memories' spans overlap ``window`` (``columns``: epoch seconds, NaN for none; ``_kind`` and
    ``_category`` for :func:`moment_mask`)."""
    start, end = window.start.timestamp(), window.end.timestamp()
    event_at, event_until = columns["event_at"], columns["event_until"]
    valid_from, valid_until = columns["valid_from"], columns["valid_until"]
    created_at = columns["created_at"]
    has_event = ~np.isnan(event_at)
    # an undated memory of a moment is a point at valid_from (else created_at): no validity span
    has_validity = ~has_event & ~np.isnan(valid_from) & ~moment_mask(columns)
    begins = _starts(event_at, valid_from, created_at)
    # The end of the span: event_until, or the event's own instant; valid_until, or never; created_at.
    ends = np.where(
        has_event,
        np.where(np.isnan(event_until), np.nan, event_until),
        np.where(has_validity, np.where(np.isnan(valid_until), np.inf, valid_until), np.nan),
    )
    point = np.isnan(ends)
    overlaps = (begins < end) & np.where(point, begins >= start, np.nan_to_num(ends, nan=-np.inf) > start)
    result: np.ndarray = overlaps
    return result


def current_at_mask(columns: dict[str, np.ndarray], at: datetime) -> np.ndarray:
    """Which memories were current at ``at``: valid from (``valid_from``, else ``created_at``) at or
    before it, and not closed by then."""
    t = at.timestamp()
    valid_from, valid_until = columns["valid_from"], columns["valid_until"]
    began = np.where(np.isnan(valid_from), columns["created_at"], valid_from) <= t
    result: np.ndarray = began & (np.isnan(valid_until) | (valid_until > t))
    return result


def _epoch(value: datetime | None) -> float:
    return float("nan") if value is None else value.timestamp()


def in_window(record: MemoryRecord, window: TimeWindow) -> bool:
    """Whether ``record``'s span overlaps ``window`` (:func:`in_window_mask` of one record)."""
    columns = {
        name: np.asarray([_epoch(getattr(record, name))], dtype=np.float64)
        for name in ("event_at", "event_until", "valid_from", "valid_until", "created_at")
    }
    columns["_kind"] = np.asarray([record.kind.value], dtype=object)
    columns["_category"] = np.asarray([record.category], dtype=object)
    return bool(in_window_mask(columns, window)[0])


def inside_window(record: MemoryRecord, window: TimeWindow) -> bool:
    """Whether ``record`` has an event span that lies inside ``window`` (a point: inside it)."""
    if record.event_at is None:
        return False
    end = record.event_until or record.event_at
    return window.start <= record.event_at and end <= window.end and record.event_at < window.end
