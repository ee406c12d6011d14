"""The calls people coming from Mem0 expect, on the Python API: ``infer=False``, ``filters``,
``threshold``, ``limit``, ``run_id``, ``reset()``, results that read as ``{"results": [...]}``, and the
scoping errors of the calls on one memory; embedded, and remote against a running server."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_helpers import RunningRuntime

from memory_core import AsyncMemory, Memory
from memory_core.domain.messages import MemoryEvent
from memory_core.domain.records import MemoryStatus
from memory_core.errors import ConfigurationError, ValidationError

USER = "alice"


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("MEMORY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "memory.db") as m:
        yield m


def test_infer_false_stores_each_message_as_given(memory: Memory) -> None:
    text = "Prefers aisle seats.\r\nNever books red-eye flights."
    added = memory.add(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": text},
         {"role": "assistant", "content": "Noted."}],
        user_id=USER, infer=False, metadata={"topic": "travel"},
    )
    assert added.status == "ingested"
    assert [(d.event, d.memory) for d in added.decisions] == [
        (MemoryEvent.ADD, "Prefers aisle seats.\nNever books red-eye flights."),
        (MemoryEvent.ADD, "Noted."),
    ]
    assert added["results"] == [
        {"id": d.memory_id, "memory": d.memory, "event": "ADD"} for d in added.decisions
    ]
    stored = memory.get_all(user_id=USER)
    assert sorted(r.memory for r in stored) == ["Noted.", "Prefers aisle seats.\nNever books red-eye flights."]
    assert {r.source for r in stored} == {"verbatim"} and all(r.kind.value == "fact" for r in stored)
    again = memory.add(text, user_id=USER, infer=False)  # known already: reinforced, not stored twice
    assert [d.event for d in again.decisions] == [MemoryEvent.NONE]
    assert len(memory.get_all(user_id=USER)) == 2
    with pytest.raises(ValidationError) as caught:
        memory.add([{"role": "system", "content": "only this"}], user_id=USER, infer=False)
    assert caught.value.field == "messages"


def test_infer_false_never_merges_alike_texts(memory: Memory) -> None:
    texts = [f"Room {n} is booked for the offsite." for n in range(4)]
    for text in texts:
        assert [d.event for d in memory.add(text, user_id=USER, infer=False).decisions] == [MemoryEvent.ADD]
    assert sorted(r.memory for r in memory.get_all(user_id=USER)) == texts
    assert [d.event for d in memory.add("room 2 is booked for the offsite", user_id=USER, infer=False).decisions] == [
        MemoryEvent.NONE
    ]


def test_infer_false_is_idempotent_per_turn_and_keeps_the_session(memory: Memory) -> None:
    first = memory.add("Allergic to peanuts.", user_id=USER, infer=False, turn_id="t-1", run_id="s-9")
    again = memory.add("Allergic to peanuts.", user_id=USER, infer=False, turn_id="t-1", run_id="s-9")
    assert (first.status, again.status) == ("ingested", "duplicate")
    assert [d.memory_id for d in again.decisions] == [d.memory_id for d in first.decisions]
    [record] = memory.get_all(user_id=USER)
    assert [(p.turn_id, p.session_id, p.speaker) for p in record.provenance] == [("t-1", "s-9", "user")]
    [entry] = memory.history(record.id, user_id=USER)
    assert entry.event is MemoryEvent.ADD and entry.turn_id == "t-1"


def test_run_id_filters_threshold_and_limit(memory: Memory) -> None:
    memory.add("I drink green tea.", user_id=USER, run_id="trip-1", infer=False, metadata={"topic": "drinks"})
    memory.add("I drink black tea at night.", user_id=USER, run_id="trip-2", infer=False, metadata={"topic": "drinks"})
    memory.add("Tea ceremony in Kyoto next month.", user_id=USER, run_id="trip-1", infer=False)

    def found(**kwargs: object) -> set[str]:
        return {hit.record.memory for hit in memory.search("tea", user_id=USER, top=10, **kwargs)}

    assert found(run_id="trip-1") == {"I drink green tea.", "Tea ceremony in Kyoto next month."}
    assert found(filters={"metadata.topic": "drinks"}) == {"I drink green tea.", "I drink black tea at night."}
    assert found(run_id="trip-1", filters={"metadata.topic": "drinks"}) == {"I drink green tea."}
    assert found(filters={"OR": [{"run_id": "trip-2"}, {"metadata.topic": {"ne": "drinks"}}]}) == {
        "I drink black tea at night.", "Tea ceremony in Kyoto next month."
    }
    assert {r.memory for r in memory.get_all(user_id=USER, run_id="trip-2")} == {"I drink black tea at night."}
    assert len(memory.search("tea", user_id=USER, limit=1).hits) == 1
    assert memory.search("tea", user_id=USER, limit=2, top=2).hits
    with pytest.raises(ValidationError, match="give top or limit") as caught:
        memory.search("tea", user_id=USER, top=3, limit=2)
    assert caught.value.field == "limit"
    with pytest.raises(ValidationError, match="give min_score or threshold"):
        memory.search("tea", user_id=USER, min_score=0.2, threshold=0.5)
    with pytest.raises(ValidationError) as caught:
        memory.search("tea", user_id=USER, threshold=2)
    assert caught.value.field == "min_score"
    with pytest.raises(ValidationError) as caught:
        memory.search("tea", user_id=USER, filters={"topic": "drinks"})
    assert caught.value.field == "filters.topic" and "metadata.topic" in caught.value.message


def test_results_read_as_mem0_answers_and_still_iterate(memory: Memory) -> None:
    memory.add("I like oolong tea.", user_id=USER, infer=False, metadata={"k": "v"})
    result = memory.search("oolong", user_id=USER)
    [hit] = list(result)
    assert result[0] is hit and result.hits == [hit]
    [item] = result["results"]
    assert item["id"] == hit.record.id and item["memory"] == "I like oolong tea."
    assert item["metadata"]["k"] == "v" and item["user_id"] == USER and isinstance(item["score"], float)
    listed = memory.get_all(user_id=USER)
    assert [r.id for r in listed] == [hit.record.id] and listed[0].memory == "I like oolong tea."
    assert listed["results"][0]["memory"] == "I like oolong tea."
    with pytest.raises(KeyError):
        result["memories"]


def test_calls_on_one_memory_say_why_they_need_a_user(memory: Memory) -> None:
    added = memory.add("I like tea.", user_id=USER, infer=False)
    memory_id = added.decisions[0].memory_id
    assert memory_id is not None
    for call, args in (("get", ()), ("delete", ()), ("history", ()), ("update", ("I like coffee.",))):
        with pytest.raises(ValidationError) as caught:
            getattr(memory, call)(memory_id, *args)
        assert caught.value.field == "user_id"
        assert f"{call}(..., user_id=" in caught.value.message
        assert "belongs to one user" in caught.value.message
    assert memory.get(memory_id, user_id=USER).memory == "I like tea."


def test_delete_is_soft_and_reset_empties_the_local_store(memory: Memory) -> None:
    added = memory.add("I like tea.", user_id=USER, infer=False)
    memory.add("I like jazz.", user_id="bob", agent_id="music", infer=False)
    memory_id = added.decisions[0].memory_id
    assert memory_id is not None
    assert memory.delete(memory_id, user_id=USER).status is MemoryStatus.DELETED
    assert memory.get(memory_id, user_id=USER).memory == "I like tea."  # soft: still there
    assert "soft" in (Memory.delete.__doc__ or "") and "delete_all" in (Memory.delete.__doc__ or "")
    reports = memory.reset()
    assert sorted(r.user_id for r in reports) == ["alice", "bob"]
    assert memory.get_all(user_id=USER, status="deleted") == []
    assert memory.get_all(user_id="bob", agent_id="music") == []
    assert memory.reset() == []


# Remote: a running `memory-core serve` over loopback
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[RunningRuntime]:
    running = RunningRuntime(tmp_path / "served.db").start()
    try:
        yield running
    finally:
        running.stop()


def test_get_all_takes_the_filters_search_takes(memory: Memory) -> None:
    memory.add("I'm vegetarian.", user_id=USER, metadata={"topic": "food"}, infer=False)
    memory.add("I drink green tea.", user_id=USER, metadata={"topic": "food", "cups": 3}, infer=False)
    memory.add("I live in Berlin.", user_id=USER, metadata={"topic": "home"}, infer=False)
    food = memory.get_all(user_id=USER, filters={"metadata.topic": "food"})
    assert sorted(r.memory for r in food) == ["I drink green tea.", "I'm vegetarian."]
    both = memory.get_all(user_id=USER, filters={"AND": [{"metadata.topic": "food"}, {"metadata.cups": 3}]})
    assert [r.memory for r in both] == ["I drink green tea."]
    assert [r.memory for r in memory.get_all(user_id=USER, filters={"metadata.topic": "food"}, limit=1)] == [food[0].memory]
    assert memory.get_all(user_id=USER, filters={"metadata.topic": "sport"}) == []
    with pytest.raises(ValidationError) as caught:
        memory.get_all(user_id=USER, filters={"OR": "food"})
    assert caught.value.field.startswith("filters.OR")


def test_remote_filters_and_aliases_reach_the_server_and_local_only_calls_say_so(runtime: RunningRuntime) -> None:
    server = runtime.runtime.server
    assert server is not None
    url = f"http://{server.host}:{server.port}"

    async def main() -> None:
        async with AsyncMemory(url=url, timeout=10) as m:
            await m.add("I'm vegetarian.", user_id=USER, metadata={"topic": "food"}, run_id="s-1")
            await m.add("I live in Berlin.", user_id=USER, run_id="s-2")
            await asyncio.to_thread(runtime.drain)
            food = await m.search("vegetarian Berlin", user_id=USER, limit=10, filters={"metadata.topic": "food"})
            assert [h.record.memory for h in food] == ["I'm vegetarian"]  # the fact stands for its episode
            berlin = await m.search("vegetarian Berlin", user_id=USER, limit=10, run_id="s-2")
            assert [h.record.memory for h in berlin] == ["I live in Berlin"]
            with pytest.raises(ValidationError) as caught:  # named by the server
                await m.search("x", user_id=USER, filters={"importance": {"above": 1}})
            assert caught.value.field == "filters.importance.above"
            verbatim = await m.add("as given", user_id=USER, infer=False)  # POST /api/memories, at once
            assert verbatim.status == "ingested" and [d.memory for d in verbatim.decisions] == ["as given"]
            assert verbatim.decisions[0].record is not None and verbatim.decisions[0].record.memory == "as given"
            with pytest.raises(ConfigurationError, match="reset"):
                await m.reset()
            assert len(await m.get_all(user_id=USER)) == 5
            # get_all(filters): the server applies them (GET /api/memories?filters=...), on every page.
            listed = await m.get_all(user_id=USER, filters={"metadata.topic": "food"}, limit=None)
            assert {r.memory for r in listed} == {"I'm vegetarian", "I'm vegetarian."}
            with pytest.raises(ValidationError) as caught:
                await m.get_all(user_id=USER, filters={"importance": {"above": 1}})
            assert caught.value.field == "filters.importance.above"

    asyncio.run(main())


def test_the_command_line_search_takes_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import json

    from memory_core.cli.main import main

    db = tmp_path / "m.db"
    with Memory(db) as m:
        m.add("Green tea in the morning.", user_id=USER, infer=False, metadata={"topic": "drinks"})
        m.add("Tea ceremony in Kyoto.", user_id=USER, infer=False, metadata={"topic": "travel"})
    out = io.StringIO()
    base = ["--db", str(db), "--json", "search", "tea", "--user", USER, "--agent", "default"]
    assert main([*base, "--filters", '{"metadata.topic": "travel"}'], out=out) == 0
    assert [h["memory"]["memory"] for h in json.loads(out.getvalue())["hits"]] == ["Tea ceremony in Kyoto."]
    assert main([*base, "--filters", '{"topic": "travel"}'], out=io.StringIO()) == 2
    assert "metadata.topic" in capsys.readouterr().err
