"""The embedded runtime: the HTTP API, the queue worker and the nightly scheduler in one process.

``memory-core serve`` runs :class:`~memory_core.local.runtime.EmbeddedRuntime`; the pieces are
usable on their own (tests, other hosts). Nothing starts at import time.
"""

from __future__ import annotations

__all__ = ["runtime", "scheduler", "server", "worker"]
