"""``memory-core eval japanese``: the Japanese evaluation set written for memory-core.

The set (``memory_core/tools/evaluation/data/japanese_eval.json``, original sentences) has 30 users, each
a short dated conversation of facts stated to an assistant (preferences, constraints, profile
facts, plans with temporal phrases such as 来週 or 先月, updates and contradictions of earlier
facts, small talk), the memories a careful human would keep at the end, and paraphrased questions
whose answers are particular turns (for an update, only the newest statement counts).

Two measurements:

* **Retrieval**, as for LoCoMo: every turn is a memory of its user's scope (``updated_at`` = the
  turn's day), each question is searched in every mode x profile; any@k, all@k (k = 1, 5, 10) and MRR,
  overall and per question kind, with search latency. ``--distractors PATH`` adds utterances of the
  Japanese Daily Dialogue corpus (read verbatim at run time, never stored) to every scope.
* **Consolidation accuracy** of the rule path: each user's turns go through rule extraction, rule
  consolidation and the store (:meth:`memory_core.service.MemoryService.ingest`); the final active memories
  are compared with the expected ones. An expected memory is found when its normalised text is
  contained in an active memory's (or the reverse). Reported: recall (expected memories found),
  precision (active memories that match an expected one), and users whose active set is exactly right.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.domain.messages import Turn
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.language.date_annotation import strip_date_annotations
from memory_core.ports import FixedClock
from memory_core.tools.evaluation.embeddings import (
    DEFAULT_CACHE_DIR,
    add_cache_arguments,
    cached_embeddings,
    default_embedder,
)
from memory_core.tools.evaluation.japanese_data import (
    JapaneseSet,
    JapaneseUser,
    load_japanese_set,
    load_jdd_utterances,
)
from memory_core.tools.evaluation.metrics import DEFAULT_KS
from memory_core.tools.evaluation.retrieval import (
    Question,
    SearchGrid,
    add_configuration_arguments,
    results_and_best_tables,
    search_configurations,
)
from memory_core.tools.progress import NO_PROGRESS, Bar, Progress
from memory_core.tools.reporting import (
    add_report_arguments,
    grouped_bars,
    markdown_table,
    publish_report,
    pyplot,
    save_chart,
)

__all__ = [
    "add_arguments",
    "consolidation_accuracy",
    "evaluate_retrieval",
    "main",
    "matches",
]

AGENT_ID = "ja-eval"
_PUNCT = re.compile(r"[\s、。，．,.!?！？「」『』（）()・…ー~〜]+")


def _norm(text: str) -> str:
    return _PUNCT.sub("", unicodedata.normalize("NFKC", text).lower())


def matches(expected: str, memory: str) -> bool:
    """Whether an active memory holds an expected memory (normalised containment, either way; the
    absolute dates extraction adds after relative ones are not part of what was said)."""
    a, b = _norm(strip_date_annotations(expected)), _norm(strip_date_annotations(memory))
    return bool(a) and bool(b) and (a in b or b in a)


def _scope(user: JapaneseUser) -> Scope:
    return Scope.of(user.user_id, AGENT_ID)


def _memories(
    data: JapaneseSet, distractors: Sequence[str], distractors_per_user: int, seed: int
) -> tuple[list[str], list[tuple[int, str, datetime]]]:
    """Every memory's text and (user index, memory id, time): each user's turns, then its distractors."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    owners: list[tuple[int, str, datetime]] = []
    for u_at, user in enumerate(data.users):
        for t_at, (when, text) in enumerate(user.turns):
            texts.append(text)
            owners.append((u_at, f"{user.user_id}-t{t_at}", when))
        if distractors and distractors_per_user:
            first, last = user.turns[0][0], user.turns[-1][0]
            span = max((last - first).total_seconds(), 86400.0)
            picks = rng.choice(
                len(distractors), size=min(distractors_per_user, len(distractors)), replace=False
            )
            for d_at, pick in enumerate(picks):
                texts.append(distractors[int(pick)])
                owners.append(
                    (u_at, f"{user.user_id}-d{d_at}", first + timedelta(seconds=float(rng.uniform(0, span))))
                )
    return texts, owners


