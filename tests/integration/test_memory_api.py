"""The Python API (``memory_core.Memory`` / ``memory_core.AsyncMemory``): the README's snippet as written,
every method synchronous and ``async``, the message formats, the errors, the remote mode against a real
embedded runtime over loopback, and an ``import memory_core`` that stays light."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from readme_snippets import snippet
from runtime_helpers import RunningRuntime

import memory_core
from memory_core import AsyncMemory, Memory
from memory_core.client.results import AddResult, MemoryExport
from memory_core.domain.messages import CandidateKind, MemoryEvent, MessageRole, Turn, TurnMessage
from memory_core.domain.records import MemoryStatus
from memory_core.entrypoints.python_api.messages import turn_messages
from memory_core.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PermanentError,
    ValidationError,
)
from memory_core.ports import Embedder, EmbedderWrapper

ROOT = Path(__file__).resolve().parents[2]
USER = "alice"
STATEMENT = "I'm vegetarian and I live in Berlin."


def _env(**extra: str) -> dict[str, str]:
    """The process environment without memory-core's own settings (a newcomer's shell), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "AZURE_", "ServiceBus"))}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every memory in these tests embeds with the hashing embedder (fast, deterministic)."""
    for name in [k for k in os.environ if k.startswith("MEMORY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "memory.db") as m:
        yield m


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class Pace:
    """How the embedders of the memories opened in a test pace their passage batches: ``delays`` are
    the seconds before each batch, in order (then none); every batch yields to the event loop, so
    concurrent calls interleave as they would with a real model. ``started`` is set when a batch
    begins."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.batches = 0
        self.started = threading.Event()


class _PacedEmbedder(EmbedderWrapper):
    def __init__(self, inner: Embedder, pace: Pace) -> None:
        super().__init__(inner)
        self.pace = pace

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        pace = self.pace
        delay = pace.delays.pop(0) if pace.delays else 0.0
        pace.batches += 1
        pace.started.set()
        await asyncio.sleep(delay)
        return await self.inner.embed_passages(texts)


@pytest.fixture
def pace(monkeypatch: pytest.MonkeyPatch) -> Pace:
    """Every memory the test opens embeds through a :class:`_PacedEmbedder` (the hashing one inside)."""
    from memory_core import bootstrap

    paced = Pace()
    build = bootstrap.build_embedder
    monkeypatch.setattr(bootstrap, "build_embedder", lambda settings: _PacedEmbedder(build(settings), paced))
    return paced


# ------------------------------------------------------------------------------------------------
# The README
# ------------------------------------------------------------------------------------------------


