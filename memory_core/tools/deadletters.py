"""Dead letters: list and replay the messages the pipeline could not process (``memory-core deadletters``).

The use cases are plain functions over a :class:`~memory_core.tools.deadletter_sources.DeadLetterSource`:
the embedded queue's, the Azure history table's, or the turns queue's own Service Bus dead-letter
sub-queue's; :func:`open_dead_letters` builds the one the settings (or ``--source``) name.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TextIO, get_args

from memory_core.domain.log_ids import redact
from memory_core.errors import ConfigurationError, InputError, MemoryCoreError, NotFoundError
from memory_core.tools.deadletter_sources import (
    DEFAULT_DUPLICATE_WINDOW,
    AzureDeadLetters,
    DeadLetterInfo,
    DeadLetterSource,
    LocalDeadLetters,
    ServiceBusDeadLetters,
    format_time,
)

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.config import Settings

__all__ = [
    "SOURCES",
    "ReplayResult",
    "add_arguments",
    "format_details",
    "format_letter",
    "list_dead_letters",
    "open_dead_letters",
    "replay_dead_letters",
    "run_command",
    "show_dead_letter",
    "source_name",
]

logger = logging.getLogger(__name__)

#: Where dead letters can come from.
SOURCES = ("local", "azure", "servicebus")

ReplayStatus = Literal["replayed", "skipped", "failed", "not-found"]


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


# -- use cases ------------------------------------------------------------------------------------
def _matches(letter: DeadLetterInfo, reason: str | None) -> bool:
    return reason is None or letter.reason.casefold() == reason.casefold()


async def list_dead_letters(source: DeadLetterSource, *, reason: str | None = None) -> list[DeadLetterInfo]:
    """The dead letters of ``source``, oldest first; only those with ``reason`` (any case) if given."""
    return [letter for letter in await source.letters() if _matches(letter, reason)]


async def show_dead_letter(source: DeadLetterSource, wanted: str) -> DeadLetterInfo:
    """The dead letter ``wanted`` names (its ``key``, else its message id: the oldest with it).

    Raises:
        NotFoundError: None has that id.
    """
    letters = await source.letters()
    found = next((d for d in letters if d.key == wanted), None) or next(
        (d for d in letters if d.message_id == wanted), None
    )
    if found is None:
        raise NotFoundError(f"no dead letter in {source.name} has id {wanted!r}")
    return found


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
    if every:
        chosen = [(letter.key, letter) for letter in letters if _matches(letter, reason)]
        results: list[ReplayResult] = []
    else:
        chosen, results = _named(letters, ids, reason, source.name)
    for wanted, letter in chosen:
        results.append(await _replay(source, wanted, letter, now))
    return results


def _named(
    letters: Sequence[DeadLetterInfo], ids: Sequence[str], reason: str | None, source: str
) -> tuple[list[tuple[str, DeadLetterInfo]], list[ReplayResult]]:
    """The dead letters ``ids`` name (each once, with the id it was asked by), and a result for each id
    that names none or one with another reason."""
    by_id: dict[str, DeadLetterInfo] = {}
    for letter in reversed(letters):  # the oldest wins when a message id was dead-lettered twice
        by_id[letter.message_id] = letter
    by_id.update({letter.key: letter for letter in letters})
    chosen: list[tuple[str, DeadLetterInfo]] = []
    results: list[ReplayResult] = []
    seen: set[str] = set()
    for wanted in dict.fromkeys(ids):
        found = by_id.get(wanted)
        if found is None:
            results.append(ReplayResult(wanted, "not-found", f"no dead letter in {source} has id {wanted!r}"))
        elif found.key in seen:
            continue
        elif not _matches(found, reason):
            why = f"its reason is {found.reason}, not {reason}"
            results.append(ReplayResult(wanted, "skipped", why, found))
        else:
            seen.add(found.key)
            chosen.append((wanted, found))
    return chosen, results


async def _replay(
    source: DeadLetterSource, wanted: str, letter: DeadLetterInfo, now: datetime
) -> ReplayResult:
    """Send one dead letter again, unless it cannot be replayed (now)."""
    why = letter.not_replayable or source.blocked(letter, now)
    if why is not None:
        return ReplayResult(wanted, "skipped", why, letter)
    try:
        detail = await source.replay(letter)
    except MemoryCoreError as exc:
        logger.warning(
            "replaying dead letter %s failed: %s", letter.message_id, redact(exc, session_id=letter.session_id)
        )
        detail = str(exc) if "kept" in str(exc) else f"{exc}; the dead letter is kept"
        return ReplayResult(wanted, "failed", detail, letter)
    logger.info("dead letter %s replayed: %s", letter.message_id, redact(detail, session_id=letter.session_id))
    return ReplayResult(wanted, "replayed", detail, letter)


# -- presentation (shared by the command line and its JSON) ---------------------------------------
def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def format_letter(letter: DeadLetterInfo, *, width: int = 100) -> str:
    """Two lines: ids, session, deliveries, time; then the reason and the description, shortened."""
    ident = letter.message_id if letter.key == letter.message_id else f"{letter.key}  {letter.message_id}"
    deliveries = "-" if letter.delivery_count is None or letter.delivery_count < 0 else letter.delivery_count
    # Service Bus does not say when it dead-lettered a message: its enqueued time then.
    when = (
        f"recorded={format_time(letter.recorded_at)}"
        if letter.recorded_at is not None or letter.enqueued_at is None
        else f"enqueued={format_time(letter.enqueued_at)}"
    )
    head = (
        f"{ident}  session={letter.session_id or '-'}  deliveries={deliveries}  "
        f"{when}  size={'-' if letter.size is None else letter.size}"
    )
    tail = f"    {letter.reason}: {_short(letter.description, width)}"
    if letter.not_replayable:
        tail += f"\n    not replayable: {letter.not_replayable}"
    return f"{head}\n{tail}"


#: The lines of ``show``: label and how to read it off a dead letter.
_DETAILS: tuple[tuple[str, Any], ...] = (
    ("id", lambda d: d.key),
    ("message id", lambda d: d.message_id),
    ("session", lambda d: d.session_id or "-"),
    ("reason", lambda d: d.reason or "-"),
    ("description", lambda d: " ".join(d.description.split()) or "-"),
    ("deliveries", lambda d: "-" if d.delivery_count is None or d.delivery_count < 0 else d.delivery_count),
    ("enqueued", lambda d: format_time(d.enqueued_at)),
    ("recorded", lambda d: format_time(d.recorded_at)),
    ("size", lambda d: "-" if d.size is None else f"{d.size} bytes"),
    ("replayable", lambda d: "yes" if d.not_replayable is None else f"no: {d.not_replayable}"),
)


def format_details(letter: DeadLetterInfo) -> str:
    """One line per field, the description whole, then what the body says of the turn's scope (ids and
    counts, never the messages' text)."""
    lines = [f"{label + ':':<13}{value(letter)}" for label, value in _DETAILS]
    summary = dict(letter.summary or {})
    if summary.get("readable") is False:
        lines.append(f"{'body:':<13}not a JSON object")
    elif summary:
        lines.append("body:")
        lines.extend(f"  {name + ':':<13}{value}" for name, value in summary.items())
    return "\n".join(lines)


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
    ``ServiceBusConnection__fullyQualifiedNamespace`` and ``MEMORY_TURNS_QUEUE``. ``servicebus``: the
    dead-letter sub-queue of ``MEMORY_TURNS_QUEUE`` on ``ServiceBusConnection__fullyQualifiedNamespace``.
    The Azure ones use ``DefaultAzureCredential`` (your sign-in, or ``AZURE_CLIENT_ID``).
    """
    from memory_core import bootstrap

    name = source_name(settings, source)
    if name == "local":
        return LocalDeadLetters(bootstrap.build_local_queue(settings))
    if name == "servicebus":
        from memory_core.adapters.azure.service_bus_deadletters import ServiceBusDeadLetterQueue

        queue = ServiceBusDeadLetterQueue.create(
            settings.servicebus_namespace, settings.turns_queue, client_id=settings.azure_client_id or None
        )
        return ServiceBusDeadLetters(queue, duplicate_window=duplicate_window)
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
    """The ``deadletters list|show|replay`` arguments (``memory_core.cli.maintenance`` adds the parser)."""

    def common(p: argparse.ArgumentParser, *, reason: bool = True) -> None:
        p.add_argument(
            "--source",
            choices=SOURCES,
            help="local: the embedded queue (<db>.queue); azure: the history table the Functions app sets "
            "poison messages aside in; servicebus: the turns queue's own dead-letter sub-queue (too many "
            "deliveries, expired) (default: azure when MEMORY_STORE=azure_search, else local)",
        )
        if reason:
            p.add_argument("--reason", help="only dead letters with this reason (for example ValidationError)")
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")

    actions = parser.add_subparsers(dest="deadletters_command", required=True, metavar="ACTION")
    common(actions.add_parser("list", help="dead letters, oldest first, with their reasons"))
    show = actions.add_parser(
        "show", help="one dead letter: reason, description, deliveries, times, the turn's scope (not its text)"
    )
    show.add_argument(
        "id", metavar="ID", help="local: seq or message id; azure: message id; servicebus: sequence number or message id"
    )
    common(show, reason=False)
    replay = actions.add_parser(
        "replay", help="send dead letters again (the Azure record is removed once sent)"
    )
    replay.add_argument(
        "ids",
        nargs="*",
        metavar="ID",
        help="which (local: seq or message id; azure: message id; servicebus: sequence number or message id)",
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


def _write_json(out: TextIO, data: Mapping[str, Any]) -> None:
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _write_list(out: TextIO, source: str, letters: Sequence[DeadLetterInfo], *, as_json: bool) -> None:
    if as_json:
        _write_json(out, {"source": source, "dead_letters": [d.as_dict() for d in letters]})
        return
    out.write(f"{len(letters)} dead letter(s) in {source}\n")
    for letter in letters:
        out.write(format_letter(letter) + "\n")


def _write_replay(out: TextIO, source: str, results: Sequence[ReplayResult], *, as_json: bool) -> bool:
    """Print what ``replay`` did; whether every requested dead letter was replayed."""
    counts = {status: sum(1 for r in results if r.status == status) for status in get_args(ReplayStatus)}
    if as_json:
        _write_json(out, {"source": source, **counts, "results": [r.as_dict() for r in results]})
    else:
        for result in results:
            out.write(f"{result.status:<9} {result.id}: {result.detail}\n")
        out.write(", ".join(f"{n} {status}" for status, n in counts.items()) + "\n")
    return counts["replayed"] == len(results)


async def run_command(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """``memory-core deadletters list|show|replay``: 0 when everything asked for was done, 1 otherwise
    (``show``: 3 when no dead letter has the id)."""
    window = timedelta(
        minutes=getattr(args, "duplicate_window", DEFAULT_DUPLICATE_WINDOW.total_seconds() / 60)
    )
    source = open_dead_letters(settings, args.source, duplicate_window=window)
    try:
        if args.deadletters_command == "list":
            letters = await list_dead_letters(source, reason=args.reason)
            _write_list(out, source.name, letters, as_json=args.json)
            return 0
        if args.deadletters_command == "show":
            letter = await show_dead_letter(source, args.id)
            if args.json:
                _write_json(out, {"source": source.name, "dead_letter": letter.as_dict(summary=True)})
            else:
                out.write(f"dead letter in {source.name}\n{format_details(letter)}\n")
            return 0
        results = await replay_dead_letters(source, args.ids, every=args.every, reason=args.reason)
    finally:
        await source.close()
    return 0 if _write_replay(out, source.name, results, as_json=args.json) else 1
