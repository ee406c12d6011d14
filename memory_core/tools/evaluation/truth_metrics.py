"""What ``memory-core eval truth`` saw of each scenario, and the metrics it adds up to.

The harness (:mod:`memory_core.tools.evaluation.truth`) turns every scenario into a
:class:`ScenarioObservation`: for each probe the memories injected (and the facts a ``kind=fact``
search gives), the scope's active memory texts, its superseded ones (what held before), where each
forbidden string was found, and the chatter lines kept. :func:`score` turns observations into the metrics, so a test can plant any state.

Values are matched by :func:`contains`: the text normalised (NFKC, case folded) holds the value
normalised the same way (plain substring, so Japanese matches exactly).

The temporal probes (:data:`~memory_core.tools.evaluation.truth_data.TEMPORAL_CATEGORIES`) are scored
by :data:`TEMPORAL_METRICS` alone, each per probe: ``expected_first`` (the first injected memory holds
an ``expect`` value and no ``not_first`` one), ``expected_hits`` (an ``expect`` value in the top 5),
``event_date`` (the first injected memory holding an ``expect`` value has an event time covering the
``event_on`` day), ``plan_shown_upcoming`` (a top-5 memory holding a ``not_upcoming`` value is
presented as an upcoming plan: see :func:`presented_as_upcoming`) and ``temporal_pass`` (every check
of the probe holds).

The entity probes (:data:`~memory_core.tools.evaluation.truth_data.ENTITY_CATEGORIES`) are scored by
:data:`ENTITY_METRICS` alone, each per probe: ``entity_first`` (the first injected memory holds an
``expect`` value), ``entity_hits`` (one of the top 5 does), ``lookalike_first`` (the first injected
memory holds a ``not_first`` value: the look-alike's), ``entity_forgotten_found`` (a ``forbidden``
value is found anywhere, or a ``kept`` one is no longer in an active memory) and ``entity_pass``
(every check of the probe holds).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memory_core.tools.evaluation.truth_data import ENTITY_CATEGORIES, TruthProbe, TruthScenario

__all__ = [
    "ENTITY_METRICS",
    "FACTS_ALONE",
    "METRICS",
    "TEMPORAL_METRICS",
    "HitView",
    "ProbeObservation",
    "ScenarioObservation",
    "Tally",
    "chatter_matches",
    "contains",
    "contains_any",
    "norm",
    "presented_as_upcoming",
    "score",
    "shown_as_current",
    "where_found",
]

#: Every metric, with whether higher is better.
METRICS: dict[str, bool] = {
    "current_first": True,
    "superseded_as_current": False,
    "superseded_kept": True,
    "forgotten_found": False,
    "values_lost": False,
    "chatter_kept": False,
    "unanswerable_silent": True,
    "answerable_hits": True,
}
#: The metrics of the temporal probes, with whether higher is better.
TEMPORAL_METRICS: dict[str, bool] = {
    "temporal_pass": True,
    "expected_first": True,
    "expected_hits": True,
    "event_date": True,
    "plan_shown_upcoming": False,
}
#: The metrics of the entity probes, with whether higher is better.
ENTITY_METRICS: dict[str, bool] = {
    "entity_pass": True,
    "entity_first": True,
    "entity_hits": True,
    "lookalike_first": False,
    "entity_forgotten_found": False,
}
#: The category of a dated plan (extraction's and the LLM prompt's).
PLAN_CATEGORY = "plan"
#: The metrics also reported for facts alone (the search restricted to facts; values kept by a fact).
FACTS_ALONE = ("current_first", "answerable_hits", "values_lost", "superseded_kept")
#: Hits of the injected memories a metric looks at (the provider's default ``top``).
TOP = 5
_SPACES = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s\W_]+|[\s\W_]+$")


def norm(text: str) -> str:
    """``text`` as values are compared: NFKC, case folded, runs of spaces as one."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def contains(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` (both normalised by :func:`norm`)."""
    wanted = norm(value)
    return bool(wanted) and wanted in norm(text)


def contains_any(text: str, values: Iterable[str]) -> bool:
    """Whether ``text`` holds any of ``values``."""
    return any(contains(text, v) for v in values)


