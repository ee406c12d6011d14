"""``memory-core eval ...`` and ``memory-core bench search --growth`` / ``bench forget`` on tiny sizes.

The hashing embedder stands in for e5 (``MEMORY_EMBEDDER=hash``), so these run offline in seconds.
The real LoCoMo run is the optional ``slow`` test at the end (``MEMORY_CORE_LOCOMO=path/to/locomo10.json``).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, Reply
from unit.test_evaluation_metrics import _write_fixture  # type: ignore[import-not-found]

from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.cli.main import main
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.ports import FixedClock


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def _run(argv: list[str]) -> str:
    out = io.StringIO()
    assert main(argv, out=out) == 0
    return out.getvalue()


def test_eval_locomo_reports_every_configuration(tmp_path: Path) -> None:
    data, _ = _write_fixture(tmp_path)
    report_path = tmp_path / "locomo.json"
    printed = _run(
        [
            "eval",
            "locomo",
            "--data",
            str(data),
            "--cache",
            str(tmp_path / "cache"),
            "--output",
            str(report_path),
        ]
    )
    assert "| keyword | none |" in printed
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["data"]["questions_evaluated"] == 4  # categories 1-4 with evidence
    assert report["data"]["questions_skipped_without_evidence"] == 1
    assert report["data"]["audit_applied"] is True
    assert len(report["results"]) == 9
    keyword = next(r for r in report["results"] if r["mode"] == "keyword" and r["profile"] == "none")
    overall = keyword["metrics"]["overall"]
    assert overall["n"] == 4
    assert overall["any@10"] == 1.0  # five turns per scope: everything is in the top 10
    assert set(keyword["metrics"]) == {
        "overall",
        "1-multi-hop",
        "2-temporal",
        "3-open-domain",
        "4-single-hop",
    }
    assert keyword["latency_ms"]["p95"] >= keyword["latency_ms"]["p50"] >= 0
    assert list((tmp_path / "cache").glob("locomo-*.npy"))  # embeddings cached on disk


def test_eval_locomo_finds_the_puppy_by_keyword(tmp_path: Path) -> None:
    data, _ = _write_fixture(tmp_path)
    report_path = tmp_path / "r.json"
    _run(
        [
            "eval",
            "locomo",
            "--data",
            str(data),
            "--no-cache",
            "--modes",
            "keyword",
            "--profiles",
            "none",
            "--no-audit",
            "--output",
            str(report_path),
        ]
    )
    report = json.loads(report_path.read_text(encoding="utf-8"))
    single_hop = report["results"][0]["metrics"]["4-single-hop"]
    assert single_hop["any@1"] == 1.0
    assert report["data"]["audit_applied"] is False


def test_eval_japanese_retrieval_and_consolidation_on_a_small_set(tmp_path: Path) -> None:
    small = {
        "name": "tiny",
        "version": 1,
        "start": "2026-04-01",
        "users": [
            {
                "id": "u1",
                "turns": [
                    {"day": 0, "text": "コーヒーが好きです。"},
                    {"day": 5, "text": "エビアレルギーがあります。"},
                ],
                "expected_active": ["コーヒーが好きです", "エビアレルギーがあります"],
                "questions": [{"q": "エビは食べられる？", "evidence": [1], "kind": "paraphrase"}],
            },
            {
                "id": "u2",
                "turns": [{"day": 0, "text": "大阪に住んでいます。"}],
                "expected_active": ["大阪に住んでいます"],
                "questions": [{"q": "大阪に住んでいる？", "evidence": [0], "kind": "paraphrase"}],
            },
        ],
    }
    set_path = tmp_path / "set.json"
    set_path.write_text(json.dumps(small, ensure_ascii=False), encoding="utf-8")
    corpus = tmp_path / "jdd.json"
    corpus.write_text(
        json.dumps(
            [
                {
                    "utterances": [
                        {"turn_num": i, "speaker": "A", "utterance": f"今日は天気がいいですね{i}"}
                        for i in range(30)
                    ]
                }
            ],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    report_path = tmp_path / "ja.json"
    printed = _run(
        [
            "eval",
            "japanese",
            "--set",
            str(set_path),
            "--distractors",
            str(corpus),
            "--distractors-per-user",
            "10",
            "--no-cache",
            "--output",
            str(report_path),
        ]
    )
    assert "consolidation (rule path)" in printed
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["retrieval"]["memories"] == 3 + 2 * 10
    assert report["retrieval"]["distractors_per_user"] == 10
    assert len(report["retrieval"]["results"]) == 9
    consolidation = report["consolidation"]
    assert consolidation["users"] == 2 and consolidation["expected_memories"] == 3
    assert 0.0 <= consolidation["recall"] <= 1.0 and 0.0 <= consolidation["precision"] <= 1.0
    # Facts only: each turn's episode is kept too, and must not count as an unexpected memory.
    assert consolidation["active_memories"] == 3, consolidation
    assert consolidation["precision"] == 1.0


def test_bench_forget_writes_only_what_changed(tmp_path: Path) -> None:
    report_path = tmp_path / "forget.json"
    printed = _run(
        [
            "bench",
            "forget",
            "--store-size",
            "3000",
            "--scope-size",
            "500",
            "--dimensions",
            "8",
            "--page-size",
            "700",
            "--in-process",
            "--tracemalloc",
            "--output",
            str(report_path),
        ]
    )
    assert "| apply again |" in printed
    runs = {r["run"]: r for r in json.loads(report_path.read_text(encoding="utf-8"))["runs"]}
    assert all(r["scanned"] == 3000 for r in runs.values())
    assert runs["dry run"]["written"] == 0
    assert (
        runs["apply"]["written"]
        == runs["dry run"]["archived"] + runs["dry run"]["reactivated"] + runs["dry run"]["rescored"]
    )
    assert runs["apply"]["written"] > 0
    assert runs["apply again"]["written"] == 0
    assert runs["next night"]["written"] > 0
    assert runs["dry run, tracemalloc"]["tracemalloc_peak_mb"] > 0


def test_bulk_built_store_has_the_statistics_upserts_would_give(tmp_path: Path) -> None:
    from memory_core.tools.bench.bulk import BulkSpec, bulk_build

    now = datetime(2026, 11, 1, tzinfo=UTC)
    path = tmp_path / "bulk.db"
    bulk_build(path, BulkSpec(store_size=300, scope_size=100, dimensions=8, now=now, seed=3, pool_size=50))
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT id, user_id, agent_id, memory, category, embedding FROM memories").fetchall()
    stats = dict(((f, t), df) for f, t, df in conn.execute("SELECT field, term, df FROM term_stats"))
    fields = {
        f: (n, total)
        for f, n, total in conn.execute("SELECT field, doc_count, total_length FROM field_stats")
    }
    conn.close()

    async def via_upsert() -> tuple[dict[tuple[str, str], int], dict[str, tuple[int, int]]]:
        import numpy as np

        store = SQLiteMemoryStore(tmp_path / "upsert.db", clock=FixedClock(now))
        await store.upsert(
            [
                MemoryRecord(
                    id=i,
                    user_id=u,
                    agent_id=a,
                    memory=m,
                    category=c,
                    created_at=now,
                    updated_at=now,
                    embedding=np.frombuffer(e, dtype=np.float32).tolist(),
                )
                for i, u, a, m, c, e in rows
            ]
        )
        await store.close()
        check = sqlite3.connect(tmp_path / "upsert.db")
        expected = dict(((f, t), df) for f, t, df in check.execute("SELECT field, term, df FROM term_stats"))
        expected_fields = {
            f: (n, total)
            for f, n, total in check.execute("SELECT field, doc_count, total_length FROM field_stats")
        }
        check.close()
        return expected, expected_fields

    expected, expected_fields = asyncio.run(via_upsert())
    assert stats == expected
    assert fields == expected_fields

    async def search() -> int:
        store = SQLiteMemoryStore(path, clock=FixedClock(now))
        result = await store.search(
            SearchRequest(
                Scope.of("user000001", "bench"),
                "coffee 旅行",
                [1.0] * 8,
                MemorySearchOptions(mode=SearchMode.HYBRID, top=5),
            )
        )
        await store.close()
        return len(result.hits)

    assert asyncio.run(search()) == 5


def test_bench_search_growth_series(tmp_path: Path) -> None:
    report_path = tmp_path / "growth.json"
    printed = _run(
        [
            "bench",
            "search",
            "--growth",
            "400",
            "1000",
            "--scope-size",
            "200",
            "--growing-max",
            "400",
            "--dimensions",
            "8",
            "--queries",
            "10",
            "--output",
            str(report_path),
        ]
    )
    assert "| fixed scope | 1,000 | 200 |" in printed
    points = json.loads(report_path.read_text(encoding="utf-8"))["points"]
    assert [(p["series"], p["store_size"], p["scope_size"]) for p in points] == [
        ("fixed scope", 400, 200),
        ("growing scope", 400, 400),
        ("fixed scope", 1000, 200),
    ]
    assert all(p["search_ms"]["p50"] > 0 for p in points)


def test_store_reindexes_when_the_analyzer_changes(tmp_path: Path) -> None:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    path = tmp_path / "old.db"

    async def write() -> None:
        store = SQLiteMemoryStore(path, clock=FixedClock(now))
        await store.upsert(
            [
                MemoryRecord(
                    id="m1",
                    user_id="u",
                    agent_id="a",
                    memory="I painted landscapes",
                    created_at=now,
                    updated_at=now,
                )
            ]
        )
        await store.close()

    asyncio.run(write())
    conn = sqlite3.connect(path)  # make it look like a store written by the previous analyzer
    conn.execute(
        """UPDATE memories SET terms = '{"category": {"general": 1}, "memory": {"i": 1, "landscapes": 1, "painted": 1}, "summary": {}}'"""
    )
    conn.execute("DELETE FROM term_stats")
    conn.execute(
        "INSERT INTO term_stats VALUES ('memory', 'painted', 1), ('memory', 'landscapes', 1), ('memory', 'i', 1), ('category', 'general', 1)"
    )
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'analyzer'")
    conn.commit()
    conn.close()

    async def search() -> list[str]:
        store = SQLiteMemoryStore(path, clock=FixedClock(now))
        result = await store.search(
            SearchRequest(
                Scope.of("u", "a"), "paintings of a landscape", None, MemorySearchOptions(mode=SearchMode.KEYWORD)
            )
        )
        await store.close()
        return [h.record.id for h in result.hits]

    assert asyncio.run(search()) == ["m1"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT df FROM term_stats WHERE field = 'memory' AND term = 'paint'").fetchone() == (
        1,
    )
    assert conn.execute("SELECT COUNT(*) FROM term_stats WHERE term = 'painted'").fetchone() == (0,)
    conn.close()


def test_charts_are_drawn_when_matplotlib_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data, _ = _write_fixture(tmp_path)
    _run(
        [
            "eval",
            "locomo",
            "--data",
            str(data),
            "--no-cache",
            "--modes",
            "keyword",
            "vector",
            "--profiles",
            "none",
            "--charts",
            str(tmp_path / "charts"),
        ]
    )
    assert (tmp_path / "charts" / "locomo_recall.png").stat().st_size > 1000


@pytest.mark.slow
def test_real_locomo_retrieval_reaches_the_quality_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = os.environ.get("MEMORY_CORE_LOCOMO")
    if not path or not Path(path).exists():
        pytest.skip("set MEMORY_CORE_LOCOMO to locomo10.json to run the real LoCoMo evaluation")
    monkeypatch.delenv("MEMORY_EMBEDDER", raising=False)
    report_path = tmp_path / "locomo.json"
    _run(
        [
            "eval",
            "locomo",
            "--data",
            path,
            "--modes",
            "keyword",
            "hybrid",
            "--profiles",
            "none",
            "--output",
            str(report_path),
        ]
    )
    report = json.loads(report_path.read_text(encoding="utf-8"))
    best = max(r["metrics"]["overall"]["any@5"] for r in report["results"])
    assert best >= 0.60


def test_bench_forget_with_a_kept_store_starts_from_the_same_night(tmp_path: Path) -> None:
    keep = tmp_path / "kept.db"
    figures = []
    for _ in range(2):
        report_path = tmp_path / "forget.json"
        _run(
            [
                "bench",
                "forget",
                "--store-size",
                "1500",
                "--scope-size",
                "500",
                "--dimensions",
                "8",
                "--in-process",
                "--keep",
                str(keep),
                "--output",
                str(report_path),
            ]
        )
        runs = json.loads(report_path.read_text(encoding="utf-8"))["runs"]
        figures.append([(r["run"], r["written"], r["archived"]) for r in runs])
    assert figures[0] == figures[1]
    assert figures[0][1][1] > 0  # the first "apply" wrote something both times


def test_eval_pipeline_measures_what_the_ingest_path_remembers(tmp_path: Path) -> None:
    data, _ = _write_fixture(tmp_path)
    report_path = tmp_path / "pipeline.json"
    printed = _run(
        [
            "eval",
            "pipeline",
            "--data",
            str(data),
            "--cache",
            str(tmp_path / "cache"),
            "--output",
            str(report_path),
        ]
    )
    assert "### LoCoMo" in printed and "### Japanese" in printed and "raw turns" in printed
    report = json.loads(report_path.read_text(encoding="utf-8"))
    locomo = report["sets"]["LoCoMo"]
    assert locomo["questions"] == 4 and locomo["ingest"]["turns"] > 0
    # Every turn is kept as an episode, so every evidence turn left a memory pointing back to it.
    assert locomo["ingest"]["evidence_turns_remembered"] == 1.0
    assert locomo["ingest"]["episodes_per_100_turns"] == 100.0
    configs = [(r["mode"], r["profile"], r["forgetting"]) for r in locomo["results"]]
    assert configs[0] == ("hybrid", "important", False) and configs[-1] == ("hybrid", "important", True)
    assert {m for m, _, _ in configs} == {"hybrid", "keyword", "vector"}
    default = locomo["results"][0]["metrics"]["overall"]
    assert default["n"] == 4 and default["any@10"] == 1.0  # a handful of memories: all in the top 10
    facts = [r for r in locomo["results"] if r.get("kind") == "fact"]
    assert len(facts) == 1 and facts[0]["metrics"]["overall"]["n"] == 4  # facts alone, reported beside
    assert "facts alone" in printed
    # LoCoMo's temporal questions (category 2) are reported alone, for all memories and for facts alone.
    temporal = locomo["temporal"]
    assert temporal["n"] == 1
    assert temporal["all_memories"] == locomo["results"][0]["metrics"]["2-temporal"]["any@5"]
    assert temporal["facts_alone"] == facts[0]["metrics"]["2-temporal"]["any@5"]
    assert f"temporal questions (category 2, 1), hybrid + important any@5: all memories {temporal['all_memories']:.3f}" in printed
    assert locomo["raw_turns"][0]["metrics"]["overall"]["n"] == 4
    japanese = report["sets"]["Japanese"]
    assert japanese["cases"] == 30 and japanese["questions"] == 65
    assert list((tmp_path / "cache").glob("pipeline-passages-*.npz"))  # passages cached for the next run


def test_eval_pipeline_llm_reports_the_models_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, _ = _write_fixture(tmp_path)
    report_path = tmp_path / "pipeline.json"
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("MEMORY_LLM_PROVIDER", "compatible")
        monkeypatch.setenv("MEMORY_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("MEMORY_LLM_MODEL", "local-model")
        # Three answers, then a server with nothing left to say (500, no retry): the rules take over.
        server.script(*[Reply.json({"memories": []})] * 3)
        printed = _run(
            [
                "eval",
                "pipeline",
                "--data",
                str(data),
                "--skip-japanese",
                "--llm",
                "--no-cache",
                "--output",
                str(report_path),
            ]
        )
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["extraction"] == "llm local-model"
    llm = report["sets"]["LoCoMo"]["llm"]
    turns = report["sets"]["LoCoMo"]["ingest"]["turns"]
    assert llm["model"] == "local-model" and llm["calls"] >= turns  # at least one extraction call a turn
    assert llm["requests"] == 3 and llm["prompt_tokens"] == 30 and llm["completion_tokens"] == 30
    assert llm["per_turn"]["prompt_tokens"] == pytest.approx(30 / turns)
    assert llm["ingest_seconds_per_turn"] > 0
    assert "LLM `local-model`: " in printed and "per turn" in printed


def test_eval_pipeline_llm_without_a_model_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("MEMORY_LLM_PROVIDER", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_CHAT_DEPLOYMENT"):
        monkeypatch.delenv(name, raising=False)
    assert main(["eval", "pipeline", "--skip-japanese", "--llm"], out=io.StringIO()) != 0
    assert "eval pipeline --llm needs a chat model: set MEMORY_LLM_PROVIDER" in capsys.readouterr().err
