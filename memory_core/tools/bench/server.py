"""A ``memory-core serve`` child process on a free loopback port with a random token.

``bench serve`` and ``bench inspector`` measure the server this way: from a client in another process,
as an agent or the inspector page would reach it.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ServeProcess"]

_LISTENING = re.compile(r"listening on http://([0-9.]+):(\d+)")
_MAIN = "import sys; from memory_core.cli.main import main; sys.exit(main())"


class ServeProcess:
    """``memory-core --db DB serve --port 0 OPTIONS`` with a random ``MEMORY_API_TOKEN`` and no LLM.

    Args:
        db: The store file.
        log: Where the server's standard error goes.
        options: More ``serve`` options (``--workers``, ``--no-scheduler``, ...).
        env: More environment (the embedder, threads, ...).
        timeout: Seconds to wait until it listens.

    Raises:
        RuntimeError: It exited, or did not listen in time (with the end of its log).
    """

    def __init__(
        self,
        db: Path,
        log: Path,
        *,
        options: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.db = db
        self.token = secrets.token_urlsafe(32)
        environ = {**os.environ, **(env or {}), "MEMORY_API_TOKEN": self.token, "MEMORY_LLM_PROVIDER": "none"}
        command = [sys.executable, "-c", _MAIN, "--db", str(db), "serve", "--port", "0", *options]
        self.log = log.open("w+", encoding="utf-8")
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            command, env=environ, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        self.host, self.port = self._wait_listening(timeout)

    def _wait_listening(self, timeout: float) -> tuple[str, int]:
        found: list[tuple[str, int]] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                match = _LISTENING.search(line)
                if match and not found:
                    found.append((match.group(1), int(match.group(2))))

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"memory-core serve did not start: {self.log.read()[-2000:]}")
            time.sleep(0.05)
        return found[0]

    def rss_peak_mb(self) -> float | None:
        """The server's peak resident memory in MiB (Linux ``VmHWM``; ``None`` elsewhere)."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        return round(int(match.group(1)) / 1024, 1) if match else None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then (after ``timeout`` seconds) SIGKILL; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self.log.close()
