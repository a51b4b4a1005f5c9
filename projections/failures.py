"""The failure-counts view: how many times runs entered each failure status with each
code, from events alone (rules L2, L3: unknown codes and the empty code = UNKNOWN are
counted under their own key, unharmed).

Key: "<status> <code>" (a status has no space, so the first space splits it). A
transition counts when the event's resulting status is a failure status; a deletion
carries the run's status without changing it, so it is not a transition and does not
count. Small (one row per status and code seen), so the engine keeps it whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import msgspec

from epochledger.ledger import lifecycle
from epochledger.ledger.events import EVENT_TYPES, Recorded, RunDeleted, RunEventBase, Status
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "failures"
VERSION = 1


class FailureCount(msgspec.Struct, frozen=True, kw_only=True):
    status: Status
    code: str
    transitions: int
    last_run: str  # the run of the latest such transition
    first_at: datetime
    last_at: datetime


# What evolve acts on: run events, a deletion aside (it changes no status).
TYPES = frozenset(t for t in EVENT_TYPES if issubclass(t, RunEventBase) and t is not RunDeleted)
View = dict[str, FailureCount]
STATE = FailureCount
COLUMNS: tuple[tuple[str, str], ...] = (("status", "text"), ("code", "text"), ("transitions", "int"))


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if not isinstance(e, RunEventBase) or isinstance(e, RunDeleted) or e.status is None:
        return view
    if not lifecycle.is_failure(e.status, e.code):
        return view
    key = f"{e.status} {e.code}"
    old = view.get(key)
    if old is None:
        view[key] = FailureCount(
            status=e.status, code=e.code, transitions=1, last_run=e.run, first_at=e.at, last_at=e.at
        )
    else:
        view[key] = msgspec.structs.replace(old, transitions=old.transitions + 1, last_run=e.run, last_at=e.at)
    return view


def columns(key: str, c: FailureCount) -> tuple[object, ...]:
    return (str(c.status), c.code, c.transitions)


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
    TYPES=TYPES,
)
