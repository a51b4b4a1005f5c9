"""The runs view: every run's current state, folded from the whole log.

A view is `(initial, evolve)` with a stable NAME and a VERSION (projections/view.py). It reuses
ledger.run.evolve, so a live view, a rebuild and a replay cannot disagree.

Materialized by projections/engine.py as table `view_runs`: one row per run (deleted
runs included, flagged), the queryable COLUMNS beside the full RunState.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger import run as run_mod
from ledger.events import EVENT_TYPES, Recorded, RunEventBase
from projections import fold_records
from projections.view import ViewSpec

NAME = "runs"
VERSION = 4  # 2: slot_epoch, fenced, fenced_end (rules O3, F1, F2); 3: labels, parent (rule I2); 4: INDEXES

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
)
# One index serves both fleet-size reads (docs/benchmarks.md, "Fleet size"): `runs
# --status S` (status, then k: the rows come in key order, no sort) and the sweep's
# orphan candidates (tables.orphan_candidates), whose filter reads only status, deleted,
# process and epoch: decided from the index, the table is read for the candidates
# alone. Without it both scanned the whole table (0.77 s of a sweep among 100k runs).
INDEXES = {"status": ("status", "k", "deleted", "process", "epoch")}


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


def columns(key: str, s: run_mod.RunState) -> tuple[object, ...]:
    return (str(s.status), s.code, s.workflow, s.process, s.epoch, s.updated_at.isoformat(), int(s.deleted))


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    return fold_records(initial, evolve, records, view)


# The view, as the engine and the registry see it (projections/view.py).
VIEW: ViewSpec[View] = ViewSpec(NAME=NAME, VERSION=VERSION, initial=initial, evolve=evolve, STATE=STATE, COLUMNS=COLUMNS,
                                columns=columns, keys=keys, KEY=KEY, INDEXES=INDEXES, TYPES=TYPES)  # fmt: skip
