"""The clock port: the one module that reads the wall clock and the monotonic clock
(BRIEF L8, STYLE.md "Time and determinism").

`now()` is an aware UTC datetime; `uptime()` is monotonic seconds since *process start*
(not since this module was imported: a boot instant computed from import time would be
late by however long the process ran before importing us, and a run started in that
gap would look younger than the boot; BRIEF O1).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    def uptime(self) -> float: ...


def _process_start_boottime() -> float | None:
    """Seconds after machine boot at which this process started, from /proc (Linux).

    /proc/self/stat field 22 counts clock ticks on the boot-time clock, so it is
    compared against CLOCK_BOOTTIME, not CLOCK_MONOTONIC (they differ by suspend time).
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode()
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


_IMPORT_MONOTONIC = time.monotonic()


class SystemClock:
    """The real clock. On Linux, uptime is measured from the process's start as the
    kernel recorded it; elsewhere from the first import of this module (documented in
    docs/operations.md as a residual risk)."""

    def __init__(self) -> None:
        self._start = _process_start_boottime()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def uptime(self) -> float:
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


def boot_instant(clock: Clock) -> datetime:
    """The wall-clock instant the process started: now - monotonic uptime (BRIEF O1)."""
    return clock.now() - timedelta(seconds=clock.uptime())
