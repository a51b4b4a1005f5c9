"""A tick driver bound to a live epoch of a scheduler slot, for the tick tests: the
driver ticks on behalf of an epoch (rule F1), which the test boots once per ledger."""

from __future__ import annotations

from typing import Any

from epochledger.app import Ledger
from epochledger.ledger.process import EpochState
from epochledger.tick import Step, TickDriver

SLOT = "scheduler"


def tick_epoch(ledger: Ledger) -> EpochState:
    """The scheduler slot's current epoch, booted on first use (and again if it died)."""
    state = ledger.process(SLOT)
    current = state.current if state is not None else None
    if current is None or not current.live:
        ledger.boot(SLOT)
        state = ledger.process(SLOT)
        assert state is not None and state.current is not None
        current = state.current
    return current


def make_driver(ledger: Ledger, steps: Any, **options: Any) -> TickDriver:
    options.setdefault("epoch", tick_epoch(ledger))
    return TickDriver(ledger, steps, **options)


__all__ = ["SLOT", "Step", "make_driver", "tick_epoch"]
