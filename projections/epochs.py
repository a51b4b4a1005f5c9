"""The epochs view: every process slot's boot epochs (rules O1, O2), keyed by slot.

Together with the runs view it is everything the orphan rule reads:
`projections.orphans.View(processes=<epochs view>, runs=<runs view>)` gives the same
verdicts as a fold of the log (tests/projections/test_views_registered.py). Materialized by
projections/engine.py as table `view_epochs`, one row per process slot; its `retired`
column (the slot retired with its last epoch, rule O8) is what the live reads filter
on (Ledger.orphan_view), so they read the live fleet, not every slot ever booted.
"""

from __future__ import annotations

from collections.abc import Iterable

from epochledger.ledger import process as process_mod
from epochledger.ledger.events import EVENT_TYPES, ProcessEventBase, Recorded
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "epochs"
VERSION = 2  # 2: an epoch keeps its machine id (rule O10); the `retired` column (rule O8)

KEY = "process"  # keys(rec) is (rec.event.process,) for every event of TYPES: the engine reads it in C
TYPES = frozenset(t for t in EVENT_TYPES if issubclass(t, ProcessEventBase))  # what evolve acts on
View = dict[str, process_mod.ProcessState]
STATE = process_mod.ProcessState
COLUMNS: tuple[tuple[str, str], ...] = (
    ("current_epoch", "text"),
    ("live", "int"),
    ("epochs", "int"),
    ("retired", "int"),
)


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if isinstance(e, ProcessEventBase):
        view[e.process] = process_mod.evolve(view.get(e.process), e)
    return view


def keys(rec: Recorded) -> tuple[str, ...]:
    e = rec.event
    return (e.process,) if isinstance(e, ProcessEventBase) else ()


def columns(key: str, p: process_mod.ProcessState) -> tuple[object, ...]:
    current = p.current
    return (current.epoch if current else None, int(bool(current and current.live)), len(p), int(p.retired))


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
    TYPES=TYPES,
)
