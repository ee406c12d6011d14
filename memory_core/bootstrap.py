"""The composition root: the only place that reads settings and wires adapters.

Nothing happens at import time; callers build what they need when they need it. Every entry point
(the Functions app, ``memory-core serve``, the CLI, the agent integrations) asks this module for one
:class:`~memory_core.service.MemoryService` and then only talks to it. Adapters never see
:class:`~memory_core.config.Settings`: they get their configuration here, as constructor arguments.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from memory_core import telemetry
from memory_core.config import Settings
from memory_core.errors import ConfigurationError, ConflictError
from memory_core.ports import (
    ChatModel,
    CheckpointStore,
    Clock,
    Closeable,
    DeadLetterStore,
    Embedder,
    HistoryStore,
    MemoryStore,
    SystemClock,
    TurnPublisher,
)
from memory_core.service import MemoryService
from memory_core.service.episodes import EpisodePolicy

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.azure.entra_tokens import EntraTokenValidator
    from memory_core.adapters.azure.service_bus import ServiceBusTurnPublisher
    from memory_core.adapters.models.openai_clients import AzureOpenAIConnection, CompatibleConnection
    from memory_core.adapters.sqlite.integrity import FileState
    from memory_core.adapters.sqlite.queue import SQLiteQueue

__all__ = [
    "build_authenticator",
    "build_chat_model",
    "build_embedder",
    "build_history",
    "build_local_queue",
    "build_publisher",
    "build_service",
    "build_store",
    "configure_log_ids",
    "configure_telemetry",
    "ensure_search_index",
    "existing_local_queue",
    "load_settings",
    "local_queue_path",
    "require_chat_model",
]

T = TypeVar("T")


class HistoryAndCheckpoints(HistoryStore, CheckpointStore, Protocol):
    """A history adapter that also keeps checkpoints (both built here do)."""


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from ``environ`` (default: the process environment) plus explicit overrides."""
    return Settings.from_env(os.environ if environ is None else environ, **overrides)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder the settings name (loaded lazily on first use), with its query embeddings cached
    (``MEMORY_QUERY_CACHE_SIZE`` distinct queries; 0: no cache)."""
    embedder = _model_embedder(settings)
    if settings.query_cache_size > 0:
        from memory_core.adapters.models.query_cache import QueryCachingEmbedder

        return QueryCachingEmbedder(embedder, size=settings.query_cache_size)
    return embedder


def _model_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "hash":
        from memory_core.adapters.models.hash_embedder import HashingEmbedder

        return HashingEmbedder()
    if settings.embedder == "azure_openai":
        openai_models = _openai_models(f"MEMORY_EMBEDDER={settings.embedder}", "openai_embedder")
        embedder: Embedder = openai_models.OpenAIEmbedder.azure(
            _azure_openai_connection(settings),
            deployment=settings.azure_openai_embedding_deployment,
            dimensions=settings.embedding_dimensions,
        )
        return embedder
    if settings.embedder in {"openai", "compatible"}:
        openai_models = _openai_models(f"MEMORY_EMBEDDER={settings.embedder}", "openai_embedder")
        embedder = openai_models.OpenAIEmbedder.openai_compatible(
            _compatible_connection(settings),
            model=settings.embedding_model,
            dimensions=settings.embedding_dimensions,
            send_dimensions=settings.embedder == "openai",
            provider=settings.embedder,
        )
        return embedder
    from memory_core.adapters.models.local_embedder import E5LocalEmbedder

    return E5LocalEmbedder(threads=settings.embedder_threads)


def build_store(
    settings: Settings, *, clock: Clock, embedder: Embedder | None = None, file_state: FileState | None = None
) -> MemoryStore:
    """The memory store the settings name.

    For the embedded store, the embedder's name is recorded in the file on first use and checked
    afterwards, so vectors of two models never mix in one store; ``file_state`` receives what the
    integrity check at open found.
    """
    if settings.store == "azure_search":
        from memory_core.adapters.azure.search_index import default_credential
        from memory_core.adapters.azure.search_store import AzureSearchMemoryStore

        store: MemoryStore = AzureSearchMemoryStore(
            settings.azure_search_endpoint,
            settings.azure_search_index_name,
            default_credential(api_key=settings.azure_search_api_key, client_id=settings.azure_client_id),
            dimensions=None if embedder is None else embedder.dimensions,
            clock=clock,
            owns_credential=True,
        )
        return store
    from memory_core.adapters.sqlite.store import SQLiteMemoryStore

    sqlite = SQLiteMemoryStore(
        settings.sqlite_path,
        clock=clock,
        policy=settings.policy(),
        vector_index_min_scope=settings.vector_index_min_scope,
        check_seconds=settings.sqlite_check_seconds,
        file_state=file_state,
    )
    if embedder is not None:
        recorded = sqlite.get_meta("embedder")
        if recorded is None:
            if not sqlite.integrity.damaged:  # (a damaged file takes no writes)
                sqlite.set_meta("embedder", embedder.name)
        elif recorded != embedder.name:
            sqlite.close_sync()
            raise ConflictError(
                f"{settings.sqlite_path} was built with the embedder {recorded!r}, not {embedder.name!r}; "
                "use the same MEMORY_EMBEDDER or another MEMORY_SQLITE_PATH"
            )
    return sqlite


def build_history(settings: Settings, *, file_state: FileState | None = None) -> HistoryAndCheckpoints | None:
    """Where decision history, processed message ids and checkpoints live (beside the memories).

    ``None`` for the Azure store without ``MEMORY_HISTORY_TABLE_ENDPOINT``: search, listing, import,
    export and forgetting work; ingestion and recall updates then say what is missing. ``file_state``:
    the state of the file shared with the embedded store on it (not checked yet: the history checks it).
    """
    if settings.store == "azure_search":
        if not settings.history_table_endpoint:
            return None
        from memory_core.adapters.azure.table_history import AzureTableHistoryStore

        history: HistoryAndCheckpoints = AzureTableHistoryStore.create(
            settings.history_table_endpoint, client_id=settings.azure_client_id or None
        )
        return history
    from memory_core.adapters.sqlite.history import SQLiteHistoryStore

    return SQLiteHistoryStore(
        settings.sqlite_path, file_state=file_state, check_seconds=settings.sqlite_check_seconds
    )


def _openai_models(what: str, module: str) -> ModuleType:
    """The ``openai`` adapter ``module`` (``openai_chat``, ``openai_embedder``), or a message naming the
    extra that brings the ``openai`` package."""
    try:
        openai_models = importlib.import_module(f"memory_core.adapters.models.{module}")
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"{what} needs the openai package: pip install 'memory-core[llm]' (or [azure]); {exc}"
        ) from exc
    return openai_models


def _azure_openai_connection(settings: Settings) -> AzureOpenAIConnection:
    """How the chat model and the embedder reach Azure OpenAI: the endpoint, the API version, the
    managed identity, the timeout and the extra headers (after :func:`_openai_models`)."""
    from memory_core.adapters.models.openai_clients import AzureOpenAIConnection

    return AzureOpenAIConnection(
        endpoint=settings.azure_openai_endpoint,
        api_version=settings.azure_openai_api_version,
        client_id=settings.azure_client_id or None,
        timeout=settings.llm_timeout_seconds,
        headers=settings.llm_header_map(),
    )


def _compatible_connection(settings: Settings) -> CompatibleConnection:
    """How the chat model and the embedder reach OpenAI or a compatible server: the API root, the key,
    the timeout and the extra headers (after :func:`_openai_models`)."""
    from memory_core.adapters.models.openai_clients import CompatibleConnection

    return CompatibleConnection(
        base_url=settings.llm_api_root,
        api_key=settings.llm_api_key or None,
        timeout=settings.llm_timeout_seconds,
        headers=settings.llm_header_map(),
    )


def require_chat_model(settings: Settings, what: str) -> ChatModel:
    """The configured chat model, or a message saying how to configure one (``what`` needs it).

    Raises:
        ConfigurationError: No chat model is configured (``MEMORY_LLM_PROVIDER`` resolves to ``none``).
    """
    model = build_chat_model(settings)
    if model is None:
        raise ConfigurationError(
            f"{what} needs a chat model: set MEMORY_LLM_PROVIDER (azure, openai or compatible) and its "
            "settings (see the README's 'Using an LLM')"
        )
    return model


def build_chat_model(settings: Settings) -> ChatModel | None:
    """The chat model of extraction and consolidation (``MEMORY_LLM_PROVIDER``), or ``None`` (rules).

    ``azure``: Azure OpenAI with Microsoft Entra ID on the deployment or ``/openai/v1`` endpoint;
    ``openai`` and ``compatible``: the ``openai`` client on ``MEMORY_LLM_BASE_URL`` with
    ``MEMORY_LLM_API_KEY`` (optional for ``compatible``). Sampling parameters are never sent unless asked
    for, and structured output falls back to JSON mode where a server lacks it
    (:class:`~memory_core.adapters.models.openai_chat.OpenAIChatModel`).
    """
    provider = settings.chat_provider
    if provider == "none":
        return None
    OpenAIChatModel = _openai_models(f"MEMORY_LLM_PROVIDER={provider}", "openai_chat").OpenAIChatModel

    model: ChatModel
    if provider == "azure":
        model = OpenAIChatModel.azure(
            _azure_openai_connection(settings), deployment=settings.azure_openai_chat_deployment
        )
    else:
        model = OpenAIChatModel.openai_compatible(_compatible_connection(settings), model=settings.llm_model)
    return model


def build_publisher(settings: Settings) -> ServiceBusTurnPublisher:
    """A Service Bus publisher on ``ServiceBusConnection__fullyQualifiedNamespace`` / ``MEMORY_TURNS_QUEUE``.

    It authenticates with ``DefaultAzureCredential`` (the user-assigned managed identity
    ``AZURE_CLIENT_ID`` when set), which it closes with itself.
    """
    if not settings.servicebus_namespace:
        raise ConfigurationError("ServiceBusConnection__fullyQualifiedNamespace is not set")
    from azure.identity.aio import DefaultAzureCredential

    from memory_core.adapters.azure.service_bus import ServiceBusTurnPublisher

    credential = DefaultAzureCredential(managed_identity_client_id=settings.azure_client_id or None)
    return ServiceBusTurnPublisher(
        settings.servicebus_namespace, settings.turns_queue, credential, owns_credential=True
    )


def local_queue_path(settings: Settings) -> str:
    """The embedded queue file of the store: ``<MEMORY_SQLITE_PATH>.queue``."""
    from memory_core.adapters.sqlite.queue import default_queue_path

    return default_queue_path(settings.sqlite_path)


def build_local_queue(
    settings: Settings, *, path: str | None = None, lock_seconds: float = 60.0, max_deliveries: int = 10
) -> SQLiteQueue:
    """The embedded durable queue (``MEMORY_TURNS_QUEUE`` in ``<store file>.queue`` unless ``path``):
    what ``memory-core serve`` drains and what the in-process provider publishes to."""
    from memory_core.adapters.sqlite.queue import SQLiteQueue

    return SQLiteQueue(
        path or local_queue_path(settings),
        queue=settings.turns_queue,
        lock_seconds=lock_seconds,
        max_deliveries=max_deliveries,
        check_seconds=settings.sqlite_check_seconds,
    )


def existing_local_queue(settings: Settings) -> SQLiteQueue | None:
    """The embedded queue beside the store file, opened, when there is one: ``None`` for the Azure
    store, an in-memory store, or a store that never had a queue (nothing is created). A purge (and an
    export) of the embedded store reaches into it: turns still waiting there hold the user's words.
    The caller closes it."""
    if settings.store == "azure_search" or settings.sqlite_path == ":memory:":
        return None
    if not os.path.exists(local_queue_path(settings)):
        return None
    return build_local_queue(settings)


def build_service(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    store: MemoryStore | None = None,
    embedder: Embedder | None = None,
    history: HistoryStore | None = None,
    chat_model: ChatModel | None = None,
    publisher: TurnPublisher | None = None,
    recall_via_queue: bool = False,
    checkpoints: CheckpointStore | None = None,
    dead_letters: DeadLetterStore | None = None,
    share_fairly: bool = False,
    batch_embeddings: bool = False,
    file_state: FileState | None = None,
) -> MemoryService:
    """The one :class:`MemoryService`, wired from settings (any adapter may be passed in instead).

    Args:
        settings: The settings (default: from the environment).
        clock: Source of "now" (default: the wall clock).
        store: The memory store (default: the one the settings name).
        embedder: The embedder (default: the one the settings name).
        history: Decision history (default: beside the store; the SQLite file or the Azure table).
        chat_model: The LLM of extraction and consolidation (default: the configured one, or rules).
        publisher: The ordered queue turns go to (``None``: turns are ingested at once).
        recall_via_queue: Send recall updates through ``publisher`` (the ordered path) instead of
            applying them to the store at once.
        checkpoints: Where the scheduled forgetting keeps its bookmarks (default: the history).
        dead_letters: Where poison messages are set aside (default: the Azure history table; the
            embedded queue dead-letters by itself).
        share_fairly: For a long-running server on one event loop (``memory-core serve``): the
            embedded store and history it builds run their SQLite calls on their own threads
            (:mod:`memory_core.runtime.offload`), and searches and ingestion take turns at the
            embedder (:mod:`memory_core.runtime.sharing`), where passages asked for while it is busy
            are embedded in one call (:mod:`memory_core.runtime.batching`).
        batch_embeddings: Only the batching of ``share_fairly``, for callers that ingest turns of
            several scopes at once without a server's searches beside them (``memory-core ingest
            --concurrency``, the Functions app's concurrent sessions): passages asked for while the
            embedder is busy are embedded in one call; queries and storage are left as they are.
        file_state: Receives the integrity of the embedded store's file (what the check at open
            found; damaged once a write fails so), for a caller that watches it (``serve``'s health).
    """
    from memory_core.service.consolidation.consolidator import MemoryConsolidator
    from memory_core.service.extraction.extractor import MemoryExtractor

    settings = settings or load_settings()
    clock = clock or SystemClock()
    owned: list[Closeable] = []
    if embedder is None:
        embedder = build_embedder(settings)
        owned.append(embedder)
    if file_state is None:
        from memory_core.adapters.sqlite.integrity import FileState

        file_state = FileState()  # the embedded store checks its file; its history then need not
    if store is None:
        built_store = build_store(settings, clock=clock, embedder=embedder, file_state=file_state)
        store = _fairly(settings, built_store, "memory-store", share_fairly=share_fairly)
    configure_log_ids(settings)
    if history is None:
        built = build_history(settings, file_state=file_state)
        if built is not None:
            built = _fairly(settings, built, "memory-history", share_fairly=share_fairly)
        history = built
        # Both history adapters built here keep checkpoints; the Azure one also keeps dead letters
        # (the Functions binding cannot dead-letter a message itself; the embedded queue can).
        checkpoints = checkpoints or built
        if settings.store == "azure_search" and dead_letters is None and built is not None:
            dead_letters = cast(DeadLetterStore, built)
    if chat_model is None:
        chat_model = build_chat_model(settings)
        if chat_model is not None:
            owned.append(chat_model)
    policy = settings.policy()
    embedder = _shared_embedder(embedder, share_fairly=share_fairly, batch_embeddings=batch_embeddings)
    return MemoryService(
        store=store,
        embedder=embedder,
        policy=policy,
        clock=clock,
        history=history,
        extractor=MemoryExtractor(chat_model=chat_model, clock=clock),
        consolidator=MemoryConsolidator(chat_model=chat_model, policy=policy),
        publisher=publisher,
        recall_via_queue=recall_via_queue and publisher is not None,
        checkpoints=checkpoints,
        dead_letters=dead_letters,
        forget_tolerance=settings.forget_tolerance,
        episodes=EpisodePolicy(enabled=settings.episodes, importance=settings.episode_importance),
        owned=owned,
    )


def _shared_embedder(embedder: Embedder, *, share_fairly: bool, batch_embeddings: bool) -> Embedder:
    """``embedder`` as ``build_service``'s ``share_fairly`` and ``batch_embeddings`` ask."""
    if share_fairly:
        from memory_core.runtime.batching import BatchingEmbedder
        from memory_core.runtime.sharing import FairEmbedder

        # passages asked for while the model is busy (turns of other scopes) go in one call
        return BatchingEmbedder(FairEmbedder(embedder))
    if batch_embeddings:
        from memory_core.runtime.batching import BatchingEmbedder

        return BatchingEmbedder(embedder)
    return embedder


def _fairly(settings: Settings, adapter: T, name: str, *, share_fairly: bool) -> T:
    """``adapter`` with its (blocking SQLite) calls on a thread of its own, when ``share_fairly`` and
    the store is the embedded one."""
    if not share_fairly or settings.store == "azure_search":
        return adapter
    from memory_core.runtime.offload import StorageThread, offloaded

    return offloaded(adapter, StorageThread(name))


def build_authenticator(settings: Settings) -> EntraTokenValidator | None:
    """The HTTP API's Microsoft Entra ID token validator, or ``None`` when it is not configured.

    ``MEMORY_AUTH_TENANT_ID`` and ``MEMORY_AUTH_AUDIENCE`` turn it on; ``MEMORY_AUTH_USER_ID_CLAIM``,
    ``MEMORY_AUTH_AGENT_BINDINGS`` and ``MEMORY_AUTH_AUTHORITY`` shape it. Nothing is fetched here:
    the tenant's keys are read on the first request that needs them.
    """
    if not settings.auth_enabled:
        return None
    from memory_core.adapters.azure.entra_tokens import EntraTokenValidator

    return EntraTokenValidator(
        tenant_id=settings.auth_tenant_id,
        audiences=settings.auth_audiences(),
        user_id_claim=settings.auth_user_id_claim,
        agent_bindings=settings.agent_binding_map(),
        authority=settings.auth_authority,
    )


#: The logger of the Azure SDK's request and response lines.
_SDK_REQUEST_LOGGER = "azure.core.pipeline.policies.http_logging_policy"


def configure_log_ids(settings: Settings) -> None:
    """Choose the key of the hashes logs name user, agent and session ids by (docs/security.md),
    and keep the Azure SDK's request lines (URLs that hold scope ids) out of the logs.

    The embedded store keeps a random key of the install beside its file, so every process on it
    tags alike and a guessed address cannot be checked against the logs; an in-memory store gets a
    key of its process. The Function App's instances then take the key they share
    (:mod:`memory_core.entrypoints.functions.log_key`); without a store file of its own, until then,
    ids are hashed without a key.
    """
    import logging
    import secrets

    from memory_core.domain.log_ids import use_log_key

    # The Azure SDK logs every request's URL at INFO; a table entity's URL holds its PartitionKey,
    # the scope ``user|agent``. Kept at WARNING unless the host set a level of its own.
    sdk_requests = logging.getLogger(_SDK_REQUEST_LOGGER)
    if sdk_requests.level == logging.NOTSET:
        sdk_requests.setLevel(logging.WARNING)
    if settings.store != "sqlite":
        use_log_key(None)
    elif settings.sqlite_path == ":memory:":
        use_log_key(secrets.token_bytes(32))
    else:
        from memory_core.adapters.sqlite.log_key import install_log_key

        use_log_key(install_log_key(settings.sqlite_path))


def configure_telemetry(settings: Settings) -> telemetry.TelemetryStatus:
    """Set up telemetry once per process: Application Insights when its connection string is set
    (Microsoft Entra ID ingestion with the managed identity), else the console if asked, else off."""
    exporter = None
    if settings.applicationinsights_connection_string:

        def exporter() -> str:
            from memory_core.adapters.azure.monitor import configure_azure_monitor_exporter

            configure_azure_monitor_exporter(
                settings.applicationinsights_connection_string, client_id=settings.azure_client_id
            )
            return "azure_monitor"

    return telemetry.configure_telemetry(
        content=settings.telemetry_content, console=settings.telemetry_console, exporter=exporter
    )


async def ensure_search_index(settings: Settings) -> str:
    """Create or update the Azure AI Search index for the configured embedder (``index ensure``).

    Returns:
        ``"created"``, ``"updated"`` or ``"unchanged"``.
    """
    if not settings.azure_search_endpoint:
        raise ConfigurationError("AZURE_SEARCH_ENDPOINT is not set; nothing to ensure")
    from memory_core.adapters.azure.search_index import close_credential, default_credential, ensure_index

    embedder = build_embedder(settings)
    credential = default_credential(api_key=settings.azure_search_api_key, client_id=settings.azure_client_id)
    try:
        outcome: str = await ensure_index(
            settings.azure_search_endpoint,
            settings.azure_search_index_name,
            credential,
            dimensions=embedder.dimensions,
        )
    finally:
        await close_credential(credential)
        await embedder.close()
    return outcome
