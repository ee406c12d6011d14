"""The store contract against the embedded SQLite store, on a temporary file."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from contract.entity_contract import EntityContract
from contract.filter_contract import FilterContract
from contract.store_contract import StoreContract, async_context

from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.ports import FixedClock, MemoryStore


class TestSQLiteStoreContract(StoreContract, FilterContract, EntityContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path: Path) -> None:
        self.db = tmp_path / "memory.db"

    def open_store(self, clock: FixedClock) -> AbstractAsyncContextManager[MemoryStore]:
        async def factory() -> MemoryStore:
            return SQLiteMemoryStore(self.db, clock=clock)

        return async_context(factory)
