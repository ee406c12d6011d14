"""Where the history table keeps what: its partitions and row keys.

Every scope is one partition (``PartitionKey = "{user_id}|{agent_id}"``; ``|`` is not a scope-id
character, so partitions never collide and a user's partitions form one key range). Row keys keep
order and make replays idempotent:

=====================================  ==============================================================
``c``                                  the scope's entry counter (``seq``), updated with its ETag
``e|{seq:016d}``                       one history entry; ``seq`` orders entries oldest first
``s|{turn_id}|{step:06d}``             "candidate ``step`` of the turn is recorded"
``j|{turn_id}``                        the turn journal: candidates, extraction path, processed time
=====================================  ==============================================================

Two more partitions serve the Functions host: ``~deadletter`` (poison queue messages with the reason
they were set aside; see ``function_app.py``) and ``~checkpoint`` (where the nightly forgetting job
resumes). A third, ``~tombstone``, keeps when a user (row key ``{user_id}|*``) or a scope
(``{user_id}|{agent_id}``) was purged: ids and a time, no text, recorded before the purge deletes
anything and never purged itself, so a turn or recall update dated at or before it is dropped however
late it is delivered. All three start with ``~``, which no scope id can.
"""

from __future__ import annotations

import hashlib
import re

from memory_core.domain.records import Scope

__all__ = [
    "ALL_AGENTS",
    "CHECKPOINT_PARTITION",
    "COUNTER",
    "DEAD_LETTER_PARTITION",
    "ENTRIES",
    "TOMBSTONE_PARTITION",
    "entry_key",
    "journal_key",
    "partition_key",
    "safe_key",
    "scope_of_partition",
    "step_key",
    "step_of",
    "steps_of",
    "tombstone_key",
    "user_partitions",
]

#: The row key of a scope's entry counter.
COUNTER = "c"
#: Poison queue messages, by (safe) message id.
DEAD_LETTER_PARTITION = "~deadletter"
#: Named positions of the Functions host's jobs, by (safe) name.
CHECKPOINT_PARTITION = "~checkpoint"
#: When users and scopes were purged.
TOMBSTONE_PARTITION = "~tombstone"
#: The agent part of a tombstone's row key that covers every agent of the user (not a scope-id character).
ALL_AGENTS = "*"
#: The row-key range (from, before) of a partition's history entries.
ENTRIES = ("e|", "e}")

_SAFE_KEY = re.compile(r"[A-Za-z0-9_.:@\-]{1,200}")


def partition_key(scope: Scope) -> str:
    """The partition of a scope's history."""
    return f"{scope.user_id}|{scope.agent_id}"


def scope_of_partition(pk: str) -> tuple[str, str]:
    """The ``(user_id, agent_id)`` of a scope's partition."""
    user_id, _, agent_id = pk.partition("|")
    return user_id, agent_id


def user_partitions(user_id: str) -> tuple[str, str]:
    """The key range (from, before) of every partition of a user's scopes (and of their tombstones)."""
    return f"{user_id}|", f"{user_id}}}"


def entry_key(seq: int) -> str:
    """The row key of the ``seq``-th entry of a scope."""
    return f"e|{seq:016d}"


def step_key(turn_id: str, step: int) -> str:
    """The row key of the marker "candidate ``step`` of the turn is recorded"."""
    return f"s|{turn_id}|{step:06d}"


def steps_of(turn_id: str) -> tuple[str, str]:
    """The row-key range (from, before) of a turn's step markers."""
    return f"s|{turn_id}|", f"s|{turn_id}}}"


def step_of(row_key: str) -> int:
    """The step a marker's row key names."""
    return int(row_key.rsplit("|", 1)[1])


def journal_key(turn_id: str) -> str:
    """The row key of a turn's journal."""
    return f"j|{turn_id}"


def tombstone_key(user_id: str, agent: str) -> str:
    """The row key of the tombstone of a scope, or of a user with ``agent`` :data:`ALL_AGENTS`."""
    return f"{user_id}|{agent}"


def safe_key(value: str) -> str:
    """A row key for an arbitrary id (ids with characters tables refuse are hashed)."""
    if _SAFE_KEY.fullmatch(value):
        return value
    return "h:" + hashlib.sha256(value.encode("utf-8")).hexdigest()
