"""A griffe extension for the documentation site's API reference (``extensions:`` in mkdocs.yml).

The docstrings use Sphinx cross-reference roles (``:func:`name```, ``:class:`Memory```), which
Markdown would show as raw text. Before mkdocstrings renders a docstring, each role becomes inline
code (``name``), and a parenthetical note that opens an ``Args:`` or ``Keyword Args:`` section (which
the Google-style parser would read as a malformed argument) moves above the section, so the API
reference reads as the source does and ``mkdocs build --strict`` stays quiet.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["StripSphinxRoles", "without_roles"]

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|ref|term):`~?([^`]+)`")


_SECTION_NOTE = re.compile(r"^(?P<head>(?:Keyword )?Args:)\n(?P<note>[ \t]+\((?:[^()]|\([^()]*\))*\)[ \t]*)\n", re.M)


def without_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by inline code of its target, and a section's opening
    parenthetical note moved above the section."""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    return _SECTION_NOTE.sub(lambda m: " ".join(m.group("note").split()) + "\n\n" + m.group("head") + "\n", text)


class StripSphinxRoles(griffe.Extension):
    """Rewrites every docstring mkdocstrings loads with :func:`without_roles`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called by griffe for each object it loads."""
        if obj.docstring is not None:
            obj.docstring.value = without_roles(obj.docstring.value)
