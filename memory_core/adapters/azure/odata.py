"""OData ``$filter`` and ``$orderby`` expressions for Azure AI Search, built from structured options.

No caller-supplied OData ever reaches the service: every expression is assembled here from a fixed
set of field names and values that were validated first (scope ids, memory ids and categories by the
rules in :mod:`memory_core.domain.records`, numbers as finite floats, times as aware datetimes). String
literals are still quoted the OData way (a single quote is written twice), so even a value that got
past validation could not end the literal and change the expression.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from memory_core.domain.filters import AllOf, AnyOf, Filter, each_value, metadata_term
from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy
from memory_core.domain.search_time import MOMENT_CATEGORIES, TimeWindow
from memory_core.domain.validation import ensure_utc, validate_category, validate_memory_id, validate_scope_id
from memory_core.errors import ValidationError

__all__ = [
    "FILTERABLE_FIELDS",
    "and_",
    "any_in",
    "any_of",
    "as_of_filter",
    "compare",
    "current_filter",
    "datetime_literal",
    "eq",
    "filters_expression",
    "id_in",
    "kind_filter",
    "moment_filter",
    "number_literal",
    "order_by",
    "quote",
    "scope_filter",
    "search_filter",
    "status_filter",
    "user_filter",
    "window_filter",
]

#: Fields an expression may name, with their OData kind.
FILTERABLE_FIELDS: dict[str, str] = {
    "id": "string",
    "user_id": "string",
    "agent_id": "string",
    "category": "string",
    "status": "string",
    "source": "string",
    "kind": "string",
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
    "superseded_by": "string",
    "event_at": "datetime",
    "event_until": "datetime",
    "metadata_terms": "collection",
    "session_ids": "collection",
    "entity_ids": "collection",
}
#: The index's string collections a filter of :mod:`memory_core.domain.filters` tests: the terms of
#: a memory's metadata (:func:`~memory_core.domain.filters.metadata_terms`) and its sessions.
_COLLECTIONS = {"metadata": "metadata_terms", "run_id": "session_ids"}
#: Mem0's operators as OData's.
_MEM0_OPERATORS = {"eq": "eq", "ne": "ne", "gt": "gt", "gte": "ge", "lt": "lt", "lte": "le"}

_OPERATORS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})


def quote(value: str) -> str:
    """An OData string literal: ``value`` in single quotes, each ``'`` inside doubled.

    Args:
        value: Any string.

    Returns:
        The literal, for example ``'O''Brien'`` for ``O'Brien``.

    Raises:
        ValidationError: If ``value`` is not a string.
    """
    if not isinstance(value, str):
        raise ValidationError("value", "an OData string literal needs a string")
    return "'" + value.replace("'", "''") + "'"


def number_literal(value: float) -> str:
    """A finite number as an OData ``Edm.Double`` literal."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError("value", f"{value!r} is not a finite number")
    return repr(float(value))


def datetime_literal(value: datetime) -> str:
    """An aware UTC datetime as an OData ``Edm.DateTimeOffset`` literal (unquoted, ``Z`` suffix)."""
    if not isinstance(value, datetime):
        raise ValidationError("value", f"{value!r} is not a datetime")
    return ensure_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _field(name: str) -> str:
    if name not in FILTERABLE_FIELDS:
        raise ValidationError("field", f"{name!r} is not a filterable field")
    return name


def compare(field: str, operator: str, value: str | float | datetime | None) -> str:
    """``field operator literal`` for a known field; the literal is built from ``value``'s type."""
    kind = FILTERABLE_FIELDS.get(_field(field))
    if operator not in _OPERATORS:
        raise ValidationError("operator", f"{operator!r} is not one of {sorted(_OPERATORS)}")
    if value is None:
        if operator not in {"eq", "ne"}:
            raise ValidationError("value", "null can only be compared with eq or ne")
        literal = "null"
    elif kind == "string":
        if not isinstance(value, str):
            raise ValidationError(field, "must be compared with a string")
        literal = quote(value)
    elif kind == "number":
        if not isinstance(value, int | float):
            raise ValidationError(field, "must be compared with a number")
        literal = number_literal(value)
    else:
        if not isinstance(value, datetime):
            raise ValidationError(field, "must be compared with a datetime")
        literal = datetime_literal(value)
    return f"{field} {operator} {literal}"


def eq(field: str, value: str | float | datetime | None) -> str:
    """``field eq literal``."""
    return compare(field, "eq", value)


