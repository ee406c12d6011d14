"""``memory-core forget`` and ``purge``: the forgetting policy, and removing a user's memories for good."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from memory_core.cli.arguments import add_scope
from memory_core.cli.context import progress_for, require_store, service_for, service_with_queue, settings_for
from memory_core.cli.output import EXIT_OK, print_json
from memory_core.contract.admin_views import forgetting_response, purge_response
from memory_core.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_forget", "cmd_purge"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "forget": "memory-core --db my.db forget --apply",
    "purge": "memory-core --db my.db purge --user u1 --yes",
}


def add_arguments(commands: Commands) -> None:
    """Add ``forget`` and ``purge``."""
    p = commands.add_parser("forget", help="apply the forgetting policy (dry run unless --apply)")
    p.add_argument("--apply", action="store_true", help="write the changes")
    p.add_argument("--limit", type=int, help="scan at most this many memories")
    p.add_argument("--cursor", help="resume where an earlier run stopped")
    p.set_defaults(handler=cmd_forget)

    p = commands.add_parser("purge", help="physically remove a user's memories")
    add_scope(p, every_agent=True)
    p.add_argument("--yes", action="store_true", help="confirm")
    p.set_defaults(handler=cmd_purge)


async def cmd_forget(args: argparse.Namespace, out: TextIO) -> int:
    """Apply (or, without ``--apply``, try) the forgetting policy; the counts and the first changes."""
    async with service_for(args) as service:
        with progress_for(args).bar("forgetting", args.limit, unit="memories") as bar:
            report = await service.apply_forgetting(
                dry_run=not args.apply, limit=args.limit, cursor=args.cursor, progress=bar.update
            )
    if args.json:
        print_json(forgetting_response(report).model_dump(mode="json"), out)
        return EXIT_OK
    verb = "would change" if report.dry_run else "changed"
    out.write(
        f"{'dry run: ' if report.dry_run else ''}scanned {report.scanned}; {verb}: archived {report.archived} "
        f"(expired {report.expired}), reactivated {report.reactivated}, rescored {report.rescored}; "
        f"unchanged {report.unchanged}; written {report.written}\n"
    )
    for change in report.changes[:50]:
        out.write(
            f"  {change.id}  {change.old_status.value} -> {change.new_status.value}  "
            f"retention {change.old_retention:.3f} -> {change.new_retention:.3f}"
            f"{'  (expired)' if change.expired else ''}\n"
        )
    if report.next_cursor:
        out.write(f"more: --cursor {report.next_cursor}\n")
    if report.dry_run:
        out.write("nothing was written; run with --apply to apply\n")
    return EXIT_OK


async def cmd_purge(args: argparse.Namespace, out: TextIO) -> int:
    """Remove the user's (or agent's) memories, history and queued messages; refused without ``--yes``."""
    if not args.yes:
        raise InputError("purge removes memories physically and cannot be undone; add --yes to confirm")
    from memory_core.bootstrap import existing_local_queue

    settings = settings_for(args)
    require_store(settings, or_queue=True)
    # The embedded queue (if any) loses the scope's messages too, even while `serve` runs.
    async with service_with_queue(settings, existing_local_queue(settings)) as service:
        report = await service.purge(args.user, args.agent)
    if args.json:
        print_json(purge_response(report).model_dump(mode="json"), out)
        return EXIT_OK
    out.write(
        f"purged {report.memories} memories, {report.history} history entries and "
        f"{report.queued} queued message(s)\n"
    )
    if report.purged_at is not None:
        out.write(
            f"turns and recall updates of this {'user' if args.agent is None else 'agent'} dated at or before "
            f"{report.purged_at.isoformat()} are dropped from now on\n"
        )
    return EXIT_OK
