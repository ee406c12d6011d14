"""Integrations of memory-core with agent frameworks.

The Agent Framework provider (``agent_framework``, with ``recall_format`` and ``turns``) needs the
``agent`` extra (``pip install 'memory-core[agent]'``); it is imported only when asked for, so this
package imports without Agent Framework installed. The provider is ``MemoryCoreContextProvider``;
``MemoryContextProvider`` is the same class under its earlier name.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_SOURCE_ID",
    "LocalMemoryClient",
    "MemoryClient",
    "MemoryContextProvider",
    "MemoryCoreContextProvider",
    "RemoteMemoryClient",
    "TurnOutbox",
]

_LAZY = {
    "DEFAULT_SOURCE_ID": "memory_core.integrations.agent_framework",
    "MemoryContextProvider": "memory_core.integrations.agent_framework",
    "MemoryCoreContextProvider": "memory_core.integrations.agent_framework",
    "LocalMemoryClient": "memory_core.client.local",
    "MemoryClient": "memory_core.client.base",
    "RemoteMemoryClient": "memory_core.client.remote",
    "TurnOutbox": "memory_core.integrations.outbox",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
