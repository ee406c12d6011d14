"""How the MCP tools read their arguments: a string stays text, and a rejected argument is named in
plain words (no SDK here)."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from datetime import date, datetime
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo

from memory_core.domain.validation import describe_value, error_location, error_message

__all__ = ["decode_json_strings", "plain_errors", "takes_text"]

#: How many problems one error message names (the rest are counted).
MAX_NAMED_PROBLEMS = 3


def takes_text(annotation: Any) -> bool:
    """Whether a parameter of this type can take a string as it is (text, a choice, a time): such a
    string is never read as JSON, so ``"null"``, ``"42"`` or ``'{"a": 1}'`` stay text."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return any(takes_text(arg) for arg in get_args(annotation))
    if origin is Literal:
        return any(isinstance(arg, str) for arg in get_args(annotation))
    if isinstance(annotation, type):
        return issubclass(annotation, (str, datetime, date)) or (
            issubclass(annotation, Enum) and any(isinstance(m.value, str) for m in annotation)
        )
    return annotation is Any


def decode_json_strings(arguments: dict[str, Any], fields: dict[str, FieldInfo]) -> dict[str, Any]:
    """``arguments`` with a string given for a list or an object parameter decoded from JSON (some
    clients send ``messages`` or ``filters`` so); a parameter that takes text keeps its string."""
    decoded = dict(arguments)
    for name, value in arguments.items():
        field = fields.get(name)
        if field is None or not isinstance(value, str) or takes_text(field.annotation):
            continue
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, (list, dict)):
            decoded[name] = parsed
    return decoded


def _kind(value: Any) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _choices(expected: str) -> str:
    """Pydantic's ``'a', 'b' or 'c'`` as ``a, b or c``."""
    return expected.replace("'", "")


#: Names pydantic gives the members of a union in an error's location (``content.str``).
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "datetime", "date"})


def _is_tag(part: object) -> bool:
    return isinstance(part, str) and (part in _UNION_TAGS or "[" in part)


def _choice(value: Any, ctx: dict[str, Any], name: str) -> str:
    noun = f"a {name}" if name.isalpha() else "one of the choices"
    return f"{describe_value(value)} is not {noun}; use {_choices(str(ctx.get('expected', '')))}"


def _too_long(value: Any, ctx: dict[str, Any], name: str) -> str:
    size = len(value) if isinstance(value, str) else "too many"
    return f"is {size} characters long; the most is {ctx.get('max_length')}"


def _bound(words: str, key: str) -> Callable[[Any, dict[str, Any], str], str]:
    return lambda value, ctx, name: f"must be {words} {ctx.get(key)}, not {describe_value(value)}"


def _expects(what: str, *, show: bool = False) -> Callable[[Any, dict[str, Any], str], str]:
    return lambda value, ctx, name: f"must be {what}, not {describe_value(value) if show else _kind(value)}"


_Words = Callable[[Any, dict[str, Any], str], str]

#: What each kind of pydantic error says, in plain words (given the value, the error's context and
#: the field's own name).
_WORDS: dict[str, _Words] = {
    "missing": lambda value, ctx, name: "is required",
    "extra_forbidden": lambda value, ctx, name: "is not a parameter of this tool",
    "literal_error": _choice,
    "enum": _choice,
    "string_type": _expects("text (a string)"),
    "int_type": _expects("a whole number", show=True),
    "int_parsing": _expects("a whole number", show=True),
    "int_from_float": _expects("a whole number", show=True),
    "float_type": _expects("a number", show=True),
    "float_parsing": _expects("a number", show=True),
    "bool_type": _expects("true or false", show=True),
    "bool_parsing": _expects("true or false", show=True),
    "list_type": _expects("a list"),
    "dict_type": _expects("an object"),
    "model_type": _expects("an object"),
    "model_attributes_type": _expects("an object"),
    "string_too_short": lambda value, ctx, name: "is empty" if ctx.get("min_length") == 1 else "is too short",
    "string_too_long": _too_long,
    "too_short": lambda value, ctx, name: f"needs at least {ctx.get('min_length')} item(s)",
    "too_long": lambda value, ctx, name: f"has {ctx.get('actual_length')} items; the most is {ctx.get('max_length')}",
    "greater_than_equal": _bound("at least", "ge"),
    "less_than_equal": _bound("at most", "le"),
    "greater_than": _bound("more than", "gt"),
    "less_than": _bound("less than", "lt"),
}


def _problem(error: Any) -> str:
    """One pydantic error in plain words, naming its field."""
    loc = [part for part in error.get("loc", ()) if not _is_tag(part)]
    field = error_location(loc) or "arguments"
    kind = str(error.get("type", ""))
    value = error.get("input")
    words = _WORDS.get(kind)
    if words is not None:
        return f"{field}: {words(value, error.get('ctx') or {}, str(loc[-1]) if loc else field)}"
    if kind.startswith(("datetime_", "date_")):
        return f"{field}: {describe_value(value)} is not a date and time such as 2026-03-01T09:00:00Z"
    message = str(error.get("msg", "is invalid")).removeprefix("Value error, ")
    return f"{field}: {message.replace('Input should be', 'must be')}"


def plain_errors(exc: PydanticValidationError) -> str:
    """A rejected call's arguments in plain words: each problem names its field (``messages.3.role``)
    and says what to give instead, at most :data:`MAX_NAMED_PROBLEMS` of them."""
    problems: list[str] = []
    for problem in (_problem(error) for error in exc.errors(include_url=False)):
        merged = _either(problems[-1], problem) if problems else None
        if merged is None:
            problems.append(problem)
        else:
            problems[-1] = merged
    named = problems[:MAX_NAMED_PROBLEMS]
    more = len(problems) - len(named)
    text = "; ".join(named) + (f" (and {more} more problem(s))" if more > 0 else "")
    return error_message(text)


def _either(first: str, second: str) -> str | None:
    """Two problems of one field that accepts either of two kinds as one (``content: must be text
    (a string) or a list, not a number``), or ``None``."""
    field, _, said = first.partition(": must be ")
    other_field, _, other = second.partition(": must be ")
    if not said or not other or field != other_field:
        return None
    kind, _, found = said.rpartition(", not ")
    other_kind, _, other_found = other.rpartition(", not ")
    if not kind or found != other_found:
        return None
    return f"{field}: must be {kind} or {other_kind}, not {found}"
