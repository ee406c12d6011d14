"""Prompt builders and the pydantic schemas the chat model must answer with.

Prompts are pure functions of their inputs (no clock, no I/O), so the same turn always produces the
same prompt and tests can compare them exactly: :mod:`~memory_core.service.prompts.extraction` for
extraction, :mod:`~memory_core.service.prompts.consolidation` for consolidation.
"""
