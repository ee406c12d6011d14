"""Search filters in Mem0's syntax, read once into a tree both stores compile.

A filter narrows a search inside its scope (the scope is never a filter: ``user_id`` and ``agent_id``
are given on their own and always apply)::

    {"category": "food"}                                     # plain value: equals
    {"importance": {"gte": 0.7}}                             # one operator
    {"AND": [{"kind": "fact"}, {"metadata.topic": {"in": ["travel", "food"]}}]}
    {"OR": [{"category": "plan"}, {"event_at": {"gte": "2026-03-01T00:00:00Z"}}]}

Fields are the names of :data:`FIELDS` (the one table of what may be filtered on, and how), a
metadata key written ``metadata.<key>``, and ``run_id``: the conversation session a memory was said
in (any of its provenance entries). Operators are :data:`OPERATORS`. :func:`parse_filters` checks
everything and raises :class:`~memory_core.errors.ValidationError` naming the bad field or operator;
the SQLite store compiles the tree to parameterised SQL, the Azure store to an OData ``$filter``.

Comparisons hold for a memory that has the field; ``ne`` and ``nin`` also hold for one that lacks it
(no value, or no such metadata key). A metadata value equals the filter's value when it is that value
or, for a list, when one of its elements is (``contains`` says the same); numbers compare as numbers
(``3`` equals ``3.0``), strings and booleans exactly. Ordering (``gt``...) is for numbers and times.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_core.domain.records import MemoryKind, MemoryStatus
from memory_core.domain.validation import ensure_utc, validate_category, validate_memory_id, validate_scope_id
from memory_core.errors import ValidationError

__all__ = [
    "FIELDS",
    "MAX_CONDITIONS",
    "METADATA_KEY",
    "OPERATORS",
    "AllOf",
    "AnyOf",
    "Condition",
    "Filter",
    "each_value",
    "metadata_term",
    "metadata_terms",
    "parse_filters",
    "session_ids",
]

#: What may be filtered on, and as what: ``string``, ``number``, ``datetime`` (an aware datetime or
#: an ISO 8601 string), ``session`` (``run_id``: a session id among the memory's provenance).
FIELDS: dict[str, str] = {
    "id": "string",
    "category": "string",
    "kind": "string",
    "status": "string",
    "source": "string",
    "superseded_by": "string",
    "importance": "number",
    "confidence": "number",
    "retention_score": "number",
    "access_count": "number",
    "created_at": "datetime",
    "updated_at": "datetime",
    "last_accessed_at": "datetime",
    "expires_at": "datetime",
    "valid_from": "datetime",
    "valid_until": "datetime",
    "event_at": "datetime",
    "event_until": "datetime",
    "run_id": "session",
}
#: Fields that may be ``None`` (compared with ``eq`` / ``ne`` ``None``: has no value / has one).
NULLABLE = frozenset(
    {"superseded_by", "last_accessed_at", "expires_at", "valid_from", "valid_until", "event_at", "event_until"}
)
#: Mem0's operators, and the kinds of field each applies to.
OPERATORS: dict[str, frozenset[str]] = {
    "eq": frozenset({"string", "number", "datetime", "session", "metadata"}),
    "ne": frozenset({"string", "number", "datetime", "session", "metadata"}),
    "gt": frozenset({"number", "datetime"}),
    "gte": frozenset({"number", "datetime"}),
    "lt": frozenset({"number", "datetime"}),
    "lte": frozenset({"number", "datetime"}),
    "in": frozenset({"string", "number", "session", "metadata"}),
    "nin": frozenset({"string", "number", "session", "metadata"}),
    "contains": frozenset({"metadata"}),
}
#: A metadata key a filter may name: letters, digits, ``_`` and ``-`` (1-64).
METADATA_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
#: The scope's fields: never filters.
_SCOPE = frozenset({"user_id", "agent_id"})
#: Most conditions in one filter, most values in one ``in`` / ``nin``, deepest nesting of AND / OR.
MAX_CONDITIONS = 64
MAX_VALUES = 100
MAX_DEPTH = 5
#: Longest string value a filter compares (longer metadata values are never equal to one).
MAX_VALUE_CHARS = 200

Scalar = str | float | int | bool | datetime | None


@dataclass(frozen=True, slots=True)
class Condition:
    """One comparison, checked.

    Attributes:
        field: A name of :data:`FIELDS`, or ``metadata`` (then ``key`` is the metadata key).
        operator: ``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``, ``in`` or ``nin`` (``contains``
            is read as ``eq``).
        value: The value (a tuple of values for ``in`` / ``nin``): strings, finite numbers, booleans
            (metadata only), aware UTC datetimes, or ``None`` (``eq`` / ``ne`` on a nullable field).
        key: The metadata key, for ``field == "metadata"``.
    """

    field: str
    operator: str
    value: Any
    key: str | None = None

    @property
    def kind(self) -> str:
        """``metadata``, or the field's kind in :data:`FIELDS`."""
        return "metadata" if self.field == "metadata" else FIELDS[self.field]


