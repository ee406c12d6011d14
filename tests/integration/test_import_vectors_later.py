"""An import stores its records first and computes their vectors after (the embedded store).

Records stored without a vector are listed and found by keyword search at once and skipped by the
vector leg; the fill gives them their vectors (each distinct text embedded once, in short calls) and
vector search finds them. A fill that stops part way leaves every memory whole and the next fill
finishes, with the vectors a single import gives. A memory changed after it was read keeps its own.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract.store_contract import EMBEDDER, NOW

from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.capabilities import VectorBackfill, supports
from memory_core.cli.main import main
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.service import backfill
from memory_core.service.backfill import EMBED_BATCH, FILL_PAGE, fill_missing_vectors
from memory_core.service.import_export import import_records

POLICY = HumanMemoryPolicy()
SCOPE = Scope.of("u1", "travel")


class CountingEmbedder:
    """The hashing embedder, counting the passages it is asked for; fails from call ``fail_at`` on."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_at = fail_at
        self.name, self.dimensions = EMBEDDER.name, EMBEDDER.dimensions

    async def embed_query(self, text: str) -> np.ndarray:
        return await EMBEDDER.embed_query(text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise RuntimeError("the embedder went away")
        self.calls.append(list(texts))
        return await EMBEDDER.embed_passages(texts)

    async def close(self) -> None:
        return None


def rows(count: int, scope: Scope = SCOPE) -> list[dict[str, Any]]:
    return [{"user_id": scope.user_id, "agent_id": scope.agent_id, "memory": f"likes place number {i}"} for i in range(count)]


async def ids_found(store: SQLiteMemoryStore, query: str, mode: SearchMode) -> list[str]:
    vector = EMBEDDER.embed_sync(query).tolist() if mode is not SearchMode.KEYWORD else None
    result = await store.search(SearchRequest(SCOPE, query, vector, MemorySearchOptions(mode=mode, top=5)))
    return [hit.record.id for hit in result.hits]


async def vectors(store: SQLiteMemoryStore) -> dict[str, list[float] | None]:
    page = await store.scan(SCOPE, PageRequest(limit=10_000, with_embedding=True))
    return {r.memory: r.embedding for r in page.records}


def test_records_are_found_by_keyword_first_then_by_vector(tmp_path: Path) -> None:
    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            assert supports(store, VectorBackfill)
            embedder = CountingEmbedder()
            data = [*rows(3), {"user_id": "u1", "agent_id": "travel", "memory": "窓側の席が好き"}]
            report = await import_records(store, embedder, POLICY, NOW, data, dedupe=True, defer_vectors=True)
            assert (report.imported, report.embedded, report.vectors_missing) == (4, 0, 4)
            assert embedder.calls == []
            assert await store.count_missing_vectors() == 4
            assert len(await ids_found(store, "窓側", SearchMode.KEYWORD)) == 1  # stored and found at once
            assert await ids_found(store, "窓側の席が好き", SearchMode.VECTOR) == []  # the vector leg skips them
            hybrid = await ids_found(store, "窓側", SearchMode.HYBRID)
            assert len(hybrid) == 1  # hybrid still finds it, by its keyword leg

            filled = await fill_missing_vectors(store, embedder)
            assert (filled.filled, filled.embedded, filled.missing) == (4, 4, 0)
            found = await ids_found(store, "窓側の席が好き", SearchMode.VECTOR)
            assert found and found[0] == hybrid[0]
            assert await store.count_missing_vectors() == 0
            again = await fill_missing_vectors(store, embedder)
            assert (again.filled, again.embedded, again.missing) == (0, 0, 0)

    asyncio.run(main_())


def test_an_import_without_deferring_ends_with_every_vector(tmp_path: Path) -> None:
    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            report = await import_records(store, CountingEmbedder(), POLICY, NOW, rows(40), dedupe=True)
            assert (report.imported, report.embedded, report.texts_embedded, report.vectors_missing) == (40, 40, 40, 0)
            held = await vectors(store)
        async with SQLiteMemoryStore(tmp_path / "direct.db") as direct:
            given = [{**row, "embedding": EMBEDDER.embed_sync(row["memory"]).tolist()} for row in rows(40)]
            await import_records(direct, CountingEmbedder(), POLICY, NOW, given, dedupe=True)
            expected = await vectors(direct)
        assert held.keys() == expected.keys()
        for text, vec in held.items():
            assert vec is not None and np.allclose(vec, expected[text], atol=1e-6), text

    asyncio.run(main_())


def test_each_distinct_text_is_embedded_once_in_short_calls(tmp_path: Path) -> None:
    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            embedder = CountingEmbedder()
            other = Scope.of("u2", "assistant")
            data = [*rows(40), *rows(40, other), *rows(40)]  # the same 40 texts in two scopes, and repeated
            report = await import_records(store, embedder, POLICY, NOW, data, dedupe=True)
            assert (report.imported, report.skipped, report.embedded, report.texts_embedded) == (80, 40, 80, 40)
            asked = [text for call in embedder.calls for text in call]
            assert sorted(asked) == sorted({row["memory"] for row in rows(40)})
            assert max(len(call) for call in embedder.calls) <= EMBED_BATCH
            assert await store.count_missing_vectors() == 0

    asyncio.run(main_())


def test_a_fill_that_stops_leaves_whole_memories_and_the_next_one_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backfill, "FILL_PAGE", 32)
    count = 100
    calls_per_page = 32 // EMBED_BATCH

    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            await import_records(store, CountingEmbedder(), POLICY, NOW, rows(count), dedupe=True, defer_vectors=True)
            with pytest.raises(RuntimeError, match="went away"):  # fails in the third page
                await fill_missing_vectors(store, CountingEmbedder(fail_at=2 * calls_per_page + 1))
            held = await vectors(store)
            assert len(held) == count  # every record stored, whole
            assert sum(v is not None for v in held.values()) == 64  # two pages, each in one transaction
            assert await store.count_missing_vectors() == count - 64
            assert len(await ids_found(store, "number 99", SearchMode.KEYWORD)) >= 1
            finisher = CountingEmbedder()
            done = await fill_missing_vectors(store, finisher)
            assert (done.filled, done.missing) == (count - 64, 0)
            assert sum(len(c) for c in finisher.calls) == count - 64  # only what was missing
            final = await vectors(store)
            for text, vec in final.items():
                assert vec is not None and np.allclose(vec, EMBEDDER.embed_sync(text), atol=1e-6)

    asyncio.run(main_())
    assert FILL_PAGE == 256  # the module's own page, untouched by the patch of backfill's


