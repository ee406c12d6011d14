"""The use cases of memory-core, and the only place they live.

- :mod:`.search`: ranked memories for a query, and recall (reinforcement of what was returned);
- :mod:`.ingest`: a turn through extraction, consolidation and the store, in named phases; beneath it
  :mod:`.preparation` (a turn's candidates, and turns prepared ahead), :mod:`.episodes` (episodes,
  provenance, forgetting inside episodes), :mod:`.journal` (ids, history entries, purge checks),
  :mod:`.replay` (a turn that comes again) and :mod:`.results` (what an ingestion did);
- :mod:`.messages`: posted turns and queue messages, validated, queued, decoded and processed;
- :mod:`.forgetting`: the forgetting policy over pages of any store, and the scheduled run;
- :mod:`.admin`: update and soft delete with history, purge; :mod:`.import_export`: import and
  export; :mod:`.inspection`: one memory, users, queued messages;
- :class:`MemoryService`: the one object entry points hold, built by :mod:`memory_core.bootstrap`.

Nothing here imports an SDK or an adapter: only the domain and the ports.
"""

from __future__ import annotations

from memory_core.domain.policy import COUNTERS, ForgettingCounts
from memory_core.service.admin import PurgeReport
from memory_core.service.forgetting import ForgettingChange, ForgettingReport, ForgettingRun
from memory_core.service.import_export import ImportReport
from memory_core.service.memory_service import MemoryService
from memory_core.service.messages import ProcessOutcome, TurnStatus, decode_message
from memory_core.service.results import IngestResult, StepResult

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
