"""The turn an agent run publishes: its user and assistant messages, cleaned and cut to the size limit."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

from agent_framework import Message, SessionContext

from memory_core.domain.messages import (
    MAX_MESSAGE_CHARS,
    MAX_TURN_BYTES,
    MAX_TURN_MESSAGES,
    Turn,
    TurnMessage,
    turn_json_bytes,
)
from memory_core.domain.records import Scope
from memory_core.domain.validation import MESSAGE_CONTROL_CHARACTERS, SCOPE_ID_PATTERN
from memory_core.integrations.loop import final_answer
from memory_core.integrations.recall_format import message_role

__all__ = ["TURN_MESSAGES_BUDGET", "fit_turn", "turn_for_run"]

logger = logging.getLogger(__name__)

#: What a turn's messages may take, leaving room in :data:`MAX_TURN_BYTES` for the envelope (ids, time).
TURN_MESSAGES_BUDGET = MAX_TURN_BYTES - 4096


def turn_for_run(scope: Scope, context: SessionContext) -> Turn | None:
    """The turn to publish for a run (its input, then its response), or ``None`` when no user said
    anything or the turn could not be built (logged).

    Only user and assistant messages with text are kept (control characters dropped, each text cut
    to :data:`MAX_MESSAGE_CHARS`), the newest :data:`MAX_TURN_MESSAGES`, fitted by :func:`fit_turn`.
    Of the response, only what follows its last user message: after an agent loop, the final answer
    (the loop's own prompts and the earlier iterations' answers are not the user's turn). A session
    id that is not a valid id is left out.
    """
    try:
        response = final_answer(context.response.messages) if context.response is not None else []
        return _turn(scope, [*context.input_messages, *response], context.session_id)
    except Exception as exc:
        logger.warning("could not build the memory turn (%s); it is not stored", exc)
        return None


def _turn(scope: Scope, messages: Iterable[Message], session_id: str | None) -> Turn | None:
    kept = _turn_messages(messages)
    if not any(m.role == "user" for m in kept):
        return None
    kept = fit_turn(kept[-MAX_TURN_MESSAGES:])
    return Turn.model_validate(
        {
            "turn_id": f"turn-{uuid.uuid4().hex}",
            "user_id": scope.user_id,
            "agent_id": scope.agent_id,
            "session_id": session_id if session_id and SCOPE_ID_PATTERN.fullmatch(session_id) else None,
            "occurred_at": datetime.now(UTC),
            "messages": [{"role": m.role, "text": m.text} for m in kept],
        }
    )


def _turn_messages(messages: Iterable[Message]) -> list[TurnMessage]:
    kept: list[TurnMessage] = []
    for message in messages:
        role = message_role(message)
        if role not in ("user", "assistant"):
            continue
        # Control characters (a terminal's escape codes, stray NULs) carry no meaning and would make
        # the turn invalid: they are dropped here, before publishing.
        text = MESSAGE_CONTROL_CHARACTERS.sub("", message.text or "").strip()
        if text:
            kept.append(TurnMessage.model_construct(role=role, text=text[:MAX_MESSAGE_CHARS]))
    return kept


def fit_turn(messages: list[TurnMessage], budget: int = TURN_MESSAGES_BUDGET) -> list[TurnMessage]:
    """The messages of a turn cut to fit ``budget`` bytes of JSON, by a fixed rule.

    Older messages are left out first (newest kept), but never the last user message; if that is still
    too much, the longest remaining texts are shortened from their end (marked with "…"). Whatever is
    left out is logged: a turn is never refused for its size.
    """

    def item(message: TurnMessage) -> int:
        return turn_json_bytes({"role": str(message.role), "text": message.text})

    kept = list(messages)
    sizes = [item(m) for m in kept]  # each message once; the list's JSON adds "[", "]" and commas

    def total() -> int:
        return 2 + sum(sizes) + max(len(sizes) - 1, 0)

    if total() <= budget:
        return messages
    last_user = max(i for i, m in enumerate(kept) if m.role == "user")
    dropped = 0
    while total() > budget and len(kept) > 1:
        oldest = 0 if last_user != 0 else 1
        del kept[oldest], sizes[oldest]
        dropped += 1
        last_user -= 1 if oldest < last_user else 0
    shortened = 0
    while (excess := total() - budget) > 0:
        longest = max(range(len(kept)), key=lambda i: len(kept[i].text.encode("utf-8")))
        raw = kept[longest].text.encode("utf-8")
        cut = raw[: max(0, len(raw) - excess - 16)].decode("utf-8", errors="ignore")
        kept[longest] = TurnMessage.model_construct(
            role=kept[longest].role, text=cut + "…", name=kept[longest].name
        )
        sizes[longest] = item(kept[longest])
        shortened += 1
    logger.warning(
        "a turn was over %s bytes: %s older message(s) left out, %s text(s) shortened (newest kept)",
        budget,
        dropped,
        shortened,
    )
    return kept
