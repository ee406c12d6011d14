"""Dead letters: list and replay the messages the pipeline could not process (``memory-core deadletters``).

Two places keep them, one per deployment:

- ``local``: the embedded durable queue (``<store file>.queue``) dead-letters a message itself, with
  the reason, after a permanent failure or too many deliveries. Replay moves it back to the end of its
  session with the delivery count reset (:meth:`~memory_core.adapters.sqlite.queue.SQLiteQueue.requeue`,
  the same as ``memory-core queue requeue``).
- ``azure``: the Functions host cannot dead-letter a Service Bus message itself, so it sets a poison
  message aside in the history table's ``~deadletter`` partition and completes it (``function_app.py``).
  Replay sends the recorded body again to the turns queue with its original message id and session id,
  and removes the record only after the send succeeded, and only if the record has not changed since it
  was read (a message set aside again meanwhile keeps its new record).

Two things make an Azure record not replayable, and the command says which:

- Its body is not the message any more: cut to fit a table entity, or not valid UTF-8 (see
  :meth:`~memory_core.adapters.azure.table_history.AzureTableHistoryStore.record_dead_letter`).
- Service Bus duplicate detection: the original message id stays in the queue's detection history for
  the window (``duplicateDetectionHistoryTimeWindow``, one hour in ``infra/app/servicebus.bicep``) after
  it was enqueued. A resend inside the window is accepted and then dropped silently, and removing the
  record would lose the turn; such a letter is skipped with the time it becomes replayable.

The use cases are plain functions over :class:`DeadLetterSource`, a small port with one adapter per
place; :func:`open_dead_letters` builds the one the settings (or ``--source``) name.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

from memory_core.errors import ConfigurationError, InputError, MemoryCoreError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.config import Settings

__all__ = [
    "DEFAULT_DUPLICATE_WINDOW",
    "SOURCES",
    "AzureDeadLetters",
    "DeadLetterInfo",
    "DeadLetterSource",
    "LocalDeadLetters",
    "ReplayResult",
    "add_arguments",
    "format_letter",
    "list_dead_letters",
    "open_dead_letters",
    "replay_dead_letters",
    "run_command",
    "source_name",
]

logger = logging.getLogger(__name__)

#: Where dead letters can come from.
SOURCES = ("local", "azure")
#: The turns queue's duplicate detection window (``duplicateDetectionHistoryTimeWindow: 'PT1H'``).
DEFAULT_DUPLICATE_WINDOW = timedelta(hours=1)

ReplayStatus = Literal["replayed", "skipped", "failed", "not-found"]


@dataclass(frozen=True, slots=True)
class DeadLetterInfo:
    """One dead letter, the same shape from either place.

    Attributes:
        key: What ``replay`` takes (local: the queue's ``seq``; azure: the message id). The message
            id is accepted too.
        message_id: The queue message id (derived from scope and turn or recall id).
        session_id: The queue session (the scope), if known.
        reason: Short reason (an error class name, ``MaxDeliveryCountExceeded``, ...).
        description: What was wrong.
        delivery_count: Deliveries before it was set aside, if known.
        recorded_at: When it was dead-lettered or set aside.
        enqueued_at: When the message was (last) enqueued.
        size: The message body's length in bytes.
        not_replayable: Why it can never be replayed as it is (``None``: it can).
    """

    key: str
    message_id: str
    session_id: str | None
    reason: str
    description: str
    delivery_count: int | None
    recorded_at: datetime | None
    enqueued_at: datetime | None
    size: int | None
    not_replayable: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        return {
            "id": self.key,
            "message_id": self.message_id,
            "session_id": self.session_id,
            "reason": self.reason,
            "description": self.description,
            "delivery_count": self.delivery_count,
            "recorded_at": None if self.recorded_at is None else self.recorded_at.isoformat(),
            "enqueued_at": None if self.enqueued_at is None else self.enqueued_at.isoformat(),
            "size": self.size,
            "replayable": self.not_replayable is None,
            "not_replayable": self.not_replayable,
        }


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What happened to one requested dead letter: ``replayed``, ``skipped`` (with why and when it
    can be), ``failed`` (kept; the error) or ``not-found``."""

    id: str
    status: ReplayStatus
    detail: str
    letter: DeadLetterInfo | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "message_id": None if self.letter is None else self.letter.message_id,
            "status": self.status,
            "detail": self.detail,
        }


