"""``memory-core eval truth``: what the memory believes now (supersession, forgetting, secrets, chatter).

Each scenario of the set (:mod:`memory_core.tools.evaluation.truth_data`) gets a fresh embedded store
(the embedded defaults whatever the environment says: rules, or with ``--llm`` the configured chat
model; the given embedder), a :class:`~memory_core.client.local.LocalMemoryClient` over a service whose
clock is pinned (to each turn's time while it is added, then to the set's reference time), and its
turns added one by one with ``client.add`` as the Python API adds them (``occurred_at`` = the reference
time minus the turn's ``days_ago``). Each probe then asks what an agent would be handed:
:func:`~memory_core.integrations.reading.memories_for_run` with the provider's default options
(``MemorySearchOptions()``: hybrid, ``important``, top 5, no recall) and relevance floor (0.5), and the same
with ``kind=fact`` ("facts alone", where ``values_lost`` also counts the values no active fact holds).

The metrics (:mod:`memory_core.tools.evaluation.truth_metrics`), each overall, per category and per
language, as ``n/N``:

* ``current_first``: probes with a current value whose first injected memory holds it;
* ``superseded_as_current``: probes with superseded values where a top-5 hit holds one (and no current
  value) and is not marked superseded;
* ``forgotten_found``: scenarios with forbidden strings where one is found anywhere: a search (top 50,
  archived included) for each probe and for the string itself, the list of every status (active,
  archived, deleted), the export, or the history (before/after texts and reasons);
* ``values_lost``: values that must stay but are in no active memory;
* ``chatter_kept``: chatter lines that became (or sit inside) an active memory;
* ``unanswerable_silent``: probes about what was never said that inject nothing;
* ``answerable_hits``: answerable probes with a current value in the top 5.

The temporal categories (when-questions, as-of questions, last/next-period questions, passed plans)
are scored by their own metrics (:data:`~memory_core.tools.evaluation.truth_metrics.TEMPORAL_METRICS`,
under ``temporal`` in the report), and so are the entity categories (:data:`~memory_core.tools.
evaluation.truth_metrics.ENTITY_METRICS`, under ``entities``); a probe with ``asked_days_after`` is asked with the clock that
many days past the reference time.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Coroutine
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from memory_core.client.local import LocalMemoryClient
from memory_core.domain.chat import turn_messages
from memory_core.domain.messages import Turn
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.relevance import DEFAULT_RELEVANCE_FLOOR
from memory_core.domain.search import MemorySearchOptions, SearchHit
from memory_core.domain.validation import parse_model
from memory_core.integrations.reading import memories_for_run
from memory_core.ports import ChatModel, Embedder, FixedClock
from memory_core.tools.evaluation.embeddings import add_cache_arguments, add_llm_argument, evaluation_models
from memory_core.tools.evaluation.truth_data import (
    CATEGORIES,
    ENTITY_CATEGORIES,
    LANGUAGES,
    TEMPORAL_CATEGORIES,
    TruthScenario,
    TruthSet,
    TruthTurn,
    load_truth_set,
)
from memory_core.tools.evaluation.truth_metrics import (
    ENTITY_METRICS,
    FACTS_ALONE,
    METRICS,
    TEMPORAL_METRICS,
    HitView,
    ProbeObservation,
    ScenarioObservation,
    contains,
    score,
    shown_as_current,
    where_found,
)
from memory_core.tools.evaluation.truth_report import draw_chart, render_markdown
from memory_core.tools.progress import NO_PROGRESS, Progress
from memory_core.tools.reporting import add_report_arguments, publish_report

__all__ = ["AGENT_ID", "add_arguments", "evaluate", "main", "observe_scenario", "run_scenario"]

logger = logging.getLogger(__name__)

AGENT_ID = "truth-eval"
#: The options the agent provider searches with when configured with none.
PROVIDER_OPTIONS = MemorySearchOptions()
#: The provider's defaults restricted to facts.
FACT_OPTIONS = MemorySearchOptions(kind=MemoryKind.FACT)
#: How a forbidden string is looked for by search: deep, archived and superseded memories too.
DEEP_OPTIONS = MemorySearchOptions(top=50, include_archived=True, include_superseded=True)
_STATUSES = (MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED, MemoryStatus.DELETED)
_PAGE = 1000


def _background(coroutine: Coroutine[Any, Any, None]) -> object:
    """Nothing runs in the background here (no recall is recorded): close what would have."""
    coroutine.close()
    return None


def _view(hit: SearchHit) -> HitView:
    record = hit.record
    return HitView(
        record.memory,
        record.kind.value,
        shown_as_current(record),
        float(hit.score),
        category=record.category,
        event_at=record.event_at,
        event_until=record.event_until,
    )


async def injected(
    client: LocalMemoryClient, scope: Scope, query: str, options: MemorySearchOptions
) -> list[HitView]:
    """What the agent provider's ``before_run`` would inject for ``query``, best first."""
    hits = await memories_for_run(
        client,
        scope,
        query,
        options,
        floor=DEFAULT_RELEVANCE_FLOOR,
        recall=False,
        search_timeout=30,
        ready_timeout=0,
        background=_background,
    )
    return [_view(h) for h in hits]


