"""The composition root: the only place that reads settings and wires adapters.

Nothing happens at import time; callers build what they need when they need it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .config import Settings
from .errors import ConfigurationError, ConflictError
from .ports import Clock, Embedder, MemoryStore, SystemClock
from .service import MemoryService

__all__ = ["build_embedder", "build_service", "build_store", "load_settings"]


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from ``environ`` (default: the process environment) plus explicit overrides."""
    return Settings.from_env(os.environ if environ is None else environ, **overrides)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder the settings name (loaded lazily on first use)."""
    if settings.embedder == "hash":
        from .adapters.hash_embedder import HashingEmbedder

        return HashingEmbedder()
    if settings.embedder == "azure_openai":
        from .adapters import openai_models

        factory = getattr(openai_models, "AzureOpenAIEmbedder", None)
        if factory is None:
            raise ConfigurationError("MEMORY_EMBEDDER=azure_openai is not available in this build")
        embedder: Embedder = factory.from_settings(settings)
        return embedder
    from .adapters.local_embedder import E5LocalEmbedder

    return E5LocalEmbedder(threads=settings.embedder_threads)


def build_store(settings: Settings, *, clock: Clock, embedder: Embedder | None = None) -> MemoryStore:
    """The memory store the settings name.

    For the embedded store, the embedder's name is recorded in the file on first use and checked
    afterwards, so vectors of two models never mix in one store.
    """
    if settings.store == "azure_search":
        from .adapters import azure_search_store

        store: MemoryStore = azure_search_store.AzureSearchMemoryStore.from_settings(settings, clock=clock)
        return store
    from .adapters.sqlite_store import SQLiteMemoryStore

    sqlite = SQLiteMemoryStore(settings.sqlite_path, clock=clock)
    if embedder is not None:
        recorded = sqlite.get_meta("embedder")
        if recorded is None:
            sqlite.set_meta("embedder", embedder.name)
        elif recorded != embedder.name:
            raise ConflictError(
                f"{settings.sqlite_path} was built with the embedder {recorded!r}, not {embedder.name!r}; "
                "use the same MEMORY_EMBEDDER or another MEMORY_SQLITE_PATH"
            )
    return sqlite


def build_service(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    store: MemoryStore | None = None,
    embedder: Embedder | None = None,
) -> MemoryService:
    """A ready :class:`MemoryService` for the settings (adapters may be passed in instead)."""
    settings = settings or load_settings()
    clock = clock or SystemClock()
    embedder = embedder or build_embedder(settings)
    store = store or build_store(settings, clock=clock, embedder=embedder)
    return MemoryService(
        store=store,
        embedder=embedder,
        policy=settings.policy(),
        clock=clock,
        forget_tolerance=settings.forget_tolerance,
    )
