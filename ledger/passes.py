"""A cross-run pass's stream as a Decider (rule T6): state -> fold (evolve) -> decide.

A scheduler's passes that are not about one run (draining an outbox of teardowns,
reconciling cancellations) are driven item by item: an item that fails is delivered
again on later ticks, up to a delivery ceiling, then retired with its own diagnostic
(`pass.item_retired`, the outbox's "teardown abandoned"). The failures are events on the
pass's own stream (`pass:<name>`), so deliveries are counted from the log (a restart
does not reset them) and no run's state is touched. `outcome` is the one definition of
what a tick records for an item. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import Literal, assert_never

import msgspec

from epochledger.ledger.events import PassEvent, PassItemFailed, PassItemRecovered, PassItemRetired

Outcome = Literal["healthy", "recovered", "failed", "retired"]


class PassState(msgspec.Struct, frozen=True, kw_only=True):
    """A pass's items with failed deliveries (item -> how many), and its retired items
    (item -> the deliveries it was retired at), as of the stream's `version`."""

    name: str
    failing: dict[str, int] = {}
    retired: dict[str, int] = {}
    version: int = 0


def evolve(state: PassState | None, e: PassEvent) -> PassState:
    state = state if state is not None else PassState(name=e.name)
    failing, retired = state.failing, state.retired
    match e:
        case PassItemFailed():
            failing = {**failing, e.item: e.deliveries}
        case PassItemRecovered():
            failing = {k: v for k, v in failing.items() if k != e.item}
        case PassItemRetired():
            failing = {k: v for k, v in failing.items() if k != e.item}
            retired = {**retired, e.item: e.deliveries}
        case _:
            assert_never(e)
    return PassState(name=state.name, failing=failing, retired=retired, version=state.version + 1)


def fold(events: Iterable[PassEvent], state: PassState | None = None) -> PassState | None:
    for e in events:
        state = evolve(state, e)
    return state


def outcome(state: PassState | None, item: str, failed: bool, ceiling: int) -> Outcome:
    """What a tick records for one item it delivered: nothing for a healthy item, a
    recovery when failures were open, a failure, or the retirement once this failure is
    delivery number `ceiling`. Pure."""
    before = state.failing.get(item, 0) if state is not None else 0
    if not failed:
        return "recovered" if before else "healthy"
    return "retired" if before + 1 >= ceiling else "failed"


def decide(cmd: PassEvent, state: PassState | None) -> list[PassEvent]:
    """A retired item takes no further event (a late or repeated delivery); a recovery
    of an item with no open failure appends nothing; a failure's `deliveries` is
    stamped from the stream (the count is the log's, never the caller's)."""
    cmd = msgspec.structs.replace(cmd, at=cmd.at.astimezone(UTC))
    if state is not None and cmd.item in state.retired:
        return []
    before = state.failing.get(cmd.item, 0) if state is not None else 0
    match cmd:
        case PassItemRecovered():
            return [cmd] if before else []
        case PassItemFailed() | PassItemRetired():
            return [msgspec.structs.replace(cmd, deliveries=before + 1)]
        case _:
            assert_never(cmd)
