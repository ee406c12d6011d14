"""Turns and queue messages as they arrive: a posted turn validated and queued, queue bodies decoded
and processed, turns read from JSON lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import pydantic

from memory_core.domain.chat import read_turn
from memory_core.domain.messages import RECALL_SCHEMA, TURN_SCHEMA, RecallUpdate, Turn
from memory_core.domain.validation import parse_model, utcnow
from memory_core.errors import PermanentError, ValidationError
from memory_core.ports import Clock, HistoryStore, TurnPublisher
from memory_core.service.journal import purged_before
from memory_core.service.results import IngestResult

__all__ = [
    "MAX_CLOCK_SKEW_SECONDS",
    "MAX_MESSAGE_BYTES",
    "ProcessOutcome",
    "TurnStatus",
    "decode_message",
    "parse_turns",
    "process_message",
    "publish_turn",
    "valid_turn",
    "valid_turns",
]

logger = logging.getLogger(__name__)

#: Largest queue message body accepted (the Service Bus standard-tier limit).
MAX_MESSAGE_BYTES = 256 * 1024
#: How far in the future (by the service's clock) a turn may be dated: a little clock skew.
MAX_CLOCK_SKEW_SECONDS = 300.0

#: What happened to a posted turn: sent to the ordered queue, ingested at once (no queue), a repeat,
#: or dropped because it is dated at or before its scope's last purge.
TurnStatus = Literal["queued", "ingested", "duplicate", "purged"]


def valid_turn(turn: Turn | Mapping[str, Any], now: datetime) -> Turn:
    """The turn, validated. One from the future (beyond a small clock skew) is refused: its time
    would become the memories' ``updated_at`` and stop their decay for good.

    Raises:
        ValidationError: The turn is malformed, or dated in the future.
    """
    turn = parse_model(Turn, dict(turn) if isinstance(turn, Mapping) else turn)
    ahead = (turn.occurred_at - now).total_seconds()
    if ahead > MAX_CLOCK_SKEW_SECONDS:
        raise ValidationError(
            "occurred_at",
            f"{turn.occurred_at.isoformat()} is {ahead:.0f} s in the future; at most "
            f"{MAX_CLOCK_SKEW_SECONDS:.0f} s of clock skew is accepted",
        )
    return turn


def valid_turns(bodies: Sequence[bytes | str | Mapping[str, Any]], clock: Clock) -> list[Turn | None]:
    """The turns of queue message bodies, validated; ``None`` for a body that does not decode, a
    recall update or a turn dated in the future (processing it says why)."""
    turns: list[Turn | None] = []
    for body in bodies:
        try:
            message = decode_message(body)
            turns.append(valid_turn(message, clock.now()) if isinstance(message, Turn) else None)
        except Exception:  # processing the message says what is wrong with it
            turns.append(None)
    return turns


async def publish_turn(
    turn: Turn,
    *,
    publisher: TurnPublisher | None,
    history: HistoryStore | None,
    ingest: Callable[[Turn], Awaitable[IngestResult]],
) -> TurnStatus:
    """Send a validated turn to the ordered queue, or ``ingest`` it now when there is no queue.

    Returns:
        ``queued``; ``ingested`` (no queue); ``duplicate``: the scope already ingested this turn id,
        or the queue dropped it as a repeat within its duplicate detection window (the embedded
        queue says so; Service Bus drops a repeat silently, so there a turn still waiting on the
        queue is answered ``queued`` and the repeat is dropped all the same); or ``purged``: the
        turn is dated at or before the last purge of its scope (or user) and is dropped, not
        queued. Turn ids are unique per scope: another user's turn with the same id is a
        different turn.
    """
    if publisher is None:
        result = await ingest(turn)  # recognises a turn it already ingested, or purged
        if result.status == "duplicate":
            return "duplicate"
        return "purged" if result.status == "purged" else "ingested"
    if history is not None:
        tombstone = await history.tombstone(turn.scope)
        if purged_before(turn.occurred_at, tombstone):  # never queued: purged text stays off the disk
            logger.info("turn %s is dated at or before its scope's purge: dropped", turn.turn_id)
            return "purged"
        if await history.turn_processed(turn.scope, turn.turn_id):
            return "duplicate"
    sent = await publisher.publish_turn(turn)
    return "duplicate" if sent is False else "queued"


async def process_message(
    body: bytes | str | Mapping[str, Any],
    *,
    ingest: Callable[[Turn], Awaitable[IngestResult]],
    apply_recall: Callable[[RecallUpdate], Awaitable[int | None]],
) -> ProcessOutcome:
    """Handle one queue message: a turn is ingested, a recall update applied.

    Args:
        body: The message body.
        ingest: Ingests a turn.
        apply_recall: Applies a recall update; ``None`` for one its scope's purge drops.

    Raises:
        PermanentError: The message can never be processed (dead-letter it at once): it does not
            decode, or what it says cannot make a valid memory (a model refused it).
        TransientError: A dependency is unavailable (let the queue redeliver it).
    """
    try:
        message = decode_message(body)
        if isinstance(message, Turn):
            return await _process_turn(message, ingest)
        return await _process_recall(message, apply_recall)
    except pydantic.ValidationError as exc:  # the same message fails the same way on every delivery
        raise PermanentError(f"the message cannot make a valid record: {exc.errors()[0]['msg']}") from exc


async def _process_turn(turn: Turn, ingest: Callable[[Turn], Awaitable[IngestResult]]) -> ProcessOutcome:
    result = await ingest(turn)
    logger.info(
        "turn %s: %s via %s, %s decision(s)", turn.turn_id, result.status, result.extraction_path, len(result.steps)
    )
    return ProcessOutcome("turn", turn.turn_id, result.status, ingest=result)


async def _process_recall(
    update: RecallUpdate, apply_recall: Callable[[RecallUpdate], Awaitable[int | None]]
) -> ProcessOutcome:
    touched = await apply_recall(update)
    if touched is None:
        return ProcessOutcome("recall", update.recall_id, "purged")
    return ProcessOutcome("recall", update.recall_id, "applied" if touched else "duplicate", recalled=touched)


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What processing one queue message did."""

    kind: str
    message_id: str
    status: str
    ingest: IngestResult | None = None
    recalled: int = 0

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "message_id": self.message_id,
            "status": self.status,
            "recalled": self.recalled,
        }
        if self.ingest is not None:
            data["ingest"] = self.ingest.as_dict()
        return data


