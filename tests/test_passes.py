"""Cross-run passes (rule T6, docs/tick.md "Cross-run passes"): an outbox of teardowns,
a reconcile of cancellations, isolated per item, retried up to a delivery ceiling, then
retired with their own diagnostic; a run's state is never touched; the listing stays
tick-fatal.

The incident: an outbox item whose payload no longer decoded (written by an older
release) could only abort the whole tick, or be caught by hand around it and retried
forever, silently. On SQLite and the real PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import msgspec

from epochledger import ManualClock
from epochledger.app import Ledger
from epochledger.passes import CrossRunPass
from ledger.events import PassItemFailed, PassItemRecovered, PassItemRetired, RunEventBase, pass_stream, tag_of
from ledger.run import RunState
from tests.tick_helpers import make_driver


class Teardown(msgspec.Struct, frozen=True):
    run: str
    worker: str


def outbox(*items: tuple[str, bytes]) -> dict[str, bytes]:
    return dict(items)


def teardowns(box: dict[str, bytes], done: list[str]) -> CrossRunPass:
    def items() -> list[tuple[str, bytes]]:
        return list(box.items())

    def handle(item: str, payload: bytes) -> None:
        order = msgspec.json.decode(payload, type=Teardown)  # an old release's payload raises here
        done.append(f"{item}:{order.worker}")
        box.pop(item)

    return CrossRunPass(items=items, handle=handle, max_deliveries=3)


def pass_events(lg: Ledger) -> list[Any]:
    return [r.event for r in lg.store.read_stream(pass_stream("teardowns"))]


def queued(lg: Ledger) -> None:
    with lg.batch() as b:
        b.queue("r1", workflow="wf")
        b.start("r1", process="worker-1")


def advance(s: RunState) -> None:
    return None


def test_T6_an_item_whose_payload_no_longer_decodes_is_retried_to_the_ceiling_then_retired(
    ledger: Ledger, clock: ManualClock
) -> None:
    """The bad item fails each tick (pass.item_failed, deliveries 1, 2), the good one
    is handled on the first tick, and the run's steps go on; the third failure is the
    ceiling: pass.item_retired (the teardown abandoned), and later ticks never deliver
    it again. No run's stream gains an event from any of it. Mutations caught: an
    item's exception escaping the pass (the tick fails), deliveries not counted from
    the stream (never retired), a retired item delivered again."""
    queued(ledger)
    box = outbox(("t-bad", b'{"run": "r0", "wrkr": 1}'), ("t-ok", b'{"run": "r1", "worker": "w1"}'))
    done: list[str] = []
    driver = make_driver(ledger, [("advance", advance)], passes={"teardowns": teardowns(box, done)})
    run_head = ledger.get_run("r1").version
    reports = []
    for _ in range(5):
        reports.append(driver.tick())
        clock.advance(1)
    assert done == ["t-ok:w1"] and all(r.fatal is None and r.advanced == ("r1",) for r in reports)
    assert [[(f.item, f.deliveries, f.retired) for f in r.item_failures] for r in reports] == [
        [("t-bad", 1, False)],
        [("t-bad", 2, False)],
        [("t-bad", 3, True)],
        [],
        [],
    ]
    events = pass_events(ledger)
    assert [tag_of(e) for e in events] == ["pass.item_failed", "pass.item_failed", "pass.item_retired"]
    retired = events[-1]
    assert isinstance(retired, PassItemRetired)
    assert (retired.item, retired.deliveries, retired.ceiling, retired.epoch) == ("t-bad", 3, 3, driver.epoch)
    assert (retired.error_class, retired.error) == ("msgspec.ValidationError", "Object missing required field `worker`")
    assert ledger.get_run("r1").version == run_head and ledger.get_run("r1").tick_streak is None
    assert not any(isinstance(r.event, RunEventBase) and r.event.run != "r1" for r in ledger.events())


def test_T6_success_after_a_failure_closes_it_and_a_healthy_item_appends_nothing(ledger: Ledger) -> None:
    """An item that fails once, then succeeds, gets one pass.item_recovered; a tick of
    healthy items appends nothing (as T3). Mutation caught: a recovery written for
    every handled item."""
    box = outbox(("t1", b"not json"))
    done: list[str] = []
    driver = make_driver(ledger, [("advance", advance)], passes={"teardowns": teardowns(box, done)})
    first = driver.tick()
    assert [(f.item, f.deliveries) for f in first.item_failures] == [("t1", 1)] and not first.ok
    box["t1"] = b'{"run": "r1", "worker": "w9"}'  # the outbox's writer mended it
    second = driver.tick()
    assert second.ok and second.items_recovered == ("teardowns/t1",) and done == ["t1:w9"]
    box["t2"] = b'{"run": "r2", "worker": "w2"}'
    head = ledger.store.max_position()
    third = driver.tick()
    assert third.ok and third.appended == 0 and third.items_recovered == () and ledger.store.max_position() == head
    assert [type(e) for e in pass_events(ledger)] == [PassItemFailed, PassItemRecovered]


def test_T6_T1_a_pass_whose_listing_raises_is_tick_fatal_and_appends_nothing(ledger: Ledger) -> None:
    """Listing the items is read with the runs' listing, before any step: if it raises,
    the tick is fatal (stage "list"), no step and no item ran, nothing was appended."""
    queued(ledger)
    ran: list[str] = []

    def broken() -> list[tuple[str, bytes]]:
        raise ConnectionError("outbox table unreachable")

    def step(s: RunState) -> None:
        ran.append(s.run)

    driver = make_driver(
        ledger, [("advance", step)], passes={"teardowns": CrossRunPass(items=broken, handle=lambda i, p: None)}
    )
    head = ledger.store.max_position()
    report = driver.tick()
    assert (
        report.fatal is not None and report.fatal.stage == "list" and "outbox table unreachable" in report.fatal.error
    )
    assert ran == [] and ledger.store.max_position() == head


def test_T6_T7_an_exclusive_pass_runs_only_while_its_epoch_holds_the_role(ledger: Ledger) -> None:
    """A pass bound to a role (`exclusive=`) is neither listed nor delivered by a driver
    whose epoch does not hold it."""
    box = outbox(("t1", b'{"run": "r1", "worker": "w1"}'))
    done: list[str] = []
    holder = ledger.boot("driver-a")
    ledger.acquire_role("teardown", holder)
    driver = make_driver(
        ledger, [("advance", advance)], passes={"teardowns": teardowns(box, done)}, exclusive={"teardowns": "teardown"}
    )
    report = driver.tick()
    assert report.steps_skipped == ("teardowns",) and done == [] and "t1" in box


def test_T6_F1_an_items_event_for_an_epoch_that_ended_meanwhile_is_refused(ledger: Ledger) -> None:
    """The pass's events carry the ticking epoch and are fenced like any report: an
    item whose handling redeploys the slot (a later boot supersedes the driver's epoch)
    and then fails leaves the pass stream empty, and the tick reports `stale_epoch`.
    Mutation caught: `_decide_pass` without its liveness check."""
    box = outbox(("t1", b"not json"))
    driver = make_driver(ledger, [("advance", advance)])

    def redeploy_then_fail(item: str, payload: bytes) -> None:
        ledger.boot(driver.process or "")
        raise RuntimeError("teardown interrupted by the redeploy")

    driver.passes["teardowns"] = CrossRunPass(items=lambda: list(box.items()), handle=redeploy_then_fail)
    report = driver.tick()
    assert report.fatal is not None and report.fatal.stage == "stale_epoch"
    assert pass_events(ledger) == []
