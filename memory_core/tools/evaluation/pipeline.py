"""``memory-core eval pipeline``: what the product remembers, end to end, through the real ingest path.

`eval locomo` and the retrieval part of `eval japanese` import every turn as a memory: they measure
search. This evaluation measures the product: each conversation's turns go through
``MemoryService.ingest`` in time order (rule extraction, consolidation, episodes, the SQLite store,
exactly as ``memory-core serve`` would apply them, 8 turns prepared together as its workers take a
session's messages), then each question is searched the way an agent's
provider searches (``MemoryService.search``, no recall). A hit counts when the memory's provenance
(the turns it came from) includes an evidence turn of the question.

Reported, per data set: coverage (evidence turns that left any memory; turns that produced a fact),
memories per 100 turns (facts and episodes), bytes of store file per turn, and end-to-end any@1/5/10,
all@k and MRR for the default search (hybrid + ``important``) and per mode, overall and per question
category; the same after a forgetting run at question time; and, for LoCoMo, the same questions over
the raw turns imported verbatim (what a plain turn store finds), in the same run, and the temporal
questions (category 2) on their own: any@5 for all memories and for facts alone (``temporal``).

With ``--llm`` extraction and consolidation use the chat model the environment configures
(``MEMORY_LLM_PROVIDER`` and its settings; the rules where it fails), and the report adds what it
cost: calls, requests, prompt and completion tokens and seconds, in all and per turn, beside the
ingest latency per turn.

LoCoMo turns become ``turn.v1`` messages with ``role=user`` and ``name`` = the speaker (both people of a
LoCoMo conversation are users of the memory); a turn's ``occurred_at`` is its session's date plus its
position in seconds. Japanese set turns are one user message each, dated by their ``day``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from memory_core.domain.messages import CandidateKind, Turn
from memory_core.domain.records import MemoryKind, MemoryStatus
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.ports import ChatModel, Embedder, FixedClock
from memory_core.runtime.lanes import DEFAULT_BATCH
from memory_core.tools.evaluation.cases import PipelineCase, japanese_cases, locomo_cases
from memory_core.tools.evaluation.embeddings import add_cache_arguments, add_llm_argument, evaluation_models
from memory_core.tools.evaluation.locomo import (
    add_audit_arguments,
    audit_path,
)
from memory_core.tools.evaluation.locomo import evaluate as evaluate_raw
from memory_core.tools.evaluation.metrics import DEFAULT_KS, MetricAccumulator, metric_label
from memory_core.tools.evaluation.retrieval import Configuration, SearchGrid, group_table
from memory_core.tools.progress import NO_PROGRESS, Bar, Progress
from memory_core.tools.reporting import (
    add_report_arguments,
    markdown_table,
    publish_report,
    pyplot,
    save_chart,
)

__all__ = [
    "add_arguments",
    "evaluate_cases",
    "main",
]


_MODES = (SearchMode.HYBRID, SearchMode.KEYWORD, SearchMode.VECTOR)
DEFAULT = (SearchMode.HYBRID, RankingProfile.IMPORTANT)


def _covered(record: Any, evidence: set[str]) -> str | None:
    for source in record.provenance:
        if source.turn_id in evidence:
            return str(source.turn_id)
    return None


async def _ask(
    service: Any, case: PipelineCase, config: Configuration, into: MetricAccumulator, kind: MemoryKind | None = None
) -> None:
    mode, profile = config
    options = MemorySearchOptions(mode=mode, ranking_profile=profile, top=max(DEFAULT_KS), kind=kind)
    for question, evidence, group in case.questions:
        result = await service.search(case.scope, question, options, recall=False)
        ranked = [_covered(h.record, evidence) or f"m:{h.record.id}" for h in result.hits]
        into.add(ranked, evidence, [group])


@dataclass
class _Tally:
    """What ingesting a set's cases added up to."""

    turns: int = 0
    turns_with_a_fact: int = 0
    facts_active: int = 0
    episodes_active: int = 0
    store_bytes: int = 0
    ingest_seconds: float = 0.0
    evidence_turns: set[tuple[str, str]] = field(default_factory=set)
    remembered_turns: set[tuple[str, str]] = field(default_factory=set)

    def figures(self) -> dict[str, Any]:
        """The report's ``ingest`` block."""
        turns = max(self.turns, 1)
        remembered = self.evidence_turns & self.remembered_turns
        return {
            "turns": self.turns,
            "turns_with_a_fact": self.turns_with_a_fact / turns,
            "evidence_turns_remembered": len(remembered) / max(len(self.evidence_turns), 1),
            "facts_per_100_turns": 100 * self.facts_active / turns,
            "episodes_per_100_turns": 100 * self.episodes_active / turns,
            "store_bytes_per_turn": self.store_bytes / turns,
            "turns_per_second": self.turns / self.ingest_seconds if self.ingest_seconds else 0.0,
        }