async def evaluate_retrieval(
    data: JapaneseSet,
    *,
    embedder: Any,
    grid: SearchGrid,
    distractors: Sequence[str] = (),
    distractors_per_user: int = 0,
    seed: int = 7,
    cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Retrieval metrics in each configuration of ``grid`` (module docstring); progress to ``progress``."""
    texts, owners = _memories(data, distractors, distractors_per_user, seed)
    key = f"ja-{data.version}"
    passages = cached_embeddings(
        embedder, texts, kind="passage", cache_dir=cache_dir, key=key, progress=progress
    )
    all_questions = [(user, q) for user in data.users for q in user.questions]
    query_vectors = cached_embeddings(
        embedder,
        [q.question for _, q in all_questions],
        kind="query",
        cache_dir=cache_dir,
        key=key,
        progress=progress,
    )
    records = [
        MemoryRecord(
            id=memory_id,
            user_id=data.users[u_at].user_id,
            agent_id=AGENT_ID,
            memory=text,
            category="dialogue",
            created_at=when,
            updated_at=when,
            embedding=vector.tolist(),
        )
        for (u_at, memory_id, when), text, vector in zip(owners, texts, passages, strict=True)
    ]
    questions = [
        Question(
            scope=_scope(user),
            text=q.question,
            vector=vector,
            relevant=frozenset(f"{user.user_id}-t{e}" for e in q.evidence),
            groups=(q.kind,),
            asked_at=user.turns[-1][0] + timedelta(days=1),
        )
        for (user, q), vector in zip(all_questions, query_vectors, strict=True)
    ]
    results = await search_configurations(
        records,
        questions,
        grid,
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)),
        progress=progress,
    )
    return {
        "users": len(data.users),
        "questions": len(all_questions),
        "memories": len(texts),
        "distractors_per_user": distractors_per_user if distractors else 0,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "results": results,
    }


@dataclass(frozen=True, slots=True)
class _UserScore:
    """How one user's active facts compare with the expected memories."""

    user: JapaneseUser
    active: list[str]
    hits: list[str]
    good: list[str]

    @property
    def exact(self) -> bool:
        return len(self.hits) == len(self.user.expected_active) and len(self.good) == len(self.active)

    def as_dict(self) -> dict[str, Any]:
        return {
            "user": self.user.user_id,
            "exact": self.exact,
            "missing": [e for e in self.user.expected_active if e not in self.hits],
            "unexpected": [a for a in self.active if a not in self.good],
        }


async def _consolidate_user(service: Any, clock: FixedClock, user: JapaneseUser, bar: Bar) -> _UserScore:
    """Ingest one user's turns in order; score the facts left active."""
    scope = _scope(user)
    for t_at, (when, text) in enumerate(user.turns):
        clock.set(when)
        turn = Turn.model_validate(
            {
                "turn_id": f"{user.user_id}-t{t_at}",
                "user_id": scope.user_id,
                "agent_id": scope.agent_id,
                "occurred_at": when,
                "messages": [{"role": "user", "text": text}],
            }
        )
        await service.ingest(turn)
        bar.advance()
    page = await service.list(scope, statuses=[MemoryStatus.ACTIVE], limit=1000)
    # The facts the rule path kept (episodes are the user's words, kept whatever the rules do).
    active = [r.memory for r in page.records if r.kind is MemoryKind.FACT]
    hits = [e for e in user.expected_active if any(matches(e, a) for a in active)]
    good = [a for a in active if any(matches(e, a) for e in user.expected_active)]
    return _UserScore(user, active, hits, good)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


async def consolidation_accuracy(
    data: JapaneseSet, *, embedder: Any, progress: Progress = NO_PROGRESS
) -> dict[str, Any]:
    """Run every user's turns through the rule path; compare the final active memories with the expected."""
    from memory_core.bootstrap import build_service, load_settings

    scores: list[_UserScore] = []
    bar = progress.bar("consolidating", sum(len(u.turns) for u in data.users), unit="turns")
    with bar, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "consolidation.db"
        clock = FixedClock(data.users[0].turns[0][0])
        # The embedded defaults (rules, no LLM) whatever the environment says, with the given embedder.
        service = build_service(load_settings(environ={}, sqlite_path=str(path)), clock=clock, embedder=embedder)
        try:
            for user in data.users:
                scores.append(await _consolidate_user(service, clock, user, bar))
        finally:
            await service.close()
    expected_total = sum(len(s.user.expected_active) for s in scores)
    active_total = sum(len(s.active) for s in scores)
    exact = sum(int(s.exact) for s in scores)
    return {
        "users": len(data.users),
        "expected_memories": expected_total,
        "active_memories": active_total,
        "recall": _ratio(sum(len(s.hits) for s in scores), expected_total),
        "precision": _ratio(sum(len(s.good) for s in scores), active_total),
        "users_exact": exact,
        "users_exact_rate": _ratio(exact, len(data.users)),
        "per_user": [s.as_dict() for s in scores],
    }


def render_markdown(report: Mapping[str, Any]) -> str:
    """Retrieval table per configuration, per-kind table for the best, then consolidation accuracy."""
    text = ""
    retrieval = report.get("retrieval")
    if retrieval:
        text += results_and_best_tables(
            retrieval["results"],
            rank_by=("any@1", "mrr"),
            groups="question kind",
            heading="kind",
            names=("any@1", "any@5", "mrr"),
        )
    consolidation = report.get("consolidation")
    if consolidation:
        text += "\nconsolidation (rule path):\n\n" + markdown_table(
            ["users", "expected", "active", "recall", "precision", "users exactly right"],
            [
                [
                    consolidation["users"],
                    consolidation["expected_memories"],
                    consolidation["active_memories"],
                    consolidation["recall"],
                    consolidation["precision"],
                    f"{consolidation['users_exact']}/{consolidation['users']}",
                ]
            ],
        )
    return text


def draw_chart(report: Mapping[str, Any], directory: str | Path) -> list[str]:
    """``japanese_recall.png``: any@k by mode and profile."""
    plt = pyplot()
    retrieval = report.get("retrieval")
    if plt is None or not retrieval:
        return []
    results = retrieval["results"]
    labels = [f"{r['mode']}\n{r['profile']}" for r in results]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(results)), 3.6))
    series = [(f"any@{k}", [r["metrics"]["overall"][f"any@{k}"] for r in results]) for k in DEFAULT_KS]
    grouped_bars(ax, series, len(results))
    ax.set_xticks(range(len(results)), labels, fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of questions")
    ax.set_title(
        f"Japanese set retrieval ({retrieval['questions']} questions, {retrieval['memories']} memories)",
        fontsize=9,
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return [save_chart(plt, fig, directory, "japanese_recall.png")]


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core eval japanese``: the report on ``out``, progress to ``progress``."""
    data = load_japanese_set(args.set)
    embedder = getattr(args, "embedder_instance", None) or default_embedder()
    distractors = load_jdd_utterances(args.distractors) if args.distractors else []
    report: dict[str, Any] = {"benchmark": "japanese", "set": {"name": data.name, "version": data.version}}
    if not args.skip_retrieval:
        report["retrieval"] = await evaluate_retrieval(
            data,
            embedder=embedder,
            grid=SearchGrid.from_args(args),
            distractors=distractors,
            distractors_per_user=args.distractors_per_user,
            seed=args.seed,
            cache_dir=None if args.no_cache else args.cache,
            progress=progress,
        )
    if not args.skip_consolidation:
        report["consolidation"] = await consolidation_accuracy(data, embedder=embedder, progress=progress)
    publish_report(report, args, out, render_markdown, draw_chart)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``eval japanese`` options."""
    parser.add_argument("--set", metavar="PATH", help="the evaluation set JSON (default: the packaged one)")
    parser.add_argument("--distractors", metavar="PATH", help="a Japanese Daily Dialogue topic JSON file")
    parser.add_argument("--distractors-per-user", type=int, default=200, help="distractor memories per user")
    add_configuration_arguments(parser)
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--skip-consolidation", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    add_cache_arguments(parser)
    add_report_arguments(parser)
