"""Cross-run passes of the tick (rule T6; docs/tick.md, "Cross-run passes").

A pass is work that is not about one run: draining an outbox of teardowns, reconciling
cancellations. The scheduler gives the driver a `CrossRunPass`: `items()` lists the
work (item id, payload) and `handle(item, payload)` does one. The driver isolates each
item: one that raises is recorded (`pass.item_failed` on the pass's stream) and
delivered again on later ticks, until its `max_deliveries`-th failed delivery retires it
(`pass.item_retired`, never delivered again); one that succeeds after failures closes
them (`pass.item_recovered`); a healthy item appends nothing. No run's state is
touched. Listing the items is tick-fatal, as listing the active runs is: a pass whose
listing raises makes `report.fatal` before any step or item runs, with nothing appended.
What to record for an item is `ledger.passes.outcome`, its one home.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from epochledger.ledger import passes
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import ConflictError, InvalidInput
from epochledger.ledger.events import (
    Name,
    PassEventBase,
    PassItemFailed,
    PassItemRecovered,
    PassItemRetired,
    pass_stream,
)

DEFAULT_MAX_DELIVERIES = 5


@dataclass(frozen=True)
class CrossRunPass:
    """`items()`: the pass's work as (item id, payload) pairs; an id is a Name, unique
    within the pass (a repeated id is delivered once a tick). `handle(item, payload)`:
    does one item; raising is that item's failure. `max_deliveries`: the failed
    deliveries after which an item is retired."""

    items: Callable[[], Iterable[tuple[str, Any]]]
    handle: Callable[[str, Any], object]
    max_deliveries: int = DEFAULT_MAX_DELIVERIES

    def __post_init__(self) -> None:
        if not callable(self.items) or not callable(self.handle):
            raise InvalidInput("a pass needs callable items and handle", where="passes")
        m = self.max_deliveries
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise InvalidInput(f"must be a whole number of at least 1, got {m!r}", where="max_deliveries")


@dataclass(frozen=True)
class ItemFailure:
    """One item of a pass raised in this tick (T6). `retired`: this was its last
    delivery. `recorded`: its event is in the ledger."""

    name: str
    item: str
    error_class: str
    error: str
    deliveries: int
    retired: bool
    recorded: bool
    exception: BaseException = field(repr=False, compare=False)


class ItemFailureDoc(TypedDict):
    """An ItemFailure as JSON: its fields, in order, but the exception."""

    name: str
    item: str
    error_class: str
    error: str
    deliveries: int
    retired: bool
    recorded: bool


def list_items(spec: CrossRunPass, name: str) -> list[tuple[str, Any]]:
    """The pass's items, ids checked, repeated ids dropped. Raises whatever the listing
    raises, or InvalidInput for a bad id: the tick is then fatal (T6, as T1)."""
    seen: dict[str, Any] = {}
    for item, payload in spec.items():
        seen.setdefault(check_value(item, Name, f"passes[{name!r}] item"), payload)
    return list(seen.items())


@dataclass
class _Delivered:
    item: str
    exc: BaseException | None
    outcome: passes.Outcome = "healthy"
    recorded: bool = False
    deliveries: int = 0


def run_pass(
    ledger: Any,
    name: str,
    spec: CrossRunPass,
    items: list[tuple[str, Any]],
    *,
    tick: str,
    epoch: str,
    actor: str,
    describe: Callable[[BaseException], tuple[str, str]],
) -> tuple[list[ItemFailure], list[str], int]:
    """Deliver every item not retired, then record what `passes.outcome` says, in one
    commit on the pass's stream (re-decided against a fresh read on a conflict). Returns
    (failures, recovered item ids, events appended). StaleEpoch and StoreError from the
    recording go to the caller: they belong to no item."""
    stream = pass_stream(name)
    state: passes.PassState | None = ledger.read_state(stream)
    done: list[_Delivered] = []
    for item, payload in items:
        if state is not None and item in state.retired:
            continue
        caught: BaseException | None = None
        try:
            spec.handle(item, payload)
        except Exception as exc:  # noqa: BLE001 - the item's failure, recorded on its pass
            caught = exc
        done.append(_Delivered(item, caught))
    appended = 0
    for attempt in range(5):
        now = ledger.clock.now()
        b = ledger.batch()
        fresh: passes.PassState | None = b.state(stream)
        for d in done:
            d.outcome = passes.outcome(fresh, d.item, d.exc is not None, spec.max_deliveries)
            event = _event(d, name, tick, epoch, actor, spec.max_deliveries, now, describe)
            if event is not None:
                fresh = b.submit(event)
                d.deliveries = fresh.failing.get(d.item, fresh.retired.get(d.item, 0))
        try:
            b.commit()
        except ConflictError:  # another driver delivered this pass meanwhile: decide again
            if attempt == 4:
                raise
            continue
        appended = len(b.recorded)
        break
    failures, recovered = [], []
    for d in done:
        if d.exc is None:
            if d.outcome == "recovered":
                recovered.append(d.item)
            continue
        cls, msg = describe(d.exc)
        failures.append(ItemFailure(name, d.item, cls, msg, d.deliveries, d.outcome == "retired", True, d.exc))
    return failures, recovered, appended


def _event(
    d: _Delivered,
    name: str,
    tick: str,
    epoch: str,
    actor: str,
    ceiling: int,
    at: datetime,
    describe: Callable[[BaseException], tuple[str, str]],
) -> PassEventBase | None:
    common: dict[str, Any] = dict(at=at, name=name, item=d.item, tick=tick, epoch=epoch, actor=actor)
    if d.outcome == "healthy":
        return None
    if d.outcome == "recovered":
        return PassItemRecovered(**common)
    assert d.exc is not None
    cls, msg = describe(d.exc)
    if d.outcome == "failed":
        return PassItemFailed(**common, error_class=cls, error=msg, deliveries=0)  # deliveries: stamped by decide
    return PassItemRetired(**common, error_class=cls, error=msg, deliveries=0, ceiling=ceiling)
