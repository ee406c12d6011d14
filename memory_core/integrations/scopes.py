"""Which scope an agent run reads and writes: the session's binding first, then the configuration."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from memory_core.domain.records import Scope
from memory_core.domain.validation import validate_scope_id
from memory_core.errors import ValidationError

__all__ = ["bind_scopes", "missing_scopes", "resolve_scopes", "scope_from"]


def scope_from(value: Any, field: str) -> Scope | None:
    """``value`` (a :class:`Scope`, a mapping with ``user_id`` and ``agent_id``, or ``None``) as a scope.

    Raises:
        ValidationError: ``value`` is neither, or names a malformed id (reported as ``field``).
    """
    if value is None:
        return None
    if isinstance(value, Scope):
        return value
    if isinstance(value, Mapping):
        try:
            return Scope.of(value.get("user_id"), value.get("agent_id"))
        except ValidationError as exc:
            raise ValidationError(field, str(exc)) from None
    raise ValidationError(field, "must be a Scope or a mapping with user_id and agent_id")


def bind_scopes(
    state: MutableMapping[str, Any],
    *,
    user_id: str | None,
    agent_id: str | None,
    read_scope: Scope | Mapping[str, str] | None,
    write_scope: Scope | Mapping[str, str] | None,
) -> None:
    """Write the given ids and scopes (validated) into a session's provider ``state``.

    Raises:
        ValidationError: An id or scope is malformed.
    """
    if user_id is not None:
        state["user_id"] = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        state["agent_id"] = validate_scope_id(agent_id, "agent_id")
    for key, value in (("read_scope", read_scope), ("write_scope", write_scope)):
        scope = scope_from(value, key)
        if scope is not None:
            state[key] = {"user_id": scope.user_id, "agent_id": scope.agent_id}


def resolve_scopes(
    state: Mapping[str, Any],
    *,
    user_id: str | None,
    agent_id: str | None,
    read_scope: Scope | None,
    write_scope: Scope | None,
) -> tuple[Scope | None, Scope | None]:
    """The (read, write) scopes for a session ``state``: its values first, then the configured ones.

    Raises:
        ValidationError: A scope value in the session state is malformed.
    """
    user = state.get("user_id") or user_id
    agent = state.get("agent_id") or agent_id
    default = Scope.of(user, agent) if user and agent else None
    read = scope_from(state.get("read_scope"), "read_scope") or read_scope or default
    write = scope_from(state.get("write_scope"), "write_scope") or write_scope or default
    return read, write


def missing_scopes(read: Scope | None, write: Scope | None) -> str:
    """What a run cannot do for want of a scope: ``reading and writing``, ``reading`` or ``writing``."""
    if read is None and write is None:
        return "reading and writing"
    return "reading" if read is None else "writing"