class DeadLetterSource(Protocol):
    """Where one deployment keeps its dead letters."""

    name: str

    async def letters(self) -> list[DeadLetterInfo]:
        """Every dead letter, oldest first."""
        ...

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        """Why ``letter`` cannot be replayed now (``None``: it can)."""
        ...

    async def replay(self, letter: DeadLetterInfo) -> str:
        """Send ``letter`` again; returns what was done. Raises when it was not sent (it is kept)."""
        ...

    async def close(self) -> None: ...


# -- use cases ------------------------------------------------------------------------------------
def _matches(letter: DeadLetterInfo, reason: str | None) -> bool:
    return reason is None or letter.reason.casefold() == reason.casefold()


async def list_dead_letters(source: DeadLetterSource, *, reason: str | None = None) -> list[DeadLetterInfo]:
    """The dead letters of ``source``, oldest first; only those with ``reason`` (any case) if given."""
    return [letter for letter in await source.letters() if _matches(letter, reason)]


async def replay_dead_letters(
    source: DeadLetterSource,
    ids: Sequence[str] = (),
    *,
    every: bool = False,
    reason: str | None = None,
    now: datetime | None = None,
) -> list[ReplayResult]:
    """Send dead letters again, one at a time, oldest first; one failure does not stop the rest.

    Args:
        source: Where the dead letters are.
        ids: Which (a letter's ``key`` or message id); empty with ``every``.
        every: Every dead letter (with ``reason``: every one with that reason).
        reason: Only dead letters with this reason (case-insensitive); a named one with another
            reason is skipped.
        now: The time the duplicate detection window is measured against (default: now).

    Raises:
        PermanentError: Neither ``ids`` nor ``every``, or both.
    """
    if bool(ids) == every:
        raise InputError("name the dead letters to replay (their ids) or --all, not both")
    now = now or datetime.now(UTC)
    letters = await source.letters()
    chosen: list[tuple[str, DeadLetterInfo]] = []
    results: list[ReplayResult] = []
    if every:
        chosen = [(letter.key, letter) for letter in letters if _matches(letter, reason)]
    else:
        by_id: dict[str, DeadLetterInfo] = {}
        for letter in reversed(letters):  # the oldest wins when a message id was dead-lettered twice
            by_id[letter.message_id] = letter
        by_id.update({letter.key: letter for letter in letters})
        seen: set[str] = set()
        for wanted in dict.fromkeys(ids):
            found = by_id.get(wanted)
            if found is None:
                results.append(
                    ReplayResult(wanted, "not-found", f"no dead letter in {source.name} has id {wanted!r}")
                )
            elif found.key in seen:
                continue
            elif not _matches(found, reason):
                results.append(
                    ReplayResult(wanted, "skipped", f"its reason is {found.reason}, not {reason}", found)
                )
            else:
                seen.add(found.key)
                chosen.append((wanted, found))
    for wanted, letter in chosen:
        why = letter.not_replayable or source.blocked(letter, now)
        if why is not None:
            results.append(ReplayResult(wanted, "skipped", why, letter))
            continue
        try:
            detail = await source.replay(letter)
        except MemoryCoreError as exc:
            logger.warning("replaying dead letter %s failed: %s", letter.message_id, exc)
            detail = str(exc) if "kept" in str(exc) else f"{exc}; the dead letter is kept"
            results.append(ReplayResult(wanted, "failed", detail, letter))
            continue
        logger.info("dead letter %s replayed: %s", letter.message_id, detail)
        results.append(ReplayResult(wanted, "replayed", detail, letter))
    return results


