"""Long commands report progress to people and results to programs (issue 17, item 5).

``import``, ``ingest``, ``forget``, ``eval`` and ``bench`` draw bars on standard error when it is a
terminal (a pseudo-terminal here), write nothing there when it is not, and keep standard output for
the result: with ``--json``, exactly one JSON document. The hashing embedder keeps it fast.
"""

from __future__ import annotations

import io
import json
import os
import select
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.cli.main import main

pty = pytest.importorskip("pty")  # POSIX only


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


class Terminal:
    """A pseudo-terminal: :meth:`use` makes it standard error (in the test's body: pytest sets
    ``sys.stderr`` back to its capture when the test starts), :meth:`drawn` reads what was drawn."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.fd, slave = pty.openpty()
        self.stream = os.fdopen(slave, "w", encoding="utf-8")

    def use(self) -> None:
        self._monkeypatch.setattr(sys, "stderr", self.stream)

    def drawn(self) -> str:
        chunks = []
        while select.select([self.fd], [], [], 0.05)[0]:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8")

    def close(self) -> None:
        self.stream.close()
        os.close(self.fd)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Terminal]:
    screen = Terminal(monkeypatch)
    try:
        yield screen
    finally:
        monkeypatch.undo()
        screen.close()


def run(argv: list[str]) -> str:
    out = io.StringIO()
    assert main(argv, out=out) == 0
    return out.getvalue()


def tiny_japanese_set(folder: Path) -> Path:
    path = folder / "set.json"
    data = {
        "name": "tiny",
        "version": 1,
        "start": "2026-04-01",
        "users": [
            {
                "id": "u1",
                "turns": [{"day": 0, "text": "コーヒーが好きです。"}, {"day": 5, "text": "エビアレルギーがあります。"}],
                "expected_active": ["コーヒーが好きです", "エビアレルギーがあります"],
                "questions": [{"q": "エビは食べられる？", "evidence": [1], "kind": "paraphrase"}],
            }
        ],
    }
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def records(folder: Path, count: int) -> Path:
    path = folder / "records.jsonl"
    path.write_text(
        "".join(
            json.dumps({"user_id": "u1", "agent_id": "a1", "memory": f"I like tea number {i}"}) + "\n"
            for i in range(count)
        ),
        encoding="utf-8",
    )
    return path


def turns(folder: Path, count: int) -> Path:
    path = folder / "turns.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "schema": "memory-core.turn.v1",
                    "turn_id": f"t{i}",
                    "user_id": "u1",
                    "agent_id": "a1",
                    "occurred_at": "2026-01-01T09:00:00+00:00",
                    "messages": [{"role": "user", "text": f"I live in city number {i}."}],
                }
            )
            + "\n"
            for i in range(count)
        ),
        encoding="utf-8",
    )
    return path


# -- people: bars on the terminal, results on standard output ----------------------------------------
def test_import_ingest_and_forget_draw_bars_on_the_terminal(tmp_path: Path, terminal: Terminal) -> None:
    terminal.use()
    db = str(tmp_path / "m.db")
    printed = run(["--db", db, "import", str(records(tmp_path, 300))])
    shown = terminal.drawn()
    assert "storing  [" in shown and "300/300 records" in shown and "in 0:" in shown
    assert "computing vectors  [" in shown and "300/300 memories" in shown  # the second phase has its own bar
    assert "\r" not in printed and printed.startswith("stored 300 memories") and "imported 300" in printed

    printed = run(["--db", db, "ingest", str(turns(tmp_path, 3))])
    shown = terminal.drawn()
    assert "ingesting  [" in shown and "3/3 turns" in shown
    assert "\r" not in printed and printed.count("decision(s)") == 3  # each turn's lines, as before

    printed = run(["--db", db, "forget"])
    shown = terminal.drawn()
    assert "forgetting  " in shown and " memories  " in shown  # no total without --limit: a count and a rate
    assert "\r" not in printed and printed.startswith("dry run: scanned")

    run(["--db", db, "forget", "--limit", "100"])
    assert "100/100 memories  100%" in terminal.drawn()  # with a limit, a bar with its share and ETA


def test_eval_and_bench_draw_bars_and_print_only_the_report(tmp_path: Path, terminal: Terminal) -> None:
    terminal.use()
    printed = run(["eval", "japanese", "--set", str(tiny_japanese_set(tmp_path)), "--no-cache"])
    shown = terminal.drawn()
    for label in ("embedding passages", "embedding queries", "searching", "consolidating"):
        assert f"\r{label}  [" in shown, label
    assert "\r" not in printed and "consolidation (rule path)" in printed

    printed = run(
        ["bench", "search", "--store-size", "400", "--scope-size", "200", "--dimensions", "8", "--queries", "10"]
    )
    shown = terminal.drawn()
    assert "\rbuilding store  [" in shown and "\rsearching  [" in shown
    assert "\r" not in printed and printed.lstrip().startswith("| measure (ms) |")


def test_nothing_is_drawn_when_standard_error_is_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "m.db")
    run(["--db", db, "import", str(records(tmp_path, 300))])
    run(["--db", db, "ingest", str(turns(tmp_path, 2))])
    run(["--db", db, "forget"])
    run(["eval", "japanese", "--set", str(tiny_japanese_set(tmp_path)), "--no-cache"])
    assert capsys.readouterr().err == ""


# -- programs: --json is one JSON document, and nothing is drawn -------------------------------------
def test_eval_json_is_one_document_and_nothing_else(tmp_path: Path, terminal: Terminal) -> None:
    terminal.use()
    report_path = tmp_path / "ja.json"
    printed = run(
        ["--json", "eval", "japanese", "--set", str(tiny_japanese_set(tmp_path)), "--no-cache", "--output", str(report_path)]
    )
    report = json.loads(printed)  # one document: any other line would make this fail
    assert report["benchmark"] == "japanese" and report["consolidation"]["users"] == 1
    assert report == json.loads(report_path.read_text(encoding="utf-8"))  # the same as --output writes
    assert terminal.drawn() == ""  # --json: no bars even on a terminal


def test_bench_json_is_one_document_and_nothing_else(tmp_path: Path, terminal: Terminal) -> None:
    terminal.use()
    printed = run(
        [
            "--json",
            "bench",
            "search",
            "--store-size",
            "400",
            "--scope-size",
            "200",
            "--dimensions",
            "8",
            "--queries",
            "10",
        ]
    )
    report = json.loads(printed)
    assert report["benchmark"] == "search" and report["search_ms"]["p50"] > 0
    printed = run(
        [
            "--json",
            "bench",
            "forget",
            "--store-size",
            "600",
            "--scope-size",
            "200",
            "--dimensions",
            "8",
            "--page-size",
            "250",
            "--in-process",
        ]
    )
    report = json.loads(printed)
    assert report["benchmark"] == "forget" and [r["scanned"] for r in report["runs"]] == [600] * 4
    assert terminal.drawn() == ""
