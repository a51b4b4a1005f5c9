"""A step's deadline (rule T5, docs/tick.md "A step's deadline").

A step that blocks (a reconcile waiting on a dead socket) must not stall every other
run: the driver abandons it at its deadline, counts it as the run's tick failure, and
goes on. The hung steps here wait on an event that the test sets at teardown, so no
thread outlives its test; every tick runs under a bound of its own (`tick_within`), so
a broken deadline fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import msgspec
import pytest

from epochledger import ManualClock
from epochledger.app import Ledger
from epochledger.ledger.codes import TICK_DEADLINE_EXCEEDED
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import RunTickFailed, RunTickRecovered, Status, tag_of
from epochledger.ledger.run import RunState
from epochledger.tick import DEFAULT_STEP_DEADLINE, StepDeadlineExceeded, TickDriver, TickOutcome, TickReport
from tests.helpers.tick_helpers import make_driver

HANG = 0.2  # seconds: the deadline these tests give a step
# The deadline of the tests that show a tick did NOT wait for one: long enough that a
# tick's own work (its commits) on a loaded machine stays well below it.
LONG = 2.0


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: every hung step of the test returns then."""
    gate = threading.Event()
    yield gate
    gate.set()


def queued(ledger: Ledger, *runs: str) -> None:
    with ledger.batch() as b:
        for r in runs:
            b.queue(r, workflow="wf")
            b.start(r, process="worker-1")


def hanging(ledger: Ledger, hung: set[str], gate: threading.Event, calls: list[str] | None = None):  # type: ignore[no-untyped-def]
    """An `advance` step: a hung run blocks until `gate` is set; a healthy one records a
    checkpoint (visible progress)."""
    seen: dict[str, int] = {}

    def advance(s: RunState) -> None:
        if calls is not None:
            calls.append(s.run)
        if s.run in hung:
            gate.wait()
            return
        seen[s.run] = seen.get(s.run, 0) + 1
        ledger.checkpoint(s.run, "step", f"ckpt/{s.run}/{seen[s.run]}")

    return advance


def tick_within(driver: TickDriver, seconds: float) -> tuple[TickReport, float]:
    """One tick in a thread of its own, failing the test if it takes longer than `seconds`."""
    box: list[TickReport] = []
    t0 = time.monotonic()
    worker = threading.Thread(target=lambda: box.append(driver.tick()), daemon=True)
    worker.start()
    worker.join(seconds)
    took = time.monotonic() - t0
    assert box, f"the tick did not return within {seconds}s: a hung step stalled it (rule T5)"
    return box[0], took


def test_T5_a_step_that_hangs_forever_is_abandoned_and_the_other_runs_advance(
    ledger: Ledger, release: threading.Event
) -> None:
    queued(ledger, "a-healthy", "b-hung", "c-healthy")
    # LONG, not HANG: the healthy runs' steps (a commit each) must finish within it on a
    # loaded machine, or they too are abandoned (seen at load 12 with 0.2s).
    driver = make_driver(ledger, [("advance", hanging(ledger, {"b-hung"}, release))], step_deadline=LONG)
    report, took = tick_within(driver, 15)
    assert took < LONG + 5
    assert report.advanced == ("a-healthy", "c-healthy")
    [failure] = report.failures
    assert (failure.run, failure.step, failure.error_class) == (
        "b-hung",
        "advance",
        "epochledger.tick.StepDeadlineExceeded",
    )
    assert failure.error == "step 'advance' did not return within its deadline of 2s: abandoned for this tick (rule T5)"
    assert failure.recorded
    exc = failure.exception
    assert isinstance(exc, StepDeadlineExceeded)
    assert (exc.run, exc.step, exc.deadline, exc.abandoned_by) == ("b-hung", "advance", timedelta(seconds=LONG), None)
    last = ledger.history("b-hung")[-1].event
    assert isinstance(last, RunTickFailed) and last.error_class == "epochledger.tick.StepDeadlineExceeded"
    assert ledger.get_run("a-healthy").checkpoint is not None and ledger.get_run("c-healthy").checkpoint is not None
    assert report.fatal is None and report.skipped == ()


