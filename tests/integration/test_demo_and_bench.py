"""``memory-core demo`` and ``memory-core bench ingest`` run end to end (local e5 embedder, SQLite)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, Reply

from memory_core.errors import ConfigurationError
from memory_core.tools.bench import ingest as bench_ingest
from memory_core.tools.demo import run_demo


def test_demo_prints_decisions_searches_and_forgetting(tmp_path: Path) -> None:
    lines: list[str] = []
    assert asyncio.run(run_demo(db_path=str(tmp_path / "demo.db"), out=lines.append)) == 0
    text = "\n".join(lines)
    for word in ("ADD", "NONE", "UPDATE", "DELETE", "IMPORTANT", "RECENT", "forgetting dry run"):
        assert word in text
    assert "紅茶が好きです → 最近は紅茶よりコーヒーが好きです" in text
    assert "激辛ラーメン" not in text.split("search")[1]  # the assistant's claim created nothing
    again: list[str] = []
    asyncio.run(run_demo(db_path=str(tmp_path / "demo.db"), out=again.append))
    assert sum("already ingested" in line for line in again) == 7  # a replay changes nothing


def test_demo_json_lines() -> None:
    lines: list[str] = []
    asyncio.run(run_demo(db_path=None, out=lines.append, json_output=True))
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds.count("turn") == 7 and kinds.count("search") == 2 and kinds[-1] == "forgetting"


def test_bench_ingest_reports_throughput_and_embedding_share() -> None:
    printed: list[str] = []
    report = bench_ingest.run(turns=12, out=printed.append)
    assert report["turns"] == 12 and report["turns_per_second"] > 0
    assert 0 < report["embedding_share"] < 1
    assert "turns per second" in printed[0]


def test_bench_ingest_sweeps_concurrency_with_the_floor_beside_it(tmp_path: Path) -> None:
    import io

    from memory_core.cli.parser import build_parser

    args = build_parser().parse_args(
        ["--json", "bench", "ingest", "--turns", "6", "--scopes", "3", "--concurrency", "1", "3", "--charts", str(tmp_path)]
    )
    out = io.StringIO()
    assert asyncio.run(bench_ingest.main(args, out)) == 0
    runs = json.loads(out.getvalue())["runs"]
    assert [r["concurrency"] for r in runs] == [1, 3]
    assert all(r["floor_turns_per_second"] > 0 and r["decisions"] == runs[0]["decisions"] for r in runs)
    # 2 turns a scope, prepared together (8 at most): one model call per scope when one at a time
    assert runs[0]["model_calls"] == 3 and runs[1]["model_calls"] <= runs[1]["passages_embedded"]
    assert (tmp_path / "ingest.png").stat().st_size > 1000


def test_bench_ingest_runs_as_serve_ingests_by_default() -> None:
    from memory_core.cli.parser import build_parser
    from memory_core.entrypoints.embedded.host import RuntimeOptions
    from memory_core.runtime.lanes import DEFAULT_BATCH

    parser = build_parser()
    args = parser.parse_args(["bench", "ingest"])
    assert args.concurrency is None and bench_ingest.DEFAULT_CONCURRENCY == RuntimeOptions().workers == 4
    # the batch a worker takes of a session: the same in serve, memory-core ingest and the benchmarks
    assert args.batch is None and RuntimeOptions().batch == DEFAULT_BATCH == 8
    assert parser.parse_args(["serve"]).batch == parser.parse_args(["ingest", "f.jsonl"]).batch == DEFAULT_BATCH
    assert parser.parse_args(["bench", "serve"]).batch == DEFAULT_BATCH


def test_bench_ingest_prepares_batches_and_decides_the_same() -> None:
    reports = [bench_ingest.run(turns=16, scopes=2, out=None, concurrency=2, batch=b) for b in (1, 4)]
    one, four = reports
    assert one["decisions"] == four["decisions"] and one["candidates"] == four["candidates"]
    assert one["prepare_ms"] is None and one["turns_per_preparation"] is None
    assert four["prepare_ms"]["p50"] > 0 and four["turns_per_preparation"] == 4  # 8 turns a scope, 4 at once
    assert four["model_calls"] < one["model_calls"]


def test_demo_llm_uses_the_configured_model_and_reports_its_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``demo --llm`` talks to the chat model the environment names; where it fails the rules decide."""
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("MEMORY_LLM_PROVIDER", "compatible")
        monkeypatch.setenv("MEMORY_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("MEMORY_LLM_MODEL", "local-model")
        monkeypatch.setenv("MEMORY_LLM_TIMEOUT_SECONDS", "2")
        # One good extraction, then a server with nothing left to say (500, no retry): rules fallback.
        server.script(Reply.json({"memories": []}))
        lines: list[str] = []
        assert asyncio.run(run_demo(db_path=str(tmp_path / "demo.db"), out=lines.append, llm=True)) == 0
        assert any("extraction and consolidation by local-model" in line for line in lines)
        assert any(
            line.startswith("LLM local-model: ") and " requests, 10 prompt + 10 completion" in line
            for line in lines
        )
        assert server.requests and all(r.body["model"] == "local-model" for r in server.requests)
        assert "DELETE" in "\n".join(lines)  # the rules still did the rest


def test_demo_llm_without_a_model_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMORY_LLM_PROVIDER", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_CHAT_DEPLOYMENT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="demo --llm needs a chat model: set MEMORY_LLM_PROVIDER"):
        asyncio.run(run_demo(db_path=None, out=print, llm=True))