def _run_snippet(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", snippet("python-api")],
        cwd=cwd,
        env=_env(MEMORY_EMBEDDER="hash"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_snippet_runs_as_written_and_what_it_adds_is_found(tmp_path: Path) -> None:
    first = _run_snippet(tmp_path)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert "ADD fact I'm vegetarian" in lines
    assert "ADD fact I live in Berlin" in lines
    assert f"ADD episode {STATEMENT}" in lines
    hits = [line.split(" ", 1) for line in lines[3:]]
    assert len(hits) == 3
    assert all(float(score) > 0 for score, _ in hits)
    assert {text for _, text in hits} <= {
        "I'm vegetarian",
        "I live in Berlin",
        STATEMENT,
        "辛い料理は苦手です",
    }
    store = tmp_path / ".memory-core" / "memory.db"
    assert store.is_file()  # the documented default file, in the working directory

    with Memory(store) as m:
        found = m.search("vegetarian", user_id=USER, top=1).hits
        assert found[0].record.memory == "I'm vegetarian"
        japanese = m.search("辛い料理", user_id=USER, kind="fact", top=1).hits
        assert japanese[0].record.memory == "辛い料理は苦手です"

    again = _run_snippet(tmp_path)  # the same facts again: already known
    assert again.returncode == 0, again.stderr
    assert "NONE fact I'm vegetarian" in again.stdout.splitlines()


def test_import_memory_core_stays_light() -> None:
    probe = (
        "import sys, json, memory_core\n"
        "heavy = ['numpy', 'sqlite3', 'asyncio', 'httpx', 'memory_core.entrypoints.python_api.memory', 'memory_core.service',\n"
        "         'memory_core.bootstrap', 'memory_core.config']\n"
        "before = [m for m in heavy if m in sys.modules]\n"
        "from memory_core import AsyncMemory, Memory\n"
        "after = [m for m in heavy if m in sys.modules]\n"
        "print(json.dumps({'before': before, 'after': after, 'all': memory_core.__all__}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(done.stdout)
    # The package alone loads none of it; the Python API (and what it stands on) loads on first use.
    assert seen["before"] == []
    assert "memory_core.entrypoints.python_api.memory" in seen["after"]
    assert {"Memory", "AsyncMemory"} <= set(seen["all"])
    with pytest.raises(AttributeError):
        memory_core.NoSuchName  # noqa: B018


def test_the_api_module_reaches_adapters_only_through_the_composition_root() -> None:
    source = (ROOT / "memory_core" / "entrypoints" / "python_api" / "memory.py").read_text(encoding="utf-8")
    assert "adapters" not in source.replace("memory_core.adapters", "")
    for sdk in ("import azure", "from azure", "import httpx", "import openai", "agent_framework"):
        assert sdk not in source


# ------------------------------------------------------------------------------------------------
# Messages
# ------------------------------------------------------------------------------------------------


def test_messages_in_every_accepted_shape() -> None:
    assert turn_messages("hello") == [TurnMessage(role=MessageRole.USER, text="hello")]
    assert turn_messages({"role": "assistant", "content": "hi"})[0].role is MessageRole.ASSISTANT
    parts = [
        {"type": "text", "text": "I like tea."},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        "And green tea most.",
        {"type": "input_text", "text": "Really."},
    ]
    (message,) = turn_messages([{"role": "user", "content": parts}])
    assert message.text == "I like tea.\nAnd green tea most.\nReally."
    (named,) = turn_messages([{"role": "user", "text": "I went hiking.", "name": "Caroline"}])
    assert (named.text, named.name) == ("I went hiking.", "Caroline")
    (system,) = turn_messages([{"role": "developer", "content": "Be brief."}])
    assert system.role is MessageRole.SYSTEM
    ready = TurnMessage(role=MessageRole.USER, text="as is")
    assert turn_messages([ready, {"role": "tool", "content": "42"}])[0] is ready
    assert turn_messages(m for m in [{"role": "user", "content": "a generator"}])[0].text == "a generator"


def test_a_chat_history_is_taken_as_the_chat_api_wrote_it() -> None:
    """Tool calls, tool results without text, and the keys chat SDKs add (``refusal``, ``annotations``,
    ``audio``...) are not refused: unknown keys are ignored and messages without text are left out."""
    openai_history = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "What's the weather in Berlin? I live there."},
        {  # an assistant's tool call: content None
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": ""},  # a tool result without text
        {"role": "tool", "tool_call_id": "c2", "content": "12 degrees"},
        # ChatCompletionMessage.model_dump() of an answer
        {
            "role": "assistant",
            "content": "It is 12 degrees in Berlin.",
            "refusal": None,
            "annotations": [],
            "audio": None,
            "function_call": None,
            "tool_calls": None,
        },
        # Responses API items: a function call and its output are not messages
        {"type": "function_call", "call_id": "c3", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c3", "output": "12"},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Anything else?", "annotations": []}],
        },
    ]
    messages = turn_messages(openai_history)
    assert [(m.role, m.text) for m in messages] == [
        (MessageRole.SYSTEM, "You are helpful."),
        (MessageRole.USER, "What's the weather in Berlin? I live there."),
        (MessageRole.TOOL, "12 degrees"),
        (MessageRole.ASSISTANT, "It is 12 degrees in Berlin."),
        (MessageRole.ASSISTANT, "Anything else?"),
    ]


