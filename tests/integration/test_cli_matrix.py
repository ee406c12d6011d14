"""The command line's contract, case by case: standard output, standard error and the exit status.

No traceback for a user's mistake (a missing or unreadable file, a bad line, a missing extra, a damaged
store), ``-`` for standard input, global options before or after the command, memory ids shortened to a
unique start, distinct exit statuses (0 ok, 1 failure, 2 usage or bad input, 3 not found), commands
that only read never create a file, ``--order-by FIELD DIR``, an idempotent ``import``, help with
defaults and an example, and ``--json`` printing exactly one JSON document for every command.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core.cli import memories, output
from memory_core.cli.main import main
from memory_core.cli.parser import build_parser, subparsers

ROOT = Path(__file__).resolve().parents[2]
USER, AGENT = "u1", "travel"
SCOPE = ["--user", USER, "--agent", AGENT]
#: Two ids that share their first four characters (an ambiguous prefix), and one more.
TEA, TEE, SEAT = "a1b2c3d4" + "0" * 24, "a1b2ffff" + "0" * 24, "5ea7" + "1" * 28
RECORDS: list[dict[str, Any]] = [
    {"id": TEA, "user_id": USER, "agent_id": AGENT, "memory": "likes green tea", "category": "preference"},
    {"id": TEE, "user_id": USER, "agent_id": AGENT, "memory": "plays golf on Sundays"},
    {"id": SEAT, "user_id": USER, "agent_id": AGENT, "memory": "prefers a window seat", "importance": 0.9},
    {"user_id": "u2", "agent_id": AGENT, "memory": "vegetarian"},
]
TURN: dict[str, Any] = {
    "schema": "memory-core.turn.v1",
    "turn_id": "t-1",
    "user_id": USER,
    "agent_id": AGENT,
    "occurred_at": "2026-11-01T09:00:00Z",
    "messages": [{"role": "user", "text": "I prefer an aisle seat on long flights."}],
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case runs in an empty folder, with the hashing embedder and no store path from outside."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    for name in ("MEMORY_SQLITE_PATH", "MEMORY_STORE", "AZURE_SEARCH_ENDPOINT", "MEMORY_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)


def run(*argv: str, stdin: str | bytes | None = None) -> tuple[int, str]:
    """``memory-core ARGV`` in this process: the exit status and what it printed on standard output."""
    out = io.StringIO()
    saved = sys.stdin
    if stdin is not None:
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        code = main(list(argv), out=out)
    finally:
        sys.stdin = saved
    return code, out.getvalue()


def jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A store holding :data:`RECORDS` (``m.db`` in the case's folder)."""
    (tmp_path / "records.jsonl").write_text(jsonl(RECORDS), encoding="utf-8")
    assert run("--db", "m.db", "import", "records.jsonl")[0] == 0
    return "m.db"


