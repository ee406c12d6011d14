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
import json
import re
import tempfile
import time
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memory_core.domain.messages import Turn
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.language.date_annotation import strip_date_annotations
from memory_core.ports import FixedClock
from memory_core.tools.evaluation.metrics import DEFAULT_KS, MetricAccumulator
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import (
    DEFAULT_CACHE_DIR,
    cached_embeddings,
    default_embedder,
    markdown_table,
    percentile,
    publish_report,
)

__all__ = [
    "JapaneseQuestion",
    "JapaneseSet",
    "JapaneseUser",
    "consolidation_accuracy",
    "evaluate_retrieval",
    "load_japanese_set",
    "load_jdd_utterances",
    "main",
    "matches",
]

AGENT_ID = "ja-eval"
_MODES = (SearchMode.KEYWORD, SearchMode.VECTOR, SearchMode.HYBRID)
_PROFILES = (RankingProfile.NONE, RankingProfile.IMPORTANT, RankingProfile.RECENT)
_PUNCT = re.compile(r"[\s、。，．,.!?！？「」『』（）()・…ー~〜]+")


@dataclass(frozen=True, slots=True)
class JapaneseQuestion:
    """A question, the turn indexes that answer it, and its kind (paraphrase, update, ...)."""

    question: str
    evidence: tuple[int, ...]
    kind: str


@dataclass(frozen=True, slots=True)
class JapaneseUser:
    """One user's dated turns, expected final memories and questions."""

    user_id: str
    turns: tuple[tuple[datetime, str], ...]
    expected_active: tuple[str, ...]
    questions: tuple[JapaneseQuestion, ...]


@dataclass(frozen=True, slots=True)
class JapaneseSet:
    """The whole set."""

    name: str
    version: int
    users: tuple[JapaneseUser, ...]

    @property
    def questions(self) -> int:
        return sum(len(u.questions) for u in self.users)


def load_japanese_set(path: str | Path | None = None) -> JapaneseSet:
    """Load the set (default: the copy shipped in the package) and check its references.

    Raises:
        ValueError: A question's evidence names a turn the user does not have, or a user has none.
    """
    if path is None:
        text = (
            resources.files("memory_core.tools.evaluation").joinpath("data/japanese_eval.json").read_text("utf-8")
        )
    else:
        text = Path(path).read_text(encoding="utf-8")
    raw = json.loads(text)
    start = date.fromisoformat(raw["start"])
    users = []
    for u in raw["users"]:
        turns = tuple(
            (
                datetime(start.year, start.month, start.day, 9, tzinfo=UTC)
                + timedelta(days=int(t["day"]), minutes=i),
                str(t["text"]),
            )
            for i, t in enumerate(u["turns"])
        )
        if not turns:
            raise ValueError(f"user {u['id']} has no turns")
        questions = []
        for q in u["questions"]:
            evidence = tuple(int(e) for e in q["evidence"])
            if not evidence or any(not 0 <= e < len(turns) for e in evidence):
                raise ValueError(f"user {u['id']}: question {q['q']!r} names a turn that does not exist")
            questions.append(JapaneseQuestion(str(q["q"]), evidence, str(q.get("kind", "paraphrase"))))
        users.append(JapaneseUser(str(u["id"]), turns, tuple(u["expected_active"]), tuple(questions)))
    return JapaneseSet(str(raw.get("name", "")), int(raw.get("version", 1)), tuple(users))


def load_jdd_utterances(path: str | Path) -> list[str]:
    """Every utterance of a Japanese Daily Dialogue topic file, verbatim, in file order."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    dialogues = raw if isinstance(raw, list) else raw.get("dialogues", list(raw.values()))
    texts: list[str] = []
    for dialogue in dialogues:
        utterances = dialogue.get("utterances", []) if isinstance(dialogue, Mapping) else []
        texts.extend(str(u["utterance"]) for u in utterances if str(u.get("utterance", "")).strip())
    return texts


def _norm(text: str) -> str:
    return _PUNCT.sub("", unicodedata.normalize("NFKC", text).lower())


def matches(expected: str, memory: str) -> bool:
    """Whether an active memory holds an expected memory (normalised containment, either way; the
    absolute dates extraction adds after relative ones are not part of what was said)."""
    a, b = _norm(strip_date_annotations(expected)), _norm(strip_date_annotations(memory))
    return bool(a) and bool(b) and (a in b or b in a)


def _scope(user: JapaneseUser) -> Scope:
    return Scope.of(user.user_id, AGENT_ID)


async def evaluate_retrieval(
    data: JapaneseSet,
    *,
    embedder: Any,
    modes: Sequence[SearchMode] = _MODES,
    profiles: Sequence[RankingProfile] = _PROFILES,
    distractors: Sequence[str] = (),
    distractors_per_user: int = 0,
    seed: int = 7,
    cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Retrieval metrics per mode x profile (see the module docstring); progress to ``progress``."""
    from memory_core.adapters.sqlite.store import SQLiteMemoryStore

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
    key = f"ja-{data.version}"
    passages = cached_embeddings(
        embedder, texts, kind="passage", cache_dir=cache_dir, key=key, progress=progress
    )
    all_questions = [(u_at, q) for u_at, user in enumerate(data.users) for q in user.questions]
    query_vectors = cached_embeddings(
        embedder,
        [q.question for _, q in all_questions],
        kind="query",
        cache_dir=cache_dir,
        key=key,
        progress=progress,
    )
    clock = FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    store = SQLiteMemoryStore(":memory:", clock=clock)
    results = []
    configs = [(m, p) for m in modes for p in profiles]
    bar = progress.bar("searching", len(configs) * len(all_questions), unit="questions")
    try:
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
        for start in range(0, len(records), 2000):
            await store.upsert(records[start : start + 2000])
        for mode, profile in configs:
            options = MemorySearchOptions(mode=mode, ranking_profile=profile, top=max(DEFAULT_KS))
            metrics = MetricAccumulator()
            latency: list[float] = []
            for (u_at, q), vector in zip(all_questions, query_vectors, strict=True):
                user = data.users[u_at]
                clock.set(user.turns[-1][0] + timedelta(days=1))
                t0 = time.perf_counter()
                result = await store.search(
                    _scope(user), q.question, None if mode == SearchMode.KEYWORD else vector.tolist(), options
                )
                latency.append((time.perf_counter() - t0) * 1000.0)
                relevant = {f"{user.user_id}-t{e}" for e in q.evidence}
                metrics.add([h.record.id for h in result.hits], relevant, [q.kind])
                bar.advance()
            results.append(
                {
                    "mode": mode.value,
                    "profile": profile.value,
                    "metrics": metrics.result(),
                    "latency_ms": {"p50": percentile(latency, 50), "p95": percentile(latency, 95)},
                }
            )
        bar.finish()
    finally:
        bar.close()
        await store.close()
    return {
        "users": len(data.users),
        "questions": len(all_questions),
        "memories": len(texts),
        "distractors_per_user": distractors_per_user if distractors else 0,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "results": results,
    }


