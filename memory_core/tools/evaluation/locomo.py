"""``memory-core eval locomo``: turn-level retrieval on LoCoMo, without an LLM.

Each conversation's turns become the memories of one scope: the turn's text (an image turn adds its
caption), by default prefixed with the session's date and the speaker, e.g.
``[8 May 2023] Caroline: ...``, with ``updated_at`` set to the session's date (so the RECENT profile
has something to work with; the store's clock stands on the day after the conversation's last
session). Passages and questions are embedded once and cached on disk. Each question of categories
1-4 is searched in its conversation's scope, for every search mode and ranking profile asked for, and
scored against its evidence turns: any@k, all@k (k = 1, 5, 10) and MRR of the first evidence hit,
overall and per category, with the store's search latency (query embedding excluded). The gold data
is corrected as :mod:`~memory_core.tools.evaluation.locomo_data` says; questions left without
evidence are skipped and counted.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.domain.records import MemoryRecord, Scope
from memory_core.ports import FixedClock
from memory_core.tools.evaluation.embeddings import (
    DEFAULT_CACHE_DIR,
    add_cache_arguments,
    cached_embeddings,
    default_embedder,
)
from memory_core.tools.evaluation.locomo_data import (
    CATEGORY_NAMES,
    EVALUATED_CATEGORIES,
    TEXT_FORMATS,
    LocomoData,
    LocomoQuestion,
    load_locomo,
    turn_text,
)
from memory_core.tools.evaluation.metrics import DEFAULT_KS, METRICS, metric_label
from memory_core.tools.evaluation.retrieval import (
    Question,
    SearchGrid,
    add_configuration_arguments,
    results_and_best_tables,
    search_configurations,
)
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import add_report_arguments, grouped_bars, publish_report, pyplot, save_chart

__all__ = ["add_arguments", "add_audit_arguments", "audit_path", "evaluate", "main"]

AGENT_ID = "locomo"


def _memory_id(conversation: int, dia_id: str) -> str:
    return f"c{conversation}-{dia_id.replace(':', '-')}"


def _scope(conversation: int) -> Scope:
    return Scope.of(f"conv{conversation}", AGENT_ID)


def _records(data: LocomoData, vectors: np.ndarray, text_format: str) -> list[MemoryRecord]:
    """Every turn as a memory of its conversation's scope, dated by its session."""
    records = []
    for turn, vector in zip(data.turns, vectors, strict=True):
        scope = _scope(turn.conversation)
        records.append(
            MemoryRecord(
                id=_memory_id(turn.conversation, turn.dia_id),
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                memory=turn_text(turn, text_format),
                category="dialogue",
                importance=0.5,
                confidence=1.0,
                source="locomo",
                retention_score=1.0,
                created_at=turn.date,
                updated_at=turn.date,
                metadata={"speaker": turn.speaker, "session": turn.session},
                embedding=vector.tolist(),
            )
        )
    return records


def _asked(data: LocomoData, questions: list[LocomoQuestion], vectors: np.ndarray) -> list[Question]:
    """The questions as the store is asked them: conversation by conversation, each on the day after
    its conversation's last session."""
    last_date: dict[int, datetime] = {}
    for t in data.turns:
        last_date[t.conversation] = max(last_date.get(t.conversation, t.date), t.date)
    asked = []
    for i in sorted(range(len(questions)), key=lambda i: questions[i].conversation):
        q = questions[i]
        asked.append(
            Question(
                scope=_scope(q.conversation),
                text=q.question,
                vector=vectors[i],
                relevant=frozenset(_memory_id(q.conversation, e) for e in q.evidence),
                groups=(f"{q.category}-{CATEGORY_NAMES.get(q.category, '?')}",),
                asked_at=last_date[q.conversation] + timedelta(days=1),
            )
        )
    return asked


