"""The forgetting schedule (NCRONTAB, resumable pages) and the ``memory-core queue`` commands."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.adapters.sqlite_queue import SQLiteQueue, default_queue_path
from memory_core.cli import main
from memory_core.errors import ConfigurationError
from memory_core.local.scheduler import CronSchedule, ForgettingScheduler
from memory_core.ports import ForgettingReport

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


class FakeForgetter:
    """Three pages of 10 memories; records the cursors it was called with."""

    def __init__(self) -> None:
        self.calls: list[str | None] = []

    async def apply_forgetting(
        self, *, dry_run: bool = True, limit: int | None = None, cursor: str | None = None
    ) -> ForgettingReport:
        assert dry_run is False and limit == 10
        self.calls.append(cursor)
        start = int(cursor or 0)
        nxt = start + 10
        return ForgettingReport(
            dry_run=False,
            scanned=10,
            archived=1,
            unchanged=9,
            written=1,
            next_cursor=None if nxt >= 30 else str(nxt),
        )


def test_a_stopped_run_resumes_from_its_bookmark(tmp_path: Path) -> None:
    state = SQLiteQueue(tmp_path / "q.db")
    forgetter = FakeForgetter()
    stop = asyncio.Event()
    stop.set()  # stop after the first page
    first = asyncio.run(
        ForgettingScheduler(forgetter, "0 30 3 * * *", state=state, page_size=10).run_job(stop)
    )
    assert (first.pages, first.complete, state.get_state("forgetting.cursor")) == (1, False, "10")
    again = ForgettingScheduler(forgetter, "0 30 3 * * *", state=SQLiteQueue(tmp_path / "q.db"), page_size=10)
    second = asyncio.run(again.run_job())
    assert second.resumed_from == "10" and second.complete and second.pages == 2
    assert (second.scanned, second.archived, second.unchanged) == (20, 2, 18)
    assert forgetter.calls == [None, "10", "20"] and state.get_state("forgetting.cursor") is None


def test_a_past_due_run_happens_at_start_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = SQLiteQueue(tmp_path / "q.db")
    state.set_state("forgetting.next_due", datetime(2026, 11, 29, 3, 30, tzinfo=UTC).isoformat())
    forgetter = FakeForgetter()

    async def run() -> None:
        stop = asyncio.Event()
        scheduler = ForgettingScheduler(forgetter, "0 30 3 * * *", state=state, page_size=10, now=lambda: NOW)
        task = asyncio.create_task(scheduler.run(stop))
        while len(forgetter.calls) < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        stop.set()
        await task

    with caplog.at_level(logging.INFO, logger="memory_core.local.scheduler"):
        asyncio.run(run())
    assert "past due" in caplog.text and "scanned 30, archived 3" in caplog.text
    assert state.get_state("forgetting.next_due") == datetime(2026, 11, 30, 3, 30, tzinfo=UTC).isoformat()


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
    assert main(["--db", str(db), "queue", "requeue", "missing"], out=err) == 2