def chatter_matches(line: str, memory: str) -> bool:
    """Whether a chatter ``line`` became ``memory`` or sits inside it.

    Both are normalised and stripped of the punctuation around them. A line inside a longer memory
    counts when it stands as words of its own there (not ``ok`` inside ``Tokyo``); a line of
    non-ASCII text counts inside a memory from four characters on.
    """
    a, b = _EDGE.sub("", norm(line)), _EDGE.sub("", norm(memory))
    if not a or not b:
        return False
    if a == b:
        return True
    if not a.isascii():
        return len(a) >= 4 and a in b
    return re.search(rf"(?<![0-9a-z]){re.escape(a)}(?![0-9a-z])", b) is not None


def shown_as_current(record: Any) -> bool:
    """Whether a hit's record is presented as current: not marked as superseded (the validity chain's
    ``valid_until`` / ``superseded_by``, where records carry them)."""
    return getattr(record, "valid_until", None) is None and getattr(record, "superseded_by", None) is None


@dataclass(frozen=True, slots=True)
class HitView:
    """An injected memory as the metrics see it."""

    text: str
    kind: str
    current: bool
    score: float = 0.0
    category: str = "general"
    #: The first instant of the event time (``None``: the memory states none).
    event_at: datetime | None = None
    #: The first instant after the span (``None``: no span given).
    event_until: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        view: dict[str, Any] = {
            "text": self.text,
            "kind": self.kind,
            "current": self.current,
            "score": round(self.score, 4),
        }
        if self.event_at is not None:
            view["category"] = self.category
            view["event_at"] = self.event_at.isoformat()
            view["event_until"] = None if self.event_until is None else self.event_until.isoformat()
        return view


def presented_as_upcoming(hit: HitView, asked_at: datetime) -> bool:
    """Whether ``hit`` reads as a plan still to come when asked at ``asked_at``.

    The contract either way of expiring a plan satisfies: a memory is presented as upcoming when it is
    current, its category is ``plan``, and its event time is not earlier than ``asked_at`` (or it has
    none). A plan moved into history (another category, superseded, or an event time that has passed)
    is not.
    """
    if not hit.current or hit.category != PLAN_CATEGORY:
        return False
    return hit.event_at is None or hit.event_at >= asked_at


def covers_day(hit: HitView, day: datetime) -> bool:
    """Whether ``hit``'s event time covers the calendar day (UTC) of ``day``."""
    if hit.event_at is None:
        return False
    start = datetime(day.year, day.month, day.day, tzinfo=day.tzinfo)
    end = hit.event_until or (
        datetime(hit.event_at.year, hit.event_at.month, hit.event_at.day, tzinfo=hit.event_at.tzinfo)
        + timedelta(days=1)
    )
    return hit.event_at < start + timedelta(days=1) and end > start


@dataclass(frozen=True, slots=True)
class ProbeObservation:
    """What a probe's query injected, and what the same query finds among facts alone."""

    probe: TruthProbe
    injected: tuple[HitView, ...]
    facts: tuple[HitView, ...] = ()
    #: When the probe was asked (the reference time plus its ``asked_days_after``).
    asked_at: datetime | None = None
    #: The set's reference time (what ``event_on`` counts back from).
    reference: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScenarioObservation:
    """Everything the metrics need of one scenario after its conversation."""

    scenario: TruthScenario
    probes: tuple[ProbeObservation, ...]
    active: tuple[str, ...]
    #: The texts of the scope's active facts (a subset of ``active``).
    active_facts: tuple[str, ...] = ()
    #: Each forbidden string found, with where (``search``, ``list:deleted``, ``export``, ``history``...).
    found: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The texts of the scope's superseded memories (what held before: ``include_superseded``).
    superseded: tuple[str, ...] = ()
    #: The texts of its superseded facts (a subset of ``superseded``).
    superseded_facts: tuple[str, ...] = ()


