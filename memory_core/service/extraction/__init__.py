"""Extraction: from a conversation turn to memory candidates (rules, or a chat model)."""
