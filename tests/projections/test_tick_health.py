"""The tick-health view and its CLI (rules T1-T3, docs/tick.md): open streaks with their
age in ledger time and their last error, dead-letters by step and by error class;
`epochledger runs --streaking` and `show RUN`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger import run as run_mod
from epochledger.ledger.errors import IllegalTransition
from epochledger.ledger.events import (
    Recorded,
    RunDeadLettered,
    RunFinished,
    RunPaused,
    RunQueued,
    RunResumed,
    RunStarted,
    RunTickFailed,
    RunTickRecovered,
    run_stream,
)
from epochledger.projections import runs as runs_view
from epochledger.projections import tick_health
from tests.helpers.tick_helpers import make_driver

T0 = datetime(2026, 9, 9, 14, 0, 0, tzinfo=UTC)  # the `clock` fixture's start (tests/conftest.py)


def _fleet(ledger: Ledger, clock: ManualClock) -> None:
    """`doomed` dead-letters in step advance; `stuck` has a streak open 240 s (reconcile,
    TimeoutError); `flaky` failed once and recovered; `fine` never failed."""
    with ledger.batch() as b:
        for r in ("doomed", "stuck", "flaky", "fine"):
            b.queue(r)
            b.start(r)
    state = {"flaky_broken": True}

    def reconcile(s):
        if s.run == "stuck" and clock.now() >= T0 + timedelta(seconds=120):
            raise TimeoutError("engine API timed out")
        if s.run == "flaky" and state["flaky_broken"]:
            raise ConnectionError("reset by peer")

    def advance(s):
        if s.run == "doomed":
            raise ValueError("bad input")

    driver = make_driver(ledger, [("reconcile", reconcile), ("advance", advance)], tick_failure_deadline=300)
    for t in range(7):  # 0, 60, ..., 360 s
        driver.tick(tick_id=f"t{t}")
        state["flaky_broken"] = False
        clock.advance(60)
    # ledger time: the last event of the log is the tick at 360 s


def test_T3_tick_health_view_open_streaks_age_in_ledger_time_and_dead_letters(
    ledger: Ledger, clock: ManualClock
) -> None:
    _fleet(ledger, clock)
    clock.advance(3600)  # the wall clock moves on; the view must not notice
    view = tick_health.fold(ledger.events())
    assert view.now == T0 + timedelta(seconds=360)
    rows = [msgspec.to_builtins(s) for s in tick_health.open_streaks(view)]
    assert [r["run"] for r in rows] == ["stuck"]
    (stuck,) = rows
    assert stuck["age_s"] == 240.0 and stuck["failures"] == 5
    assert (stuck["step"], stuck["error_class"], stuck["error"], stuck["tick"]) == (
        "reconcile",
        "TimeoutError",
        "engine API timed out",
        "t6",
    )
    assert view.by_step == {"advance": 1} and view.by_error_class == {"ValueError": 1}
    (dl,) = view.dead_letters
    assert (dl.run, dl.tick, dl.failures, dl.failing_since, dl.deadline_s) == ("doomed", "t6", 7, T0, 300.0)
    # The view and the runs' folded state agree on which streaks are open.
    states = ledger.runs()
    assert {s.run: s.tick_streak for s in states if s.tick_streak is not None} == view.streaks


# ------------------------------------------------------------- law: one code path
OPS = st.lists(
    st.tuples(
        st.sampled_from(["r1", "r2"]),
        st.sampled_from(["fail_a", "fail_b", "recover", "dead", "pause", "resume", "start", "finish"]),
        st.integers(0, 400),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_T3_view_and_run_state_agree_on_every_prefix(ops: list[tuple[str, str, int]]) -> None:
    """Replaying any prefix, the tick-health view's open streaks equal the runs' own
    `tick_streak`, and folding twice gives the same bytes (no clock in the fold)."""
    at = T0
    states: dict[str, run_mod.RunState | None] = {"r1": None, "r2": None}
    log: list[Recorded] = []
    for r in states:
        for cmd in (RunQueued(at=at, run=r), RunStarted(at=at, run=r)):
            for e in run_mod.decide(cmd, states[r]):
                states[r] = run_mod.evolve(states[r], e)
                log.append(Recorded(len(log) + 1, run_stream(r), states[r].version, e))  # type: ignore[union-attr]
    for i, (r, op, dt) in enumerate(ops):
        at = at + timedelta(seconds=dt)
        cmd = {
            "fail_a": RunTickFailed(at=at, run=r, tick=f"t{i}", step="a", error_class="E1", error="x"),
            "fail_b": RunTickFailed(at=at, run=r, tick=f"t{i}", step="b", error_class="E2"),
            "recover": RunTickRecovered(at=at, run=r, tick=f"t{i}"),
            "dead": RunDeadLettered(
                at=at, run=r, tick=f"t{i}", step="a", error_class="E1", failing_since=T0, failures=1, deadline_s=300
            ),
            "pause": RunPaused(at=at, run=r, kind="operator"),
            "resume": RunResumed(at=at, run=r, by="operator"),
            "start": RunStarted(at=at, run=r),
            "finish": RunFinished(at=at, run=r),
        }[op]
        try:
            events = run_mod.decide(cmd, states[r])
        except IllegalTransition:
            continue
        for e in events:
            states[r] = run_mod.evolve(states[r], e)
            log.append(Recorded(len(log) + 1, run_stream(r), states[r].version, e))  # type: ignore[union-attr]
        view = tick_health.fold(log)
        runs = runs_view.fold(log)
        assert {k: s.tick_streak for k, s in runs.items() if s.tick_streak is not None} == view.streaks
    assert msgspec.json.encode(tick_health.fold(log)) == msgspec.json.encode(tick_health.fold(log))


# ------------------------------------------------------------------------ CLI
@pytest.fixture
def fleet_url(sqlite_url: str, clock: ManualClock) -> str:
    with open_ledger(sqlite_url, clock=clock) as ledger:
        _fleet(ledger, clock)
    return sqlite_url


def test_T3_cli_runs_streaking(fleet_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", fleet_url, "runs", "--streaking", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows] == ["stuck"]
    assert rows[0]["streak"]["age_s"] == 240.0 and rows[0]["streak"]["error_class"] == "TimeoutError"
    assert main(["--store", fleet_url, "runs", "--streaking"]) == 0
    text = capsys.readouterr().out
    assert (
        "stuck" in text and "TimeoutError" in text and "240.0" in text and "doomed" not in text and "flaky" not in text
    )
    assert main(["--store", fleet_url, "runs", "--streaking", "--status", "queued"]) == 0
    assert capsys.readouterr().out.strip() == "(none)"


def test_T2_T3_cli_show_run_tick_health(fleet_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", fleet_url, "show", "stuck", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["tick_health"]["streak"]["failures"] == 5 and rec["tick_health"]["streak"]["age_s"] == 240.0
    assert rec["tick_health"]["dead_letters"] == []
    assert main(["--store", fleet_url, "show", "doomed", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["status"] == "failed" and rec["code"] == "TICK_DEADLINE_EXCEEDED"
    assert rec["tick_health"]["streak"] is None
    assert [d["step"] for d in rec["tick_health"]["dead_letters"]] == ["advance"]
    assert main(["--store", fleet_url, "show", "doomed"]) == 0
    text = capsys.readouterr().out
    assert "dead-letter" in text and "bound 300s" in text and "tick deadline exceeded" in text
    assert main(["--store", fleet_url, "show", "stuck"]) == 0
    assert "tick streak: open since 2026-09-09T14:02:00Z (5 failed ticks, age 240s" in capsys.readouterr().out


def test_T2_T3_cli_tick_health(fleet_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", fleet_url, "tick-health", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["now"] == "2026-09-09T14:06:00Z"
    assert [(r["run"], r["age_s"]) for r in doc["open_streaks"]] == [("stuck", 240.0)]
    assert doc["dead_letters"] == 1
    assert doc["dead_letters_by_step"] == {"advance": 1} and doc["dead_letters_by_error_class"] == {"ValueError": 1}
    assert main(["--store", fleet_url, "tick-health"]) == 0
    text = capsys.readouterr().out
    assert "ledger time: 2026-09-09T14:06:00Z" in text and "by_step advance: 1" in text and "stuck" in text


def test_T2_T3_only_the_streaks_own_events_move_it():
    """An open streak survives every event that keeps the run in the tick (a checkpoint,
    a fenced late report), so the dead-letter deadline is not restarted behind the
    driver's back; it closes on a recovery, a dead-letter, a deletion or a status the
    tick does not drive. Mutation caught: any other event closing (or restarting) the
    streak in `streak_after`."""
    from epochledger.ledger.events import RunCheckpointed, RunFailed, RunFenced, Status
    from epochledger.ledger.run import streak_after

    t = datetime(2026, 9, 9, 14, 0, tzinfo=UTC)
    failed = RunTickFailed(at=t, run="r", tick="t1", step="advance", error_class="E", status=Status.RUNNING)
    streak = streak_after(None, failed)
    assert streak is not None and streak.since == t and streak.failures == 1
    later = t + timedelta(seconds=30)
    for keeps in (
        RunCheckpointed(at=later, run="r", node="n", ref="r", status=Status.RUNNING),
        RunFenced(at=later, run="r", epoch="old", refused="run.finished", why="x", status=Status.RUNNING),
    ):
        assert streak_after(streak, keeps) == streak
    again = streak_after(
        streak, RunTickFailed(at=later, run="r", tick="t2", step="admit", error_class="F", status=Status.RUNNING)
    )
    assert again is not None and (again.since, again.failures, again.tick, again.step) == (t, 2, "t2", "admit")
    for closes in (
        RunTickRecovered(at=later, run="r", tick="t3", status=Status.RUNNING),
        RunFailed(at=later, run="r", code="X", resumable=True, status=Status.FAILED_RESUMABLE),
        RunPaused(at=later, run="r", kind="operator", status=Status.PAUSED_OPERATOR),
    ):
        assert streak_after(streak, closes) is None