@dataclass
class Tally:
    """Counts ``n`` of ``N`` per metric and group (``overall``, a category, a language), and failures."""

    counts: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, metric: str, scenario: TruthScenario, hit: bool, count: int = 1) -> None:
        """Count ``count`` cases of ``metric`` for ``scenario``'s groups, ``hit`` of them or none."""
        groups = self.counts.setdefault(metric, {})
        for group in ("overall", f"category:{scenario.category}", f"lang:{scenario.lang}"):
            cell = groups.setdefault(group, [0, 0])
            cell[0] += count if hit else 0
            cell[1] += count

    def fail(self, metric: str, scenario: TruthScenario, **details: Any) -> None:
        """Remember a failing case (the report shows the first ``--show-failures``)."""
        self.failures.append(
            {"metric": metric, "scenario": scenario.id, "lang": scenario.lang, "category": scenario.category}
            | details
        )

    def figures(self, metrics: Sequence[str]) -> dict[str, Any]:
        """Per metric: ``overall``, ``by_category`` and ``by_lang``, each ``{n, of, rate}``."""
        report: dict[str, Any] = {}
        for metric in metrics:
            groups = self.counts.get(metric, {})
            block: dict[str, Any] = {
                "overall": _cell(groups.get("overall")),
                "by_category": {},
                "by_lang": {},
            }
            for group, cell in sorted(groups.items()):
                kind, _, name = group.partition(":")
                if kind in ("category", "lang"):
                    block[f"by_{kind}"][name] = _cell(cell)
            report[metric] = block
        return report


def _cell(cell: list[int] | None) -> dict[str, Any]:
    n, of = cell if cell is not None else (0, 0)
    return {"n": n, "of": of, "rate": n / of if of else None}


def _texts(hits: Sequence[HitView]) -> list[str]:
    return [f"{'' if h.current else '[superseded] '}{h.kind}: {h.text}" for h in hits]


def _current_first(tally: Tally, name: str, s: TruthScenario, p: TruthProbe, hits: Sequence[HitView]) -> None:
    ok = bool(hits) and contains_any(hits[0].text, p.current)
    tally.add(name, s, ok)
    if not ok:
        tally.fail(name, s, query=p.query, expected=list(p.current), injected=_texts(hits))


def _answerable_hit(
    tally: Tally, name: str, s: TruthScenario, p: TruthProbe, hits: Sequence[HitView]
) -> None:
    ok = any(contains_any(h.text, p.current) for h in hits[:TOP])
    tally.add(name, s, ok)
    if not ok:
        tally.fail(name, s, query=p.query, expected=list(p.current), injected=_texts(hits))


def _superseded(tally: Tally, s: TruthScenario, p: TruthProbe, hits: Sequence[HitView]) -> None:
    """A hit shows an old value as current when it holds one, no current value, and is not marked."""
    shown = [
        h
        for h in hits[:TOP]
        if h.current and contains_any(h.text, p.superseded) and not contains_any(h.text, p.current)
    ]
    tally.add("superseded_as_current", s, bool(shown))
    if shown:
        tally.fail(
            "superseded_as_current", s, query=p.query, superseded=list(p.superseded), injected=_texts(hits)
        )


def _expected_checks(o: ProbeObservation, hits: Sequence[HitView]) -> dict[str, bool]:
    """The checks of a temporal probe's ``expect``: first, among the hits, and its day covered."""
    p = o.probe
    first = hits[0] if hits else None
    checks = {
        "expected_first": first is not None
        and contains_any(first.text, p.expect)
        and not contains_any(first.text, p.not_first),
        "expected_hits": any(contains_any(h.text, p.expect) for h in hits),
    }
    if p.event_days_ago is not None and o.reference is not None:
        day = o.reference - timedelta(days=p.event_days_ago)
        found = next((h for h in hits if contains_any(h.text, p.expect)), None)
        checks["event_date"] = found is not None and covers_day(found, day)
    return checks


def _shown_upcoming(o: ProbeObservation, hits: Sequence[HitView]) -> bool:
    """Whether a hit naming the probe's ``not_upcoming`` plan is presented as still to come."""
    asked = o.asked_at or o.reference
    return any(
        contains_any(h.text, o.probe.not_upcoming) and (asked is None or presented_as_upcoming(h, asked))
        for h in hits
    )


def _temporal(tally: Tally, s: TruthScenario, o: ProbeObservation) -> None:
    """The temporal metrics of one probe (``temporal_pass``: all of its checks hold)."""
    p, hits = o.probe, o.injected[:TOP]
    checks: dict[str, bool] = _expected_checks(o, hits) if p.expect else {}
    for name, ok in checks.items():
        tally.add(name, s, ok)
    if p.not_upcoming:
        shown = _shown_upcoming(o, hits)
        tally.add("plan_shown_upcoming", s, shown)
        checks["not_upcoming"] = not shown
    passed = all(checks.values())
    tally.add("temporal_pass", s, passed)
    if not passed:
        tally.fail(
            "temporal_pass",
            s,
            query=p.query,
            failed=[name for name, ok in checks.items() if not ok],
            expected=list(p.expect),
            injected=[h.as_dict() for h in hits],
        )


