"""The ledger's own stream as a Decider: settings the rules read (rule O9).

A setting is an event on one stream (`ledger:settings`), folded like any other, so the
orphan rule reads it from the log (projections/orphans.py) and a replay of any prefix
knows it as it was then: no configuration outside the log, no clock. One setting so
far: the default slot, whose boots judge the running runs recorded with neither an
epoch nor a process (rule O9; `epochledger init --default-slot NAME`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import assert_never

import msgspec

from epochledger.ledger.events import LedgerDefaultSlot, LedgerEvent


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The ledger's settings as of its stream's `version`."""

    default_slot: str | None = None  # rule O9
    version: int = 0


def evolve(state: Settings | None, e: LedgerEvent) -> Settings:
    state = state if state is not None else Settings()
    match e:
        case LedgerDefaultSlot():
            return msgspec.structs.replace(state, default_slot=e.slot, version=state.version + 1)
        case _:
            assert_never(e)


def fold(events: Iterable[LedgerEvent], state: Settings | None = None) -> Settings | None:
    for e in events:
        state = evolve(state, e)
    return state


def decide(cmd: LedgerEvent, state: Settings | None) -> list[LedgerEvent]:
    """A setting that already holds appends nothing (a retried `init`); any other value
    is a new fact. Nothing to refuse: every well-formed value is a setting."""
    cmd = msgspec.structs.replace(cmd, at=cmd.at.astimezone(UTC))
    match cmd:
        case LedgerDefaultSlot():
            current = state.default_slot if state is not None else None
            return [] if cmd.slot == current else [cmd]
        case _:
            assert_never(cmd)
