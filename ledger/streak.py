"""A run's tick failure streak, folded from its events (BRIEF T3; docs/tick.md).

The streak is the run of consecutive ticks whose steps raised on this run. It lives in
the ledger, not in the driver's memory, so a restart or a failover cannot reset it: the
next tick folds it back from `run.tick_failed` events like any other state.

One function, `streak_after`, defines how an event moves the streak. `ledger.run.evolve`
and `projections.tick_health` both call it, so the run's state and the tick-health view
cannot disagree about which streaks are open. Pure: no clock.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from ledger.events import RunDeadLettered, RunDeleted, RunEventBase, RunTickFailed, RunTickRecovered
from projections import lifecycle


class TickStreak(msgspec.Struct, frozen=True, kw_only=True):
    since: datetime  # the first failure of the streak: the deadline counts from here (T2)
    failures: int  # consecutive failed ticks
    last_at: datetime  # the latest failure
    tick: str  # the tick of the latest failure
    step: str
    error_class: str
    error: str = ""


def streak_after(streak: TickStreak | None, e: RunEventBase) -> TickStreak | None:
    """The run's streak after event `e` (stamped with its resulting status)."""
    if streak is None and type(e) is not RunTickFailed:
        return None  # the healthy path, most events of every run: nothing to open or close
    if isinstance(e, RunTickFailed):
        return TickStreak(
            since=streak.since if streak is not None else e.at,
            failures=(streak.failures if streak is not None else 0) + 1,
            last_at=e.at,
            tick=e.tick,
            step=e.step,
            error_class=e.error_class,
            error=e.error,
        )
    if isinstance(e, RunTickRecovered | RunDeadLettered | RunDeleted):
        return None
    # A run that leaves the statuses the tick drives (an operator paused it, a step
    # finished or failed it) is no longer ticked: its streak cannot continue, and an open
    # one would show in `runs --streaking` forever. A later resume starts afresh.
    assert e.status is not None
    if not lifecycle.is_active(e.status, e.code):
        return None
    return streak
