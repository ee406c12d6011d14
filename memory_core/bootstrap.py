"""The composition root: the only place that reads settings and wires adapters.

Nothing happens at import time; callers build what they need when they need it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .config import Settings
from .errors import ConfigurationError, ConflictError
from .ports import ChatModel, Clock, Embedder, HistoryStore, MemoryStore, SystemClock, TurnPublisher
from .service import MemoryService

if TYPE_CHECKING:  # pragma: no cover
    from .pipeline import MemoryPipeline

__all__ = [
    "build_chat_model",
    "build_embedder",
    "build_history",
    "build_pipeline",
    "build_service",
    "build_store",
    "ensure_search_index",
    "load_settings",
]


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

        embedder: Embedder = openai_models.AzureOpenAIEmbedder.azure(
            endpoint=settings.azure_openai_endpoint,
            deployment=settings.azure_openai_embedding_deployment,
            api_version=settings.azure_openai_api_version,
            client_id=settings.azure_client_id or None,
        )
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

        store: MemoryStore = azure_search_store.AzureSearchMemoryStore.from_settings(
            settings, clock=clock, dimensions=None if embedder is None else embedder.dimensions
        )
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


def build_chat_model(settings: Settings) -> ChatModel | None:
    """The Azure OpenAI chat model, or ``None`` (rule-based extraction) when none is configured."""
    if not (settings.azure_openai_endpoint and settings.azure_openai_chat_deployment):
        return None
    from .adapters.openai_models import OpenAIChatModel

    model: ChatModel = OpenAIChatModel.azure(
        endpoint=settings.azure_openai_endpoint,
        deployment=settings.azure_openai_chat_deployment,
        api_version=settings.azure_openai_api_version,
        client_id=settings.azure_client_id or None,
    )
    return model


def build_history(settings: Settings) -> HistoryStore:
    """Where decision history and processed message ids live (beside the memories)."""
    if settings.store == "azure_search":
        from .adapters import azure_table_history

        history: HistoryStore = azure_table_history.AzureTableHistoryStore.from_settings(settings)
        return history
    from .adapters.sqlite_history import SQLiteHistoryStore

    return SQLiteHistoryStore(settings.sqlite_path)


def build_pipeline(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    store: MemoryStore | None = None,
    embedder: Embedder | None = None,
    history: HistoryStore | None = None,
    chat_model: ChatModel | None = None,
    publisher: TurnPublisher | None = None,
    recall_via_queue: bool = False,
) -> MemoryPipeline:
    """The whole write path plus the service, wired from settings (any part may be passed in).

    Args:
        recall_via_queue: Send recall updates through ``publisher`` (the ordered path) instead of
            applying them to the store at once.
    """
    from .consolidation import MemoryConsolidator
    from .extraction import MemoryExtractor
    from .pipeline import MemoryPipeline

    settings = settings or load_settings()
    clock = clock or SystemClock()
    service = build_service(settings, clock=clock, store=store, embedder=embedder)
    owned: list[Any] = []
    if chat_model is None:
        chat_model = build_chat_model(settings)
        if chat_model is not None:
            owned.append(chat_model)
    pipeline = MemoryPipeline(
        service=service,
        history=history or build_history(settings),
        extractor=MemoryExtractor(chat_model=chat_model, clock=clock),
        consolidator=MemoryConsolidator(chat_model=chat_model, policy=service.policy),
        publisher=publisher,
        owned=owned,
    )
    if recall_via_queue and publisher is not None:
        service.set_recall_sink(pipeline.queue_recall)
    return pipeline


async def ensure_search_index(settings: Settings) -> str:
    """Create or update the Azure AI Search index for the configured embedder (``index ensure``).

    Returns:
        ``"created"``, ``"updated"`` or ``"unchanged"``.
    """
    if not settings.azure_search_endpoint:
        raise ConfigurationError("AZURE_SEARCH_ENDPOINT is not set; nothing to ensure")
    from .adapters.azure_search_index import ensure_index

    embedder = build_embedder(settings)
    try:
        outcome: str = await ensure_index(settings, dimensions=embedder.dimensions)
    finally:
        close = getattr(embedder, "close", None)
        if close is not None:
            await close()
    return outcome