# -- presentation (shared by the command line and its JSON) ---------------------------------------
def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def format_letter(letter: DeadLetterInfo, *, width: int = 100) -> str:
    """Two lines: ids, session, deliveries, time; then the reason and the description, shortened."""
    ident = letter.message_id if letter.key == letter.message_id else f"{letter.key}  {letter.message_id}"
    deliveries = "-" if letter.delivery_count is None or letter.delivery_count < 0 else letter.delivery_count
    head = (
        f"{ident}  session={letter.session_id or '-'}  deliveries={deliveries}  "
        f"recorded={_when(letter.recorded_at)}  size={'-' if letter.size is None else letter.size}"
    )
    tail = f"    {letter.reason}: {_short(letter.description, width)}"
    if letter.not_replayable:
        tail += f"\n    not replayable: {letter.not_replayable}"
    return f"{head}\n{tail}"


# -- the embedded queue ---------------------------------------------------------------------------
class LocalQueue(Protocol):
    """What :class:`LocalDeadLetters` needs of :class:`~memory_core.adapters.sqlite.queue.SQLiteQueue`."""

    def dead_letters(self, *, limit: int = 100, after_seq: int = 0) -> list[Any]: ...

    def requeue(self, key: str | int) -> Any: ...

    def close_sync(self) -> None: ...


