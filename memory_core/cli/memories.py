"""``memory-core search``, ``list``, ``get`` and ``delete``: the memories of a user and agent."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from memory_core.cli.arguments import add_scope
from memory_core.cli.context import service_for
from memory_core.cli.output import EXIT_OK, print_json, short
from memory_core.contract.views import (
    memory_detail,
    memory_list_response,
    memory_view,
    search_response,
    sorted_list_response,
)
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import Listing, MemorySearchOptions, OrderBy, RankingProfile, SearchMode
from memory_core.errors import ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = [
    "EXAMPLES",
    "LIST_ORDER",
    "SEARCH_FLAGS",
    "add_arguments",
    "cmd_delete",
    "cmd_get",
    "cmd_list",
    "cmd_search",
    "join_order_by",
    "write_records",
]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "search": 'memory-core --db my.db search "window seat" --user u1 --agent travel --order-by importance desc',
    "list": "memory-core --db my.db list --user u1 --agent travel --status active",
    "get": "memory-core --db my.db get 7a0edcc1 --user u1 --agent travel",
    "delete": "memory-core --db my.db delete 7a0edcc1 --user u1 --agent travel",
}

_DIRECTIONS = ("asc", "desc")

#: The order of ``memory-core list``: newest first (the last change), then id.
LIST_ORDER = OrderBy.UPDATED_AT_DESC


def _moment(text: str) -> datetime:
    """An ISO 8601 date or time (``2026-03-15``, ``2026-03-15T09:00+09:00``; naive: UTC)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time") from None


def _filters(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object of filters in Mem0's syntax (checked by the search options)."""
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON; give an object such as '{{\"category\": \"plan\"}}'") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object such as '{\"metadata.topic\": \"food\"}'")
    return value


def _order_by(text: str) -> str:
    """An argparse type: ``FIELD DIR`` (one argument, or two joined by :func:`join_order_by`)."""
    value = " ".join(text.split()).lower()
    if value in {o.value for o in OrderBy}:
        return value
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a sort order; give FIELD DIR, one of: {', '.join(o.value for o in OrderBy)}"
    )


def join_order_by(argv: Sequence[str]) -> list[str]:
    """``--order-by FIELD DIR`` as two arguments becomes one (``--order-by=FIELD DIR``); the quoted
    form ``--order-by "FIELD DIR"`` is left as it is."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            joined.extend(argv[i:])
            break
        following = argv[i + 1 : i + 3]
        if (
            arg == "--order-by"
            and len(following) == 2
            and following[1].lower() in _DIRECTIONS
            and len(following[0].split()) == 1
        ):
            joined.append(f"--order-by={following[0]} {following[1]}")
            i += 3
            continue
        if (
            arg.startswith("--order-by=")
            and following
            and following[0].lower() in _DIRECTIONS
            and len(arg.partition("=")[2].split()) == 1
        ):
            joined.append(f"{arg} {following[0]}")
            i += 2
            continue
        joined.append(arg)
        i += 1
    return joined


#: The ``search`` flag of every search option (the argparse destination is the option's name, so
#: :meth:`MemorySearchOptions.from_values` reads them all; a test checks every option has one).
SEARCH_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "mode": ("--mode", {"choices": [m.value for m in SearchMode], "default": SearchMode.HYBRID.value}),
    "ranking_profile": (
        "--profile",
        {"choices": [r.value for r in RankingProfile], "default": RankingProfile.IMPORTANT.value},
    ),
    "top": ("--top", {"type": int, "default": 5, "help": "how many memories"}),
    "order_by": (
        "--order-by",
        {
            "type": _order_by,
            "default": None,
            "metavar": "FIELD DIR",
            "help": "sort by a field instead of relevance (relevance breaks ties): "
            + ", ".join(o.value for o in OrderBy),
        },
    ),
    "category": ("--category", {}),
    "include_archived": ("--include-archived", {"action": "store_true"}),
    "include_superseded": (
        "--include-superseded",
        {"action": "store_true", "help": "also memories superseded by something said later"},
    ),
    "min_importance": ("--min-importance", {"type": float}),
    "min_retention_score": ("--min-retention", {"type": float}),
    "min_score": (
        "--min-score",
        {"type": float, "help": "only memories at least this relevant (0-1, comparable across queries)"},
    ),
    "kind": ("--kind", {"choices": [k.value for k in MemoryKind], "help": "only facts or only episodes"}),
    "vector_k": ("--vector-k", {"type": int, "help": "nearest neighbours of the vector leg (default 50)"}),
    "vector_weight": (
        "--vector-weight",
        {"type": float, "help": "weight of the vector leg in hybrid fusion (default: by the query's language)"},
    ),
    "reference_time": (
        "--reference-time",
        {
            "type": _moment,
            "metavar": "ISO-8601",
            "help": "the 'now' the query's time words (last weekend, 先月, as of March) are read against",
        },
    ),
    "as_of": (
        "--as-of",
        {"type": _moment, "metavar": "ISO-8601", "help": "what was current at this time (earlier values included)"},
    ),
    "filters": (
        "--filters",
        {
            "type": _filters,
            "metavar": "JSON",
            "help": 'conditions in Mem0\'s syntax: \'{"AND": [{"kind": "fact"}, {"metadata.topic": "food"}]}\'',
        },
    ),
}


def option_flag(name: str) -> str:
    """The flag spelling of a search option's own name (``ranking_profile``: ``--ranking-profile``)."""
    return "--" + name.replace("_", "-")


