"""A deduplicating import reads the stored memories many at a time, and decides exactly as before.

``import_records(..., dedupe=True)`` (what ``memory-core import`` does by default) looks every row's id
up in the store. A store that offers :class:`~memory_core.capabilities.BatchReader` (both adapters) is asked
for up to :data:`~memory_core.service.import_export.DEDUPE_LOOKUP` ids of a scope per call; another store once
per row. Here the same imports run on a store and on the same store with ``get_many`` hidden (a
subclass of the real adapter), on SQLite and on the Azure adapter over the simulated search service:
identical reports, identical stored memories, and far fewer lookups.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureKeyCredential
from azure_transport import CapturingTransport
from contract.store_contract import EMBEDDER, NOW, vector
from fake_search_service import FakeSearchService

from memory_core.adapters.azure.search_index import ensure_index
from memory_core.adapters.azure.search_store import AzureSearchMemoryStore
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.capabilities import BatchReader, supports
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.ports import FixedClock, MemoryStore
from memory_core.runtime.offload import StorageThread, offloaded
from memory_core.service.import_export import (
    DEDUPE_LOOKUP,
    ImportReport,
    content_memory_id,
    import_records,
    prepare_record,
)

ENDPOINT = "https://memtest.search.windows.net"
POLICY = HumanMemoryPolicy()
Row = dict[str, Any]


# ------------------------------------------------------------------------------------------------
# Stores: the real adapters, the same with get_many hidden, and counting subclasses
# ------------------------------------------------------------------------------------------------


class Lookups:
    """How many lookups a store was asked for, by method."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.ids: Counter[str] = Counter()


