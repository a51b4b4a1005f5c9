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
import pytest

from epochledger import ManualClock
from epochledger.app import Ledger
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import (
    PassItemFailed,
    PassItemRecovered,
    PassItemRetired,
    RunEventBase,
    pass_stream,
    tag_of,
)
from epochledger.ledger.run import RunState
from epochledger.passes import CrossRunPass, list_items
from tests.helpers.tick_helpers import make_driver


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
    return [r.event for r in lg._store.read_stream(pass_stream("teardowns"))]


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
    head = ledger._store.max_position()
    third = driver.tick()
    assert third.ok and third.appended == 0 and third.items_recovered == () and ledger._store.max_position() == head
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
    head = ledger._store.max_position()
    report = driver.tick()
    assert (
        report.fatal is not None and report.fatal.stage == "list" and "outbox table unreachable" in report.fatal.error
    )
    assert ran == [] and ledger._store.max_position() == head


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


def test_T6_a_pass_with_no_callable_items_or_handle_or_a_bad_ceiling_is_refused_naming_it() -> None:
    """InvalidInput, with `where` and the message, when either callable is missing (not
    only both), and for a ceiling below 1, a bool or a non-number; 1 is the least
    accepted. Mutations caught: `or` -> `and` in each check, `<` -> `<=`, the bound 2."""
    for items, handle in ((None, print), (list, None)):
        with pytest.raises(InvalidInput) as bad:
            CrossRunPass(items=items, handle=handle)  # type: ignore[arg-type]
        assert (bad.value.where, bad.value.message) == ("passes", "a pass needs callable items and handle")
    assert CrossRunPass(items=list, handle=print, max_deliveries=1).max_deliveries == 1
    for ceiling in (0, -1, True, 2.0):
        with pytest.raises(InvalidInput) as bad:
            CrossRunPass(items=list, handle=print, max_deliveries=ceiling)  # type: ignore[arg-type]
        assert (bad.value.where, bad.value.message) == (
            "max_deliveries",
            f"must be a whole number of at least 1, got {ceiling!r}",
        )


def test_T6_an_item_id_that_is_no_name_is_refused_naming_the_pass() -> None:
    spec = CrossRunPass(items=lambda: [("", b"{}")], handle=print)
    with pytest.raises(InvalidInput) as bad:
        list_items(spec, "teardowns")
    assert bad.value.where == "passes['teardowns'] item"


def test_T6_each_item_after_a_healthy_or_a_retired_one_is_still_delivered_and_reported_in_full(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A retired item is skipped, not the end of the pass; a failing item after a
    healthy one is reported, with every field of its ItemFailure, and its event carries
    the driver's actor and the error. Mutations caught: `continue` -> `break` in the
    delivery and in the report loops, a field of the ItemFailure or of the event lost."""
    box = outbox(("t-bad", b"not json"))
    done: list[str] = []
    driver = make_driver(
        ledger,
        [("advance", advance)],
        passes={
            "teardowns": CrossRunPass(
                items=lambda: list(box.items()), handle=teardowns(box, done).handle, max_deliveries=1
            )
        },
        actor="sched-7",
    )
    first = driver.tick()
    assert [(f.item, f.retired) for f in first.item_failures] == [("t-bad", True)]
    box["t-late"] = b"still not json"
    clock.advance(1)
    second = driver.tick()
    (failure,) = second.item_failures
    assert (failure.name, failure.item, failure.error_class, failure.deliveries, failure.retired, failure.recorded) == (
        "teardowns",
        "t-late",
        "msgspec.DecodeError",
        1,
        True,
        True,
    )
    assert isinstance(failure.exception, msgspec.DecodeError) and failure.error == str(failure.exception)
    box.clear()
    box.update({"t-ok": b'{"run": "r1", "worker": "w1"}', "t-third": b"nope"})
    third = driver.tick()
    assert [f.item for f in third.item_failures] == ["t-third"] and done == ["t-ok:w1"]
    events = pass_events(ledger)
    assert {e.actor for e in events} == {"sched-7"}
    late = events[1]
    assert isinstance(late, PassItemRetired) and (late.item, late.error) == ("t-late", failure.error)


def test_T6_a_failure_below_the_ceiling_keeps_its_error_on_the_event(ledger: Ledger) -> None:
    box = outbox(("t1", b"not json"))
    driver = make_driver(ledger, [("advance", advance)], passes={"teardowns": teardowns(box, [])}, actor="sched-7")
    (failure,) = driver.tick().item_failures
    (event,) = pass_events(ledger)
    assert isinstance(event, PassItemFailed) and (event.error, event.actor) == (failure.error, "sched-7")
    assert event.error != ""


class _Contended(Exception):
    """An item's failure whose message is read (by the tick's `describe`, between the
    pass's read and its commit) while another writer records on the same pass stream:
    a real second commit on the real store, `rounds` times."""

    def __init__(self, ledger: Ledger, epoch: str, rounds: int) -> None:
        super().__init__()
        self.ledger, self.epoch, self.rounds = ledger, epoch, rounds

    def __str__(self) -> str:
        if self.rounds > 0:
            self.rounds -= 1
            with self.ledger.batch() as b:
                b.submit(
                    PassItemFailed(
                        at=self.ledger.clock.now(),
                        name="teardowns",
                        item=f"other-{self.rounds}",
                        tick="elsewhere",
                        epoch=self.epoch,
                        error_class="E",
                        deliveries=0,
                    )
                )
        return "contended"


@pytest.mark.parametrize("rounds", [1, 100])
def test_T6_a_pass_that_loses_its_commit_race_decides_again_up_to_five_rounds(ledger: Ledger, rounds: int) -> None:
    """Another writer on the pass's stream between its read and its commit: the pass
    reads again and records its item (one lost round); losing five rounds in a row is
    the tick's fatal "record" error, never a silent loss. Mutations caught: the first
    conflict raised, a conflict ending the retries with nothing recorded, a sixth
    round, no round raising."""
    driver = make_driver(ledger, [("advance", advance)])

    def handle(item: str, payload: bytes) -> None:
        raise _Contended(ledger, driver.epoch or "", rounds)

    driver.passes["teardowns"] = CrossRunPass(items=lambda: [("t1", b"")], handle=handle)
    report = driver.tick()
    items = [e.item for e in pass_events(ledger)]
    if rounds == 1:
        assert report.fatal is None and [(f.item, f.recorded) for f in report.item_failures] == [("t1", True)]
        assert items == ["other-0", "t1"]
    else:
        assert report.fatal is not None and report.fatal.stage == "record"
        assert report.fatal.error_class.endswith("ConflictError") and "t1" not in items and len(items) == 5
