"""The tick driver (rules T1-T3, docs/tick.md).

Storage matters here (the streak is durable, the group commit conflicts), so the
driver tests run against both stores through the `ledger` fixture, with the manual
clock for the deadline. Each incident-guarding test names the mutation it catches.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.ledger.codes import TICK_DEADLINE_EXCEEDED
from epochledger.ledger.errors import IllegalTransition, InvalidInput, StaleEpoch, StoreError
from epochledger.ledger.events import RunDeadLettered, RunFenced, RunTickFailed, RunTickRecovered, Status, tag_of
from epochledger.ledger.run import RunState, TickStreak, decide
from epochledger.projections import tables
from epochledger.tick import TickDriver, decision
from tests.helpers.tick_helpers import make_driver

DEADLINE = timedelta(minutes=5)
T0 = datetime(2026, 9, 9, 14, 0, 0, tzinfo=UTC)  # the `clock` fixture's start (tests/conftest.py)


def started(ledger: Ledger, *runs: str) -> None:
    with ledger.batch() as b:
        for r in runs:
            b.queue(r, workflow="wf")
            b.start(r, process="worker-1")


def tags(ledger: Ledger, run: str) -> list[str]:
    return [tag_of(r.event) for r in ledger.history(run)]


def checkpointing(ledger: Ledger, poison: set[str], exc: Callable[[str], Exception] = ValueError) -> Callable:
    """An `advance` step: a healthy run records a checkpoint (visible progress), a
    poison run raises."""
    seen: dict[str, int] = {}

    def advance(s):
        if s.run in poison:
            raise exc(f"cannot advance {s.run}")
        seen[s.run] = seen.get(s.run, 0) + 1
        ledger.checkpoint(s.run, "step", f"ckpt/{s.run}/{seen[s.run]}")

    return advance


# ---------------------------------------------------------------- the pure decision
# streak open? | step failed? | wall-clock age of the streak | -> decision   (deadline 300 s)
DECISION_TABLE = [
    (False, False, None, "healthy"),
    (True, False, 10, "recovered"),
    (True, False, 10_000, "recovered"),  # a late success still recovers
    (False, True, None, "failed"),  # opens the streak
    (True, True, 0, "failed"),
    (True, True, 299, "failed"),
    (True, True, 300, "failed"),  # "longer than": exactly the bound is not past it
    (True, True, 300.000001, "dead_letter"),
    (True, True, 86_400, "dead_letter"),
    (True, True, -3600, "failed"),  # the wall clock stepped back: never fire early
]


@pytest.mark.parametrize(("open_", "failed", "age", "expected"), DECISION_TABLE)
def test_T2_T3_decision_table(open_: bool, failed: bool, age: float | None, expected: str) -> None:
    now = T0 + timedelta(hours=1)
    streak = None
    if open_:
        since = now - timedelta(seconds=age or 0)
        streak = TickStreak(since=since, failures=3, last_at=since, tick="t", step="advance", error_class="E")
    assert decision(streak, failed, now, DEADLINE) == expected


# ---------------------------------------------------------------- T1 + T2: poison among healthy
def test_T1_T2_poison_run_dead_letters_after_the_deadline_while_healthy_runs_advance(
    ledger: Ledger, clock: ManualClock
) -> None:
    """One run whose step always raises among healthy runs. The healthy runs advance on
    every tick; the poison run gets tick_failed until its streak is older than the
    deadline, then exactly one dead-letter, not before and not never.

    Mutations caught: `?`-style propagation restored in `run_batch` (the poison run
    sorts first, so the healthy runs stop advancing); `>=` for `>` at the bound (fires at
    exactly 300 s); the streak's start reset on each failure (never fires)."""
    healthy = [f"h-{i}" for i in range(5)]
    started(ledger, "a-poison", *healthy)
    driver = make_driver(
        ledger,
        [("reconcile", lambda s: None), ("advance", checkpointing(ledger, {"a-poison"}))],
        tick_failure_deadline=DEADLINE,
    )
    for i in range(6):  # ticks at 0, 60, ..., 300 s: age never exceeds the bound
        report = driver.tick()
        assert report.fatal is None
        assert [f.run for f in report.failures] == ["a-poison"]
        assert report.failures[0].step == "advance" and report.failures[0].failures == i + 1
        assert report.dead_letters == ()
        assert sorted(report.advanced) == healthy
        assert ledger.get_run("a-poison").status is Status.RUNNING
        clock.advance(60)
    assert tags(ledger, "a-poison").count("run.tick_failed") == 6

    report = driver.tick()  # 360 s after the first failure
    assert [d.run for d in report.dead_letters] == ["a-poison"]
    assert report.dead_letters[0].recorded and report.failures[0].dead_lettered
    state = ledger.get_run("a-poison")
    assert (state.status, state.code) == (Status.FAILED, TICK_DEADLINE_EXCEEDED)
    assert state.tick_streak is None
    last = ledger.history("a-poison")[-1].event
    assert isinstance(last, RunDeadLettered)
    assert (last.step, last.error_class, last.failures, last.deadline_s) == ("advance", "ValueError", 7, 300.0)
    assert last.failing_since == T0
    assert last.reason is not None
    assert last.reason.startswith("tick deadline exceeded")
    assert report.tick in last.reason and "'advance'" in last.reason and "300s" in last.reason

    for _ in range(3):  # the dead run is out of the tick; the others keep going
        clock.advance(60)
        report = driver.tick()
        assert report.ok and sorted(report.advanced) == healthy
    assert tags(ledger, "a-poison").count("run.dead_lettered") == 1
    for h in healthy:  # advanced on every one of the 10 ticks
        assert tags(ledger, h).count("run.checkpointed") == 10
        assert ledger.get_run(h).tick_streak is None


