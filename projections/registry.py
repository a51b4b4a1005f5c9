"""Every materialized view, in one place. Adding a view is one line here (and its
module, which follows the view protocol in projections/view.py)."""

from __future__ import annotations

from projections import epoch_index, epochs, failures, hosts, runs, tick_health
from projections.view import View

VIEWS: tuple[View, ...] = (
    runs,
    epochs,  # with runs: what the orphan rule reads (projections/orphans.py)
    epoch_index,  # epoch id -> slot: where the write side finds a report's epoch (F1)
    hosts,  # host -> its boots: which host boot ids are over (O7), for end_of
    tick_health,  # small, stored whole (open streaks, dead-letters)
    failures,
)


def by_name(name: str) -> View:
    for v in VIEWS:
        if v.NAME == name:
            return v
    from ledger.errors import InvalidInput

    raise InvalidInput(f"unknown view {name!r} (known: {', '.join(v.NAME for v in VIEWS)})", where="VIEW")
