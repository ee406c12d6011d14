"""The turns queue's own Service Bus dead-letter sub-queue: the adapter's use of the SDK, and
``memory-core deadletters list|show|replay --source servicebus``.

As in ``test_servicebus_publisher.py``, the AMQP connection is replaced at the SDK's seam: a recording
client hands out a receiver and a sender that hold real ``azure.servicebus.ServiceBusReceivedMessage``
objects (built from AMQP messages as the SDK builds them, with the broker's dead-letter properties) and
receive the real ``ServiceBusMessage`` the adapter sends. The command line runs on a fake that subclasses
the :class:`~memory_core.tools.deadletter_sources.DeadLetterQueue` protocol. A live round trip is in ``tests/azure``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus._pyamqp.message import Header, Message, Properties
from azure.servicebus.exceptions import ServiceBusConnectionError, SessionLockLostError

from memory_core.adapters.azure import service_bus_deadletters
from memory_core.adapters.azure.service_bus_deadletters import ServiceBusDeadLetterQueue
from memory_core.cli.main import main
from memory_core.domain.messages import QueueDeadLetter
from memory_core.errors import MemoryCoreError, PermanentError, TransientError
from memory_core.tools.deadletter_sources import DeadLetterQueue

NOW = datetime.now(UTC)
#: What a turn's user said: it must never reach the command's output.
SECRET = "私の暗証番号は4321です"


def turn_body(turn_id: str, user: str = "u1") -> bytes:
    return json.dumps(
        {
            "schema": "memory-core.turn.v1",
            "turn_id": turn_id,
            "user_id": user,
            "agent_id": "a1",
            "session_id": "chat-1",
            "occurred_at": "2026-11-29T12:00:00+00:00",
            "messages": [{"role": "user", "text": SECRET}, {"role": "assistant", "text": "ok"}],
        },
        ensure_ascii=False,
    ).encode("utf-8")


def received(
    seq: int,
    message_id: str,
    *,
    session: str | None = "u1|a1",
    reason: str = "MaxDeliveryCountExceeded",
    description: str = "Message could not be consumed after 10 delivery attempts.",
    body: bytes | None = None,
    enqueued: datetime | None = None,
) -> ServiceBusReceivedMessage:
    """A dead letter as the SDK hands it out: the broker's reason and description are application
    properties, the sequence number and enqueued time message annotations, the session the group id."""
    enqueued = enqueued or NOW - timedelta(hours=3)
    message = Message(
        data=[body if body is not None else turn_body(message_id)],
        header=Header(delivery_count=10),
        properties=Properties(
            message_id=message_id.encode(),
            content_type=b"application/json",
            subject=b"memory-core.turn.v1",
            group_id=None if session is None else session.encode(),
        ),
        application_properties={
            b"DeadLetterReason": reason.encode(),
            b"DeadLetterErrorDescription": description.encode(),
            b"origin": b"provider",
        },
        message_annotations={
            b"x-opt-sequence-number": seq,
            b"x-opt-enqueued-time": int(enqueued.timestamp() * 1000),
        },
    )
    return ServiceBusReceivedMessage(message, receive_mode=ServiceBusReceiveMode.PEEK_LOCK, receiver=object())


class Recorder:
    """What happened at the SDK boundary, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []


class FakeReceiver:
    """The dead-letter sub-queue: peek browses, receive locks, complete removes, abandon unlocks."""

    def __init__(
        self,
        queue: list[ServiceBusReceivedMessage],
        log: Recorder,
        *,
        complete_error: Exception | None = None,
    ):
        self.queue = queue
        self.log = log
        self.locked: set[int] = set()
        self.complete_error = complete_error

    async def peek_messages(
        self, max_message_count: int = 1, *, sequence_number: int = 0, timeout: float | None = None
    ) -> list[ServiceBusReceivedMessage]:
        self.log.events.append(("peek", (max_message_count, sequence_number)))
        return [m for m in self.queue if m.sequence_number >= sequence_number][:max_message_count]

    async def receive_messages(
        self, max_message_count: int | None = 1, max_wait_time: float | None = None
    ) -> list[ServiceBusReceivedMessage]:
        batch = [m for m in self.queue if m.sequence_number not in self.locked][: max_message_count or 1]
        self.locked.update(m.sequence_number for m in batch)
        self.log.events.append(("receive", [m.sequence_number for m in batch]))
        return batch

    async def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        if self.complete_error is not None:
            raise self.complete_error
        self.log.events.append(("complete", message.sequence_number))
        self.queue.remove(message)
        self.locked.discard(message.sequence_number)

    async def abandon_message(self, message: ServiceBusReceivedMessage) -> None:
        self.log.events.append(("abandon", message.sequence_number))
        self.locked.discard(message.sequence_number)

    async def close(self) -> None:
        self.log.events.append(("close receiver", None))


