"""The store contract against a real Azure AI Search service (skipped unless one is configured).

Set ``AZURE_SEARCH_ENDPOINT`` (and optionally ``AZURE_SEARCH_API_KEY``; without it the default Azure
credential is used, which needs the *Search Index Data Contributor* and *Search Service Contributor*
roles). Every test gets a fresh index named ``<AZURE_SEARCH_INDEX_NAME>-t<random>``, deleted afterwards.
Azure AI Search makes writes searchable in near real time, so the live store waits
``MEMORY_AZURE_SETTLE_SECONDS`` (default 2) after each write.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from contract.entity_contract import EntityContract
from contract.filter_contract import FilterContract
from contract.store_contract import EMBEDDER, StoreContract

from memory_core.config import Settings
from memory_core.ports import FixedClock, MemoryStore

pytestmark = [
    pytest.mark.azure,
    pytest.mark.skipif(
        not os.environ.get("AZURE_SEARCH_ENDPOINT"),
        reason="AZURE_SEARCH_ENDPOINT is not set (live Azure test)",
    ),
]

SETTLE_SECONDS = float(os.environ.get("MEMORY_AZURE_SETTLE_SECONDS", "2"))


def _settings() -> Settings:
    return Settings.from_env(os.environ, store="azure_search", embedder="hash")


@asynccontextmanager
async def live_store(clock: FixedClock, dimensions: int) -> AsyncIterator[MemoryStore]:
    """A store on a fresh, uniquely named index that is deleted afterwards."""
    from azure.search.documents.indexes.aio import SearchIndexClient

    from memory_core.adapters.azure.search_index import (
        build_index,
        close_credential,
        default_credential,
        ensure_index_definition,
    )
    from memory_core.adapters.azure.search_store import AzureSearchMemoryStore

    class SettlingStore(AzureSearchMemoryStore):
        """Waits after each write so that the next read sees it (near-real-time indexing)."""

        async def _write(self, operation: str, actions: Any, *, ignore_missing: bool = False) -> int:
            written = await super()._write(operation, actions, ignore_missing=ignore_missing)
            await asyncio.sleep(SETTLE_SECONDS)
            return written

    settings = _settings()
    credential = default_credential(api_key=settings.azure_search_api_key, client_id=settings.azure_client_id)
    name = f"{settings.azure_search_index_name}-t{uuid.uuid4().hex[:10]}"
    index_client = SearchIndexClient(settings.azure_search_endpoint, credential)
    try:
        assert await ensure_index_definition(index_client, build_index(name, dimensions)) == "created"
        store = SettlingStore(
            settings.azure_search_endpoint, name, credential, dimensions=dimensions, clock=clock
        )
        try:
            yield store
        finally:
            await store.close()
            await index_client.delete_index(name)
    finally:
        await index_client.close()
        await close_credential(credential)


class TestAzureSearchStoreContract(StoreContract, FilterContract, EntityContract):
    """The shared contract on a live service."""

    #: The live semantic ranker reorders by its own model, not like the local hybrid engine.
    semantic_is_hybrid = False

    def open_store(self, clock: FixedClock) -> AbstractAsyncContextManager[MemoryStore]:
        return live_store(clock, EMBEDDER.dimensions)

    def test_search_results_explain_scores(self) -> None:
        pytest.skip("Azure AI Search does not return per-leg ranks; the breakdown carries what it returns")


def test_ensure_index_is_idempotent_live() -> None:
    """Create, then ensure again: the second call finds nothing to change."""
    from memory_core.adapters.azure.search_index import (
        close_credential,
        default_credential,
        drop_index,
        ensure_index,
    )

    async def scenario() -> None:
        name = f"{_settings().azure_search_index_name}-t{uuid.uuid4().hex[:10]}"
        settings = Settings.from_env(
            os.environ, store="azure_search", embedder="hash", azure_search_index_name=name
        )
        credential = default_credential(api_key=settings.azure_search_api_key, client_id=settings.azure_client_id)
        try:
            endpoint = settings.azure_search_endpoint
            assert await ensure_index(endpoint, name, credential, dimensions=8) == "created"
            assert await ensure_index(endpoint, name, credential, dimensions=8) == "unchanged"
        finally:
            await drop_index(settings.azure_search_endpoint, credential, name)
            await close_credential(credential)

    asyncio.run(scenario())
