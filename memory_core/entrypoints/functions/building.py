"""What the Functions app builds from its settings: the memory service, and the HTTP API with its token
validator (or, without one, a warning; or, with routes bound without the Functions key, a refusal)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memory_core import bootstrap
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.config import Settings
    from memory_core.domain.access import Authenticator
    from memory_core.service import MemoryService

__all__ = ["build_api", "build_service"]

logger = logging.getLogger("memory_core.functions")


def build_service() -> tuple[MemoryService, Settings]:
    """The memory service of this worker, from the app settings (telemetry configured first)."""
    settings = bootstrap.load_settings()
    bootstrap.configure_telemetry(settings)
    publisher = bootstrap.build_publisher(settings) if settings.servicebus_namespace else None
    # The trigger runs up to maxConcurrentSessions (host.json) sessions at once in this process:
    # passages asked for while the embedder is busy go in one call (memory_core.runtime.batching).
    # Only batching, no fair gate: searches embed their queries straight away, not in turn with
    # ingestion (the embedder is a remote service here; the gate shares a local model's cores).
    service = bootstrap.build_service(settings, publisher=publisher, recall_via_queue=True, batch_embeddings=True)
    logger.info(
        "memory-core ready: store %s, publisher %s",
        settings.store,
        "service bus" if publisher else "inline",
    )
    return service, settings


def build_api(
    service: MemoryService,
    authenticator: Authenticator | None,
    settings: Settings | None,
    *,
    keyless: bool,
) -> MemoryApi:
    """The HTTP API with the Entra ID validator the settings describe (or none, with a warning).

    Args:
        service: The memory service.
        authenticator: An authenticator to use instead of the settings' one.
        settings: The app settings (``None``: read them now).
        keyless: Whether the routes were bound without the Functions key (Entra ID settings present).

    Raises:
        ConfigurationError: The routes were bound without the Functions key but no validator can be
            built: serving them would open every route to everyone.
    """
    settings = settings or bootstrap.load_settings()
    if authenticator is None:
        authenticator = bootstrap.build_authenticator(settings)
    if authenticator is None:
        if keyless:
            raise ConfigurationError(
                "the HTTP routes were bound without the Functions key because MEMORY_AUTH_TENANT_ID and "
                "MEMORY_AUTH_AUDIENCE were set, but no token validator is configured now; refusing to serve"
            )
        logger.warning(
            "Microsoft Entra ID validation is off (MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE are not "
            "set): the HTTP API is protected by the Functions key only, and every key holder may read, "
            "change and erase every user's memories"
        )
    else:
        logger.info("HTTP API: Microsoft Entra ID tokens are validated and roles enforced")
    return MemoryApi(service, authenticator=authenticator, heavy_operations=settings.heavy_operations)
