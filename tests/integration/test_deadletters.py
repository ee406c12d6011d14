"""``memory-core deadletters list|replay``: the embedded queue's dead letters through the command, and
the Azure history table's (on the fake Table service) through the use cases with a recording sender.
The same command against Azurite is in ``test_azurite_table_history.py``."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from fake_table_service import FakeTableService
from functions_env import history_store

from memory_core.adapters.azure.table_history import AzureTableHistoryStore
from memory_core.bootstrap import build_local_queue, load_settings
from memory_core.cli.main import main
from memory_core.config import Settings
from memory_core.errors import ConfigurationError, PermanentError, TransientError
from memory_core.ports import DeadLetter
from memory_core.tools.deadletter_sources import AzureDeadLetters, LocalDeadLetters
from memory_core.tools.deadletters import (
    list_dead_letters,
    open_dead_letters,
    replay_dead_letters,
    source_name,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------------------
# The embedded queue, through the command line
# ------------------------------------------------------------------------------------------------


def seed_local(db: str) -> None:
    queue = build_local_queue(load_settings(sqlite_path=db))
    try:
        for name in ("bad-1", "bad-2", "slow-1", "good"):
            queue.send(f'{{"n": "{name}"}}', message_id=name, session_id=f"s-{name}")
        for name, reason in (
            ("bad-1", "ValidationError"),
            ("bad-2", "ValidationError"),
            ("slow-1", "Timeout"),
        ):
            message = queue.receive()
            assert message is not None and message.message_id == name
            queue.dead_letter(message, reason=reason, description=f"{name} is wrong " + "x" * 300)
    finally:
        queue.close_sync()


def run_cli(*argv: str) -> tuple[int, str]:
    out = StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_local_list_shows_ids_reasons_and_a_shortened_description(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    seed_local(db)
    code, text = run_cli("--db", db, "deadletters", "list")
    assert code == 0
    assert text.startswith("3 dead letter(s) in local\n")
    assert "bad-1  session=s-bad-1  deliveries=1" in text and "ValidationError: bad-1 is wrong" in text
    assert "x" * 120 not in text and "…" in text  # shortened
    code, text = run_cli("--db", db, "deadletters", "list", "--reason", "timeout", "--json")
    assert code == 0
    (letter,) = json.loads(text)["dead_letters"]
    assert letter["message_id"] == "slow-1" and letter["reason"] == "Timeout" and letter["replayable"]
    assert (
        letter["delivery_count"] == 1 and letter["recorded_at"] and letter["size"] == len('{"n": "slow-1"}')
    )


def test_local_replay_by_seq_message_id_or_all_with_a_reason(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    seed_local(db)
    code, text = run_cli("--db", db, "--json", "deadletters", "list")
    seqs = {d["message_id"]: d["id"] for d in json.loads(text)["dead_letters"]}
    code, text = run_cli("--db", db, "deadletters", "replay", seqs["bad-1"], "slow-1")
    assert code == 0, text
    assert f"replayed  {seqs['bad-1']}: requeued as seq" in text and "2 replayed, 0 skipped" in text
    code, text = run_cli("--db", db, "deadletters", "replay", "bad-1", "nope")
    assert code == 1 and "not-found" in text and "nope" in text
    code, text = run_cli("--db", db, "--json", "deadletters", "replay", "--all", "--reason", "Timeout")
    assert code == 0 and json.loads(text)["replayed"] == 0  # nothing left with that reason
    code, text = run_cli(
        "--db", db, "--json", "deadletters", "replay", "--all", "--reason", "ValidationError"
    )
    assert code == 0 and [r["message_id"] for r in json.loads(text)["results"]] == ["bad-2"]
    # The older queue commands see the same queue.
    code, text = run_cli("--db", db, "queue", "dead-letters")
    assert code == 0 and "0 dead-lettered" in text
    code, text = run_cli("--db", db, "queue", "list")
    assert [line.split()[2] for line in text.splitlines()[1:]] == ["good", "bad-1", "slow-1", "bad-2"]


def test_replay_needs_ids_or_all_but_not_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "memory.db")
    assert run_cli("--db", db, "deadletters", "replay")[0] == 2
    assert run_cli("--db", db, "deadletters", "replay", "--all", "x")[0] == 2
    assert "or --all" in capsys.readouterr().err


def test_the_source_follows_the_settings_or_the_flag() -> None:
    local = Settings()
    azure = Settings(store="azure_search", azure_search_endpoint="https://s.example")
    assert source_name(local) == "local" and source_name(azure) == "azure"
    assert source_name(local, "azure") == "azure" and source_name(azure, "local") == "local"
    with pytest.raises(PermanentError):
        source_name(local, "cloud")
    with pytest.raises(ConfigurationError, match="MEMORY_HISTORY_TABLE_ENDPOINT"):
        open_dead_letters(azure)


def test_local_source_pages_through_many_dead_letters(tmp_path: Path) -> None:
    queue = build_local_queue(load_settings(sqlite_path=str(tmp_path / "m.db")))
    for i in range(7):
        queue.send("{}", message_id=f"m{i}", session_id=f"s{i}")
        message = queue.receive()
        assert message is not None
        queue.dead_letter(message, reason="R", description="")
    letters = asyncio.run(list_dead_letters(LocalDeadLetters(queue, page=3)))
    assert [d.message_id for d in letters] == [f"m{i}" for i in range(7)]
    queue.close_sync()


# ------------------------------------------------------------------------------------------------
# The Azure history table (fake Table service), replayed to a recording Service Bus sender
# ------------------------------------------------------------------------------------------------


class Sender:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail = fail
        self.closed = False

    async def republish(
        self, body: bytes, *, message_id: str, session_id: str, subject: str | None = None
    ) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append(
            {"body": body, "message_id": message_id, "session_id": session_id, "subject": subject}
        )

    async def close(self) -> None:
        self.closed = True


def letter(
    message_id: str, *, hours_ago: float = 3, body: bytes | None = None, session: str | None = "u1|a1"
) -> DeadLetter:
    at = NOW - timedelta(hours=hours_ago)
    return DeadLetter(
        message_id=message_id,
        reason="AuthenticationError" if message_id.startswith("auth") else "ValidationError",
        description=f"{message_id}: refused",
        body=body
        if body is not None
        else json.dumps({"schema": "memory-core.turn.v1", "id": message_id}).encode(),
        session_id=session,
        delivery_count=1,
        enqueued_time=at,
        at=at,
    )


async def azure_source(
    *letters: DeadLetter, sender: Sender
) -> tuple[AzureDeadLetters, AzureTableHistoryStore]:
    table = history_store(FakeTableService())
    for item in letters:
        await table.record_dead_letter(item)
    return AzureDeadLetters(table, lambda: sender), table


def test_azure_replay_sends_the_recorded_message_then_removes_the_record() -> None:
    async def body() -> None:
        sender = Sender()
        source, table = await azure_source(
            letter("auth-1"), letter("bad-1"), letter("auth-2", hours_ago=0.5), sender=sender
        )
        listed = await list_dead_letters(source, reason="authenticationerror")
        assert [d.message_id for d in listed] == ["auth-1", "auth-2"]
        results = await replay_dead_letters(source, every=True, reason="AuthenticationError", now=NOW)
        assert [(r.id, r.status) for r in results] == [("auth-1", "replayed"), ("auth-2", "skipped")]
        assert "duplicate" in results[1].detail and "2026-11-29 12:30:00Z" in results[1].detail
        (sent,) = sender.sent
        assert sent == {
            "body": letter("auth-1").body,
            "message_id": "auth-1",
            "session_id": "u1|a1",
            "subject": "memory-core.turn.v1",
        }
        assert sorted(d["message_id"] for d in await table.dead_letters()) == ["auth-2", "bad-1"]
        # After the window, the same letter goes; a zero window is "do not wait".
        assert [
            r.status for r in await replay_dead_letters(source, ["auth-2"], now=NOW + timedelta(hours=1))
        ] == ["replayed"]
        await source.close()
        assert sender.closed

    asyncio.run(body())


def test_azure_replay_keeps_the_record_when_the_send_fails_and_says_why() -> None:
    async def body() -> None:
        source, table = await azure_source(letter("bad-1"), sender=Sender(fail=TransientError("ServerBusy")))
        (result,) = await replay_dead_letters(source, ["bad-1"], now=NOW)
        assert result.status == "failed" and "ServerBusy" in result.detail and "kept" in result.detail
        assert [d["message_id"] for d in await table.dead_letters()] == ["bad-1"]

    asyncio.run(body())


def test_a_record_set_aside_again_during_the_replay_is_kept() -> None:
    async def body() -> None:
        sender = Sender()
        source, table = await azure_source(letter("bad-1"), sender=sender)
        letters = await source.letters()
        await table.record_dead_letter(letter("bad-1", hours_ago=0))  # the replayed turn failed again
        detail = await source.replay(letters[0])
        assert "set aside again" in detail
        assert [d["message_id"] for d in await table.dead_letters()] == ["bad-1"]

    asyncio.run(body())


def test_cut_bodies_and_missing_sessions_are_listed_but_never_replayed() -> None:
    async def body() -> None:
        sender = Sender()
        source, _ = await azure_source(
            letter("cut", body=b"\x01" * 250_000),
            letter("latin", body="café".encode("latin-1")),
            letter("anon", session=None),
            sender=sender,
        )
        listed = {d.message_id: d for d in await list_dead_letters(source)}
        assert "cut or was not UTF-8" in (listed["cut"].not_replayable or "")
        assert "cut or was not UTF-8" in (listed["latin"].not_replayable or "")
        assert "session id" in (listed["anon"].not_replayable or "")
        results = await replay_dead_letters(source, every=True, now=NOW)
        assert {r.status for r in results} == {"skipped"} and sender.sent == []

    asyncio.run(body())


def test_azure_ids_that_do_not_exist_or_have_another_reason() -> None:
    async def body() -> None:
        source, _ = await azure_source(letter("bad-1"), sender=Sender())
        results = await replay_dead_letters(source, ["nope", "bad-1"], reason="AuthenticationError", now=NOW)
        assert [(r.id, r.status) for r in results] == [("nope", "not-found"), ("bad-1", "skipped")]

    asyncio.run(body())


def test_the_service_bus_publisher_resends_a_body_byte_for_byte() -> None:
    from memory_core.adapters.azure.service_bus import CONTENT_TYPE, ServiceBusTurnPublisher

    sent: list[Any] = []

    class Client:
        def get_queue_sender(self, queue_name: str) -> Any:
            class QueueSender:
                async def send_messages(self, message: Any, *, timeout: float | None = None) -> None:
                    sent.append(message)

                async def close(self) -> None:
                    pass

            return QueueSender()

    async def body() -> None:
        publisher = ServiceBusTurnPublisher("ns", "memory-turns", client=Client())
        raw = '{"schema": "memory-core.turn.v1", "text": "緑茶🍵"}'.encode()
        await publisher.republish(raw, message_id="turn:1", session_id="u1|a1", subject="memory-core.turn.v1")
        (message,) = sent
        assert b"".join(message.body) == raw and message.message_id == "turn:1"
        assert message.session_id == "u1|a1" and message.content_type == CONTENT_TYPE
        with pytest.raises(PermanentError, match="session id"):
            await publisher.republish(raw, message_id="turn:2", session_id="")
        await publisher.close()

    asyncio.run(body())


def test_local_show_prints_one_dead_letter_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "memory.db")
    seed_local(db)
    code, text = run_cli("--db", db, "deadletters", "show", "slow-1")
    assert code == 0, text
    assert "reason:      Timeout" in text.splitlines()
    assert "slow-1 is wrong " + "x" * 300 in text  # the description whole, unlike the list
    assert "  n:" not in text and "body:        not a JSON object" not in text
    code, text = run_cli("--db", db, "--json", "deadletters", "show", "slow-1")
    shown = json.loads(text)["dead_letter"]
    assert shown["message_id"] == "slow-1" and shown["summary"] == {}  # a body with no ids says nothing
    assert run_cli("--db", db, "deadletters", "show", "nope")[0] == 3
    assert "no dead letter in local has id 'nope'" in capsys.readouterr().err