def test_T2_deadline_is_wall_clock_from_the_first_failure_not_a_tick_count(ledger: Ledger, clock: ManualClock) -> None:
    """Irregular ticks: many fast failing ticks stay under the bound; one slow gap
    past it fires on the very next failure.

    Mutation caught: the deadline counted in ticks (e.g. `failures * interval` or
    `failures > 5`): 40 fast ticks would fire, the late single tick would not."""
    started(ledger, "p")
    driver = make_driver(ledger, {"advance": checkpointing(ledger, {"p"})}, tick_failure_deadline=DEADLINE)
    for _ in range(40):  # 40 failures within 200 s
        assert driver.tick().dead_letters == ()
        clock.advance(5)
    clock.advance(100)  # 300 s after the first failure: still not past it
    assert driver.tick().dead_letters == ()
    clock.advance(1)
    assert [d.run for d in driver.tick().dead_letters] == ["p"]
    assert ledger.get_run("p").code == TICK_DEADLINE_EXCEEDED


# ---------------------------------------------------------------- T3: durable and free
def test_T3_transient_error_heals_with_exactly_one_recovery_event(ledger: Ledger, clock: ManualClock) -> None:
    """Two failing ticks, then healthy ones: two tick_failed, one tick_recovered, and
    nothing after it.

    Mutation caught: `streak_after` not closing the streak on run.tick_recovered (every
    later healthy tick appends another recovery)."""
    started(ledger, "flaky")
    broken = {"flaky"}

    def reconcile(s):
        if s.run in broken:
            raise ConnectionError("engine API timed out")

    driver = make_driver(ledger, [("reconcile", reconcile)], tick_failure_deadline=DEADLINE)
    driver.tick()
    clock.advance(30)
    driver.tick()
    assert ledger.get_run("flaky").tick_streak.failures == 2  # type: ignore[union-attr]
    broken.clear()
    clock.advance(30)
    report = driver.tick()
    assert report.recovered == ("flaky",) and report.appended == 1
    for _ in range(4):
        clock.advance(30)
        assert driver.tick().appended == 0
    assert tags(ledger, "flaky") == [
        "run.queued",
        "run.started",
        "run.tick_failed",
        "run.tick_failed",
        "run.tick_recovered",
    ]
    failed = ledger.history("flaky")[2].event
    assert isinstance(failed, RunTickFailed)
    assert (failed.step, failed.error_class, failed.error) == ("reconcile", "ConnectionError", "engine API timed out")
    state = ledger.get_run("flaky")
    assert state.tick_streak is None and state.status is Status.RUNNING


