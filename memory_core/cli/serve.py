"""``memory-core serve`` and ``mcp``: the embedded runtime's HTTP API, and the Model Context Protocol server."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

from memory_core.cli.arguments import non_negative_int, positive_int
from memory_core.cli.context import check_new_store, settings_for
from memory_core.errors import MemoryCoreError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands
    from memory_core.config import Settings
    from memory_core.entrypoints.embedded.host import EmbeddedRuntime

__all__ = ["EXAMPLES", "add_arguments", "cmd_mcp", "cmd_serve"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "serve": "memory-core --db my.db serve --port 7071",
    "mcp": "memory-core --db my.db mcp --user u1",
}


def add_arguments(commands: Commands) -> None:
    """Add ``serve`` and ``mcp``."""
    _add_serve(commands)
    _add_mcp(commands)


def _add_serve(commands: Commands) -> None:
    p = commands.add_parser(
        "serve",
        help="the embedded runtime: HTTP API + memory inspector + queue workers + nightly forgetting; "
        "prints the API's and the inspector's addresses once it listens (--json: as one JSON line)",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7071, help="port (default 7071; 0 picks a free one)")
    p.add_argument(
        "--workers",
        type=int,
        default=4,
        help="queue workers: turns of as many scopes in flight, their passages embedded together (default 4)",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=8,
        metavar="N",
        help="messages of one scope a worker takes at once: their turns extracted and their passages "
        "embedded in one call, then processed and settled one by one, in order (default 8; 1: one at a time)",
    )
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
        type=non_negative_int,
        default=2,
        help="requests served at once, the others wait their turn so queue workers keep their share "
        "(default 2; 0: no limit; health and POST /turns never wait)",
    )
    p.add_argument(
        "--max-connections",
        type=positive_int,
        default=256,
        metavar="N",
        help="connections served at once, each on a thread of its own; more are answered 503 with "
        "Retry-After (default 256)",
    )
    p.add_argument(
        "--read-timeout",
        type=_positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long a client may take to send a whole request (request line, headers and body), or to "
        "start one on an idle connection; later: 408 and closed (default 30)",
    )
    p.add_argument(
        "--recall-window",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long a scope's recall updates are gathered into one before they are queued (default 2; 0: none)",
    )
    p.add_argument(
        "--vector-fill",
        type=_non_negative_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how often to look for memories stored without a vector (import --defer-vectors, or an "
        "import stopped part way) and compute theirs, at start and then every SECONDS (default 30; 0: never)",
    )
    p.set_defaults(handler=cmd_serve)


def _add_mcp(commands: Commands) -> None:
    p = commands.add_parser(
        "mcp", help="a Model Context Protocol server over one user's memories (stdio, or HTTP on 127.0.0.1)"
    )
    p.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help="embedded store file (as the global --db)")
    p.add_argument("--user", help="the one user whose memories are served (default MEMORY_MCP_USER_ID; required)")
    p.add_argument("--agent", help="the agent id (default MEMORY_MCP_AGENT_ID, which defaults to 'default')")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP")
    p.add_argument("--host", default="127.0.0.1", help="HTTP interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7072, help="HTTP port (default 7072; 0 picks a free one)")
    p.add_argument(
        "--token",
        help="bearer token every HTTP request needs (default MEMORY_MCP_TOKEN, never serve's MEMORY_API_TOKEN; "
        "prefer the variable); "
        "required for a non-loopback --host",
    )
    p.add_argument("--recall", action="store_true", help="count searches as recalls (default: searches are read-only)")
    p.set_defaults(handler=cmd_mcp)


T = TypeVar("T")

#: The ``serve`` options :class:`~memory_core.entrypoints.embedded.host.RuntimeOptions` takes as they are.
_RUNTIME_OPTIONS = (
    "host", "port", "workers", "batch", "lock_seconds", "max_deliveries", "max_connections", "read_timeout"
)
#: The ``mcp`` options :class:`~memory_core.entrypoints.mcp.server.McpOptions` takes as they are.
_MCP_OPTIONS = ("transport", "host", "port", "recall")


def _positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds, more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not more than 0 seconds")
    return value


def _non_negative_seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return _positive_seconds(text)


def _options(make: Callable[..., T], args: argparse.Namespace, same: tuple[str, ...], **values: Any) -> T:
    """The options of a server command: ``args``' options ``same`` under their own names, its
    ``--token``, and ``values``.

    Args:
        make: The options' class.
        args: The parsed command line.
        same: The options passed under their own names, as they are.
        **values: The other options.

    Returns:
        The options.
    """
    token = args.token or None  # an empty --token does not switch the token variable off
    return make(**{name: getattr(args, name) for name in same}, token=token, **values)


class _ServeAnnouncer(io.TextIOBase):
    """``serve --json``: the runtime's lines go to standard error; once it listens, one JSON line on
    standard output says where (and nothing else is written there)."""

    def __init__(self, out: TextIO, settings: Settings, workers: int) -> None:
        super().__init__()
        self._out = out
        self._settings = settings
        self._workers = workers
        self.runtime: EmbeddedRuntime | None = None
        self.announced = False

    def write(self, text: str) -> int:
        sys.stderr.write(text)
        server = None if self.runtime is None else self.runtime.server
        if not self.announced and self.runtime is not None and server is not None:
            self.announced = True
            facts = {
                "status": "listening",
                "url": server.url,
                "inspector": server.inspector_url,
                "store": self._settings.sqlite_path,
                "queue": self.runtime.queue_path,
                "workers": self._workers,
                "pid": os.getpid(),
            }
            self._out.write(json.dumps(facts, ensure_ascii=False) + "\n")
            self._out.flush()
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


async def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Run the embedded runtime until it is stopped."""
    from memory_core.entrypoints.embedded.host import RuntimeOptions, serve_async

    options = _options(
        RuntimeOptions,
        args,
        _RUNTIME_OPTIONS,
        scheduler=not args.no_scheduler,
        request_concurrency=args.request_concurrency or None,
        recall_window_seconds=args.recall_window,
        vector_fill_seconds=args.vector_fill,
    )
    settings = settings_for(args)
    check_new_store(args, settings)
    announcer: _ServeAnnouncer | None = None
    if args.json:
        announcer = _ServeAnnouncer(out, settings, args.workers)

    def ready(runtime: EmbeddedRuntime) -> None:
        if announcer is not None:
            announcer.runtime = runtime

    try:
        return await serve_async(
            settings, options, out=out if announcer is None else cast(TextIO, announcer), ready=ready
        )
    except OSError as exc:
        raise MemoryCoreError(f"cannot serve on {args.host}:{args.port}: {exc}") from exc


async def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """Run the MCP server over one user's memories until it is stopped."""
    from memory_core.entrypoints.mcp.server import McpOptions, run_mcp

    options = _options(McpOptions, args, _MCP_OPTIONS, user_id=args.user, agent_id=args.agent)
    return await run_mcp(settings_for(args), options, out=out)
