"""Validation of the values that reach a filter or SQL: scope ids, memory ids, categories, metadata, times.

Each id is checked against a short, documented character set before it reaches any filter or SQL.
"""

from __future__ import annotations

import json
import math
import re
import types
import typing
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel
from pydantic import ValidationError as PydanticValidationError

from memory_core.errors import ValidationError

__all__ = [
    "CONTROL_CHARACTERS",
    "MAX_MEMORY_CHARS",
    "MAX_METADATA_DEPTH",
    "MAX_STATUS_REASON",
    "MESSAGE_CONTROL_CHARACTERS",
    "RESERVED_METADATA_KEYS",
    "AgentId",
    "CategoryName",
    "UserId",
    "UtcDateTime",
    "check_length",
    "check_metadata_depth",
    "describe_value",
    "ensure_utc",
    "error_location",
    "error_message",
    "field_type",
    "new_memory_id",
    "parse_model",
    "unit_interval",
    "utcnow",
    "validate_caller_metadata",
    "validate_category",
    "validate_entity_id",
    "validate_memory_id",
    "validate_memory_ids",
    "validate_positive_int",
    "validate_scope_id",
]


M = TypeVar("M", bound=BaseModel)


#: Scope ids (``user_id``, ``agent_id``): 1-128 characters, starting with a letter or digit, then
#: letters, digits and ``_ - . @ :``. Nothing that can close a quote or start an expression.
SCOPE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:\-]{0,127}")


#: Memory ids follow Azure AI Search's key rules: 1-128 letters, digits, ``_`` and ``-``.
MEMORY_ID_PATTERN = re.compile(r"[A-Za-z0-9_\-]{1,128}")
#: Entity ids: ``ent_`` and 24 hex digits (:func:`~memory_core.domain.entities.entity_id`).
ENTITY_ID_PATTERN = re.compile(r"ent_[0-9a-f]{24}")


#: Categories: 1-64 word characters of any script (so ``食事`` works), digits, ``_ - .``.
CATEGORY_PATTERN = re.compile(r"[\w.\-]{1,64}")


MAX_MEMORY_CHARS = 4000


MAX_SUMMARY_CHARS = 1000


#: What memory text may not contain: the C0 control characters other than tab and line feed.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f]")


#: Control characters a message may not carry (tab, line feed and carriage return are text).
MESSAGE_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


#: Longest ``status_reason`` kept in a memory's metadata.
MAX_STATUS_REASON = 500


def describe_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validate_scope_id(value: object, field: str) -> str:
    """Return ``value`` if it is a valid scope id, else raise :class:`ValidationError` naming ``field``."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required and must be a non-empty string")
    if len(value) > 128:
        raise ValidationError(field, f"is {len(value)} characters long; the maximum is 128")
    if not SCOPE_ID_PATTERN.fullmatch(value):
        raise ValidationError(
            field,
            f"{describe_value(value)} has characters outside the allowed set: it must start with a letter or "
            "digit and contain only letters, digits and _ - . @ :",
        )
    return value


def validate_memory_id(value: object, field: str = "id") -> str:
    """Return ``value`` if it is a valid memory id, else raise :class:`ValidationError`."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required and must be a non-empty string")
    if not MEMORY_ID_PATTERN.fullmatch(value):
        raise ValidationError(
            field, f"{describe_value(value)} must be 1-128 characters of letters, digits, _ and -"
        )
    return value


