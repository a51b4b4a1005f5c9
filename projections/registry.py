"""Every materialized view, in one place. Adding a view is one line here (and its
module, which exports its `VIEW`, a ViewSpec: projections/view.py)."""

from __future__ import annotations

from typing import Any

from epochledger.projections import decisions, epoch_index, epochs, failures, hosts, runs, spans, tick_health
from epochledger.projections.view import ViewSpec

VIEWS: tuple[ViewSpec[Any], ...] = (
    runs.VIEW,
    epochs.VIEW,  # with runs: what the orphan rule reads (projections/orphans.py)
    epoch_index.VIEW,  # epoch id -> slot: where the write side finds a report's epoch (F1)
    hosts.VIEW,  # host -> its boots: which host boot ids are over (O7), for end_of
    tick_health.VIEW,  # small, stored whole (open streaks, dead-letters)
    failures.VIEW,
    spans.VIEW,  # where each run's events fall in ledger time: a window of the incident picture (V2)
    decisions.VIEW,  # which runs a sweep could judge: what a what-if reads (R4)
)


def by_name(name: str) -> ViewSpec[Any]:
    for v in VIEWS:
        if v.NAME == name:
            return v
    from epochledger.ledger.errors import InvalidInput

    raise InvalidInput(f"unknown view {name!r} (known: {', '.join(v.NAME for v in VIEWS)})", where="VIEW")
