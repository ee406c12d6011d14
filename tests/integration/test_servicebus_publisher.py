"""The Service Bus publisher: the messages it builds, the client it keeps, the errors it maps.

The AMQP connection cannot be intercepted like an HTTP transport, so the SDK's client is replaced
at its seam (``client=`` or ``azure.servicebus.aio.ServiceBusClient``) by a recorder that receives the
real ``azure.servicebus.ServiceBusMessage`` objects. A live round trip is in ``tests/azure``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
    ServiceBusServerBusyError,
)

from memory_core.adapters.azure.service_bus import (
    CONTENT_TYPE,
    PublisherSettings,
    ServiceBusTurnPublisher,
    build_message,
    map_servicebus_error,
)
from memory_core.bootstrap import build_publisher, build_service
from memory_core.config import Settings
from memory_core.domain.messages import RecallUpdate, Turn, message_id_for, session_id_for
from memory_core.domain.records import Scope
from memory_core.errors import ConfigurationError, PermanentError, TransientError

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def turn(turn_id: str = "turn-1", user: str = "u1", agent: str = "a1") -> Turn:
    return Turn(
        turn_id=turn_id,
        user_id=user,
        agent_id=agent,
        session_id="chat-1",
        occurred_at=NOW,
        messages=[{"role": "user", "text": "私は緑茶が好きです"}],
    )


class FakeSender:
    def __init__(self, errors: list[BaseException] | None = None, delay: float = 0.0) -> None:
        self.sent: list[tuple[ServiceBusMessage, float | None]] = []
        self.errors = list(errors or [])
        self.delay = delay
        self.closed = False

    async def send_messages(self, message: ServiceBusMessage, *, timeout: float | None = None) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.errors:
            raise self.errors.pop(0)
        self.sent.append((message, timeout))

    async def close(self) -> None:
        self.closed = True


class FakeClient:
    def __init__(self, sender: FakeSender | None = None, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.senders: list[str] = []
        self.sender = sender or FakeSender()
        self.closed = False

    def get_queue_sender(self, queue_name: str) -> FakeSender:
        self.senders.append(queue_name)
        return self.sender

    async def close(self) -> None:
        self.closed = True


def test_a_turn_message_carries_session_message_id_body_and_content_type() -> None:
    message = build_message(turn())
    assert message.session_id == "u1|a1" == session_id_for(Scope.of("u1", "a1"))
    assert message.message_id == message_id_for(Scope.of("u1", "a1"), "turn", "turn-1")
    # unique per scope: another user's turn with the same id is another message
    assert build_message(turn("turn-1", user="u2")).message_id != message.message_id
    assert message.content_type == CONTENT_TYPE == "application/json"
    assert message.subject == "memory-core.turn.v1"
    body = json.loads(b"".join(message.body).decode("utf-8"))
    assert body == turn().to_json_dict()
    assert body["schema"] == "memory-core.turn.v1" and body["messages"][0]["text"] == "私は緑茶が好きです"


def test_a_recall_message_uses_the_same_session_and_its_recall_id() -> None:
    update = RecallUpdate(user_id="u1", agent_id="a1", memory_ids=["m1", "m2"], at=NOW, recall_id="recall-7")
    message = build_message(update)
    assert message.session_id == "u1|a1"
    assert message.message_id == message_id_for(Scope.of("u1", "a1"), "recall", "recall-7")
    assert message.subject == "memory-core.recall.v1"
    assert json.loads(b"".join(message.body))["memory_ids"] == ["m1", "m2"]


def test_long_scopes_get_a_hashed_session_id_within_the_limit() -> None:
    long_turn = turn(user="u" * 100, agent="a" * 100)
    message = build_message(long_turn)
    assert len(message.session_id) <= 128 and message.session_id.startswith("h:")


def test_one_client_and_sender_are_reused_and_closed_only_if_owned() -> None:
    async def body() -> None:
        client = FakeClient()
        publisher = ServiceBusTurnPublisher("ns.servicebus.windows.net", "memory-turns", client=client)
        await publisher.publish_turn(turn("turn-1"))
        await publisher.publish_turn(turn("turn-2"))
        await publisher.publish_recall(RecallUpdate(user_id="u1", agent_id="a1", memory_ids=["m1"], at=NOW))
        assert client.senders == ["memory-turns"]
        assert [m.message_id for m, _ in client.sender.sent][:2] == [
            message_id_for(Scope.of("u1", "a1"), "turn", t) for t in ("turn-1", "turn-2")
        ]
        assert all(timeout == PublisherSettings().operation_timeout for _, timeout in client.sender.sent)
        await publisher.close()
        assert client.sender.closed and not client.closed  # the client was handed in
        with pytest.raises(PermanentError, match="closed"):
            await publisher.publish_turn(turn("turn-3"))

    asyncio.run(body())


def test_the_sdk_client_is_built_lazily_with_bounded_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.servicebus.aio

    built: list[FakeClient] = []

    def factory(namespace: str, credential: Any, **kwargs: Any) -> FakeClient:
        client = FakeClient(namespace=namespace, credential=credential, **kwargs)
        built.append(client)
        return client

    monkeypatch.setattr(azure.servicebus.aio, "ServiceBusClient", factory)
    credential = object()
    settings = PublisherSettings(retry_total=2, retry_backoff_factor=0.25, retry_backoff_max=4.0)
    publisher = ServiceBusTurnPublisher(
        "ns.servicebus.windows.net", "memory-turns", credential, settings=settings
    )  # type: ignore[arg-type]
    assert built == []

    async def body() -> None:
        await publisher.publish_turn(turn())
        await publisher.close()

    asyncio.run(body())
    (client,) = built
    assert client.kwargs == {
        "namespace": "ns.servicebus.windows.net",
        "credential": credential,
        "retry_total": 2,
        "retry_backoff_factor": 0.25,
        "retry_backoff_max": 4.0,
        "retry_mode": "exponential",
    }
    assert client.closed and client.sender.closed


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ServiceBusServerBusyError(message="busy"), TransientError),
        (OperationTimeoutError(message="slow"), TransientError),
        (ServiceBusConnectionError(message="reset"), TransientError),
        (MessageSizeExceededError(message="too big"), PermanentError),
        (MessagingEntityNotFoundError(message="no queue"), PermanentError),
        (ServiceBusAuthorizationError(message="no role"), TransientError),  # roles still propagating
        (ServiceBusAuthenticationError(message="no token"), TransientError),
        (ClientAuthenticationError(message="CredentialUnavailableError: no identity"), TransientError),
        (TimeoutError(), TransientError),
    ],
)
def test_errors_map_to_transient_or_permanent(error: BaseException, expected: type[Exception]) -> None:
    mapped = map_servicebus_error("publish turn", error)
    assert type(mapped) is expected
    assert "publish turn failed" in str(mapped)

    async def body() -> None:
        publisher = ServiceBusTurnPublisher("ns", "memory-turns", client=FakeClient(FakeSender([error])))
        with pytest.raises(expected) as raised:
            await publisher.publish_turn(turn())
        assert raised.value.__cause__ is error

    asyncio.run(body())


def test_a_link_the_sdk_shut_down_is_replaced_on_the_next_publish() -> None:
    async def body() -> None:
        client = FakeClient(FakeSender([ServiceBusConnectionError(message="link detached")]))
        publisher = ServiceBusTurnPublisher("ns", "memory-turns", client=client)
        with pytest.raises(TransientError):
            await publisher.publish_turn(turn())
        await publisher.publish_turn(turn())  # a fresh sender
        assert client.senders == ["memory-turns", "memory-turns"]

    asyncio.run(body())


def test_a_hanging_send_is_cut_by_the_overall_timeout() -> None:
    async def body() -> None:
        publisher = ServiceBusTurnPublisher(
            "ns",
            "memory-turns",
            client=FakeClient(FakeSender(delay=5.0)),
            settings=PublisherSettings(overall_timeout=0.05),
        )
        with pytest.raises(TransientError, match="TimeoutError"):
            await publisher.publish_turn(turn())

    asyncio.run(body())


def test_the_composition_root_builds_it_on_the_managed_identity_and_it_closes_what_it_owns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigurationError, match="fullyQualifiedNamespace"):
        build_publisher(Settings())

    created: list[Any] = []

    class Credential:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs
            self.closed = False
            created.append(self)

        async def close(self) -> None:
            self.closed = True

    import azure.identity.aio

    monkeypatch.setattr(azure.identity.aio, "DefaultAzureCredential", Credential)
    settings = Settings(
        servicebus_namespace="ns.servicebus.windows.net", turns_queue="turns-x", azure_client_id="cid"
    )
    publisher = build_publisher(settings)
    assert publisher.namespace == "ns.servicebus.windows.net" and publisher.queue_name == "turns-x"
    (credential,) = created
    assert credential.kwargs == {"managed_identity_client_id": "cid"}
    asyncio.run(publisher.close())
    assert credential.closed

    given = Credential()
    publisher = ServiceBusTurnPublisher("ns.servicebus.windows.net", "turns-x", given)  # type: ignore[arg-type]
    asyncio.run(publisher.close())
    assert not given.closed


def test_the_service_publishes_turns_and_recalls_through_it(tmp_path: Any) -> None:
    async def body() -> None:
        client = FakeClient()
        publisher = ServiceBusTurnPublisher("ns", "memory-turns", client=client)
        settings = Settings(store="sqlite", sqlite_path=str(tmp_path / "m.db"), embedder="hash")
        service = build_service(settings, publisher=publisher, recall_via_queue=True)
        assert await service.publish_turn(turn("turn-5")) == "queued"
        await service.record_recall(Scope.of("u1", "a1"), ["m1"])
        await service.close()
        sent = [m for m, _ in client.sender.sent]
        assert [m.subject for m in sent] == ["memory-core.turn.v1", "memory-core.recall.v1"]
        assert {m.session_id for m in sent} == {"u1|a1"}
        assert client.sender.closed

    asyncio.run(body())


def test_a_message_over_the_service_bus_limit_is_refused_before_it_is_sent() -> None:
    valid = turn()
    # A validated turn is at most 192 KiB of JSON; one built around that check (model_construct) is not.
    huge = valid.model_copy(update={"messages": [valid.messages[0].model_copy(update={"text": "x" * 300_000})]})
    with pytest.raises(PermanentError, match="Service Bus message limit"):
        build_message(huge)

    async def body() -> None:
        sender = FakeSender([])
        publisher = ServiceBusTurnPublisher("ns", "memory-turns", client=FakeClient(sender))
        with pytest.raises(PermanentError):
            await publisher.publish_turn(huge)
        assert sender.sent == []  # nothing reached the broker
        await publisher.publish_turn(valid)
        assert len(sender.sent) == 1

    asyncio.run(body())