def _score_probe(tally: Tally, s: TruthScenario, o: ProbeObservation) -> None:
    p = o.probe
    if p.temporal:
        _temporal(tally, s, o)
        return
    if p.current:
        _current_first(tally, "current_first", s, p, o.injected)
        _current_first(tally, "facts:current_first", s, p, o.facts)
        if p.answerable:
            _answerable_hit(tally, "answerable_hits", s, p, o.injected)
            _answerable_hit(tally, "facts:answerable_hits", s, p, o.facts)
    if p.superseded:
        _superseded(tally, s, p, o.injected)
    if not p.answerable:
        silent = not o.injected
        tally.add("unanswerable_silent", s, silent)
        if not silent:
            tally.fail("unanswerable_silent", s, query=p.query, injected=_texts(o.injected))


def _score_scenario(tally: Tally, o: ScenarioObservation) -> None:
    s = o.scenario
    if s.forbidden:
        found = {value: list(where) for value, where in o.found.items() if where}
        tally.add("forgotten_found", s, bool(found))
        if found:
            tally.fail("forgotten_found", s, found=found)
    for value in s.superseded:
        for name, texts in (("superseded_kept", o.superseded), ("facts:superseded_kept", o.superseded_facts)):
            held = any(contains(text, value) for text in texts)
            tally.add(name, s, held)
            if not held:
                tally.fail(name, s, value=value, superseded=list(texts))
    for value in s.kept:
        for name, texts in (("values_lost", o.active), ("facts:values_lost", o.active_facts)):
            lost = not any(contains(text, value) for text in texts)
            tally.add(name, s, lost)
            if lost:
                tally.fail(name, s, value=value, active=list(texts))
    for line in s.chatter:
        kept = [text for text in o.active if chatter_matches(line, text)]
        tally.add("chatter_kept", s, bool(kept))
        if kept:
            tally.fail("chatter_kept", s, line=line, memories=kept)


def _entity(tally: Tally, o: ScenarioObservation, probe: ProbeObservation) -> None:
    """The entity metrics of one probe (``entity_pass``: all of its checks hold)."""
    s, p, hits = o.scenario, probe.probe, probe.injected[:TOP]
    checks: dict[str, bool] = {}
    if p.expect:
        checks["entity_first"] = bool(hits) and contains_any(hits[0].text, p.expect)
        checks["entity_hits"] = any(contains_any(h.text, p.expect) for h in hits)
    for name, ok in checks.items():
        tally.add(name, s, ok)
    if p.not_first:
        confused = bool(hits) and contains_any(hits[0].text, p.not_first)
        tally.add("lookalike_first", s, confused)
        checks["not_lookalike"] = not confused
    if p.forbidden or p.kept:
        found = [v for v in p.forbidden if o.found.get(v)]
        lost = [v for v in p.kept if not any(contains(t, v) for t in o.active)]
        tally.add("entity_forgotten_found", s, bool(found or lost))
        checks["forgotten"] = not (found or lost)
    passed = all(checks.values())
    tally.add("entity_pass", s, passed)
    if not passed:
        tally.fail(
            "entity_pass",
            s,
            query=p.query,
            failed=[name for name, ok in checks.items() if not ok],
            expected=list(p.expect),
            injected=_texts(hits),
        )


def score(observations: Iterable[ScenarioObservation]) -> Tally:
    """Every metric over ``observations`` (facts-alone figures under ``facts:<metric>``)."""
    tally = Tally()
    for o in observations:
        if o.scenario.category in ENTITY_CATEGORIES:
            for probe in o.probes:
                _entity(tally, o, probe)
            continue
        for probe in o.probes:
            _score_probe(tally, o.scenario, probe)
        _score_scenario(tally, o)
    return tally


def where_found(observations: Iterable[ScenarioObservation]) -> dict[str, int]:
    """Per place (``search``, ``list:deleted``, ``history``...): scenarios with a forbidden string found there."""
    places: dict[str, int] = {}
    for o in observations:
        for place in sorted({w for where in o.found.values() for w in where}):
            places[place] = places.get(place, 0) + 1
    return dict(sorted(places.items()))
