"""``memory-core demo`` and ``memory-core bench ingest`` run end to end (local e5 embedder, SQLite)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from memory_core.bench import ingest as bench_ingest
from memory_core.demo import run_demo


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