class FakeSender:
    def __init__(self, log: Recorder, errors: list[Exception]) -> None:
        self.log = log
        self.errors = errors
        self.sent: list[ServiceBusMessage] = []

    async def send_messages(self, message: ServiceBusMessage, *, timeout: float | None = None) -> None:
        if self.errors:
            raise self.errors.pop(0)
        self.log.events.append(("send", message.message_id))
        self.sent.append(message)

    async def close(self) -> None:
        self.log.events.append(("close sender", None))


class FakeClient:
    def __init__(
        self,
        queue: list[ServiceBusReceivedMessage],
        *,
        send_errors: list[Exception] | None = None,
        complete_error: Exception | None = None,
    ) -> None:
        self.log = Recorder()
        self.queue = queue
        self.receivers: list[tuple[str, dict[str, Any]]] = []
        self.senders: list[str] = []
        self.sender = FakeSender(self.log, list(send_errors or []))
        self.complete_error = complete_error
        self.closed = False

    def get_queue_receiver(self, queue_name: str, **kwargs: Any) -> FakeReceiver:
        self.receivers.append((queue_name, kwargs))
        return FakeReceiver(self.queue, self.log, complete_error=self.complete_error)

    def get_queue_sender(self, queue_name: str) -> FakeSender:
        self.senders.append(queue_name)
        return self.sender

    async def close(self) -> None:
        self.closed = True


def dead_letters(n: int = 3) -> list[ServiceBusReceivedMessage]:
    return [received(40 + i, f"turn:{i}") for i in range(n)]


# ------------------------------------------------------------------------------------------------
# The adapter against the SDK's seam
# ------------------------------------------------------------------------------------------------


def test_peek_browses_the_dead_letter_sub_queue_page_by_page_and_takes_nothing() -> None:
    client = FakeClient(dead_letters(5))
    adapter = ServiceBusDeadLetterQueue(
        "ns.servicebus.windows.net", "memory-turns", client=client, receive_batch=2
    )
    letters = asyncio.run(adapter.peek(limit=4))
    assert [d.sequence_number for d in letters] == [40, 41, 42, 43]
    ((queue_name, kwargs),) = client.receivers
    assert queue_name == "memory-turns" and kwargs["sub_queue"] == ServiceBusSubQueue.DEAD_LETTER
    # from sequence number 1 (0 would mean "after the last received"), then after each page's last one
    assert [e[1] for e in client.log.events if e[0] == "peek"] == [(2, 1), (2, 42)]
    assert not any(e[0] in {"receive", "complete", "abandon", "send"} for e in client.log.events)
    assert client.log.events[-1] == ("close receiver", None)
    first = letters[0]
    assert first == QueueDeadLetter(
        sequence_number=40,
        message_id="turn:0",
        session_id="u1|a1",
        subject="memory-core.turn.v1",
        reason="MaxDeliveryCountExceeded",
        description="Message could not be consumed after 10 delivery attempts.",
        delivery_count=10,
        enqueued_at=first.enqueued_at,
        body=turn_body("turn:0"),
    )
    assert first.enqueued_at is not None and abs(first.enqueued_at - (NOW - timedelta(hours=3))) < timedelta(
        seconds=1
    )
    asyncio.run(adapter.close())
    assert not client.closed  # handed in


