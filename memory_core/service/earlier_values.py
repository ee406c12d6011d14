"""What a fact held before a later statement superseded it, kept as a record of its own (DESIGN section 7).

A superseding UPDATE keeps the fact's id for what holds now (the id a caller holds keeps answering
with the current value) and keeps the value it replaced as its own memory: the same text, sources,
category and importance, dated (``valid_from`` when it was said, ``valid_until`` when the new value
was) and linked to the fact (``superseded_by``; the fact names it in ``earlier_values``). Default reads
and searches return current memories only, so an earlier value is history: found with
``include_superseded``, by ``get`` and in the export, never shown as what holds now. A forget request
that takes the fact takes its earlier values with it.

Both writes follow the step's own write (its record in the history first), are idempotent, and are
caught up when a turn is redelivered (:func:`~memory_core.service.episodes.catch_up_redactions`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial

from memory_core.domain.messages import HistoryEntry, MemoryEvent, Turn
from memory_core.domain.records import (
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    deleted_on_request,
    forgotten_record,
)
from memory_core.ports import Embedder, HistoryStore, MemoryStore
from memory_core.service.journal import earlier_value_id, record_once

__all__ = ["earlier_values_of", "forget_earlier_values", "keep_earlier_value", "superseded_in"]

logger = logging.getLogger(__name__)

#: Metadata of the fact that is about its chain, not about the value it held (not copied to it).
_CHAIN_METADATA = frozenset({"earlier_values", "superseded_sources", "superseded_by_turn"})


def superseded_in(before: MemoryRecord | None, after: MemoryRecord | None, turn: Turn) -> bool:
    """Whether ``after`` is a fact whose value this turn's statement superseded (an UPDATE that
    replaced what ``before`` said)."""
    return (
        before is not None
        and after is not None
        and after.kind is MemoryKind.FACT
        and after.metadata.get("superseded_by_turn") == turn.turn_id
    )


async def keep_earlier_value(
    store: MemoryStore,
    history: HistoryStore | None,
    embedder: Embedder,
    before: MemoryRecord | None,
    after: MemoryRecord | None,
    turn: Turn,
) -> MemoryRecord | None:
    """Keep what ``before`` said as a closed record of its own when this turn superseded it (see the
    module docstring). Returns the record written, or ``None`` (no supersession, or kept already: a
    redelivered turn, or an earlier value forgotten since)."""
    if not superseded_in(before, after, turn):
        return None
    assert before is not None and after is not None
    scope = after.scope
    memory_id = earlier_value_id(scope, after.id, turn.turn_id)
    if await store.get(scope, memory_id) is not None:
        return None
    vector = (await embedder.embed_passages([before.memory]))[0]
    until = after.valid_from or turn.occurred_at
    metadata = {k: v for k, v in before.metadata.items() if k not in _CHAIN_METADATA}
    record = MemoryRecord.model_validate(
        {
            **before.model_dump(),
            "id": memory_id,
            "valid_from": before.valid_from or before.created_at,
            "valid_until": until,
            "superseded_by": after.id,
            "metadata": {**metadata, "earlier_value_of": after.id},
            "embedding": [float(x) for x in vector],
        }
    )
    reason = f"what memory {after.id} held until turn {turn.turn_id} superseded it"
    entry = HistoryEntry.of_change(MemoryEvent.ADD, scope, memory_id, None, record, reason=reason, at=until)
    await record_once(history, entry)
    await store.upsert([record])
    return record


async def earlier_values_of(store: MemoryStore, fact: MemoryRecord) -> list[MemoryRecord]:
    """The earlier values of ``fact`` not forgotten yet, oldest first."""
    found = []
    for memory_id in fact.metadata.get("earlier_values", []):
        earlier = await store.get(fact.scope, str(memory_id))
        if earlier is not None and earlier.status is not MemoryStatus.DELETED:
            found.append(earlier)
    return found


async def forget_earlier_values(
    store: MemoryStore,
    history: HistoryStore | None,
    fact: MemoryRecord,
    earlier_values: Sequence[MemoryRecord],
    turn: Turn,
) -> int:
    """Forget ``earlier_values`` (:func:`earlier_values_of` ``fact``, deleted on request by ``turn``)
    with it: each becomes a tombstone (its id, time and reason, not its words or vector) and its
    recorded changes keep none of its words. Idempotent. Returns how many were forgotten."""
    reason = f"forgotten on request with memory {fact.id} (turn {turn.turn_id})"
    for earlier in earlier_values:
        deleted = deleted_on_request(earlier, turn.turn_id, reason, turn.occurred_at)
        entry = HistoryEntry.of_change(
            MemoryEvent.DELETE, fact.scope, earlier.id, earlier, deleted, reason=reason, at=turn.occurred_at
        )
        await record_once(history, entry)
        await store.upsert([forgotten_record(deleted)])
        if history is not None:
            await history.rewrite_entries(fact.scope, [earlier.id], partial(HistoryEntry.forgotten, redact=None))
    if earlier_values:
        logger.info("turn %s: forgot %s earlier value(s) of memory %s", turn.turn_id, len(earlier_values), fact.id)
    return len(earlier_values)
