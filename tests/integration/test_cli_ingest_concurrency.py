"""``memory-core ingest --concurrency N --batch M``: turns of different scopes in flight together, each
scope's next turns prepared together, their passages embedded in one model call, and everything else
exactly as one turn after another: the output (text
and ``--json``, in the file's order), the stored memories with their vectors, the decision history,
and what a failing turn leaves behind."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_core.adapters.models import hash_embedder
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.cli.main import main
from memory_core.tools.bench.ingest import synthetic_turns

TURNS = synthetic_turns(72, scopes=6, seed=11)
USERS = sorted({t["user_id"] for t in TURNS})


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case runs in an empty folder, with the hashing embedder and no store path from outside."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    for name in ("MEMORY_SQLITE_PATH", "MEMORY_STORE", "AZURE_SEARCH_ENDPOINT", "MEMORY_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The passages of every call the CLI's embedder makes (the configured hashing embedder, counting)."""
    calls: list[list[str]] = []

    class CountingEmbedder(HashingEmbedder):
        """The hashing embedder; a call takes a moment, as a model's does (other turns go on meanwhile),
        and passage calls are recorded."""

        async def embed_query(self, text: str) -> np.ndarray:
            await asyncio.sleep(0.001)
            return await super().embed_query(text)

        async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
            if texts:
                calls.append(list(texts))
            await asyncio.sleep(0.002)
            return await super().embed_passages(texts)

    # what MEMORY_EMBEDDER=hash builds (memory_core.bootstrap imports it when it builds the embedder)
    monkeypatch.setattr(hash_embedder, "HashingEmbedder", CountingEmbedder)
    return calls


def run(*argv: str) -> tuple[int, str]:
    """``memory-core ARGV`` in this process: the exit status and what it printed on standard output."""
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def write_turns(path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in turns), encoding="utf-8")
    return str(path)


