"""The spans view: where in ledger time each run's events fall, for a window of the
incident picture (rules V1, V2).

The picture of a window (replay/timeline.py) draws a run's bar when its first segment
starts by the window's end and its last one ends at or after the window's start, or
never ends; the cursor's panel lists every segment and marker near the cursor. Both are
facts of the run's whole history, and ledger time is not log order: each event carries
its writer's clock, so a later position can hold an earlier instant (across runs, and
within one when a clock stepped back). The rule this view keeps, and the windowed read
relies on (V2): a bar's start, its end and each of its markers is the instant of one of
its run's events, so a run whose bar or marker falls in an interval [a, b] of ledger
time has an event at or before b, and either an event at or after a or a bar that never
ends (an open one: its last segment goes on to the end of the history). The view keeps
per run the hull of its events' instants (the earliest and the latest) and whether one
of its bars is open; the read takes the runs whose hull meets the interval, and the open
ones whose earliest instant is at most b. Those are all the runs the picture of the
interval can draw, and a few it will not; it draws from their whole streams, so no run
is cut at the window's edge.

One kind of run is drawn without its stream: a run that only passes through (its bar
open, no earlier bar of it left open, every event before a). Nothing happens to it in
the interval, so in the picture its bar is the one segment it is in now, from before a
to past b, and no other segment, marker or event of it falls there. The view keeps
that segment (its lane, status, code, start and position), so a crowded window (more
such runs than the picture draws as rows, rule V1: they are all folded into their
slot's density bands) draws them from the view, and reads the streams of the others.

Entries by key (one table, `view_spans`):
- `r/<run>`: a run's span (its hull, and what its current bar needs to know whether it
  stays open: `bar_open`, the bar rule the picture draws by; its lane, and its open
  segment's start and position);
- `l/<process>`: a lane of the picture (a slot with process events, whose stream the read
  takes whole, or the slot of a bar or of a sweep);
- `#`: the tally, the picture's summary: the decoded events, the last one's position, the
  earliest and the latest instant of the history.

The `level` column sorts the runs by the length of their hull (a closed hull of length
d has level d.bit_length(), in microseconds; an open run OPEN, a lane LANE, the tally
TALLY), and its index (level, lo, hi) answers an interval with one range per level: a
hull of level L that meets [a, b] starts after a - 2**L, so each range reads the hulls
of its length class near the interval, never the history before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import msgspec

from epochledger.ledger import lifecycle
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessEventBase,
    Recorded,
    RunDeleted,
    RunEventBase,
    RunFenced,
    RunQueued,
    RunRecovered,
    Status,
)
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "spans"
VERSION = 2  # 2: a run keeps its bar's lane and its open segment (a run that passes through)

NO_SLOT = "(no slot)"  # the lane of a run whose first event names no slot
RUN, LANE, TALLY = "r/", "l/", "#"
# The level column of an entry that is no closed hull: an open run, a lane, the tally.
OPEN, LANE_LEVEL, TALLY_LEVEL = -1, -2, -3
LEVELS = 64  # a closed hull's level is below this (microseconds from year 1 to 9999: < 2**59)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def micros(t: datetime) -> int:
    """An instant as whole microseconds since the Unix epoch (the view's columns)."""
    return (t - _EPOCH) // _US


def bar_lane(e: RunEventBase) -> str:
    """The picture's lane rule: a bar is drawn in the lane of the slot its first event
    (its run.queued, for a run queued again) names, else NO_SLOT's."""
    return getattr(e, "process", None) or NO_SLOT


def bar_open(status: Status, code: str) -> bool:
    """The picture's bar rule: a bar goes on while the run holds or waits for a slot, or
    waits for a human; it ends at any other status (a terminal, a failure: a resume
    opens it again)."""
    return lifecycle.is_active(status, code) or lifecycle.is_paused(status, code)


class Entry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One entry of the view (module docstring: which fields each kind uses)."""

    # a run: its hull (microseconds), whether an earlier bar of it was left open (a
    # queue again leaves the bar before it as it was), whether its current bar's last
    # segment is open, and that segment's status and code (a same-status event extends it)
    lo: int = 0
    hi: int = 0
    stuck: bool = False
    open: bool = False
    status: str = ""
    code: str = ""
    # a run: its current bar's lane, and its open segment's start (microseconds) and position
    lane: str = ""
    since: int = 0
    since_position: int = 0
    # a lane: its slot has process events
    slot: bool = False
    # the tally
    events: int = 0
    position: int = 0
    first: int | None = None
    last: int | None = None


View = dict[str, Entry]
STATE = Entry
COLUMNS: tuple[tuple[str, str], ...] = (("level", "int"), ("lo", "int"), ("hi", "int"))
INDEXES = {"span": ("level", "lo", "hi")}


def initial() -> View:
    return {}


def _run(old: Entry | None, e: RunEventBase, at: int, position: int) -> Entry:
    """The run's span after `e`: the picture's bar fold (replay/timeline.py `_run_event`),
    kept to whether each bar ends open, and the open segment."""
    if old is None or isinstance(e, RunQueued):  # a new bar; the one before stays as it was
        stuck = old is not None and (old.stuck or old.open)
        span = Entry(
            lo=at if old is None else min(old.lo, at),
            hi=at if old is None else max(old.hi, at),
            stuck=stuck,
            lane=bar_lane(e),
        )
    else:
        span = Entry(
            lo=min(old.lo, at),
            hi=max(old.hi, at),
            stuck=old.stuck,
            open=old.open,
            status=old.status,
            code=old.code,
            lane=old.lane,
            since=old.since,
            since_position=old.since_position,
        )
    if type(e) is RunFenced or e.status is None:  # a marker only
        return span
    if type(e) is RunDeleted:
        span.open, span.status, span.code, span.since, span.since_position = False, "", "", 0, 0
        return span
    if span.open and span.status == e.status and span.code == e.code:
        return span  # a checkpoint, a tick failure: the same segment
    if bar_open(e.status, e.code):
        span.open, span.status, span.code, span.since, span.since_position = True, str(e.status), e.code, at, position
    else:
        span.open, span.status, span.code, span.since, span.since_position = False, "", "", 0, 0
    return span


def passes_through(entry: Entry, lo: int) -> bool:
    """Whether the run only passes through an interval starting at `lo`: its bar open, no
    earlier bar of it open, every event before lo (module docstring)."""
    return entry.open and not entry.stuck and entry.hi < lo


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    at = micros(e.at)
    old = view.get(TALLY)
    first = min(at, micros(e.booted_at)) if isinstance(e, ProcessBooted) else at  # a boot shows at its booted_at
    tally = Entry(
        events=(old.events if old else 0) + 1,
        position=rec.position,
        first=first if old is None or old.first is None else min(old.first, first),
        last=at if old is None or old.last is None else max(old.last, at),
    )
    lanes: list[tuple[str, bool]] = []
    span: Entry | None = None
    key = ""
    if isinstance(e, RunEventBase):
        key = RUN + e.run
        before = view.get(key)
        span = _run(before, e, at, rec.position)
        if before is None or isinstance(e, RunQueued):
            lanes.append((span.lane, False))
        if type(e) is RunRecovered:
            lanes.append((e.swept_by_process, False))
    elif isinstance(e, ProcessEventBase):
        lanes.append((e.process, True))
    # Computed before it is stored: nothing above changed the view.
    view[TALLY] = tally
    if span is not None:
        view[key] = span
    for process, slot in lanes:
        lane = view.get(LANE + process)
        if lane is None or (slot and not lane.slot):
            view[LANE + process] = Entry(slot=slot)
    return view


def keys(rec: Recorded) -> tuple[str, ...]:
    """The only entries `evolve(view, rec)` reads or changes."""
    e = rec.event
    if isinstance(e, RunEventBase):
        lane = LANE + bar_lane(e)
        if type(e) is RunRecovered:
            return (TALLY, RUN + e.run, lane, LANE + e.swept_by_process)
        return (TALLY, RUN + e.run, lane)
    if isinstance(e, ProcessEventBase):
        return (TALLY, LANE + e.process)
    return (TALLY,)


def level(entry: Entry) -> int:
    """A closed hull's length class: its length in microseconds, bit_length."""
    return OPEN if entry.open or entry.stuck else (entry.hi - entry.lo).bit_length()


def columns(key: str, entry: Entry) -> tuple[object, ...]:
    if key.startswith(RUN):
        return (level(entry), entry.lo, entry.hi)
    return (LANE_LEVEL if key.startswith(LANE) else TALLY_LEVEL, None, None)


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    return fold_records(initial, evolve, records, view)


# The view, as the engine and the registry see it (projections/view.py).
VIEW: ViewSpec[View] = ViewSpec(
    NAME=NAME,
    VERSION=VERSION,
    initial=initial,
    evolve=evolve,
    STATE=STATE,
    COLUMNS=COLUMNS,
    columns=columns,
    keys=keys,
    INDEXES=INDEXES,
)