async def evaluate(
    data: LocomoData,
    *,
    embedder: Any,
    grid: SearchGrid,
    text_format: str = "dated",
    embed_format: str | None = None,
    vector_k: int = 50,
    vector_weight: float | None = None,
    cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
    categories: Sequence[int] = EVALUATED_CATEGORIES,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Search every evaluated question in every configuration of ``grid``; metrics and latency of each.

    Args:
        data: From :func:`load_locomo`.
        embedder: Passage and query embedder (see :func:`~memory_core.tools.evaluation.embeddings.cached_embeddings`).
        grid: The search modes and ranking profiles to run.
        text_format: One of :data:`TEXT_FORMATS`: the memory text (what BM25 indexes).
        embed_format: The text that is embedded (default: ``text_format``), e.g. ``speaker`` to keep
            the date out of the vector while BM25 still sees it.
        vector_k: The vector leg's k.
        vector_weight: The vector leg's weight in hybrid fusion (the text leg has 1); ``None``: the
            product's default for the query's language (:mod:`memory_core.domain.fusion`).
        cache_dir: Embedding cache folder (None: no cache).
        categories: Question categories to evaluate.
        progress: Where progress is reported.
    """
    questions = [q for q in data.questions if q.category in categories and q.evidence]
    skipped = sum(1 for q in data.questions if q.category in categories and not q.evidence)
    key = f"locomo-{data.sha256[:16]}"
    passages = cached_embeddings(
        embedder,
        [turn_text(t, embed_format or text_format) for t in data.turns],
        kind="passage",
        cache_dir=cache_dir,
        key=key,
        progress=progress,
    )
    query_vectors = cached_embeddings(
        embedder, [q.question for q in questions], kind="query", cache_dir=cache_dir, key=key, progress=progress
    )
    results = await search_configurations(
        _records(data, passages, text_format),
        _asked(data, questions, query_vectors),
        grid,
        clock=FixedClock(datetime(2000, 1, 1, tzinfo=UTC)),
        progress=progress,
        vector_k=vector_k,
        vector_weight=vector_weight,
    )
    return {
        "benchmark": "locomo",
        "data": {
            "sha256": data.sha256,
            "conversations": len(data.conversations()),
            "turns": len(data.turns),
            "questions_evaluated": len(questions),
            "questions_skipped_without_evidence": skipped,
            "categories": list(categories),
            **data.stats,
        },
        "configuration": {
            "text_format": text_format,
            "embed_format": embed_format or text_format,
            "vector_k": vector_k,
            "vector_weight": vector_weight,
            "top": max(DEFAULT_KS),
            "embedder": getattr(embedder, "name", type(embedder).__name__),
            "query_embedding": "excluded from latency",
        },
        "results": results,
    }


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report's tables: every configuration overall, then per category for the best one."""
    config = report["configuration"]
    text = (
        f"memory text: {config['text_format']}; embedded text: {config.get('embed_format', config['text_format'])}; "
        f"vector k: {config['vector_k']}; vector weight: {config.get('vector_weight') or 'by language'}; embedder: {config['embedder']}; "
        f"{report['data']['questions_evaluated']} questions\n\n"
    )
    return text + results_and_best_tables(
        report["results"], rank_by=("any@5",), groups="category", heading="questions"
    )


def draw_chart(report: Mapping[str, Any], directory: str | Path) -> list[str]:
    """``locomo_recall.png``: any@k and all@k by mode, one panel per profile. Returns the files written."""
    plt = pyplot()
    if plt is None:
        return []
    results = report["results"]
    profiles = list(dict.fromkeys(r["profile"] for r in results))
    modes = list(dict.fromkeys(r["mode"] for r in results))
    overall: dict[tuple[str, str], Mapping[str, float]] = {}
    for r in results:
        overall.setdefault((r["mode"], r["profile"]), r["metrics"]["overall"])
    fig, axes = plt.subplots(1, len(profiles), figsize=(4.2 * len(profiles), 3.6), sharey=True, squeeze=False)
    for ax, profile in zip(axes[0], profiles, strict=True):
        series = [
            (mode, None if (mode, profile) not in overall else [overall[mode, profile][k] for k in METRICS])
            for mode in modes
        ]
        grouped_bars(ax, series, len(METRICS))
        ax.set_xticks(range(len(METRICS)), [metric_label(k) for k in METRICS], rotation=45, fontsize=8)
        ax.set_title(f"profile: {profile}", fontsize=9)
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("fraction of questions")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(
        f"LoCoMo retrieval (categories 1-4, {report['data']['questions_evaluated']} questions)", fontsize=10
    )
    return [save_chart(plt, fig, directory, "locomo_recall.png")]


def audit_path(args: argparse.Namespace) -> str | None:
    """The audit file to apply: ``--audit``, else ``locomo10_audit_errors.json`` beside ``--data``
    when it exists; none with ``--no-audit``."""
    if args.no_audit:
        return None
    if args.audit is not None:
        return str(args.audit)
    candidate = Path(args.data).with_name("locomo10_audit_errors.json")
    return str(candidate) if candidate.exists() else None


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--audit`` and ``--no-audit`` (what :func:`audit_path` reads)."""
    parser.add_argument(
        "--audit", metavar="PATH", help="LoCoMo audit errors JSON (default: next to --data if present)"
    )
    parser.add_argument("--no-audit", action="store_true", help="use LoCoMo's gold evidence as published")


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core eval locomo``: the report on ``out``, progress to ``progress``."""
    audit = audit_path(args)
    data = load_locomo(args.data, audit).first(args.limit_conversations)
    embedder = getattr(args, "embedder_instance", None) or default_embedder()
    report = await evaluate(
        data,
        embedder=embedder,
        grid=SearchGrid.from_args(args),
        text_format=args.text_format,
        embed_format=args.embed_format,
        vector_k=args.vector_k,
        vector_weight=args.vector_weight,
        cache_dir=None if args.no_cache else args.cache,
        progress=progress,
    )
    report["data"]["audit_applied"] = audit is not None
    publish_report(report, args, out, render_markdown, draw_chart)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``eval locomo`` options."""
    parser.add_argument("--data", required=True, metavar="PATH", help="locomo10.json")
    add_audit_arguments(parser)
    add_configuration_arguments(parser, profiles_help="ranking profiles to run (default: none important recent)")
    parser.add_argument(
        "--text-format",
        choices=TEXT_FORMATS,
        default="dated",
        help="memory text: [date] speaker: text (dated), speaker: text, or text",
    )
    parser.add_argument(
        "--embed-format", choices=TEXT_FORMATS, help="text that is embedded (default: --text-format)"
    )
    parser.add_argument("--vector-k", type=int, default=50, help="the vector leg's k")
    parser.add_argument(
        "--vector-weight",
        type=float,
        default=None,
        help="the vector leg's weight in hybrid fusion (text: 1; default: by the query's language)",
    )
    parser.add_argument("--limit-conversations", type=int, metavar="N", help="only the first N conversations")
    add_cache_arguments(parser)
    add_report_arguments(parser)