def _turn(scenario: TruthScenario, at: int, turn: TruthTurn, when: datetime) -> Turn:
    """A turn as :meth:`AsyncMemory.add` builds it."""
    messages: list[dict[str, str]] = [{"role": "user", "content": turn.user}]
    if turn.assistant:
        messages.append({"role": "assistant", "content": turn.assistant})
    return parse_model(
        Turn,
        {
            "turn_id": f"{scenario.id}-t{at}",
            "user_id": _user(scenario),
            "agent_id": AGENT_ID,
            "occurred_at": when,
            "messages": turn_messages(messages),
            "metadata": {},
        },
    )


def _user(scenario: TruthScenario) -> str:
    return f"u-{scenario.id}"


def turn_times(scenario: TruthScenario, reference: datetime) -> list[datetime]:
    """When each turn was said: ``days_ago`` before ``reference``, a minute apart within a day, in order."""
    count = len(scenario.turns)
    return [
        reference - timedelta(days=t.days_ago) - timedelta(minutes=count - 1 - at)
        for at, t in enumerate(scenario.turns)
    ]


async def _records(
    client: LocalMemoryClient, scope: Scope, status: MemoryStatus, *, include_superseded: bool = False
) -> list[MemoryRecord]:
    """Every memory of ``scope`` with ``status`` (the current ones, or also the superseded)."""
    records: list[MemoryRecord] = []
    cursor: str | None = None
    while True:
        page, cursor = await client.page(scope, status, cursor, _PAGE, include_superseded=include_superseded)
        records.extend(page)
        if cursor is None:
            return records


def _record_texts(record: MemoryRecord | dict[str, Any] | None) -> list[str]:
    if record is None:
        return []
    if isinstance(record, MemoryRecord):
        return [record.memory, record.summary]
    return [str(record.get("memory", "")), str(record.get("summary", ""))]


async def _places(client: LocalMemoryClient, scope: Scope) -> dict[str, list[str]]:
    """The texts of every place a forgotten string must not be (but search): lists, export, history."""
    places: dict[str, list[str]] = {}
    for status in _STATUSES:
        places[f"list:{status.value}"] = [
            t
            for r in await _records(client, scope, status, include_superseded=True)
            for t in _record_texts(r)
        ]
    export = await client.export(scope.user_id, scope.agent_id)
    places["export"] = [t for r in export.memories for t in _record_texts(r)]
    places["history"] = [
        t for h in export.history for t in (*_record_texts(h.before), *_record_texts(h.after))
    ]
    places["history:reason"] = [h.reason for h in export.history]
    return places


async def forbidden_found(
    client: LocalMemoryClient, scope: Scope, scenario: TruthScenario
) -> dict[str, tuple[str, ...]]:
    """Where each forbidden string of ``scenario`` is found (an empty tuple: nowhere)."""
    if not scenario.forbidden:
        return {}
    places = await _places(client, scope)
    queries = [p.query for p in scenario.probes] + list(scenario.forbidden)
    searched: list[str] = []
    for query in queries:
        result = await client.search(scope, query, DEEP_OPTIONS, recall=False)
        searched.extend(h.record.memory for h in result.hits)
    places = {"search": searched, **places}
    return {
        value: tuple(place for place, texts in places.items() if any(contains(t, value) for t in texts))
        for value in scenario.forbidden
    }


async def observe_scenario(
    client: LocalMemoryClient,
    scenario: TruthScenario,
    *,
    reference: datetime | None = None,
    clock: FixedClock | None = None,
) -> ScenarioObservation:
    """What the metrics need of ``scenario``, read from ``client`` after its conversation.

    Args:
        client: The scenario's store.
        scenario: The scenario whose turns were added.
        reference: The set's reference time ("now"; what a temporal probe's days count from).
        clock: The service's clock, moved to each probe's time while it is asked (then back).
    """
    scope = Scope.of(_user(scenario), AGENT_ID)
    probes = []
    for probe in scenario.probes:
        asked = None if reference is None else reference + timedelta(days=probe.asked_days_after)
        if clock is not None and asked is not None:
            clock.set(asked)
        probes.append(
            ProbeObservation(
                probe,
                tuple(await injected(client, scope, probe.query, PROVIDER_OPTIONS)),
                tuple(await injected(client, scope, probe.query, FACT_OPTIONS)),
                asked_at=asked,
                reference=reference,
            )
        )
    if clock is not None and reference is not None:
        clock.set(reference)
    active = await _records(client, scope, MemoryStatus.ACTIVE)
    facts = tuple(r.memory for r in active if r.kind is MemoryKind.FACT)
    found = await forbidden_found(client, scope, scenario)
    earlier = [
        r for r in await _records(client, scope, MemoryStatus.ACTIVE, include_superseded=True) if r.superseded
    ]
    return ScenarioObservation(
        scenario,
        tuple(probes),
        tuple(r.memory for r in active),
        facts,
        found,
        superseded=tuple(r.memory for r in earlier),
        superseded_facts=tuple(r.memory for r in earlier if r.kind is MemoryKind.FACT),
    )


