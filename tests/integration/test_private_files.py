"""The embedded files are their owner's only: a new folder is 0700, a new store, history, queue and
outbox file (with its ``-wal`` and ``-shm``) 0600, whatever the umask; an existing file others can read
is named in a warning and left as it is."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.messages import Turn
from memory_core.entrypoints.python_api.memory import Memory
from memory_core.integrations.outbox import TurnOutbox

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that lets everyone read what is created (as many systems have, 022 or 002)."""
    before = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(before)


def test_a_new_store_and_everything_beside_it_is_readable_by_its_owner_only(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "new" / "memory"
    # the configured store's folders are made (a path given to Memory must name a folder that exists)
    monkeypatch.setenv("MEMORY_SQLITE_PATH", str(folder / "m.db"))
    with Memory(embedder="hash") as memory:
        memory.add("I live in Berlin.", user_id="u")
        files = sorted(p for p in folder.iterdir() if p.is_file())
        assert {p.name for p in files} >= {"m.db", "m.db-wal", "m.db-shm"}
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert mode(folder) == 0o700
    queue = SQLiteQueue(str(tmp_path / "q" / "turns.queue"))
    try:
        queue.send(b"{}", message_id="m1", session_id="s1")
        assert {p.name: mode(p) for p in (tmp_path / "q").iterdir()} == {
            p.name: 0o600 for p in (tmp_path / "q").iterdir()
        }
    finally:
        queue.close_sync()
    outbox = TurnOutbox(tmp_path / "o" / "outbox.db")  # the provider's turns not yet sent
    turn = Turn(turn_id="t1", user_id="u", agent_id="a", occurred_at=datetime.now(UTC), messages=[{"role": "user", "text": "hi there"}])
    assert outbox.put(turn) and outbox.pending() == 1
    outbox.close()
    assert mode(tmp_path / "o" / "outbox.db") == 0o600 and mode(tmp_path / "o") == 0o700


def test_an_existing_file_others_can_read_is_warned_about_not_changed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "shared.db"
    SQLiteMemoryStore(path).close_sync()
    assert mode(path) == 0o600  # new: its owner's
    os.chmod(path, 0o644)  # then shared by hand
    caplog.set_level(logging.WARNING)
    SQLiteMemoryStore(path).close_sync()
    asyncio.run(SQLiteHistoryStore(path).close())
    assert mode(path) == 0o644
    warned = [r.getMessage() for r in caplog.records if "can be read by other users" in r.getMessage()]
    assert len(warned) == 2 and all(str(path) in w and f"chmod 600 {path}" in w for w in warned)
