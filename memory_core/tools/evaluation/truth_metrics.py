"""What ``memory-core eval truth`` saw of each scenario, and the metrics it adds up to.

The harness (:mod:`memory_core.tools.evaluation.truth`) turns every scenario into a
:class:`ScenarioObservation`: for each probe the memories injected (and the facts a ``kind=fact``
search gives), the scope's active memory texts, its superseded ones (what held before), where each
forbidden string was found, and the chatter lines kept. :func:`score` turns observations into the metrics, so a test can plant any state.

Values are matched by :func:`contains`: the text normalised (NFKC, case folded) holds the value
normalised the same way (plain substring, so Japanese matches exactly).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.tools.evaluation.truth_data import TruthProbe, TruthScenario

__all__ = [
    "FACTS_ALONE",
    "METRICS",
    "HitView",
    "ProbeObservation",
    "ScenarioObservation",
    "Tally",
    "chatter_matches",
    "contains",
    "contains_any",
    "norm",
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

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "current": self.current, "score": round(self.score, 4)}


@dataclass(frozen=True, slots=True)
class ProbeObservation:
    """What a probe's query injected, and what the same query finds among facts alone."""

    probe: TruthProbe
    injected: tuple[HitView, ...]
    facts: tuple[HitView, ...] = ()


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


def _score_probe(tally: Tally, s: TruthScenario, o: ProbeObservation) -> None:
    p = o.probe
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


def score(observations: Iterable[ScenarioObservation]) -> Tally:
    """Every metric over ``observations`` (facts-alone figures under ``facts:<metric>``)."""
    tally = Tally()
    for o in observations:
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
