"""The write path of memory-core: queue messages in, consolidated memories out.

One :class:`MemoryPipeline` serves every host: the Service Bus trigger of the Functions app, the
embedded runtime's queue worker, ``memory-core ingest`` and the demo. It understands two messages,
both carried on the scope's ordered session:

- ``memory-core.turn.v1``: extract, consolidate and apply a conversation turn (idempotent per
  ``turn_id``);
- ``memory-core.recall.v1``: reinforce memories that were returned to an agent (idempotent per
  ``recall_id``), so recall updates travel the same ordered path as ingestion instead of racing it.

A malformed message raises :class:`~memory_core.errors.PermanentError` (dead-letter it with the
message); an unavailable dependency raises :class:`~memory_core.errors.TransientError` (let the
queue redeliver it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .consolidation import MemoryConsolidator
from .errors import PermanentError, ValidationError
from .ingestion import CandidateExtractor, IngestResult, ingest_turn
from .models import RECALL_SCHEMA, TURN_SCHEMA, RecallUpdate, Scope, Turn, parse_model
from .ports import HistoryStore, TurnPublisher
from .service import MemoryService

__all__ = ["MemoryPipeline", "ProcessOutcome", "decode_message"]

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What processing one message did."""

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
    """Parse and validate a queue message body; raises :class:`PermanentError` saying what is wrong."""
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


class MemoryPipeline:
    """Ingestion, recall and the read-side service, wired once and shared by every host.

    Args:
        service: The memory use cases (search, inspection, forgetting, purge).
        history: Decision history and the record of processed messages.
        extractor: Finds memory candidates in a turn.
        consolidator: Decides ADD / UPDATE / DELETE / NONE for each candidate.
        publisher: Where :meth:`publish_turn` and queued recall updates go (``None``: ingest inline).
        owned: Extra resources to close with the pipeline (clients the composition root created).
    """

    def __init__(
        self,
        *,
        service: MemoryService,
        history: HistoryStore,
        extractor: CandidateExtractor,
        consolidator: MemoryConsolidator,
        publisher: TurnPublisher | None = None,
        owned: Sequence[Any] = (),
    ) -> None:
        self.service = service
        self.history = history
        self.extractor = extractor
        self.consolidator = consolidator
        self.publisher = publisher
        self._owned = list(owned)

    @property
    def store(self) -> Any:
        return self.service.store

    async def ingest(self, turn: Turn | Mapping[str, Any]) -> IngestResult:
        """Extract, consolidate and apply one turn now (idempotent per ``turn_id``)."""
        return await ingest_turn(
            dict(turn) if isinstance(turn, Mapping) else turn,
            store=self.service.store,
            history=self.history,
            extractor=self.extractor,
            consolidator=self.consolidator,
            embedder=self.service.embedder,
            policy=self.service.policy,
            clock=self.service.clock,
        )

    async def apply_recall(self, update: RecallUpdate) -> int:
        """Reinforce the memories of one recall update once; returns how many were touched."""
        scope = update.scope
        if await self.history.turn_processed(scope, update.recall_id):
            return 0
        touched = await self.service.store.recall(scope, update.memory_ids, self.service.policy)
        await self.history.mark_turn_processed(scope, update.recall_id, self.service.clock.now())
        return len(touched)

    async def process_message(self, body: bytes | str | Mapping[str, Any]) -> ProcessOutcome:
        """Handle one queue message (a turn or a recall update)."""
        message = decode_message(body)
        if isinstance(message, Turn):
            result = await self.ingest(message)
            logger.info(
                "turn %s: %s via %s, %s decision(s)",
                message.turn_id,
                result.status,
                result.extraction_path,
                len(result.steps),
            )
            return ProcessOutcome("turn", message.turn_id, result.status, ingest=result)
        touched = await self.apply_recall(message)
        return ProcessOutcome("recall", message.recall_id, "applied" if touched else "duplicate", recalled=touched)

    async def publish_turn(self, turn: Turn | Mapping[str, Any]) -> None:
        """Queue a turn for ingestion (or ingest it now when no publisher is configured)."""
        parsed = parse_model(Turn, dict(turn) if isinstance(turn, Mapping) else turn)
        if self.publisher is None:
            await self.ingest(parsed)
        else:
            await self.publisher.publish_turn(parsed)

    async def queue_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Send a recall update on the scope's ordered path (or apply it now without a publisher)."""
        update = RecallUpdate(
            user_id=scope.user_id, agent_id=scope.agent_id, memory_ids=list(memory_ids), at=self.service.clock.now()
        )
        if self.publisher is None:
            await self.apply_recall(update)
        else:
            await self.publisher.publish_recall(update)

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Physically remove a user's memories and their history (one agent's, or all)."""
        removed = await self.service.purge(user_id, agent_id)
        await self.history.purge(user_id, agent_id)
        return removed

    async def close(self) -> None:
        """Close the store, history, publisher and whatever the composition root handed over."""
        errors: list[BaseException] = []
        closers = [self.service.close, self.history.close]
        if self.publisher is not None:
            closers.append(self.publisher.close)
        closers.extend(getattr(o, "close") for o in self._owned if hasattr(o, "close"))  # noqa: B009
        for close in closers:
            try:
                result = close()
                if hasattr(result, "__await__"):
                    await result
            except Exception as exc:  # close everything even if one fails
                errors.append(exc)
        if errors:
            raise PermanentError(f"closing the pipeline failed: {errors[0]}") from errors[0]
