"""A wired memory service for the Functions tests: embedded store, history on a fake Table service, capturing publisher."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables.aio import TableClient
from azure.functions.servicebus import ServiceBusMessage
from fake_table_service import FakeTableService

from memory_core.adapters.azure.retry import RetrySettings
from memory_core.adapters.azure.table_history import AzureTableHistoryStore
from memory_core.bootstrap import build_service
from memory_core.config import Settings
from memory_core.domain.messages import RecallUpdate, Turn
from memory_core.ports import Embedder, FixedClock, TurnPublisher
from memory_core.service import MemoryService

__all__ = [
    "NOW", "CapturingPublisher", "Env", "functions_env", "history_store", "sb_message", "table_client", "turn_body",
]

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ACCOUNT = "https://memtest.table.core.windows.net"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@dataclass
class CapturingPublisher(TurnPublisher):
    """A TurnPublisher that keeps what it was asked to send."""

    turns: list[Turn] = field(default_factory=list)
    recalls: list[RecallUpdate] = field(default_factory=list)
    closed: bool = False

    async def publish_turn(self, turn: Turn) -> None:
        self.turns.append(turn)

    async def publish_recall(self, update: RecallUpdate) -> None:
        self.recalls.append(update)

    async def close(self) -> None:
        self.closed = True


def table_client(service: FakeTableService, table: str = "memoryhistory") -> TableClient:
    return TableClient(
        ACCOUNT,
        table,
        credential=AzureNamedKeyCredential("memtest", "a2V5"),
        transport=service,
        retry_total=0,
    )


def history_store(
    service: FakeTableService, sleep: Recorder | None = None, attempts: int = 3
) -> AzureTableHistoryStore:
    return AzureTableHistoryStore(
        table_client(service),
        retry=RetrySettings(attempts=attempts, base_delay=0.5, max_delay=5.0),
        sleep=sleep or Recorder(),
    )


@dataclass
class Env:
    service: MemoryService
    tables: FakeTableService
    history: AzureTableHistoryStore
    publisher: CapturingPublisher
    clock: FixedClock


@asynccontextmanager
async def functions_env(
    tmp_path: Path,
    *,
    publisher: Any | None = None,
    embedder: Embedder | None = None,
    dead_letters: bool = True,
) -> AsyncIterator[Env]:
    """The service the functions would build in Azure, with local stand-ins for the services."""
    tables = FakeTableService()
    history = history_store(tables)
    clock = FixedClock(NOW)
    settings = Settings(store="sqlite", sqlite_path=str(tmp_path / "memory.db"), embedder="hash")
    pub = publisher if publisher is not None else CapturingPublisher()
    service = build_service(
        settings,
        clock=clock,
        history=history,
        publisher=pub,
        recall_via_queue=True,
        embedder=embedder,
        checkpoints=history,
        dead_letters=history if dead_letters else None,
    )
    try:
        yield Env(service, tables, history, pub, clock)
    finally:
        await service.close()


def turn_body(
    turn_id: str, text: str, *, user: str = "u1", agent: str = "a1", at: datetime = NOW
) -> dict[str, Any]:
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": turn_id,
        "user_id": user,
        "agent_id": agent,
        "session_id": "chat-1",
        "occurred_at": at.isoformat(),
        "messages": [{"role": "user", "text": text}, {"role": "assistant", "text": "Noted."}],
    }


def sb_message(
    body: bytes | dict[str, Any], *, message_id: str, session_id: str, delivery_count: int = 1
) -> ServiceBusMessage:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    return ServiceBusMessage(
        body=raw,
        message_id=message_id,
        session_id=session_id,
        content_type="application/json",
        delivery_count=delivery_count,
        enqueued_time_utc=NOW,
        sequence_number=7,
        application_properties={},
        user_properties={},
    )