async def run_scenario(
    scenario: TruthScenario,
    folder: Path,
    *,
    reference: datetime,
    embedder: Embedder,
    chat_model: ChatModel | None = None,
) -> ScenarioObservation:
    """One scenario in a fresh store under ``folder``: its turns added in order, then observed."""
    from memory_core.bootstrap import build_service, load_settings

    settings = load_settings(environ={}, sqlite_path=str(folder / f"{scenario.id}.db"))
    clock = FixedClock(reference)
    service = build_service(settings, clock=clock, embedder=embedder, chat_model=chat_model)
    client = LocalMemoryClient(service, owns_service=True, settings=settings)
    try:
        for at, (turn, when) in enumerate(zip(scenario.turns, turn_times(scenario, reference), strict=True)):
            clock.set(when)
            await client.add(_turn(scenario, at, turn, when))
        clock.set(reference)
        return await observe_scenario(client, scenario, reference=reference, clock=clock)
    finally:
        await client.close()


async def evaluate(
    data: TruthSet,
    *,
    embedder: Embedder,
    chat_model: ChatModel | None = None,
    progress: Progress = NO_PROGRESS,
    show_failures: int = 0,
) -> dict[str, Any]:
    """Run every scenario of ``data`` and report the metrics (see the module docstring).

    Args:
        data: The scenarios (already selected by language and category).
        embedder: The passage and query embedder of every store.
        chat_model: The LLM of extraction and consolidation (``None``: the rules).
        progress: Where progress is reported.
        show_failures: How many failing cases the report lists (the first ones, in set order).
    """
    observations: list[ScenarioObservation] = []
    started = time.perf_counter()
    bar = progress.bar("scenarios", len(data.scenarios), unit="scenarios")
    with bar, tempfile.TemporaryDirectory(prefix="memory-core-truth-") as tmp:
        for scenario in data.scenarios:
            observations.append(
                await run_scenario(
                    scenario,
                    Path(tmp),
                    reference=data.reference_time,
                    embedder=embedder,
                    chat_model=chat_model,
                )
            )
            bar.advance()
    tally = score(observations)
    figures = tally.figures(list(METRICS))
    facts = tally.figures([f"facts:{m}" for m in FACTS_ALONE])
    return {
        "scenarios": len(data.scenarios),
        "probes": sum(len(s.probes) for s in data.scenarios),
        "turns": sum(len(s.turns) for s in data.scenarios),
        "reference_time": data.reference_time.isoformat(),
        "metrics": figures,
        "facts_alone": {m: facts[f"facts:{m}"] for m in FACTS_ALONE},
        "forgotten_found_where": where_found(observations),
        "temporal": tally.figures(list(TEMPORAL_METRICS))
        if any(s.category in TEMPORAL_CATEGORIES for s in data.scenarios)
        else {},
        "entities": tally.figures(list(ENTITY_METRICS))
        if any(s.category in ENTITY_CATEGORIES for s in data.scenarios)
        else {},
        "failures_total": len(tally.failures),
        "failures": tally.failures[:show_failures],
        "seconds": round(time.perf_counter() - started, 1),
    }


async def main(args: argparse.Namespace, out: TextIO, progress: Progress = NO_PROGRESS) -> int:
    """``memory-core eval truth``: the report on ``out``, progress to ``progress``."""
    data = load_truth_set(args.set).select(args.lang or (), args.category or ())
    async with evaluation_models(args, "truth", "eval truth") as models:
        chat_model = models.chat_model
        report: dict[str, Any] = {
            "benchmark": "truth",
            "set": {"name": data.name, "version": data.version},
            "selection": {
                "lang": args.lang or list(LANGUAGES),
                "category": args.category or list(CATEGORIES),
            },
            "embedder": models.name,
            "extraction": f"llm {chat_model.name}" if chat_model is not None else "rules",
        }
        report |= await evaluate(
            data,
            embedder=models.embedder,
            chat_model=chat_model,
            progress=progress,
            show_failures=args.show_failures,
        )
    publish_report(report, args, out, render_markdown, draw_chart)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``eval truth`` options."""
    parser.add_argument("--set", metavar="PATH", help="a scenario file (default: the packaged one)")
    add_llm_argument(parser)
    parser.add_argument(
        "--lang", action="append", choices=list(LANGUAGES), help="only this language (repeatable)"
    )
    parser.add_argument(
        "--category",
        action="append",
        choices=list(CATEGORIES),
        metavar="NAME",
        help=f"only this category (repeatable): {', '.join(CATEGORIES)}",
    )
    parser.add_argument(
        "--show-failures",
        type=int,
        default=0,
        metavar="N",
        help="list the first N failing probes with what was injected (default: 0)",
    )
    add_cache_arguments(parser)
    add_report_arguments(parser)
