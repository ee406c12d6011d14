"""The Functions app's memory service and HTTP API, built on first use, once per worker process.

Light to import: the app indexes its functions with it, and what builds the service is handed in (the
app imports it on first use).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_core.entrypoints.functions.log_key import share_log_key

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.config import Settings
    from memory_core.domain.access import Authenticator
    from memory_core.entrypoints.http.dispatcher import MemoryApi
    from memory_core.service import MemoryService

__all__ = ["ApiBuilder", "FunctionsRuntime", "ServiceBuilder"]

#: Builds the service from the app settings (and returns the settings it read).
ServiceBuilder = Callable[[], "tuple[MemoryService, Settings]"]
#: Builds the HTTP API over a service, with an authenticator given or built from the settings.
ApiBuilder = Callable[["MemoryService", "Authenticator | None", "Settings | None"], "MemoryApi"]


class FunctionsRuntime:
    """The per-worker memory service and HTTP API.

    Args:
        build_service: Builds the service (once, on the first :meth:`service`).
        build_api: Builds the HTTP API (once, on the first :meth:`api`).
    """

    def __init__(self, *, build_service: ServiceBuilder, build_api: ApiBuilder) -> None:
        self._build_service = build_service
        self._build_api = build_api
        self._service: MemoryService | None = None
        self._api: MemoryApi | None = None
        self._authenticator: Authenticator | None = None
        self._settings: Settings | None = None
        self._lock: asyncio.Lock | None = None

    async def service(self) -> MemoryService:
        """The memory service, built on the first call."""
        if self._service is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._service is None:
                    service, self._settings = self._build_service()
                    await share_log_key(service)  # before any line that names a user
                    self._service = service
        return self._service

    async def api(self) -> MemoryApi:
        """The HTTP API over :meth:`service`, built on the first call."""
        if self._api is None:
            service = await self.service()
            if self._api is None:
                self._api = self._build_api(service, self._authenticator, self._settings)
        return self._api

    def use(
        self,
        service: MemoryService | None,
        api: MemoryApi | None = None,
        *,
        authenticator: Authenticator | None = None,
    ) -> None:
        """Serve with an already built service (and optionally an API object or an authenticator)
        instead of settings."""
        self._service = service
        self._api = api
        self._authenticator = authenticator
        self._settings = None

    async def close(self) -> None:
        """Close the service (tests; the worker process simply ends in Azure)."""
        service, self._service, self._api = self._service, None, None
        self._authenticator, self._settings = None, None
        if service is not None:
            await service.close()
