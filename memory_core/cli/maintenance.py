"""``memory-core doctor``, ``queue`` and ``deadletters``: check the store, look after the queue."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from memory_core.cli.context import existing_queue_settings, settings_for, store_file
from memory_core.cli.output import EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, print_json, short
from memory_core.errors import InputError, NotFoundError, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.sqlite.queue import SQLiteQueue
    from memory_core.adapters.sqlite.queue_messages import QueueMessage, QueueStats
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_deadletters", "cmd_doctor", "cmd_queue"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "doctor": "memory-core --db my.db doctor --full",
    "queue": "memory-core --db my.db queue list",
    "queue list": "memory-core --db my.db queue list --limit 20",
    "queue dead-letters": "memory-core --db my.db queue dead-letters --body",
    "queue requeue": "memory-core --db my.db queue requeue 12",
    "queue purge-dead-letters": "memory-core --db my.db queue purge-dead-letters",
    "deadletters": "memory-core --db my.db deadletters list",
    "deadletters list": "memory-core deadletters list --source servicebus --reason MaxDeliveryCountExceeded",
    "deadletters show": "memory-core deadletters show 42 --source servicebus",
    "deadletters replay": "memory-core deadletters replay --all --source servicebus",
}


def add_arguments(commands: Commands) -> None:
    """Add ``doctor``, ``queue list|dead-letters|requeue|purge-dead-letters`` and ``deadletters``."""
    p = commands.add_parser("doctor", help="check the store, its history and queue, read-only")
    p.add_argument("--full", action="store_true", help="full integrity_check even of large files (slower)")
    p.add_argument("--queue", metavar="PATH", help="the queue file (default <db>.queue)")
    p.set_defaults(handler=cmd_doctor)

    p = commands.add_parser("queue", help="inspect the embedded queue (<db>.queue)")
    queue = p.add_subparsers(dest="queue_command", required=True, metavar="ACTION")
    for name, text in (("list", "waiting messages, oldest first"), ("dead-letters", "dead-lettered messages with reasons")):
        q = queue.add_parser(name, help=text)
        q.add_argument("--limit", type=int, default=100, help="messages shown at most")
        q.add_argument("--body", action="store_true", help="show message bodies")
    q = queue.add_parser("requeue", help="send a dead letter again (by seq or message id)")
    q.add_argument("id")
    queue.add_parser("purge-dead-letters", help="remove every dead letter")
    p.set_defaults(handler=cmd_queue)

    from memory_core.tools.deadletters import add_arguments as deadletter_arguments

    p = commands.add_parser(
        "deadletters",
        help="list, show or replay dead letters (the embedded queue, the Azure table or the Service Bus queue's own)",
    )
    deadletter_arguments(p)
    p.set_defaults(handler=cmd_deadletters)


async def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    """Check the store, its history and queue; 1 when a check failed, 3 when there is no store."""
    from memory_core.tools.doctor import diagnose

    settings = settings_for(args)
    report = await diagnose(settings, full=args.full, queue_path=args.queue)
    if args.json:
        print_json(report.as_dict(), out)
    else:
        out.write("\n".join(report.lines()) + "\n")
    path = store_file(settings)
    if path is not None and not Path(path).exists():
        return EXIT_NOT_FOUND  # the report says so; doctor never creates a store
    return EXIT_FAILURE if report.failed else EXIT_OK


# -- queue ----------------------------------------------------------------------------------------
def _write_messages(
    stats: QueueStats, messages: Sequence[QueueMessage], args: argparse.Namespace, out: TextIO
) -> None:
    """The queue's counts and ``messages``, one line each (``--body``: with their bodies)."""
    if args.json:
        print_json({"stats": stats.as_dict(), "messages": [m.as_dict(include_body=args.body) for m in messages]}, out)
        return
    out.write(
        f"{stats.active} waiting ({stats.locked} locked) in {stats.sessions} session(s); "
        f"{stats.dead_letters} dead-lettered\n"
    )
    for m in messages:
        line = f"{m.seq:>6}  {m.subject or '-':<6} {m.message_id}  session={m.session_id}  deliveries={m.delivery_count}"
        if m.state == "dead":
            line += f"  reason={m.dead_letter_reason}: {short(m.dead_letter_description or '', 120)}"
        elif m.last_error:
            line += f"  last_error={short(m.last_error, 80)}"
        out.write(line + "\n")
        if args.body:
            out.write(f"        {short(m.body.decode('utf-8', errors='replace'), 200)}\n")


def _list(queue: SQLiteQueue, args: argparse.Namespace, out: TextIO) -> int:
    messages = queue.peek(limit=args.limit)
    _write_messages(queue.stats(), messages, args, out)
    return EXIT_OK


def _dead_letters(queue: SQLiteQueue, args: argparse.Namespace, out: TextIO) -> int:
    messages = queue.dead_letters(limit=args.limit)
    _write_messages(queue.stats(), messages, args, out)
    return EXIT_OK


def _requeue(queue: SQLiteQueue, args: argparse.Namespace, out: TextIO) -> int:
    try:
        message = queue.requeue(args.id)
    except ValidationError as exc:
        if exc.field != "id":
            raise
        raise NotFoundError(exc.message) from None
    if args.json:
        print_json(message.as_dict(), out)
    else:
        out.write(f"requeued {message.message_id} (session {message.session_id}) as seq {message.seq}\n")
    return EXIT_OK


def _purge_dead_letters(queue: SQLiteQueue, args: argparse.Namespace, out: TextIO) -> int:
    removed = queue.purge_dead_letters()
    if args.json:
        print_json({"purged": removed}, out)
    else:
        out.write(f"purged {removed} dead-lettered message(s)\n")
    return EXIT_OK


#: What each ``queue`` action does with the open queue.
_QUEUE_ACTIONS: dict[str, Callable[[SQLiteQueue, argparse.Namespace, TextIO], int]] = {
    "list": _list,
    "dead-letters": _dead_letters,
    "requeue": _requeue,
    "purge-dead-letters": _purge_dead_letters,
}


async def cmd_queue(args: argparse.Namespace, out: TextIO) -> int:
    """Run the ``queue`` action on the embedded queue (never created: empty when only the store exists)."""
    from memory_core.bootstrap import build_local_queue

    queue = build_local_queue(existing_queue_settings(settings_for(args)))
    try:
        return _QUEUE_ACTIONS[args.queue_command](queue, args, out)
    finally:
        queue.close_sync()


# -- dead letters ---------------------------------------------------------------------------------
async def cmd_deadletters(args: argparse.Namespace, out: TextIO) -> int:
    """List, show or replay dead letters: of the embedded queue, of the Azure history table, or of the
    turns queue's own Service Bus dead-letter sub-queue."""
    from memory_core.tools.deadletters import run_command, source_name

    settings = settings_for(args)
    if args.deadletters_command == "replay" and bool(args.ids) == args.every:
        raise InputError("name the dead letters to replay (their ids) or --all, not both")
    if source_name(settings, args.source) == "local":
        settings = existing_queue_settings(settings)
    return await run_command(args, settings, out)
