"""One user turn inside Agent Framework's agent loop (``AgentLoopMiddleware``), and where memories came from.

The loop runs the agent several times for one user turn. It marks those runs with a token in the
run's options (:data:`LOOP_MARKER`, one token per loop) and, for providers that set
``after_run_once_per_turn``, defers ``after_run`` to the loop's end. There is no such switch for
``before_run``: :class:`LoopMemories` keeps the memories found in a loop's first run for its later
runs, so one user turn is one search.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from agent_framework import Message, SessionContext

from memory_core.domain.records import Scope
from memory_core.domain.search import SearchHit
from memory_core.integrations.recall_format import message_role

__all__ = [
    "LOOP_MARKER",
    "MAX_LOOPS_KEPT",
    "LoopMemories",
    "extend_with_origins",
    "final_answer",
    "loop_token",
    "origin_session_ids",
]

#: The key ``AgentLoopMiddleware`` sets in a run's options while it drives that run.
LOOP_MARKER = "_agent_loop_iteration"
#: Loops whose memories are kept at once (the oldest is forgotten first).
MAX_LOOPS_KEPT = 64


def loop_token(context: SessionContext) -> object | None:
    """The token of the agent loop running this run, or ``None`` outside a loop."""
    options = getattr(context, "options", None)
    return options.get(LOOP_MARKER) if isinstance(options, Mapping) else None


class LoopMemories:
    """The memories of each running loop's user turn, by loop token (at most :data:`MAX_LOOPS_KEPT`)."""

    def __init__(self, limit: int = MAX_LOOPS_KEPT) -> None:
        self._limit = limit
        self._kept: OrderedDict[object, tuple[Scope, list[SearchHit]]] = OrderedDict()

    def get(self, token: object, scope: Scope) -> list[SearchHit] | None:
        """The memories found for this loop's turn in ``scope``, or ``None`` when not searched yet."""
        kept = self._kept.get(token)
        if kept is None or kept[0] != scope:
            return None
        self._kept.move_to_end(token)
        return kept[1]

    def put(self, token: object, scope: Scope, hits: list[SearchHit]) -> None:
        """Keep the memories found in a loop's first run (the token itself is held, never its id)."""
        self._kept[token] = (scope, hits)
        self._kept.move_to_end(token)
        while len(self._kept) > self._limit:
            self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)


def final_answer(response: Sequence[Message]) -> list[Message]:
    """The messages after the last user message of a response.

    A loop's turn-level response holds every iteration's answers and, between them, the prompts the
    loop itself sent as ``user`` messages ("Progress so far: ...", "Continue working ..."); a plain
    run's response has no user message, and is kept whole.
    """
    last_user = max((i for i, m in enumerate(response) if message_role(m) == "user"), default=-1)
    return list(response[last_user + 1 :])


def origin_session_ids(hits: Sequence[SearchHit], session_id: str | None) -> list[str]:
    """The sessions other than ``session_id`` that the memories in ``hits`` came from, first seen first."""
    found: dict[str, None] = {}
    for hit in hits:
        for source in hit.record.provenance:
            if source.session_id and source.session_id != session_id:
                found[source.session_id] = None
    return list(found)


def _takes_origins(context: SessionContext) -> bool:
    """Whether this ``extend_messages`` takes ``origin_session_ids`` (Agent Framework 1.15 and later)."""
    try:
        return "origin_session_ids" in inspect.signature(context.extend_messages).parameters
    except (TypeError, ValueError):
        return False


def extend_with_origins(
    context: SessionContext, source: Any, messages: Sequence[Message], origins: Sequence[str]
) -> None:
    """Add ``messages`` to the run, naming the other sessions they came from where the framework can."""
    if origins and _takes_origins(context):
        context.extend_messages(source, messages, origin_session_ids=list(origins))
    else:
        context.extend_messages(source, messages)
