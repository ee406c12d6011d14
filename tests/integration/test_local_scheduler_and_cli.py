"""The forgetting schedule (NCRONTAB, resumable pages) and the ``memory-core queue`` commands."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.errors import ConfigurationError
from memory_core.ports import FixedClock
from memory_core.runtime.scheduler import CronSchedule, ForgettingScheduler
from memory_core.service import MemoryService
from memory_core.service.forgetting import FORGET_CHECKPOINT

NOW = datetime(2026, 11, 29, 19, 0, 0, tzinfo=UTC)  # a Sunday


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 30 3 * * *", datetime(2026, 11, 30, 3, 30, tzinfo=UTC)),
        ("*/15 * * * * *", datetime(2026, 11, 29, 19, 0, 15, tzinfo=UTC)),
        ("0 0 12 * * MON-FRI", datetime(2026, 11, 30, 12, 0, tzinfo=UTC)),
        ("0 0 9 * * 0", datetime(2026, 12, 6, 9, 0, tzinfo=UTC)),
        ("0 0 9 * * 7", datetime(2026, 12, 6, 9, 0, tzinfo=UTC)),
        ("0 5,10 19 * * *", datetime(2026, 11, 29, 19, 5, tzinfo=UTC)),
        ("0 0 0 1 JAN *", datetime(2027, 1, 1, tzinfo=UTC)),
        ("0 0 0 29 2 *", datetime(2028, 2, 29, tzinfo=UTC)),
    ],
)
def test_ncrontab_next_occurrence(expression: str, expected: datetime) -> None:
    assert CronSchedule.parse(expression).next_after(NOW) == expected


@pytest.mark.parametrize(
    "expression",
    ["0 30 3 * *", "61 * * * * *", "a * * * * *", "0 0 0 31 2 *", "0 0 5-1 * * *", "*/0 * * * * *"],
)
def test_bad_schedules_are_configuration_errors(expression: str) -> None:
    with pytest.raises(ConfigurationError):
        CronSchedule.parse(expression).next_after(NOW)


FADED = datetime(2026, 6, 1, tzinfo=UTC)  # half a year before NOW: unimportant memories have faded


def faded_service(db: Path, now: Callable[[], datetime] = lambda: NOW) -> MemoryService:
    """A real embedded service on ``db`` whose clock stands at ``NOW``."""
    return build_service(load_settings(environ={}, sqlite_path=str(db), embedder="hash"), clock=FixedClock(now()))


async def fill(service: MemoryService, count: int = 25) -> None:
    rows = [
        {"user_id": f"u{i % 3}", "agent_id": "a", "memory": f"faded memory {i}", "importance": 0.0,
         "updated_at": FADED, "retention_score": 0.9, "status": "active"}
        for i in range(count)
    ]
    await service.import_records(rows)


async def archived(service: MemoryService) -> int:
    total = 0
    for user in ("u0", "u1", "u2"):
        page = await service.list(Scope.of(user, "a"), statuses=[MemoryStatus.ARCHIVED], limit=1000)
        total += len(page.records)
    return total


def test_a_stopped_run_resumes_from_its_bookmark(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"

    async def first_process() -> None:
        async with faded_service(db) as service:
            await fill(service)
            stop = asyncio.Event()
            stop.set()  # stop after the first page
            run = await ForgettingScheduler(service, "0 30 3 * * *", page_size=10).run_job(stop)
            assert (run.pages, run.complete, run.scanned, run.archived) == (1, False, 10, 10)
            assert await service.get_checkpoint(FORGET_CHECKPOINT) == run.cursor is not None
            assert await archived(service) == 10

    async def second_process() -> None:
        async with faded_service(db) as service:  # a restart: the bookmark is in the store file
            run = await ForgettingScheduler(service, "0 30 3 * * *", page_size=10).run_job()
            assert run.resumed and run.complete and run.pages == 2
            assert (run.scanned, run.archived) == (15, 15)
            assert await service.get_checkpoint(FORGET_CHECKPOINT) is None
            assert await archived(service) == 25

    asyncio.run(first_process())
    asyncio.run(second_process())


def test_a_past_due_run_happens_at_start_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "memory.db"

    async def run() -> None:
        async with faded_service(db) as service:
            await fill(service)
            await service.set_checkpoint("forgetting.next_due", datetime(2026, 11, 29, 3, 30, tzinfo=UTC).isoformat())
            stop = asyncio.Event()
            scheduler = ForgettingScheduler(service, "0 30 3 * * *", page_size=10, now=lambda: NOW)
            task = asyncio.create_task(scheduler.run(stop))
            for _ in range(500):
                if await archived(service) == 25:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            stop.set()
            await task
            assert await service.get_checkpoint("forgetting.next_due") == datetime(
                2026, 11, 30, 3, 30, tzinfo=UTC
            ).isoformat()

    with caplog.at_level(logging.INFO, logger="memory_core"):
        asyncio.run(run())
    assert "past due" in caplog.text and "scanned 25, archived 25" in caplog.text


def test_queue_commands(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    queue = SQLiteQueue(default_queue_path(db))
    queue.send(b'{"schema": "nope"}', message_id="bad", session_id="u1|a1", subject="turn")
    queue.send(b"{}", message_id="waiting", session_id="u2|a1", subject="turn")
    message = queue.receive()
    assert message is not None
    queue.dead_letter(
        message,
        reason="ValidationError",
        description="schema: 'nope' is not a message this pipeline understands",
    )

    def run(*argv: str) -> str:
        out = io.StringIO()
        assert main(["--db", str(db), *argv], out=out) == 0
        return out.getvalue()

    listing = run("queue", "list")
    assert "1 waiting" in listing and "waiting" in listing and "1 dead-lettered" in listing
    dead = json.loads(run("--json", "queue", "dead-letters", "--body"))
    assert [(m["message_id"], m["dead_letter_reason"], m["body"]) for m in dead["messages"]] == [
        ("bad", "ValidationError", '{"schema": "nope"}')
    ]
    assert "schema" in run("queue", "dead-letters")
    assert "requeued bad" in run("queue", "requeue", "bad")
    assert [m["message_id"] for m in json.loads(run("--json", "queue", "list"))["messages"]] == [
        "waiting",
        "bad",
    ]
    assert run("queue", "purge-dead-letters") == "purged 0 dead-lettered message(s)\n"
    err = io.StringIO()
    assert main(["--db", str(db), "queue", "requeue", "missing"], out=err) == 3  # not found
