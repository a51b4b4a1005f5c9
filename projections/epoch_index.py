"""The epoch index: which process slot booted each epoch id (rules O2, F1).

A report may name an epoch without naming its slot (`start(run, epoch=E)` by another
slot's process, a late report from a run's former owner). The write side finds the
slot here, then reads that slot's stream for the epoch's liveness. Keyed by epoch id,
so a lookup reads one row; materialized by projections/engine.py as
`view_epoch_index`.

An epoch id names one boot of one slot. `boot()` generates a fresh id; a caller that
names its own ids must keep them unique across slots. Should two slots ever have booted
the same id, both are listed and a lookup refuses to guess (epochledger/epochs_lookup.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from epochledger.ledger.events import ProcessBooted, Recorded
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "epoch_index"
VERSION = 1

TYPES = frozenset({ProcessBooted})  # what evolve acts on
View = dict[str, list[str]]  # epoch id -> the slots that booted it (normally one)
STATE = list[str]
COLUMNS: tuple[tuple[str, str], ...] = (("process", "text"),)


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if isinstance(e, ProcessBooted):
        slots = view.get(e.epoch, [])
        if e.process not in slots:
            view[e.epoch] = [*slots, e.process]
    return view


def keys(rec: Recorded) -> tuple[str, ...]:
    e = rec.event
    return (e.epoch,) if isinstance(e, ProcessBooted) else ()


def columns(key: str, slots: list[str]) -> tuple[object, ...]:
    return (slots[0],)


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
    TYPES=TYPES,
)