def _epoch(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(float(value), UTC)


class LocalDeadLetters:
    """The embedded queue's dead letters (``<store file>.queue``).

    Args:
        queue: The queue (closed with this source).
        page: Dead letters read per query.
    """

    name = "local"

    def __init__(self, queue: LocalQueue, *, page: int = 500) -> None:
        self._queue = queue
        self._page = page

    async def letters(self) -> list[DeadLetterInfo]:
        out: list[DeadLetterInfo] = []
        after = 0
        while True:
            batch = await asyncio.to_thread(self._queue.dead_letters, limit=self._page, after_seq=after)
            out.extend(
                DeadLetterInfo(
                    key=str(m.seq),
                    message_id=m.message_id,
                    session_id=m.session_id,
                    reason=m.dead_letter_reason or "",
                    description=m.dead_letter_description or "",
                    delivery_count=m.delivery_count,
                    recorded_at=_epoch(m.dead_lettered_at),
                    enqueued_at=_epoch(m.enqueued_at),
                    size=len(m.body),
                )
                for m in batch
            )
            if len(batch) < self._page:
                return out
            after = batch[-1].seq

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        return None  # the embedded queue has no duplicate detection on requeue

    async def replay(self, letter: DeadLetterInfo) -> str:
        message = await asyncio.to_thread(self._queue.requeue, int(letter.key))
        return f"requeued as seq {message.seq} at the end of session {message.session_id}"

    async def close(self) -> None:
        self._queue.close_sync()


# -- the Azure history table + Service Bus --------------------------------------------------------
class DeadLetterTable(Protocol):
    """What :class:`AzureDeadLetters` needs of the history table
    (:class:`~memory_core.adapters.azure.table_history.AzureTableHistoryStore`)."""

    async def dead_letters(self) -> Sequence[Mapping[str, Any]]: ...

    async def delete_dead_letter(self, message_id: str, *, etag: str | None = None) -> bool: ...

    async def close(self) -> None: ...


class MessageSender(Protocol):
    """What :class:`AzureDeadLetters` needs of the turns queue
    (:class:`~memory_core.adapters.azure.service_bus.ServiceBusTurnPublisher`)."""

    async def republish(
        self, body: bytes, *, message_id: str, session_id: str, subject: str | None = None
    ) -> None: ...

    async def close(self) -> None: ...


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _subject(body: str) -> str | None:
    """The schema of a pipeline message (what the publisher puts in ``subject``), if the body has one."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    schema = value.get("schema") if isinstance(value, dict) else None
    return schema if isinstance(schema, str) else None


class AzureDeadLetters:
    """Poison messages the Functions host set aside in the history table.

    Args:
        table: The history table (closed with this source).
        sender: Builds the turns queue's sender on the first replay (closed with this source); listing
            needs no Service Bus settings.
        duplicate_window: The turns queue's duplicate detection window.
    """

    name = "azure"

    def __init__(
        self,
        table: DeadLetterTable,
        sender: Callable[[], MessageSender | Awaitable[MessageSender]],
        *,
        duplicate_window: timedelta = DEFAULT_DUPLICATE_WINDOW,
    ) -> None:
        self.table = table
        self.sender = sender
        self.duplicate_window = duplicate_window
        self._records: dict[str, Mapping[str, Any]] = {}
        self._sender: MessageSender | None = None

    async def letters(self) -> list[DeadLetterInfo]:
        out: list[DeadLetterInfo] = []
        self._records.clear()
        for record in await self.table.dead_letters():
            message_id = str(record["message_id"])
            self._records[message_id] = record
            length = record.get("body_bytes")
            size = None if length is None or int(length) < 0 else int(length)
            not_replayable = None
            if not record.get("body_complete", True):
                length = "?" if size is None else size
                not_replayable = (
                    f"its body ({length} bytes) was cut or was not UTF-8 when it was set aside, "
                    "so the record is not the message any more"
                )
            elif not record.get("session_id"):
                not_replayable = "it has no session id, which the turns queue requires"
            out.append(
                DeadLetterInfo(
                    key=message_id,
                    message_id=message_id,
                    session_id=record.get("session_id") or None,
                    reason=str(record.get("reason") or ""),
                    description=str(record.get("description") or ""),
                    delivery_count=record.get("delivery_count"),
                    recorded_at=_parse_time(record.get("recorded_at")),
                    enqueued_at=_parse_time(record.get("enqueued_time")),
                    size=size,
                    not_replayable=not_replayable,
                )
            )
        out.sort(
            key=lambda letter: (letter.recorded_at or datetime.min.replace(tzinfo=UTC), letter.message_id)
        )
        return out

    def blocked(self, letter: DeadLetterInfo, now: datetime) -> str | None:
        since = letter.enqueued_at or letter.recorded_at
        if since is None or self.duplicate_window <= timedelta(0):
            return None
        until = since + self.duplicate_window
        if now < until:
            return (
                f"Service Bus would drop it as a duplicate of the original message until {_when(until)} "
                f"(the queue's duplicate detection window, {self.duplicate_window}); replay it after that"
            )
        return None

    async def _get_sender(self) -> MessageSender:
        if self._sender is None:
            built = self.sender()
            self._sender = await built if isinstance(built, Awaitable) else built
        return self._sender

    async def replay(self, letter: DeadLetterInfo) -> str:
        record = self._records[letter.message_id]
        body = str(record.get("body") or "")
        sender = await self._get_sender()
        await sender.republish(
            body.encode("utf-8"),
            message_id=letter.message_id,
            session_id=letter.session_id or "",
            subject=_subject(body),
        )
        try:
            removed = await self.table.delete_dead_letter(letter.message_id, etag=record.get("etag"))
        except MemoryCoreError as exc:
            raise MemoryCoreError(
                f"sent to the turns queue, but removing its record failed ({exc}); the record is kept and "
                "replaying it again is harmless (the pipeline skips a turn it has processed)"
            ) from exc
        if not removed:
            return "sent to the turns queue; it was set aside again meanwhile, and that new record is kept"
        return "sent to the turns queue; its record is removed"

    async def close(self) -> None:
        sender, self._sender = self._sender, None
        try:
            if sender is not None:
                await sender.close()
        finally:
            await self.table.close()


# -- construction ---------------------------------------------------------------------------------
def source_name(settings: Settings, source: str | None = None) -> str:
    """``source`` if given, else ``azure`` for an Azure deployment's settings (``MEMORY_STORE=azure_search``)
    and ``local`` otherwise, as the other commands choose their store."""
    if source is not None:
        if source not in SOURCES:
            raise InputError(f"--source must be one of {', '.join(SOURCES)}, not {source!r}")
        return source
    return "azure" if settings.store == "azure_search" else "local"


def open_dead_letters(
    settings: Settings, source: str | None = None, *, duplicate_window: timedelta = DEFAULT_DUPLICATE_WINDOW
) -> DeadLetterSource:
    """The dead letters the settings (or ``source``) name.

    ``local``: the embedded queue of ``MEMORY_SQLITE_PATH`` (``--db``). ``azure``: the history table
    at ``MEMORY_HISTORY_TABLE_ENDPOINT``; a replay also needs
    ``ServiceBusConnection__fullyQualifiedNamespace`` and ``MEMORY_TURNS_QUEUE``. Both use ``DefaultAzureCredential`` (your sign-in, or ``AZURE_CLIENT_ID``).
    """
    from memory_core import bootstrap

    name = source_name(settings, source)
    if name == "local":
        return LocalDeadLetters(bootstrap.build_local_queue(settings))
    if not settings.history_table_endpoint:
        raise ConfigurationError(
            "the Azure dead letters are in the history table: set MEMORY_HISTORY_TABLE_ENDPOINT "
            "(azd env get-value MEMORY_HISTORY_TABLE_ENDPOINT)"
        )
    from memory_core.adapters.azure.table_history import AzureTableHistoryStore

    # As bootstrap.build_history builds it, also when the settings select the embedded store
    # (``--source azure`` from a developer's machine).
    table = AzureTableHistoryStore.create(
        settings.history_table_endpoint, client_id=settings.azure_client_id or None
    )
    return AzureDeadLetters(
        table, lambda: bootstrap.build_publisher(settings), duplicate_window=duplicate_window
    )


# -- the command line (``memory-core deadletters``) -----------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``deadletters list|replay`` arguments (``memory_core.cli.maintenance`` adds the parser)."""

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--source",
            choices=SOURCES,
            help="local: the embedded queue (<db>.queue); azure: the history table the Functions app sets "
            "poison messages aside in (default: azure when MEMORY_STORE=azure_search, else local)",
        )
        p.add_argument("--reason", help="only dead letters with this reason (for example ValidationError)")
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")

    actions = parser.add_subparsers(dest="deadletters_command", required=True, metavar="ACTION")
    common(actions.add_parser("list", help="dead letters, oldest first, with their reasons"))
    replay = actions.add_parser(
        "replay", help="send dead letters again (the Azure record is removed once sent)"
    )
    replay.add_argument(
        "ids", nargs="*", metavar="ID", help="which (local: seq or message id; azure: message id)"
    )
    replay.add_argument(
        "--all", dest="every", action="store_true", help="every dead letter (with --reason: of it)"
    )
    replay.add_argument(
        "--duplicate-window",
        type=float,
        default=DEFAULT_DUPLICATE_WINDOW.total_seconds() / 60,
        metavar="MINUTES",
        help="azure: the turns queue's duplicate detection window; a message enqueued less than this ago is "
        "skipped, since Service Bus would drop the resend silently (default 60, as the Bicep sets it)",
    )
    common(replay)


