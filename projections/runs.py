"""The runs view: every run's current state, folded from the whole log.

A view is `(initial, evolve)` with a stable NAME and a VERSION (STYLE.md). It reuses
ledger.run.evolve, so a live view, a rebuild and a replay cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger import run as run_mod
from ledger.events import Recorded, RunEventBase

NAME = "runs"
VERSION = 1

View = dict[str, run_mod.RunState]


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if isinstance(e, RunEventBase):
        view[e.run] = run_mod.evolve(view.get(e.run), e)  # type: ignore[arg-type]
    return view


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    view = initial() if view is None else view
    for rec in records:
        evolve(view, rec)
    return view