def _add_memory_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="memory id, or a start of it that is unique for the user and agent")


def add_arguments(commands: Commands) -> None:
    """Add ``search``, ``list``, ``get`` and ``delete``."""
    p = commands.add_parser("search", help="ranked memories for a query (read-only unless --recall)")
    p.add_argument("query")
    add_scope(p)
    for name, (flag, options) in SEARCH_FLAGS.items():
        p.add_argument(flag, dest=name, **options)
        own = option_flag(name)
        if own != flag:  # the option's own name is accepted too (not listed: the flag above is)
            alike = {key: value for key, value in options.items() if key not in ("help", "default", "metavar")}
            p.add_argument(own, dest=name, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **alike)
    p.add_argument(
        "--recall",
        action="store_true",
        help="count the memories found as recalled (reinforces them, as an agent's search does: writes to the store)",
    )
    p.add_argument("--no-recall", action="store_true", help=argparse.SUPPRESS)  # the old default's opt-out
    p.set_defaults(handler=cmd_search)

    p = commands.add_parser("list", help="memories of a user and agent, newest first")
    add_scope(p)
    p.add_argument("--status", choices=[s.value for s in MemoryStatus])
    p.add_argument(
        "--order-by", type=_order_by, default=None, metavar="FIELD DIR",
        help=f"sorted by this field, then id (default: {LIST_ORDER.value}, newest first)",
    )
    p.add_argument("--offset", type=int, default=None, help="memories skipped (the next page of a sorted list)")
    p.add_argument("--by-id", action="store_true", help="walk the memories by id instead (pages with --cursor)")
    p.add_argument("--cursor", help="resume a walk by id where an earlier page stopped (implies --by-id)")
    p.add_argument("--limit", type=int, default=100, help="memories per page")
    flag, kwargs = SEARCH_FLAGS["include_superseded"]
    p.add_argument(flag, **kwargs)
    p.set_defaults(handler=cmd_list)

    p = commands.add_parser("get", help="one memory (and its history)")
    _add_memory_id(p)
    add_scope(p)
    p.set_defaults(handler=cmd_get)

    p = commands.add_parser("delete", help="soft-delete one memory (kept, with its history, but never found again)")
    _add_memory_id(p)
    add_scope(p)
    p.add_argument("--reason", default="deleted on request", help="why, for the memory's history")
    p.set_defaults(handler=cmd_delete)