async def _ingest(service: Any, clock: FixedClock, case: PipelineCase, tally: _Tally, bar: Bar) -> None:
    """A case's turns through the service in order, as serve's workers take them: a session's next
    turns prepared together, then ingested one by one."""
    started = time.perf_counter()
    for first in range(0, len(case.turns), DEFAULT_BATCH):
        batch = [Turn.model_validate(body) for body in case.turns[first : first + DEFAULT_BATCH]]
        prepared = await service.prepare(batch)
        for turn, ahead in zip(batch, prepared, strict=True):
            clock.set(turn.occurred_at)
            result = await service.ingest(turn, prepared=ahead)
            tally.turns += 1
            if any(s.decision.candidate.kind is CandidateKind.FACT for s in result.steps):
                tally.turns_with_a_fact += 1
            bar.advance()
    tally.ingest_seconds += time.perf_counter() - started


async def _census(service: Any, case: PipelineCase, tally: _Tally) -> None:
    """Count a case's active memories and the turns they (or any memory not deleted) came from."""
    records = [r async for r in service.export(case.scope.user_id, case.scope.agent_id)]
    active = [r for r in records if r.status is MemoryStatus.ACTIVE]
    tally.facts_active += sum(r.kind is MemoryKind.FACT for r in active)
    tally.episodes_active += sum(r.kind is MemoryKind.EPISODE for r in active)
    for r in records:
        if r.status is not MemoryStatus.DELETED:
            tally.remembered_turns.update((case.name, s.turn_id) for s in r.provenance)
    for _, evidence, _ in case.questions:
        tally.evidence_turns.update((case.name, e) for e in evidence)


@dataclass
class _SetRun:
    """What every case of a set is run with, and what its cases add up to.

    Attributes:
        embedder: The passage and query embedder.
        chat_model: The LLM of extraction and consolidation (None: the rules).
        before: The metrics of each search configuration, before forgetting.
        facts: The metrics of the default configuration searching facts alone (``kind=fact``).
        after: The metrics of the default configuration after a forgetting run.
        tally: What ingesting the cases added up to.
    """

    embedder: Embedder
    chat_model: ChatModel | None
    before: dict[Configuration, MetricAccumulator]
    facts: MetricAccumulator = field(default_factory=MetricAccumulator)
    after: MetricAccumulator = field(default_factory=MetricAccumulator)
    tally: _Tally = field(default_factory=_Tally)


async def _run_case(case: PipelineCase, folder: Path, run: _SetRun, bar: Bar) -> None:
    """Ingest one case into its own store, count what it kept, and ask its questions before and after
    a forgetting run."""
    from memory_core.bootstrap import build_service, load_settings

    clock = FixedClock(datetime(2000, 1, 1, tzinfo=UTC))
    service = build_service(
        load_settings(environ={}, sqlite_path=str(folder / f"{case.name}.db")),
        clock=clock,
        embedder=run.embedder,
        chat_model=run.chat_model,
    )
    try:
        await _ingest(service, clock, case, run.tally, bar)
        clock.set(case.asked_at)
        await _census(service, case, run.tally)
        for config, acc in run.before.items():
            await _ask(service, case, config, acc)
        await _ask(service, case, DEFAULT, run.facts, MemoryKind.FACT)
        await service.apply_forgetting(dry_run=False)
        await _ask(service, case, DEFAULT, run.after)
    finally:
        await service.close()
    run.tally.store_bytes += sum(p.stat().st_size for p in folder.glob(f"{case.name}.db*"))


def _llm_figures(
    chat_model: ChatModel | None, usage_before: Mapping[str, float], tally: _Tally
) -> dict[str, Any] | None:
    """This set's share of the model's counters (one model object serves every set), in all and per turn."""
    if chat_model is None:
        return None
    usage = getattr(chat_model, "usage", None)
    turns = max(tally.turns, 1)
    totals = {k: v - usage_before[k] for k, v in usage.as_dict().items()} if usage is not None else {}
    return {
        "model": chat_model.name,
        **totals,
        "per_turn": {name: value / turns for name, value in totals.items()},
        "ingest_seconds_per_turn": tally.ingest_seconds / turns,
    }