def test_replay_sends_the_copy_to_the_main_queue_then_completes_the_dead_letter() -> None:
    client = FakeClient(dead_letters(3))
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client)
    assert asyncio.run(adapter.replay(41)) is True
    events = [e for e in client.log.events if e[0] in {"receive", "send", "complete", "abandon"}]
    assert events == [
        ("receive", [40]),
        ("receive", [41, 42]),  # the batches grow
        ("send", "turn:1"),
        ("complete", 41),
        ("abandon", 40),
        ("abandon", 42),
    ]
    assert [m.sequence_number for m in client.queue] == [40, 42]  # the others stay, unlocked
    assert client.senders == ["memory-turns"]  # the main queue, not the sub-queue
    ((_, kwargs),) = client.receivers
    assert (
        kwargs["sub_queue"] == ServiceBusSubQueue.DEAD_LETTER
        and kwargs["receive_mode"] == ServiceBusReceiveMode.PEEK_LOCK
    )
    (sent,) = client.sender.sent
    assert sent.message_id == "turn:1" and sent.session_id == "u1|a1"
    assert sent.subject == "memory-core.turn.v1" and sent.content_type == "application/json"
    assert b"".join(sent.body) == turn_body("turn:1")
    # the publisher's properties go along; the broker's dead-letter properties do not
    assert {k.decode() if isinstance(k, bytes) else k for k in sent.application_properties or {}} == {
        "origin"
    }


def test_replaying_in_order_locks_nothing_but_the_dead_letter_replayed() -> None:
    client = FakeClient(dead_letters(3))
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client)
    for seq in (40, 41, 42):
        assert asyncio.run(adapter.replay(seq)) is True
    assert [e for e in client.log.events if e[0] in {"receive", "abandon"}] == [
        ("receive", [40]),
        ("receive", [41]),
        ("receive", [42]),
    ]
    assert [m.message_id for m in client.sender.sent] == ["turn:0", "turn:1", "turn:2"] and client.queue == []


def test_a_failed_send_keeps_the_dead_letter() -> None:
    client = FakeClient(dead_letters(2), send_errors=[ServiceBusConnectionError(message="link detached")])
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client)
    with pytest.raises(TransientError, match="kept"):
        asyncio.run(adapter.replay(40))
    assert [m.sequence_number for m in client.queue] == [40, 41]
    assert ("complete", 40) not in client.log.events and ("abandon", 40) in client.log.events
    assert ("close sender", None) in client.log.events and client.log.events[-1] == ("close receiver", None)


def test_a_link_that_fails_to_close_does_not_undo_a_replay() -> None:
    client = FakeClient(dead_letters(1))

    async def broken_close() -> None:
        raise ServiceBusConnectionError(message="connection reset on detach")

    client.sender.close = broken_close  # type: ignore[method-assign]
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client)
    assert asyncio.run(adapter.replay(40)) is True
    assert ("complete", 40) in client.log.events and client.queue == []


def test_a_failed_completion_after_the_send_says_it_was_sent_and_is_kept() -> None:
    client = FakeClient(dead_letters(1), complete_error=SessionLockLostError(message="lock lost"))
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client)
    with pytest.raises(
        MemoryCoreError, match="sent to the turns queue, but completing the dead letter failed"
    ) as raised:
        asyncio.run(adapter.replay(40))
    assert "replaying it again is harmless" in str(raised.value)
    assert [m.message_id for m in client.sender.sent] == ["turn:0"] and len(client.queue) == 1


def test_replay_of_a_number_no_dead_letter_has_returns_false_and_takes_nothing() -> None:
    client = FakeClient(dead_letters(3))
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client, receive_batch=2)
    assert asyncio.run(adapter.replay(99)) is False
    assert client.sender.sent == [] and len(client.queue) == 3
    assert sorted(e[1] for e in client.log.events if e[0] == "abandon") == [40, 41, 42]


def test_replay_looks_no_further_than_max_scan() -> None:
    client = FakeClient(dead_letters(5))
    adapter = ServiceBusDeadLetterQueue("ns", "memory-turns", client=client, receive_batch=2, max_scan=3)
    with pytest.raises(PermanentError, match="not among the first 3"):
        asyncio.run(adapter.replay(44))
    assert client.sender.sent == [] and len(client.queue) == 5
    assert [e[1] for e in client.log.events if e[0] == "receive"] == [[40], [41, 42]]


