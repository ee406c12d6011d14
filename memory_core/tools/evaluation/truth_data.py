"""The scenarios of ``memory-core eval truth``: short conversations and what the memory should believe after.

The packaged set is ``memory_core/tools/evaluation/data/truth_scenarios.json``. A scenario has an ``id``,
a ``lang`` (``en`` or ``ja``), a ``category`` (:data:`CATEGORIES`), its ``turns`` (each a ``user``
message, optionally the ``assistant`` reply, and ``days_ago``: how long before the reference time it
was said, never more than the turn before it) and its ``probes``: a ``query`` with the values
``current`` (any of them in a hit makes it the current value), ``superseded`` (must not be shown as
current), ``kept`` (must still be in an active memory), ``forbidden`` (must not be found anywhere)
and ``answerable`` (``false``: nothing should be injected). A ``chatter`` scenario lists its chatter
lines under ``chatter`` (each one of its user messages).

The temporal categories (:data:`TEMPORAL_CATEGORIES`) ask about time, and their probes use fields of
their own (and none of the above, so the other metrics do not change with them): ``expect`` (any of
them in a hit makes it the memory asked for), ``not_first`` (the first injected memory must not hold
any: the value of another time), ``event_on`` (the day the expected memory's event time must cover, as
``"-12d"``: days before the reference time, ``"+9d"`` after it), ``not_upcoming`` (values of a plan whose date has passed:
no injected memory holding one may be presented as an upcoming plan) and ``asked_days_after`` (the
probe is asked that many days after the reference time; default 0).

The entity categories (:data:`ENTITY_CATEGORIES`) ask about the people, pets, places and organisations
the user spoke of (by name, alias or relation, look-alike names, two-step questions, forget by person)
and are scored by their own metrics alone: a probe gives ``expect`` (and ``not_first``, the value of a
look-alike), and may give ``kept`` and ``forbidden`` (what forget by entity must keep and remove).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "CATEGORIES",
    "ENTITY_CATEGORIES",
    "LANGUAGES",
    "TEMPORAL_CATEGORIES",
    "TruthProbe",
    "TruthScenario",
    "TruthSet",
    "TruthTurn",
    "load_truth_set",
    "parse_truth_set",
]

#: Every category of the set, in the order the report lists them.
CATEGORIES: tuple[str, ...] = (
    "one_value_change",
    "many_values",
    "explicit_change",
    "correction",
    "negation",
    "forget_one",
    "forget_category",
    "forget_person",
    "secret",
    "chatter",
    "unanswerable",
    "temporal_when",
    "temporal_as_of",
    "temporal_period",
    "temporal_passed_plan",
    "entity_alias",
    "entity_relation",
    "entity_lookalike",
    "entity_two_step",
    "entity_forget",
)
#: The categories that ask about time (scored by the temporal metrics alone).
TEMPORAL_CATEGORIES: tuple[str, ...] = ("temporal_when", "temporal_as_of", "temporal_period", "temporal_passed_plan")
#: The categories that ask about entities (scored by the entity metrics alone).
ENTITY_CATEGORIES: tuple[str, ...] = CATEGORIES[-5:]
#: The languages of the set.
LANGUAGES: tuple[str, ...] = ("en", "ja")
#: The reference time ("now") when the file does not give one.
DEFAULT_REFERENCE = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
_VALUE_FIELDS = ("current", "superseded", "kept", "forbidden")
_TEMPORAL_FIELDS = ("expect", "not_first", "not_upcoming")
_DAY_OFFSET = re.compile(r"^([+-])(\d+(?:\.\d+)?)d$")


@dataclass(frozen=True, slots=True)
class TruthTurn:
    """One turn: the user's message, the assistant's reply (if any), and its age in days."""

    user: str
    assistant: str | None
    days_ago: float


@dataclass(frozen=True, slots=True)
class TruthProbe:
    """A question asked after the conversation, and what the answer must (not) hold."""

    query: str
    current: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    answerable: bool = True
    #: Temporal probes: any of these in a hit makes it the memory asked for.
    expect: tuple[str, ...] = ()
    #: The first injected memory must hold none of these (a value of another time).
    not_first: tuple[str, ...] = ()
    #: The day the expected memory's event time must cover, in days before the reference time
    #: (negative: after it).
    event_days_ago: float | None = None
    #: Values of a plan whose date has passed: never presented as an upcoming plan.
    not_upcoming: tuple[str, ...] = ()
    #: Asked this many days after the reference time.
    asked_days_after: float = 0.0

    @property
    def temporal(self) -> bool:
        """Whether the probe asks about time (uses a temporal field)."""
        return bool(self.expect or self.not_upcoming)


@dataclass(frozen=True, slots=True)
class TruthScenario:
    """One conversation and its probes."""

    id: str
    lang: str
    category: str
    turns: tuple[TruthTurn, ...]
    probes: tuple[TruthProbe, ...]
    chatter: tuple[str, ...] = ()

    @property
    def kept(self) -> tuple[str, ...]:
        """Every value the probes say must stay, once each, in order."""
        return _union(p.kept for p in self.probes)

    @property
    def superseded(self) -> tuple[str, ...]:
        """Every value the probes say no longer holds, once each, in order."""
        return _union(p.superseded for p in self.probes)

    @property
    def forbidden(self) -> tuple[str, ...]:
        """Every value the probes say must not be found, once each, in order."""
        return _union(p.forbidden for p in self.probes)


@dataclass(frozen=True, slots=True)
class TruthSet:
    """The whole set and its reference time (the "now" of every probe)."""

    name: str
    version: int
    reference_time: datetime
    scenarios: tuple[TruthScenario, ...]

    def select(self, langs: Sequence[str] = (), categories: Sequence[str] = ()) -> TruthSet:
        """The scenarios of these languages and categories (empty: all)."""
        kept = tuple(
            s
            for s in self.scenarios
            if (not langs or s.lang in langs) and (not categories or s.category in categories)
        )
        return TruthSet(self.name, self.version, self.reference_time, kept)


def _union(groups: Any) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(group))
    return tuple(seen)


def _strings(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    values = raw.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        raise ValueError(f"{where}: {key} must be a list of non-empty strings")
    return tuple(values)


def _text(raw: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: {key} must be a non-empty string")
    return value


def _turns(raw: Sequence[Any], where: str) -> tuple[TruthTurn, ...]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: turns must be a non-empty list")
    turns: list[TruthTurn] = []
    for at, t in enumerate(raw):
        place = f"{where} turn {at}"
        days = t.get("days_ago", 0)
        if not isinstance(days, int | float) or isinstance(days, bool) or days < 0:
            raise ValueError(f"{place}: days_ago must be a number of days, at least 0")
        if turns and days > turns[-1].days_ago:
            raise ValueError(f"{place}: days_ago goes back in time (the last turn is the most recent)")
        user = _text(t, "user", place)
        assert user is not None
        turns.append(TruthTurn(user, _text(t, "assistant", place, required=False), float(days)))
    return tuple(turns)


def _probe(raw: Mapping[str, Any], where: str) -> TruthProbe:
    query = _text(raw, "query", where)
    assert query is not None
    values = {key: _strings(raw, key, where) for key in _VALUE_FIELDS}
    answerable = raw.get("answerable", True)
    if not isinstance(answerable, bool):
        raise ValueError(f"{where}: answerable must be true or false")
    if not answerable and values["current"]:
        raise ValueError(f"{where}: an unanswerable probe has no current value")
    timed = {key: _strings(raw, key, where) for key in _TEMPORAL_FIELDS}
    event_on = raw.get("event_on")
    days: float | None = None
    if event_on is not None:
        match = _DAY_OFFSET.match(event_on) if isinstance(event_on, str) else None
        if match is None:
            raise ValueError(f'{where}: event_on must be days from the reference time, as "-12d" or "+9d"')
        days = float(match.group(2)) * (1 if match.group(1) == "-" else -1)
        if not timed["expect"]:
            raise ValueError(f"{where}: event_on needs expect (the memory whose date it is)")
    after = raw.get("asked_days_after", 0)
    if not isinstance(after, int | float) or isinstance(after, bool) or after < 0:
        raise ValueError(f"{where}: asked_days_after must be a number of days, at least 0")
    return TruthProbe(
        query=query,
        answerable=answerable,
        event_days_ago=days,
        asked_days_after=float(after),
        **values,
        **timed,
    )


def _check_entity(sid: str, probes: Sequence[TruthProbe], chatter: Sequence[str]) -> None:
    """An entity scenario's probes use expect, not_first, kept and forbidden alone."""
    for at, p in enumerate(probes):
        if not (p.expect or p.forbidden):
            raise ValueError(f"{sid} probe {at}: an entity probe names expect or forbidden")
        if p.current or p.superseded or not p.answerable or p.not_upcoming or p.event_days_ago is not None:
            raise ValueError(
                f"{sid} probe {at}: an entity probe uses expect, not_first, kept and forbidden "
                "(not current, superseded, answerable, event_on or not_upcoming)"
            )
    if chatter:
        raise ValueError(f"{sid}: an entity scenario lists no chatter lines")