async def evaluate_cases(
    cases: Sequence[PipelineCase],
    *,
    embedder: Embedder,
    modes: Sequence[SearchMode] = _MODES,
    progress: Progress = NO_PROGRESS,
    chat_model: ChatModel | None = None,
) -> dict[str, Any]:
    """Ingest every case through the service, then search its questions; see the module docstring.

    Args:
        cases: The conversations and their questions.
        embedder: The passage and query embedder.
        modes: Search modes reported with the ``important`` profile.
        progress: Where progress is reported.
        chat_model: The LLM of extraction and consolidation (None: the rules); its ``usage`` (if it
            counts one) is reported under ``llm``.
    """
    configs = [(mode, RankingProfile.IMPORTANT) for mode in modes]
    if DEFAULT not in configs:
        configs.insert(0, DEFAULT)
    run = _SetRun(embedder, chat_model, {c: MetricAccumulator() for c in configs})
    usage = getattr(chat_model, "usage", None)
    usage_before: dict[str, float] = usage.as_dict() if usage is not None else {}
    bar = progress.bar("ingesting", sum(len(c.turns) for c in cases), unit="turns")
    with bar, tempfile.TemporaryDirectory(prefix="memory-core-eval-") as tmp:
        for case in cases:
            await _run_case(case, Path(tmp), run, bar)
    return {
        "llm": _llm_figures(chat_model, usage_before, run.tally),
        "cases": len(cases),
        "questions": sum(len(c.questions) for c in cases),
        "ingest": run.tally.figures(),
        "results": [
            {"mode": mode.value, "profile": profile.value, "forgetting": False, "metrics": acc.result()}
            for (mode, profile), acc in run.before.items()
        ]
        + [
            {
                "mode": DEFAULT[0].value,
                "profile": DEFAULT[1].value,
                "forgetting": False,
                "kind": MemoryKind.FACT.value,
                "metrics": run.facts.result(),
            }
        ]
        + [
            {
                "mode": DEFAULT[0].value,
                "profile": DEFAULT[1].value,
                "forgetting": True,
                "metrics": run.after.result(),
            }
        ],
    }


def _cost_line(llm: Mapping[str, Any] | None) -> str:
    """What the chat model cost, in all and per turn (nothing without one)."""
    if not llm:
        return ""
    per = llm.get("per_turn", {})
    return (
        f"LLM `{llm['model']}`: {llm.get('calls', 0)} calls, {llm.get('requests', 0)} requests, "
        f"{llm.get('prompt_tokens', 0)} prompt + {llm.get('completion_tokens', 0)} completion tokens "
        f"({per.get('prompt_tokens', 0):.0f} + {per.get('completion_tokens', 0):.0f} per turn), "
        f"{per.get('seconds', 0):.2f} s of LLM time and {llm['ingest_seconds_per_turn']:.2f} s of "
        "ingest per turn\n\n"
    )


def _ingest_table(ingest: Mapping[str, Any]) -> str:
    return markdown_table(
        [
            "evidence turns remembered",
            "turns with a fact",
            "facts / 100 turns",
            "episodes / 100 turns",
            "store bytes / turn",
            "ingest turns/s",
        ],
        [
            [
                ingest["evidence_turns_remembered"],
                ingest["turns_with_a_fact"],
                ingest["facts_per_100_turns"],
                ingest["episodes_per_100_turns"],
                round(ingest["store_bytes_per_turn"]),
                ingest["turns_per_second"],
            ]
        ],
    )


#: The metrics of the search table, after the search's name.
_SEARCH_METRICS = (*(f"any@{k}" for k in DEFAULT_KS), "all@5", "mrr")


def _search_table(section: Mapping[str, Any]) -> str:
    """One row per search: through the product, after forgetting, and over the raw turns."""
    rows = []
    for r in section["results"]:
        label = f"{r['mode']} + {r['profile']}" + (", after forgetting" if r["forgetting"] else "")
        label += ", facts alone" if r.get("kind") == MemoryKind.FACT.value else ""
        rows.append([label, *(r["metrics"]["overall"][n] for n in _SEARCH_METRICS)])
    for r in section.get("raw_turns", []):
        label = f"raw turns: {r['mode']} + {r['profile']}"
        rows.append([label, *(r["metrics"]["overall"][n] for n in _SEARCH_METRICS)])
    return markdown_table(["search", *(metric_label(n) for n in _SEARCH_METRICS)], rows)


#: LoCoMo's temporal questions, as their group is named.
TEMPORAL_GROUP = "2-temporal"


