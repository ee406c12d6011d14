"""A question that names one of the people who spoke prefers what that person said.

A conversation between two people is kept in one scope, each message with its speaker's ``name``
(:class:`~memory_core.domain.records.Provenance`). "When did John get his degree?" asks about John: of
the memories that match, John's own statements come before Maria's congratulations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memory_core.domain.messages import MessageRole
from memory_core.domain.records import MemoryRecord
from memory_core.domain.search import SearchHit
from memory_core.language.sentences import JAPANESE_SCRIPT

__all__ = ["SPEAKER_RELEVANCE", "named_speaker", "speaker_asked", "speakers_of"]

#: How much more a memory said by the one speaker a question names counts in the order (its shown
#: relevance is not changed). Measured with ``eval pipeline`` on LoCoMo (docs/evaluation.md).
SPEAKER_RELEVANCE = 0.1

_ROLES = frozenset(role.value for role in MessageRole)


def speakers_of(record: MemoryRecord) -> set[str]:
    """The people whose messages a memory came from (names, not roles such as ``user``)."""
    return {s.speaker for s in record.provenance if s.speaker and s.speaker.casefold() not in _ROLES}


def _names(query: str, name: str) -> bool:
    if JAPANESE_SCRIPT.search(name):
        return name in query
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE) is not None


def named_speaker(query: str, speakers: Iterable[str]) -> str | None:
    """The one speaker ``query`` names, or ``None`` when it names none or several."""
    named = {s for s in speakers if _names(query, s)}
    return next(iter(named)) if len(named) == 1 else None


def speaker_asked(query: str, hits: Sequence[SearchHit]) -> str | None:
    """The one speaker of ``hits`` that ``query`` names, when the hits come from more than one speaker
    (else ``None``): a memory said by that speaker counts :data:`SPEAKER_RELEVANCE` more in the order."""
    everyone = set().union(*(speakers_of(h.record) for h in hits)) if hits else set()
    return named_speaker(query, everyone) if len(everyone) > 1 else None