def test_a_history_passed_as_is_is_remembered(memory: Memory) -> None:
    added = memory.add(
        [
            {"role": "user", "content": "I'm vegetarian."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
            {"role": "tool", "tool_call_id": "c1", "content": None},
            {"role": "assistant", "content": "Noted.", "refusal": None},
        ],
        user_id=USER,
    )
    assert [(d.event, d.memory) for d in added.decisions if d.kind is CandidateKind.FACT] == [
        (MemoryEvent.ADD, "I'm vegetarian")
    ]


@pytest.mark.parametrize(
    ("messages", "field", "words"),
    [
        ([], "messages", "is empty"),
        ("", "messages.0.content", "is empty"),
        ("   ", "messages.0.content", "is empty"),
        (
            [{"role": "assistant", "content": None, "tool_calls": []}, {"role": "tool", "content": ""}],
            "messages",
            "no message with text",
        ),
        ([{"type": "function_call", "name": "f"}], "messages.0", "not a message with text"),
        ([{"content": "x"}], "messages.0.role", "is required"),
        ([{"role": "robot", "content": "x"}], "messages.0.role", "'robot' is not a role"),
        ([{"role": 5, "content": "x"}], "messages.0.role", "5 is not a role"),
        ([{"role": ["user"], "content": "x"}], "messages.0.role", "is not a role"),
        (
            [{"role": "user", "content": "ok"}, {"role": 5, "content": None}],
            "messages.1.role",
            "is not a role",
        ),
        ([{"role": "user", "content": "x", "text": "y"}], "messages.0.content", "not both"),
        ([{"role": "user"}], "messages.0.content", "is required"),
        ([{"role": "user", "content": None}], "messages.0.content", "is required"),
        ([{"role": "user", "content": 5}], "messages.0.content", "must be a string or a list"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages.0.content.0.text", "string"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "messages.0.content", "is empty"),
        ([{"role": "user", "content": "ok"}, "bare"], "messages.1", "must be a message"),
        ([{"role": "user", "content": "bell \x07"}], "messages.0.content", "U+0007"),
        ([{"role": "user", "content": "x", "name": ""}], "messages.0.name", ""),
        (42, "messages", "must be a string"),
    ],
)
def test_bad_messages_are_refused_naming_the_field(messages: Any, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        turn_messages(messages)
    assert caught.value.field == field
    assert words in caught.value.message


# ------------------------------------------------------------------------------------------------
# Embedded, synchronous
# ------------------------------------------------------------------------------------------------


def test_add_returns_typed_decisions_and_metadata_lands_on_the_memories(memory: Memory) -> None:
    added = memory.add(
        [{"role": "user", "content": STATEMENT}, {"role": "assistant", "content": "Noted!"}],
        user_id=USER,
        metadata={"source": "onboarding", "tags": ["diet"]},
    )
    assert isinstance(added, AddResult)
    assert added.status == "ingested" and added.turn_id.startswith("turn-")
    facts = [d for d in added.decisions if d.kind is CandidateKind.FACT]
    assert [(d.event, d.memory) for d in facts] == [
        (MemoryEvent.ADD, "I'm vegetarian"),
        (MemoryEvent.ADD, "I live in Berlin"),
    ]
    episode = next(d for d in added.decisions if d.kind is CandidateKind.EPISODE)
    assert episode.memory == STATEMENT and episode.previous is None
    for decision in added.decisions:
        assert decision.record is not None and decision.record.embedding is None
        assert decision.record.agent_id == "default"
        assert decision.record.metadata["source"] == "onboarding"
        assert decision.record.metadata["tags"] == ["diet"]
        assert decision.reason
    stored = memory.get(facts[0].memory_id or "", user_id=USER)
    assert stored.metadata["source"] == "onboarding"  # stored, not only returned
    (entry,) = memory.history(stored.id, user_id=USER)
    assert (
        entry.after is not None and entry.after["metadata"]["source"] == "onboarding"
    )  # a replay writes it too

    again = memory.add("I'm vegetarian.", user_id=USER)
    known = next(d for d in again.decisions if d.kind is CandidateKind.FACT)
    assert known.event is MemoryEvent.NONE and known.memory_id == facts[0].memory_id
    assert known.previous == "I'm vegetarian"


def test_a_forget_request_is_a_delete_decision_and_metadata_stays_off_it(memory: Memory) -> None:
    memory.add("I'm vegetarian.", user_id=USER)
    (decision,) = memory.add(
        "Please forget that I am vegetarian.", user_id=USER, metadata={"via": "chat"}
    ).decisions
    assert (decision.event, decision.kind, decision.memory) == (
        MemoryEvent.DELETE,
        CandidateKind.FORGET,
        "I'm vegetarian",
    )
    assert decision.record is not None and decision.record.status is MemoryStatus.DELETED
    assert "via" not in decision.record.metadata  # caller metadata goes on what a turn adds or updates
    assert memory.search("vegetarian", user_id=USER, kind="fact").hits == []


def test_a_turn_without_metadata_travels_as_before() -> None:
    turn = Turn(
        turn_id="t1",
        user_id=USER,
        agent_id="a",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        messages=turn_messages("hi"),
    )
    assert "metadata" not in turn.to_json_dict()
    assert turn.model_copy(update={"metadata": {"k": 1}}).to_json_dict()["metadata"] == {"k": 1}


def test_add_with_a_turn_id_is_idempotent_and_dates_are_the_callers(memory: Memory) -> None:
    when = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    first = memory.add("I moved to Munich last month.", user_id=USER, turn_id="t-1", occurred_at=when)
    assert first.status == "ingested"
    fact = next(d for d in first.decisions if d.kind is CandidateKind.FACT)
    assert "February 2026" in fact.memory  # "last month" resolved against occurred_at
    assert fact.record is not None and fact.record.created_at == when
    repeat = memory.add("I moved to Munich last month.", user_id=USER, turn_id="t-1", occurred_at=when)
    assert repeat.status == "duplicate"
    assert [d.memory_id for d in repeat.decisions] == [d.memory_id for d in first.decisions]
    assert len(memory.get_all(user_id=USER)) == len(first.decisions)


def test_search_get_get_all_update_delete_history_export(memory: Memory) -> None:
    memory.add(STATEMENT, user_id=USER)
    memory.add("I go to the gym every Monday.", user_id=USER, agent_id="coach")

    result = memory.search("vegetarian", user_id=USER, top=2)
    assert result.hits[0].record.memory == "I'm vegetarian"
    assert all(hit.record.embedding is None for hit in result.hits)
    assert result.hits[0].record.access_count == 0  # read-only by default
    facts = memory.search("vegetarian", user_id=USER, kind="fact", mode="keyword", profile="none", top=10)
    assert {h.record.memory for h in facts.hits} == {"I'm vegetarian"}
    assert facts.mode.value == "keyword" and facts.ranking_profile.value == "none"
    assert {h.record.agent_id for h in memory.search("gym", user_id=USER).hits} == {"default"}  # scoped
    memory.search("vegetarian", user_id=USER, top=1, recall=True)
    target = result.hits[0].record
    assert memory.get(target.id, user_id=USER).access_count == 1

    listed = memory.get_all(user_id=USER)
    assert {r.memory for r in listed} == {"I'm vegetarian", "I live in Berlin", STATEMENT}
    assert [r.id for r in listed] == sorted(r.id for r in listed)
    assert all(r.embedding is None for r in listed)
    assert len(memory.get_all(user_id=USER, limit=2)) == 2
    assert [r.memory for r in memory.get_all(user_id=USER, agent_id="coach", status="active")] != []

    updated = memory.update(target.id, "I'm vegan", user_id=USER, metadata={"corrected": True})
    assert (updated.id, updated.memory, updated.embedding) == (target.id, "I'm vegan", None)
    assert updated.metadata["corrected"] is True and "updated_on_request" in updated.metadata
    assert memory.search("vegan", user_id=USER, mode="keyword", top=1).hits[0].record.id == target.id
    assert not [
        h for h in memory.search("vegetarian", user_id=USER, mode="keyword").hits if h.record.id == target.id
    ]
    assert memory.update(target.id, "I'm vegan", user_id=USER) == updated  # nothing new: nothing recorded

    deleted = memory.delete(target.id, user_id=USER)
    assert deleted.status is MemoryStatus.DELETED
    assert memory.get(target.id, user_id=USER).status is MemoryStatus.DELETED
    assert target.id not in {h.record.id for h in memory.search("vegan", user_id=USER, top=10).hits}
    assert target.id not in {r.id for r in memory.get_all(user_id=USER)}
    assert [r.id for r in memory.get_all(user_id=USER, status=MemoryStatus.DELETED)] == [target.id]
    with pytest.raises(ConflictError):
        memory.update(target.id, "I'm vegetarian again", user_id=USER)

    events = [
        (e.event, (e.before or {}).get("memory"), (e.after or {}).get("memory"))
        for e in memory.history(target.id, user_id=USER)
    ]
    assert events == [
        (MemoryEvent.ADD, None, "I'm vegetarian"),
        (MemoryEvent.UPDATE, "I'm vegetarian", "I'm vegan"),
        (MemoryEvent.DELETE, "I'm vegan", "I'm vegan"),
    ]

    exported = memory.export(user_id=USER)
    assert isinstance(exported, MemoryExport) and exported.agent_id is None
    assert {r.agent_id for r in exported.memories} == {"default", "coach"}
    assert all(r.embedding is None for r in exported.memories)  # vectors only when asked for
    assert all(r.embedding for r in memory.export(user_id=USER, include_vectors=True).memories)
    assert len(exported.history) >= len(exported.memories)
    only_coach = memory.export(user_id=USER, agent_id="coach")
    assert {r.agent_id for r in only_coach.memories} == {"coach"}


def test_get_all_pages_through_the_store(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_core.entrypoints.python_api.async_memory as api

    for text in (
        "I like tea.",
        "I live in Oslo.",
        "I go to the gym every Monday.",
        "I'm allergic to shrimp.",
    ):
        memory.add(text, user_id=USER)
    whole = memory.get_all(user_id=USER, limit=None)  # one page
    assert len(whole) >= 6
    monkeypatch.setattr(api, "_PAGE", 2)
    assert [r.id for r in memory.get_all(user_id=USER, limit=None)] == [r.id for r in whole]  # two at a time
    assert [r.id for r in memory.get_all(user_id=USER, limit=5)] == [r.id for r in whole[:5]]


def test_delete_all_purges_and_forget_reports(memory: Memory) -> None:
    memory.add(STATEMENT, user_id=USER)
    memory.add("I like jazz.", user_id=USER, agent_id="music")
    memory.add("I like tea.", user_id="bob")

    report = memory.forget()
    assert report.dry_run and report.scanned == 7  # every user's memories: 3 + 2 (music) + 2 (bob)
    assert report.written == 0 and report.complete
    assert memory.forget(limit=2).scanned == 2

    only_music = memory.delete_all(user_id=USER, agent_id="music")
    assert (only_music.user_id, only_music.agent_id, only_music.memories) == (USER, "music", 2)
    assert memory.get_all(user_id=USER, agent_id="music") == []
    purged = memory.delete_all(user_id=USER)
    assert purged.memories == 3 and purged.history >= 3 and purged.purged_at is not None
    assert memory.get_all(user_id=USER) == [] and memory.get_all(user_id=USER, status="deleted") == []
    assert memory.export(user_id=USER).memories == ()
    assert len(memory.get_all(user_id="bob")) == 2
    # a turn dated before the purge (a late replay) is dropped, a new one is kept
    late = memory.add("I'm vegetarian.", user_id=USER, occurred_at=purged.purged_at - timedelta(seconds=1))
    assert (late.status, late.decisions) == ("purged", ())


def _queue_turns(store: Path, *turns: tuple[str, str]) -> Path:
    """Publish ``(user, text)`` turns to the embedded queue beside ``store`` (as a LocalMemoryClient
    with ``queue=True`` or ``memory-core serve`` does; nothing ingests them); returns the queue file."""
    from memory_core.bootstrap import build_local_queue, build_service, load_settings, local_queue_path

    async def publish() -> None:
        settings = load_settings(sqlite_path=str(store))
        async with build_service(settings, publisher=build_local_queue(settings)) as service:
            for number, (user, text) in enumerate(turns):
                turn = Turn(
                    turn_id=f"queued-{number}",
                    user_id=user,
                    agent_id="default",
                    occurred_at=datetime.now(UTC),
                    messages=turn_messages(text),
                )
                assert await service.publish_turn(turn) == "queued"

    run(publish())
    return Path(local_queue_path(load_settings(sqlite_path=str(store))))


def test_delete_all_removes_the_users_turns_waiting_on_the_local_queue(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    queue = _queue_turns(store, (USER, "My passport number is X123."), ("bob", "My passport number is B456."))
    assert b"X123" in queue.read_bytes()

    with Memory(store) as m:
        report = m.delete_all(user_id=USER)
        assert report.queued == 1 and report.checkpointed
        assert m.delete_all(user_id="carol").queued == 0
    on_disk = b"".join(f.read_bytes() for f in tmp_path.iterdir() if f.name.startswith("s.db"))
    assert b"X123" not in on_disk  # the words are gone from the queue file (and its log)
    assert b"B456" in queue.read_bytes()  # another user's turn still waits

    with Memory(tmp_path / "alone.db") as m:  # a store without a queue: none is created
        assert m.delete_all(user_id=USER).queued == 0
    assert not Path(str(tmp_path / "alone.db") + ".queue").exists()


def test_a_purge_is_not_undone_by_an_update_in_flight(tmp_path: Path, pace: Pace) -> None:
    async def gone(m: AsyncMemory) -> None:
        assert await m.get_all(user_id=USER) == []
        assert await m.get_all(user_id=USER, status="deleted") == []
        assert (await m.export(user_id=USER)).history == ()

    async def main() -> None:
        async with AsyncMemory(tmp_path / "a.db", episodes=False) as m:
            memory_id = (await m.add("I'm vegetarian.", user_id=USER)).decisions[0].memory_id
            assert memory_id is not None
            # In one memory, the purge waits for the update (one writer at a time): it removes it.
            pace.delays = [0.2]
            updated, purged = await asyncio.gather(
                m.update(memory_id, "I'm vegan.", user_id=USER), m.delete_all(user_id=USER)
            )
            assert updated.memory == "I'm vegan." and purged.memories == 1
            await gone(m)

            # Another process (here: another memory on the same file) purges while the update embeds
            # its text: the update finds the memory gone and writes nothing.
            memory_id = (await m.add("I like jazz.", user_id=USER)).decisions[0].memory_id
            assert memory_id is not None
            async with AsyncMemory(tmp_path / "a.db", episodes=False) as other:
                pace.delays = [0.2]
                pace.started.clear()
                update = asyncio.ensure_future(m.update(memory_id, "I like blues.", user_id=USER))
                while not pace.started.is_set():
                    await asyncio.sleep(0.01)
                assert (await other.delete_all(user_id=USER)).memories == 1
                with pytest.raises(NotFoundError):
                    await update
            await gone(m)

    run(main())


def test_errors_name_what_is_wrong(memory: Memory) -> None:
    with pytest.raises(ValidationError) as caught:
        memory.add("hi", user_id="")
    assert caught.value.field == "user_id"
    with pytest.raises(ValidationError) as caught:
        memory.search("x", user_id=USER, agent_id="bad agent")
    assert caught.value.field == "agent_id"
    with pytest.raises(ValidationError) as caught:
        memory.get("not/an/id", user_id=USER)
    assert caught.value.field == "memory_id"
    with pytest.raises(NotFoundError):
        memory.get("0" * 32, user_id=USER)
    with pytest.raises(NotFoundError):
        memory.history("0" * 32, user_id=USER)
    with pytest.raises(NotFoundError):
        memory.delete("0" * 32, user_id=USER)
    with pytest.raises(NotFoundError):
        memory.update("0" * 32, "text", user_id=USER)
    for options, field in [
        ({"top": 0}, "top"),
        ({"mode": "fuzzy"}, "mode"),
        ({"profile": "loud"}, "profile"),
        ({"min_importance": 2.0}, "min_importance"),
        ({"kind": "dream"}, "kind"),
    ]:
        with pytest.raises(ValidationError) as caught:
            memory.search("x", user_id=USER, **options)
        assert caught.value.field == field, options
    with pytest.raises(ValidationError) as caught:
        memory.get_all(user_id=USER, status="lost")
    assert caught.value.field == "status"
    with pytest.raises(ValidationError) as caught:
        memory.get_all(user_id=USER, limit=0)
    assert caught.value.field == "limit"
    with pytest.raises(ValidationError) as caught:
        memory.add("hi", user_id=USER, metadata={"evidence": "mine"})
    assert caught.value.field == "metadata" and "reserved" in caught.value.message
    with pytest.raises(ValidationError) as caught:
        memory.add("hi", user_id=USER, metadata={"when": datetime.now(UTC)})
    assert caught.value.field.startswith("metadata")
    with pytest.raises(ValidationError) as caught:
        memory.add("hi", user_id=USER, occurred_at=datetime.now(UTC) + timedelta(days=1))
    assert caught.value.field == "occurred_at"
    record = memory.add("I like tea.", user_id=USER).decisions[0].record
    assert record is not None
    with pytest.raises(ValidationError) as caught:
        memory.update(record.id, "   ", user_id=USER)
    assert caught.value.field == "text"
    with pytest.raises(ValidationError) as caught:
        memory.update(record.id, "ok", user_id=USER, metadata={"status_reason": "x"})
    assert caught.value.field == "metadata"
    assert memory.get_all(user_id=USER) != []  # nothing was half-written


def test_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Memory(tmp_path / "a.db", embeder="hash")
    message = str(caught.value)
    assert "unknown setting 'embeder'" in message and "embedder" in message and "half_life_days" in message
    with pytest.raises(ConfigurationError, match="half_life_days must be a float"):
        AsyncMemory(tmp_path / "a.db", half_life_days="30")
    with pytest.raises(ConfigurationError, match="episodes must be a bool"):
        AsyncMemory(tmp_path / "a.db", episodes=1)
    with pytest.raises(ConfigurationError, match="path or sqlite_path"):
        AsyncMemory(tmp_path / "a.db", sqlite_path=str(tmp_path / "b.db"))
    with pytest.raises(ConfigurationError, match="api_token goes with url"):
        AsyncMemory(api_token="x" * 16)
    with pytest.raises(ConfigurationError, match="path does not go with url"):
        AsyncMemory(tmp_path / "a.db", url="http://127.0.0.1:7071")
    with pytest.raises(ConfigurationError, match="embedder does not go with url"):
        AsyncMemory(url="http://127.0.0.1:7071", embedder="hash")
    with pytest.raises(ConfigurationError, match="plain http"):
        AsyncMemory(url="http://10.0.0.5:7071", api_token="x" * 16)
    with pytest.raises(ConfigurationError, match="needs AZURE_SEARCH_ENDPOINT"):
        AsyncMemory(store="azure_search")
    with pytest.raises(ConfigurationError, match="MEMORY_EMBEDDER must be one of"):
        Memory(tmp_path / "c.db", embedder="nope")
    assert not (tmp_path / "a.db").exists()  # a refused configuration opens nothing

    # settings over the environment: the file says which embedder built it
    with Memory(tmp_path / "d.db", half_life_days=30, episodes=False) as m:
        added = m.add("I like tea.", user_id=USER)
        assert [d.kind for d in added.decisions] == [CandidateKind.FACT]  # episodes off
    with pytest.raises(ConflictError, match="built with the embedder 'hash-256'"):
        Memory(tmp_path / "d.db", embedder="e5-local")


def test_azure_settings_build_the_azure_store_through_bootstrap() -> None:
    async def main() -> str:
        memory = AsyncMemory(
            store="azure_search",
            azure_search_endpoint="https://x.search.windows.net",
            azure_search_api_key="k",
        )
        async with memory:
            return repr(memory)

    assert run(main()) == "AsyncMemory(azure: 'https://x.search.windows.net')"


# ------------------------------------------------------------------------------------------------
# Lifetime
# ------------------------------------------------------------------------------------------------


def _loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memory-core" and t.is_alive()]


def test_memory_is_a_context_manager_with_one_loop_thread(tmp_path: Path) -> None:
    before = len(_loop_threads())
    with Memory(tmp_path / "m.db") as m:
        assert len(_loop_threads()) == before + 1
        assert repr(m) == f"Memory(embedded: {str(tmp_path / 'm.db')!r})" and not m.remote
        m.add("I like tea.", user_id=USER)
    assert len(_loop_threads()) == before
    assert "closed" in repr(m)
    m.close()  # again: nothing
    with pytest.raises(PermanentError, match="closed"):
        m.search("tea", user_id=USER)
    with Memory(tmp_path / "m.db") as again:  # the file is closed and reopens
        assert again.search("tea", user_id=USER).hits


def test_an_unclosed_memory_is_closed_when_collected(tmp_path: Path) -> None:
    before = len(_loop_threads())
    m = Memory(tmp_path / "m.db")
    m.add("I like tea.", user_id=USER)
    del m
    gc.collect()
    assert len(_loop_threads()) == before


def test_memory_works_where_an_event_loop_already_runs(tmp_path: Path) -> None:
    """As in a notebook: synchronous calls from inside a running loop."""

    async def notebook_cell() -> list[str]:
        with Memory(tmp_path / "m.db") as m:
            m.add("I like tea.", user_id=USER)
            return [h.record.memory for h in m.search("tea", user_id=USER).hits]

    assert "I like tea" in run(notebook_cell())


def test_a_failed_construction_leaves_no_thread(tmp_path: Path) -> None:
    before = len(_loop_threads())
    with pytest.raises(ConfigurationError):
        Memory(tmp_path / "m.db", nonsense=1)
    assert len(_loop_threads()) == before


# ------------------------------------------------------------------------------------------------
# Embedded, async
# ------------------------------------------------------------------------------------------------


def test_async_memory_has_every_method(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemory(tmp_path / "a.db") as m:
            assert repr(m).startswith("AsyncMemory(embedded:")
            added = await m.add(
                {"role": "user", "content": [{"type": "text", "text": STATEMENT}]}, user_id=USER
            )
            assert [d.event for d in added.decisions] == [MemoryEvent.ADD] * 3
            hit = (await m.search("vegetarian", user_id=USER, top=1)).hits[0]
            assert hit.record.memory == "I'm vegetarian"
            assert (await m.get(hit.record.id, user_id=USER)).memory == "I'm vegetarian"
            assert len(await m.get_all(user_id=USER)) == 3
            assert (await m.update(hit.record.id, "I'm vegan", user_id=USER)).memory == "I'm vegan"
            assert (await m.delete(hit.record.id, user_id=USER)).status is MemoryStatus.DELETED
            assert [e.event for e in await m.history(hit.record.id, user_id=USER)] == [
                MemoryEvent.ADD,
                MemoryEvent.UPDATE,
                MemoryEvent.DELETE,
            ]
            assert len((await m.export(user_id=USER)).memories) == 3
            assert (await m.forget()).scanned == 2
            assert (await m.forget(dry_run=False)).dry_run is False
            assert (await m.delete_all(user_id=USER)).memories == 3
        with pytest.raises(PermanentError, match="closed"):
            await m.get_all(user_id=USER)
        await m.close()  # again: nothing

    run(main())


def test_concurrent_adds_are_ingested_one_at_a_time(tmp_path: Path, pace: Pace) -> None:
    """A turn added first is consolidated first, even when its embedding takes longer, and the next
    turn sees what it stored: two statements that consolidate into each other (the second one updates
    the first). Without the lock the second turn would be ingested while the first waits for its
    embedding, and both would be added."""
    first, second = "I like tea.", "These days I like coffee more than tea."

    async def main() -> tuple[list[list[tuple[MemoryEvent, str | None]]], list[str]]:
        async with AsyncMemory(tmp_path / "a.db", episodes=False) as m:
            pace.delays = [0.3]  # the first turn's embedding is slow; the second's yields at once
            results = await asyncio.gather(m.add(first, user_id=USER), m.add(second, user_id=USER))
            stored = [r.memory for r in await m.get_all(user_id=USER)]
            return [[(d.event, d.previous) for d in r.decisions] for r in results], stored

    decisions, stored = run(main())
    assert decisions == [[(MemoryEvent.ADD, None)], [(MemoryEvent.UPDATE, "I like tea")]]
    assert stored == ["These days I like coffee more than tea"]

    # The same from two threads of one synchronous Memory (one event loop, one lock).
    with Memory(tmp_path / "s.db", episodes=False) as m:
        pace.delays, pace.batches = [0.3], 0
        pace.started.clear()
        added: dict[str, AddResult] = {}
        slow = threading.Thread(target=lambda: added.update(first=m.add(first, user_id=USER)))
        slow.start()
        assert pace.started.wait(10)  # the first turn is being embedded
        added["second"] = m.add(second, user_id=USER)
        slow.join(10)
        assert [d.event for d in added["first"].decisions] == [MemoryEvent.ADD]
        assert [d.event for d in added["second"].decisions] == [MemoryEvent.UPDATE]
        assert [r.memory for r in m.get_all(user_id=USER)] == ["These days I like coffee more than tea"]


def test_close_lets_a_call_in_flight_on_another_thread_finish(tmp_path: Path, pace: Pace) -> None:
    before = len(_loop_threads())
    m = Memory(tmp_path / "m.db", episodes=False)
    pace.delays = [1.0]
    outcome: dict[str, Any] = {}

    def add() -> None:
        try:
            outcome["result"] = m.add("I like tea.", user_id=USER)
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            outcome["error"] = exc

    caller = threading.Thread(target=add, daemon=True)
    caller.start()
    assert pace.started.wait(10)
    m.close()  # while the add waits for its embedding
    caller.join(5)
    assert not caller.is_alive()
    assert outcome["result"].status == "ingested"
    assert len(_loop_threads()) == before
    with pytest.raises(PermanentError, match="closed"):
        m.add("I like coffee.", user_id=USER)
    with Memory(tmp_path / "m.db") as again:  # the add finished before the store was closed
        assert [r.memory for r in again.get_all(user_id=USER)] == ["I like tea"]


def test_close_cancels_calls_that_outlast_its_grace(
    tmp_path: Path, pace: Pace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memory_core.entrypoints.python_api.loop_thread as memory_module

    monkeypatch.setattr(memory_module, "CLOSE_GRACE", 0.2)
    before = len(_loop_threads())
    m = Memory(tmp_path / "m.db", episodes=False)
    pace.delays = [60.0, 60.0, 60.0]
    errors: list[BaseException] = []
    calling = threading.Barrier(4)

    def add() -> None:
        calling.wait(10)
        try:
            m.add("I like tea.", user_id=USER)
        except BaseException as exc:
            errors.append(exc)

    callers = [threading.Thread(target=add, daemon=True) for _ in range(3)]
    for caller in callers:
        caller.start()
    calling.wait(10)  # every caller is at its call
    assert pace.started.wait(10)
    deadline = time.monotonic() + 1  # every call is in flight: embedding, or waiting for the embedder
    while pace.batches < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    m.close()
    for caller in callers:
        caller.join(5)
    assert not any(caller.is_alive() for caller in callers)  # none waits forever
    assert len(errors) == 3
    assert all(isinstance(e, PermanentError) and "closed before the call finished" in str(e) for e in errors), errors
    assert len(_loop_threads()) == before


def test_a_script_that_never_closes_its_memory_exits_cleanly(tmp_path: Path) -> None:
    code = (
        "from memory_core import Memory\n"
        "m = Memory()\n"
        "m.add('I like tea.', user_id='alice')\n"
        "print(m.search('tea', user_id='alice').hits[0].record.memory)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(MEMORY_EMBEDDER="hash", PYTHONWARNINGS="error::ResourceWarning"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "I like tea\n", "")
    with Memory(tmp_path / ".memory-core" / "memory.db") as m:  # closed cleanly: it opens again
        assert {r.memory for r in m.get_all(user_id=USER)} == {"I like tea", "I like tea."}


# ------------------------------------------------------------------------------------------------
# Remote: a real embedded runtime (`memory-core serve`) over loopback
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[RunningRuntime]:
    running = RunningRuntime(tmp_path / "served.db").start()
    try:
        yield running
    finally:
        running.stop()


def _url(runtime: RunningRuntime) -> str:
    server = runtime.runtime.server
    assert server is not None
    return f"http://{server.host}:{server.port}"


def test_remote_async_memory_against_a_running_server(runtime: RunningRuntime) -> None:
    async def main() -> None:
        async with AsyncMemory(url=_url(runtime), timeout=10) as m:
            assert m.remote and repr(m) == f"AsyncMemory(remote: {_url(runtime)!r})"
            added = await m.add(
                [{"role": "user", "content": STATEMENT}, {"role": "assistant", "content": "Noted!"}],
                user_id=USER,
                metadata={"source": "remote"},
            )
            assert (added.status, added.decisions) == ("queued", ())
            await asyncio.to_thread(runtime.drain)
            repeat = await m.add(STATEMENT, user_id=USER, turn_id=added.turn_id)
            assert repeat.status == "duplicate"

            hits = (await m.search("vegetarian", user_id=USER, top=1)).hits
            target = hits[0].record
            assert target.memory == "I'm vegetarian" and target.metadata["source"] == "remote"
            got = await m.get(target.id, user_id=USER)  # (its retention as of the later read)
            assert got.model_copy(update={"retention_score": target.retention_score}) == target
            assert {r.memory for r in await m.get_all(user_id=USER)} == {
                "I'm vegetarian",
                "I live in Berlin",
                STATEMENT,
            }
            deleted = await m.delete(target.id, user_id=USER)
            assert deleted.status is MemoryStatus.DELETED
            assert target.id not in {r.id for r in await m.get_all(user_id=USER)}
            assert [r.id for r in await m.get_all(user_id=USER, status="deleted")] == [target.id]
            assert [e.event for e in await m.history(target.id, user_id=USER)] == [
                MemoryEvent.ADD,
                MemoryEvent.DELETE,
            ]
            exported = await m.export(user_id=USER)
            assert len(exported.memories) == 3 and not any(r.embedding for r in exported.memories)
            with_vectors = await m.export(user_id=USER, include_vectors=True)
            assert [r.id for r in with_vectors.memories] == [r.id for r in exported.memories]
            assert all(r.embedding for r in with_vectors.memories)
            assert exported.history and exported.agent_id is None
            report = await m.forget()
            assert report.dry_run and report.scanned == 2 and report.complete
            assert (await m.forget(limit=1)).scanned == 1

            with pytest.raises(NotFoundError):
                await m.get("0" * 32, user_id=USER)
            with pytest.raises(NotFoundError):
                await m.history("0" * 32, user_id=USER)
            with pytest.raises(ValidationError) as caught:  # the server's own bound (100), named
                await m.search("x", user_id=USER, top=500)
            assert caught.value.field == "top"
            added = await m.add("I'm vegetarian now.", user_id=USER, agent_id="diet", infer=False)
            fresh = added.decisions[0].record
            assert fresh is not None
            updated = await m.update(fresh.id, "I'm vegan", user_id=USER, agent_id="diet", metadata={"by": "hand"})
            assert updated.id == fresh.id and updated.memory == "I'm vegan" and updated.metadata["by"] == "hand"
            assert (await m.get(fresh.id, user_id=USER, agent_id="diet")).memory == "I'm vegan"
            with pytest.raises(PermanentError, match="is deleted"):  # the server's answer, in words
                await m.update(target.id, "I'm vegan", user_id=USER)
            with pytest.raises(NotFoundError):  # PATCH /api/memories/{id}: the server's answer
                await m.update("0" * 32, "x", user_id=USER)

            purged = await m.delete_all(user_id=USER)
            assert purged.memories == 4 and purged.purged_at is not None  # with the one added as given
            assert await m.get_all(user_id=USER) == []
            late = await m.add(
                "I'm vegetarian.", user_id=USER, occurred_at=purged.purged_at - timedelta(seconds=1)
            )
            assert late.status == "purged"

    run(main())


def test_remote_memory_synchronous(runtime: RunningRuntime) -> None:
    with Memory(url=_url(runtime)) as m:
        assert m.add("I like jazz.", user_id=USER, agent_id="music").status == "queued"
        runtime.drain()
        assert m.search("jazz", user_id=USER, agent_id="music").hits[0].record.memory == "I like jazz"
        assert len(m.get_all(user_id=USER, agent_id="music", limit=None)) == 2
        assert m.delete_all(user_id=USER, agent_id="music").memories == 2
