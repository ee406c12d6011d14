"""``memory-core``: the memory operations for people and scripts.

Global options: ``--db PATH`` (env ``MEMORY_SQLITE_PATH``) picks the embedded store file, ``--json``
prints exactly the JSON the HTTP API returns. Errors print one line that says what is wrong and exit
with status 2 (bad input) or 1 (anything else).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from . import __version__
from .api import (
    export_response,
    forgetting_response,
    memory_detail,
    memory_list_response,
    purge_response,
    search_response,
)
from .errors import MemoryCoreError, NotFoundError, PermanentError
from .models import MemoryKind, MemorySearchOptions, MemoryStatus, OrderBy, RankingProfile, Scope, SearchMode

if TYPE_CHECKING:  # pragma: no cover
    from .adapters.sqlite_queue import SQLiteQueue
    from .config import Settings
    from .service import MemoryService

__all__ = ["main"]


def _print_json(data: Any, out: TextIO) -> None:
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _jsonl(path: str) -> Iterator[dict[str, Any]]:
    stream = sys.stdin if path == "-" else Path(path).open(encoding="utf-8")  # noqa: SIM115
    try:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PermanentError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(value, dict):
                raise PermanentError(f"{path}:{number}: each line must be a JSON object")
            yield value
    finally:
        if stream is not sys.stdin:
            stream.close()


def _settings(args: argparse.Namespace) -> Settings:
    from .bootstrap import load_settings

    return load_settings(sqlite_path=args.db)


def _service(args: argparse.Namespace) -> MemoryService:
    from .bootstrap import build_service

    return build_service(_settings(args))


def _non_negative_int(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _short(text: str, width: int = 72) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


#: The ``search`` flag of every search option (the argparse destination is the option's name, so
#: :meth:`MemorySearchOptions.from_values` reads them all; a test checks every option has one).
SEARCH_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "mode": ("--mode", {"choices": [m.value for m in SearchMode], "default": SearchMode.HYBRID.value}),
    "ranking_profile": (
        "--profile",
        {"choices": [r.value for r in RankingProfile], "default": RankingProfile.IMPORTANT.value},
    ),
    "top": ("--top", {"type": int, "default": 5}),
    "order_by": ("--order-by", {"choices": [o.value for o in OrderBy], "default": None}),
    "category": ("--category", {}),
    "include_archived": ("--include-archived", {"action": "store_true"}),
    "min_importance": ("--min-importance", {"type": float}),
    "min_retention_score": ("--min-retention", {"type": float}),
    "kind": ("--kind", {"choices": [k.value for k in MemoryKind], "help": "only facts or only episodes"}),
    "vector_k": ("--vector-k", {"type": int, "help": "nearest neighbours of the vector leg (default 50)"}),
    "vector_weight": (
        "--vector-weight",
        {"type": float, "help": "weight of the vector leg in hybrid fusion (default: by the query's language)"},
    ),
}


# -- commands -----------------------------------------------------------------------------------
async def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    async with _service(args) as service:
        report = await service.import_records(_jsonl(args.file))
    if args.json:
        _print_json({"imported": report.imported, "embedded": report.embedded}, out)
    else:
        out.write(f"imported {report.imported} memories ({report.embedded} embeddings computed)\n")
    return 0


def _local_queue(settings: Settings) -> SQLiteQueue | None:
    """The embedded queue beside the store file, when there is one (``None`` for the Azure store, an
    in-memory store, or a store that never had a queue): purge and export reach into it."""
    from .bootstrap import build_local_queue, local_queue_path

    if settings.store == "azure_search" or settings.sqlite_path == ":memory:":
        return None
    if not Path(local_queue_path(settings)).exists():
        return None
    return build_local_queue(settings)


def _service_with_queue(settings: Settings, queue: SQLiteQueue | None) -> MemoryService:
    """The service, with the embedded queue as its publisher (closed with it, or here if building fails)."""
    from .bootstrap import build_service

    try:
        return build_service(settings, publisher=queue)
    except BaseException:
        if queue is not None:
            queue.close_sync()
        raise


async def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args)
    async with _service_with_queue(settings, _local_queue(settings) if args.json else None) as service:
        if args.json:  # exactly what GET /api/users/{user_id}/export answers
            records = [record async for record in service.export(args.user, args.agent)]
            history = await service.export_history(args.user, args.agent)
            queued = await service.queued_messages(args.user, args.agent)
            _print_json(export_response(args.user, args.agent, records, history, queued).model_dump(mode="json"), out)
            return 0
        async for record in service.export(args.user, args.agent):
            out.write(json.dumps(record.to_json_dict(), ensure_ascii=False) + "\n")
        if args.history:
            entries = await service.export_history(args.user, args.agent)
            with Path(args.history).open("w", encoding="utf-8") as handle:
                for entry in entries:
                    handle.write(json.dumps(entry.model_dump(mode="json"), ensure_ascii=False) + "\n")
    return 0


async def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    options = MemorySearchOptions.from_values(vars(args))
    async with _service(args) as service:
        result = await service.search(Scope.of(args.user, args.agent), args.query, options, recall=not args.no_recall)
    if args.json:
        _print_json(search_response(result).model_dump(mode="json"), out)
        return 0
    for note in result.notes:
        out.write(f"note: {note}\n")
    if not result.hits:
        out.write("no memories found\n")
    for rank, hit in enumerate(result.hits, start=1):
        r = hit.record
        out.write(
            f"{rank:>2}. {hit.score:10.4f}  [{r.category}; importance={r.importance:.2f}; "
            f"retention={r.retention_score:.2f}; recalls={r.access_count}; "
            f"updated={r.updated_at.date().isoformat()}] {_short(r.memory)}  ({r.id})\n"
        )
    return 0


async def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    statuses = [MemoryStatus(args.status)] if args.status else None
    async with _service(args) as service:
        page = await service.list(
            Scope.of(args.user, args.agent), statuses=statuses, cursor=args.cursor, limit=args.limit
        )
    if args.json:
        _print_json(memory_list_response(page).model_dump(mode="json"), out)
        return 0
    for r in page.records:
        out.write(
            f"{r.id}  {r.status.value:<8} [{r.category}; importance={r.importance:.2f}; "
            f"retention={r.retention_score:.2f}] {_short(r.memory)}\n"
        )
    if page.next_cursor:
        out.write(f"more: --cursor {page.next_cursor}\n")
    return 0


async def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    scope = Scope.of(args.user, args.agent)
    async with _service(args) as service:
        record = await service.get(scope, args.id)
        history = await service.history_of(scope, args.id)
    detail = memory_detail(record, history).model_dump(mode="json")
    if args.json:
        _print_json(detail, out)
        return 0
    entries = detail.pop("history")
    for key, value in detail.items():
        out.write(f"{key:>17}: {value}\n")
    for entry in entries:
        out.write(
            f"  {entry['at']}  {entry['event']:<6} {entry.get('reason', '')}  (turn {entry.get('turn_id')})\n"
        )
    return 0


async def cmd_forget(args: argparse.Namespace, out: TextIO) -> int:
    async with _service(args) as service:
        report = await service.apply_forgetting(dry_run=not args.apply, limit=args.limit, cursor=args.cursor)
    if args.json:
        _print_json(forgetting_response(report).model_dump(mode="json"), out)
        return 0
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
    return 0


async def cmd_purge(args: argparse.Namespace, out: TextIO) -> int:
    if not args.yes:
        raise PermanentError("purge removes memories physically and cannot be undone; add --yes to confirm")
    settings = _settings(args)
    # The embedded queue (if any) loses the scope's messages too, even while `serve` runs.
    async with _service_with_queue(settings, _local_queue(settings)) as service:
        report = await service.purge(args.user, args.agent)
    if args.json:
        _print_json(purge_response(report).model_dump(mode="json"), out)
        return 0
    out.write(
        f"purged {report.memories} memories, {report.history} history entries and "
        f"{report.queued} queued message(s)\n"
    )
    if report.purged_at is not None:
        out.write(
            f"turns and recall updates of this {'user' if args.agent is None else 'agent'} dated at or before "
            f"{report.purged_at.isoformat()} are dropped from now on\n"
        )
    return 0


async def cmd_ingest(args: argparse.Namespace, out: TextIO) -> int:
    from .service.ingest import format_decision, read_turns

    turns = read_turns(args.file)  # every line is validated before anything is ingested
    async with _service(args) as service:
        for turn in turns:
            result = await service.ingest(turn)
            if args.json:
                out.write(json.dumps(result.as_dict(), ensure_ascii=False) + "\n")
                continue
            header = f"turn {turn.turn_id} ({turn.user_id}/{turn.agent_id})"
            if result.status == "duplicate":
                out.write(f"{header}: already ingested, skipped\n")
                continue
            if result.status == "purged":
                out.write(f"{header}: dated at or before the purge of its scope, dropped\n")
                continue
            note = f", extraction fell back to rules: {result.fallback_reason}" if result.fallback_reason else ""
            out.write(f"{header}: {len(result.steps)} decision(s){note}\n")
            for step in result.steps:
                out.write("  " + format_decision(step) + "\n")
    return 0


async def cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    from .bootstrap import ensure_search_index

    outcome = await ensure_search_index(_settings(args))
    if args.json:
        _print_json({"index": outcome}, out)
    else:
        out.write(f"index {outcome}\n")
    return 0


async def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo import run_demo

    code: int = await run_demo(
        db_path=args.db, out=lambda line="": out.write(f"{line}\n"), json_output=args.json, llm=args.llm
    )
    return code


async def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from .bench import run_benchmark

    return await run_benchmark(args, out)


async def cmd_eval(args: argparse.Namespace, out: TextIO) -> int:
    from .evaluation import run_evaluation

    return await run_evaluation(args, out)


async def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from .local.runtime import RuntimeOptions, serve_async

    options = RuntimeOptions(
        host=args.host,
        port=args.port,
        workers=args.workers,
        lock_seconds=args.lock_seconds,
        max_deliveries=args.max_deliveries,
        scheduler=not args.no_scheduler,
        token=args.token or None,  # an empty --token does not switch MEMORY_API_TOKEN off
        request_concurrency=args.request_concurrency or None,
        recall_window_seconds=args.recall_window,
    )
    try:
        return await serve_async(_settings(args), options, out=out)
    except OSError as exc:
        raise MemoryCoreError(f"cannot serve on {args.host}:{args.port}: {exc}") from exc


async def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from .doctor import diagnose

    report = await diagnose(_settings(args), full=args.full, queue_path=args.queue)
    if args.json:
        _print_json(report.as_dict(), out)
    else:
        out.write("\n".join(report.lines()) + "\n")
    return 1 if report.failed else 0


async def cmd_queue(args: argparse.Namespace, out: TextIO) -> int:
    from .bootstrap import build_local_queue

    queue = build_local_queue(_settings(args))
    try:
        if args.queue_command == "list":
            messages = queue.peek(limit=args.limit)
        elif args.queue_command == "dead-letters":
            messages = queue.dead_letters(limit=args.limit)
        elif args.queue_command == "requeue":
            message = queue.requeue(args.id)
            if args.json:
                _print_json(message.as_dict(), out)
            else:
                out.write(f"requeued {message.message_id} (session {message.session_id}) as seq {message.seq}\n")
            return 0
        else:
            removed = queue.purge_dead_letters()
            if args.json:
                _print_json({"purged": removed}, out)
            else:
                out.write(f"purged {removed} dead-lettered message(s)\n")
            return 0
        stats = queue.stats()
    finally:
        queue.close_sync()
    if args.json:
        _print_json({"stats": stats.as_dict(), "messages": [m.as_dict(include_body=args.body) for m in messages]}, out)
        return 0
    out.write(
        f"{stats.active} waiting ({stats.locked} locked) in {stats.sessions} session(s); "
        f"{stats.dead_letters} dead-lettered\n"
    )
    for m in messages:
        line = f"{m.seq:>6}  {m.subject or '-':<6} {m.message_id}  session={m.session_id}  deliveries={m.delivery_count}"
        if m.state == "dead":
            line += f"  reason={m.dead_letter_reason}: {_short(m.dead_letter_description or '', 120)}"
        elif m.last_error:
            line += f"  last_error={_short(m.last_error, 80)}"
        out.write(line + "\n")
        if args.body:
            out.write(f"        {_short(m.body.decode('utf-8', errors='replace'), 200)}\n")
    return 0


async def cmd_deadletters(args: argparse.Namespace, out: TextIO) -> int:
    from .deadletters import run_command

    return await run_command(args, _settings(args), out)


# -- parser -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-core", description="Long-term, human-like memory for AI agents."
    )
    parser.add_argument("--version", action="version", version=f"memory-core {__version__}")
    parser.add_argument("--db", metavar="PATH", help="embedded store file (env MEMORY_SQLITE_PATH)")
    parser.add_argument("--json", action="store_true", help="print the JSON the HTTP API returns")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def scope(p: argparse.ArgumentParser, *, agent_required: bool = True) -> None:
        p.add_argument("--user", required=True, help="user id")
        p.add_argument("--agent", required=agent_required, help="agent id")

    p = sub.add_parser("demo", help="a scripted conversation through the whole local pipeline")
    p.add_argument(
        "--llm",
        action="store_true",
        help="extract and consolidate with the chat model MEMORY_LLM_PROVIDER configures (default: rules)",
    )
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("ingest", help="turn messages (turn.v1 JSON lines) through extraction and consolidation")
    p.add_argument("file", help="JSON lines file, one memory-core.turn.v1 per line")
    p.set_defaults(handler=cmd_ingest)

    p = sub.add_parser("index", help="the Azure AI Search index")
    index = p.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    index.add_parser("ensure", help="create or update the index (idempotent)")
    p.set_defaults(handler=cmd_index)

    p = sub.add_parser("import", help="memory records as JSON lines (a missing embedding is computed)")
    p.add_argument("file", help="JSON lines file, or - for standard input")
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser(
        "export",
        help="a user's memory records as JSON lines, every field (--json: the API's export, with history)",
    )
    scope(p, agent_required=False)
    p.add_argument("--history", metavar="FILE", help="also write the decision history, as JSON lines, to FILE")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("search", help="ranked memories for a query")
    p.add_argument("query")
    scope(p)
    for name, (flag, options) in SEARCH_FLAGS.items():
        p.add_argument(flag, dest=name, **options)
    p.add_argument("--no-recall", action="store_true", help="do not count this search as a recall")
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("list", help="memories of a user and agent, by id")
    scope(p)
    p.add_argument("--status", choices=[s.value for s in MemoryStatus])
    p.add_argument("--cursor")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("get", help="one memory (and its history)")
    p.add_argument("id")
    scope(p)
    p.set_defaults(handler=cmd_get)

    p = sub.add_parser("forget", help="apply the forgetting policy (dry run unless --apply)")
    p.add_argument("--apply", action="store_true", help="write the changes")
    p.add_argument("--limit", type=int, help="scan at most this many memories")
    p.add_argument("--cursor", help="resume where an earlier run stopped")
    p.set_defaults(handler=cmd_forget)

    p = sub.add_parser("purge", help="physically remove a user's memories")
    scope(p, agent_required=False)
    p.add_argument("--yes", action="store_true", help="confirm")
    p.set_defaults(handler=cmd_purge)

    p = sub.add_parser("bench", help="speed reports")
    bench = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    b = bench.add_parser("search", help="search latency on a scope inside a large store")
    b.add_argument("--store-size", type=int, default=100_000)
    b.add_argument("--scope-size", type=int, default=1_000)
    b.add_argument("--queries", type=int, default=500)
    b.add_argument("--dimensions", type=int, default=384)
    b.add_argument("--keep", metavar="PATH", help="build (or reuse) the benchmark store at PATH")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    b.add_argument("--growth", type=int, nargs="+", metavar="N", help="growth series over these store sizes")
    b.add_argument("--growing-max", type=int, default=100_000, help="largest single growing scope")
    b.add_argument("--keep-dir", metavar="DIR", help="build (or reuse) the growth series stores in DIR")
    b.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")
    b = bench.add_parser("ingest", help="turns per second through the rule path with the local embedder")
    b.add_argument("--turns", type=int, default=200)
    b.add_argument("--scopes", type=int, default=8)
    b.add_argument("--seed", type=int, default=7)
    b.add_argument("--threads", type=int, default=2, help="threads of the local embedder")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b = bench.add_parser("forget", help="forgetting throughput and peak memory over a large store")
    b.add_argument("--store-size", type=int, default=1_000_000)
    b.add_argument("--scope-size", type=int, default=1_000)
    b.add_argument("--dimensions", type=int, default=384)
    b.add_argument("--tolerance", type=float, default=0.01, help="retention drift that is written back")
    b.add_argument("--page-size", type=int, default=20_000)
    b.add_argument("--keep", metavar="PATH", help="build (or reuse) the benchmark store at PATH")
    b.add_argument("--tracemalloc", action="store_true", help="add a dry run under tracemalloc (Python heap peak)")
    b.add_argument("--in-process", action="store_true", help="run the jobs in this process (no fresh process each)")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")
    b.add_argument("--seed", type=int, default=7)
    b = bench.add_parser("provider", help="latency the memory provider adds to an agent run")
    b.add_argument("--runs", type=int, default=200)
    b.add_argument("--memories", type=int, default=200, help="memories in the benchmark scope")
    b.add_argument("--embedder", choices=["e5-local", "hash"], default="e5-local")
    b.add_argument("--threads", type=int, default=2, help="threads of the local embedder")
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    b = bench.add_parser("serve", help="the embedded server under search load while turns are posted")
    b.add_argument("--searchers", type=int, default=20, help="concurrent searchers")
    b.add_argument("--seconds", type=float, default=30.0, help="how long the searchers run")
    b.add_argument("--turns", type=int, default=2000, help="turns posted during the load")
    b.add_argument("--users", type=int, default=50, help="users (one agent each) the turns and searches spread over")
    b.add_argument("--seed-turns", type=int, default=4, help="turns per user processed before the load")
    b.add_argument("--embedder", choices=["e5-local", "hash"], default="e5-local")
    b.add_argument("--workers", type=int, default=2, help="queue workers of the server")
    b.add_argument("--threads", type=int, default=2, help="threads of the local embedder")
    b.add_argument("--drain-timeout", type=float, default=600.0, help="longest wait for the rest to be processed")
    b.add_argument(
        "--request-concurrency", type=_non_negative_int, default=2, help="the server's --request-concurrency"
    )
    b.add_argument("--output", metavar="JSON", help="also write the figures to this file")
    b.add_argument("--seed", type=int, default=7)
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser("eval", help="quality reports (retrieval on LoCoMo, the Japanese set)")
    evals = p.add_subparsers(dest="evaluation", required=True, metavar="EVAL")
    from .evaluation import japanese as eval_japanese
    from .evaluation import locomo as eval_locomo
    from .evaluation import pipeline as eval_pipeline

    eval_locomo.add_arguments(evals.add_parser("locomo", help="turn-level retrieval on LoCoMo (no LLM)"))
    eval_japanese.add_arguments(
        evals.add_parser("japanese", help="the Japanese set: retrieval and rule-path consolidation")
    )
    eval_pipeline.add_arguments(
        evals.add_parser("pipeline", help="end to end: turns through the real ingest path, then questions")
    )
    p.set_defaults(handler=cmd_eval)

    p = sub.add_parser("serve", help="the embedded runtime: HTTP API + queue workers + nightly forgetting")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7071, help="port (default 7071; 0 picks a free one)")
    p.add_argument("--workers", type=int, default=2, help="queue workers (default 2)")
    p.add_argument("--lock-seconds", type=float, default=60.0, help="peek-lock duration (default 60)")
    p.add_argument("--max-deliveries", type=int, default=10, help="deliveries before dead-lettering (default 10)")
    p.add_argument("--no-scheduler", action="store_true", help="do not run the nightly forgetting job")
    p.add_argument(
        "--token",
        help="bearer token every route but health requires (default MEMORY_API_TOKEN; prefer the variable: "
        "arguments are visible to other users of the machine); required for a non-loopback --host",
    )
    p.add_argument(
        "--request-concurrency",
        type=_non_negative_int,
        default=2,
        help="requests served at once, the others wait their turn so queue workers keep their share "
        "(default 2; 0: no limit; health and POST /turns never wait)",
    )
    p.add_argument(
        "--recall-window",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long a scope's recall updates are gathered into one before they are queued (default 2; 0: none)",
    )
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser("doctor", help="check the store, its history and queue, read-only")
    p.add_argument("--full", action="store_true", help="full integrity_check even of large files (slower)")
    p.add_argument("--queue", metavar="PATH", help="the queue file (default <db>.queue)")
    p.set_defaults(handler=cmd_doctor)

    p = sub.add_parser("queue", help="inspect the embedded queue (<db>.queue)")
    queue = p.add_subparsers(dest="queue_command", required=True, metavar="ACTION")
    for name, text in (("list", "waiting messages, oldest first"), ("dead-letters", "dead-lettered messages with reasons")):
        q = queue.add_parser(name, help=text)
        q.add_argument("--limit", type=int, default=100)
        q.add_argument("--body", action="store_true", help="show message bodies")
    q = queue.add_parser("requeue", help="send a dead letter again (by seq or message id)")
    q.add_argument("id")
    queue.add_parser("purge-dead-letters", help="remove every dead letter")
    p.set_defaults(handler=cmd_queue)

    from .deadletters import add_arguments as deadletter_arguments

    p = sub.add_parser("deadletters", help="list or replay dead letters (the embedded queue or the Azure table)")
    deadletter_arguments(p)
    p.set_defaults(handler=cmd_deadletters)
    return parser


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run one command; returns the exit status."""
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    handler: Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]] = args.handler
    try:
        return asyncio.run(handler(args, out))
    except NotFoundError as exc:
        sys.stderr.write(f"memory-core: not found: {exc}\n")
        return 2
    except PermanentError as exc:
        sys.stderr.write(f"memory-core: error: {exc}\n")
        return 2
    except MemoryCoreError as exc:
        sys.stderr.write(f"memory-core: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
