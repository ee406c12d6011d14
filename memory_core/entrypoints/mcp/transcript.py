"""A long conversation as several turns: where it is cut, and the turns' ids (no SDK here)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.domain.chat import content_turn_id
from memory_core.domain.messages import MessageRole, TurnMessage
from memory_core.domain.records import Scope
from memory_core.errors import ValidationError

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_MESSAGES",
    "MAX_TRANSCRIPT_BYTES",
    "MAX_TRANSCRIPT_MESSAGES",
    "chunk_id",
    "chunks",
    "exchanges",
]

#: Most messages one ``remember`` call takes (a whole transcript, recorded as several turns).
MAX_TRANSCRIPT_MESSAGES = 1000
#: Most text one ``remember`` call takes, in UTF-8 bytes of the messages' text.
MAX_TRANSCRIPT_BYTES = 1024 * 1024
#: Most messages of one turn cut from a transcript.
CHUNK_MESSAGES = 20
#: Most text of one turn cut from a transcript (UTF-8 bytes; a turn may take 192 KiB in all).
CHUNK_BYTES = 64 * 1024


def _size(message: TurnMessage) -> int:
    return len(message.text.encode("utf-8"))


def exchanges(messages: Sequence[TurnMessage]) -> list[list[TurnMessage]]:
    """The conversation cut before every message that follows a user's message and is not the user's:
    each piece is what the others said, then what the user said to it (a question and its answer
    stay together)."""
    pieces: list[list[TurnMessage]] = []
    for message in messages:
        follows_user = bool(pieces) and pieces[-1][-1].role is MessageRole.USER
        if not pieces or (follows_user and message.role is not MessageRole.USER):
            pieces.append([])
        pieces[-1].append(message)
    return pieces


def chunks(messages: Sequence[TurnMessage]) -> list[list[TurnMessage]]:
    """The conversation as turns of at most :data:`CHUNK_MESSAGES` messages and :data:`CHUNK_BYTES`
    of text, cut only between exchanges (:func:`exchanges`) unless one exchange alone is larger.

    The same messages are always cut at the same places, and a conversation sent again with more
    messages at its end keeps its earlier full turns as they were.

    Raises:
        ValidationError: More than :data:`MAX_TRANSCRIPT_MESSAGES` messages or
            :data:`MAX_TRANSCRIPT_BYTES` of text.
    """
    if len(messages) > MAX_TRANSCRIPT_MESSAGES:
        raise ValidationError(
            "messages", f"has {len(messages)} messages; the most is {MAX_TRANSCRIPT_MESSAGES} in one call"
        )
    total = sum(_size(m) for m in messages)
    if total > MAX_TRANSCRIPT_BYTES:
        raise ValidationError(
            "messages",
            f"holds {total} bytes of text; the most is {MAX_TRANSCRIPT_BYTES} (1 MiB) in one call: "
            "send the conversation in parts",
        )
    turns: list[list[TurnMessage]] = []
    size = 0
    for piece in exchanges(messages):
        for part in _split(piece):
            part_size = sum(_size(m) for m in part)
            fits = turns and len(turns[-1]) + len(part) <= CHUNK_MESSAGES and size + part_size <= CHUNK_BYTES
            if fits:
                turns[-1].extend(part)
                size += part_size
            else:
                turns.append(list(part))
                size = part_size
    return turns


def _split(piece: list[TurnMessage]) -> list[list[TurnMessage]]:
    """One exchange, in parts that each fit one turn (itself, when it fits)."""
    parts: list[list[TurnMessage]] = [[]]
    size = 0
    for message in piece:
        if parts[-1] and (len(parts[-1]) >= CHUNK_MESSAGES or size + _size(message) > CHUNK_BYTES):
            parts.append([])
            size = 0
        parts[-1].append(message)
        size += _size(message)
    return parts


def chunk_id(scope: Scope, messages: Sequence[TurnMessage]) -> str:
    """The turn id of ``messages`` for ``scope``, by the rule every face uses for a turn sent without
    one (:func:`~memory_core.domain.chat.content_turn_id`), from the user, the agent and the words only:
    the same words give the same id in any MCP session, so a call sent again (a retry, a transcript
    replayed) is recognised as already recorded."""
    return content_turn_id(scope.user_id, scope.agent_id, messages)
