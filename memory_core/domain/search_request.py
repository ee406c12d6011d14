"""What one search of a scope asks a store for (:meth:`~memory_core.ports.MemoryStore.search`).

Not the body of ``POST /memories/search`` (:class:`memory_core.contract.views.SearchRequest`), which
the service turns into one of these after embedding the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions
from memory_core.domain.search_time import TimeWindow

__all__ = ["SearchRequest"]


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search of a scope's memories, as a store runs it.

    Nothing is checked or copied here: the store refuses a bad scope, query, vector or option (each
    store with the errors it always raised), and the vector is the caller's own sequence of floats (a
    list or a tuple), never copied.

    Attributes:
        scope: Whose memories.
        query: The query text (blank: no keyword leg; in keyword mode, every memory the filters allow).
        vector: The query's embedding where the mode has a vector leg (``None``: keyword only).
        options: The mode, ranking profile, filters and ``top`` (``as_of``: what was current then).
        window: Only memories whose span overlaps this window (:mod:`memory_core.domain.search_time`),
            earlier values included unless closed before it began; ``None``: no window.
    """

    scope: Scope
    query: str
    vector: Sequence[float] | None = None
    options: MemorySearchOptions = field(default_factory=MemorySearchOptions)
    window: TimeWindow | None = None