async def run_command(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """``memory-core deadletters list|replay``: 0 when everything asked for was done, 1 otherwise."""
    window = timedelta(
        minutes=getattr(args, "duplicate_window", DEFAULT_DUPLICATE_WINDOW.total_seconds() / 60)
    )
    source = open_dead_letters(settings, args.source, duplicate_window=window)
    try:
        if args.deadletters_command == "list":
            letters = await list_dead_letters(source, reason=args.reason)
            if args.json:
                out.write(
                    json.dumps(
                        {"source": source.name, "dead_letters": [d.as_dict() for d in letters]},
                        ensure_ascii=False,
                        indent=2,
                    )
                    + "\n"
                )
                return 0
            out.write(f"{len(letters)} dead letter(s) in {source.name}\n")
            for letter in letters:
                out.write(format_letter(letter) + "\n")
            return 0
        results = await replay_dead_letters(source, args.ids, every=args.every, reason=args.reason)
    finally:
        await source.close()
    counts = {
        status: sum(1 for r in results if r.status == status)
        for status in ("replayed", "skipped", "failed", "not-found")
    }
    if args.json:
        out.write(
            json.dumps(
                {"source": source.name, **counts, "results": [r.as_dict() for r in results]},
                ensure_ascii=False,
                indent=2,
            )
            + "\n"
        )
    else:
        for result in results:
            out.write(f"{result.status:<9} {result.id}: {result.detail}\n")
        out.write(", ".join(f"{n} {status}" for status, n in counts.items()) + "\n")
    return 0 if counts["replayed"] == len(results) else 1