def validate_entity_id(value: object, field: str = "entity_id") -> str:
    """Return ``value`` if it is a valid entity id (``ent_`` and 24 hex digits), else raise
    :class:`ValidationError` naming ``field``."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required and must be a non-empty string")
    if not ENTITY_ID_PATTERN.fullmatch(value):
        raise ValidationError(field, f"{describe_value(value)} is not an entity id (ent_ and 24 hex digits)")
    return value


def validate_memory_ids(values: Iterable[object], field: str) -> list[str]:
    """Return the valid memory ids of the sequence ``values``, each once, in order, else raise
    :class:`ValidationError` naming ``field`` (also for one string, which is not a sequence of ids)."""
    if isinstance(values, str):
        raise ValidationError(field, "must be a sequence of memory ids, not one string")
    return list(dict.fromkeys(validate_memory_id(value, field) for value in values))


def validate_positive_int(value: object, field: str) -> int:
    """Return ``value`` if it is a whole number of at least 1 (not a bool), else raise
    :class:`ValidationError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(field, "must be a positive integer")
    return value


def validate_caller_metadata(value: object, field: str = "metadata") -> dict[str, Any]:
    """Return ``value`` as a dict if it is caller metadata a memory may carry, else raise
    :class:`ValidationError` naming ``field``: a JSON object whose keys are 1-128 characters without
    control characters and none of :data:`RESERVED_METADATA_KEYS` (memory-core writes those itself)."""
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be a mapping of string keys to JSON values")
    check_metadata_depth(value, field)
    for key in value:
        if not isinstance(key, str) or not METADATA_KEY_PATTERN.fullmatch(key):
            raise ValidationError(
                field,
                f"key {describe_value(key)} must be a string of 1-{MAX_METADATA_KEY_CHARS} characters without "
                "control characters",
            )
        if key in RESERVED_METADATA_KEYS:
            raise ValidationError(
                field,
                f"key {key!r} is reserved: memory-core writes it itself (reserved keys: "
                f"{', '.join(sorted(RESERVED_METADATA_KEYS))})",
            )
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            field, f"must hold JSON values only (strings, numbers, booleans, null, lists, objects): {exc}"
        ) from None
    return dict(value)


def check_metadata_depth(value: object, field: str = "metadata") -> None:
    """Raise :class:`ValidationError` naming ``field`` when ``value`` nests objects and lists deeper
    than :data:`MAX_METADATA_DEPTH` levels (the value itself is the first). Iterative: any depth, even
    a mapping that holds itself, is measured without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > MAX_METADATA_DEPTH:
            raise ValidationError(
                field, f"is nested more than {MAX_METADATA_DEPTH} levels deep (objects and lists); the maximum is "
                f"{MAX_METADATA_DEPTH}",
            )
        stack.extend((child, depth + 1) for child in children)


#: The longest field path an error names (longer: cut at a dot, ``…`` after it).
MAX_ERROR_FIELD_CHARS = 80

#: The longest message an error carries (a longer one is cut, ``…`` after it).
MAX_ERROR_MESSAGE_CHARS = 300


def error_location(loc: Iterable[object]) -> str:
    """A pydantic error's location as a dotted field path, at most :data:`MAX_ERROR_FIELD_CHARS`
    characters: a deeper path keeps its first segments and ends in ``…``."""
    parts = [str(part) for part in loc]
    text = ".".join(parts)
    if len(text) <= MAX_ERROR_FIELD_CHARS:
        return text
    kept: list[str] = []
    for part in parts:
        if len(".".join([*kept, part])) > MAX_ERROR_FIELD_CHARS - 2:
            break
        kept.append(part)
    return ".".join([*kept, "…"]) if kept else text[: MAX_ERROR_FIELD_CHARS - 1] + "…"


def error_message(text: str) -> str:
    """``text`` cut to :data:`MAX_ERROR_MESSAGE_CHARS` (an error never echoes a long input)."""
    return text if len(text) <= MAX_ERROR_MESSAGE_CHARS else text[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


def validate_category(value: object, field: str = "category") -> str:
    """Return the normalized (lower-cased, stripped) category or raise :class:`ValidationError`."""
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    normalized = value.strip().lower()
    if not CATEGORY_PATTERN.fullmatch(normalized):
        raise ValidationError(
            field,
            f"{describe_value(value)} must be 1-64 letters (any script), digits, _ - or .",
        )
    return normalized


#: A ``user_id`` field: validated by :func:`validate_scope_id`, errors name ``user_id``.
UserId = Annotated[str, AfterValidator(lambda value: validate_scope_id(value, "user_id"))]


#: An ``agent_id`` field: validated by :func:`validate_scope_id`, errors name ``agent_id``.
AgentId = Annotated[str, AfterValidator(lambda value: validate_scope_id(value, "agent_id"))]


#: A ``category`` field: normalized by :func:`validate_category`.
CategoryName = Annotated[str, AfterValidator(lambda value: validate_category(value))]


#: A timestamp field: naive values are taken as UTC, aware ones converted to UTC (:func:`ensure_utc`).
UtcDateTime = Annotated[datetime, AfterValidator(lambda value: ensure_utc(value))]


def field_type(model: type[BaseModel], name: str) -> tuple[Any, bool]:
    """The value type of a model field (without ``| None`` and ``Annotated`` metadata), and whether
    it may be ``None``. The adapters derive their storage types from it."""
    annotation: Any = model.model_fields[name].annotation
    nullable = typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(
        annotation
    )
    if nullable:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            annotation = args[0]
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation, nullable


def new_memory_id() -> str:
    """A fresh random memory id (32 hex digits)."""
    return uuid.uuid4().hex


def ensure_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken to be UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is outside the range of dates that can be stored") from None


def parse_model(model: type[M], data: Any) -> M:
    """Validate ``data`` into ``model``, turning pydantic's error into the project's error.

    The raised :class:`ValidationError` names the first offending field (dotted path) and says what
    is wrong with it.
    """
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        raise validation_error_of(exc) from None


def validation_error_of(exc: PydanticValidationError) -> ValidationError:
    """Pydantic's error as the project's: every problem with its dotted path (the first as ``field``)."""
    errors: list[dict[str, Any]] = [dict(e) for e in exc.errors(include_url=False)]
    problems: list[tuple[str, str]] = []
    for error in errors or [{"loc": ("?",), "msg": str(exc)}]:
        for problem in _problems_of(error, exc.title):
            if problem not in problems:
                problems.append(problem)
    return ValidationError.of(problems)


def _problems_of(error: dict[str, Any], title: str) -> tuple[tuple[str, str], ...]:
    """The ``(field, message)`` problems of one pydantic error (a rule raising ours keeps its own)."""
    field = error_location(error.get("loc", ()))
    message = error_message(str(error.get("msg", "is invalid")))
    ctx = error.get("ctx")
    original = ctx.get("error") if isinstance(ctx, dict) else None
    if isinstance(original, ValidationError):
        # A rule of the whole model (no location) names its field itself, as does a rule of a field
        # that names a part of it (``filters.AND.0.colour``).
        if field in {"", "?"}:
            return original.problems
        inner = original.field.startswith(f"{field}.")
        return ((original.field if inner else field, original.message),)
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return ((field or title, message),)


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


#: Metadata keys memory-core writes into a memory itself; a turn's caller metadata may not use them.
RESERVED_METADATA_KEYS = frozenset(
    {
        "turn_id",
        "evidence",
        "updated_by_turn",
        "deleted_by_turn",
        "partly_forgotten_by_turn",
        "redacted_by_turn",
        "updated_on_request",
        "status_reason",
        "status_changed_at",
    }
)


#: Longest metadata key a turn may carry.
MAX_METADATA_KEY_CHARS = 128

#: Levels of objects and lists caller metadata may nest (the metadata object is the first).
MAX_METADATA_DEPTH = 32


#: A caller's metadata key: 1-128 characters, no control characters.
METADATA_KEY_PATTERN = re.compile(r"[^\x00-\x1f\x7f]{1,128}")


def check_length(text: str, maximum: int, what: str | None = None) -> str:
    """``text``, when it has at most ``maximum`` characters.

    Raises:
        ValueError: It is longer; the message says how long, after ``what`` (the text's name) if given.
    """
    if len(text) > maximum:
        problem = f"is {len(text)} characters; the maximum is {maximum}"
        raise ValueError(problem if what is None else f"{what} {problem}")
    return text


def unit_interval(value: float, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{field} must be a finite number between 0 and 1")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{field} must be between 0 and 1, got {value}")
    return float(value)