def test_a_memory_changed_after_it_was_read_keeps_its_own_vector(tmp_path: Path) -> None:
    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            await import_records(store, CountingEmbedder(), POLICY, NOW, rows(2), dedupe=True, defer_vectors=True)
            first, second = await store.missing_vectors(limit=10)
            assert first.key < second.key
            await store.merge(SCOPE, first.memory_id, {"memory": "likes another place"})
            stale = EMBEDDER.embed_sync(first.text).tolist()
            written = await store.fill_vectors([(first, stale), (second, EMBEDDER.embed_sync(second.text).tolist())])
            assert written == 1  # the changed memory's text no longer matches: left alone
            assert [m.memory_id for m in await store.missing_vectors(limit=10)] == [first.memory_id]
            assert [m.memory_id for m in await store.missing_vectors(after=first.key, limit=10)] == []
            changed = await store.get(SCOPE, first.memory_id)
            assert changed is not None and changed.embedding is None and changed.updated_at == NOW

    asyncio.run(main_())


def test_a_deleted_memory_is_never_given_a_vector(tmp_path: Path) -> None:
    """Forgetting leaves a memory without text or vector; a fill must not give it one back."""

    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            await import_records(store, CountingEmbedder(), POLICY, NOW, rows(3), dedupe=True, defer_vectors=True)
            first, second, third = await store.missing_vectors(limit=10)
            await store.mark_status(SCOPE, first.memory_id, MemoryStatus.DELETED, reason="forgotten")
            assert await store.count_missing_vectors() == 2
            assert [m.memory_id for m in await store.missing_vectors(limit=10)] == [second.memory_id, third.memory_id]
            # deleted between the read and the write (its text unchanged): still left without one
            await store.mark_status(SCOPE, second.memory_id, MemoryStatus.DELETED, reason="forgotten")
            pairs = [(m, EMBEDDER.embed_sync(m.text).tolist()) for m in (first, second, third)]
            assert await store.fill_vectors(pairs) == 1
            report = await fill_missing_vectors(store, CountingEmbedder())
            assert (report.filled, report.missing) == (0, 0)
            held = await vectors(store)
            assert held[third.text] is not None
            assert held[first.text] is None and held[second.text] is None

    asyncio.run(main_())


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_the_cli_defers_vectors_and_embed_computes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db, records = str(tmp_path / "m.db"), tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in rows(5)), encoding="utf-8")
    code, out = run("--db", db, "import", str(records), "--defer-vectors")
    assert code == 0
    assert out == (
        "imported 5 memories, updated 0, skipped 0 (already stored or repeated); 0 embeddings computed\n"
        "5 memories have no vector yet (found by keyword search, not by meaning): memory-core embed computes them, "
        "and so does a memory-core serve running on this store\n"
    )
    code, out = run("--db", db, "--json", "embed")
    assert code == 0 and json.loads(out) == {"filled": 5, "embedded": 5, "missing": 0}
    assert run("--db", db, "embed") == (0, "0 memories got their vector (0 distinct texts embedded); 0 without one\n")
    code, out = run("--db", db, "--json", "import", str(records))
    assert code == 0 and json.loads(out) == {
        "imported": 0, "updated": 0, "skipped": 5, "embedded": 0, "vectors_missing": 0,
    }
