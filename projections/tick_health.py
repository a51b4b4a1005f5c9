"""The tick-health view: open failure streaks and dead-letters (rules T1-T3, docs/tick.md).

A pure fold of the log (NAME, VERSION, initial, evolve: the view protocol). Which streaks are
open is decided by `ledger.run.streak_after`, the same function `ledger.run.evolve`
uses, so this view and a run's state cannot disagree. Ages are in ledger time: the
view's `now` is the `at` of the last event it has seen, never the wall clock, so a
replay of any prefix gives the same view.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from epochledger.ledger.events import Recorded, RunDeadLettered, RunEventBase
from epochledger.ledger.run import TickStreak, streak_after
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "tick_health"
VERSION = 1


class DeadLetterRow(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    at: datetime
    position: int
    tick: str
    step: str
    error_class: str
    error: str
    failing_since: datetime
    failures: int
    deadline_s: float
    cleanup_error: str | None = None


class View(msgspec.Struct, kw_only=True):
    now: datetime | None = None  # ledger time: `at` of the last event seen
    streaks: dict[str, TickStreak] = msgspec.field(default_factory=dict)  # open, by run
    dead_letters: list[DeadLetterRow] = msgspec.field(default_factory=list)
    by_step: dict[str, int] = msgspec.field(default_factory=dict)  # dead-letters by step
    by_error_class: dict[str, int] = msgspec.field(default_factory=dict)  # ... by error class


def initial() -> View:
    return View()


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    view.now = e.at
    if not isinstance(e, RunEventBase):
        return view
    streak = streak_after(view.streaks.get(e.run), e)
    if streak is None:
        view.streaks.pop(e.run, None)
    else:
        view.streaks[e.run] = streak
    if isinstance(e, RunDeadLettered):
        view.dead_letters.append(
            DeadLetterRow(
                run=e.run,
                at=e.at,
                position=rec.position,
                tick=e.tick,
                step=e.step,
                error_class=e.error_class,
                error=e.error,
                failing_since=e.failing_since,
                failures=e.failures,
                deadline_s=e.deadline_s,
                cleanup_error=e.cleanup_error,
            )
        )
        view.by_step[e.step] = view.by_step.get(e.step, 0) + 1
        view.by_error_class[e.error_class] = view.by_error_class.get(e.error_class, 0) + 1
    return view


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    return fold_records(initial, evolve, records, view)


# The view, as the engine and the registry see it (projections/view.py).
VIEW: ViewSpec[View] = ViewSpec(NAME=NAME, VERSION=VERSION, initial=initial, evolve=evolve)  # stored whole


# ------------------------------------------------------------------ queries
# The fields of these results are in alphabetical order: encoded as JSON they give the
# bytes the dicts they replaced gave (tests/cli/test_cli_golden.py, rule C1).
class OpenStreak(msgspec.Struct, frozen=True, kw_only=True):
    """A run's open tick streak (ledger.run.TickStreak) with its age in ledger time."""

    age_s: float | None  # seconds; negative if the writer's clock ran behind the log: shown as is, never clamped
    error: str
    error_class: str
    failures: int
    last_at: datetime
    run: str
    since: datetime
    step: str
    tick: str


class RunTickHealth(msgspec.Struct, frozen=True, kw_only=True):
    """One run's tick health (`show`): its open streak and its dead-letters, and the
    view's `now` (the `at` of the last event it has seen)."""

    dead_letters: list[DeadLetterRow]
    ledger_now: datetime | None
    streak: OpenStreak | None


def open_streak(view: View, run: str) -> OpenStreak | None:
    """One open streak with its age in ledger time, None if the run has none."""
    s = view.streaks.get(run)
    if s is None:
        return None
    age = (view.now - s.since).total_seconds() if view.now is not None else None
    return OpenStreak(
        age_s=age,
        error=s.error,
        error_class=s.error_class,
        failures=s.failures,
        last_at=s.last_at,
        run=run,
        since=s.since,
        step=s.step,
        tick=s.tick,
    )


def run_health(view: View, run: str) -> RunTickHealth:
    return RunTickHealth(
        dead_letters=[d for d in view.dead_letters if d.run == run], ledger_now=view.now, streak=open_streak(view, run)
    )


def open_streaks(view: View) -> list[OpenStreak]:
    """Open streaks, oldest first."""
    return [
        s
        for s in (open_streak(view, run) for run in sorted(view.streaks, key=lambda k: (view.streaks[k].since, k)))
        if s is not None
    ]


def summary(view: View) -> dict[str, Any]:
    return {
        "now": view.now,
        "open_streaks": open_streaks(view),
        "dead_letters": len(view.dead_letters),
        "dead_letters_by_step": dict(sorted(view.by_step.items())),
        "dead_letters_by_error_class": dict(sorted(view.by_error_class.items())),
    }
