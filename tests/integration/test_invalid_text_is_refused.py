"""Control characters in a turn are refused at the edge, and an invalid message is permanent at once
(regression: a turn with ``\\x01`` was accepted with 202, then failed consolidation on every delivery,
blocking its scope for 2.5 minutes before it was dead-lettered)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pydantic
import pytest
from runtime_helpers import running, turn_body

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.messages import Turn, TurnMessage
from memory_core.errors import PermanentError
from memory_core.runtime.worker import QueueWorker

pytestmark = pytest.mark.fault  # part of the fault suite (issue 16)

CONTROLS = ["\x00", "\x01", "\x08", "\x0b", "\x0c", "\x0e", "\x1b", "\x1f", "\x7f"]


@pytest.mark.parametrize("char", CONTROLS)
def test_a_message_with_a_control_character_is_invalid_and_says_which(char: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=f"U\\+{ord(char):04X} at position 4"):
        TurnMessage(role="user", text=f"I am{char} vegetarian.")


def test_tab_line_feed_and_carriage_return_are_text() -> None:
    assert TurnMessage(role="user", text="a\tb\r\nc\n").text == "a\tb\r\nc\n"


def test_the_api_answers_422_naming_the_field(tmp_path: Path) -> None:
    with running(tmp_path / "m.db", workers=1) as rt:
        reply = rt.client.post("/api/turns", turn_body(0, "I like tea\x01."))
        assert reply.status == 422
        assert reply.body["error"]["field"].startswith("messages.0.text")
        assert "U+0001" in reply.body["error"]["message"]
        assert rt.runtime.queue is not None and rt.runtime.queue.stats().active == 0


def test_an_invalid_record_is_dead_lettered_on_the_first_delivery(tmp_path: Path) -> None:
    """Whatever slips past the edge (an older producer writing straight to the queue) fails once."""

    async def scenario() -> None:
        client = LocalMemoryClient.open(
            sqlite_path=tmp_path / "m.db", embedder=HashingEmbedder(), queue=True, episodes=False
        )
        queue = client.queue
        assert isinstance(queue, SQLiteQueue)
        try:
            body: dict[str, Any] = turn_body(0, "I like tea.")
            body["messages"][0]["text"] = "I like \x01tea."
            queue.send(__import__("json").dumps(body), message_id="raw-1", session_id="u1|a1", subject="turn")
            worker = QueueWorker(queue, client.service, name="w", renew_locks=False)
            assert await worker.drain() == 1
            (dead,) = queue.dead_letters()
            assert dead.delivery_count == 1 and "U+0001" in (dead.dead_letter_description or "")
        finally:
            await client.close()

    asyncio.run(scenario())


def test_the_service_turns_a_model_validation_error_into_a_permanent_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = LocalMemoryClient.open(
            sqlite_path=tmp_path / "m.db", embedder=HashingEmbedder(), episodes=False
        )
        service = client.service

        async def broken(turn: Turn, **options: Any) -> Any:
            TurnMessage(role="user", text="\x01")  # any record that cannot be built

        try:
            service.ingest = broken  # type: ignore[method-assign]
            with pytest.raises(PermanentError, match="cannot make a valid record"):
                await service.process_message(turn_body(0, "I like tea."))
        finally:
            await client.close()

    asyncio.run(scenario())
