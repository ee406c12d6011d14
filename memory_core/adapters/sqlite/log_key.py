"""The install's key of the hashes logs name ids by: 32 random bytes in ``<store>.logkey``, mode 0600.

Every process that opens the same store (``memory-core serve``, the CLI, the Python API, the MCP
server) reads the same key, so their log lines tag a user alike; someone holding only the logs cannot
confirm a guessed address by hashing it (:mod:`memory_core.domain.log_ids`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets

__all__ = ["KEY_BYTES", "install_log_key", "log_key_path"]

logger = logging.getLogger(__name__)

KEY_BYTES = 32


def log_key_path(store_path: str) -> str:
    """Where the key of the store at ``store_path`` is kept."""
    return f"{store_path}.logkey"


def install_log_key(store_path: str) -> bytes:
    """The key beside the store at ``store_path``, created (0600) the first time.

    When the file cannot be read or written (a read-only folder, a store not created yet), a key of
    this process alone is returned: ids stay hidden, only lines of different processes stop matching.
    """
    path = log_key_path(store_path)
    try:
        with open(path, "rb") as handle:
            key = handle.read()
        if len(key) >= 16:
            return key
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.debug("the log key %s cannot be read (%s); this process uses its own", path, exc)
        return secrets.token_bytes(KEY_BYTES)
    key = secrets.token_bytes(KEY_BYTES)
    temporary = f"{path}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        os.link(temporary, path)  # appears whole, or not at all when another process was first
    except FileExistsError:
        with contextlib.suppress(OSError), open(path, "rb") as handle:
            found = handle.read()
            if len(found) >= 16:
                return found
    except OSError as exc:
        logger.debug("the log key %s cannot be created (%s); this process uses its own", path, exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return key
