"""Chat-style messages (every chat API's spelling) as the messages of a turn, and a turn as any face
receives it (chat messages, ``turn_id`` and ``occurred_at`` optional) read into a :class:`Turn`.

When a turn comes without a ``turn_id``, its id is derived from what it says: ``turn-`` and the first
32 hex digits of the SHA-256 of its user, agent, session, ``occurred_at`` (when given) and messages
(role, name, text) as canonical JSON. Sending the same turn again gives the same id, so a replay is
still recognised as a repeat. When it comes without ``occurred_at`` it is dated when it is received.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memory_core.domain.messages import MessageRole, Turn, TurnMessage
from memory_core.domain.records import DEFAULT_AGENT_ID
from memory_core.domain.validation import parse_model
from memory_core.errors import ValidationError

__all__ = ["Messages", "content_turn_id", "derived_turn_id", "read_turn", "turn_messages"]

#: The keys of a message of ``memory-core.turn.v1`` (such messages are validated as they are).
_TURN_MESSAGE_KEYS = frozenset({"role", "text", "name"})

#: The turn id a turn is validated under while its own is derived (it is replaced at once).
_PENDING_ID = "pending"

#: Content part types that carry text (Chat Completions, Responses and Agent Framework spellings).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
#: Roles of other chat APIs, and the turn role they are kept as.
_ROLE_ALIASES = {"developer": MessageRole.SYSTEM}

#: What :func:`turn_messages` takes: a string, a message, or a list of messages.
Messages = str | Mapping[str, Any] | Iterable[Mapping[str, Any] | TurnMessage]


def turn_messages(messages: Messages) -> list[TurnMessage]:
    """Chat-style messages as the messages of a turn.

    Accepted:

    - a string: one user message;
    - a message ``{"role": ..., "content": ...}`` or a list of them, as every chat API writes them
      (a conversation history can be passed as is): ``role`` is ``user``, ``assistant``, ``system``,
      ``tool`` (or ``developer``, kept as ``system``); ``content`` is a string or a list of content
      parts (``{"type": "text", "text": ...}``, also ``input_text`` / ``output_text``; a part that is a
      plain string is text too; parts without text, such as images, are left out); the project's own
      ``text`` key may stand for ``content``, and ``name`` says who spoke (two people in one
      conversation). Other keys (``tool_calls``, ``tool_call_id``, ``refusal``, ``audio``,
      ``function_call``, ``annotations``...) are ignored;
    - :class:`~memory_core.domain.records.TurnMessage` objects.

    Messages without text (an assistant's tool call with ``content`` ``None``, a tool result with an
    empty content, an image alone) and items of the Responses API that are not messages (a
    ``{"type": "function_call", ...}`` without a role) are left out; at least one message must have
    text.

    Raises:
        ValidationError: No message, or no message with text; a message that is not a mapping, has
            no or an unknown role, a content that is neither a string nor a list of parts, or both
            ``content`` and ``text`` (the field is named: ``messages.1.role``).
    """
    if isinstance(messages, str):
        items: list[Any] = [{"role": "user", "content": messages}]
    elif isinstance(messages, Mapping):
        items = [messages]
    elif isinstance(messages, Iterable):
        items = list(messages)
    else:
        raise ValidationError("messages", "must be a string, a message or a list of messages")
    if not items:
        raise ValidationError("messages", "is empty: give at least one message")
    kept: list[TurnMessage] = []
    textless: list[ValidationError] = []
    for i, item in enumerate(items):
        message = _message(i, item)
        if isinstance(message, TurnMessage):
            kept.append(message)
        else:
            textless.append(message)
    if not kept:
        if len(items) == 1:
            raise textless[0]
        raise ValidationError(
            "messages", "has no message with text (tool calls and other messages without text are left out)"
        )
    return kept


def _message(index: int, item: Any) -> TurnMessage | ValidationError:
    """One message, or (not raised) why it has no text and is left out."""
    where = f"messages.{index}"
    if isinstance(item, TurnMessage):
        return item
    if not isinstance(item, Mapping):
        raise ValidationError(
            where,
            f"must be a message such as {{'role': 'user', 'content': '...'}}, not {type(item).__name__}",
        )
    role = item.get("role")
    kind = item.get("type")
    if role is None and isinstance(kind, str) and kind != "message":
        return ValidationError(where, f"is a {kind!r} item, not a message with text")
    if role is None:
        raise ValidationError(f"{where}.role", "is required: user, assistant, system or tool")
    if isinstance(role, str) and role.strip().lower() in _ROLE_ALIASES:
        role = _ROLE_ALIASES[role.strip().lower()]
    try:
        role = MessageRole(role)
    except (ValueError, TypeError):
        raise ValidationError(
            f"{where}.role", f"{role!r} is not a role; use {', '.join(r.value for r in MessageRole)}"
        ) from None
    if item.get("content") is not None and item.get("text") is not None:
        raise ValidationError(f"{where}.content", "give content or text, not both")
    key = "text" if item.get("text") is not None else "content"
    content = item.get(key)
    if content is None:
        return ValidationError(f"{where}.{key}", "is required: the message's text")
    text = _text_of(content, f"{where}.{key}")
    if not text.strip():
        return ValidationError(f"{where}.{key}", "is empty: a message needs some text")
    data: dict[str, Any] = {"role": role, "text": text}
    if item.get("name") is not None:
        data["name"] = item["name"]
    try:
        return parse_model(TurnMessage, data)
    except ValidationError as exc:
        field = key if exc.field == "text" else exc.field
        raise ValidationError(f"{where}.{field}", exc.message) from None


def _text_of(content: Any, where: str) -> str:
    """The text of a message's content: a string, or the text parts of a list joined by line breaks."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, Sequence):
        raise ValidationError(
            where, f"must be a string or a list of content parts, not {type(content).__name__}"
        )
    texts: list[str] = []
    for number, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            if part.get("type", "text") in _TEXT_PARTS:
                text = part.get("text")
                if not isinstance(text, str):
                    raise ValidationError(f"{where}.{number}.text", "must be a string")
                texts.append(text)
        else:
            raise ValidationError(
                f"{where}.{number}",
                f"must be a content part (a mapping) or a string, not {type(part).__name__}",
            )
    return "\n".join(texts)