def and_(*clauses: str | None) -> str:
    """The non-empty clauses joined with ``and`` (each already a complete expression)."""
    return " and ".join(c for c in clauses if c)


def _or(clauses: Sequence[str]) -> str:
    if len(clauses) == 1:
        return clauses[0]
    return "(" + " or ".join(clauses) + ")"


def scope_filter(scope: Scope) -> str:
    """``user_id eq '…' and agent_id eq '…'`` for a validated scope."""
    user_id = validate_scope_id(scope.user_id, "user_id")
    agent_id = validate_scope_id(scope.agent_id, "agent_id")
    return and_(eq("user_id", user_id), eq("agent_id", agent_id))


def user_filter(user_id: str, agent_id: str | None = None) -> str:
    """One user's memories, optionally of one agent."""
    clauses = [eq("user_id", validate_scope_id(user_id, "user_id"))]
    if agent_id is not None:
        clauses.append(eq("agent_id", validate_scope_id(agent_id, "agent_id")))
    return and_(*clauses)


def status_filter(statuses: Iterable[MemoryStatus | str]) -> str:
    """Any of ``statuses`` (each must be a :class:`MemoryStatus`)."""
    values: list[str] = []
    for status in statuses:
        try:
            value = MemoryStatus(status).value
        except ValueError:
            raise ValidationError("status", f"{status!r} is not a memory status") from None
        if value not in values:
            values.append(value)
    if not values:
        raise ValidationError("statuses", "must name at least one status")
    return _or([eq("status", v) for v in values])


def id_in(ids: Iterable[str]) -> str:
    """``search.in(id, 'a,b', ',')`` for validated memory ids (which can never contain a comma)."""
    checked = [validate_memory_id(i) for i in ids]
    if not checked:
        raise ValidationError("ids", "must name at least one memory id")
    return f"search.in(id, {quote(','.join(checked))}, ',')"


def _collection(name: str) -> str:
    if FILTERABLE_FIELDS.get(name) != "collection":
        raise ValidationError("field", f"{name!r} is not a filterable string collection")
    return name


def any_of(collection: str) -> str:
    """``collection/any()``: the documents whose string collection holds at least one value."""
    return f"{_collection(collection)}/any()"


def any_in(collection: str, values: Sequence[str]) -> str:
    """``collection/any(e: search.in(e, 'a,b', ','))``: the documents whose string collection holds one
    of ``values`` (validated ids, which never contain a comma; each literal is still quoted)."""
    checked = list(values)
    if not checked or any(not isinstance(v, str) or not v or "," in v for v in checked):
        raise ValidationError("values", "must be one or more non-empty strings without a comma")
    return f"{_collection(collection)}/any(e: search.in(e, {quote(','.join(checked))}, ','))"


def kind_filter(kind: MemoryKind) -> str:
    """Memories of one kind (documents indexed before ``kind`` existed are facts)."""
    if MemoryKind(kind) is MemoryKind.EPISODE:
        return eq("kind", MemoryKind.EPISODE.value)
    return _or([eq("kind", MemoryKind.FACT.value), eq("kind", None)])


def search_filter(
    scope: Scope, options: MemorySearchOptions, now: datetime, window: TimeWindow | None = None
) -> str:
    """The complete filter of a search: scope, status, category, kind, minimums, expiry, and what is
    current now, at ``options.as_of`` or in ``window``.

    Args:
        scope: Whose memories.
        options: Validated search options.
        now: The current time; memories that expired at or before it are excluded.
        window: Only memories whose span overlaps it (:func:`window_filter`).

    Returns:
        An OData ``$filter`` expression.
    """
    statuses = [MemoryStatus.ACTIVE]
    if options.include_archived:
        statuses.append(MemoryStatus.ARCHIVED)
    clauses = [scope_filter(scope), status_filter(statuses)]
    if options.category is not None:
        clauses.append(eq("category", validate_category(options.category)))
    if options.kind is not None:
        clauses.append(kind_filter(options.kind))
    if options.min_importance is not None:
        clauses.append(compare("importance", "ge", options.min_importance))
    if options.min_retention_score is not None:
        clauses.append(compare("retention_score", "ge", options.min_retention_score))
    clauses.append(_or([eq("expires_at", None), compare("expires_at", "gt", now)]))
    tree = options.filter_tree()
    if tree is not None:
        clauses.append(filters_expression(tree))
    if options.as_of is not None:
        clauses.append(as_of_filter(options.as_of))
    elif window is not None:
        clauses.append(window_filter(window))
        if not options.include_superseded:
            clauses.append(current_filter(window.start))
    elif not options.include_superseded:
        clauses.append(current_filter(now))
    return and_(*clauses)


