"""The limits table of the documentation (docs/serve.md) says what the code enforces."""

from __future__ import annotations

import re
from pathlib import Path

from memory_core.domain.messages import MAX_MESSAGE_CHARS, MAX_TURN_BYTES, MAX_TURN_MESSAGES
from memory_core.domain.validation import (
    MAX_MEMORY_CHARS,
    MAX_METADATA_DEPTH,
    MAX_METADATA_KEY_CHARS,
    MAX_SUMMARY_CHARS,
)

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text(encoding="utf-8")


def documented(what: str) -> str:
    match = re.search(rf"^\| {re.escape(what)} \| ([^|]+) \|$", PAGE, re.M)
    assert match, f"the limits table of docs/serve.md has no row {what!r}"
    return match.group(1).strip()


def test_the_limits_table_is_the_code() -> None:
    assert documented("messages in one turn") == f"{MAX_TURN_MESSAGES:,}"
    assert documented("characters in one message") == f"{MAX_MESSAGE_CHARS:,}"
    assert documented("one turn as JSON") == f"{MAX_TURN_BYTES // 1024} KiB"
    assert documented("characters in a memory's text") == f"{MAX_MEMORY_CHARS:,}"
    assert documented("characters in a memory's summary") == f"{MAX_SUMMARY_CHARS:,}"
    assert documented("characters in a metadata key") == f"{MAX_METADATA_KEY_CHARS:,}"
    assert documented("levels of objects and lists in metadata") == f"{MAX_METADATA_DEPTH:,}"
