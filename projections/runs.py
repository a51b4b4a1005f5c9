"""The runs view: every run's current state, folded from the whole log.

A view is `(initial, evolve)` with a stable NAME and a VERSION (projections/view.py). It reuses
ledger.run.evolve, so a live view, a rebuild and a replay cannot disagree.

Materialized by projections/engine.py as table `view_runs`: one row per run (deleted
runs included, flagged), the queryable COLUMNS beside the full RunState.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from epochledger.ledger import lifecycle
from epochledger.ledger import run as run_mod
from epochledger.ledger.events import EVENT_TYPES, Recorded, RunEventBase
from epochledger.projections import fold_records
from epochledger.projections.view import Counts, ViewSpec

NAME = "runs"
# 2: slot_epoch, fenced, fenced_end (rules O3, F1, F2); 3: labels, parent (rule I2); 4: INDEXES;
# 5: a column per lifecycle predicate (rule P4); 6: cancelled_from, a cancel clears the
# interaction (rules L2, L7), queued_process (L1), attempt; 7: source, source_status (rule I3);
# 8: a parent column and its index (a run's children, `runs --parent`: rule I2); 9: the
# launch index (a slot's running runs); 10: COUNTS, the fleet's counts kept beside the
# table (Reports.fleet)
VERSION = 10

KEY = "run"  # keys(rec) is (rec.event.run,) for every event of TYPES: the engine reads it in C
TYPES = frozenset(t for t in EVENT_TYPES if issubclass(t, RunEventBase))  # what evolve acts on
View = dict[str, run_mod.RunState]
STATE = run_mod.RunState
COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "text"),
    ("code", "text"),
    ("workflow", "text"),
    ("process", "text"),
    ("epoch", "text"),
    ("updated_at", "text"),
    ("deleted", "int"),
    ("parent", "text"),  # the run this one re-executes (rule I2): a run's children are selected by it
    # Each lifecycle predicate's value (0/1), computed by predicates_of, the one
    # evaluation: `runs --where P` selects on these columns (read_runs `predicates`), so
    # a filter cannot re-derive a predicate from status and code alone (rule P4).
    *((name, "int") for name in lifecycle.PREDICATES),
)
# One index serves both fleet-size reads (docs/benchmarks.md, "Fleet size"): `runs
# --status S` (status, then k: the rows come in key order, no sort) and the sweep's
# orphan candidates (tables.orphan_candidates), whose filter reads only status, deleted,
# process and epoch: decided from the index, the table is read for the candidates
# alone. Without it both scanned the whole table (0.77 s of a sweep among 100k runs).
# The parent index: a run's children (`show`, GET /v1/runs/{run}) are an index range,
# not a scan of the fleet.
# The launch index: a page of one slot's running runs (`runs --where
# counts_against_launch_limit --process S`, the fleet page's link from a slot's count) is
# a range of it in key order, not a scan of the table (a million states).
INDEXES = {
    "status": ("status", "k", "deleted", "process", "epoch"),
    "parent": ("parent", "k"),
    "launch": ("counts_against_launch_limit", "deleted", "process", "k"),
}


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if isinstance(e, RunEventBase):
        # Computed before it is stored: an event evolve refuses leaves the view as it was.
        view[e.run] = run_mod.evolve(view.get(e.run), e)
    return view


def keys(rec: Recorded) -> tuple[str, ...]:
    """The only entries of the view that `evolve(view, rec)` reads or changes: lets the
    engine keep a bounded cache of runs instead of the whole fleet (docs/projections.md)."""
    e = rec.event
    return (e.run,) if isinstance(e, RunEventBase) else ()


def predicates_of(s: Any) -> dict[str, bool]:
    """Every lifecycle predicate of a run (a RunState, or a shape with its `status`,
    `code` and `fenced_end`): the one evaluation that the view's columns, `show`, the
    JSON row and every filter read (rule P4). `fenced_end` binds can_auto_resume (F2)."""
    return _predicates(str(s.status), s.code, s.fenced_end is not None)


@functools.lru_cache(maxsize=4096)
def _predicates(status: str, code: str, fenced_end: bool) -> dict[str, bool]:
    # A function of these three alone: computed once per distinct triple, not per run.
    # Callers must not change the dict (run_record copies it).
    return lifecycle.predicates(status, code, fenced_end=fenced_end)


@functools.lru_cache(maxsize=4096)
def _predicate_columns(status: str, code: str, fenced_end: bool) -> tuple[int, ...]:
    # The values of the predicate columns, in COLUMNS' order, from the one evaluation
    # (cached per triple: every event of a rebuild writes a row).
    preds = _predicates(status, code, fenced_end)
    return tuple(int(preds[name]) for name in lifecycle.PREDICATES)


def columns(key: str, s: run_mod.RunState) -> tuple[object, ...]:
    status = str(s.status)
    return (
        status,
        s.code,
        s.workflow,
        s.process,
        s.epoch,
        s.updated_at.isoformat(),
        int(s.deleted),
        s.parent,
        *_predicate_columns(status, s.code, s.fenced_end is not None),
    )


# The fleet's counts, kept beside the table (projections/view.py `Counts`): live runs by
# status, and those that hold a launch slot (the stored `counts_against_launch_limit`,
# the predicate's one evaluation, rule P4) by their slot ("" for none). Only running
# runs carry their slot, so the counts stay a few rows a status however many slots a
# fleet has ever had (rule O8: one slot per worker).
COUNT_COLUMNS = (("status", "text"), ("launch", "int"), ("slot", "text"))


def count_key(deleted: int, status: str, launch: int, process: str | None) -> tuple[str, int, str] | None:
    """A row's group in the fleet's counts, from its stored columns (None: a deleted run,
    not counted)."""
    if deleted:
        return None
    return (status, launch, (process or "") if launch else "")


def fleet_of(counts: Iterable[tuple[Any, ...]]) -> tuple[dict[str, int], dict[str, int]]:
    """(live runs by status, runs holding a launch slot by slot), each sorted, from the
    kept counts' rows (status, launch, slot, n)."""
    by_status: dict[str, int] = {}
    by_slot: dict[str, int] = {}
    for status, launch, slot, n in counts:
        if n:
            by_status[status] = by_status.get(status, 0) + n
            if launch:
                by_slot[slot] = by_slot.get(slot, 0) + n
    return dict(sorted(by_status.items())), dict(sorted(by_slot.items()))


COUNTS = Counts(
    COLUMNS=COUNT_COLUMNS, reads=("deleted", "status", "counts_against_launch_limit", "process"), key=count_key
)


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
    KEY=KEY,
    INDEXES=INDEXES,
    COUNTS=COUNTS,
    TYPES=TYPES,
)
