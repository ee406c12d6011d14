"""Prompt builders and the pydantic schemas the chat model must answer with.

Prompts are pure functions of their inputs (no clock, no I/O), so the same turn always produces the
same prompt and tests can compare them exactly.
"""

from memory_core.service.prompts.consolidation import (
    ConsolidationDecision,
    ConsolidationEvent,
    ShownMemory,
    build_consolidation_system_prompt,
    build_consolidation_user_prompt,
    short_ids,
)
from memory_core.service.prompts.extraction import (
    CATEGORIES,
    RECALL_HEADER,
    ExtractedMemory,
    ExtractionOutput,
    build_extraction_system_prompt,
    build_extraction_user_prompt,
    strip_recalled_memories,
)

__all__ = [
    "CATEGORIES",
    "RECALL_HEADER",
    "ConsolidationDecision",
    "ConsolidationEvent",
    "ExtractedMemory",
    "ExtractionOutput",
    "ShownMemory",
    "build_consolidation_system_prompt",
    "build_consolidation_user_prompt",
    "build_extraction_system_prompt",
    "build_extraction_user_prompt",
    "short_ids",
    "strip_recalled_memories",
]
