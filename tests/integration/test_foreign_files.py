"""Another program's SQLite files are refused untouched (issue 29, item 14).

A file at the store's path (``--db``) or at its queue's (``<store file>.queue``) that memory-core did
not make is refused by every command before anything is written to it: exit status 2, one line on
standard error naming the file and what is wrong, and the file's bytes the same afterwards, with no
``-wal``, ``-shm`` or ``-journal`` made beside it. memory-core recognises its files by their SQLite
application id (``memc`` a store, ``memq`` a queue) or, for files written before the ids, by their
tables; it makes a new file whole (tables and id in one transaction, linked into place), so an
SQLite database without tables is never one it left.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_core.adapters.sqlite.ownership import QUEUE_APPLICATION_ID, STORE_APPLICATION_ID, create_whole
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.cli.main import main

SIDE_FILES = ("-wal", "-shm", "-journal")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def invoices(path: Path) -> None:
    """Another application's database (rollback journal, as SQLite makes by default)."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.close()


def memories_table(path: Path) -> None:
    """Another application's database that happens to have a ``memories`` table."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE memories (id TEXT PRIMARY KEY, text TEXT)")
        conn.execute("INSERT INTO memories VALUES ('a', 'not ours')")
    conn.close()


def no_tables(path: Path) -> None:
    """A valid SQLite database without tables (what another program's fresh ``VACUUM`` leaves)."""
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()


def other_application_id(path: Path) -> None:
    """A database marked as another application's, without tables."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.close()


FOREIGN: dict[str, Callable[[Path], None]] = {
    "invoices": invoices,
    "memories-table": memories_table,
    "no-tables": no_tables,
    "other-application-id": other_application_id,
}


def good_store(db: Path) -> None:
    records = db.parent / "records.jsonl"
    records.write_text('{"user_id": "u1", "agent_id": "a1", "memory": "likes green tea"}\n', encoding="utf-8")
    assert main(["--db", str(db), "import", str(records)], out=io.StringIO()) == 0


def turns_file(folder: Path) -> Path:
    turns = folder / "turns.jsonl"
    turn = {
        "schema": "memory-core.turn.v1",
        "turn_id": "t1",
        "user_id": "u1",
        "agent_id": "a1",
        "occurred_at": "2026-05-01T09:00:00Z",
        "messages": [{"role": "user", "text": "I like green tea."}],
    }
    turns.write_text(json.dumps(turn) + "\n", encoding="utf-8")
    return turns


def run(db: Path, arguments: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run one command; ``serve`` in a process of its own (bounded: it would otherwise serve on)."""
    if "serve" not in arguments:
        code = main(["--db", str(db), *arguments], out=io.StringIO())
        return code, capsys.readouterr().err
    done = subprocess.run(
        [sys.executable, "-m", "memory_core", "--db", str(db), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MEMORY_EMBEDDER": "hash"},
        check=False,
    )
    return done.returncode, done.stderr


def assert_refused_untouched(code: int, err: str, path: Path, before: bytes, what: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"memory-core: error: {path} ") and f"memory-core {what}" in err, err
    assert path.read_bytes() == before
    assert [side for side in SIDE_FILES if Path(f"{path}{side}").exists()] == []


QUEUE_COMMANDS = {
    "serve": ["serve", "--port", "0", "--no-scheduler"],
    "purge": ["purge", "--user", "u1", "--yes"],
    "export --json": ["--json", "export", "--user", "u1"],
    "queue list": ["queue", "list"],
    "deadletters list": ["deadletters", "list"],
}


@pytest.mark.parametrize("foreign", ["invoices", "no-tables", "other-application-id"])
@pytest.mark.parametrize("command", list(QUEUE_COMMANDS))
def test_a_foreign_file_where_the_queue_goes_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], foreign: str, command: str
) -> None:
    db = tmp_path / "memory.db"
    good_store(db)
    queue = Path(default_queue_path(db))
    FOREIGN[foreign](queue)
    before, store_before = queue.read_bytes(), db.read_bytes()
    capsys.readouterr()
    code, err = run(db, QUEUE_COMMANDS[command], capsys)
    assert_refused_untouched(code, err, queue, before, "queue")
    assert db.read_bytes() == store_before  # refused before the store was touched too


