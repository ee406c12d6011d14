"""How many connections the embedded server holds, and how long a client may take to send a request.

The server gives each connection a thread, so a crowd of clients that open connections and send
nothing, or send a request a byte at a time, would hold as many threads. :class:`ConnectionGuard`
bounds both: at most ``limit`` connections are served at once (the server refuses the others at
once, 503 with ``Retry-After``), and each request, from its first line to the last byte of its body,
must arrive within ``read_timeout`` seconds of the connection becoming ready for it (an idle
keep-alive connection included); a watchdog thread closes the reading side of a connection past its
deadline, so its thread wakes, answers 408 (or closes silently when nothing was sent) and ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["ConnectionGuard", "Deadline"]


class Deadline:
    """One connection's clock: when its request must have arrived, and whether it ran out.

    Attributes:
        connection: The connection's socket.
        at: The monotonic time by which the request must have arrived (``None``: no clock running).
        expired: The request did not arrive in time: its reading side was closed.
    """

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.at: float | None = None
        self.expired = False


class ConnectionGuard:
    """At most ``limit`` connections at once, each request read within ``read_timeout`` seconds.

    Args:
        limit: Connections served at once (at least 1).
        read_timeout: Seconds a client has to send a whole request (more than 0).

    Raises:
        ValueError: ``limit`` below 1 or ``read_timeout`` not positive.
    """

    def __init__(self, limit: int, read_timeout: float) -> None:
        if limit < 1:
            raise ValueError("max_connections must be at least 1")
        if not read_timeout > 0:
            raise ValueError("read_timeout must be more than 0 seconds")
        self.limit = limit
        self.read_timeout = read_timeout
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._clocks: set[Deadline] = set()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    # -- admission ------------------------------------------------------------------------------
    def admit(self) -> bool:
        """Take a connection slot if one is free (never waits)."""
        return self._slots.acquire(blocking=False)

    def release(self) -> None:
        """Give back the slot of a connection that ended."""
        self._slots.release()

    # -- clocks ---------------------------------------------------------------------------------
    def track(self, connection: socket.socket) -> Deadline:
        """The clock of a new connection (stopped until :meth:`expect`)."""
        deadline = Deadline(connection)
        with self._lock:
            self._clocks.add(deadline)
        return deadline

    def untrack(self, deadline: Deadline) -> None:
        """Forget the clock of a connection that ended."""
        with self._lock:
            self._clocks.discard(deadline)

    def expect(self, deadline: Deadline) -> None:
        """Start the clock: the next request must arrive within ``read_timeout`` seconds."""
        with self._lock:
            if not deadline.expired:
                deadline.at = time.monotonic() + self.read_timeout

    def received(self, deadline: Deadline) -> None:
        """Stop the clock: the request has arrived (answering it takes what it takes)."""
        with self._lock:
            deadline.at = None

    # -- the watchdog ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the watchdog thread that closes the connections past their deadline."""
        self._stop.clear()
        self._watchdog = threading.Thread(target=self._watch, name="memory-core-http-deadlines", daemon=True)
        self._watchdog.start()

    def stop(self) -> None:
        """Stop the watchdog thread."""
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=5)
            self._watchdog = None

    def _watch(self) -> None:
        interval = min(0.25, self.read_timeout / 4)
        while not self._stop.wait(interval):
            self.expire(time.monotonic())

    def expire(self, now: float) -> int:
        """Close the reading side of every connection whose request is late at ``now``; how many."""
        with self._lock:
            late = [d for d in self._clocks if d.at is not None and d.at <= now]
            for deadline in late:
                deadline.at = None
                deadline.expired = True
        for deadline in late:
            with contextlib.suppress(OSError):  # already closed by the client: nothing to wake
                deadline.connection.shutdown(socket.SHUT_RD)
        return len(late)
