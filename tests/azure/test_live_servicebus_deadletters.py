"""The turns queue's own dead-letter sub-queue on a real namespace (skipped unless configured).

``ServiceBusConnection__fullyQualifiedNamespace`` (and ``MEMORY_TURNS_QUEUE``, default ``memory-turns``)
enables it. The test publishes a turn on a unique session, receives it and dead-letters it with the SDK
(as the broker does after ``maxDeliveryCount`` deliveries), then finds it with
:class:`~memory_core.adapters.azure.service_bus_deadletters.ServiceBusDeadLetterQueue`'s peek, replays
it, and checks that it left the sub-queue. The copy goes back under the same message id, so inside the
queue's duplicate detection window (one hour) the broker drops it: the test does not wait for it on the
main queue (``memory-core deadletters replay`` skips such a dead letter for that reason). The identity
needs *Azure Service Bus Data Owner* (or Sender and Receiver) on the queue; ``azd`` grants it to the
developer's ``principalId``. ``DefaultAzureCredential`` is used.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import UTC, datetime

import pytest

from memory_core.config import Settings
from memory_core.domain.messages import Turn, message_id_for, session_id_for
from memory_core.domain.records import Scope

pytestmark = pytest.mark.azure

NAMESPACE = os.environ.get("ServiceBusConnection__fullyQualifiedNamespace", "")  # noqa: SIM112 - the Functions setting name


@pytest.mark.skipif(
    not NAMESPACE, reason="ServiceBusConnection__fullyQualifiedNamespace is not set (live Azure test)"
)
def test_a_dead_lettered_turn_is_listed_and_replayed_out_of_the_sub_queue() -> None:
    from azure.identity.aio import DefaultAzureCredential
    from azure.servicebus.aio import ServiceBusClient

    from memory_core.adapters.azure.service_bus_deadletters import ServiceBusDeadLetterQueue
    from memory_core.bootstrap import build_publisher

    settings = Settings.from_env(os.environ)
    user = f"live-{uuid.uuid4().hex[:12]}"
    turn = Turn(
        turn_id=f"turn-{uuid.uuid4().hex}",
        user_id=user,
        agent_id="a1",
        occurred_at=datetime.now(UTC),
        messages=[{"role": "user", "text": "live dead-letter test"}],
    )
    scope = Scope.of(user, "a1")
    session = session_id_for(scope)
    message_id = message_id_for(scope, "turn", turn.turn_id)

    async def body() -> None:
        publisher = build_publisher(settings)
        try:
            await publisher.publish_turn(turn)
        finally:
            await publisher.close()
        async with DefaultAzureCredential() as credential, ServiceBusClient(NAMESPACE, credential) as client:
            receiver = client.get_queue_receiver(settings.turns_queue, session_id=session, max_wait_time=30)
            async with receiver:
                (message,) = await receiver.receive_messages(max_message_count=1, max_wait_time=30)
                await receiver.dead_letter_message(
                    message, reason="MemoryCoreLiveTest", error_description="dead-lettered by the live test"
                )
        queue = ServiceBusDeadLetterQueue.create(
            NAMESPACE, settings.turns_queue, client_id=settings.azure_client_id or None
        )
        try:
            mine = [d for d in await queue.peek(limit=5000) if d.message_id == message_id]
            assert len(mine) == 1, "the dead letter is in the sub-queue"
            (letter,) = mine
            assert letter.session_id == session and letter.reason == "MemoryCoreLiveTest"
            assert letter.description == "dead-lettered by the live test"
            assert letter.subject == "memory-core.turn.v1" and letter.enqueued_at is not None
            assert await queue.replay(letter.sequence_number) is True
            assert not [d for d in await queue.peek(limit=5000) if d.message_id == message_id]
        finally:
            await queue.close()

    asyncio.run(body())
