"""Chat-style messages (every chat API's spelling) as the messages of a turn."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_core.domain.messages import MessageRole, TurnMessage
from memory_core.domain.validation import parse_model
from memory_core.errors import ValidationError

__all__ = ["Messages", "turn_messages"]

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
