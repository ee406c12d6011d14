"""The nightly forgetting job of the embedded runtime, on an NCRONTAB schedule.

``MEMORY_FORGET_SCHEDULE`` uses the six-field NCRONTAB format of Azure Functions timer triggers,
evaluated in UTC: ``second minute hour day month day-of-week`` (default ``0 30 3 * * *``, 03:30:00
every day). Each field takes ``*``, a number, a range ``a-b``, a step ``*/n`` or ``a-b/n``, and
comma-separated lists of those; months and days of the week also take names (``JAN``, ``MON``), and
day-of-week runs 0-6 from Sunday (7 is Sunday too). When both day-of-month and day-of-week are
restricted, a day must match both.

The job is the service's scheduled forgetting run (:meth:`MemoryService.run_forgetting
<memory_core.service.MemoryService.run_forgetting>`: bounded pages, the cursor saved after each), the
same one the Functions timer runs. The next due time is kept beside the cursor in the service's
checkpoints (the store file's history tables), so a run that is stopped half-way resumes where it
stopped when the runtime starts again, and a run that was due while the runtime was down is made at
start (with a warning that it is past due).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from memory_core import telemetry
from memory_core.errors import ConfigurationError
from memory_core.service.forgetting import FORGET_CHECKPOINT, ForgettingRun

__all__ = ["CronSchedule", "ForgettingScheduler", "ScheduledForgetting"]

logger = logging.getLogger(__name__)

_MONTHS = {
    m: i
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1
    )
}
_DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)


def _value(text: str, names: dict[str, int], name: str, low: int, high: int) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not text.isdigit():
        raise ConfigurationError(f"MEMORY_FORGET_SCHEDULE: {name} {text!r} is not a number")
    value = int(text)
    if not low <= value <= high:
        raise ConfigurationError(f"MEMORY_FORGET_SCHEDULE: {name} {value} is outside {low}-{high}")
    return value


def _parse_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ConfigurationError(f"MEMORY_FORGET_SCHEDULE: empty item in the {name} field")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ConfigurationError(
                    f"MEMORY_FORGET_SCHEDULE: bad step {step_text!r} in the {name} field"
                )
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _value(first, names, name, low, high), _value(last, names, name, low, high)
            if start > end:
                raise ConfigurationError(f"MEMORY_FORGET_SCHEDULE: range {base!r} runs backwards")
        else:
            start = _value(base, names, name, low, high)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed six-field NCRONTAB expression (UTC)."""

    expression: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        """Parse ``second minute hour day month day-of-week``.

        Raises:
            ConfigurationError: The expression is not six valid fields.
        """
        parts = expression.split()
        if len(parts) != 6:
            raise ConfigurationError(
                f"MEMORY_FORGET_SCHEDULE {expression!r} must have six fields "
                "(second minute hour day month day-of-week), for example '0 30 3 * * *'"
            )
        sets = [_parse_field(text, *spec[:3], spec[3]) for text, spec in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(0 if d == 7 else d for d in sets[5])
        return cls(expression, sets[0], sets[1], sets[2], sets[3], sets[4], weekdays)

    def _day_matches(self, day: datetime) -> bool:
        weekday = (day.weekday() + 1) % 7  # Python: Monday 0; cron: Sunday 0
        return day.month in self.months and day.day in self.days and weekday in self.weekdays

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after ``moment`` that the schedule fires (UTC, whole seconds).

        Raises:
            ConfigurationError: The schedule never fires (for example 30 February).
        """
        start = moment.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
        day = start.replace(hour=0, minute=0, second=0)
        for _ in range(366 * 8):
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        for second in sorted(self.seconds):
                            candidate = day.replace(hour=hour, minute=minute, second=second)
                            if candidate >= start:
                                return candidate
            day += timedelta(days=1)
        raise ConfigurationError(f"MEMORY_FORGET_SCHEDULE {self.expression!r} never fires")


class ScheduledForgetting(Protocol):
    """What the scheduler needs of the memory service."""

    async def run_forgetting(
        self, *, page_size: int = 1000, should_stop: Callable[[], bool] | None = None
    ) -> ForgettingRun: ...

    async def get_checkpoint(self, name: str) -> str | None: ...

    async def set_checkpoint(self, name: str, value: str | None) -> None: ...


_DUE_KEY = "forgetting.next_due"


class ForgettingScheduler:
    """Runs the service's forgetting job on a schedule, in bounded, resumable pages.

    Args:
        service: The memory service.
        schedule: The NCRONTAB expression or a parsed :class:`CronSchedule`.
        page_size: Memories scanned per page (one store call per page).
        now: Source of the current UTC time.
        past_due_seconds: A run starting this much after its due time is logged as past due.
        due_when_unscheduled: A store no run was ever scheduled for is due at once (how a memory
            opened in an application process catches up), instead of at the schedule's next time.
    """

    def __init__(
        self,
        service: ScheduledForgetting,
        schedule: str | CronSchedule,
        *,
        page_size: int = 1000,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        past_due_seconds: float = 60.0,
        due_when_unscheduled: bool = False,
    ) -> None:
        if page_size < 1:
            raise ConfigurationError("the forgetting page size must be at least 1")
        self.service = service
        self.schedule = schedule if isinstance(schedule, CronSchedule) else CronSchedule.parse(schedule)
        self.page_size = page_size
        self.now = now
        self.past_due_seconds = past_due_seconds
        self.due_when_unscheduled = due_when_unscheduled

    async def next_due(self) -> datetime:
        """When the next run is due (the stored bookmark, else now or the schedule's next time)."""
        stored = await self.service.get_checkpoint(_DUE_KEY)
        if stored is not None:
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(stored)
        if self.due_when_unscheduled:
            return self.now()
        return self.schedule.next_after(self.now())

    async def run_job(self, stop: asyncio.Event | None = None) -> ForgettingRun:
        """One forgetting run, page by page, from the saved cursor; stops early when ``stop`` is set."""
        started = time.perf_counter()
        run = await self.service.run_forgetting(
            page_size=self.page_size, should_stop=stop.is_set if stop is not None else None
        )
        telemetry.record_forgetting(run.as_dict(), time.perf_counter() - started, pages=run.pages)
        return run

    async def run(self, stop: asyncio.Event) -> None:
        """Wait for each due time and run the job, until ``stop`` is set."""
        if await self.service.get_checkpoint(FORGET_CHECKPOINT) is not None:
            await self._run_guarded(stop)
        while not stop.is_set():
            due = await self.next_due()
            await self.service.set_checkpoint(_DUE_KEY, due.isoformat())
            while not stop.is_set():
                remaining = (due - self.now()).total_seconds()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=min(remaining, 60.0))
            if stop.is_set():
                return
            late = (self.now() - due).total_seconds()
            if late > self.past_due_seconds:
                logger.warning("forgetting: the run due at %s is past due by %.0f seconds", due.isoformat(), late)
            await self._run_guarded(stop)
            await self.service.set_checkpoint(_DUE_KEY, self.schedule.next_after(max(self.now(), due)).isoformat())

    async def _run_guarded(self, stop: asyncio.Event) -> None:
        try:
            await self.run_job(stop)
        except asyncio.CancelledError:
            raise
        except Exception:  # the schedule keeps going; the next run resumes from the bookmark
            logger.exception("forgetting: the scheduled run failed")
