"""The clock port: the one module that reads the wall clock and the monotonic clock
(rule L8; docs/architecture.md, "Time and determinism").

`now()` is an aware UTC datetime; `uptime()` is monotonic seconds since *process start*
(not since this module was imported: a boot instant computed from import time would be
late by however long the process ran before importing us, and a run started in that
gap would look younger than the boot; rule O1).
"""

from __future__ import annotations

import math
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import EARLIEST, LATEST


class Clock(Protocol):
    def now(self) -> datetime: ...

    def uptime(self) -> float: ...


def _process_start_boottime() -> float | None:
    """Seconds after machine boot at which this process started, from /proc (Linux).

    /proc/self/stat field 22 counts clock ticks on the boot-time clock, so it is
    compared against CLOCK_BOOTTIME, not CLOCK_MONOTONIC (they differ by suspend time).
    """
    try:
        fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)  # no file object: read in a fresh fork
        try:
            stat = os.read(fd, 4096).decode()  # one read: the file is well under a page
        finally:
            os.close(fd)
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


_IMPORT_MONOTONIC = time.monotonic()


def _forked() -> None:
    global _IMPORT_MONOTONIC  # the fallback's origin: a forked child starts now
    _IMPORT_MONOTONIC = time.monotonic()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class SystemClock:
    """The real clock. On Linux, uptime is measured from the process's start as the
    kernel recorded it; elsewhere from the first import of this module (documented in
    docs/operations.md as a residual risk). A clock that crosses a fork() (a prefork
    pool's child, an executor's task process) reads its new process's start the first
    time the child asks: the parent's start would date the child's boot back to its
    ancestor's (rule O1)."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._start = _process_start_boottime()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def uptime(self) -> float:
        if os.getpid() != self._pid:  # forked since it was made: this process's own start
            self._pid, self._start = os.getpid(), _process_start_boottime()
        if self._start is not None and hasattr(time, "CLOCK_BOOTTIME"):
            return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - self._start)
        return time.monotonic() - _IMPORT_MONOTONIC


class ManualClock:
    """A clock that moves only when told to: tests, replays and the demo."""

    def __init__(self, now: datetime, uptime: float = 0.0):
        if now.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = now.astimezone(UTC)
        self._uptime = uptime

    def now(self) -> datetime:
        return self._now

    def uptime(self) -> float:
        return self._uptime

    def advance(self, seconds: float) -> None:
        """Both clocks move forward together, as on a healthy host."""
        self._now += timedelta(seconds=seconds)
        self._uptime += seconds

    def step_wall(self, seconds: float) -> None:
        """Only the wall clock moves (NTP step, VM resume); negative steps it back."""
        self._now += timedelta(seconds=seconds)

    def restart(self, after: float = 0.0) -> None:
        """A new process: the wall clock moves on by `after`, uptime restarts at zero."""
        self._now += timedelta(seconds=after)
        self._uptime = 0.0


class CheckedClock:
    """An injected clock as the ledger reads it: every reading is checked, so a clock
    that returns a naive datetime, something else than a datetime, an instant outside
    the range the ledger writes (ledger/events.py), or an uptime that is NaN,
    infinite, negative or not a number is refused with InvalidInput (where="clock")
    at the reading, instead of failing deep in a sweep, a fold or decide. Every other
    attribute is the wrapped clock's (a test's `ledger.clock.advance(60)` still works)."""

    def __init__(self, clock: Clock):
        if not (callable(getattr(clock, "now", None)) and callable(getattr(clock, "uptime", None))):
            raise InvalidInput(f"a clock needs now() and uptime(), got {clock!r}", where="clock")
        self.inner = clock

    def now(self) -> datetime:
        t = self.inner.now()
        if type(t) is datetime and t.tzinfo is UTC and EARLIEST <= t < LATEST:
            return t  # the common case (ManualClock), in one line of checks
        if not isinstance(t, datetime) or t.utcoffset() is None:
            raise InvalidInput(f"now() returned {t!r}: an aware datetime is needed", where="clock")
        if not EARLIEST <= t < LATEST:
            raise InvalidInput(
                f"now() returned {t.isoformat()}, outside {EARLIEST.year} to {LATEST.year} UTC", where="clock"
            )
        return t

    def uptime(self) -> float:
        u = self.inner.uptime()
        if isinstance(u, bool) or not isinstance(u, int | float) or not 0 <= u < math.inf:  # NaN fails too
            raise InvalidInput(f"uptime() returned {u!r}: a finite number of seconds >= 0 is needed", where="clock")
        return u

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def checked_clock(clock: Clock | None) -> Clock:
    """The clock a Ledger reads: the system clock as it is (it cannot return any of the
    refused values), any injected clock behind CheckedClock."""
    if clock is None:
        return SystemClock()
    return clock if isinstance(clock, SystemClock | CheckedClock) else CheckedClock(clock)


def boot_instant(clock: Clock) -> datetime:
    """The wall-clock instant the process started: now - monotonic uptime (O1).
    InvalidInput if that lies outside the range the ledger writes (an uptime longer
    than the time since 1970)."""
    now, uptime = clock.now(), clock.uptime()
    try:
        booted = now - timedelta(seconds=uptime)
    except (OverflowError, ValueError, TypeError):
        booted = None
    if booted is None or not EARLIEST <= booted < LATEST:
        raise InvalidInput(
            f"an uptime of {uptime!r} s at {now!r} puts the boot outside {EARLIEST.year} to {LATEST.year} UTC",
            where="clock",
        )
    return booted


def elapsed() -> float:
    """Monotonic seconds from an arbitrary origin, for bounding waits inside this process
    (a tick step's deadline, rule T5). Real time even when the ledger runs on a
    ManualClock: a hung call hangs in real time. Never recorded in an event."""
    return time.monotonic()