def test_doctor_flags_a_foreign_queue_file_and_one_that_had_queue_tables_added(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    good_store(db)
    queue = Path(default_queue_path(db))
    invoices(queue)
    with sqlite3.connect(queue) as conn:  # what an older memory-core did to it: its tables added
        conn.execute("CREATE TABLE queue_messages (seq INTEGER PRIMARY KEY, queue TEXT, state TEXT)")
    conn.close()
    out = io.StringIO()
    assert main(["--db", str(db), "--json", "doctor"], out=out) == 1
    checks = {c["name"]: c for c in json.loads(out.getvalue())["checks"]}
    assert checks["queue.format"]["status"] == "fail"
    assert "is not a memory-core queue (it holds other tables: invoices)" in checks["queue.format"]["message"]


STORE_COMMANDS = {
    "list": ["list", "--user", "u1", "--agent", "a1"],
    "search": ["search", "tea", "--user", "u1", "--agent", "a1"],
    "export": ["--json", "export", "--user", "u1"],
    "import": ["import", "RECORDS"],
    "ingest": ["ingest", "TURNS"],
    "purge": ["purge", "--user", "u1", "--yes"],
    "serve": ["serve", "--port", "0", "--no-scheduler"],
}


@pytest.mark.parametrize("foreign", list(FOREIGN))
@pytest.mark.parametrize("command", list(STORE_COMMANDS))
def test_a_foreign_database_given_as_the_store_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], foreign: str, command: str
) -> None:
    db = tmp_path / "app.db"
    FOREIGN[foreign](db)
    records = tmp_path / "records.jsonl"
    records.write_text('{"user_id": "u1", "agent_id": "a1", "memory": "likes tea"}\n', encoding="utf-8")
    arguments = [
        {"RECORDS": str(records), "TURNS": str(turns_file(tmp_path))}.get(a, a) for a in STORE_COMMANDS[command]
    ]
    before = db.read_bytes()
    code, err = run(db, arguments, capsys)
    assert_refused_untouched(code, err, db, before, "store")
    assert not Path(default_queue_path(db)).exists()


def test_a_foreign_database_in_wal_mode_keeps_its_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "app.db"
    memories_table(db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    before = db.read_bytes()
    code, err = run(db, ["list", "--user", "u1", "--agent", "a1"], capsys)
    assert_refused_untouched(code, err, db, before, "store")


def test_a_queue_file_given_as_the_store_and_a_store_as_a_queue_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    good_store(db)
    queue = SQLiteQueue(default_queue_path(db))
    queue.close_sync()
    queue_file = Path(queue.path)
    before = queue_file.read_bytes()
    code = main(["--db", str(queue_file), "list", "--user", "u1", "--agent", "a1"], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and f"{queue_file} is a memory-core queue, not a store" in err
    assert queue_file.read_bytes() == before

    other = tmp_path / "other.db"
    good_store(other)
    with pytest.raises(Exception, match="is a memory-core store, not a queue"):
        SQLiteQueue(other)


def test_new_files_are_marked_and_older_unmarked_queue_files_are_still_opened(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    good_store(db)
    queue = SQLiteQueue(default_queue_path(db))
    queue.send("x", message_id="m1", session_id="s1")
    queue.close_sync()
    for path, expected in ((db, STORE_APPLICATION_ID), (Path(queue.path), QUEUE_APPLICATION_ID)):
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA application_id").fetchone()[0] == expected
        conn.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".new")) == []

    conn = sqlite3.connect(queue.path)  # as a queue file written before the ids
    conn.execute("PRAGMA application_id = 0")
    conn.close()
    reopened = SQLiteQueue(queue.path)
    try:
        assert reopened.stats().active == 1
    finally:
        reopened.close_sync()
    conn = sqlite3.connect(queue.path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == QUEUE_APPLICATION_ID  # marked when opened
    conn.close()


def test_a_file_is_made_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "memory.db"

    def fails(path: str) -> None:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE half (x)")
        conn.close()
        raise RuntimeError("killed while making it")

    with pytest.raises(RuntimeError):
        create_whole(str(target), fails)
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary copy
