"""The command line over a real store file: import, search, list, get, export, forget, purge."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.cli.main import main

NOW = datetime.now(UTC)


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], out=out)
    return code, out.getvalue()


def write_records(path: Path) -> None:
    text = "prefers an aisle seat on long flights"
    rows = [
        {
            "id": "A",
            "user_id": "u1",
            "agent_id": "travel",
            "memory": text,
            "importance": 1.0,
            "access_count": 20,
            "created_at": (NOW - timedelta(days=75)).isoformat(),
            "updated_at": (NOW - timedelta(days=75)).isoformat(),
        },
        {
            "id": "B",
            "user_id": "u1",
            "agent_id": "travel",
            "memory": text,
            "importance": 0.05,
            "created_at": NOW.isoformat(),
        },
        {"id": "C", "user_id": "u2", "agent_id": "travel", "memory": text, "category": "preference"},
        {
            "id": "J",
            "user_id": "u1",
            "agent_id": "travel",
            "memory": "辛い料理が苦手",
            "category": "constraint",
            "importance": 0.9,
        },
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")


def test_reference_example_through_the_command_line(tmp_path: Path) -> None:
    db, records = tmp_path / "m.db", tmp_path / "records.jsonl"
    write_records(records)
    code, out = cli(db, "--json", "import", str(records))
    assert code == 0 and json.loads(out) == {"imported": 4, "updated": 0, "skipped": 0, "embedded": 4, "vectors_missing": 0}
    for mode in ("keyword", "vector", "hybrid"):
        for profile, first in (("important", "A"), ("recent", "B")):
            code, out = cli(
                db,
                "--json",
                "search",
                "aisle seat",
                "--user",
                "u1",
                "--agent",
                "travel",
                "--mode",
                mode,
                "--profile",
                profile,
                "--no-recall",
            )
            assert code == 0
            ids = [hit["memory"]["id"] for hit in json.loads(out)["hits"] if hit["memory"]["id"] in "AB"]
            assert ids == [first, "B" if first == "A" else "A"], (mode, profile)
    code, out = cli(db, "search", "辛い料理", "--user", "u1", "--agent", "travel", "--mode", "keyword")
    assert code == 0 and "辛い料理が苦手" in out and "(J)" in out


def test_search_is_read_only_unless_told_to_recall(tmp_path: Path) -> None:
    db, records = tmp_path / "m.db", tmp_path / "records.jsonl"
    write_records(records)
    cli(db, "import", str(records))
    cli(db, "search", "辛い", "--user", "u1", "--agent", "travel", "--mode", "keyword")
    cli(db, "search", "辛い", "--user", "u1", "--agent", "travel", "--mode", "keyword", "--no-recall")  # kept
    _, out = cli(db, "--json", "get", "J", "--user", "u1", "--agent", "travel")
    assert json.loads(out)["access_count"] == 0
    cli(db, "search", "辛い", "--user", "u1", "--agent", "travel", "--mode", "keyword", "--recall")
    _, out = cli(db, "--json", "get", "J", "--user", "u1", "--agent", "travel")
    view = json.loads(out)
    assert view["access_count"] == 1 and view["last_accessed_at"] is not None
    assert "embedding" not in view


def test_list_export_forget_purge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, records = tmp_path / "m.db", tmp_path / "records.jsonl"
    write_records(records)
    cli(db, "import", str(records))
    _, out = cli(db, "--json", "list", "--user", "u1", "--agent", "travel", "--limit", "2", "--by-id")
    page = json.loads(out)
    assert [m["id"] for m in page["memories"]] == ["A", "B"] and page["next_cursor"] == "B"
    _, out = cli(db, "--json", "list", "--user", "u1", "--agent", "travel", "--cursor", "B")
    assert [m["id"] for m in json.loads(out)["memories"]] == ["J"]
    _, out = cli(db, "export", "--user", "u1")
    exported = [json.loads(line) for line in out.splitlines()]
    assert sorted(r["id"] for r in exported) == ["A", "B", "J"]
    assert all(r["embedding"] is None for r in exported)  # vectors only when asked for
    _, with_vectors = cli(db, "export", "--user", "u1", "--include-vectors")
    assert all(len(json.loads(line)["embedding"]) == 256 for line in with_vectors.splitlines())
    # Re-importing an export without vectors reproduces it exactly, the embeddings computed again.
    (tmp_path / "export.jsonl").write_text(out, encoding="utf-8")
    code, said = cli(tmp_path / "copy.db", "import", str(tmp_path / "export.jsonl"))
    assert code == 0 and "3 embeddings computed" in said
    _, again = cli(tmp_path / "copy.db", "export", "--user", "u1")
    assert [json.loads(line) for line in again.splitlines()] == exported
    _, again = cli(tmp_path / "copy.db", "export", "--user", "u1", "--include-vectors")
    assert again == with_vectors

    code, out = cli(db, "--json", "forget")
    assert code == 0 and json.loads(out)["dry_run"] is True
    code, out = cli(db, "forget", "--apply")
    assert code == 0 and "scanned 4" in out
    code, _ = cli(db, "purge", "--user", "u1")
    assert code == 2 and "--yes" in capsys.readouterr().err
    code, out = cli(db, "--json", "purge", "--user", "u1", "--yes")
    report = json.loads(out)
    assert report.pop("purged_at").endswith("Z")  # the tombstone: older turns are dropped from now on
    assert report == {
        "user_id": "u1",
        "agent_id": None,
        "purged_memories": 3,
        "purged_history": 0,
        "purged_queued": 0,
    }
    _, out = cli(db, "--json", "list", "--user", "u2", "--agent", "travel")
    assert [m["id"] for m in json.loads(out)["memories"]] == ["C"]


def test_list_shows_what_holds_now_unless_asked_for_what_held_before(tmp_path: Path) -> None:
    db, rows = tmp_path / "m.db", tmp_path / "chain.jsonl"
    said, changed = NOW - timedelta(days=40), NOW - timedelta(days=5)
    common = {"user_id": "u1", "agent_id": "home", "category": "profile"}
    chain = [
        {**common, "id": "N", "memory": "I live in Munich", "valid_from": changed.isoformat()},
        {
            **common, "id": "O", "memory": "I live in Berlin", "valid_from": said.isoformat(),
            "valid_until": changed.isoformat(), "superseded_by": "N", "created_at": said.isoformat(),
        },
        {**common, "id": "P", "memory": "I have a cat", "created_at": said.isoformat()},  # valid since created
    ]
    rows.write_text("".join(json.dumps(r) + "\n" for r in chain), encoding="utf-8")
    assert cli(db, "import", str(rows))[0] == 0
    _, out = cli(db, "--json", "list", "--user", "u1", "--agent", "home")
    current = {m["id"]: m for m in json.loads(out)["memories"]}
    assert sorted(current) == ["N", "P"] and current["P"]["valid_from"] == current["P"]["created_at"]
    _, out = cli(db, "--json", "list", "--user", "u1", "--agent", "home", "--include-superseded")
    listed = {m["id"]: m for m in json.loads(out)["memories"]}
    assert sorted(listed) == ["N", "O", "P"] and listed["O"]["superseded_by"] == "N"
    _, out = cli(db, "list", "--user", "u1", "--agent", "home", "--include-superseded")
    assert f"until {changed.date().isoformat()}, superseded by N" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "--user", "u1' or 1=1", "--agent", "a"], "user_id"),
        (["search", "x", "--user", "u1", "--agent", "a", "--top", "0"], "top"),
        (["search", "x", "--user", "u1", "--agent", "a", "--min-importance", "2"], "minimum"),
        (["list", "--user", "u1", "--agent", "a b"], "agent_id"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    write_records(tmp_path / "records.jsonl")
    cli(tmp_path / "m.db", "import", str(tmp_path / "records.jsonl"))
    capsys.readouterr()
    code, _ = cli(tmp_path / "m.db", *args)
    assert code == 2
    assert message in capsys.readouterr().err


def test_an_unknown_memory_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_records(tmp_path / "records.jsonl")
    cli(tmp_path / "m.db", "import", str(tmp_path / "records.jsonl"))
    code, _ = cli(tmp_path / "m.db", "get", "no-such", "--user", "u1", "--agent", "travel")
    assert code == 3
    assert "not found" in capsys.readouterr().err


def test_import_reports_the_bad_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"user_id": "u", "agent_id": "a", "memory": "fine"})
        + "\n"
        + json.dumps({"user_id": "u", "agent_id": "a", "memory": "bad", "importance": 3})
        + "\n",
        encoding="utf-8",
    )
    code, _ = cli(tmp_path / "m.db", "import", str(path))
    assert code == 2
    assert f"{path}:2: importance" in capsys.readouterr().err  # the line of the bad record
    assert not (tmp_path / "m.db").exists()  # checked before the store was even created
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"user_id": "u", "agent_id": "b", "memory": "elsewhere"}) + "\n", encoding="utf-8")
    assert cli(tmp_path / "m.db", "import", str(other))[0] == 0
    assert cli(tmp_path / "m.db", "import", str(path))[0] == 2
    _, out = cli(tmp_path / "m.db", "--json", "list", "--user", "u", "--agent", "a")
    assert json.loads(out)["memories"] == []
