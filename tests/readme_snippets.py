"""The README's code blocks, so tests can run them exactly as a newcomer pastes them.

A block is named by an HTML comment on the line just before its opening fence::

    <!-- snippet: python-api -->
    ```python
    ...
    ```

:func:`snippet` returns the code of the block with that name (a missing or repeated name fails the
test, so renaming one in the README cannot silently skip its test).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["README", "snippet", "snippet_names"]

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^<!-- snippet: ([a-z0-9-]+) -->\n```[a-z]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def snippet_names(text: str | None = None) -> list[str]:
    """Every snippet name in the README, in order."""
    return [m.group(1) for m in _BLOCK.finditer(text if text is not None else README.read_text("utf-8"))]


def snippet(name: str, text: str | None = None) -> str:
    """The code of the README block named ``name``.

    Raises:
        LookupError: No block, or more than one, has that name.
    """
    source = text if text is not None else README.read_text("utf-8")
    found = [m.group(2) for m in _BLOCK.finditer(source) if m.group(1) == name]
    if len(found) != 1:
        raise LookupError(f"the README has {len(found)} blocks named {name!r} (expected exactly one)")
    return found[0]