def test_T5_T2_a_run_whose_step_still_hangs_is_charged_without_waiting_and_dead_lettered(
    ledger: Ledger, clock: ManualClock, release: threading.Event
) -> None:
    """The incident shape: a run that always hangs must reach the T2 bound. Its step is
    started once; later ticks charge it at once (no second thread, no second wait)."""
    queued(ledger, "hung", "ok")
    calls: list[str] = []
    driver = make_driver(ledger, [("advance", hanging(ledger, {"hung"}, release, calls))], step_deadline=LONG)
    threads = threading.active_count()
    first, _ = tick_within(driver, 10)
    for _ in range(3):
        clock.advance(120)
        report, took = tick_within(driver, 10)
        assert took < LONG, "a run whose abandoned step still runs is charged without waiting for it"
        assert report.advanced == ("ok",)
        [charged] = report.failures
        exc = charged.exception
        assert isinstance(exc, StepDeadlineExceeded)
        assert (exc.run, exc.step, exc.deadline, exc.abandoned_by) == (
            "hung",
            "advance",
            timedelta(seconds=LONG),
            first.tick,
        ), "the charge names the run, the step, its deadline and the tick that abandoned it"
        assert charged.error.startswith(f"step 'advance', abandoned by tick {first.tick} past its deadline of 2s")
    assert calls.count("hung") == 1, "the hung step is never started again while it runs"
    assert threading.active_count() <= threads + 2  # the one hung step's thread (and the worker)
    assert ledger.get_run("hung").status == Status.FAILED and ledger.get_run("hung").code == TICK_DEADLINE_EXCEEDED
    [dead] = report.dead_letters
    assert dead.run == "hung" and "has not returned yet: not started again (rule T5)" in dead.error
    assert ledger.get_run("ok").status == Status.RUNNING


def test_T5_an_abandoned_step_that_returns_frees_its_run(ledger: Ledger, clock: ManualClock) -> None:
    queued(ledger, "slow")
    gate = threading.Event()
    calls: list[str] = []
    advance = hanging(ledger, {"slow"}, gate, calls)
    ran_in: list[threading.Thread] = []

    def step(s: RunState) -> None:
        ran_in.append(threading.current_thread())
        advance(s)

    driver = make_driver(ledger, [("advance", step)], step_deadline=HANG)
    first, _ = tick_within(driver, 10)
    assert [f.run for f in first.failures] == ["slow"]
    gate.set()  # the dependency answers at last: the abandoned step returns, its result dropped
    deadline = time.monotonic() + 5
    while driver._threads.leaked and time.monotonic() < deadline:
        time.sleep(0.01)
    assert driver._threads.leaked == 0
    ran_in[0].join(5)
    assert not ran_in[0].is_alive(), "the thread of an abandoned step exits once the step returns"
    second, _ = tick_within(driver, 10)
    assert calls == ["slow", "slow"], "the run is driven again once its step returned"
    assert second.recovered == ("slow",)
    assert tag_of(ledger.history("slow")[-1].event) == tag_of(RunTickRecovered)


def test_T5_per_step_deadlines_and_no_deadline_runs_in_the_callers_thread(
    ledger: Ledger, release: threading.Event
) -> None:
    queued(ledger, "r")
    where: dict[str, threading.Thread] = {}

    def unbounded(s: RunState) -> None:
        where["unbounded"] = threading.current_thread()

    def bounded(s: RunState) -> None:
        where["bounded"] = threading.current_thread()
        release.wait()

    driver = make_driver(
        ledger, [("unbounded", unbounded), ("bounded", bounded)], step_deadline=None, step_deadlines={"bounded": HANG}
    )
    assert driver.step_deadlines == {"unbounded": None, "bounded": timedelta(seconds=HANG)}
    report, _ = tick_within(driver, 10)
    assert where["bounded"].daemon and where["bounded"] is not threading.current_thread()
    assert [(f.run, f.step) for f in report.failures] == [("r", "bounded")], "only the step with a deadline is bounded"
    assert make_driver(ledger, [("a", print)]).step_deadlines == {"a": DEFAULT_STEP_DEADLINE}

    caller = make_driver(ledger, [("unbounded", unbounded)], step_deadline=None)
    caller.tick()
    assert where["unbounded"] is threading.current_thread(), (
        "no deadline anywhere: the steps run in the caller's thread"
    )


def test_T5_too_many_abandoned_steps_stop_the_tick_without_charging_healthy_runs(
    ledger: Ledger, release: threading.Event
) -> None:
    queued(ledger, "h1", "h2", "h3", "ok")
    driver = make_driver(
        ledger, [("advance", hanging(ledger, {"h1", "h2", "h3"}, release))], step_deadline=LONG, max_abandoned_steps=2
    )
    report, _ = tick_within(driver, 10)
    assert [f.run for f in report.failures] == ["h1", "h2"]
    assert report.skipped == ("h3", "ok")
    assert report.fatal is not None and report.fatal.stage == "abandoned_steps"
    assert "2 steps abandoned past their deadlines are still running (max_abandoned_steps=2)" in report.fatal.error
    assert [tag_of(r.event) for r in ledger.history("ok")] == ["run.queued", "run.started"], (
        "a skipped run is not charged"
    )
    again, took = tick_within(driver, 10)
    assert took < LONG
    assert [f.run for f in again.failures] == ["h1", "h2"] and again.skipped == ("h3", "ok")
    assert msgspec.json.decode(msgspec.json.encode(again.to_builtins()))["skipped"] == ["h3", "ok"]