class CountingSQLiteStore(SQLiteMemoryStore):
    """The embedded store, counting its lookups."""

    def __init__(self, *args: Any, lookups: Lookups, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lookups = lookups

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        self.lookups.calls["get"] += 1
        self.lookups.ids["get"] += 1
        return await super().get(scope, memory_id)

    async def get_many(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        self.lookups.calls["get_many"] += 1
        self.lookups.ids["get_many"] += len(memory_ids)
        return await super().get_many(scope, memory_ids)


class OneByOneSQLiteStore(CountingSQLiteStore):
    """The embedded store as a store without batch reads would be: ``get`` only."""

    get_many = None  # type: ignore[assignment]


class OneByOneAzureStore(AzureSearchMemoryStore):
    """The Azure adapter as it was before batch reads: one document lookup per id."""

    get_many = None  # type: ignore[assignment]


Factory = Callable[[Path, bool], Any]


@asynccontextmanager
async def sqlite_store(tmp_path: Path, batch: bool, lookups: Lookups | None = None) -> AsyncIterator[MemoryStore]:
    kind = CountingSQLiteStore if batch else OneByOneSQLiteStore
    path = tmp_path / f"{'batch' if batch else 'single'}.db"
    store = kind(path, clock=FixedClock(NOW), lookups=lookups or Lookups())
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def azure_store(
    tmp_path: Path, batch: bool, transport: CapturingTransport | None = None
) -> AsyncIterator[MemoryStore]:
    clock = FixedClock(NOW)
    transport = transport or CapturingTransport()
    transport.fallback = FakeSearchService(now=lambda: clock.now().timestamp())
    credential = AzureKeyCredential("test-admin-key")
    assert await ensure_index(ENDPOINT, "m", credential, dimensions=EMBEDDER.dimensions, transport=transport) == (
        "created"
    )
    kind = AzureSearchMemoryStore if batch else OneByOneAzureStore
    store = kind(ENDPOINT, "m", credential, dimensions=EMBEDDER.dimensions, clock=clock, transport=transport)
    try:
        yield store
    finally:
        await store.close()


BACKENDS = pytest.mark.parametrize("open_store", [sqlite_store, azure_store], ids=["sqlite", "azure"])


async def imported(store: MemoryStore, rows: Sequence[Row], *, dedupe: bool = True) -> ImportReport:
    return await import_records(store, EMBEDDER, POLICY, NOW, rows, dedupe=dedupe)


async def contents(store: MemoryStore, scopes: Sequence[Scope]) -> dict[Scope, list[MemoryRecord]]:
    """Every memory of ``scopes``, every field (embeddings too), by id."""
    held: dict[Scope, list[MemoryRecord]] = {}
    for scope in scopes:
        held[scope] = []
        cursor = None
        while True:
            page = await store.scan(scope, PageRequest(after=cursor, limit=1000, with_embedding=True))
            held[scope] += page.records
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    return held


# ------------------------------------------------------------------------------------------------
# The rows
# ------------------------------------------------------------------------------------------------

A1, A2, B1 = ("u1", "a1"), ("u1", "a2"), ("u2", "a1")
SCOPES = [Scope.of(*A1), Scope.of(*A2), Scope.of(*B1)]


def row(scope: tuple[str, str], memory: str, **fields: Any) -> Row:
    return {"user_id": scope[0], "agent_id": scope[1], "memory": memory, **fields}


def stored_rows() -> list[Row]:
    """What the store holds before the deduplicating import (every status, with and without ids)."""
    at = (NOW - timedelta(days=3)).isoformat()
    return [
        row(A1, "prefers an aisle seat", id="keep", importance=0.6, created_at=at),
        row(A1, "allergic to peanuts", id="change", importance=0.5, created_at=at),
        row(A1, "used to live in Lyon", id="dead", status="deleted", created_at=at),
        row(A1, "a given vector", id="vec", embedding=vector("a given vector"), created_at=at),
        row(A1, "likes green tea", created_at=at),  # without id: its content id (imported with dedupe)
        row(A2, "books window seats for this agent", id="keep2", category="preference", created_at=at),
        *(row(B1, f"stored fact {i}", id=f"bulk{i:04d}", created_at=at) for i in range(700)),
    ]


def incoming_rows() -> list[Row]:
    """The import: skips, updates, repeats and new rows, interleaved across scopes and chunks."""
    at = (NOW - timedelta(days=3)).isoformat()
    rows = [
        row(A1, "prefers an aisle seat", id="keep", importance=0.6, created_at=at),  # unchanged: skipped
        row(A1, "allergic to peanuts", id="change", importance=0.9, created_at=at),  # updated
        row(A1, "used to live in Lyon", id="dead", created_at=at),  # held (deleted) unchanged: skipped
        row(A1, "used to live in Lyon, France", id="dead"),  # repeats an earlier row's id: skipped
        row(A1, "a given vector", id="vec", embedding=vector("another vector"), created_at=at),  # updated
        row(A1, "a given vector", id="vec"),  # repeat: skipped
        row(A1, "LIKES  GREEN TEA "),  # no id, same content as a held memory: skipped
        row(A1, "likes green tea"),  # repeat of the same content id: skipped
        row(A1, "speaks Portuguese"),  # no id, new: imported
        row(A1, "speaks portuguese"),  # the same content id again: skipped
        row(A2, "books window seats for this agent", id="keep2", category="travel", created_at=at),  # updated
        row(A2, "prefers an aisle seat", id="new-a2"),  # new
    ]
    for i in range(1_400):  # 700 held (half unchanged, half changed) then 700 new, across B1 chunks
        if i < 700:
            changed = {"importance": 0.9} if i % 2 else {}
            rows.append(row(B1, f"stored fact {i}", id=f"bulk{i:04d}", created_at=at, **changed))
        else:
            rows.append(row(B1, f"new fact {i}", id=f"bulk{i:04d}"))
        if i % 97 == 0:  # interleave another scope's rows and some repeats
            rows.append(row(A2, f"interleaved {i}", id=f"int{i:04d}"))
            rows.append(row(B1, "a repeat", id=f"bulk{i:04d}"))
    return rows


def expected_report() -> ImportReport:
    interleaved = len(range(0, 1_400, 97))
    return ImportReport(
        imported=1 + 1 + 700 + interleaved,  # speaks Portuguese, new-a2, new bulk, interleaved
        embedded=1 + 1 + 700 + interleaved + 1 + 1 + 350,  # ...and change, keep2, bulk updated (vec has one)
        updated=1 + 1 + 1 + 350,  # change, vec, keep2, the changed half of bulk
        skipped=1 + 1 + 1 + 1 + 1 + 1 + 1 + 350 + interleaved,  # keep dead dead vec tea tea pt, bulk, repeats
    )


# ------------------------------------------------------------------------------------------------
# Identical outcomes
# ------------------------------------------------------------------------------------------------


@BACKENDS
def test_batch_reads_give_the_same_report_and_the_same_memories(open_store: Factory, tmp_path: Path) -> None:
    async def one(batch: bool) -> tuple[ImportReport, ImportReport, dict[Scope, list[MemoryRecord]]]:
        async with open_store(tmp_path, batch) as store:
            assert supports(store, BatchReader) is batch
            first = await imported(store, stored_rows())
            report = await imported(store, incoming_rows())
            return first, report, await contents(store, SCOPES)

    async def main() -> None:
        first_batch, report_batch, held_batch = await one(True)
        first_single, report_single, held_single = await one(False)
        # one row comes with its vector and one is deleted (never searched: no vector computed)
        assert first_batch == first_single == ImportReport(imported=706, embedded=704)
        assert report_batch == report_single == expected_report()
        assert held_batch == held_single
        assert sum(len(v) for v in held_batch.values()) == 706 + expected_report().imported
        tea = prepare_record(row(A1, "likes green tea"), POLICY, NOW)
        assert content_memory_id(tea) in {r.id for r in held_batch[SCOPES[0]]}
        by_id = {r.id: r for records in held_batch.values() for r in records}
        assert by_id["change"].importance == 0.9 and by_id["keep2"].category == "travel"
        assert by_id["dead"].status is MemoryStatus.DELETED
        assert by_id["dead"].memory == "used to live in Lyon"  # the repeat was not written
        assert by_id["vec"].embedding == pytest.approx(vector("another vector"))

    asyncio.run(main())


@BACKENDS
def test_importing_the_same_rows_again_skips_them_all(open_store: Factory, tmp_path: Path) -> None:
    async def main() -> None:
        for batch in (True, False):
            async with open_store(tmp_path, batch) as store:
                rows = incoming_rows()
                first = await imported(store, rows)
                again = await imported(store, rows)
                assert again == ImportReport(imported=0, embedded=0, updated=0, skipped=len(rows))
                assert first.imported + first.skipped == len(rows)

    asyncio.run(main())


def test_an_id_of_another_scope_is_new_to_the_scope_as_before(tmp_path: Path) -> None:
    """A row whose id another scope holds is looked up in its own scope only (absent: imported),
    and the write then refuses it, exactly as the one-by-one lookups did."""
    from memory_core.errors import ConflictError

    async def main() -> None:
        for batch in (True, False):
            async with sqlite_store(tmp_path, batch) as store:
                await imported(store, [row(A1, "mine", id="shared")])
                with pytest.raises(ConflictError):
                    await imported(store, [row(A2, "theirs", id="shared")])

    asyncio.run(main())


# ------------------------------------------------------------------------------------------------
# Fewer lookups
# ------------------------------------------------------------------------------------------------


def bulk(count: int, *, held: int) -> tuple[list[Row], list[Row]]:
    """``held`` memories already stored, and an import of ``count`` rows: those (half of them changed)
    and new ones, one scope, each with an id (an export read back)."""
    at = (NOW - timedelta(days=1)).isoformat()
    stored = [row(A1, f"fact {i}", id=f"f{i:05d}", created_at=at) for i in range(held)]
    rows = [
        row(A1, f"fact {i}", id=f"f{i:05d}", created_at=at, **({"importance": 0.9} if i % 2 else {}))
        for i in range(count)
    ]
    return stored, rows


def test_2000_rows_take_4_batch_lookups_instead_of_2000(tmp_path: Path) -> None:
    stored, rows = bulk(2_000, held=1_000)

    async def counted(batch: bool) -> tuple[ImportReport, Lookups]:
        lookups = Lookups()
        async with sqlite_store(tmp_path, batch, lookups) as store:
            await imported(store, stored, dedupe=False)
            assert lookups.calls == Counter()
            report = await imported(store, rows)
        return report, lookups

    report, lookups = asyncio.run(counted(True))
    assert DEDUPE_LOOKUP == 500
    assert lookups.calls == Counter({"get_many": 4})  # ceil(2,000 / 500), not one get
    assert lookups.ids == Counter({"get_many": 2_000})
    single, one_by_one = asyncio.run(counted(False))
    assert one_by_one.calls == Counter({"get": 2_000})
    assert report == single == ImportReport(imported=1_000, embedded=1_500, updated=500, skipped=500)


def test_the_azure_import_sends_4_searches_instead_of_2000_document_lookups(tmp_path: Path) -> None:
    stored, rows = bulk(2_000, held=1_000)

    async def requests(batch: bool) -> tuple[ImportReport, Counter[str]]:
        transport = CapturingTransport()
        async with azure_store(tmp_path, batch, transport) as store:
            await imported(store, stored, dedupe=False)
            before = len(transport.requests)
            report = await imported(store, rows)
        kinds = Counter(
            "lookup" if r.method == "GET" else r.path.rsplit("/", 1)[-1] for r in transport.requests[before:]
        )
        return report, kinds

    report, kinds = asyncio.run(requests(True))
    assert kinds == Counter({"search.post.search": 4, "search.index": 6})  # 1,500 written, 256 per request
    single, one_by_one = asyncio.run(requests(False))
    assert one_by_one == Counter({"lookup": 2_000, "search.index": 6})
    assert report == single == ImportReport(imported=1_000, embedded=1_500, updated=500, skipped=500)


def test_serve_offloaded_store_imports_with_batch_reads(tmp_path: Path) -> None:
    """``memory-core serve`` wraps the SQLite store in a proxy that runs its calls on a thread; the
    import still sees the capability through it (``supports``) and reads many at a time."""
    stored, rows = bulk(1_200, held=600)

    async def main() -> None:
        lookups = Lookups()
        store = offloaded(
            CountingSQLiteStore(tmp_path / "served.db", clock=FixedClock(NOW), lookups=lookups), StorageThread("store")
        )
        try:
            assert supports(store, BatchReader)
            await imported(store, stored, dedupe=False)
            report = await imported(store, rows)
        finally:
            await store.close()
        assert lookups.calls == Counter({"get_many": 3})
        assert report == ImportReport(imported=600, embedded=900, updated=300, skipped=300)

    asyncio.run(main())
