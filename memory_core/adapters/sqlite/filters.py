"""A search filter (:mod:`memory_core.domain.filters`) as a parameterised SQL condition on ``memories``.

Column names come from the domain's table of fields, never from the caller; every value is a bound
parameter. Times are compared as the epoch seconds the store keeps; metadata through ``json_each``
over the stored JSON (a value, or each element of a list), with the JSON type checked so a string
never equals a number; ``run_id`` through the sessions of the memory's provenance entries.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_core.domain.filters import FIELDS, AllOf, AnyOf, Condition, Filter, each_value

__all__ = ["filter_sql"]

_ORDER = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
#: The JSON types an equality on a metadata value accepts, by the value's Python type.
_JSON_TYPES = {str: "('text')", float: "('integer', 'real')"}


def filter_sql(node: Filter) -> tuple[str, list[Any]]:
    """The SQL condition of ``node`` and its parameters, in order.

    Raises:
        ValueError: A node the domain's parser does not make (a field outside its table).
    """
    if isinstance(node, AllOf | AnyOf):
        joiner = " AND " if isinstance(node, AllOf) else " OR "
        parts = [filter_sql(part) for part in node.parts]
        return "(" + joiner.join(sql for sql, _ in parts) + ")", [p for _, params in parts for p in params]
    return _condition(node)


def _condition(c: Condition) -> tuple[str, list[Any]]:
    if c.operator in ("in", "nin"):
        return filter_sql(each_value(c))
    if c.field == "metadata":
        assert c.key is not None  # (the parser sets it)
        return _metadata(c.key, c.operator, c.value)
    if c.field == "run_id":
        sql = (
            "EXISTS (SELECT 1 FROM json_each(memories.provenance) AS p "
            "WHERE json_extract(p.value, '$.session_id') = ?)"
        )
        return (sql if c.operator == "eq" else f"NOT {sql}"), [c.value]
    if c.field not in FIELDS:
        raise ValueError(f"{c.field!r} is not a filterable field")
    column = f"memories.{c.field}"
    value = c.value.timestamp() if isinstance(c.value, datetime) else c.value
    if c.operator == "eq":
        return f"{column} IS ?", [value]
    if c.operator == "ne":
        return f"{column} IS NOT ?", [value]  # (also a memory without the field, as OData's ne)
    return f"{column} {_ORDER[c.operator]} ?", [value]


def _metadata(key: str, operator: str, value: str | float | bool) -> tuple[str, list[Any]]:
    path = f'$."{key}"'  # (the key is letters, digits, _ and -: checked by the parser)
    params: list[Any]
    if isinstance(value, bool):
        test, params = "j.type = ?", ["true" if value else "false"]
    else:
        test, params = f"j.type IN {_JSON_TYPES[type(value)]} AND j.value = ?", [value]
    each = f"SELECT 1 FROM json_each(memories.metadata, ?) AS j WHERE {test}"  # noqa: S608 - bound values
    sql = f"(json_type(memories.metadata, ?) IS NOT 'object' AND EXISTS ({each}))"
    return (sql if operator == "eq" else f"NOT {sql}"), [path, path, *params]
