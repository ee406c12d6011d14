"""The key the Function App's instances hash ids in logs with: one for all, kept in the history table.

Every instance reads it at its first use of the service (one entity of the history table, a
checkpoint named :data:`LOG_KEY_CHECKPOINT`), and the first instance ever writes it, 32 random bytes.
Their log lines then tag a user alike, across instances and deployments, while someone holding only
the logs (Application Insights readers) cannot confirm a guessed address by hashing it: the key is
readable only with data access to the history table (:mod:`memory_core.domain.log_ids`).
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from memory_core.domain.log_ids import use_log_key

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import MemoryService

__all__ = ["LOG_KEY_CHECKPOINT", "share_log_key"]

logger = logging.getLogger("memory_core.functions")

#: The checkpoint that holds the key (hex).
LOG_KEY_CHECKPOINT = "log-id-key"


async def share_log_key(service: MemoryService) -> bool:
    """Hash ids in logs with the deployment's key from now on, writing it the first time.

    Two instances that start together for the first time may both write; each reads back what was
    kept, so they agree from then on. Without a history (or when it cannot be read) ids are hashed
    without a key, and a warning says so; the service is never held up by it.

    Returns:
        Whether the shared key is in use.
    """
    try:
        value = await service.get_checkpoint(LOG_KEY_CHECKPOINT)
        if not value:
            await service.set_checkpoint(LOG_KEY_CHECKPOINT, secrets.token_hex(32))
            value = await service.get_checkpoint(LOG_KEY_CHECKPOINT)
        key = bytes.fromhex(value) if value else b""
    except Exception as exc:  # never fails the app: the tags only lose their key
        logger.warning("the key of ids in logs could not be read (%s); they are hashed without it", type(exc).__name__)
        return False
    if len(key) < 16:
        logger.warning("no key of ids in logs is kept (no history table); they are hashed without it")
        return False
    use_log_key(key)
    return True