def stored(db: str, tmp_path: Path) -> dict[str, tuple[list[Any], list[Any]]]:
    """Per user: the exported records (with their vectors) and the decision history, as JSON."""
    found: dict[str, tuple[list[Any], list[Any]]] = {}
    for user in USERS:
        history = tmp_path / f"{db}.{user}.history.jsonl"
        code, out = run("--db", db, "export", "--user", user, "--history", str(history))
        assert code == 0
        records = [json.loads(line) for line in out.splitlines()]
        entries = [json.loads(line) for line in history.read_text(encoding="utf-8").splitlines()]
        found[user] = (records, entries)
    return found


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_concurrent_ingest_prints_stores_and_records_the_same_as_one_turn_after_another(
    json_output: bool, tmp_path: Path, model_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    turns = write_turns(tmp_path / "turns.jsonl", TURNS)
    json_flag = ["--json"] if json_output else []
    code, one_at_a_time = run("--db", "one.db", *json_flag, "ingest", turns, "--concurrency", "1", "--batch", "1")
    assert code == 0
    calls_one = list(model_calls)
    model_calls.clear()
    code, together = run("--db", "four.db", *json_flag, "ingest", turns, "--concurrency", "4")  # batch 8
    assert code == 0
    assert capsys.readouterr().err == ""

    assert together == one_at_a_time  # the same lines (or document), in the file's order
    if json_output:
        results = json.loads(together)
        assert [r["turn_id"] for r in results] == [t["turn_id"] for t in TURNS]
        assert {r["status"] for r in results} == {"ingested"}
    else:
        headers = [line for line in together.splitlines() if line.startswith("turn ")]
        assert [h.split()[1] for h in headers] == [t["turn_id"] for t in TURNS]
    decisions = re.findall(r'"event": "(\w+)"' if json_output else r"^\s+(ADD|UPDATE|DELETE|NONE)\b", together, re.M)
    assert {"ADD", "UPDATE", "NONE"} <= set(decisions)  # the conversation restates and changes facts

    one, four = stored("one.db", tmp_path), stored("four.db", tmp_path)
    assert four == one  # memories, vectors and history, scope by scope
    assert sum(len(records) for records, _ in four.values()) > 30
    assert all(entries for _, entries in four.values())
    # the same passages were embedded (a text repeated in a batch, once), in far fewer calls
    assert set(t for call in model_calls for t in call) == set(t for call in calls_one for t in call)
    assert len(model_calls) * 4 < len(calls_one)


@pytest.mark.parametrize("batch", [1, 8])
def test_passages_of_turns_of_different_scopes_go_to_the_model_in_one_call(
    batch: int, tmp_path: Path, model_calls: list[list[str]]
) -> None:
    # every user message names its turn and scope, and is kept as an episode (a passage) of that scope;
    # each scope's turns come one after another in the file (no scope waits for a free slot behind them)
    turns = [
        {**t, "messages": [{"role": "user", "text": f"I live in Town-{t['user_id']}-{i}."}, *t["messages"][1:]]}
        for i, t in enumerate(sorted(TURNS[:24], key=lambda t: t["user_id"]))
    ]
    path = write_turns(tmp_path / "turns.jsonl", turns)
    code, _ = run("--db", "m.db", "ingest", path, "--concurrency", "4", "--batch", str(batch))
    assert code == 0

    def turns_of(call: list[str]) -> dict[str, set[int]]:
        """The turns (by index) whose user message is among the passages of ``call``, per user."""
        found: dict[str, set[int]] = {}
        for text in call:
            if m := re.search(r"Town-(bench-user-\d+)-(\d+)\.", text):
                found.setdefault(m.group(1), set()).add(int(m.group(2)))
        return found

    assert sum(1 for call in model_calls if turns_of(call)) < len(turns)  # fewer calls than turns
    assert max(len(turns_of(call)) for call in model_calls) >= 2  # one call held several scopes' passages
    # a call holds at most `batch` turns of one scope: with 1, never two at once (they would have met in
    # one call); with 8, a scope's next turns (its 4 turns here) were prepared together
    most = max(len(indexes) for call in model_calls for indexes in turns_of(call).values())
    assert most == min(batch, 4)
    # and a scope's turns still went in the file's order
    for user in USERS:
        seen = [int(m.group(1)) for call in model_calls for t in call if (m := re.search(rf"Town-{user}-(\d+)\.", t))]
        assert seen == sorted(seen) and seen


def test_a_failing_turn_stops_the_run_as_it_does_one_turn_after_another(
    tmp_path: Path, model_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = 29  # dated in the future: refused when its turn comes
    turns = [dict(t) for t in TURNS]
    turns[bad]["occurred_at"] = "2999-01-01T00:00:00+00:00"
    path = write_turns(tmp_path / "turns.jsonl", turns)
    seconds = re.compile(r"\d+ s in the future")

    outcomes = {}
    for concurrency in ("1", "4"):
        code, out = run("--db", f"c{concurrency}.db", "ingest", path, "--concurrency", concurrency)
        outcomes[concurrency] = (code, out, seconds.sub("N s in the future", capsys.readouterr().err))
    assert outcomes["4"] == outcomes["1"]
    code, out, err = outcomes["4"]
    assert code == 2 and err.startswith("memory-core: error: occurred_at: 2999-01-01T00:00:00+00:00 is N s")
    assert [line.split()[1] for line in out.splitlines() if line.startswith("turn ")] == [
        t["turn_id"] for t in turns[:bad]
    ]

    # Run again without the bad turn: every turn before it was ingested, none halfway; the bad turn's
    # scope went no further; turns of other scopes after it ran whole or not at all.
    fixed = write_turns(tmp_path / "fixed.jsonl", [t for i, t in enumerate(turns) if i != bad])
    code, out = run("--db", "c4.db", "--json", "ingest", fixed, "--concurrency", "1")
    assert code == 0
    status = {r["turn_id"]: r["status"] for r in json.loads(out)}
    assert all(status[t["turn_id"]] == "duplicate" for t in turns[:bad])
    assert "resumed" not in status.values()
    bad_user = turns[bad]["user_id"]
    assert all(status[t["turn_id"]] == "ingested" for t in turns[bad + 1 :] if t["user_id"] == bad_user)
    # the store ends up as if the file had gone through one turn after another
    code, _ = run("--db", "c1.db", "ingest", fixed, "--concurrency", "1")
    assert code == 0
    assert stored("c4.db", tmp_path) == stored("c1.db", tmp_path)


def test_concurrency_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("ingest", "turns.jsonl", "--concurrency", "0") == (2, "")
    assert "argument --concurrency: 0 is not 1 or more" in capsys.readouterr().err
    help_text = io.StringIO()
    saved, sys.stdout = sys.stdout, help_text
    try:
        assert run("ingest", "--help")[0] == 0
    finally:
        sys.stdout = saved
    assert "(default: 4)" in help_text.getvalue()
