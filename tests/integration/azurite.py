"""Azurite's Table service for the tests: found, started on a free loopback port, stopped.

``azurite-table`` is looked up on ``PATH`` and then in ``.ci/node/node_modules/.bin`` (where ``.ci/run``
installs the version pinned in ``.ci/node/package.json``: ``npm ci --prefix .ci/node``). Without it the
tests that need it are skipped with that instruction, unless ``MEMORY_REQUIRE_AZURITE=1`` (set by
``.ci/run``) makes a missing or failing Azurite an error, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import TableClient

ROOT = Path(__file__).resolve().parents[2]
LOCAL_BIN = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "azurite-table"
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Azurite:
    """A running Azurite Table service."""

    port: int
    connection_string: str
    started_in: float


def find_binary() -> str | None:
    """``azurite-table`` on PATH, else the one ``.ci/run`` installs."""
    found = shutil.which("azurite-table")
    if found:
        return found
    return str(LOCAL_BIN) if LOCAL_BIN.exists() else None


def development_connection_string(port: int) -> str:
    """Azurite's published development account (what ``UseDevelopmentStorage=true`` means to the SDK),
    on ``port`` instead of the default 10002."""
    credential = TableClient.from_connection_string("UseDevelopmentStorage=true", "probe").credential
    assert isinstance(credential, AzureNamedKeyCredential)
    name, key = credential.named_key
    return (
        f"DefaultEndpointsProtocol=http;AccountName={name};AccountKey={key};"
        f"TableEndpoint=http://127.0.0.1:{port}/{name};"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unavailable(reason: str) -> None:
    if os.environ.get("MEMORY_REQUIRE_AZURITE") == "1":
        pytest.fail(f"{reason} (MEMORY_REQUIRE_AZURITE=1)")
    pytest.skip(reason)


@contextmanager
def running_azurite(workdir: Path) -> Iterator[Azurite]:
    """Start ``azurite-table`` in memory on a free loopback port; stop it afterwards."""
    binary = find_binary()
    if binary is None:
        _unavailable(
            "Azurite is not installed: `npm ci --prefix .ci/node` (what .ci/run does) "
            "or put azurite-table on PATH"
        )
        raise AssertionError("unreachable")  # pragma: no cover
    last_output = ""
    for _ in range(3):  # another process may take the free port between the probe and the bind
        port = _free_port()
        started = time.monotonic()
        process = subprocess.Popen(
            [
                binary,
                "--inMemoryPersistence",
                "--tableHost",
                "127.0.0.1",
                "--tablePort",
                str(port),
                "--skipApiVersionCheck",
                "--disableTelemetry",
                "--silent",
            ],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            while process.poll() is None and time.monotonic() - started < START_TIMEOUT:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    time.sleep(0.05)
            if process.poll() is None and time.monotonic() - started < START_TIMEOUT:
                yield Azurite(port, development_connection_string(port), time.monotonic() - started)
                return
            if process.poll() is None:
                _unavailable(f"Azurite did not listen on 127.0.0.1:{port} within {START_TIMEOUT:.0f} s")
            last_output = process.stdout.read().decode("utf-8", "replace") if process.stdout else ""
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if process.stdout is not None:
                process.stdout.close()
    _unavailable(f"Azurite exited at start: {last_output.strip()[-500:]}")
