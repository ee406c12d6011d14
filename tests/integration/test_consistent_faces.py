"""One default agent id on every face, errors importable from the package root, and a store path whose
folder does not exist refused alike by the command line and the Python API."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import memory_core
from memory_core import errors
from memory_core.cli.main import main
from memory_core.contract.views import SearchRequest
from memory_core.domain.records import DEFAULT_AGENT_ID
from memory_core.entrypoints.http.kit import Query


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    for name in ("MEMORY_SQLITE_PATH", "MEMORY_STORE", "AZURE_SEARCH_ENDPOINT", "MEMORY_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)


def run(*argv: str, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str]:
    out = io.StringIO()
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return main(list(argv), out=out), out.getvalue()


def test_every_public_error_is_importable_from_the_package_root() -> None:
    for name in errors.__all__:
        assert getattr(memory_core, name) is getattr(errors, name)
        assert name in memory_core.__all__
    from memory_core import ValidationError

    assert ValidationError is errors.ValidationError


def test_the_default_agent_id_is_one_constant_on_every_face() -> None:
    from memory_core.config import Settings
    from memory_core.entrypoints.python_api import async_memory

    assert memory_core.DEFAULT_AGENT_ID == DEFAULT_AGENT_ID == async_memory.DEFAULT_AGENT_ID == "default"
    assert Settings().mcp_agent_id == DEFAULT_AGENT_ID
    assert SearchRequest(user_id="u1", query="tea").agent_id == DEFAULT_AGENT_ID
    assert Query({"user_id": "u1"}).scope().agent_id == DEFAULT_AGENT_ID
    assert Query({"user_id": "u1", "agent_id": "travel"}).scope().agent_id == "travel"


def test_the_command_line_reads_and_writes_the_default_agent_without_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "m.db")
    memory_id = "7ea" + "0" * 29
    row = {"id": memory_id, "user_id": "u1", "agent_id": DEFAULT_AGENT_ID, "memory": "likes green tea"}
    code, out = run("--db", db, "import", "-", stdin=json.dumps(row) + "\n", monkeypatch=monkeypatch)
    assert code == 0, out
    code, out = run("--db", db, "--json", "list", "--user", "u1")
    assert code == 0, out
    assert [r["id"] for r in json.loads(out)["memories"]] == [memory_id]
    code, out = run("--db", db, "--json", "search", "green tea", "--user", "u1")
    assert code == 0 and memory_id in out
    code, out = run("--db", db, "--json", "get", memory_id[:8], "--user", "u1")
    assert code == 0 and json.loads(out)["agent_id"] == DEFAULT_AGENT_ID


def test_a_store_folder_that_does_not_exist_is_refused_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "no-such-folder" / "memory.db"
    with pytest.raises(memory_core.InputError) as caught:
        memory_core.Memory(path=path)
    python_message = str(caught.value)
    assert f"path {path}: the directory {path.parent} does not exist" in python_message
    assert not path.parent.exists()
    source = tmp_path / "x.jsonl"
    source.write_text("", encoding="utf-8")
    code, _ = run("--db", str(path), "import", str(source))
    assert code == 2
    cli_message = capsys.readouterr().err
    assert python_message.removeprefix("path ") in cli_message
    assert f"--db {path}: the directory" in cli_message
