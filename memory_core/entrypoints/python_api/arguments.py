"""The Python API's arguments under Mem0's names, read into the project's own.

:class:`~memory_core.entrypoints.python_api.async_memory.AsyncMemory` takes the names people coming
from Mem0 write (``limit`` for ``top``, ``threshold`` for ``min_score``, ``run_id`` for the session,
``filters``) beside its own; these functions turn them into one set of search options, and say
plainly why a call that names no user cannot reach a memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.domain.records import Scope
from memory_core.domain.validation import validate_scope_id
from memory_core.errors import ValidationError

__all__ = ["alias", "require_scope", "session_filters"]


def require_scope(user_id: str | None, agent_id: str, call: str) -> Scope:
    """The scope a call on one memory reaches, or why it needs a ``user_id``.

    Raises:
        ValidationError: No ``user_id`` (the message says why and what to pass), or a bad id.
    """
    if user_id is None:
        raise ValidationError(
            "user_id",
            f"is required for {call}(): every memory belongs to one user and one agent, and a call only "
            f"reaches the memories of the user it names (a memory id alone never reads or changes "
            f"another user's memory); pass {call}(..., user_id=\"...\") and agent_id=\"...\" unless the "
            "memory is the default agent's",
        )
    return Scope.of(user_id, agent_id)


def alias(ours: str, value: Any, theirs: str, given: Any, default: Any = None) -> Any:
    """One option given under our name or Mem0's (``top`` / ``limit``...), not both.

    Raises:
        ValidationError: Both names given different values (names Mem0's).
    """
    if given is None:
        return value
    if value is not None and value != default and value != given:
        raise ValidationError(theirs, f"is Mem0's name for {ours}; give {ours} or {theirs}, not both")
    return given


def session_filters(filters: Mapping[str, Any] | None, run_id: str | None) -> dict[str, Any] | None:
    """``filters`` with the session ``run_id`` added (the memories said in that conversation)."""
    if run_id is None:
        return None if filters is None else dict(filters)
    session = {"run_id": validate_scope_id(run_id, "run_id")}
    if not filters:
        return session
    if not isinstance(filters, Mapping):
        raise ValidationError("filters", f"must be a mapping such as {{'category': 'food'}}, not {type(filters).__name__}")
    return {"AND": [dict(filters), session]}