def test_it_is_built_on_the_namespace_with_default_azure_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.identity.aio
    import azure.servicebus.aio

    credentials: list[Any] = []
    clients: list[tuple[str, Any]] = []

    class Credential:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs
            self.closed = False
            credentials.append(self)

        async def close(self) -> None:
            self.closed = True

    def client_factory(namespace: str, credential: Any, **kwargs: Any) -> FakeClient:
        clients.append((namespace, credential))
        client = FakeClient(dead_letters(1))
        return client

    monkeypatch.setattr(azure.identity.aio, "DefaultAzureCredential", Credential)
    monkeypatch.setattr(azure.servicebus.aio, "ServiceBusClient", client_factory)
    adapter = ServiceBusDeadLetterQueue.create("ns.servicebus.windows.net", "turns-x", client_id="cid")
    assert clients == []  # built on first use
    assert [d.message_id for d in asyncio.run(adapter.peek(limit=10))] == ["turn:0"]
    (credential,) = credentials
    assert credential.kwargs == {"managed_identity_client_id": "cid"}
    assert clients == [("ns.servicebus.windows.net", credential)]
    asyncio.run(adapter.close())
    assert credential.closed


# ------------------------------------------------------------------------------------------------
# The command line, on a fake of the port
# ------------------------------------------------------------------------------------------------


class FakeDeadLetterQueue(DeadLetterQueue):
    def __init__(self, letters: list[QueueDeadLetter], *, fail: set[int] | None = None) -> None:
        self.letters = letters
        self.fail = fail or set()
        self.replayed: list[int] = []
        self.closed = False

    async def peek(self, *, limit: int) -> list[QueueDeadLetter]:
        return self.letters[:limit]

    async def replay(self, sequence_number: int) -> bool:
        if sequence_number in self.fail:
            raise TransientError(
                "replay dead letter failed: ServiceBusServerBusyError; the dead letter is kept"
            )
        found = [d for d in self.letters if d.sequence_number == sequence_number]
        if not found:
            return False
        self.letters.remove(found[0])
        self.replayed.append(sequence_number)
        return True

    async def close(self) -> None:
        self.closed = True


def letter(
    seq: int,
    message_id: str,
    *,
    reason: str = "MaxDeliveryCountExceeded",
    age: timedelta = timedelta(hours=3),
) -> QueueDeadLetter:
    return QueueDeadLetter(
        sequence_number=seq,
        message_id=message_id,
        session_id="u1|a1",
        subject="memory-core.turn.v1",
        reason=reason,
        description="Message could not be consumed after 10 delivery attempts. " + "x" * 200,
        delivery_count=10,
        enqueued_at=NOW - age,
        body=turn_body(message_id),
    )


@pytest.fixture
def fake_queue(monkeypatch: pytest.MonkeyPatch) -> FakeDeadLetterQueue:
    queue = FakeDeadLetterQueue(
        [
            letter(7, "turn:a"),
            letter(8, "turn:b", reason="TTLExpiredException"),
            letter(9, "turn:c", age=timedelta(minutes=10)),  # inside the duplicate detection window
        ]
    )
    built: list[tuple[str, str, str | None]] = []

    def create(namespace: str, queue_name: str, *, client_id: str | None = None) -> FakeDeadLetterQueue:
        built.append((namespace, queue_name, client_id))
        return queue

    monkeypatch.setattr(service_bus_deadletters.ServiceBusDeadLetterQueue, "create", staticmethod(create))
    monkeypatch.setenv("ServiceBusConnection__fullyQualifiedNamespace", "ns.servicebus.windows.net")
    monkeypatch.setenv("MEMORY_TURNS_QUEUE", "turns-x")
    monkeypatch.setattr(FakeDeadLetterQueue, "built", built, raising=False)
    return queue


def run_cli(*argv: str) -> tuple[int, str]:
    out = StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_list_shows_sequence_numbers_reasons_and_no_body(fake_queue: FakeDeadLetterQueue) -> None:
    code, text = run_cli("deadletters", "list", "--source", "servicebus")
    assert code == 0, text
    assert text.startswith("3 dead letter(s) in servicebus\n")
    assert "7  turn:a  session=u1|a1  deliveries=10  enqueued=" in text  # Service Bus has no dead-letter time
    assert "MaxDeliveryCountExceeded: Message could not be consumed" in text and "x" * 120 not in text
    assert SECRET not in text
    assert fake_queue.built == [("ns.servicebus.windows.net", "turns-x", None)]  # type: ignore[attr-defined]
    assert fake_queue.closed
    code, text = run_cli(
        "deadletters", "list", "--source", "servicebus", "--reason", "ttlexpiredexception", "--json"
    )
    assert code == 0
    (only,) = json.loads(text)["dead_letters"]
    assert only["id"] == "8" and only["message_id"] == "turn:b" and only["replayable"]
    assert "summary" not in only and SECRET not in text


