"""memory-core: long-term, human-like memory for AI agents.

Nothing here runs at import time beyond defining names; services are built in :mod:`memory_core.bootstrap`.
"""

from .models import (
    MemoryRecord,
    MemorySearchOptions,
    MemoryStatus,
    RankingProfile,
    Scope,
    SearchHit,
    SearchMode,
    SearchResult,
)
from .policy import HumanMemoryPolicy

__version__ = "0.1.0"

__all__ = [
    "HumanMemoryPolicy",
    "MemoryRecord",
    "MemorySearchOptions",
    "MemoryStatus",
    "RankingProfile",
    "Scope",
    "SearchHit",
    "SearchMode",
    "SearchResult",
    "__version__",
]
