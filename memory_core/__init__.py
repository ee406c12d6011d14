"""memory-core: long-term, human-like memory for AI agents.

Nothing here runs at import time beyond defining names; services are built in :mod:`memory_core.bootstrap`.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:  # pragma: no cover
    from .memory import AsyncMemory, Memory

__version__ = "0.1.0"  # the only place the version is written: pyproject.toml reads it (keep it a plain string)

__all__ = [
    "AsyncMemory",
    "HumanMemoryPolicy",
    "Memory",
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

#: Names imported on first use, so ``import memory_core`` stays light.
_LAZY = {"AsyncMemory": "memory", "Memory": "memory"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
