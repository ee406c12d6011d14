"""``memory-core list``: newest first (the last change, then id), another order on request, and a walk
by id with ``--by-id`` / ``--cursor``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from memory_core.cli.main import main

USER, AGENT = "u1", "a1"
#: Ids whose order is not the order of their last change.
OLDEST, MIDDLE, NEWEST, ALSO_NEWEST = "a" * 32, "c" * 32, "d" * 32, "b" * 32
ROWS = [
    (OLDEST, "2026-01-05T09:00:00+00:00", "likes green tea"),
    (MIDDLE, "2026-03-01T09:00:00+00:00", "lives in Kyoto"),
    (NEWEST, "2026-06-30T09:00:00+00:00", "is vegetarian"),
    (ALSO_NEWEST, "2026-06-30T09:00:00+00:00", "prefers window seats"),
]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    for name in ("MEMORY_SQLITE_PATH", "MEMORY_STORE", "AZURE_SEARCH_ENDPOINT", "MEMORY_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "m.db")
    lines = [
        json.dumps({"id": i, "user_id": USER, "agent_id": AGENT, "memory": text, "created_at": at, "updated_at": at})
        for i, at, text in ROWS
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out = run("--db", path, "import", "-")
    assert code == 0, out
    return path


def listed(db: str, *flags: str) -> tuple[list[str], dict[str, object]]:
    code, out = run("--db", db, "--json", "list", "--user", USER, "--agent", AGENT, *flags)
    assert code == 0, out
    body = json.loads(out)
    return [m["id"] for m in body["memories"]], body


def test_list_is_newest_first_then_by_id(db: str) -> None:
    ids, body = listed(db)
    assert ids == [ALSO_NEWEST, NEWEST, MIDDLE, OLDEST]
    assert body["total"] == 4 and body["next_offset"] is None
    code, out = run("--db", db, "list", "--user", USER, "--agent", AGENT)
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ids
    assert "updated=2026-06-30" in lines[0] and "updated=2026-01-05" in lines[-1]


def test_list_pages_with_offset_in_the_same_order(db: str) -> None:
    first, body = listed(db, "--limit", "3")
    assert first == [ALSO_NEWEST, NEWEST, MIDDLE] and body["next_offset"] == 3
    code, out = run("--db", db, "list", "--user", USER, "--agent", AGENT, "--limit", "3")
    assert code == 0 and out.splitlines()[-1] == "more: --offset 3 (of 4)"
    rest, body = listed(db, "--limit", "3", "--offset", "3")
    assert rest == [OLDEST] and body["next_offset"] is None


def test_list_takes_another_order(db: str) -> None:
    ids, _ = listed(db, "--order-by", "updated_at", "asc")
    assert ids == [OLDEST, MIDDLE, ALSO_NEWEST, NEWEST]


def test_a_walk_by_id_is_still_there_and_pages_with_its_cursor(db: str) -> None:
    ids, body = listed(db, "--by-id", "--limit", "2")
    assert ids == [OLDEST, ALSO_NEWEST] and body["next_cursor"] == ALSO_NEWEST
    ids, body = listed(db, "--cursor", ALSO_NEWEST)
    assert ids == [MIDDLE, NEWEST] and body["next_cursor"] is None


def test_a_walk_by_id_with_a_sort_is_refused_naming_the_cursor(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("--db", db, "list", "--user", USER, "--agent", AGENT, "--cursor", OLDEST, "--offset", "1")
    assert code != 0
    assert "cursor" in capsys.readouterr().err