def derived_turn_id(turn: Turn, *, dated: bool = True) -> str:
    """The id of a turn sent without one: the same turn gives the same id (see the module's note).

    Args:
        turn: The turn (its own ``turn_id`` is not part of the id).
        dated: Whether its ``occurred_at`` was given (a turn dated on receipt is identified without it).
    """
    when = turn.occurred_at if dated else None
    return content_turn_id(turn.user_id, turn.agent_id, turn.messages, session_id=turn.session_id, occurred_at=when)


def content_turn_id(
    user_id: str,
    agent_id: str | None,
    messages: Sequence[TurnMessage],
    *,
    session_id: str | None = None,
    occurred_at: datetime | None = None,
) -> str:
    """``turn-`` and the first 32 hex digits of the SHA-256 of a turn's user, agent, session, time and
    messages (role, name, text) as canonical JSON: the one rule every face derives a turn id by."""
    content = {
        "user_id": user_id,
        "agent_id": agent_id,
        "session_id": session_id,
        "occurred_at": None if occurred_at is None else occurred_at.isoformat(),
        "messages": [message.model_dump(mode="json") for message in messages],
    }
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "turn-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def read_turn(data: Any, now: datetime) -> Turn:
    """A turn as a face receives it, validated: ``memory-core.turn.v1``, with more accepted.

    ``messages`` may be written as any chat API writes them (see :func:`turn_messages`); ``agent_id``
    may be left out (the default agent), and so may ``turn_id`` and ``occurred_at`` (see the module's note for the derived id; the turn is dated
    ``now``).

    Args:
        data: The turn's JSON object.
        now: When it was received.

    Raises:
        ValidationError: Every problem of the turn, each with its dotted path.
    """
    if isinstance(data, Turn):
        return data
    if not isinstance(data, Mapping):
        raise ValidationError("turn", f"must be a JSON object, not {type(data).__name__}")
    fields = dict(data)
    problems: list[tuple[str, str]] = []
    if _chat_style(fields.get("messages")):
        try:
            fields["messages"] = [m.model_dump() for m in turn_messages(fields["messages"])]
        except ValidationError as exc:
            problems.extend(exc.problems)
            fields["messages"] = [{"role": "user", "text": "-"}]  # the other fields are still checked
    if fields.get("agent_id") is None:
        fields["agent_id"] = DEFAULT_AGENT_ID
    dated = fields.get("occurred_at") is not None
    named = fields.get("turn_id") is not None
    if not dated:
        fields["occurred_at"] = now
    if not named:
        fields["turn_id"] = _PENDING_ID
    turn: Turn | None = None
    try:
        turn = parse_model(Turn, fields)
    except ValidationError as exc:
        problems.extend(p for p in exc.problems if p not in problems)
    if problems or turn is None:
        raise ValidationError.of(problems)
    return turn if named else turn.model_copy(update={"turn_id": derived_turn_id(turn, dated=dated)})


def _chat_style(messages: Any) -> bool:
    """Whether a turn's ``messages`` need the chat reader (they are not all ``turn.v1`` messages)."""
    if isinstance(messages, str | Mapping):
        return True
    if not isinstance(messages, list):
        return False  # left to the turn's own validation, which names the problem
    return not all(isinstance(m, Mapping) and "text" in m and m.keys() <= _TURN_MESSAGE_KEYS for m in messages)