async def consolidation_accuracy(
    data: JapaneseSet, *, embedder: Any, progress: Progress = NO_PROGRESS
) -> dict[str, Any]:
    """Run every user's turns through the rule path; compare the final active memories with the expected."""
    from memory_core.bootstrap import build_service, load_settings

    found = expected_total = matched_active = active_total = exact = 0
    per_user = []
    bar = progress.bar("consolidating", sum(len(u.turns) for u in data.users), unit="turns")
    with bar, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "consolidation.db"
        clock = FixedClock(data.users[0].turns[0][0])
        # The embedded defaults (rules, no LLM) whatever the environment says, with the given embedder.
        service = build_service(load_settings(environ={}, sqlite_path=str(path)), clock=clock, embedder=embedder)
        try:
            for user in data.users:
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
                found += len(hits)
                expected_total += len(user.expected_active)
                matched_active += len(good)
                active_total += len(active)
                is_exact = len(hits) == len(user.expected_active) and len(good) == len(active)
                exact += int(is_exact)
                per_user.append(
                    {
                        "user": user.user_id,
                        "exact": is_exact,
                        "missing": [e for e in user.expected_active if e not in hits],
                        "unexpected": [a for a in active if a not in good],
                    }
                )
        finally:
            await service.close()
    return {
        "users": len(data.users),
        "expected_memories": expected_total,
        "active_memories": active_total,
        "recall": found / expected_total if expected_total else 0.0,
        "precision": matched_active / active_total if active_total else 0.0,
        "users_exact": exact,
        "users_exact_rate": exact / len(data.users) if data.users else 0.0,
        "per_user": per_user,
    }


def render_markdown(report: Mapping[str, Any]) -> str:
    """Retrieval table per configuration, per-kind table for the best, then consolidation accuracy."""
    ks = DEFAULT_KS
    text = ""
    retrieval = report.get("retrieval")
    if retrieval:
        rows = []
        for r in retrieval["results"]:
            m = r["metrics"]["overall"]
            rows.append(
                [
                    r["mode"],
                    r["profile"],
                    *[m[f"any@{k}"] for k in ks],
                    *[m[f"all@{k}"] for k in ks],
                    m["mrr"],
                    r["latency_ms"]["p50"],
                    r["latency_ms"]["p95"],
                ]
            )
        text += markdown_table(
            [
                "mode",
                "profile",
                *[f"any@{k}" for k in ks],
                *[f"all@{k}" for k in ks],
                "MRR",
                "p50 ms",
                "p95 ms",
            ],
            rows,
        )
        best = max(
            retrieval["results"],
            key=lambda r: (r["metrics"]["overall"]["any@1"], r["metrics"]["overall"]["mrr"]),
        )
        text += f"\nper question kind, {best['mode']} + {best['profile']}:\n\n"
        text += markdown_table(
            ["kind", "n", "any@1", "any@5", "MRR"],
            [[g, int(m["n"]), m["any@1"], m["any@5"], m["mrr"]] for g, m in best["metrics"].items()],
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
    from memory_core.tools.reporting import pyplot, save_chart

    plt = pyplot()
    retrieval = report.get("retrieval")
    if plt is None or not retrieval:
        return []
    results = retrieval["results"]
    labels = [f"{r['mode']}\n{r['profile']}" for r in results]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(results)), 3.6))
    width = 0.8 / len(DEFAULT_KS)
    for j, k in enumerate(DEFAULT_KS):
        xs = [i + (j - (len(DEFAULT_KS) - 1) / 2) * width for i in range(len(results))]
        ax.bar(xs, [r["metrics"]["overall"][f"any@{k}"] for r in results], width=width, label=f"any@{k}")
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
            modes=[SearchMode(m) for m in args.modes],
            profiles=[RankingProfile(p) for p in args.profiles],
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
    parser.add_argument(
        "--modes",
        nargs="+",
        default=[m.value for m in _MODES],
        choices=[m.value for m in SearchMode],
        help="search modes to run (default: keyword vector hybrid)",
    )
    parser.add_argument(
        "--profiles",
        nargs="+",
        default=[p.value for p in _PROFILES],
        choices=[p.value for p in RankingProfile],
    )
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--skip-consolidation", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", default=DEFAULT_CACHE_DIR, metavar="DIR", help="embedding cache folder")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--output", metavar="JSON", help="also write the report to this file")
    parser.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs matplotlib)")