def temporal_figures(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Any@5 of the temporal questions for all memories and for facts alone (default search, before
    forgetting), with their count; empty when the set has none."""
    figures: dict[str, Any] = {}
    for r in results:
        if r["forgetting"] or (r["mode"], r["profile"]) != (DEFAULT[0].value, DEFAULT[1].value):
            continue
        group = r["metrics"].get(TEMPORAL_GROUP)
        if group is None:
            continue
        key = "facts_alone" if r.get("kind") == MemoryKind.FACT.value else "all_memories"
        figures.setdefault(key, group["any@5"])
        figures.setdefault("n", int(group["n"]))
    return figures


def _temporal_line(section: Mapping[str, Any]) -> str:
    figures = section.get("temporal") or {}
    if "all_memories" not in figures:
        return ""
    facts = figures.get("facts_alone")
    return (
        f"temporal questions (category 2, {figures['n']}), {DEFAULT[0].value} + {DEFAULT[1].value} any@5: "
        f"all memories {figures['all_memories']:.3f}"
        + (f", facts alone {facts:.3f}" if facts is not None else "")
        + "\n"
    )


def render_markdown(report: Mapping[str, Any]) -> str:
    """Per set: what ingest kept (and cost), the searches, and the default search per question group."""
    parts = []
    for name, section in report["sets"].items():
        ingest = section["ingest"]
        parts.append(
            f"### {name}: {section['cases']} conversations, {ingest['turns']} turns, {section['questions']} questions\n\n"
            + _cost_line(section.get("llm"))
            + _ingest_table(ingest)
        )
        parts.append(_search_table(section) + _temporal_line(section))
        default = section["results"][0]
        parts.append(
            f"per question group, {default['mode']} + {default['profile']}:\n\n"
            + group_table(default["metrics"], "group", ("any@1", "any@5", "any@10", "mrr"))
        )
    return "\n".join(parts)


def draw_chart(report: Mapping[str, Any], directory: str | Path) -> list[str]:
    """``pipeline_<set>.png``: end-to-end any@5 of every search of a set (raw turns in grey)."""
    plt = pyplot()
    if plt is None:
        return []
    written = []
    for name, section in report["sets"].items():
        labels, values = [], []
        for r in section["results"]:
            facts = "\nfacts alone" if r.get("kind") == MemoryKind.FACT.value else ""
            labels.append(f"{r['mode']}\n{'after forgetting' if r['forgetting'] else r['profile']}{facts}")
            values.append(r["metrics"]["overall"]["any@5"])
        for r in section.get("raw_turns", []):
            labels.append(f"raw turns\n{r['mode']}")
            values.append(r["metrics"]["overall"]["any@5"])
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.bar(
            range(len(values)),
            values,
            color=["#1f77b4"] * (len(values) - len(section.get("raw_turns", [])))
            + ["#999999"] * len(section.get("raw_turns", [])),
        )
        ax.set_xticks(range(len(values)), labels, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("end-to-end any@5")
        ax.set_title(f"{name}: what the product remembers, through the real ingest path")
        written.append(save_chart(plt, fig, directory, f"pipeline_{name.lower()}.png"))
    return written


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core eval pipeline``: the report on ``out``, progress to ``progress``."""
    modes = [SearchMode(m) for m in args.modes]
    async with evaluation_models(args, "pipeline", "eval pipeline") as models:
        embedder, chat_model = models.embedder, models.chat_model
        report: dict[str, Any] = {
            "benchmark": "pipeline",
            "embedder": models.name,
            "extraction": f"llm {chat_model.name}" if chat_model is not None else "rules",
            "sets": {},
        }
        if args.data:
            cases, data = locomo_cases(args.data, audit_path(args), args.limit_conversations)
            section = await evaluate_cases(
                cases, embedder=embedder, modes=modes, progress=progress, chat_model=chat_model
            )
            embedder.save()
            raw = await evaluate_raw(
                data,
                embedder=models.inner,
                grid=SearchGrid((DEFAULT[0],), (DEFAULT[1],)),
                cache_dir=None if args.no_cache else args.cache,
                progress=progress,
            )
            section["raw_turns"] = raw["results"]
            section["temporal"] = temporal_figures(section["results"])
            report["sets"]["LoCoMo"] = section
        if not args.skip_japanese:
            report["sets"]["Japanese"] = await evaluate_cases(
                japanese_cases(args.set), embedder=embedder, modes=modes, progress=progress, chat_model=chat_model
            )
    publish_report(report, args, out, render_markdown, draw_chart)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``eval pipeline`` options."""
    parser.add_argument("--data", metavar="PATH", help="locomo10.json (without it: the Japanese set only)")
    add_audit_arguments(parser)
    parser.add_argument(
        "--set", metavar="PATH", help="the Japanese evaluation set (default: the packaged one)"
    )
    parser.add_argument("--skip-japanese", action="store_true", help="LoCoMo only")
    add_llm_argument(parser, ", and report its cost")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=[m.value for m in _MODES],
        choices=[m.value for m in SearchMode if m is not SearchMode.SEMANTIC],
        help="search modes to report with the important profile (default: hybrid keyword vector)",
    )
    parser.add_argument(
        "--limit-conversations", type=int, metavar="N", help="only the first N LoCoMo conversations"
    )
    add_cache_arguments(parser)
    add_report_arguments(parser)
