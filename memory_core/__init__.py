"""memory-core: long-term, human-like memory for AI agents.

Nothing here runs at import time beyond defining names; services are built in :mod:`memory_core.bootstrap`.
"""

from typing import TYPE_CHECKING, Any

from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import DEFAULT_AGENT_ID, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchHit, SearchMode, SearchResult
from memory_core.errors import (
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    DamagedFileError,
    ForbiddenError,
    InputError,
    MemoryCoreError,
    NotFoundError,
    PermanentError,
    StorageFullError,
    TransientError,
    UnsupportedError,
    ValidationError,
)
from memory_core.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.entrypoints.python_api.async_memory import AsyncMemory
    from memory_core.entrypoints.python_api.memory import Memory
    from memory_core.integrations.agent_framework import MemoryContextProvider as MemoryContextProvider
    from memory_core.integrations.agent_framework import (
        MemoryCoreContextProvider as MemoryCoreContextProvider,
    )


__all__ = [
    "DEFAULT_AGENT_ID",
    "AsyncMemory",
    "AuthenticationError",
    "ConfigurationError",
    "ConflictError",
    "DamagedFileError",
    "ForbiddenError",
    "HumanMemoryPolicy",
    "InputError",
    "Memory",
    "MemoryCoreError",
    "MemoryRecord",
    "MemorySearchOptions",
    "MemoryStatus",
    "NotFoundError",
    "PermanentError",
    "RankingProfile",
    "Scope",
    "SearchHit",
    "SearchMode",
    "SearchResult",
    "StorageFullError",
    "TransientError",
    "UnsupportedError",
    "ValidationError",
    "__version__",
]

#: Names imported on first use, so ``import memory_core`` stays light. The Agent Framework provider
#: (``MemoryCoreContextProvider``, and ``MemoryContextProvider``, its earlier name) needs the ``agent``
#: extra, so it is importable from here but left out of ``__all__``: ``import *`` works without the extra.
_LAZY = {
    "AsyncMemory": "entrypoints.python_api.async_memory",
    "Memory": "entrypoints.python_api.memory",
    "MemoryContextProvider": "integrations.agent_framework",
    "MemoryCoreContextProvider": "integrations.agent_framework",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
