"""``memory-core eval truth``: the packaged scenarios, the harness end to end, and metrics that can fail.

The hashing embedder stands in for e5 (``MEMORY_EMBEDDER=hash`` / ``embedder="hash"``): offline and
deterministic; no figure here depends on timing.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memory_core.bootstrap import build_embedder, load_settings
from memory_core.cli.main import main
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import ScoreBreakdown, SearchHit, SearchResult
from memory_core.tools.evaluation.truth import AGENT_ID, evaluate, forbidden_found, injected, turn_times
from memory_core.tools.evaluation.truth_data import (
    CATEGORIES,
    ENTITY_CATEGORIES,
    LANGUAGES,
    TEMPORAL_CATEGORIES,
    TruthProbe,
    TruthScenario,
    TruthTurn,
    load_truth_set,
    parse_truth_set,
)
from memory_core.tools.evaluation.truth_metrics import (
    FACTS_ALONE,
    METRICS,
    TEMPORAL_METRICS,
    HitView,
    ProbeObservation,
    ScenarioObservation,
    chatter_matches,
    presented_as_upcoming,
    score,
    shown_as_current,
)
from memory_core.tools.evaluation.truth_report import render_markdown

NOW = datetime(2026, 6, 1, 9, tzinfo=UTC)


# -- the packaged set ------------------------------------------------------------------------------
def test_the_packaged_set_is_valid_and_covers_every_category_in_both_languages() -> None:
    data = load_truth_set()
    scenarios = data.scenarios
    assert len(scenarios) >= 220 + 60
    ids = [s.id for s in scenarios]
    assert len(set(ids)) == len(ids)
    per = Counter(s.category for s in scenarios)
    assert set(per) == set(CATEGORIES), per
    own = (*TEMPORAL_CATEGORIES, *ENTITY_CATEGORIES)
    assert min(n for c, n in per.items() if c not in own) >= 18, per
    assert min(per[c] for c in TEMPORAL_CATEGORIES) >= 14, per
    assert sum(per[c] for c in TEMPORAL_CATEGORIES) >= 60, per
    assert min(per[c] for c in ENTITY_CATEGORIES) >= 10, per
    assert sum(per[c] for c in ENTITY_CATEGORIES) >= 60, per
    for category in CATEGORIES:
        assert {s.lang for s in scenarios if s.category == category} == set(LANGUAGES), category
    langs = Counter(s.lang for s in scenarios)
    assert abs(langs["en"] - langs["ja"]) <= len(scenarios) // 10  # roughly half each


def test_every_category_asks_what_it_measures() -> None:
    for s in load_truth_set().scenarios:
        probes = s.probes
        if s.category in ("one_value_change", "correction", "negation", "explicit_change"):
            assert all(p.current and p.superseded for p in probes), s.id
        if s.category == "many_values":
            assert len(s.kept) >= 2, s.id
        if s.category == "explicit_change":
            assert s.kept, s.id
        if s.category in ("forget_one", "forget_category", "forget_person", "secret"):
            assert s.forbidden and s.kept, s.id
        if s.category == "chatter":
            assert s.chatter and s.kept, s.id
        if s.category == "unanswerable":
            assert all(not p.answerable and not p.current for p in probes), s.id
        if s.category in ("temporal_when", "temporal_period"):
            assert all(p.expect and p.event_days_ago is not None for p in probes), s.id
        if s.category == "temporal_as_of":
            assert all(p.expect and p.not_first for p in probes), s.id
        if s.category == "temporal_passed_plan":
            assert any(p.not_upcoming for p in probes), s.id
        days = [t.days_ago for t in s.turns]
        assert days == sorted(days, reverse=True), s.id


def _raw(**changes: Any) -> dict[str, Any]:
    scenario: dict[str, Any] = {
        "id": "x1",
        "lang": "en",
        "category": "chatter",
        "turns": [{"user": "hi", "days_ago": 2}, {"user": "I like tea.", "days_ago": 1}],
        "probes": [{"query": "What does the user drink?", "current": ["tea"], "kept": ["tea"]}],
        "chatter": ["hi"],
    }
    scenario.update(changes)
    return {"scenarios": [scenario]}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lang": "fr"}, "lang"),
        ({"category": "gossip"}, "unknown category"),
        ({"turns": [{"user": "hi", "days_ago": 1}, {"user": "I like tea.", "days_ago": 2}]}, "back in time"),
        ({"chatter": ["hello"]}, "chatter line"),
        ({"chatter": []}, "lists its chatter"),
        ({"probes": [{"query": "q", "current": ["tea"], "answerable": False}]}, "no current value"),
        ({"probes": [{"query": "q", "kept": [""]}]}, "non-empty strings"),
        ({"probes": []}, "probes"),
        ({"probes": [{"query": "q", "current": ["tea"], "expect": ["tea"]}]}, "only a temporal category"),
        ({"category": "temporal_when", "chatter": [], "probes": [{"query": "q"}]}, "expect or not_upcoming"),
        (
            {
                "category": "temporal_when",
                "chatter": [],
                "probes": [{"query": "q", "expect": ["a"], "kept": ["a"]}],
            },
            "not current",
        ),
        ({"category": "temporal_when", "probes": [{"query": "q", "expect": ["a"]}]}, "no chatter lines"),
        (
            {
                "category": "temporal_when",
                "chatter": [],
                "probes": [{"query": "q", "expect": ["a"], "event_on": "12 days"}],
            },
            "event_on",
        ),
        (
            {
                "category": "temporal_when",
                "chatter": [],
                "probes": [{"query": "q", "not_upcoming": ["a"], "event_on": "-2d"}],
            },
            "needs expect",
        ),
        (
            {
                "category": "temporal_when",
                "chatter": [],
                "probes": [{"query": "q", "expect": ["a"], "asked_days_after": -1}],
            },
            "asked_days_after",
        ),
    ],
)
def test_the_format_is_checked(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_truth_set(_raw(**changes))


def test_ids_are_unique() -> None:
    raw = _raw()
    raw["scenarios"].append(raw["scenarios"][0])
    with pytest.raises(ValueError, match="unique"):
        parse_truth_set(raw)


def test_turns_are_dated_back_from_the_reference_time_in_order() -> None:
    scenario = parse_truth_set(_raw()).scenarios[0]
    first, last = turn_times(scenario, NOW)
    assert first < last <= NOW and (NOW - last).days == 1


# -- end to end ------------------------------------------------------------------------------------
_HANDFUL = ("ovc-en-01", "mv-ja-01", "f1-en-01", "se-ja-01", "ch-en-01", "un-ja-01")


def _evaluate(ids: tuple[str, ...]) -> dict[str, Any]:
    data = load_truth_set()
    chosen = type(data)(
        data.name, data.version, data.reference_time, tuple(s for s in data.scenarios if s.id in ids)
    )
    embedder = build_embedder(load_settings(environ={}, embedder="hash", query_cache_size=0))
    return asyncio.run(evaluate(chosen, embedder=embedder, show_failures=100))


def test_a_handful_of_scenarios_run_end_to_end_and_report_every_metric() -> None:
    report = _evaluate(_HANDFUL)
    assert report["scenarios"] == len(_HANDFUL)
    assert set(report["metrics"]) == set(METRICS)
    assert set(report["facts_alone"]) == set(FACTS_ALONE)
    for block in [*report["metrics"].values(), *report["facts_alone"].values()]:
        overall = block["overall"]
        assert overall["of"] > 0 and 0 <= overall["n"] <= overall["of"]
        assert sum(c["of"] for c in block["by_lang"].values()) == overall["of"]
        assert sum(c["of"] for c in block["by_category"].values()) == overall["of"]
    assert report["metrics"]["chatter_kept"]["overall"]["of"] == 4  # ch-en-01's four chatter lines
    assert report["metrics"]["unanswerable_silent"]["by_category"]["unanswerable"]["of"] == 1
    assert len(report["failures"]) == report["failures_total"]
    again = _evaluate(_HANDFUL)
    assert again["metrics"] == report["metrics"]  # deterministic


# -- every metric can fail -------------------------------------------------------------------------
def _scenario(
    category: str = "one_value_change", *probes: TruthProbe, chatter: tuple[str, ...] = ()
) -> TruthScenario:
    turns = tuple(TruthTurn(line, None, 1.0) for line in chatter) or (TruthTurn("something", None, 1.0),)
    return TruthScenario("s1", "en", category, turns, probes, chatter)


def _hit(text: str, current: bool = True, kind: str = "fact") -> HitView:
    return HitView(text, kind, current)


def _rate(observation: ScenarioObservation, metric: str) -> float | None:
    rate: float | None = score([observation]).figures([metric])[metric]["overall"]["rate"]
    return rate


MOVE = TruthProbe("Where does the user live?", current=("Osaka",), superseded=("Tokyo",))


def test_current_first_fails_when_the_old_value_comes_first() -> None:
    s = _scenario("one_value_change", MOVE)
    old_first = ScenarioObservation(
        s, (ProbeObservation(MOVE, (_hit("I live in Tokyo"), _hit("I moved to Osaka"))),), ()
    )
    new_first = ScenarioObservation(
        s, (ProbeObservation(MOVE, (_hit("I moved to Osaka"), _hit("I live in Tokyo"))),), ()
    )
    assert _rate(old_first, "current_first") == 0.0
    assert _rate(new_first, "current_first") == 1.0
    assert _rate(ScenarioObservation(s, (ProbeObservation(MOVE, ()),), ()), "current_first") == 0.0


def test_superseded_as_current_counts_an_old_value_shown_as_current_only() -> None:
    s = _scenario("one_value_change", MOVE)
    shown = ScenarioObservation(
        s, (ProbeObservation(MOVE, (_hit("I moved to Osaka"), _hit("I live in Tokyo"))),), ()
    )
    marked = ScenarioObservation(
        s, (ProbeObservation(MOVE, (_hit("I moved to Osaka"), _hit("I live in Tokyo", current=False))),), ()
    )
    both = ScenarioObservation(s, (ProbeObservation(MOVE, (_hit("I moved from Tokyo to Osaka"),)),), ())
    assert _rate(shown, "superseded_as_current") == 1.0
    assert _rate(marked, "superseded_as_current") == 0.0
    assert _rate(both, "superseded_as_current") == 0.0  # naming the old value beside the new one is fine


def test_superseded_kept_fails_when_what_held_before_is_lost() -> None:
    s = _scenario("one_value_change", MOVE)
    probes = (ProbeObservation(MOVE, (_hit("I moved to Osaka"),)),)
    lost = ScenarioObservation(s, probes, ("I moved to Osaka",))
    in_an_episode = ScenarioObservation(s, probes, ("I moved to Osaka",), superseded=("I live in Tokyo.",))
    as_a_fact = ScenarioObservation(
        s,
        probes,
        ("I moved to Osaka",),
        superseded=("I live in Tokyo",),
        superseded_facts=("I live in Tokyo",),
    )
    assert _rate(lost, "superseded_kept") == 0.0 and _rate(lost, "facts:superseded_kept") == 0.0
    assert (
        _rate(in_an_episode, "superseded_kept") == 1.0
        and _rate(in_an_episode, "facts:superseded_kept") == 0.0
    )
    assert _rate(as_a_fact, "facts:superseded_kept") == 1.0


def test_a_record_marked_as_superseded_is_not_shown_as_current() -> None:
    assert shown_as_current(SimpleNamespace(memory="I live in Tokyo"))
    assert not shown_as_current(SimpleNamespace(valid_until=NOW))
    assert not shown_as_current(SimpleNamespace(superseded_by="m2"))


def test_values_lost_chatter_kept_unanswerable_and_answerable_hits_can_fail() -> None:
    probe = TruthProbe("What pets?", current=("dog",), kept=("cat", "dog"))
    silent = TruthProbe("Blood type?", answerable=False)
    s = _scenario("many_values", probe, silent, chatter=("ok", "thanks!"))
    bad = ScenarioObservation(
        s,
        (
            ProbeObservation(probe, (_hit("I like cats"),), ()),
            ProbeObservation(silent, (_hit("I like cats"),)),
        ),
        active=("I like cats", "ok", "Thanks! I'm in Tokyo"),
        active_facts=("I like cats",),
    )
    tally = score([bad]).figures(list(METRICS))
    assert tally["values_lost"]["overall"] == {"n": 1, "of": 2, "rate": 0.5}  # the dog is gone
    assert tally["chatter_kept"]["overall"] == {"n": 2, "of": 2, "rate": 1.0}
    assert tally["unanswerable_silent"]["overall"]["rate"] == 0.0
    assert tally["answerable_hits"]["overall"]["rate"] == 0.0
    facts = score([bad]).figures(["facts:answerable_hits", "facts:values_lost"])
    assert facts["facts:answerable_hits"]["overall"]["rate"] == 0.0  # no fact searched at all
    assert facts["facts:values_lost"]["overall"]["n"] == 1
    good = ScenarioObservation(
        s,
        (
            ProbeObservation(probe, (_hit("I like dogs"),), (_hit("I like dogs"),)),
            ProbeObservation(silent, ()),
        ),
        active=("I like cats", "I like dogs", "I live in Tokyo"),
        active_facts=("I like cats", "I like dogs"),
    )
    tally = score([good]).figures(list(METRICS))
    assert tally["values_lost"]["overall"]["rate"] == 0.0
    assert tally["chatter_kept"]["overall"]["rate"] == 0.0  # "ok" inside "Tokyo" is no chatter kept
    assert tally["unanswerable_silent"]["overall"]["rate"] == 1.0
    assert tally["answerable_hits"]["overall"]["rate"] == 1.0


def test_chatter_is_matched_as_whole_words_or_as_the_whole_memory() -> None:
    assert chatter_matches("ok", "OK.")
    assert chatter_matches("thanks!", "Thanks! By the way, I moved")
    assert not chatter_matches("ok", "I live in Tokyo")
    assert chatter_matches("ありがとう", "ありがとう！")
    assert not chatter_matches("草", "草津に行った")  # one character is matched only as the whole memory
    assert chatter_matches(
        "2026-11-03 12:01:55 INFO worker started", "2026-11-03 12:01:55 INFO worker started"
    )


class _PlantedClient:
    """A client whose store holds what a test plants: records by status, history, search hits."""

    def __init__(
        self, scope: Scope, *, records: dict[MemoryStatus, list[str]], history: list[dict[str, Any]]
    ) -> None:
        self.scope = scope
        self.records = {
            status: [self._record(text, status) for text in texts] for status, texts in records.items()
        }
        self.history = history

    def _record(self, text: str, status: MemoryStatus) -> MemoryRecord:
        return MemoryRecord(
            user_id=self.scope.user_id,
            agent_id=self.scope.agent_id,
            memory=text,
            status=status,
            kind=MemoryKind.FACT,
            created_at=NOW,
            updated_at=NOW,
        )

    async def search(self, scope: Scope, query: str, options: Any, *, recall: bool = True) -> SearchResult:
        statuses = [MemoryStatus.ACTIVE, *([MemoryStatus.ARCHIVED] if options.include_archived else [])]
        hits = [
            SearchHit(record=r, score=0.5, breakdown=ScoreBreakdown(relevance=0.5))
            for s in statuses
            for r in self.records.get(s, [])
        ]
        return SearchResult(
            hits=hits[: options.top], mode=options.mode, ranking_profile=options.ranking_profile
        )

    async def page(
        self,
        scope: Scope,
        status: MemoryStatus,
        cursor: str | None,
        limit: int,
        *,
        include_superseded: bool = False,
    ) -> tuple[list[MemoryRecord], None]:
        assert include_superseded  # what must be gone is looked for in what held before too
        return list(self.records.get(status, [])), None

    async def export(self, user_id: str, agent_id: str) -> Any:
        memories = [r for s in (MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED) for r in self.records.get(s, [])]
        history = [
            SimpleNamespace(before=h.get("before"), after=h.get("after"), reason=h.get("reason", ""))
            for h in self.history
        ]
        return SimpleNamespace(memories=memories, history=history)


def _forbidden(client: _PlantedClient, scenario: TruthScenario) -> dict[str, tuple[str, ...]]:
    return asyncio.run(forbidden_found(client, client.scope, scenario))  # type: ignore[arg-type]


def test_forgotten_found_catches_a_string_in_a_history_entry_only() -> None:
    probe = TruthProbe("What is the user's PIN?", forbidden=("8316",), kept=("Monzo",), answerable=False)
    s = _scenario("secret", probe)
    scope = Scope.of("u-s1", AGENT_ID)
    clean = _PlantedClient(scope, records={MemoryStatus.ACTIVE: ["I bank with Monzo"]}, history=[])
    assert _forbidden(clean, s) == {"8316": ()}
    planted = _PlantedClient(
        scope,
        records={MemoryStatus.ACTIVE: ["I bank with Monzo"]},
        history=[{"before": {"memory": "My PIN is 8316"}, "after": None, "reason": "forget request"}],
    )
    found = _forbidden(planted, s)
    assert found == {"8316": ("history",)}
    observation = ScenarioObservation(s, (ProbeObservation(probe, ()),), ("I bank with Monzo",), found=found)
    assert _rate(observation, "forgotten_found") == 1.0
    assert (
        _rate(
            ScenarioObservation(s, (ProbeObservation(probe, ()),), (), found={"8316": ()}), "forgotten_found"
        )
        == 0.0
    )


def test_forgotten_found_looks_in_deleted_and_archived_memories_and_reasons() -> None:
    probe = TruthProbe("Where does Alex live?", forbidden=("Alex",))
    s = _scenario("forget_person", probe)
    scope = Scope.of("u-s1", AGENT_ID)
    client = _PlantedClient(
        scope,
        records={MemoryStatus.DELETED: ["Alex lent me his car"], MemoryStatus.ARCHIVED: ["Alex is moving"]},
        history=[{"reason": "forget request matched 'Alex is moving'"}],
    )
    where = set(_forbidden(client, s)["Alex"])
    assert {"list:deleted", "list:archived", "search", "export", "history:reason"} <= where
    assert "list:active" not in where


def test_injected_is_what_the_provider_hands_over(tmp_path: Path) -> None:
    """(The provider's read path over a planted client: every hit, best first, none filtered.)"""
    scope = Scope.of("u-s1", AGENT_ID)
    client = _PlantedClient(scope, records={MemoryStatus.ACTIVE: ["one", "two"]}, history=[])
    from memory_core.tools.evaluation.truth import PROVIDER_OPTIONS

    hits = asyncio.run(injected(client, scope, "q", PROVIDER_OPTIONS))  # type: ignore[arg-type]
    assert [h.text for h in hits] == ["one", "two"] and all(h.current for h in hits)


# -- the command -----------------------------------------------------------------------------------
def test_the_command_prints_one_json_document(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    code = main(
        ["eval", "truth", "--json", "--category", "chatter", "--lang", "en", "--show-failures", "3"], out=out
    )
    assert code == 0
    report = json.loads(out.getvalue())  # one document: anything else would not parse
    assert report["benchmark"] == "truth" and report["embedder"].startswith("hash")
    assert report["selection"] == {"lang": ["en"], "category": ["chatter"]}
    assert set(report["metrics"]["chatter_kept"]["by_category"]) == {"chatter"}
    assert set(report["metrics"]["chatter_kept"]["by_lang"]) == {"en"}
    assert len(report["failures"]) <= 3


def test_the_command_prints_the_tables_and_the_failures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    out = io.StringIO()
    argv = ["eval", "truth", "--category", "secret", "--lang", "ja", "--no-cache", "--show-failures", "2"]
    assert main([*argv, "--output", str(tmp_path / "truth.json")], out=out) == 0
    text = out.getvalue()
    assert "| **overall** |" in text and "| secret |" in text and "facts alone" in text
    assert json.loads((tmp_path / "truth.json").read_text(encoding="utf-8"))["scenarios"] == 10


# -- the temporal probes ---------------------------------------------------------------------------
def _day(offset: float) -> datetime:
    return NOW + timedelta(days=offset)


def _dated(text: str, days: float | None, category: str = "event", *, until: float | None = None) -> HitView:
    start = None if days is None else datetime(2026, 6, 1, tzinfo=UTC) + timedelta(days=days)
    end = None if until is None else datetime(2026, 6, 1, tzinfo=UTC) + timedelta(days=until)
    return HitView(text, "fact", True, category=category, event_at=start, event_until=end)


def _temporal(probe: TruthProbe, *hits: HitView, after: float = 0.0) -> dict[str, Any]:
    scenario = TruthScenario("t1", "ja", "temporal_when", (TruthTurn("something", None, 1.0),), (probe,))
    observed = ProbeObservation(probe, hits, asked_at=_day(after), reference=NOW)
    return score([ScenarioObservation(scenario, (observed,), ())]).figures(list(TEMPORAL_METRICS))


def _n(figures: dict[str, Any], metric: str) -> tuple[int, int]:
    cell = figures[metric]["overall"]
    return cell["n"], cell["of"]


DENTIST = TruthProbe("When did the user go to the dentist?", expect=("dentist",), event_days_ago=12.0)


def test_a_when_question_needs_the_memory_first_and_its_day_covered() -> None:
    right = _temporal(DENTIST, _dated("Went to the dentist", -12), _dated("Ran a 10k", -3))
    assert _n(right, "temporal_pass") == (1, 1) and _n(right, "event_date") == (1, 1)
    wrong_day = _temporal(DENTIST, _dated("Went to the dentist", -11))
    assert _n(wrong_day, "expected_first") == (1, 1) and _n(wrong_day, "event_date") == (0, 1)
    assert _n(wrong_day, "temporal_pass") == (0, 1)
    undated = _temporal(DENTIST, _dated("Went to the dentist", None))
    assert _n(undated, "event_date") == (0, 1)
    week = _temporal(DENTIST, _dated("Went to the dentist last week", -14, until=-7))  # a span covering it
    assert _n(week, "event_date") == (1, 1)
    second = _temporal(DENTIST, _dated("Ran a 10k", -3), _dated("Went to the dentist", -12))
    assert _n(second, "expected_first") == (0, 1) and _n(second, "expected_hits") == (1, 1)
    assert _n(second, "event_date") == (1, 1) and _n(second, "temporal_pass") == (0, 1)
    assert _n(_temporal(DENTIST), "expected_hits") == (0, 1)


def test_an_as_of_question_fails_when_the_later_value_comes_first() -> None:
    probe = TruthProbe("3月にはどこに住んでいた？", expect=("札幌",), not_first=("福岡",))
    assert _n(
        _temporal(probe, _dated("札幌に住んでいる", None), _dated("福岡に引っ越した", -20)), "temporal_pass"
    ) == (1, 1)
    later_first = _temporal(probe, _dated("福岡に引っ越した", -20), _dated("札幌に住んでいる", None))
    assert _n(later_first, "expected_first") == (0, 1) and _n(later_first, "expected_hits") == (1, 1)
    both = _temporal(probe, _dated("札幌から福岡に引っ越した", -20))
    assert _n(both, "expected_first") == (0, 1)
    assert _n(both, "event_date") == (0, 0)  # no event_on: not counted


def test_a_passed_plan_counts_as_upcoming_only_while_it_reads_as_a_plan_still_to_come() -> None:
    probe = TruthProbe("What plans does the user have?", expect=("Lisbon",), not_upcoming=("dentist",))
    lisbon = _dated("Lisbon on June 12", 11, "plan")
    past = _temporal(probe, lisbon, _dated("Dentist appointment on May 20", -12, "plan"))
    assert _n(past, "plan_shown_upcoming") == (0, 1) and _n(past, "temporal_pass") == (1, 1)
    undated = _temporal(probe, lisbon, _dated("Dentist appointment soon", None, "plan"))
    assert _n(undated, "plan_shown_upcoming") == (1, 1) and _n(undated, "temporal_pass") == (0, 1)
    asked_before = _temporal(probe, lisbon, _dated("Dentist appointment on June 4", 3, "plan"))
    assert _n(asked_before, "plan_shown_upcoming") == (1, 1)
    asked_after = _temporal(probe, lisbon, _dated("Dentist appointment on June 4", 3, "plan"), after=10)
    assert _n(asked_after, "plan_shown_upcoming") == (0, 1)
    moved_to_history = _temporal(probe, lisbon, _dated("Dentist appointment soon", None, "event"))
    assert _n(moved_to_history, "plan_shown_upcoming") == (0, 1)
    superseded = HitView("Dentist appointment soon", "fact", False, category="plan")
    assert _n(_temporal(probe, lisbon, superseded), "plan_shown_upcoming") == (0, 1)
    assert presented_as_upcoming(_dated("Dentist on June 4", 3, "plan"), _day(0))
    assert not presented_as_upcoming(_dated("Dentist on June 4", 3, "plan"), _day(5))


def test_temporal_probes_leave_the_other_metrics_alone() -> None:
    figures = _temporal(DENTIST, _dated("Went to the dentist", -12))
    scenario = TruthScenario("t1", "en", "temporal_when", (TruthTurn("something", None, 1.0),), (DENTIST,))
    observed = ProbeObservation(DENTIST, (_dated("Went to the dentist", -12),), reference=NOW)
    others = score([ScenarioObservation(scenario, (observed,), ())]).figures(list(METRICS))
    assert all(block["overall"]["of"] == 0 for block in others.values())
    assert figures["temporal_pass"]["by_category"] == {"temporal_when": {"n": 1, "of": 1, "rate": 1.0}}


def test_the_temporal_suite_runs_end_to_end_and_reports_per_category(tmp_path: Path) -> None:
    chosen = ("tw-en-01", "tw-ja-01", "ta-en-01", "tp-ja-02", "tx-en-03", "tx-ja-06")
    report = _evaluate(chosen)
    temporal = report["temporal"]
    assert set(temporal) == set(TEMPORAL_METRICS)
    probes = sum(len(s.probes) for s in load_truth_set().scenarios if s.id in chosen)
    assert temporal["temporal_pass"]["overall"]["of"] == probes
    assert set(temporal["temporal_pass"]["by_category"]) == set(TEMPORAL_CATEGORIES)
    assert temporal["plan_shown_upcoming"]["overall"]["of"] == 2
    assert all(block["overall"]["of"] == 0 for block in report["metrics"].values())
    assert _evaluate(chosen)["temporal"] == temporal  # deterministic
    text = render_markdown(report | {"embedder": "hash", "extraction": "rules"})
    assert "temporal_pass ↑" in text and "| temporal_passed_plan |" in text
    assert "current_first" not in text  # nothing of the other categories was measured