def decode_message(body: bytes | str | Mapping[str, Any]) -> Turn | RecallUpdate:
    """Parse and validate a queue message body; raises :class:`ValidationError` saying what is wrong."""
    if isinstance(body, Mapping):
        data: Any = dict(body)
    else:
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        if len(raw) > MAX_MESSAGE_BYTES:
            raise ValidationError("body", f"is {len(raw)} bytes; the maximum is {MAX_MESSAGE_BYTES}")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValidationError("body", f"is not UTF-8 JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValidationError("body", "must be a JSON object")
    schema = data.get("schema")
    if schema == TURN_SCHEMA:
        return parse_model(Turn, data)
    if schema == RECALL_SCHEMA:
        return parse_model(RecallUpdate, data)
    raise ValidationError(
        "schema", f"{schema!r} is not a message this pipeline understands ({TURN_SCHEMA}, {RECALL_SCHEMA})"
    )


def parse_turns(lines: Iterable[str], now: datetime | None = None) -> list[Turn]:
    """Parse turns, one JSON object a line (blank lines ignored), all validated first.

    A line is a ``turn.v1`` message, or a turn as :func:`~memory_core.domain.chat.read_turn` reads it
    (chat-API messages; ``turn_id`` and ``occurred_at`` optional).

    Args:
        lines: The lines.
        now: When the turns were received: the date of a turn without ``occurred_at`` (default: now).

    Raises:
        ValidationError: A line is not JSON or not a valid turn (names the line and every problem).
    """
    received = now if now is not None else utcnow()
    turns: list[Turn] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}", f"is not JSON: {exc.msg}") from None
        try:
            turns.append(read_turn(data, received))
        except ValidationError as exc:
            raise ValidationError.of([(f"line {number}: {field}", what) for field, what in exc.problems]) from None
    return turns
