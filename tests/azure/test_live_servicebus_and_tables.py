"""The Service Bus publisher and the Table history against real Azure resources (skipped unless configured).

``ServiceBusConnection__fullyQualifiedNamespace`` (and ``MEMORY_TURNS_QUEUE``, default
``memory-turns``) enables the Service Bus test: it publishes a turn on a unique session and receives
it back from that session with the SDK, checking what the queue trigger would see. The identity
needs send and receive rights on the queue (*Azure Service Bus Data Sender* and *Receiver*, or *Data
Owner*, which ``azd`` grants the developer's ``principalId``). ``MEMORY_HISTORY_TABLE_ENDPOINT`` enables the Table test (*Storage
Table Data Contributor*). Both use ``DefaultAzureCredential``.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import UTC, datetime

import pytest

from memory_core.config import Settings
from memory_core.domain.messages import HistoryEntry, MemoryEvent, Turn, session_id_for
from memory_core.domain.records import Scope

pytestmark = pytest.mark.azure

NAMESPACE = os.environ.get("ServiceBusConnection__fullyQualifiedNamespace", "")  # noqa: SIM112 - the Functions setting name
TABLE_ENDPOINT = os.environ.get("MEMORY_HISTORY_TABLE_ENDPOINT", "")


@pytest.mark.skipif(
    not NAMESPACE, reason="ServiceBusConnection__fullyQualifiedNamespace is not set (live Azure test)"
)
def test_a_published_turn_arrives_on_its_session() -> None:
    from azure.identity.aio import DefaultAzureCredential
    from azure.servicebus.aio import ServiceBusClient

    from memory_core.bootstrap import build_publisher

    settings = Settings.from_env(os.environ)
    user = f"live-{uuid.uuid4().hex[:12]}"
    turn = Turn(
        turn_id=f"turn-{uuid.uuid4().hex}",
        user_id=user,
        agent_id="a1",
        occurred_at=datetime.now(UTC),
        messages=[{"role": "user", "text": "live test"}],
    )
    session = session_id_for(Scope.of(user, "a1"))

    async def body() -> None:
        publisher = build_publisher(settings)
        try:
            await publisher.publish_turn(turn)
        finally:
            await publisher.close()
        async with DefaultAzureCredential() as credential, ServiceBusClient(NAMESPACE, credential) as client:
            receiver = client.get_queue_receiver(settings.turns_queue, session_id=session, max_wait_time=30)
            async with receiver:
                messages = await receiver.receive_messages(max_message_count=1, max_wait_time=30)
                assert len(messages) == 1
                (message,) = messages
                assert message.message_id == turn.turn_id and message.session_id == session
                assert message.content_type == "application/json"
                assert json.loads(b"".join(message.body))["turn_id"] == turn.turn_id
                await receiver.complete_message(message)

    asyncio.run(body())


@pytest.mark.skipif(not TABLE_ENDPOINT, reason="MEMORY_HISTORY_TABLE_ENDPOINT is not set (live Azure test)")
def test_history_round_trip_on_the_real_table() -> None:
    from memory_core.adapters.azure.table_history import AzureTableHistoryStore

    scope = Scope.of(f"live-{uuid.uuid4().hex[:12]}", "a1")
    now = datetime.now(UTC)
    entry = HistoryEntry(
        memory_id="m1",
        user_id=scope.user_id,
        agent_id="a1",
        event=MemoryEvent.ADD,
        reason="live",
        turn_id="t1",
        at=now,
    )

    async def body() -> None:
        store = AzureTableHistoryStore.create(TABLE_ENDPOINT)
        try:
            assert await store.record_step(scope, "t1", 0, [entry]) is True
            assert await store.record_step(scope, "t1", 0, [entry]) is False
            await store.mark_turn_processed(scope, "t1", now)
            assert await store.turn_processed(scope, "t1")
            assert [e.memory_id for e in await store.for_memory(scope, "m1")] == ["m1"]
        finally:
            await store.purge(scope.user_id)
            await store.close()

    asyncio.run(body())
