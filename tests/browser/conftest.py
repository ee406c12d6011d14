"""The inspector in headless Debian Chromium, driven by Selenium, against a real ``memory-core serve``.

The browser is the distribution's (``/usr/bin/chromium`` and ``/usr/bin/chromedriver``, Debian's
``chromium`` and ``chromium-driver``); nothing is downloaded. Without them, or without the ``selenium``
package, the browser tests are skipped with the reason; with ``MEMORY_REQUIRE_BROWSER=1`` (as
``.ci/run`` sets after installing them) they fail instead.

The store is seeded with English and Japanese memories, the README's reference example (two memories
with the same text, ``ref-a`` important, often recalled and 75 days old, ``ref-b`` trivial and fresh),
memories that forgetting would archive, and conversation turns processed by the real pipeline (so
memories have provenance and a decision history). The server requires a token, so the page's
credential prompt is part of every run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from integration.runtime_helpers import RunningRuntime, turn_body

from memory_core.bootstrap import build_service, load_settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
USER, AGENT, OTHER_USER = "u1", "travel", "u2"
#: The server's token (a constant: pytest and the test module may import this file as two modules).
TOKEN = "inspector-test-token-0123456789"
#: Where screenshots go: ``MEMORY_INSPECTOR_SCREENSHOTS`` (``docs/images`` refreshes the README's), else a
#: temporary folder.
SCREENSHOTS_ENV = "MEMORY_INSPECTOR_SCREENSHOTS"


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed (pip install -e '.[dev]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return f"{path} is missing (apt-get install chromium chromium-driver: Debian's {package})"
    return None


def _records(now: datetime) -> list[dict[str, Any]]:
    def record(memory_id: str, text: str, *, days_ago: float = 1.0, **fields: Any) -> dict[str, Any]:
        at = (now - timedelta(days=days_ago)).isoformat()
        return {
            "id": memory_id,
            "user_id": USER,
            "agent_id": AGENT,
            "memory": text,
            "created_at": at,
            "updated_at": at,
            **fields,
        }

    aisle = "prefers an aisle seat on long flights"
    return [
        record("ref-a", aisle, days_ago=75, importance=1.0, access_count=20, category="preference"),
        record("ref-b", aisle, days_ago=0, importance=0.05, category="preference"),
        record("ja-window", "窓側の席が好き", days_ago=3, importance=0.8, category="preference"),
        record("ja-spicy", "辛い料理は苦手です", days_ago=10, importance=0.7, category="constraint"),
        record("ja-trip", "来月京都に旅行する予定です", days_ago=2, importance=0.6, category="plan"),
        record("en-tea", "drinks green tea every morning", days_ago=20, importance=0.5, category="routine"),
        record("en-peanut", "is allergic to peanuts", days_ago=40, importance=0.95, category="constraint"),
        # Forgetting would archive these now (their stored retention is stale).
        record(
            "old-hotel",
            "stayed at a business hotel near the station once",
            days_ago=200,
            importance=0.1,
            category="general",
            status="active",
            retention_score=0.4,
        ),
        record(
            "old-taxi",
            "took a taxi from the airport in 2025",
            days_ago=150,
            importance=0.2,
            category="general",
            status="active",
            retention_score=0.35,
        ),
        # A change: what holds now, and the value it replaced (kept, closed, linked).
        record(
            "home-now", "lives in Munich", days_ago=5, importance=0.7, category="profile",
            valid_from=(now - timedelta(days=5)).isoformat(), metadata={"earlier_values": ["home-before"]},
        ),
        record(
            "home-before", "lives in Berlin", days_ago=60, importance=0.7, category="profile",
            valid_from=(now - timedelta(days=60)).isoformat(), valid_until=(now - timedelta(days=5)).isoformat(),
            superseded_by="home-now",
        ),
        {
            "id": "u2-one",
            "user_id": OTHER_USER,
            "agent_id": AGENT,
            "memory": "likes jazz",
            "category": "preference",
        },
        {"id": "u2-two", "user_id": OTHER_USER, "agent_id": "music", "memory": "plays the piano"},
    ]


def seed(db: Path, now: datetime) -> None:
    """Write the seed memories into the store file at ``db`` (before the server starts)."""

    async def main() -> None:
        service = build_service(load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db)))
        async with service:
            await service.import_records(_records(now))

    asyncio.run(main())


TURNS = [
    "I like green tea. I am vegetarian.",
    "My favorite city is Kyoto.",
    "コーヒーより紅茶が好きです。",
    "I am vegetarian and I avoid eggs too.",
]


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRuntime]:
    """``memory-core serve`` (a token required) on the seeded store, its turns processed."""
    missing = _missing()
    if missing:
        if os.environ.get("MEMORY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MEMORY_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    db = tmp_path_factory.mktemp("inspector") / "memory.db"
    seed(db, datetime.now(UTC))
    runtime = RunningRuntime(db, workers=1, token=TOKEN).start()
    try:
        client = runtime.client
        for i, text in enumerate(TURNS):
            reply = client.post(
                "/api/turns",
                turn_body(i, text, user=USER, agent=AGENT, start=datetime.now(UTC) - timedelta(hours=1)),
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert reply.status == 202, reply.body
        runtime.drain()
        yield runtime
    finally:
        runtime.stop()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get(SCREENSHOTS_ENV)
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="session")
def browser(server: RunningRuntime, downloads: Path) -> Iterator[Any]:
    """Headless Debian Chromium (a fresh profile, no background networking) under chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="memory-core-chromium-")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        "--lang=en-US",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
