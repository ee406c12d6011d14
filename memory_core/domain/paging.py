"""What one page of a keyset-paged scan of a scope asks for (:meth:`~memory_core.ports.MemoryStore.scan`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_core.domain.filters import Filter
from memory_core.domain.records import MemoryStatus
from memory_core.errors import ValidationError

__all__ = ["MAX_SCAN_LIMIT", "PageRequest"]

#: Most records one page of a scan holds.
MAX_SCAN_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class PageRequest:
    """One page of a scope's records in id order, as a scan reads them.

    Attributes:
        statuses: Records of these statuses only (``None``: every status).
        after: The cursor: records whose id comes after it (``None``: from the first id).
        limit: At most this many records (1 to :data:`MAX_SCAN_LIMIT`).
        with_embedding: The records carry their embeddings.
        current_at: Only the records current at this time: none superseded by then (no ``valid_until``,
            or a later one). ``None``: current or not (every record, as a backup or a sweep reads them).
        filters: Only the records this filter keeps (:func:`~memory_core.domain.filters.parse_filters`:
            the conditions a search takes; ``None``: no condition).

    Raises:
        ValidationError: ``limit`` is not an integer between 1 and :data:`MAX_SCAN_LIMIT` (names it).
    """

    statuses: Sequence[MemoryStatus] | None = None
    after: str | None = None
    limit: int = 100
    with_embedding: bool = False
    current_at: datetime | None = None
    filters: Filter | None = None

    def __post_init__(self) -> None:
        limit = self.limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SCAN_LIMIT:
            raise ValidationError("limit", f"must be an integer between 1 and {MAX_SCAN_LIMIT}")