def moment_filter(*, negated: bool = False) -> str:
    """The memories of something that happened once (an episode, or a category of
    :data:`~memory_core.domain.search_time.MOMENT_CATEGORIES`), or with ``negated`` every other one (a
    document without ``kind`` is a fact)."""
    if negated:
        return and_(
            compare("kind", "ne", MemoryKind.EPISODE.value),
            *(compare("category", "ne", validate_category(c)) for c in MOMENT_CATEGORIES),
        )
    return _or([eq("kind", MemoryKind.EPISODE.value), *(eq("category", validate_category(c)) for c in MOMENT_CATEGORIES)])


def filters_expression(node: Filter) -> str:
    """A checked filter of :mod:`memory_core.domain.filters` as an OData expression (the rule the
    embedded store's SQL applies: ``ne`` also holds without a value; metadata and ``run_id`` are
    tests on the index's string collections, with every literal quoted).

    Raises:
        ValidationError: A field outside the domain's table.
    """
    if isinstance(node, AllOf):
        return "(" + and_(*(filters_expression(part) for part in node.parts)) + ")"
    if isinstance(node, AnyOf):
        return "(" + " or ".join(filters_expression(part) for part in node.parts) + ")"
    if node.operator == "in" and node.field == "id":
        return id_in(node.value)  # checked memory ids: one search.in, not an "or" per id (the entity leg narrows so)
    if node.operator in ("in", "nin"):
        return filters_expression(each_value(node))
    collection = _COLLECTIONS.get(node.field)
    if collection is not None:
        value = node.value if node.key is None else metadata_term(node.key, node.value)
        test = f"{collection}/any(t: t eq {quote(value)})"
        return test if node.operator == "eq" else f"not {test}"
    if node.field == "kind" and node.operator in ("eq", "ne"):  # (documents older than kind are facts)
        wanted = MemoryKind(node.value)
        if node.operator == "ne":
            wanted = MemoryKind.FACT if wanted is MemoryKind.EPISODE else MemoryKind.EPISODE
        return kind_filter(wanted)
    return compare(node.field, _MEM0_OPERATORS[node.operator], node.value)  # (ne: also null, as OData has it)


def window_filter(window: TimeWindow) -> str:
    """The memories whose span overlaps ``window`` (the rule of :mod:`memory_core.domain.search_time`):
    an event span (``event_at lt end and event_until gt start``; a point event at or after the start),
    else the validity (``valid_from`` before the end, ``valid_until`` none or after the start) of a
    memory that holds over time, else a point: ``valid_from`` of an undated memory of a moment
    (:func:`moment_filter`), or ``created_at``, inside the window."""
    start, end = window.start, window.end
    event = and_(
        compare("event_at", "lt", end),
        _or([compare("event_until", "gt", start), and_(eq("event_until", None), compare("event_at", "ge", start))]),
    )
    validity = and_(
        eq("event_at", None),
        moment_filter(negated=True),
        compare("valid_from", "lt", end),
        _or([eq("valid_until", None), compare("valid_until", "gt", start)]),
    )
    moment = and_(
        eq("event_at", None), moment_filter(), compare("valid_from", "ge", start), compare("valid_from", "lt", end)
    )
    made = and_(
        eq("event_at", None), eq("valid_from", None), compare("created_at", "ge", start), compare("created_at", "lt", end)
    )
    return _or([event, validity, moment, made])


def as_of_filter(at: datetime) -> str:
    """The memories current at ``at``: valid from (``valid_from``, else ``created_at``) at or before it
    and not closed by then (earlier values included, what was said later not)."""
    began = _or([compare("valid_from", "le", at), and_(eq("valid_from", None), compare("created_at", "le", at))])
    return and_(began, current_filter(at))


def current_filter(at: datetime) -> str:
    """The memories current at ``at``: none superseded by then (no ``valid_until``, or a later one)."""
    return _or([eq("valid_until", None), compare("valid_until", "gt", at)])


def order_by(order: OrderBy | None) -> list[str] | None:
    """``$orderby`` clauses for an :class:`OrderBy` (``None`` keeps relevance order)."""
    if order is None:
        return None
    order = OrderBy(order)
    _field(order.field)
    return [f"{order.field} {'desc' if order.descending else 'asc'}"]
