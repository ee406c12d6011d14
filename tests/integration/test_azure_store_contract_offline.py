"""The store contract against the Azure adapter, offline, on a simulated search service.

The simulated service (``fake_search_service.py``) answers through the capturing transport and
validates every request body against the REST contract subset, so this runs the adapter's whole
request/response logic (filters, keyset paging, merges, recall, forgetting, purge, facets) through
the same suite as the embedded store. How the real service ranks is the live suite's business
(``tests/azure/test_live_store_contract.py``).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import pytest
from azure.core.credentials import AzureKeyCredential
from azure_transport import CapturingTransport
from contract.entity_contract import EntityContract
from contract.filter_contract import FilterContract
from contract.store_contract import EMBEDDER, StoreContract, async_context
from fake_search_service import FakeSearchService, parse_filter

from memory_core.adapters.azure.search_index import ensure_index
from memory_core.adapters.azure.search_store import AzureSearchMemoryStore
from memory_core.ports import FixedClock, MemoryStore

ENDPOINT = "https://memtest.search.windows.net"


class TestAzureSearchStoreContractOffline(StoreContract, FilterContract, EntityContract):
    def open_store(self, clock: FixedClock) -> AbstractAsyncContextManager[MemoryStore]:
        async def factory() -> MemoryStore:
            service = FakeSearchService(now=lambda: clock.now().timestamp())
            transport = CapturingTransport(fallback=service)
            credential = AzureKeyCredential("test-admin-key")
            assert await ensure_index(
                ENDPOINT, "m", credential, dimensions=EMBEDDER.dimensions, transport=transport
            ) == ("created")
            return AzureSearchMemoryStore(
                ENDPOINT, "m", credential, dimensions=EMBEDDER.dimensions, clock=clock, transport=transport
            )

        return async_context(factory)

    def test_search_results_explain_scores(self) -> None:
        pytest.skip("Azure AI Search does not return per-leg ranks; the breakdown carries what it returns")


def test_fake_filter_parser_follows_odata_quoting() -> None:
    predicate = parse_filter("category eq 'it''s' and (importance ge 0.5 or expires_at eq null)")
    assert predicate({"category": "it's", "importance": 0.7, "expires_at": "2026-01-01T00:00:00Z"})
    assert predicate({"category": "it's", "importance": 0.1, "expires_at": None})
    assert not predicate({"category": "it", "importance": 0.9, "expires_at": None})
    with pytest.raises(ValueError):
        parse_filter("category eq 'a' or")