def test_show_prints_one_dead_letter_with_its_scope_but_not_what_was_said(
    fake_queue: FakeDeadLetterQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run_cli("deadletters", "show", "7", "--source", "servicebus")
    assert code == 0, text
    lines = text.splitlines()
    assert lines[0] == "dead letter in servicebus"
    assert "reason:      MaxDeliveryCountExceeded" in lines
    assert "deliveries:  10" in lines
    assert any(
        line.startswith("description: Message could not be consumed") and "x" * 200 in line for line in lines
    )
    assert any(line.startswith("enqueued:    ") and line != "enqueued:    -" for line in lines)
    for expected in ("user_id:     u1", "agent_id:    a1", "turn_id:     turn:a", "messages:    2"):
        assert f"  {expected}" in lines
    assert SECRET not in text and "assistant" not in text
    # by message id too, and as JSON
    code, text = run_cli("--json", "deadletters", "show", "turn:b", "--source", "servicebus")
    assert code == 0
    shown = json.loads(text)["dead_letter"]
    assert shown["id"] == "8" and shown["reason"] == "TTLExpiredException"
    assert shown["summary"] == {
        "schema": "memory-core.turn.v1",
        "user_id": "u1",
        "agent_id": "a1",
        "session_id": "chat-1",
        "turn_id": "turn:b",
        "occurred_at": "2026-11-29T12:00:00+00:00",
        "messages": 2,
    }
    assert SECRET not in text
    code, text = run_cli("deadletters", "show", "99", "--source", "servicebus")
    assert code == 3 and "no dead letter in servicebus has id '99'" in capsys.readouterr().err


def test_replay_skips_inside_the_duplicate_window_and_replays_the_rest(
    fake_queue: FakeDeadLetterQueue,
) -> None:
    code, text = run_cli("--json", "deadletters", "replay", "--all", "--source", "servicebus")
    assert code == 1  # one was skipped
    result = json.loads(text)
    assert (result["replayed"], result["skipped"]) == (2, 1)
    assert fake_queue.replayed == [7, 8]
    skipped = next(r for r in result["results"] if r["status"] == "skipped")
    assert skipped["id"] == "9" and "duplicate" in skipped["detail"]
    # Once the window is out (here: set to nothing), the last one goes too.
    code, text = run_cli(
        "deadletters", "replay", "turn:c", "--source", "servicebus", "--duplicate-window", "0"
    )
    assert code == 0, text
    assert "replayed  turn:c: sent to the turns queue; the dead letter is completed" in text
    assert fake_queue.replayed == [7, 8, 9] and fake_queue.letters == []


def test_a_failed_replay_is_reported_and_the_rest_go_on(fake_queue: FakeDeadLetterQueue) -> None:
    fake_queue.fail = {7}
    code, text = run_cli("deadletters", "replay", "7", "8", "404", "--source", "servicebus")
    assert code == 1
    assert (
        "failed    7: replay dead letter failed: ServiceBusServerBusyError; the dead letter is kept" in text
    )
    assert "replayed  8:" in text and "not-found 404:" in text
    assert fake_queue.replayed == [8]


def test_a_dead_letter_gone_since_it_was_listed_is_a_failure_not_a_success(
    fake_queue: FakeDeadLetterQueue,
) -> None:
    original = fake_queue.replay

    async def gone(sequence_number: int) -> bool:
        return False

    fake_queue.replay = gone  # type: ignore[method-assign]
    code, text = run_cli("deadletters", "replay", "7", "--source", "servicebus")
    fake_queue.replay = original  # type: ignore[method-assign]
    assert code == 1 and "not in the dead-letter queue any more" in text


def test_without_the_namespace_the_error_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ServiceBusConnection__fullyQualifiedNamespace", raising=False)
    code, _ = run_cli("deadletters", "list", "--source", "servicebus")
    assert code == 1 and "ServiceBusConnection__fullyQualifiedNamespace" in capsys.readouterr().err