@dataclass(frozen=True, slots=True)
class AllOf:
    """Every part holds."""

    parts: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """At least one part holds."""

    parts: tuple[Filter, ...]


Filter = Condition | AllOf | AnyOf


def each_value(condition: Condition) -> AllOf | AnyOf:
    """An ``in`` as any of its values' ``eq``, a ``nin`` as all of their ``ne`` (how both stores read
    them)."""
    single = "eq" if condition.operator == "in" else "ne"
    parts = tuple(Condition(condition.field, single, value, condition.key) for value in condition.value)
    return AnyOf(parts) if condition.operator == "in" else AllOf(parts)


def parse_filters(filters: Mapping[str, Any]) -> Filter:
    """The checked tree of a filter in Mem0's syntax.

    Args:
        filters: ``{"AND": [...]}``, ``{"OR": [...]}``, ``{"field": value}`` or
            ``{"field": {"operator": value}}``; several keys in one mapping must all hold.

    Raises:
        ValidationError: An unknown field or operator, a value of the wrong type, too many
            conditions (the field is ``filters.<path>``).
    """
    counter = [0]
    return _node(filters, "filters", 0, counter)


def _node(raw: Any, where: str, depth: int, counter: list[int]) -> Filter:
    if not isinstance(raw, Mapping) or not raw:
        raise ValidationError(where, "must be a non-empty mapping such as {'category': 'food'} or {'AND': [...]}")
    if depth > MAX_DEPTH:
        raise ValidationError(where, f"nests AND / OR deeper than {MAX_DEPTH}")
    parts: list[Filter] = []
    for name, value in raw.items():
        if not isinstance(name, str):
            raise ValidationError(where, f"has a key that is not a string: {name!r}")
        if name in ("AND", "OR"):
            parts.append(_group(name, value, f"{where}.{name}", depth, counter))
        elif name in ("NOT", "and", "or", "not"):
            raise ValidationError(
                f"{where}.{name}", "is not supported: combine with AND / OR, and negate with ne / nin"
            )
        else:
            parts.extend(_conditions(name, value, f"{where}.{name}", counter))
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _group(name: str, value: Any, where: str, depth: int, counter: list[int]) -> Filter:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise ValidationError(where, "must be a non-empty list of filters")
    parts = tuple(_node(item, f"{where}.{i}", depth + 1, counter) for i, item in enumerate(value))
    if len(parts) == 1:
        return parts[0]
    return AllOf(parts) if name == "AND" else AnyOf(parts)


def _target(name: str, where: str) -> tuple[str, str | None]:
    """The field (and metadata key) a filter key names."""
    if name in FIELDS:
        return name, None
    if name.startswith("metadata."):
        key = name.removeprefix("metadata.")
        if not METADATA_KEY.fullmatch(key):
            raise ValidationError(where, "a metadata key is 1-64 letters, digits, _ or -")
        return "metadata", key
    if name in _SCOPE:
        raise ValidationError(
            where,
            f"is the scope, not a filter: pass {name}= to the call (memories of other users or agents are "
            "never searched); filters narrow the search inside that scope",
        )
    raise ValidationError(
        where,
        f"{name!r} is not a filterable field; the fields are {', '.join(FIELDS)}; a metadata key is "
        f"written metadata.<key> (metadata.{name} for this one)",
    )


