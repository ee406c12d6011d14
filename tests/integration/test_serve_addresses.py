"""``memory-core serve`` says where the HTTP API and the memory inspector are once it listens."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path


def start(tmp_path: Path, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, "MEMORY_EMBEDDER": "hash"}
    for name in ("MEMORY_SQLITE_PATH", "MEMORY_STORE", "AZURE_SEARCH_ENDPOINT", "MEMORY_API_TOKEN"):
        env.pop(name, None)
    command = [sys.executable, "-m", "memory_core", "--db", str(tmp_path / "m.db"), "serve", "--port", "0"]
    return subprocess.Popen(
        [*command, "--no-scheduler", *flags],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    return rest


def get(url: str) -> tuple[int, str, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read().decode("utf-8")


def test_serve_prints_the_api_and_the_inspector_addresses(tmp_path: Path) -> None:
    process = start(tmp_path)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
    finally:
        stop(process)
    api = re.fullmatch(r"memory-core serve: listening on (http://127\.0\.0\.1:(\d+)/api) \(store .*m\.db\)\n", lines[0])
    assert api is not None, lines
    port = api.group(2)
    assert lines[1] == f"memory-core serve: the memory inspector is at http://127.0.0.1:{port}/\n"


def test_the_addresses_printed_answer(tmp_path: Path) -> None:
    process = start(tmp_path, "--json")
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        assert ready["url"].endswith("/api")
        assert ready["inspector"] == ready["url"].removesuffix("api")
        status, content_type, page = get(ready["inspector"])
        assert status == 200 and content_type.startswith("text/html") and "<html" in page.lower()
        status, _, body = get(ready["url"] + "/health")
        assert status == 200 and json.loads(body)
    finally:
        rest = stop(process)
    assert rest == ""