# -- no traceback for a user's mistake -------------------------------------------------------------
@pytest.mark.parametrize("command", ["import", "ingest"])
def test_a_missing_file_is_one_line_and_creates_nothing(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(command, "missing.jsonl")
    err = capsys.readouterr().err
    assert (code, out) == (2, "")
    assert err == "memory-core: error: cannot read missing.jsonl: no such file\n"
    assert files(tmp_path) == []


@pytest.mark.parametrize("command", ["import", "ingest"])
def test_an_unreadable_file_is_one_line(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "folder").mkdir()
    assert run(command, "folder")[0] == 2
    assert capsys.readouterr().err == "memory-core: error: cannot read folder: it is a directory\n"
    (tmp_path / "latin1.jsonl").write_bytes(b'{"memory": "caf\xe9"}\n')
    assert run(command, "latin1.jsonl")[0] == 2
    assert capsys.readouterr().err == "memory-core: error: cannot read latin1.jsonl: not UTF-8 text (byte 15)\n"
    assert run(command, "-", stdin=b"\xff\n")[0] == 2
    assert capsys.readouterr().err == "memory-core: error: cannot read <stdin>: not UTF-8 text (byte 0)\n"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_permission_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text("{}\n", encoding="utf-8")
    secret.chmod(0)
    assert run("import", "secret.jsonl")[0] == 2
    assert capsys.readouterr().err == "memory-core: error: cannot read secret.jsonl: permission denied\n"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("import", "memory-core: error: records.jsonl:3: not valid JSON (Expecting value)\n"),
        ("ingest", "memory-core: error: records.jsonl: line 3: is not JSON: Expecting value\n"),
    ],
)
def test_a_bad_json_line_is_named_by_its_number(
    command: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = TURN if command == "ingest" else RECORDS[0]
    (tmp_path / "records.jsonl").write_text(jsonl([row]) + "\nnot json\n", encoding="utf-8")
    assert run(command, "records.jsonl") == (2, "")
    assert capsys.readouterr().err == message
    assert files(tmp_path) == ["records.jsonl"]  # nothing was created


def test_a_bad_record_is_named_by_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {**RECORDS[1], "importance": 3}
    assert run("import", "-", stdin=jsonl(RECORDS[:1]) + "\n" + jsonl([bad])) == (2, "")
    assert capsys.readouterr().err == (
        "memory-core: error: <stdin>:3: importance: importance must be between 0 and 1, got 3.0\n"
    )
    assert files(tmp_path) == []  # nothing was created


@pytest.mark.parametrize(
    ("module", "extra"),
    [("agent_framework", "agent"), ("azure.identity", "azure"), ("openai", "llm"), ("mcp", "mcp")],
)
def test_a_missing_extra_names_the_pip_install(
    module: str, extra: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def needs_it(args: object, out: object) -> int:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    monkeypatch.setattr(memories, "cmd_list", needs_it)
    assert run("list", *SCOPE) == (1, "")
    assert capsys.readouterr().err == (
        f"memory-core: error: this needs the optional package {module!r}, which is not installed: "
        f"pip install 'memory-core[{extra}]'\n"
    )
    assert run("--json", "list", *SCOPE)[1] and json.loads(run("--json", "list", *SCOPE)[1])["error"]["code"] == (
        "missing_dependency"
    )


def test_an_unexpected_error_is_one_line_unless_debugging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def broken(args: object, out: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(memories, "cmd_list", broken)
    assert run("list", *SCOPE) == (1, "")
    assert capsys.readouterr().err == (
        "memory-core: error: unexpected RuntimeError: boom (run with --debug for the traceback)\n"
    )
    assert run("list", *SCOPE, "--debug")[0] == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.endswith("(run with --debug for the traceback)\n")


def test_a_damaged_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.db").write_bytes(b"this is not a database, just text" * 200)
    code, _ = run("--db", "m.db", "list", *SCOPE)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("memory-core: error: ")
    assert "Traceback" not in err


# -- standard input ---------------------------------------------------------------------------------
def test_import_and_ingest_read_standard_input(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run("--db", db, "--json", "import", "-", stdin=jsonl([{"user_id": "u3", "agent_id": "a", "memory": "x"}]))
    assert code == 0 and json.loads(out)["imported"] == 1
    code, out = run("--db", db, "--json", "ingest", "-", stdin=jsonl([TURN]))
    assert code == 0 and [r["status"] for r in json.loads(out)] == ["ingested"]
    assert capsys.readouterr().err == ""


def test_eval_reads_its_data_from_standard_input(tmp_path: Path) -> None:
    from unit.test_evaluation_metrics import _write_fixture  # type: ignore[import-not-found]

    data, _ = _write_fixture(tmp_path)
    code, out = run("eval", "locomo", "--data", "-", "--no-cache", "--json", stdin=Path(data).read_text(encoding="utf-8"))
    assert code == 0 and json.loads(out)["data"]["questions_evaluated"] == 4


# -- global options anywhere -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["--db", "m.db", "--json", "list", *SCOPE],
        ["list", *SCOPE, "--db", "m.db", "--json"],
        ["--json", "list", "--db", "m.db", *SCOPE],
        ["--db", "elsewhere.db", "list", *SCOPE, "--json", "--db", "m.db"],  # after the command wins
    ],
)
def test_global_options_go_before_or_after_the_command(db: str, argv: list[str]) -> None:
    code, out = run(*argv)
    assert code == 0 and [m["id"] for m in json.loads(out)["memories"]] == [SEAT, TEA, TEE]


def test_global_options_after_a_nested_command(db: str) -> None:
    code, out = run("queue", "list", "--json", "--db", db)
    assert code == 0 and json.loads(out)["messages"] == []
    code, out = run("deadletters", "list", "--db", db, "--json")
    assert code == 0 and json.loads(out) == {"source": "local", "dead_letters": []}


# -- memory ids and their prefixes -----------------------------------------------------------------
def test_an_id_may_be_shortened_to_a_unique_start(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run("--db", db, "--json", "get", TEA[:8], *SCOPE)
    assert code == 0 and json.loads(out)["id"] == TEA
    assert json.loads(run("--db", db, "--json", "get", "5", *SCOPE)[1])["id"] == SEAT
    assert run("--db", db, "get", "a1b2", *SCOPE) == (2, "")
    err = capsys.readouterr().err
    assert err == (
        f"memory-core: error: id: 'a1b2' starts the ids of several memories ({TEA}, {TEE}); give more of the id\n"
    )
    assert run("--db", db, "get", "ffff", *SCOPE) == (3, "")
    assert capsys.readouterr().err == (
        "memory-core: not found: no memory has the id 'ffff' or an id starting with it "
        f"(user {USER!r}, agent {AGENT!r})\n"
    )
    assert run("--db", db, "get", TEA[:8], "--user", "u2", "--agent", AGENT)[0] == 3  # another scope
    code, out = run("--db", db, "delete", TEE[:6], *SCOPE)
    assert (code, out) == (0, f"deleted {TEE}: plays golf on Sundays\n")
    assert json.loads(run("--db", db, "--json", "get", TEE[:6], *SCOPE)[1])["status"] == "deleted"


def test_the_short_ids_ingest_prints_are_accepted_back(tmp_path: Path) -> None:
    (tmp_path / "turns.jsonl").write_text(jsonl([TURN]), encoding="utf-8")
    code, out = run("--db", "m.db", "ingest", "turns.jsonl")
    assert code == 0
    short = re.findall(r"^\s+ADD\s+([0-9a-f]{8})\s", out, flags=re.MULTILINE)
    assert short, out
    for prefix in short:
        code, detail = run("--db", "m.db", "--json", "get", prefix, *SCOPE)
        assert code == 0 and json.loads(detail)["id"].startswith(prefix)


# -- exit statuses ----------------------------------------------------------------------------------
def test_each_exit_status(db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--db", db, "list", *SCOPE)[0] == output.EXIT_OK == 0
    assert run("--db", db, "list", "--agent", AGENT)[0] == output.EXIT_USAGE == 2  # a missing argument
    assert "the following arguments are required: --user" in capsys.readouterr().err
    assert run("--db", db, "search", "q", *SCOPE, "--top", "0")[0] == 2  # a bad value
    assert run("--db", db, "get", "nope", *SCOPE)[0] == output.EXIT_NOT_FOUND == 3
    assert run("--db", "absent.db", "list", *SCOPE)[0] == 3
    monkeypatch.setenv("MEMORY_EMBEDDER", "bogus")
    assert run("--db", db, "list", *SCOPE)[0] == output.EXIT_FAILURE == 1  # the configuration
    assert "MEMORY_EMBEDDER must be one of" in capsys.readouterr().err


def test_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--help") == (0, "")
    text = capsys.readouterr().out
    for line in ("0    ok", "1    failure", "2    usage or bad input", "3    not found"):
        assert line in text
    assert run("--version")[0] == 0


# -- commands that only read create nothing --------------------------------------------------------
READ_ONLY = [
    ["list", *SCOPE],
    ["get", "abc", *SCOPE],
    ["delete", "abc", *SCOPE],
    ["search", "tea", *SCOPE],
    ["search", "tea", *SCOPE, "--recall"],
    ["export", "--user", USER],
    ["--json", "export", "--user", USER],
    ["embed"],
    ["forget"],
    ["forget", "--apply"],
    ["purge", "--user", USER, "--yes"],
    ["doctor"],
    ["queue", "list"],
    ["queue", "dead-letters"],
    ["queue", "requeue", "1"],
    ["queue", "purge-dead-letters"],
    ["deadletters", "list"],
    ["deadletters", "replay", "--all"],
    ["entities", *SCOPE],
    ["entities", "forget", "ent_1", *SCOPE],
    ["export", "--user", USER, "--entity", "ent_1"],
]


@pytest.mark.parametrize("where", [["--db", "sub/missing.db"], ["--db", "missing.db"], []], ids=["typo", "file", "default"])
@pytest.mark.parametrize("argv", READ_ONLY, ids=[" ".join(a) for a in READ_ONLY])
def test_a_missing_store_is_not_found_and_never_created(
    where: list[str], argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(*where, *argv)
    err = capsys.readouterr().err
    path = where[1] if where else ".memory-core/memory.db"
    assert code == 3
    if argv[0] == "doctor":  # the report says what is missing
        assert f"fail  store.file  {path} does not exist" in out and err == ""
    else:
        assert err.startswith(f"memory-core: not found: no store at {path}: ") and err.count("\n") == 1
    assert files(tmp_path) == []


def test_reading_an_existing_store_creates_no_file(db: str, tmp_path: Path) -> None:
    before = files(tmp_path)
    for argv in (["list", *SCOPE], ["get", TEA[:8], *SCOPE], ["search", "tea", *SCOPE], ["export", "--user", USER]):
        assert run("--db", db, *argv)[0] == 0
    for argv in (["doctor"], ["queue", "list"], ["deadletters", "list"], ["--json", "export", "--user", USER]):
        assert run("--db", db, *argv)[0] == 0
    assert files(tmp_path) == before


def test_a_mistyped_db_never_creates_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "records.jsonl").write_text(jsonl(RECORDS), encoding="utf-8")
    assert run("--db", "tpyo/m.db", "import", "records.jsonl") == (2, "")
    assert capsys.readouterr().err == (
        "memory-core: error: --db tpyo/m.db: the directory tpyo does not exist; create it first "
        "(a store is created only in an existing directory)\n"
    )
    assert files(tmp_path) == ["records.jsonl"]
    assert run("import", "records.jsonl")[0] == 0  # the default place is made when needed
    assert (tmp_path / ".memory-core" / "memory.db").is_file()


# -- search ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "order", [["--order-by", "importance", "desc"], ["--order-by", "importance desc"], ["--order-by=importance", "DESC"]]
)
def test_order_by_takes_field_and_direction_as_two_arguments_or_one(db: str, order: list[str]) -> None:
    code, out = run("--db", db, "--json", "search", "seat", *SCOPE, *order, "--mode", "keyword")
    assert code == 0 and json.loads(out)["hits"][0]["memory"]["id"] == SEAT


def test_order_by_refuses_an_unknown_order(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--db", db, "search", "seat", *SCOPE, "--order-by", "importance", "sideways")[0] == 2
    assert "'importance' is not a sort order; give FIELD DIR, one of: updated_at desc" in capsys.readouterr().err


def test_search_reads_only_unless_recall(db: str) -> None:
    def recalls() -> int:
        return int(json.loads(run("--db", db, "--json", "get", SEAT, *SCOPE)[1])["access_count"])

    for flags in ([], ["--no-recall"]):
        assert run("--db", db, "search", "window seat", *SCOPE, *flags)[0] == 0
    assert recalls() == 0
    assert run("--db", db, "search", "window seat", *SCOPE, "--recall")[0] == 0
    assert recalls() == 1


# -- import is idempotent --------------------------------------------------------------------------
def test_importing_twice_stores_nothing_twice(db: str, tmp_path: Path) -> None:
    def count(user: str = USER) -> int:
        return len(json.loads(run("--db", db, "--json", "list", "--user", user, "--agent", AGENT)[1])["memories"])

    code, out = run("--db", db, "--json", "import", "records.jsonl")
    assert code == 0 and json.loads(out) == {"imported": 0, "updated": 0, "skipped": 4, "embedded": 0, "vectors_missing": 0}
    assert (count(), count("u2")) == (3, 1)
    # Without ids: the same text (up to case, width and spacing) in the same scope is the same memory.
    same = [{"user_id": "u2", "agent_id": AGENT, "memory": text} for text in ("VEGETARIAN ", "ｖｅｇｅｔａｒｉａｎ")]
    code, out = run("--db", db, "import", "-", stdin=jsonl(same))
    assert (code, out) == (
        0,
        "imported 0 memories, updated 0, skipped 2 (already stored or repeated); 0 embeddings computed\n",
    )
    changed = [{**RECORDS[0], "importance": 0.2}]
    assert json.loads(run("--db", db, "--json", "import", "-", stdin=jsonl(changed))[1])["updated"] == 1
    # An export imported again is all there already.
    export = run("--db", db, "export", "--user", USER)[1]
    assert json.loads(run("--db", db, "--json", "import", "-", stdin=export)[1])["skipped"] == 3
    code, out = run("--db", db, "--json", "import", "records.jsonl", "--allow-duplicates")
    assert code == 0 and json.loads(out)["imported"] == 4  # every record written again (by id, or anew)
    assert (count(), count("u2")) == (3, 2)


# -- help ------------------------------------------------------------------------------------------
def commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield from subparsers(build_parser())


def has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(action, argparse._SubParsersAction) for action in parser._actions)


def test_every_command_has_an_example_and_shows_its_defaults() -> None:
    for words, parser in commands():
        text = parser.format_help()
        assert re.search(r"\nexample:\n  .*memory-core ", text), words
        assert "--json" in text and "--db PATH" in text, words  # the global options, after the command too
    helps = {words: parser.format_help() for words, parser in commands()}
    assert "memories per page (default: 100)" in helps["list"]
    assert "default: 7" in helps["bench search"]
    assert "default: hybrid" in helps["search"]


# -- --json: exactly one JSON document -------------------------------------------------------------
PURITY: dict[str, tuple[list[str], set[int]]] = {
    "demo": (["demo"], {0}),
    "ingest": (["ingest", "turns.jsonl"], {0}),
    "index ensure": (["index", "ensure"], {1}),  # no AZURE_SEARCH_ENDPOINT: the error, as JSON
    "import": (["import", "records.jsonl"], {0}),
    "export": (["export", "--user", USER], {0}),
    "embed": (["embed"], {0}),
    "search": (["search", "tea", *SCOPE], {0}),
    "list": (["list", *SCOPE], {0}),
    "get": (["get", TEA[:8], *SCOPE], {0}),
    "delete": (["delete", TEE[:8], *SCOPE], {0}),
    "entities": (["entities", *SCOPE], {0}),
    "forget": (["forget"], {0}),
    "purge": (["purge", "--user", "u2", "--yes"], {0}),
    "bench search": (["bench", "search", "--store-size", "300", "--scope-size", "50", "--queries", "5", "--dimensions", "16"], {0}),
    "bench ingest": (["bench", "ingest", "--turns", "3", "--scopes", "1"], {0}),
    "bench import": (["bench", "import", "--records", "20", "--repeat-share", "0.3", "--embedder", "hash"], {0}),
    "bench forget": (["bench", "forget", "--store-size", "300", "--scope-size", "50", "--dimensions", "8", "--in-process"], {0}),
    "bench provider": (["bench", "provider", "--runs", "2", "--memories", "5", "--embedder", "hash"], {0}),
    "bench serve": (
        ["bench", "serve", "--seconds", "0.5", "--turns", "6", "--users", "2", "--seed-turns", "1", "--searchers", "2", "--embedder", "hash"],
        {0, 1},
    ),
    "bench inspector": (["bench", "inspector", "--memories", "100", "--other-users", "2", "--runs", "1"], {0}),
    "bench ann": (
        ["bench", "ann", "--sizes", "300", "--derived", "--k", "5", "--threads", "1", "--queries", "3", "--no-determinism"],
        {0},
    ),
    "eval locomo": (["eval", "locomo", "--data", "missing.json"], {2}),  # the error, as JSON
    "eval japanese": (["eval", "japanese", "--modes", "keyword", "--profiles", "none", "--no-cache"], {0}),
    "eval pipeline": (["eval", "pipeline", "--no-cache"], {0}),
    "eval truth": (["eval", "truth", "--lang", "en", "--category", "chatter", "--no-cache"], {0}),
    "mcp": (["mcp"], {2}),  # refused: mcp speaks its own protocol on standard output
    "doctor": (["doctor"], {0}),
    "queue list": (["queue", "list"], {0}),
    "queue dead-letters": (["queue", "dead-letters"], {0}),
    "queue requeue": (["queue", "requeue", "9"], {3}),
    "queue purge-dead-letters": (["queue", "purge-dead-letters"], {0}),
    "deadletters list": (["deadletters", "list"], {0}),
    "deadletters show": (["deadletters", "show", "9"], {3}),
    "deadletters replay": (["deadletters", "replay", "--all"], {0}),
    "usage error": (["list", "--bogus"], {2}),
}
#: Commands checked elsewhere: ``serve`` runs until stopped (see the subprocess test below).
ELSEWHERE = {"serve"}


def test_the_json_matrix_covers_every_command() -> None:
    leaves = {words for words, parser in commands() if not has_subcommands(parser)}
    assert leaves == (set(PURITY) - {"usage error"}) | ELSEWHERE


@pytest.mark.parametrize("name", sorted(PURITY))
def test_json_prints_exactly_one_document(
    name: str, db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "turns.jsonl").write_text(jsonl([TURN]), encoding="utf-8")
    argv, codes = PURITY[name]
    code, out = run(*([] if name == "demo" else ["--db", db]), *argv, "--json")  # the demo has its own store
    assert code in codes, (code, capsys.readouterr().err)
    document = json.loads(out)  # one document: a second one, or any text, would not parse
    assert document is not None
    if code != 0 and not document.get("missed"):  # a benchmark that misses a target reports it, exit 1
        assert set(document) == {"error"} and set(document["error"]) == {"code", "message", "field"}
    assert capsys.readouterr().out == ""  # nothing reached the real standard output behind its back


# -- as a program ----------------------------------------------------------------------------------
def program(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORY_EMBEDDER": "hash"}
    env.pop("MEMORY_SQLITE_PATH", None)
    return subprocess.run(
        [sys.executable, "-m", "memory_core", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_python_dash_m_memory_core(db: str, tmp_path: Path) -> None:
    done = program("list", *SCOPE, "--db", db, "--json", cwd=tmp_path)
    assert done.returncode == 0 and len(json.loads(done.stdout)["memories"]) == 3 and done.stderr == ""
    done = program("import", "missing.jsonl", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "memory-core: error: cannot read missing.jsonl: no such file\n"
    done = program("get", "nope", *SCOPE, "--db", db, cwd=tmp_path)
    assert done.returncode == 3 and "Traceback" not in done.stderr


def test_serve_json_prints_one_line_once_it_listens(db: str, tmp_path: Path) -> None:
    env = {**os.environ, "MEMORY_EMBEDDER": "hash"}
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_core", "--db", db, "serve", "--port", "0", "--no-scheduler", "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        assert ready["status"] == "listening" and ready["url"].startswith("http://127.0.0.1:")
        assert ready["url"].endswith("/api") and ready["store"] == db and ready["workers"] == 4
    finally:
        process.send_signal(signal.SIGINT)
        rest, err = process.communicate(timeout=60)
    assert process.returncode == 0 and rest == ""
    assert "memory-core serve: stopped" in err


def test_a_service_that_fails_for_good_exits_1_and_bad_input_exits_2() -> None:
    from memory_core.cli.main import _failure
    from memory_core.errors import InputError, PermanentError

    refused = _failure(PermanentError("Azure AI Search answered 403"))  # the service, not the caller
    assert refused[:2] == (1, "failed")
    assert _failure(InputError("cannot read x.jsonl: no such file"))[:2] == (2, "bad_request")