def _conditions(name: str, raw: Any, where: str, counter: list[int]) -> list[Filter]:
    field, key = _target(name, where)
    operations = raw if isinstance(raw, Mapping) else {"eq": raw}
    if not operations:
        raise ValidationError(where, "needs an operator, such as {'eq': ...}")
    found: list[Filter] = []
    for operator, value in operations.items():
        kind = "metadata" if key is not None else FIELDS[field]
        allowed = OPERATORS.get(operator) if isinstance(operator, str) else None
        if allowed is None:
            raise ValidationError(f"{where}.{operator}", f"is not an operator; use one of {', '.join(OPERATORS)}")
        if kind not in allowed:
            usable = [o for o, kinds in OPERATORS.items() if kind in kinds]
            raise ValidationError(
                f"{where}.{operator}", f"does not apply to {name} ({kind}); use one of {', '.join(usable)}"
            )
        counter[0] += 1
        if counter[0] > MAX_CONDITIONS:
            raise ValidationError("filters", f"has more than {MAX_CONDITIONS} conditions")
        op = "eq" if operator == "contains" else operator
        if op in ("in", "nin"):
            checked: Any = _values(field, key, value, f"{where}.{operator}")
        else:
            checked = _value(field, key, value, f"{where}.{operator}", none_allowed=op in ("eq", "ne"))
        found.append(Condition(field, op, checked, key))
    return found


def _values(field: str, key: str | None, value: Any, where: str) -> tuple[Any, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise ValidationError(where, "must be a non-empty list of values")
    if len(value) > MAX_VALUES:
        raise ValidationError(where, f"has more than {MAX_VALUES} values")
    return tuple(_value(field, key, item, f"{where}.{i}", none_allowed=False) for i, item in enumerate(value))


def _value(field: str, key: str | None, value: Any, where: str, *, none_allowed: bool) -> Scalar:
    """``value`` checked for ``field`` (normalised: a datetime in UTC, an enum's value)."""
    if value is None:
        if none_allowed and field in NULLABLE:
            return None
        hint = " (only eq / ne on a field that may be empty)" if none_allowed else ""
        raise ValidationError(where, f"cannot be null here{hint}")
    if key is not None:
        return _metadata_value(value, where)
    kind = FIELDS[field]
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValidationError(where, f"must be a finite number, not {value!r}")
        return float(value)
    if kind == "datetime":
        return _time(value, where)
    if not isinstance(value, str):
        raise ValidationError(where, f"must be a string, not {type(value).__name__}")
    return _checked_string(field, value, where)


def _checked_string(field: str, value: str, where: str) -> str:
    try:
        if field == "category":
            return validate_category(value, where)
        if field == "kind":
            return MemoryKind(value).value
        if field == "status":
            return MemoryStatus(value).value
        if field in ("id", "superseded_by"):
            return validate_memory_id(value, where)
        if field == "run_id":
            return validate_scope_id(value, where)
    except ValueError:
        choices = MemoryKind if field == "kind" else MemoryStatus
        raise ValidationError(where, f"{value!r} is not one of {', '.join(c.value for c in choices)}") from None
    except ValidationError as exc:
        raise ValidationError(where, exc.message) from None
    if not 1 <= len(value) <= MAX_VALUE_CHARS:
        raise ValidationError(where, f"must be 1-{MAX_VALUE_CHARS} characters")
    return value


def _time(value: Any, where: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(where, f"{value!r} is not an ISO 8601 time") from None
    if not isinstance(value, datetime):
        raise ValidationError(where, f"must be a datetime or an ISO 8601 string, not {type(value).__name__}")
    try:
        return ensure_utc(value)
    except ValueError as exc:
        raise ValidationError(where, str(exc)) from None


def _metadata_value(value: Any, where: str) -> str | float | bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValidationError(where, "must be a finite number")
        return float(value)
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise ValidationError(where, f"must be at most {MAX_VALUE_CHARS} characters")
        return value
    raise ValidationError(where, f"a metadata value is a string, a number or a boolean, not {type(value).__name__}")


def metadata_term(key: str, value: str | float | bool) -> str:
    """The term one metadata value is indexed as (``key=<JSON value>``; a whole number as an integer),
    so an equality on metadata is an equality on terms (Azure AI Search's ``metadata_terms``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return f"{key}={json.dumps(value, ensure_ascii=False)}"


def metadata_terms(metadata: Mapping[str, Any]) -> list[str]:
    """Every term of a memory's metadata a filter can match: one per scalar value of a key
    :data:`METADATA_KEY` allows, and one per scalar element of a list value (sorted, distinct)."""
    terms: set[str] = set()
    for key, value in metadata.items():
        if not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool) or (isinstance(item, str) and len(item) <= MAX_VALUE_CHARS):
                terms.add(metadata_term(key, item))
            elif isinstance(item, int | float) and math.isfinite(item):
                terms.add(metadata_term(key, float(item)))
    return sorted(terms)


def session_ids(provenance: Sequence[Any]) -> list[str]:
    """The sessions a memory was said in (``run_id``), from its provenance entries (sorted, distinct)."""
    return sorted({p.session_id for p in provenance if getattr(p, "session_id", None)})