async def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    """The ranked memories for the query, one line each (``--json``: the API's search response)."""
    options = MemorySearchOptions.from_values(vars(args))
    async with service_for(args) as service:
        result = await service.search(Scope.of(args.user, args.agent), args.query, options, recall=args.recall)
    if args.json:
        print_json(search_response(result).model_dump(mode="json"), out)
        return EXIT_OK
    for note in result.notes:
        out.write(f"note: {note}\n")
    if not result.hits:
        out.write("no memories found\n")
    for rank, hit in enumerate(result.hits, start=1):
        r = hit.record
        out.write(
            f"{rank:>2}. {hit.score:10.4f}  [{r.category}; importance={r.importance:.2f}; "
            f"retention={r.retention_score:.2f}; recalls={r.access_count}; "
            f"updated={r.updated_at.date().isoformat()}] {short(r.memory)}  ({r.id})\n"
        )
    return EXIT_OK


async def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    """One page of the scope's memories, newest first (``--order-by``: another order; ``--by-id`` /
    ``--cursor``: a walk by id), as the API's list response with ``--json``.

    Raises:
        ValidationError: A walk by id is combined with a sort or an offset (names ``cursor``).
    """
    statuses = [MemoryStatus(args.status)] if args.status else None
    scope = Scope.of(args.user, args.agent)
    if args.by_id or args.cursor is not None:
        if args.order_by is not None or args.offset is not None:
            raise ValidationError(
                "cursor", "pages a walk by id; a sorted list (--order-by, --offset) pages with --offset instead"
            )
        async with service_for(args) as service:
            page = await service.list(
                scope, statuses=statuses, cursor=args.cursor, limit=args.limit,
                include_superseded=args.include_superseded,
            )
        if args.json:
            print_json(memory_list_response(page).model_dump(mode="json"), out)
            return EXIT_OK
        write_records(page.records, out)
        if page.next_cursor:
            out.write(f"more: --cursor {page.next_cursor}\n")
        return EXIT_OK
    offset = args.offset or 0
    listing = Listing(statuses=statuses, order_by=OrderBy(args.order_by or LIST_ORDER), offset=offset, limit=args.limit)
    async with service_for(args) as service:
        sorted_page = await service.browse(scope, listing, include_superseded=args.include_superseded)
    response = sorted_list_response(sorted_page, offset)
    if args.json:
        print_json(response.model_dump(mode="json"), out)
        return EXIT_OK
    write_records(sorted_page.records, out)
    if response.next_offset is not None:
        out.write(f"more: --offset {response.next_offset} (of {sorted_page.total})\n")
    return EXIT_OK


def write_records(records: Sequence[MemoryRecord], out: TextIO) -> None:
    """One line per memory: id, status, what it is, when it last changed, and its text."""
    for r in records:
        until = ""
        if r.valid_until is not None:
            until = f"; until {r.valid_until.date().isoformat()}, superseded by {r.superseded_by}"
        out.write(
            f"{r.id}  {r.status.value:<8} [{r.category}; importance={r.importance:.2f}; "
            f"retention={r.retention_score:.2f}; updated={r.updated_at.date().isoformat()}{until}] "
            f"{short(r.memory)}\n"
        )


async def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    """One memory's fields and history (``--json``: the API's memory detail)."""
    scope = Scope.of(args.user, args.agent)
    async with service_for(args) as service:
        memory_id = await service.resolve_id(scope, args.id)
        record = await service.get(scope, memory_id)
        history = await service.history_of(scope, memory_id)
    detail = memory_detail(record, history).model_dump(mode="json")
    if args.json:
        print_json(detail, out)
        return EXIT_OK
    entries = detail.pop("history")
    for key, value in detail.items():
        out.write(f"{key:>17}: {value}\n")
    for entry in entries:
        out.write(
            f"  {entry['at']}  {entry['event']:<6} {entry.get('reason', '')}  (turn {entry.get('turn_id')})\n"
        )
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    """Soft-delete one memory (``--json``: the API's view of it)."""
    scope = Scope.of(args.user, args.agent)
    async with service_for(args) as service:
        memory_id = await service.resolve_id(scope, args.id)
        record = await service.delete(scope, memory_id, reason=args.reason)
    if args.json:  # what DELETE /api/memories/{memory_id} answers
        print_json(memory_view(record).model_dump(mode="json"), out)
    else:
        out.write(f"deleted {record.id}: {short(record.memory)}\n")
    return EXIT_OK
