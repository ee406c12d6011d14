"""The use cases of memory-core, and the only place they live.

- :mod:`.search`: ranked memories for a query, and recall (reinforcement of what was returned);
- :mod:`.ingest`: a turn through extraction, consolidation and the store; queue messages;
- :mod:`.forgetting`: the forgetting policy over pages of any store, and the scheduled run;
- :mod:`.admin`: import, export, soft delete with history, purge;
- :class:`MemoryService`: the one object entry points hold, built by :mod:`memory_core.bootstrap`.

Nothing here imports an SDK or an adapter: only the domain and the ports.
"""

from __future__ import annotations

from memory_core.domain.policy import COUNTERS, ForgettingCounts
from memory_core.service.admin import ImportReport, PurgeReport
from memory_core.service.forgetting import ForgettingChange, ForgettingReport, ForgettingRun
from memory_core.service.ingest import IngestResult, ProcessOutcome, StepResult, decode_message
from memory_core.service.memory_service import MemoryService, TurnStatus

__all__ = [
    "COUNTERS",
    "ForgettingChange",
    "ForgettingCounts",
    "ForgettingReport",
    "ForgettingRun",
    "ImportReport",
    "IngestResult",
    "MemoryService",
    "ProcessOutcome",
    "PurgeReport",
    "StepResult",
    "TurnStatus",
    "decode_message",
]
