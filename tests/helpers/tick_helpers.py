"""A tick driver bound to a live epoch of a scheduler slot, for the tick tests: the
driver ticks on behalf of an epoch (rule F1), which the test boots once per ledger."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
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


# ------------------------------------------------ driver processes' output (JSON lines)
def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a driver process has written whole so far."""
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]


def wait_for(path: Path, what: Callable[[dict[str, Any]], bool], seconds: float = 60) -> dict[str, Any]:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for line in lines(path):
            if what(line):
                return line
        time.sleep(0.05)
    raise AssertionError(f"{path.name}: no such line within {seconds}s: {lines(path)[-3:]}")
