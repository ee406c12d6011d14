"""Progress for people: bars with a count, a rate and an ETA on standard error; nothing for programs.

A long command (``import``, ``ingest``, ``forget``, ``eval``, ``bench``) reports through a
:class:`Progress`. :func:`terminal_progress` gives the one people see: it draws on standard error,
only when standard error is a terminal and the command was not asked for JSON, so a pipe, a file, a
CI log or ``--json`` gets the result on standard output and nothing else anywhere. Programs and tests
use :data:`NO_PROGRESS` (or any plain :class:`Progress`), which counts but never writes.

A bar is redrawn in place (a carriage return, no escape sequences) at most every ``interval``
seconds, fitted to the terminal's width; its ETA is the work left at the average rate so far
(:func:`estimate_eta`). Only the standard library is used.

Example::

    progress = terminal_progress(quiet=args.json)
    with progress.bar("importing", total=len(rows), unit="records") as bar:
        for row in rows:
            ...
            bar.advance()
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final, TextIO

__all__ = [
    "NO_PROGRESS",
    "Bar",
    "Progress",
    "TerminalProgress",
    "estimate_eta",
    "format_duration",
    "render_line",
    "terminal_progress",
]


_BAR_WIDTH = 24  # cells of the bar itself, at most
_MIN_BAR_WIDTH = 8


def estimate_eta(done: int, total: int | None, elapsed: float) -> float | None:
    """Seconds left at the average rate so far.

    Args:
        done: Units done.
        total: Units in all (``None``: unknown).
        elapsed: Seconds since the work started.

    Returns:
        ``(total - done) * elapsed / done``; ``0.0`` once ``done`` reaches ``total``; ``None`` when it
        cannot be known (no total, nothing done yet, or no time elapsed).
    """
    if total is None or done <= 0 or elapsed <= 0:
        return None
    if done >= total:
        return 0.0
    return (total - done) * elapsed / done


def format_duration(seconds: float) -> str:
    """``M:SS`` below an hour, ``H:MM:SS`` above (``0:07``, ``12:34``, ``1:02:03``), to the nearest second."""
    whole = max(0, int(seconds + 0.5))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _format_rate(rate: float) -> str:
    return f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


def render_line(
    label: str,
    done: int,
    total: int | None,
    elapsed: float,
    *,
    unit: str = "",
    width: int = 80,
    finished: bool = False,
) -> str:
    """One line of a bar: label, bar, count, share, rate and ETA (or the time taken, once finished).

    ``importing  [#########...............]  3,400/10,000 records  34%  412/s  ETA 0:17``; without a
    total: ``forgetting  120,000 memories  48,211/s  0:02``. The line is at most ``width - 1``
    characters (the label is shortened first, then the bar), so it never wraps.
    """
    rate = done / elapsed if elapsed > 0 else 0.0
    count = f"{done:,}" if total is None else f"{done:>{len(f'{total:,}')},}/{total:,}"
    if unit:
        count += f" {unit}"
    parts = [count]
    if total is not None:
        share = min(done, total) / total if total > 0 else 1.0
        parts.append(f"{int(share * 100):3d}%")
    parts.append(_format_rate(rate))
    if finished:
        parts.append(f"in {format_duration(elapsed)}")
    elif total is not None:
        eta = estimate_eta(done, total, elapsed)
        parts.append(f"ETA {format_duration(eta)}" if eta is not None else "ETA -:--")
    else:
        parts.append(format_duration(elapsed))
    tail = "  ".join(parts)
    room = max(width - 1, 20)
    label = label if len(label) + len(tail) + 2 <= room else label[: max(room - len(tail) - 3, 1)] + "…"
    if total is not None:
        # The widest the tail gets (every count at its total, a long rate and ETA), so the bar keeps its size.
        widest = len(f"{total:,}/{total:,} {unit}") + len("  100%  ") + len("99,999/s") + len("  ETA 0:00:00")
        cells = min(_BAR_WIDTH, room - len(label) - max(widest, len(tail)) - 6)
        if cells >= _MIN_BAR_WIDTH:
            share = min(done, total) / total if total > 0 else 1.0
            filled = int(cells * share)
            return f"{label}  [{'#' * filled}{'.' * (cells - filled)}]  {tail}"[:room]
    return f"{label}  {tail}"[:room]


class Bar:
    """One task's progress, as counted; this base class draws nothing (what :data:`NO_PROGRESS` hands out).

    A context manager: leaving the ``with`` block finishes the bar (or, after an exception, ends its
    line as it stands).

    Args:
        label: What is being done (``"importing"``).
        total: Units in all; ``None`` when unknown (then no share and no ETA).
        unit: What a unit is (``"records"``), shown after the count.
        clock: Seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self, label: str, total: int | None = None, *, unit: str = "", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.finished = False
        self._clock = clock
        self._started = clock()

    @property
    def elapsed(self) -> float:
        """Seconds since the bar was made."""
        return self._clock() - self._started

    @property
    def rate(self) -> float:
        """Units per second so far."""
        elapsed = self.elapsed
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the average rate so far (see :func:`estimate_eta`)."""
        return estimate_eta(self.done, self.total, self.elapsed)

    def update(self, done: int, total: int | None = None) -> None:
        """Set the units done so far (and the total, when it becomes known); a :data:`ProgressCallback`."""
        self.done = done
        if total is not None:
            self.total = total
        self._changed()

    def advance(self, n: int = 1) -> None:
        """Add ``n`` units done."""
        self.update(self.done + n)

    def set_total(self, total: int | None) -> None:
        """Set (or forget, with ``None``) the units in all."""
        self.total = total
        self._changed()

    def clear(self) -> None:
        """Take the bar off the screen until its next update (before writing to a terminal it shares)."""

    def finish(self) -> None:
        """Mark the work done: the final count, rate and time are drawn on their own line."""
        self.finished = True

    def close(self) -> None:
        """End the bar's line as it stands, without claiming the work was done (after an error)."""

    def _changed(self) -> None:
        """Hook: the count or the total changed."""

    def __enter__(self) -> Bar:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.finished:
            return
        if kind is None:
            self.finish()
        else:
            self.close()

    async def __aenter__(self) -> Bar:
        """The same as ``with``, for one ``async with`` beside an asynchronous context."""
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.__exit__(kind, value, trace)


class Progress:
    """Where long work reports its progress; this base class writes nothing (programs, tests).

    :class:`TerminalProgress` is the one that draws.
    """

    #: Whether anything is ever written.
    enabled: bool = False

    def bar(self, label: str, total: int | None = None, *, unit: str = "") -> Bar:
        """A bar for one task (see :class:`Bar`)."""
        return Bar(label, total, unit=unit)

    def note(self, text: str) -> None:
        """A line about what happens next (``"load: 20 searchers for 30 s"``), above any bar."""


#: The reporter that never writes.
NO_PROGRESS: Final[Progress] = Progress()


class _TerminalBar(Bar):
    def __init__(self, owner: TerminalProgress, label: str, total: int | None, *, unit: str) -> None:
        super().__init__(label, total, unit=unit, clock=owner.clock)
        self._owner = owner
        self._drawn_at: float | None = None

    def _line(self) -> str:
        return render_line(
            self.label,
            self.done,
            self.total,
            self.elapsed,
            unit=self.unit,
            width=self._owner.width(),
            finished=self.finished,
        )

    def _changed(self) -> None:
        if self.finished:
            return
        now = self._owner.clock()
        if self._drawn_at is not None and now - self._drawn_at < self._owner.interval:
            return
        self._drawn_at = now
        self._owner.draw(self, self._line())

    def clear(self) -> None:
        self._owner.erase(self)
        self._drawn_at = None  # the next update draws at once

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self._owner.draw(self, self._line(), end=True)

    def close(self) -> None:
        if self.finished:
            return
        self.finished = True
        self._owner.end_line(self)


class TerminalProgress(Progress):
    """Draws bars and notes on a terminal (standard error, for :func:`terminal_progress`).

    Args:
        stream: The terminal.
        interval: Fewest seconds between two redraws of a bar.
        clock: Seconds, monotonic (tests pass a fake one).
        columns: The terminal's width; ``None`` asks the terminal (80 when it cannot tell).
    """

    enabled = True

    def __init__(
        self,
        stream: TextIO,
        *,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        columns: int | None = None,
    ) -> None:
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self._columns = columns
        self._lock = threading.Lock()
        self._current: _TerminalBar | None = None  # the bar whose line the cursor is on
        self._length = 0  # characters of that line

    def bar(self, label: str, total: int | None = None, *, unit: str = "") -> Bar:
        return _TerminalBar(self, label, total, unit=unit)

    def note(self, text: str) -> None:
        with self._lock:
            current = self._current
            self._wipe()
            self._write(text + "\n")
            if current is not None and not current.finished:
                self._put(current, current._line())

    def width(self) -> int:
        """Columns of the terminal."""
        if self._columns is not None:
            return self._columns
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            return 80

    # -- drawing, one writer at a time ------------------------------------------------------------
    def draw(self, bar: _TerminalBar, line: str, *, end: bool = False) -> None:
        """Put ``bar``'s line on the screen (replacing the line the cursor is on); ``end`` leaves it there."""
        with self._lock:
            if self._current is not None and self._current is not bar:
                self._write("\n")  # another bar's line stays as it was
                self._current, self._length = None, 0
            self._put(bar, line)
            if end:
                self._write("\n")
                self._current, self._length = None, 0

    def erase(self, bar: _TerminalBar) -> None:
        """Take ``bar``'s line off the screen (nothing if another line is there)."""
        with self._lock:
            if self._current is bar:
                self._wipe()

    def end_line(self, bar: _TerminalBar) -> None:
        """Leave ``bar``'s line as drawn and move to the next line."""
        with self._lock:
            if self._current is bar:
                self._write("\n")
                self._current, self._length = None, 0

    def _put(self, bar: _TerminalBar, line: str) -> None:
        self._write("\r" + line + " " * max(self._length - len(line), 0))
        self._current, self._length = bar, len(line)

    def _wipe(self) -> None:
        if self._current is not None:
            self._write("\r" + " " * self._length + "\r")
            self._current, self._length = None, 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal never fails the work
            pass


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return False


def terminal_progress(*, quiet: bool = False, stream: TextIO | None = None) -> Progress:
    """The reporter a command gives people: bars on ``stream`` (standard error) when it is a terminal.

    Args:
        quiet: Report nothing (``--json``: the output is for a program).
        stream: Where to draw; default ``sys.stderr``, looked up when called.

    Returns:
        A :class:`TerminalProgress`, or :data:`NO_PROGRESS` when ``quiet`` or ``stream`` is not a terminal
        (a pipe, a file, a CI log).
    """
    stream = sys.stderr if stream is None else stream
    if quiet or not _is_terminal(stream):
        return NO_PROGRESS
    return TerminalProgress(stream)
