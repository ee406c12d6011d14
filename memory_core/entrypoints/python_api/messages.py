"""Chat-style messages as the messages of a turn (the reader every face shares, in the domain)."""

from __future__ import annotations

from memory_core.domain.chat import Messages, turn_messages

__all__ = ["Messages", "turn_messages"]