def _check_kind(sid: str, category: str, probes: Sequence[TruthProbe], chatter: Sequence[str]) -> None:
    """A temporal scenario uses the temporal fields alone; the others none of them."""
    if category in TEMPORAL_CATEGORIES:
        for at, p in enumerate(probes):
            if not p.temporal:
                raise ValueError(f"{sid} probe {at}: a temporal probe names expect or not_upcoming")
            if p.current or p.superseded or p.kept or p.forbidden or not p.answerable:
                raise ValueError(
                    f"{sid} probe {at}: a temporal probe uses expect, not_first, event_on and not_upcoming "
                    "(not current, superseded, kept, forbidden or answerable)"
                )
        if chatter:
            raise ValueError(f"{sid}: a temporal scenario lists no chatter lines")
        return
    if category in ENTITY_CATEGORIES:
        _check_entity(sid, probes, chatter)
        return
    for at, p in enumerate(probes):
        if p.temporal or p.not_first or p.event_days_ago is not None or p.asked_days_after:
            raise ValueError(f"{sid} probe {at}: only a temporal category's probes use the temporal fields")


def _scenario(raw: Mapping[str, Any]) -> TruthScenario:
    sid = _text(raw, "id", "a scenario")
    assert sid is not None
    lang, category = raw.get("lang"), raw.get("category")
    if lang not in LANGUAGES:
        raise ValueError(f"{sid}: lang must be one of {', '.join(LANGUAGES)}")
    if category not in CATEGORIES:
        raise ValueError(f"{sid}: unknown category {category!r}")
    turns = _turns(raw.get("turns", []), sid)
    probes_raw = raw.get("probes", [])
    if not isinstance(probes_raw, list) or not probes_raw:
        raise ValueError(f"{sid}: probes must be a non-empty list")
    probes = tuple(_probe(p, f"{sid} probe {i}") for i, p in enumerate(probes_raw))
    chatter = _strings(raw, "chatter", sid)
    said = {t.user for t in turns}
    if any(line not in said for line in chatter):
        raise ValueError(f"{sid}: every chatter line must be one of its user messages")
    if category == "chatter" and not chatter:
        raise ValueError(f"{sid}: a chatter scenario lists its chatter lines")
    _check_kind(sid, str(category), probes, chatter)
    return TruthScenario(sid, str(lang), str(category), turns, probes, chatter)


def parse_truth_set(raw: Mapping[str, Any]) -> TruthSet:
    """The set from its JSON document, checked.

    Raises:
        ValueError: A scenario breaks a rule of the format (the message names it), or two share an id.
    """
    scenarios = tuple(_scenario(s) for s in raw.get("scenarios", []))
    ids = [s.id for s in scenarios]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"scenario ids must be unique: {', '.join(duplicates)}")
    when = raw.get("reference_time")
    reference = datetime.fromisoformat(when).astimezone(UTC) if when else DEFAULT_REFERENCE
    return TruthSet(str(raw.get("name", "")), int(raw.get("version", 1)), reference, scenarios)


def load_truth_set(path: str | Path | None = None) -> TruthSet:
    """Load and check the set (default: the copy shipped in the package)."""
    if path is None:
        text = (
            resources.files("memory_core.tools.evaluation")
            .joinpath("data/truth_scenarios.json")
            .read_text("utf-8")
        )
    else:
        text = Path(path).read_text(encoding="utf-8")
    return parse_truth_set(json.loads(text))
