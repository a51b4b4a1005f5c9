"""The decisions view: which runs a sweep could judge, for the what-if (rule R4).

A what-if (replay/whatif.py) judges, at each decision point the record holds (a boot,
or the first record of a sweep: its `process.sweep_skipped`, its `run.recovered`
events), the runs of the orphans view as it stood just before. Every built-in policy,
like the recorded rule, gives a verdict only for a run the orphan rule can judge at all
(`lifecycle.can_be_orphaned`: executing), from that run's own state and beats and the
slots' facts; and the differences it lists are of runs so judged, or recovered by a
recorded sweep. So the runs whose streams the what-if must read are those executing at
some decision point, and those some sweep recovered; the rest of the log enters its
result only by its positions (where a sweep group ends, the position a sweep judged,
the last event) and, with `at`, by the first event stamped after it.

The rule this view keeps: a decision point is an event `could_decide` (a boot, a sweep's
skip, a recovery: every decision point is one, and a few more); the view counts them
(the tally's `points`). A run's executing stretch runs from the event that leaves it
executing (its stamped status: rule L1) to the next that does not; the run keeps the
count at the start of its open stretch (`since`), and `judged` once a stretch ended
with a point inside it, or a sweep recovered it. So a run a sweep could judge is judged,
or open with `since` below the count now. A stretch is read from the events' stamped
statuses, deletion aside: a superset of the stretches the orphans view holds (a deleted
run, or a run's events before its first queue, are never judged), which only adds runs
whose every verdict is none. A run that is neither open nor judged has no entry: the
table holds the running runs and those some point judged, not the fleet.

Entries by key (one table, `view_decisions`):
- `r/<run>`: a run a sweep could judge, or one executing now (`since`, `judged`);
- `p/<process>`: a slot with process events, whose stream the what-if reads whole;
- `b/<n>`: the latest instant (microseconds since the Unix epoch) of the events at
  positions n * BLOCK to n * BLOCK + BLOCK - 1: the first event stamped after an
  instant is in the first block whose latest instant, or an earlier block's, is after
  it (the what-if's `at` cut, in log order);
- `#`: the tally (`points`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from epochledger.ledger import lifecycle
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessEventBase,
    ProcessSweepSkipped,
    Recorded,
    RunEventBase,
    RunFenced,
    RunImported,
    RunRecovered,
)
from epochledger.projections import fold_records
from epochledger.projections.spans import micros
from epochledger.projections.view import ViewSpec

NAME = "decisions"
VERSION = 1

RUN, SLOT, BLOCK_KEY, TALLY = "r/", "p/", "b/", "#"
BLOCK = 4096  # positions per block of the `at` cut


class Entry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One entry of the view (module docstring: which fields each kind uses)."""

    since: int | None = None  # a run: the points counted when its open stretch began
    judged: bool = False  # a run: a point fell in one of its ended stretches, or a sweep recovered it
    points: int = 0  # the tally: the events that could be decision points
    latest: int | None = None  # a block: its events' latest instant


View = dict[str, Entry]
STATE = Entry
# Evidence and bookkeeping: run.evolve keeps the status they are stamped with
# (tests/replay/test_whatif_reads.py holds this to evolve, event class by class).
_MARKERS = (RunFenced, RunImported)


def sweep_records(e: Any) -> str | None:
    """The epoch whose sweep wrote this event, if it is a sweep's record (its
    `run.recovered` events, its `process.sweep_skipped`): the what-if's decision points
    are the first record of each sweep, and the boots whose sweep wrote none."""
    if type(e) is RunRecovered:
        return e.swept_by
    if type(e) is ProcessSweepSkipped:
        return e.epoch
    return None


def could_decide(e: Any) -> bool:
    """Whether the what-if may judge at this event: every decision point is a boot or
    a sweep's record (replay/whatif.py)."""
    return type(e) is ProcessBooted or sweep_records(e) is not None


def judged(entry: Entry, points: int) -> bool:
    """Whether a sweep could have judged this run, with `points` counted: the view's
    rule (module docstring)."""
    return entry.judged or (entry.since is not None and entry.since < points)


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    tally = view.get(TALLY)
    points = tally.points if tally is not None else 0
    at = micros(e.at)
    block_key = BLOCK_KEY + str(rec.position // BLOCK)
    block = view.get(block_key)
    latest = at if block is None or block.latest is None else max(block.latest, at)
    key, run = "", None
    if isinstance(e, RunEventBase):
        key = RUN + e.run
        old = view.get(key)
        since, seen = (old.since, old.judged) if old is not None else (None, False)
        seen = seen or type(e) is RunRecovered
        if type(e) not in _MARKERS and e.status is not None:  # a marker changes no status (rule L1)
            if lifecycle.can_be_orphaned(e.status, e.code):
                since = points if since is None else since
            elif since is not None:
                seen, since = seen or since < points, None
        run = Entry(since=since, judged=seen) if since is not None or seen else None
    # Computed before it is stored: nothing above changed the view.
    if could_decide(e):
        view[TALLY] = Entry(points=points + 1)
    view[block_key] = Entry(latest=latest)
    if key:
        if run is None:
            view.pop(key, None)
        else:
            view[key] = run
    elif isinstance(e, ProcessEventBase) and SLOT + e.process not in view:
        view[SLOT + e.process] = Entry()
    return view


def keys(rec: Recorded) -> tuple[str, ...]:
    """The only entries `evolve(view, rec)` reads or changes."""
    e = rec.event
    block = BLOCK_KEY + str(rec.position // BLOCK)
    if isinstance(e, RunEventBase):
        return (TALLY, block, RUN + e.run)
    if isinstance(e, ProcessEventBase):
        return (TALLY, block, SLOT + e.process)
    return (TALLY, block)


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    return fold_records(initial, evolve, records, view)


# The view, as the engine and the registry see it (projections/view.py).
VIEW: ViewSpec[View] = ViewSpec(NAME=NAME, VERSION=VERSION, initial=initial, evolve=evolve, STATE=STATE, keys=keys)
