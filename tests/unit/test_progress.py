"""Progress for people (``memory_core/tools/progress.py``): on standard error, only on a terminal, never for programs.

A real pseudo-terminal (``pty.openpty``) stands in for the terminal; a fake clock drives the ETA and
the redraw throttle.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator

import pytest

from memory_core.tools.progress import (
    NO_PROGRESS,
    Progress,
    TerminalProgress,
    estimate_eta,
    format_duration,
    render_line,
    terminal_progress,
)

pty = pytest.importorskip("pty")  # POSIX only


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Screen(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal() -> Iterator[tuple[io.TextIOWrapper, int]]:
    """A pseudo-terminal: the writable end as a text stream, and the fd its output is read from."""
    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w", encoding="utf-8")
    try:
        yield stream, master
    finally:
        stream.close()
        os.close(master)


def read_all(fd: int) -> str:
    import select

    chunks = []
    while select.select([fd], [], [], 0.05)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8")


# -- the arithmetic -----------------------------------------------------------------------------------
def test_eta_is_the_work_left_at_the_average_rate() -> None:
    assert estimate_eta(25, 100, 10.0) == pytest.approx(30.0)  # 2.5/s, 75 left
    assert estimate_eta(1, 3, 2.0) == pytest.approx(4.0)
    assert estimate_eta(100, 100, 10.0) == 0.0
    assert estimate_eta(120, 100, 10.0) == 0.0  # overshoot is done, never negative
    assert estimate_eta(0, 100, 10.0) is None  # no rate yet
    assert estimate_eta(10, None, 10.0) is None  # no total
    assert estimate_eta(10, 100, 0.0) is None  # no time has passed


def test_durations_read_as_a_clock() -> None:
    assert format_duration(0) == "0:00"
    assert format_duration(7.4) == "0:07"
    assert format_duration(59.6) == "1:00"
    assert format_duration(754) == "12:34"
    assert format_duration(3723) == "1:02:03"
    assert format_duration(-3) == "0:00"


def test_a_line_shows_count_share_rate_and_eta() -> None:
    line = render_line("importing", 3_400, 10_000, 8.25, unit="records", width=100)
    assert line.startswith("importing  [")
    assert "3,400/10,000 records" in line and " 34%" in line and "412/s" in line
    assert line.endswith("ETA 0:16")  # 6,600 left at 412.1/s
    done = render_line("importing", 10_000, 10_000, 24.1, unit="records", width=100, finished=True)
    assert "100%" in done and done.endswith("in 0:24") and "ETA" not in done
    unknown = render_line("forgetting", 120_000, None, 2.5, unit="memories", width=100)
    assert unknown == "forgetting  120,000 memories  48,000/s  0:03"  # no share, no ETA without a total
    assert "0.5/s" in render_line("turns", 1, 10, 2.0)  # slow work keeps a decimal


def test_a_line_never_wraps_and_the_bar_keeps_its_size() -> None:
    for width in (20, 40, 60, 80, 200):
        for done in (0, 7, 999, 1_000):
            line = render_line("a long label " * 8, done, 1_000, 3.0, unit="things", width=width)
            assert len(line) <= max(width - 1, 20)
    bars = {render_line("x", done, 1_000, 1.0, width=80).index("]") for done in (1, 10, 100, 999, 1_000)}
    assert len(bars) == 1  # the tail's length changes, the bar does not move


# -- where it is written, and when ---------------------------------------------------------------------
def test_nothing_is_written_when_standard_error_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert terminal_progress(stream=io.StringIO()) is NO_PROGRESS
    progress = terminal_progress()  # sys.stderr, captured: not a terminal
    assert progress is NO_PROGRESS and not progress.enabled
    with progress.bar("importing", 10) as bar:
        bar.advance(10)
    progress.note("a note")
    assert capsys.readouterr() == ("", "")
    assert bar.done == 10 and bar.finished  # the no-op bar still counts


def test_quiet_writes_nothing_even_on_a_terminal(terminal: tuple[io.TextIOWrapper, int]) -> None:
    stream, master = terminal
    assert terminal_progress(quiet=True, stream=stream) is NO_PROGRESS
    assert read_all(master) == ""


def test_bars_go_to_standard_error_when_it_is_a_terminal(
    terminal: tuple[io.TextIOWrapper, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, master = terminal
    monkeypatch.setattr(sys, "stderr", stream)
    progress = terminal_progress()
    assert isinstance(progress, TerminalProgress) and progress.stream is stream
    with progress.bar("importing", 3, unit="records") as bar:
        for _ in range(3):
            bar.advance()
    shown = read_all(master)
    assert "\rimporting  [" in shown and "3/3 records" in shown and "100%" in shown
    assert shown.rstrip().endswith("in 0:00")


def test_redraws_are_throttled_and_the_end_is_always_drawn() -> None:
    clock, screen = FakeClock(), Screen()
    progress = TerminalProgress(screen, interval=0.5, clock=clock, columns=100)
    bar = progress.bar("searching", 1_000, unit="queries")
    bar.update(1)  # the first update draws at once
    for done in range(2, 500):
        clock.now += 0.001
        bar.update(done)  # within the interval: nothing drawn
    assert screen.getvalue().count("\r") == 1
    clock.now += 0.5
    bar.update(500)
    assert screen.getvalue().count("\r") == 2 and "500/1,000" in screen.getvalue()
    bar.update(1_000)  # throttled...
    bar.finish()  # ...but the end is drawn, on a line of its own
    last = screen.getvalue().rsplit("\r", 1)[1]
    assert last.startswith("searching  [####") and "1,000/1,000 queries  100%" in last
    assert last.endswith("/s  in 0:01\n")
    bar.update(3)  # a finished bar stays as it ended
    assert screen.getvalue().endswith("\n")


def test_a_note_goes_above_the_bar_and_the_bar_comes_back() -> None:
    clock, screen = FakeClock(), Screen()
    progress = TerminalProgress(screen, clock=clock, columns=100)
    bar = progress.bar("load", 30, unit="s")
    bar.update(3)
    progress.note("searches stopped; draining")
    text = screen.getvalue()
    note_at = text.index("searches stopped; draining\n")
    assert text[:note_at].endswith("\r")  # the bar's line was wiped first
    assert text[note_at:].split("\n", 1)[1].startswith("\rload  [")  # and drawn again below the note


def test_clear_takes_the_bar_off_until_the_next_update() -> None:
    clock, screen = FakeClock(), Screen()
    progress = TerminalProgress(screen, interval=10, clock=clock, columns=60)
    bar = progress.bar("ingesting", 2, unit="turns")
    bar.update(0)
    bar.clear()
    assert screen.getvalue().endswith("\r" + " " * len(render_line("ingesting", 0, 2, 0.0, unit="turns", width=60)) + "\r")
    bar.update(1)  # within the interval, but the bar was off the screen: drawn at once
    assert screen.getvalue().endswith("1/2 turns   50%  0.0/s  ETA -:--")


def test_an_error_ends_the_line_without_claiming_the_work_was_done() -> None:
    clock, screen = FakeClock(), Screen()
    progress = TerminalProgress(screen, clock=clock, columns=100)
    with pytest.raises(RuntimeError), progress.bar("importing", 10) as bar:
        bar.update(4)
        raise RuntimeError("disk full")
    assert screen.getvalue().endswith("4/10   40%  0.0/s  ETA -:--\n")
    assert "in 0:" not in screen.getvalue()


def test_the_no_op_reporter_is_what_programs_get() -> None:
    progress = Progress()
    assert not progress.enabled
    clock = FakeClock()
    from memory_core.tools.progress import Bar

    bar = Bar("x", 100, clock=clock)
    clock.now += 4
    bar.update(40)
    assert bar.rate == pytest.approx(10.0) and bar.eta == pytest.approx(6.0)
    bar.update(50, 200)  # a callback can tell the total when it learns it
    assert bar.total == 200