def test_T3_clean_ticks_of_healthy_runs_append_nothing_and_read_no_run_stream(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The healthy path is free: zero events and zero per-run reads by the driver.

    Mutations caught: a heartbeat (tick_recovered for a run without an open streak: the
    `streak is not None` check in `decision` and the `[]` in decide both removed); the
    driver reading each run (`ledger.get_run`) before its steps. The one read per tick
    is of the driver's own slot, to check its epoch is still live (rule F1)."""
    runs = [f"r-{i:02d}" for i in range(20)]
    started(ledger, *runs)
    calls: list[str] = []
    driver = make_driver(ledger, [("reconcile", lambda s: calls.append(s.run)), ("advance", lambda s: None)])
    before = ledger._store.max_position()
    reads: list[str] = []
    real = ledger._store.read_stream
    monkeypatch.setattr(
        ledger._store, "read_stream", lambda stream, after=0: reads.append(stream) or real(stream, after)
    )
    for _ in range(5):
        report = driver.tick()
        assert report.ok and report.appended == 0 and len(report.advanced) == 20
        clock.advance(10)
    assert ledger._store.max_position() == before
    assert [s for s in reads if not s.startswith("process:")] == []
    assert len(reads) <= 5  # one liveness check a tick, whatever the fleet's size
    assert len(calls) == 100


def test_T3_restart_in_the_middle_of_a_streak_does_not_reset_it(store_url: str, clock: ManualClock) -> None:
    """The streak is in the ledger: a new process (new Ledger, new driver, uptime reset)
    continues it and dead-letters at the original deadline.

    Mutation caught: the streak kept in the driver's memory (a dict of first-failure
    instants instead of `state.tick_streak`): after the restart the streak starts over
    and the run is not dead-lettered at 310 s."""
    with open_ledger(store_url, clock=clock) as first:
        started(first, "p")
        d1 = make_driver(first, {"advance": checkpointing(first, {"p"})}, tick_failure_deadline=DEADLINE)
        d1.tick()
        clock.advance(120)
        d1.tick()
    clock.restart(after=120)  # redeploy: 240 s after the first failure
    with open_ledger(store_url, clock=clock) as second:
        d2 = make_driver(second, {"advance": checkpointing(second, {"p"})}, tick_failure_deadline=DEADLINE)
        streak = second.get_run("p").tick_streak
        assert streak is not None and streak.since == T0 and streak.failures == 2
        assert d2.tick().dead_letters == ()
        clock.advance(70)  # 310 s
        report = d2.tick()
        assert [d.run for d in report.dead_letters] == ["p"]
        assert report.dead_letters[0].failing_since == T0 and report.dead_letters[0].failures == 4


# ---------------------------------------------------------------- T2: best-effort cleanup
def test_T2_dead_letter_lands_when_cleanup_raises_and_every_read_of_the_run_fails(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The incident: a run whose own reads always fail, whose cleanup read fails first.
    Here every read of the run's stream raises, inside the steps and inside the cleanup;
    the dead-letter still lands, with the cleanup error in its reason.

    Mutations caught: the cleanup called unguarded (its error escapes `tick()` and the
    dead-letter never lands); the driver reading the run (`get_run`) to dead-letter it."""
    started(ledger, "doomed", "fine")
    real = ledger._store.read_stream

    def read_stream(stream: str, after: int = 0):
        if stream == "run:doomed":
            raise StoreError("read run:doomed: payload store for this run is corrupt")
        return real(stream, after)

    monkeypatch.setattr(ledger._store, "read_stream", read_stream)
    cleaned: list[str] = []

    def cleanup(s):
        cleaned.append(s.run)
        ledger.get_run(s.run)  # tear down its services: needs a read, which fails
        raise AssertionError("unreachable")

    driver = make_driver(
        ledger, [("reconcile", lambda s: ledger.get_run(s.run))], tick_failure_deadline=DEADLINE, on_dead_letter=cleanup
    )
    driver.tick()
    clock.advance(301)
    report = driver.tick()
    assert report.fatal is None and cleaned == ["doomed"]
    (dl,) = report.dead_letters
    assert dl.recorded and dl.cleanup_error is not None and "payload store for this run is corrupt" in dl.cleanup_error
    monkeypatch.setattr(ledger._store, "read_stream", real)
    state = ledger.get_run("doomed")
    assert (state.status, state.code) == (Status.FAILED, TICK_DEADLINE_EXCEEDED)
    assert state.reason is not None
    assert "dead-letter cleanup failed" in state.reason and "StoreError" in state.reason
    last = ledger.history("doomed")[-1].event
    assert isinstance(last, RunDeadLettered) and last.cleanup_error == dl.cleanup_error
    assert ledger.get_run("fine").status is Status.RUNNING


# ---------------------------------------------------------------- T1: tick-global failures
def test_T1_failure_listing_active_runs_is_tick_global_and_appends_nothing(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation caught: the listing's error swallowed as "no active runs" (report.fatal
    None: a scheduler would believe the fleet is idle while the store is down)."""
    started(ledger, "a", "b")
    ran: list[str] = []
    driver = make_driver(ledger, {"advance": lambda s: ran.append(s.run)})
    before = ledger._store.max_position()

    def down(*a, **k):
        raise StoreError("read the log: connection refused")

    monkeypatch.setattr(ledger, "runs", down)
    report = driver.tick()
    assert report.fatal is not None and report.fatal.stage == "list"
    assert (
        report.fatal.error_class == "epochledger.ledger.errors.StoreError"
        and "connection refused" in report.fatal.error
    )
    assert report.failures == () and report.active == 0 and not report.ok
    assert ran == []
    monkeypatch.undo()
    assert ledger._store.max_position() == before


def test_T1_a_step_never_sees_another_runs_exception(ledger: Ledger) -> None:
    """The next run's step starts with no exception being handled: `sys.exc_info()` is
    empty and its own exception chains to nothing. Guard for any refactor that runs the
    rest of the tick from inside an `except` block."""
    started(ledger, "a", "b", "c")
    seen: dict[str, object] = {}

    def advance(s):
        seen[s.run] = sys.exc_info()[1]
        raise KeyError(s.run)

    report = make_driver(ledger, {"advance": advance}).tick()
    assert seen == {"a": None, "b": None, "c": None}
    assert [f.run for f in report.failures] == ["a", "b", "c"]
    for f in report.failures:
        assert f.exception.__context__ is None and f.exception.__cause__ is None


def test_T1_a_conflict_on_one_run_keeps_the_other_runs_events(ledger: Ledger) -> None:
    """A step that writes to its run and then raises moves the run under the driver's
    group commit (conflict on that stream). That run is retried alone against a fresh
    read; every other failing run's event still lands in the same tick.

    Mutation caught: a conflicting group commit reported as unrecorded for every run
    (the other runs' streaks would silently not start)."""
    started(ledger, "a", "b", "c", "d")

    def advance(s):
        if s.run == "b":
            ledger.checkpoint("b", "half", "ckpt/b/half")  # moved, then fails
        raise RuntimeError(f"{s.run} broke")

    report = make_driver(ledger, {"advance": advance}).tick()
    assert report.unrecorded == () and report.appended == 4
    assert all(f.recorded for f in report.failures)
    for r in "abcd":
        assert tags(ledger, r)[-1] == "run.tick_failed"
        assert ledger.get_run(r).tick_streak.failures == 1  # type: ignore[union-attr]


def test_T3_a_run_that_leaves_the_tick_closes_its_streak_without_a_recovery(ledger: Ledger, clock: ManualClock) -> None:
    """A streak belongs to runs the tick drives. If a step finishes the run (or an
    operator pauses it), the streak closes with that event; no recovery is appended
    (it would be illegal from `finished`), and the run leaves `runs --streaking`."""
    started(ledger, "r")
    failing = {"r"}

    def advance(s):
        if s.run in failing:
            raise ValueError("not yet")
        ledger.finish(s.run)

    driver = make_driver(ledger, {"advance": advance})
    driver.tick()
    assert ledger.get_run("r").tick_streak is not None
    failing.clear()
    clock.advance(10)
    report = driver.tick()
    assert report.ok and report.unrecorded == ()
    assert tags(ledger, "r")[-2:] == ["run.tick_failed", "run.finished"]
    assert ledger.get_run("r").tick_streak is None


def test_T1_poison_exception_whose_str_raises_is_still_recorded(ledger: Ledger) -> None:
    class Poison(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    started(ledger, "p")

    def advance(s):
        raise Poison

    report = make_driver(ledger, {"advance": advance}).tick()
    (f,) = report.failures
    assert f.recorded and "str() of the exception raised RuntimeError" in f.error
    assert f.error_class.endswith("Poison")


# ---------------------------------------------------------------- write-side rules
def test_L4_tick_events_are_refused_outside_the_active_statuses(ledger: Ledger, clock: ManualClock) -> None:
    started(ledger, "r")
    ledger.pause("r", "operator")
    for cmd in (
        RunTickFailed(at=clock.now(), run="r", tick="t1", step="advance", error_class="E"),
        RunTickRecovered(at=clock.now(), run="r", tick="t1"),
        RunDeadLettered(
            at=clock.now(),
            run="r",
            tick="t1",
            step="advance",
            error_class="E",
            failing_since=T0,
            failures=3,
            deadline_s=300,
        ),
    ):
        with pytest.raises(IllegalTransition) as e:
            ledger.submit(cmd)
        assert e.value.run == "r" and e.value.status == "paused_operator"
    assert tags(ledger, "r")[-1] == "run.paused"


def test_T3_a_recovery_without_an_open_streak_is_a_no_op(ledger: Ledger, clock: ManualClock) -> None:
    started(ledger, "r")
    state = ledger.get_run("r")
    assert decide(RunTickRecovered(at=clock.now(), run="r", tick="t1"), state) == []


def test_T1_driver_rejects_bad_configuration(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="at least one step"):
        make_driver(ledger, [])
    with pytest.raises(InvalidInput, match="unique"):
        make_driver(ledger, [("a", print), ("a", print)])
    with pytest.raises(InvalidInput, match="steps"):
        make_driver(ledger, [("has space", print)])
    with pytest.raises(InvalidInput, match="tick_failure_deadline"):
        make_driver(ledger, [("a", print)], tick_failure_deadline=0)


def test_T1_a_run_that_keeps_conflicting_is_reported_unrecorded_and_the_others_land(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`b` moves under the group commit (its step writes, then raises), and again under
    its own retry (another writer). It ends in `report.unrecorded` with the conflict;
    `a` and `c` are recorded; nothing is doubled."""
    started(ledger, "a", "b", "c")

    def advance(s):
        if s.run == "b":
            ledger.checkpoint("b", "half", "ckpt/b/half")
        raise RuntimeError(f"{s.run} broke")

    real = ledger._store.append
    seen_group = [False]

    def append(writes, **kw):
        streams = [w.stream for w in writes]
        if len(streams) > 1:
            seen_group[0] = True
        elif streams == ["run:b"] and seen_group[0]:  # b's retry alone: another writer gets in first
            seen_group[0] = False
            ledger.checkpoint("b", "other", "ckpt/b/other", actor="another-writer")
        return real(writes, **kw)

    monkeypatch.setattr(ledger._store, "append", append)
    report = make_driver(ledger, {"advance": advance}).tick()
    monkeypatch.undo()
    assert [(u.run, u.event, type(u.error).__name__) for u in report.unrecorded] == [
        ("b", "run.tick_failed", "ConflictError")
    ]
    assert not report.ok and report.appended == 2
    assert {f.run: f.recorded for f in report.failures} == {"a": True, "b": False, "c": True}
    assert tags(ledger, "a")[-1] == tags(ledger, "c")[-1] == "run.tick_failed"
    assert "run.tick_failed" not in tags(ledger, "b")


def test_T1_report_is_json_ready(ledger: Ledger, clock: ManualClock) -> None:
    import msgspec

    started(ledger, "p", "q")
    driver = make_driver(
        ledger, {"advance": checkpointing(ledger, {"p"})}, tick_failure_deadline=60, on_dead_letter=lambda s: 1 / 0
    )
    driver.tick()
    clock.advance(61)
    report = driver.tick(tick_id="tick-2")
    doc = msgspec.json.decode(msgspec.json.encode(report.to_builtins()))
    assert doc["tick"] == "tick-2" and doc["ok"] is False and doc["advanced"] == ["q"]
    assert doc["dead_letters"][0]["deadline"] == 60.0
    assert doc["dead_letters"][0]["cleanup_error"] == "ZeroDivisionError: division by zero"
    assert "exception" not in doc["failures"][0]


def test_T1_store_failing_under_the_drivers_write_is_tick_global(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps ran and failed, but the store refuses the driver's group commit: that
    is nobody's run's fault. The tick reports `fatal.stage == "record"`, keeps every
    step failure (recorded=False), and nothing is appended.

    Mutation caught: store failures blamed on runs (a StoreError on the commit handled
    like a conflict and, on the retry alone, like any per-run LedgerError: every run
    ends in `unrecorded`, `fatal` stays None)."""
    started(ledger, "a", "b")
    driver = make_driver(ledger, {"advance": checkpointing(ledger, set(), exc=ValueError)})
    before = ledger._store.max_position()

    def append(writes, **kw):
        raise StoreError("append: server closed the connection unexpectedly")

    monkeypatch.setattr(ledger._store, "append", append)
    report = driver.tick()
    monkeypatch.undo()
    # the healthy steps' own checkpoints failed too (same store): those are the runs' failures
    assert report.fatal is not None and report.fatal.stage == "record"
    assert [(f.run, f.recorded) for f in report.failures] == [("a", False), ("b", False)]
    assert report.unrecorded == () and report.appended == 0
    assert ledger._store.max_position() == before


# status x tick event -> resulting status, "no-op" ([]), or REFUSED. "open" = a run of
# that status with an open streak (only the active statuses can have one).
X, NOOP = "REFUSED", "no-op"
# fmt: off
TICK_TABLE = {
    #  from                   tick_failed  recovered(no streak)  recovered(open)  dead_lettered
    "queued":               ("queued",    NOOP,                  "queued",        "failed"),
    "running":              ("running",   NOOP,                  "running",       "failed"),
    "paused_operator":      (X,           X,                     None,            X),
    "paused_waiting_human": (X,           X,                     None,            X),
    "paused_orchestrator":  (X,           X,                     None,            X),
    "failed_resumable":     (X,           X,                     None,            X),
    "failed":               (X,           X,                     None,            X),
    "cancelled":            (X,           X,                     None,            X),
    "finished":             (X,           X,                     None,            X),
}
# fmt: on
_REACH = {
    "queued": [],
    "running": ["start"],
    "paused_operator": ["start", "pause"],
    "paused_waiting_human": ["start", "ask"],
    "paused_orchestrator": ["start", "wait"],
    "failed_resumable": ["start", "fail_r"],
    "failed": ["start", "fail"],
    "cancelled": ["cancel"],
    "finished": ["start", "finish"],
}


def test_L4_tick_table_covers_every_status() -> None:
    assert set(TICK_TABLE) == {s.value for s in Status} == set(_REACH)


@pytest.mark.parametrize("start", list(TICK_TABLE))
def test_L1_L4_tick_events_transition_table(start: str) -> None:
    from epochledger.ledger.events import RunCancelled, RunFailed, RunFinished, RunPaused, RunQueued, RunStarted
    from epochledger.ledger.run import evolve

    t = T0
    steps = {
        "start": RunStarted(at=t, run="r"),
        "pause": RunPaused(at=t, run="r", kind="operator"),
        "ask": RunPaused(at=t, run="r", kind="waiting_human", interaction="i", questions=["q?"]),
        "wait": RunPaused(at=t, run="r", kind="orchestrator"),
        "fail_r": RunFailed(at=t, run="r", code="TIMEOUT", resumable=True),
        "fail": RunFailed(at=t, run="r", code="FAIL_NODE", resumable=False),
        "cancel": RunCancelled(at=t, run="r"),
        "finish": RunFinished(at=t, run="r"),
    }
    state = None
    for cmd in [RunQueued(at=t, run="r"), *(steps[s] for s in _REACH[start])]:
        [e] = decide(cmd, state)
        state = evolve(state, e)
    assert state is not None and state.status == start
    failed = RunTickFailed(at=t, run="r", tick="t1", step="advance", error_class="E")
    commands = [
        (failed, state),
        (RunTickRecovered(at=t, run="r", tick="t2"), state),
        (
            RunTickRecovered(at=t, run="r", tick="t2"),
            evolve(state, decide(failed, state)[0]) if TICK_TABLE[start][0] != X else None,
        ),
        (
            RunDeadLettered(
                at=t, run="r", tick="t3", step="advance", error_class="E", failing_since=t, failures=2, deadline_s=300
            ),
            state,
        ),
    ]
    for (cmd, given_state), expected in zip(commands, TICK_TABLE[start], strict=True):
        if expected is None:
            assert given_state is None  # no open streak outside the active statuses
            continue
        if expected == X:
            with pytest.raises(IllegalTransition) as refused:
                decide(cmd, given_state)
            assert refused.value.status == start and refused.value.attempted == tag_of(cmd)
            continue
        events = decide(cmd, given_state)
        if expected == NOOP:
            assert events == []
            continue
        [e] = events
        after = evolve(given_state, e)
        assert e.status == after.status == expected
        if isinstance(e, RunDeadLettered):
            assert after.code == TICK_DEADLINE_EXCEEDED and after.tick_streak is None
        elif isinstance(e, RunTickFailed):
            assert after.tick_streak is not None and after.tick_streak.failures == 1
        else:
            assert after.tick_streak is None


# ---------------------------------------------------------------- T4 under the tick
def test_T4_an_undecodable_event_in_the_log_does_not_make_every_tick_fatal(ledger: Ledger, store_url: str) -> None:
    """The docs/rules.md's last incident: a payload that no longer decoded aborted every tick
    for every run. The tick's listing reads the materialized runs view, which parks a
    poison event and moves on (T4). Catches: the listing folding the raw log again
    (`Ledger.runs` over `read_all`, which raises DecodeError on the poison)."""
    from tests.helpers.engine_helpers import corrupt

    started(ledger, "a", "b", "p")
    ledger.checkpoint("p", "n", "ckpt/p/0")
    poison = ledger._store.max_position()
    corrupt(store_url, poison, b"\x00 no longer decodes")
    advance = checkpointing(ledger, poison=set())
    report = make_driver(ledger, [("advance", advance)]).tick()
    assert report.fatal is None
    assert {r.run for r in ledger.runs()} == {"a", "b", "p"}
    assert tags(ledger, "a")[-1] == "run.checkpointed" and tags(ledger, "b")[-1] == "run.checkpointed"
    assert [row[1] for row in tables.parked(ledger._store, "runs")] == [poison]  # parked with its position


# ------------------------------------------------------------ F1: the tick is fenced
def test_F1_T2_a_superseded_process_that_keeps_ticking_never_dead_letters_the_new_owners_run(
    ledger: Ledger, clock: ManualClock
) -> None:
    """The incident: a superseded process kept ticking; each of its refused writes
    counted as a tick failure against the run the new epoch now owned, until that run
    was dead-lettered `failed`. The driver is bound to its epoch: its first tick after
    the supersession runs no step and says so, every later one too, and the run the
    new epoch drives is never streaked or dead-lettered by it.
    Mutations caught: the liveness check at the start of `tick()` removed and the tick
    events not carrying the driver's epoch (the stale driver's tick_failed land, the
    streak grows, the run is dead-lettered after the deadline)."""
    old = ledger.boot("worker-1", epoch="old")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="old", process="worker-1")
    ran: list[str] = []

    def advance_old(s: RunState) -> None:
        ran.append(s.run)
        ledger.checkpoint(s.run, "step", "ckpt", epoch="old")  # fenced once superseded

    stale_driver = TickDriver(ledger, {"advance": advance_old}, epoch=old, tick_failure_deadline=DEADLINE)
    assert stale_driver.tick().ok and ran == ["r"]
    new = ledger.boot("worker-1", epoch="new")  # the redeploy; the old process lives on
    ledger.sweep(new)
    ledger.resume("r", "auto")
    ledger.start("r", epoch="new", process="worker-1")
    ran.clear()
    for _ in range(10):  # ten minutes of the old process ticking every minute
        report = stale_driver.tick()
        assert report.fatal is not None and report.fatal.stage == "stale_epoch"
        assert "superseded by epoch new" in report.fatal.error and report.appended == 0
        clock.advance(60)
    assert ran == []  # no step ran on behalf of the stale epoch
    state = ledger.get_run("r")
    assert (state.status, state.tick_streak, state.epoch) == (Status.RUNNING, None, "new")
    assert "run.tick_failed" not in tags(ledger, "r") and "run.dead_lettered" not in tags(ledger, "r")


def test_F1_a_tick_that_finds_its_epoch_superseded_mid_way_stops_and_keeps_its_events_as_evidence(
    ledger: Ledger, clock: ManualClock
) -> None:
    """The slot is redeployed while a tick is running: the step's own write is fenced
    for the driver's epoch, so the tick stops there (later runs' steps do not run), and
    what it had observed (a failure on the first run) is kept as run.fenced evidence,
    not counted as a tick failure. Mutation caught: a StaleEpoch from a step taken as an
    ordinary per-run failure (the tick goes on, tick_failed events land)."""
    old = ledger.boot("worker-1", epoch="old")
    for run in ("a", "b", "c"):
        ledger.queue(run, process="worker-1")
        ledger.start(run, epoch="old", process="worker-1")
    ran: list[str] = []

    def advance(s: RunState) -> None:
        ran.append(s.run)
        if s.run == "a":
            raise ValueError("a keeps failing")
        ledger.boot("worker-1", epoch="new")  # the redeploy lands during the tick
        ledger.checkpoint(s.run, "step", "ckpt", epoch="old")

    report = TickDriver(ledger, {"advance": advance}, epoch=old).tick()
    assert ran == ["a", "b"]
    assert report.fatal is not None and report.fatal.stage == "stale_epoch"
    assert report.fenced == 1 and report.appended == 1
    fenced = ledger.history("a")[-1].event
    assert isinstance(fenced, RunFenced) and fenced.refused == "run.tick_failed" and fenced.epoch == "old"
    assert ledger.get_run("a").tick_streak is None
    assert isinstance(ledger.history("b")[-1].event, RunFenced)  # the step's own checkpoint, kept by the ledger


def test_F1_a_tick_event_of_a_stale_epoch_is_fenced_like_any_report(ledger: Ledger, clock: ManualClock) -> None:
    """The tick's events name the ticking epoch and go through the one fence: refused and
    kept when that epoch is superseded. Mutation caught: tick events left out of
    FENCED_REPORTS."""
    ledger.boot("worker-1", epoch="old")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="old", process="worker-1")
    ledger.boot("worker-1", epoch="new")
    event = RunTickFailed(at=clock.now(), run="r", tick="t1", step="advance", error_class="E", epoch="old")
    with pytest.raises(StaleEpoch) as refused:
        ledger.submit(event)
    assert (refused.value.run, refused.value.attempted, refused.value.why) == (
        "r",
        "run.tick_failed",
        "stale epoch 'old': epoch old of worker-1 was superseded by epoch new",
    )
    assert ledger.get_run("r").tick_streak is None and isinstance(ledger.history("r")[-1].event, RunFenced)


def test_F1_the_driver_needs_an_epoch_some_slot_booted(ledger: Ledger) -> None:
    from epochledger.ledger.errors import UnknownEpoch

    with pytest.raises(UnknownEpoch) as refused:
        TickDriver(ledger, {"advance": print}, epoch="never-booted")
    assert (refused.value.epoch, refused.value.where) == ("never-booted", "epoch")
    with pytest.raises(InvalidInput, match="epoch"):
        TickDriver(ledger, {"advance": print}, epoch=42)  # type: ignore[arg-type]
