"""``memory-core bench`` and ``eval``: the speed and quality reports (run by ``memory_core.tools``)."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from memory_core.cli.arguments import non_negative_int, positive_int
from memory_core.cli.context import progress_for
from memory_core.cli.inputs import spool_stdin

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.cli.arguments import Commands

__all__ = ["EXAMPLES", "add_arguments", "cmd_bench", "cmd_eval"]

#: The examples ``--help`` shows, by the command's words after ``memory-core``.
EXAMPLES = {
    "bench": "memory-core bench search --store-size 10000",
    "bench search": "memory-core bench search --store-size 10000 --queries 100",
    "bench ingest": "memory-core bench ingest --turns 50",
    "bench import": "memory-core bench import --records 3000",
    "bench forget": "memory-core bench forget --store-size 100000 --in-process",
    "bench provider": "memory-core bench provider --runs 50 --embedder hash",
    "bench serve": "memory-core bench serve --seconds 10 --turns 200",
    "bench inspector": "memory-core bench inspector --memories 1000 --runs 5",
    "bench ann": "memory-core bench ann --sizes 10000 --derived --k 50 --threads 1",
    "eval": "memory-core eval japanese",
    "eval locomo": "memory-core eval locomo --data locomo10.json --output locomo.json",
    "eval japanese": "memory-core eval japanese --output ja.json",
    "eval pipeline": "memory-core eval pipeline --data locomo10.json",
    "eval truth": "memory-core eval truth --lang en --category secret --show-failures 5",
}


#: The options several benchmarks take, each defined once: its flag and what ``add_argument`` gets.
_SHARED_OPTIONS: dict[str, dict[str, Any]] = {
    "--keep": {"metavar": "PATH", "help": "build (or reuse) the benchmark store at PATH"},
    "--output": {"metavar": "JSON", "help": "also write the figures to this file"},
    "--seed": {"type": int, "default": 7},
    "--threads": {"type": int, "default": 2, "help": "threads of the local embedder"},
    "--charts": {"metavar": "DIR", "help": "draw PNG charts into DIR (needs matplotlib)"},
    "--embedder": {"choices": ["e5-local", "hash"], "default": "e5-local"},
}


def _shared(b: argparse.ArgumentParser, *flags: str) -> None:
    """Add the shared options ``flags`` (:data:`_SHARED_OPTIONS`), in that order."""
    for flag in flags:
        b.add_argument(flag, **_SHARED_OPTIONS[flag])


def _query_cache_size(b: argparse.ArgumentParser, default: int, why: str) -> None:
    """Add ``--query-cache-size``: how many query embeddings are cached, with its default and help ``why``."""
    b.add_argument("--query-cache-size", type=non_negative_int, default=default, help=why)


def _bench_search(b: argparse.ArgumentParser) -> None:
    b.add_argument("--store-size", type=int, default=100_000)
    b.add_argument("--scope-size", type=int, default=1_000)
    b.add_argument("--queries", type=int, default=500)
    b.add_argument("--dimensions", type=int, default=384)
    _shared(b, "--keep", "--output", "--seed")
    b.add_argument("--growth", type=int, nargs="+", metavar="N", help="growth series over these store sizes")
    b.add_argument("--growing-max", type=int, default=100_000, help="largest single growing scope")
    b.add_argument("--keep-dir", metavar="DIR", help="build (or reuse) the growth series stores in DIR")
    _shared(b, "--charts")


def _bench_ingest(b: argparse.ArgumentParser) -> None:
    b.add_argument("--turns", type=int, default=200)
    b.add_argument("--scopes", type=int, default=8)
    _shared(b, "--seed", "--threads")
    b.add_argument(
        "--concurrency",
        type=positive_int,
        nargs="+",
        default=None,
        metavar="N",
        help="turns of different scopes in flight at once, their passages embedded together, like serve's "
        "workers (default: 4, serve's default; several values: one run each, a table and a chart)",
    )
    b.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        metavar="N",
        help="turns of one scope prepared together, their passages embedded in one call, like serve's "
        "workers taking several messages of a session (default: 8, serve's default; 1: none ahead)",
    )
    b.add_argument("--charts", metavar="DIR", help="draw ingest.png into DIR (needs matplotlib)")
    _shared(b, "--output")


def _bench_import(b: argparse.ArgumentParser) -> None:
    b.add_argument("--records", type=positive_int, default=3000, help="records imported")
    b.add_argument("--repeat-share", type=float, default=0.0, help="share of records repeating an earlier text (0..1)")
    _shared(b, "--embedder", "--threads", "--output", "--seed")


def _bench_forget(b: argparse.ArgumentParser) -> None:
    b.add_argument("--store-size", type=int, default=1_000_000)
    b.add_argument("--scope-size", type=int, default=1_000)
    b.add_argument("--dimensions", type=int, default=384)
    b.add_argument("--tolerance", type=float, default=0.01, help="retention drift that is written back")
    b.add_argument("--page-size", type=int, default=20_000)
    _shared(b, "--keep")
    b.add_argument("--tracemalloc", action="store_true", help="add a dry run under tracemalloc (Python heap peak)")
    b.add_argument("--in-process", action="store_true", help="run the jobs in this process (no fresh process each)")
    _shared(b, "--output", "--charts", "--seed")


def _bench_provider(b: argparse.ArgumentParser) -> None:
    b.add_argument("--runs", type=int, default=200)
    b.add_argument("--memories", type=int, default=200, help="memories in the benchmark scope")
    _shared(b, "--embedder", "--threads")
    _query_cache_size(b, 0, "query embeddings cached (the questions repeat: above 0, repeats skip the model)")
    _shared(b, "--output", "--seed")


def _bench_inspector(b: argparse.ArgumentParser) -> None:
    b.add_argument("--memories", type=int, default=10_000, help="memories of the inspected user")
    b.add_argument("--other-users", type=int, default=20, help="other users (100 memories each)")
    b.add_argument("--runs", type=int, default=20, help="timed passes over every view")
    _shared(b, "--keep", "--output", "--seed")


def _bench_ann(b: argparse.ArgumentParser) -> None:
    from memory_core.tools.bench.ann import add_arguments as ann_arguments

    ann_arguments(b)


def _bench_serve(b: argparse.ArgumentParser) -> None:
    b.add_argument("--searchers", type=int, default=20, help="concurrent searchers")
    b.add_argument("--seconds", type=float, default=30.0, help="how long the searchers run")
    b.add_argument("--turns", type=int, default=2000, help="turns posted during the load")
    b.add_argument("--users", type=int, default=50, help="users (one agent each) the turns and searches spread over")
    b.add_argument("--seed-turns", type=int, default=4, help="turns per user processed before the load")
    _shared(b, "--embedder")
    b.add_argument("--workers", type=int, default=4, help="queue workers of the server (serve's default)")
    b.add_argument(
        "--batch", type=positive_int, default=8, help="messages of a session a worker takes at once (serve's default)"
    )
    _shared(b, "--threads")
    b.add_argument("--drain-timeout", type=float, default=600.0, help="longest wait for the rest to be processed")
    b.add_argument(
        "--request-concurrency", type=non_negative_int, default=2, help="the server's --request-concurrency"
    )
    _query_cache_size(
        b, 1024, "the server's MEMORY_QUERY_CACHE_SIZE (the searchers' 10 questions repeat: 0 embeds every one)"
    )
    _shared(b, "--output", "--seed")


#: Every benchmark, in the order ``bench --help`` lists them: name, help, its arguments.
_BENCHES: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None]], ...] = (
    ("search", "search latency on a scope inside a large store", _bench_search),
    ("ingest", "turns per second through the rule path with the local embedder", _bench_ingest),
    ("import", "a bulk import of memory records, stored then embedded, phase by phase", _bench_import),
    ("forget", "forgetting throughput and peak memory over a large store", _bench_forget),
    ("provider", "latency the memory provider adds to an agent run", _bench_provider),
    ("inspector", "the inspector's requests on a scope of 10,000 memories", _bench_inspector),
    ("ann", "an approximate vector index (HNSW) against exact search: recall, speed, size", _bench_ann),
    ("serve", "the embedded server under search load while turns are posted", _bench_serve),
)


def add_arguments(commands: Commands) -> None:
    """Add ``bench`` and ``eval``, with their reports as subcommands."""
    p = commands.add_parser("bench", help="speed reports (--json: the figures as one JSON document)")
    bench = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, text, add in _BENCHES:
        add(bench.add_parser(name, help=text))
    p.set_defaults(handler=cmd_bench)

    p = commands.add_parser(
        "eval", help="quality reports (retrieval on LoCoMo, the Japanese set; --json: the report as JSON)"
    )
    evals = p.add_subparsers(dest="evaluation", required=True, metavar="EVAL")
    from memory_core.tools.evaluation import japanese as eval_japanese
    from memory_core.tools.evaluation import locomo as eval_locomo
    from memory_core.tools.evaluation import pipeline as eval_pipeline
    from memory_core.tools.evaluation import truth as eval_truth

    eval_locomo.add_arguments(evals.add_parser("locomo", help="turn-level retrieval on LoCoMo (no LLM)"))
    eval_japanese.add_arguments(
        evals.add_parser("japanese", help="the Japanese set: retrieval and rule-path consolidation")
    )
    eval_pipeline.add_arguments(
        evals.add_parser("pipeline", help="end to end: turns through the real ingest path, then questions")
    )
    eval_truth.add_arguments(
        evals.add_parser("truth", help="what the memory believes now: supersession, forgetting, secrets, chatter")
    )
    p.set_defaults(handler=cmd_eval)


async def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    """Run the benchmark ``args.bench`` names."""
    from memory_core.tools.bench import run_benchmark

    return await run_benchmark(args, out, progress_for(args))


async def cmd_eval(args: argparse.Namespace, out: TextIO) -> int:
    """Run the evaluation ``args.evaluation`` names (``--data -`` and the like read standard input)."""
    from memory_core.tools.evaluation import run_evaluation

    with tempfile.TemporaryDirectory(prefix="memory-core-") as folder:
        spool_stdin(args, ("data", "set", "distractors"), folder)  # --data - reads standard input
        return await run_evaluation(args, out, progress_for(args))