def test_T5_SystemExit_in_a_step_with_a_deadline_still_stops_the_scheduler(ledger: Ledger) -> None:
    queued(ledger, "r")

    def leave(s: RunState) -> None:
        raise SystemExit(3)

    driver = make_driver(ledger, [("advance", leave)], step_deadline=5)
    with pytest.raises(SystemExit):
        driver.tick()


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"step_deadline": 0}, "step_deadline"),
        ({"step_deadline": -1}, "step_deadline"),
        ({"step_deadline": float("nan")}, "step_deadline"),
        ({"step_deadline": float("inf")}, "step_deadline"),
        ({"step_deadline": 1.79e308}, "step_deadline"),
        ({"tick_failure_deadline": -1.79e308}, "tick_failure_deadline"),
        ({"tick_failure_deadline": 1.79e308}, "tick_failure_deadline"),
        ({"step_deadline": "5"}, "step_deadline"),
        ({"step_deadline": True}, "step_deadline"),
        ({"step_deadlines": {"nope": 1}}, "step_deadlines"),
        ({"step_deadlines": {"a": 0}}, "step_deadlines['a']"),
        ({"max_abandoned_steps": 0}, "max_abandoned_steps"),
        ({"max_abandoned_steps": 1.5}, "max_abandoned_steps"),
        ({"tick_failure_deadline": None}, "tick_failure_deadline"),
    ],
)
def test_T5_bad_deadline_configuration_is_refused_by_name(
    ledger: Ledger, options: dict[str, object], where: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        make_driver(ledger, [("a", print)], **options)
    assert refused.value.where == where


def test_T5_a_step_without_a_deadline_is_never_abandoned_beside_steps_with_one(
    ledger: Ledger, release: threading.Event
) -> None:
    """The driver wakes at the shortest deadline while a step with none runs on: that
    step is waited for, however long, and the bounded step after it is still abandoned
    at its own deadline."""
    queued(ledger, "a-slow", "b")

    def unbounded(s: RunState) -> None:
        if s.run == "a-slow":
            time.sleep(3 * HANG)

    def bounded(s: RunState) -> None:
        if s.run == "a-slow":
            release.wait()

    driver = make_driver(
        ledger, [("unbounded", unbounded), ("bounded", bounded)], step_deadline=None, step_deadlines={"bounded": HANG}
    )
    report, took = tick_within(driver, 10)
    assert [(f.run, f.step) for f in report.failures] == [("a-slow", "bounded")]
    assert report.advanced == ("b",) and report.fatal is None
    assert took >= 3 * HANG, "the step with no deadline ran to its end"


def test_T5_a_step_is_abandoned_only_past_its_own_deadline_not_at_an_earlier_wake(ledger: Ledger) -> None:
    """The driver wakes at the shortest deadline of all steps (here `quick`'s) and
    then at least once a second; a step with a longer deadline that returns in time
    is not abandoned at those wakes, even within a second of its deadline."""
    queued(ledger, "r")

    def slow(s: RunState) -> None:
        time.sleep(2.5 * HANG)

    driver = make_driver(
        ledger,
        [("quick", lambda s: None), ("slow", slow)],
        step_deadline=None,
        step_deadlines={"quick": 1.25 * HANG, "slow": 6 * HANG},
    )
    report, _ = tick_within(driver, 10)
    assert report.failures == () and report.advanced == ("r",)


def test_T5_the_steps_run_in_a_daemon_worker_named_for_thread_dumps(ledger: Ledger, release: threading.Event) -> None:
    """Ticked from the main thread (a scheduler's loop): the worker is a daemon whatever
    the ticking thread is, so a step that never returns cannot keep the process alive,
    and its name says whose thread it is in a dump (docs/tick.md)."""
    assert threading.current_thread() is threading.main_thread()
    queued(ledger, "hung")
    ran_in: list[threading.Thread] = []

    def hang(s: RunState) -> None:
        ran_in.append(threading.current_thread())
        release.wait()

    report = make_driver(ledger, [("advance", hang)], step_deadline=HANG).tick()
    assert [f.run for f in report.failures] == ["hung"]
    [worker] = ran_in
    assert worker is not threading.main_thread()
    assert (worker.daemon, worker.name) == (True, "epochledger-tick-steps")


DAEMON = r"""
import json, sys, threading
from epochledger import open_ledger
from epochledger.tick import TickDriver

with open_ledger(sys.argv[1], init=True) as lg:
    epoch = lg.boot("scheduler")
    with lg.batch() as b:
        b.queue("hung", workflow="wf")
        b.start("hung", process="worker-1")
    seen = {}

    def hang(run):
        seen["thread"] = threading.current_thread().name
        threading.Event().wait()  # forever

    report = TickDriver(lg, [("advance", hang)], epoch=epoch, step_deadline=0.2).tick()
    print(json.dumps({"thread": seen["thread"], "failed": [f.run for f in report.failures]}), flush=True)
"""


def test_T5_a_step_hung_forever_never_keeps_the_scheduler_process_from_exiting(
    sqlite_url: str, children: list[subprocess.Popen[bytes]]
) -> None:
    """A real OS process ticks once with a step that never returns, from its main
    thread, and then leaves: it exits (the step's thread is a daemon), and the thread
    is named `epochledger-tick-steps` so that a thread dump shows it."""
    proc = subprocess.Popen([sys.executable, "-c", DAEMON, sqlite_url], stdout=subprocess.PIPE)
    children.append(proc)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("the process did not exit: a hung step's thread kept it alive (rule T5)") from None
    assert proc.returncode == 0
    assert json.loads(out) == {"thread": "epochledger-tick-steps", "failed": ["hung"]}


def test_T5_a_reported_tick_names_its_abandoned_steps_as_the_driver_records_its_own(ledger: Ledger) -> None:
    """A scheduler that ticks itself reports a step it abandoned past its own deadline
    (`abandoned_after_s`): recorded with the class and the words the driver records for
    its own (the first test above), never with a reported class."""
    epoch = ledger.boot("loop", epoch="e1")
    with ledger.batch() as b:
        for r in ("h", "ok"):
            b.queue(r, workflow="wf")
            b.start(r, epoch=epoch)
    hung = TickOutcome(run="h", step="advance", abandoned_after_s=LONG)
    report = ledger.tick_report(epoch, [hung, TickOutcome(run="ok")], tick="t1")
    assert report.advanced == ("ok",)
    [failure] = report.failures
    assert (failure.run, failure.step, failure.error_class) == ("h", "advance", "epochledger.tick.StepDeadlineExceeded")
    assert failure.error == "step 'advance' did not return within its deadline of 2s: abandoned for this tick (rule T5)"
    assert isinstance(failure.exception, StepDeadlineExceeded) and failure.exception.deadline == timedelta(seconds=LONG)
    last = ledger.history("h")[-1].event
    assert isinstance(last, RunTickFailed) and (last.error_class, last.error) == (failure.error_class, failure.error)


@pytest.mark.parametrize(
    ("outcome", "where"),
    [
        ({"abandoned_after_s": 30}, "outcomes[0]"),
        ({"step": "s", "error_class": "E", "abandoned_after_s": 30}, "outcomes[0]"),
        ({"step": "s", "error": "why", "abandoned_after_s": 30}, "outcomes[0]"),
        ({"step": "s", "abandoned_after_s": 0}, "outcomes[0].abandoned_after_s"),
        ({"step": "s", "abandoned_after_s": float("nan")}, "outcomes[0].abandoned_after_s"),
        ({"step": "s", "abandoned_after_s": float("inf")}, "outcomes[0].abandoned_after_s"),
        ({"step": "s", "abandoned_after_s": True}, "outcomes[0].abandoned_after_s"),
        ({"step": "s bad", "abandoned_after_s": 30}, "outcomes[0].step"),
    ],
)
def test_T5_a_half_stated_abandoned_step_is_refused_by_name_and_nothing_is_appended(
    ledger: Ledger, outcome: dict[str, object], where: str
) -> None:
    epoch = ledger.boot("loop", epoch="e1")
    with ledger.batch() as b:
        b.queue("ok", workflow="wf")
        b.start("ok", epoch=epoch)
    head = ledger.head()
    with pytest.raises(InvalidInput) as refused:
        ledger.tick_report(epoch, [TickOutcome(run="ok", **outcome)])  # type: ignore[arg-type]
    assert refused.value.where == where
    assert ledger.head() == head
