"""The startup sweep (rule O3 step-back guard, O5), on SQLite and PostgreSQL.

Tests that guard an incident name, in their docstring, the mutation they catch; each
was applied by hand, seen to fail, and restored (issue 4).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.ledger.codes import PROCESS_ORPHANED
from epochledger.ledger.errors import EpochNotLive, InvalidInput, StoreError, SweepFailed, UnknownSlot
from epochledger.ledger.events import (
    ProcessSweepFailed,
    ProcessSweepSkipped,
    RunRecovered,
    Status,
    process_stream,
)
from epochledger.projections import orphans, tables
from tests.conftest import T0
from tests.projections.test_orphans import MARGIN_TABLE


def _running(ledger, run, process, epoch=None):
    with ledger.batch() as b:
        b.queue(run, process=process)
        b.start(run, epoch=epoch, process=process)


def _recoveries(ledger, run):
    return [r.event for r in ledger.history(run) if isinstance(r.event, RunRecovered)]


def _previous_day(ledger, clock):
    """worker-1 epoch w1 owns `owned`; `unowned` was started by worker-1 without an
    epoch; worker-2's `healthy` belongs to a live epoch. Then worker-1 dies."""
    ledger.boot("worker-1", epoch="w1")
    ledger.boot("worker-2", epoch="x1")
    _running(ledger, "owned", "worker-1", "w1")
    _running(ledger, "unowned", "worker-1")
    _running(ledger, "healthy", "worker-2", "x1")
    clock.advance(600)
    clock.restart(30)  # worker-1's new process starts 30 s later


# ------------------------------------------------------------ wiring at boot
def test_O5_startup_recovers_orphans_before_any_query(ledger, clock):
    """The 16-hour incident: the sweep ran only when someone opened the runs page.
    Here the log itself, read raw, holds the recoveries right after startup.
    Catches: the sweep wired lazily (startup only boots; runs()/orphans() sweep)."""
    _previous_day(ledger, clock)
    clock.advance(2)
    epoch, report = ledger.startup("worker-1", epoch="w2")
    raw = [r.event for r in ledger._store.read_all() if isinstance(r.event, RunRecovered)]
    assert sorted(e.run for e in raw) == ["owned", "unowned"]
    assert all(e.swept_by == "w2" and e.actor == "w2" for e in raw)
    assert report.outcome == "swept"


def test_O5_reads_never_recover(ledger, clock):
    """Reading (runs, orphans, epochs, the CLI's runs --orphaned) appends nothing: the
    verdict is visible, the recovery is the sweep's alone. Catches: a lazy sweep on
    first query."""
    _previous_day(ledger, clock)
    ledger.boot("worker-1", epoch="w2")
    before = ledger._store.max_position()
    assert [s.run for s, _ in ledger.orphans()] == ["owned", "unowned"]
    ledger.runs()
    ledger.epochs()
    assert main(["--store", ledger.url, "runs", "--orphaned", "--json"]) == 0
    assert ledger._store.max_position() == before


def test_O5_recovery_is_one_event_that_explains_itself(ledger, clock):
    _previous_day(ledger, clock)
    _, report = ledger.startup("worker-1", epoch="w2")
    owned = ledger.get_run("owned")
    assert (owned.status, owned.code, owned.actor) == (Status.FAILED_RESUMABLE, PROCESS_ORPHANED, "w2")
    [e] = _recoveries(ledger, "owned")
    assert (e.rule, e.owner_epoch, e.superseded_by, e.swept_by_process) == (orphans.SUPERSEDED, "w1", "w2", "worker-1")
    assert "superseded by epoch w2" in e.reason
    [u] = _recoveries(ledger, "unowned")
    booted = ledger.process("worker-1").current.booted_at
    assert (u.rule, u.booted_at, u.cutoff, u.margin) == (orphans.FALLBACK, booted, booted - timedelta(seconds=1), 1.0)
    assert u.started_at == T0 and u.started_at < u.cutoff
    assert ledger.get_run("healthy").status is Status.RUNNING
    assert [v.run for v in report.recovered] == ["owned", "unowned"]


# --------------------------------------------------------- incidents at boot
def test_O2_healthy_nightly_88_minutes_in_is_never_touched_by_a_sweep(ledger, clock):
    """The 98.7% nightly: started after the current boot of its slot, 88 minutes in;
    another slot reboots and sweeps. Untouched, while a 1-minute-old orphan of a
    redeployed slot is recovered. Catches: the superseded check replaced by a flat
    age check (a 30-minute threshold takes the nightly and misses the young orphan)."""
    ledger.boot("worker-1", epoch="w1")
    ledger.boot("worker-2", epoch="x1")
    clock.advance(60)
    _running(ledger, "nightly", "worker-1", "w1")
    clock.advance(87 * 60)
    _running(ledger, "young", "worker-2", "x1")
    clock.advance(60)
    clock.restart(3)
    _, report = ledger.startup("worker-2", epoch="x2")
    assert [v.run for v in report.recovered] == ["young"]
    assert ledger.get_run("nightly").status is Status.RUNNING
    assert _recoveries(ledger, "nightly") == []


def test_O2_deploy_in_the_middle_of_a_run_recovers_it_at_the_next_boot(ledger):
    """Run started at 02:00, redeploy at 02:20: recovered by the 02:20 boot's sweep,
    whether the run names its epoch (O2) or not (O3). Catches: a floor on the cutoff
    ("at least 30 minutes old"), which misses both forever."""
    clock = ManualClock(T0.replace(hour=1, minute=0), uptime=5)
    lg = open_ledger(ledger.url, clock=clock)
    lg.boot("worker-1", epoch="w1")
    clock.advance(3600 - 5)
    _running(lg, "owned-0200", "worker-1", "w1")
    _running(lg, "unowned-0200", "worker-1")
    clock.advance(20 * 60)
    clock.restart(1)
    _, report = lg.startup("worker-1", epoch="w2")
    assert {v.run: v.rule for v in report.recovered} == {
        "owned-0200": orphans.SUPERSEDED,
        "unowned-0200": orphans.FALLBACK,
    }
    lg.close()


# ------------------------------------------------------- O3 step-back guard
def test_O3_clock_step_back_sweeps_nothing(ledger, clock):
    """The clock steps back after boot; the live process then starts an unowned run,
    stamped before its own boot instant. The sweep must not take it: the fallback
    recovers nothing and the ledger says why. O2 recoveries are clock-free and still
    happen. Catches: the negative-age clamp restored (cutoff clamped to "now"), and
    the guard removed (the raw O3 comparison takes the run)."""
    ledger.boot("worker-1", epoch="w1")
    _running(ledger, "owned", "worker-1", "w1")
    clock.advance(600)
    clock.restart(0)
    booted = ledger.boot("worker-1", epoch="w2")
    clock.step_wall(-3600)  # NTP steps the wall clock back an hour
    _running(ledger, "after-step", "worker-1")  # the live process's own run
    clock.advance(30)  # still earlier than the boot instant on the wall clock
    report = ledger.sweep(booted)
    assert [v.run for v in report.recovered] == ["owned"]
    assert "stepped back" in report.fallback_skipped
    assert ledger.get_run("after-step").status is Status.RUNNING
    [skip] = [
        r.event
        for r in ledger._store.read_stream(process_stream("worker-1"))
        if isinstance(r.event, ProcessSweepSkipped)
    ]
    assert skip.epoch == "w2" and skip.now < skip.booted_at and "stepped back" in skip.why
    # the clock-free view agrees with the sweep once the skip is recorded
    assert [s.run for s, _ in ledger.orphans()] == []
    assert ledger.epochs()[-1].sweep_skipped == skip.why


# ----------------------------------------------------------------- races
def test_O5_sweep_twice_recovers_each_orphan_once(ledger, clock):
    _previous_day(ledger, clock)
    epoch, first = ledger.startup("worker-1", epoch="w2")
    second = ledger.sweep(epoch)
    assert len(first.recovered) == 2 and second.recovered == [] and second.outcome == "swept"
    assert len(_recoveries(ledger, "owned")) == 1


def test_O5_two_replicas_sweeping_at_once_recover_each_orphan_once(store_url, clock):
    """Two Ledger objects (two replicas) on one store sweep at the same moment: every
    orphan is recovered exactly once; the loser of each race gets nothing, no error."""
    with open_ledger(store_url, clock=clock) as setup:
        setup.boot("worker-1", epoch="w1")
        with setup.batch() as b:
            for i in range(40):
                b.queue(f"r{i:02d}", process="worker-1")
                b.start(f"r{i:02d}", epoch="w1", process="worker-1")
        clock.advance(60)
        epoch = setup.boot("worker-1", epoch="w2")
    replicas = [open_ledger(store_url, clock=clock) for _ in range(2)]
    barrier = threading.Barrier(2)
    reports, errors = [], []

    def go(lg):
        try:
            barrier.wait()
            reports.append(lg.sweep(epoch))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=go, args=(lg,)) for lg in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(v.run for r in reports for v in r.recovered) == [f"r{i:02d}" for i in range(40)]
    with open_ledger(store_url, clock=clock) as check:
        for i in range(40):
            assert len(_recoveries(check, f"r{i:02d}")) == 1
    for lg in replicas:
        lg.close()


def test_O5_a_stale_sweeper_recovers_nothing(ledger, clock):
    _previous_day(ledger, clock)
    old = ledger.boot("worker-1", epoch="w2")
    ledger.boot("worker-1", epoch="w3")
    report = ledger.sweep(old)
    assert report.outcome == "superseded" and report.recovered == []


def test_O5_sweep_of_an_unbooted_epoch_is_refused(ledger):
    from epochledger.ledger.events import ProcessBooted

    ghost = ProcessBooted(at=T0, process="worker-1", epoch="ghost", booted_at=T0)
    with pytest.raises(InvalidInput, match="never booted"):
        ledger.sweep(ghost)


# ---------------------------------------------------- retries and the alert
class Flaky:
    """Makes the sweep's read of the ledger (ledger.orphan_view) raise StoreError the
    first `n` times, as an unreachable store would."""

    def __init__(self, ledger, n):
        self.ledger, self.n, self.calls = ledger, n, 0
        self.real = ledger.orphan_view

    def __call__(self, *a, **kw):
        self.calls += 1
        if self.calls <= self.n:
            raise StoreError("read the log: connection refused")
        return self.real(*a, **kw)


def test_O5_store_errors_get_three_attempts_with_two_gaps(ledger, clock, monkeypatch):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 2))
    gaps = []
    report = ledger.sweep(epoch, gaps=(0.25, 0.5), sleep=gaps.append)
    assert (report.attempts, gaps, len(report.recovered)) == (3, [0.25, 0.5], 2)


def test_O5_ledger_sweep_takes_its_retry_bounds_from_the_sweep_module():
    """One home for O5's bounds: `Ledger.sweep` and `startup` use epochledger/sweep.py's
    ATTEMPTS and GAPS themselves, not a copy kept in step. Mutation caught: the old
    `attempts=3, gaps=(1.0, 4.0)` restated in app.py (a change to GAPS would not reach
    the service)."""
    import inspect

    from epochledger import sweep as sweep_mod
    from epochledger.app import Ledger

    params = inspect.signature(Ledger.sweep).parameters
    # None: read from the sweep module when called (tests/app/test_sweep_settings.py pins the
    # values that reach the store through Ledger.sweep); never a number of its own here.
    assert params["attempts"].default is None and params["gaps"].default is None
    assert isinstance(sweep_mod.ATTEMPTS, int) and isinstance(sweep_mod.GAPS, tuple)


def test_O5_exhausted_retries_alert_the_operator(ledger, clock, monkeypatch, caplog):
    """Three failed attempts: an ERROR record on logger epochledger.sweep, a
    process.sweep_failed event on the process stream, and SweepFailed raised."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    flaky = Flaky(ledger, 99)
    monkeypatch.setattr(ledger, "orphan_view", flaky)
    gaps = []
    with caplog.at_level(logging.WARNING, logger="epochledger.sweep"), pytest.raises(SweepFailed) as err:
        ledger.sweep(epoch, sleep=gaps.append)
    assert (flaky.calls, len(gaps), err.value.attempts, err.value.alert_recorded) == (3, 2, 3, True)
    errors = [r for r in caplog.records if r.name == "epochledger.sweep" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "gave up after 3 attempts" in errors[0].getMessage()
    [failed] = [
        r.event
        for r in ledger._store.read_stream(process_stream("worker-1"))
        if isinstance(r.event, ProcessSweepFailed)
    ]
    assert failed.epoch == "w2" and failed.attempts == 3 and "connection refused" in failed.error
    assert ledger.process("worker-1").current.sweep_failed_at is not None


def test_O5_exhaustion_with_the_store_down_still_alerts_in_the_log(ledger, clock, monkeypatch, caplog):
    """When the store is down the alert event cannot be written: the log says so (a
    second ERROR record) and SweepFailed reports alert_recorded=False."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 99))

    def down(writes, **kw):
        raise StoreError("append: connection refused")

    monkeypatch.setattr(ledger._store, "append", down)
    with caplog.at_level(logging.ERROR, logger="epochledger.sweep"), pytest.raises(SweepFailed) as err:
        ledger.sweep(epoch, sleep=lambda s: None)
    assert err.value.alert_recorded is False
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("gave up" in m for m in messages) and any("could not record process.sweep_failed" in m for m in messages)


def test_O5_no_attempt_starts_once_the_process_has_begun_to_stop(ledger, clock, monkeypatch):
    """Shutdown begins during the first gap: no second attempt, no alert, no error."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    flaky = Flaky(ledger, 99)
    monkeypatch.setattr(ledger, "orphan_view", flaky)
    report = ledger.sweep(epoch, sleep=lambda s: ledger.begin_stop("w2"))
    assert (report.outcome, report.attempts, flaky.calls) == ("stopping", 1, 1)


def test_O5_begin_stop_wakes_a_sweep_waiting_out_a_gap(ledger, clock, monkeypatch):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 99))
    t = threading.Timer(0.05, lambda: ledger.begin_stop("w2"))
    t.start()
    report = ledger.sweep(epoch, gaps=(600.0, 600.0))  # default wait: wakes on stop
    t.join()
    assert report.outcome == "stopping"


def test_O5_an_epoch_recorded_as_stopping_sweeps_nothing(ledger, clock):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    other = open_ledger(ledger.url, clock=clock)  # another handle recorded the stop
    other.begin_stop("w2")
    other.close()
    report = ledger.sweep(epoch)
    assert report.outcome == "stopping" and report.recovered == []
    assert ledger.get_run("owned").status is Status.RUNNING


# --------------------------------------------------------------------- CLI
def test_cli_epochs_runs_orphaned_and_sweep(ledger, clock, capsys):
    _previous_day(ledger, clock)
    ledger.boot("worker-1", epoch="w2")
    assert main(["--store", ledger.url, "epochs", "--json"]) == 0
    epochs = json.loads(capsys.readouterr().out)
    assert [(e["process"], e["epoch"], e["live"]) for e in epochs] == [
        ("worker-1", "w1", False),
        ("worker-1", "w2", True),
        ("worker-2", "x1", True),
    ]
    assert main(["--store", ledger.url, "runs", "--orphaned", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["orphan"]["rule"]) for r in rows] == [
        ("owned", orphans.SUPERSEDED),
        ("unowned", orphans.FALLBACK),
    ]
    assert main(["--store", ledger.url, "sweep", "--process", "worker-2", "--epoch", "x2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["report"]["epoch"] == "x2"
    # worker-2's new epoch supersedes x1 (so `healthy` goes) and sweeps O2 orphans fleet-wide
    assert sorted(v["run"] for v in out["report"]["recovered"]) == ["healthy", "owned"]
    assert main(["--store", ledger.url, "epochs"]) == 0
    assert "x2" in capsys.readouterr().out


def test_demo_shows_a_recovery(tmp_path, capsys):
    path = tmp_path / "demo.db"
    assert main(["--store", str(path), "demo"]) == 0
    with open_ledger(str(path)) as lg:
        recovered = [r.event for r in lg.events() if isinstance(r.event, RunRecovered)]
        assert recovered and all(e.swept_by_process == "worker-1" for e in recovered)
        assert lg.orphans() == []
    assert "history" in capsys.readouterr().out


def test_cli_runs_orphaned_honours_the_other_filters(ledger, clock, capsys):
    _previous_day(ledger, clock)
    ledger.boot("worker-1", epoch="w2")
    assert main(["--store", ledger.url, "runs", "--orphaned", "--code", "TIMEOUT", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--store", ledger.url, "runs", "--orphaned"]) == 0
    text = capsys.readouterr().out
    assert "owned" in text and "O2-superseded" in text and "healthy" not in text


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_O5_scheduler_fleet_done_when(store_url, seed):
    """Issue 4 "done when": slots that call startup() (boot then sweep) at every start,
    through redeploys, crashes and clean stops, with owned and unowned runs:
    - right after every startup, no orphan shows as running (ledger.orphans() is empty);
    - no run owned by a live epoch is ever recovered;
    - every recovery is explained by the ledger alone: folding the log up to just
      before it gives the same verdict, with the same evidence."""
    import random

    rnd = random.Random(seed)
    clock = ManualClock(T0, uptime=3)
    lg = open_ledger(store_url, clock=clock)
    slots = ["worker-1", "worker-2", "api-1"]
    epoch = {s: lg.startup(s, epoch=f"{s}.0", host="h", pid=1)[0].epoch for s in slots}
    running: set[str] = set()
    n = 0
    for step in range(60):
        clock.advance(rnd.choice([0.4, 2, 30, 600, 5400]))
        slot = rnd.choice(slots)
        roll = rnd.random()
        if roll < 0.45:
            n += 1
            run = f"r{n:03d}"
            _running(lg, run, slot, epoch[slot] if rnd.random() < 0.8 else None)
            running.add(run)
        elif roll < 0.65 and running:
            run = rnd.choice(sorted(running))
            running.discard(run)
            state = lg.get_run(run)
            if lifecycle_running(state):  # still running: its live owner finishes it
                lg.finish(run, epoch=state.epoch if epoch.get(state.process) == state.epoch else None)
        else:
            if roll > 0.93:
                lg.stop(epoch[slot])  # clean stop, then a restart
            clock.restart(rnd.choice([0.5, 5, 60]))
            live_before = {
                s.run for s in lg.runs() if lifecycle_running(s) and s.epoch in epoch.values() and s.process != slot
            }
            epoch[slot] = lg.startup(slot, epoch=f"{slot}.{step + 1}", host="h", pid=step + 1)[0].epoch
            assert [s.run for s, _ in lg.orphans()] == [], f"orphan still running after {slot} started"
            # an oracle independent of the policy: a running run that names an epoch
            # names a current one (every older epoch was superseded or stopped)
            stale = [
                s.run
                for s in lg.runs()
                if lifecycle_running(s) and s.epoch is not None and s.epoch not in epoch.values()
            ]
            assert stale == [], f"runs of dead epochs still running after {slot} started"
            for run in live_before:
                assert lg.get_run(run).status is Status.RUNNING, f"{run} of a live epoch was touched"
    recoveries = [r for r in lg.events() if isinstance(r.event, RunRecovered)]
    assert recoveries, "the scenario should produce recoveries"
    for rec in recoveries:
        e = rec.event
        view = orphans.fold(lg.events(upto=rec.position - 1))
        sweeper = view.epoch(e.swept_by_process, e.swept_by)
        [v] = [v for v in orphans.verdicts(view, sweeper, margin=e.margin or 1.0) if v.run == e.run]
        assert (v.rule, v.owner_epoch, v.superseded_by, v.stopped_at, v.cutoff) == (
            e.rule,
            e.owner_epoch,
            e.superseded_by,
            e.stopped_at,
            e.cutoff,
        )
    lg.close()


def lifecycle_running(state) -> bool:
    from epochledger.ledger import lifecycle

    return lifecycle.can_be_orphaned(state.status, state.code)


def test_O5_another_slots_shutdown_does_not_stop_this_sweep(ledger, clock, monkeypatch):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    ledger.begin_stop("x1")  # a different slot hosted by the same Ledger
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 1))
    gaps = []
    report = ledger.sweep(epoch, sleep=gaps.append)
    assert (report.outcome, report.attempts, len(report.recovered)) == ("swept", 2, 2)


def test_O5_sweep_dry_run_shows_what_a_hand_sweep_would_take_and_writes_nothing(ledger, clock, capsys):
    """An operator about to recover worker-2 by hand sees first that its live epoch's
    running run would be taken (the new epoch supersedes it); nothing is written."""
    _previous_day(ledger, clock)
    ledger.boot("worker-1", epoch="w2")
    before = ledger._store.max_position()
    assert main(["--store", ledger.url, "sweep", "--process", "worker-2", "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)["report"]
    assert ledger._store.max_position() == before
    assert dry["outcome"] == "preview"
    assert sorted(v["run"] for v in dry["recovered"]) == ["healthy", "owned"]
    assert main(["--store", ledger.url, "sweep", "--process", "worker-2", "--json"]) == 0
    real = json.loads(capsys.readouterr().out)["report"]
    assert sorted(v["run"] for v in real["recovered"]) == sorted(v["run"] for v in dry["recovered"])
    # worker-1's unowned run was never swept (w2 booted without a sweep): a new boot of
    # worker-1 would take it by the O3 fallback; `owned` went with worker-2's sweep (O2).
    assert main(["--store", ledger.url, "sweep", "--process", "worker-1", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "would recover 1 orphan(s)" in text and "unowned: O3-fallback" in text


@pytest.mark.parametrize("started, margin, orphaned", MARGIN_TABLE)
def test_O3_margin_truth_table_through_the_sweep(ledger, clock, started, margin, orphaned):
    """The O3 margin table of test_orphans, end to end on each backend: an unowned run
    started `started` seconds from the new epoch's boot instant. Catches: the margin
    zeroed or inverted in the sweep's path."""
    ledger.boot("worker-1", epoch="w1")
    clock.restart(100)  # the new process starts; its boot instant is now
    clock.step_wall(started)
    _running(ledger, "r", "worker-1")
    clock.step_wall(-started)
    clock.advance(30)
    booted = ledger.boot("worker-1", epoch="w2")
    assert booted.booted_at == clock.now() - timedelta(seconds=30)
    report = ledger.sweep(booted, margin=margin)
    assert ([v.run for v in report.recovered] == ["r"]) is orphaned


def test_O5_T4_an_undecodable_event_does_not_stop_the_startup_sweep(ledger, clock, store_url):
    """A payload that no longer decodes must not keep every boot from recovering its
    orphans (they would show as running for as long as it stays). The sweep reads the
    materialized runs and epochs views, which park the poison (T4). Catches: the sweep
    folding the raw log again (DecodeError out of startup, nothing recovered)."""
    from tests.helpers.engine_helpers import corrupt

    _previous_day(ledger, clock)
    ledger.queue("unrelated")
    poison = ledger._store.max_position()
    corrupt(store_url, poison, b"\x00 no longer decodes")
    epoch = ledger.boot("worker-1", epoch="w2")
    report = ledger.sweep(epoch)
    assert report.outcome == "swept" and len(report.recovered) == 2
    assert [p[1] for p in tables.parked(ledger._store, "runs")] == [poison]


# ------------------------------------------- issue 10: owner and log-order guards
def test_O2_a_run_started_by_another_slots_live_epoch_is_not_swept_by_the_queue_slot(ledger, clock):
    """Issue repro (item 4): `queue(r, process="w1")`, then `start(r, epoch=<live epoch of
    w2>)` without `process=`, then w1 restarts: its sweep recovered the healthy run as
    O3-fallback. The owner of a run is the epoch its last start named, wherever that
    epoch booted. Mutation caught: the start not stamped with its epoch's slot AND
    `owner_of` looking the epoch up only in `run.process` (either alone is covered by
    test_O2_owner_is_found_wherever_its_epoch_booted)."""
    ledger.boot("w1", epoch="w1.e1")
    ledger.boot("w2", epoch="w2.e1")
    ledger.queue("r", process="w1")
    ledger.start("r", epoch="w2.e1")
    assert (ledger.get_run("r").process, ledger.get_run("r").epoch) == ("w2", "w2.e1")
    clock.advance(3600)
    clock.restart(5)
    _, report = ledger.startup("w1", epoch="w1.e2")
    assert report.recovered == []
    assert ledger.get_run("r").status is Status.RUNNING
    # when w2 itself is redeployed, its own boot recovers the run by O2, at any age
    _, report = ledger.startup("w2", epoch="w2.e2")
    assert [(v.run, v.rule, v.owner_epoch) for v in report.recovered] == [("r", "O2-superseded", "w2.e1")]


def test_O3_a_run_started_after_its_epochs_boot_is_never_its_own_orphan(ledger, clock):
    """Issue repro (item 18): the live epoch starts a run without `epoch=` while its wall
    clock reads early (stepped back), the clock is corrected, and the same epoch sweeps
    again: the O3 fallback saw a start older than the boot instant and recovered the
    process's own run. Log order decides instead: the start was recorded while this
    epoch was its slot's current one (`slot_epoch`). The next epoch still judges it.
    Mutation caught: the `slot_epoch` guard removed from `epoch_policy`."""
    ledger.boot("worker-1", epoch="w1")
    clock.advance(600)
    clock.restart(0)
    booted = ledger.boot("worker-1", epoch="w2")
    assert ledger.sweep(booted).recovered == []  # the boot's own sweep, clock fine
    clock.step_wall(-3600)  # the wall clock steps back an hour...
    _running(ledger, "mine", "worker-1")  # ...while the live process starts a run
    assert ledger.get_run("mine").slot_epoch == "w2"
    clock.step_wall(3600)  # NTP corrects it
    clock.advance(60)
    report = ledger.sweep(booted)  # a later sweep by the same epoch
    assert report.recovered == [] and report.fallback_skipped is None
    assert ledger.get_run("mine").status is Status.RUNNING
    assert ledger.orphans() == []
    # w2 dies; its successor judges the run by the time fallback: started before w3 booted
    clock.advance(60)
    clock.restart(0)
    _, report = ledger.startup("worker-1", epoch="w3")
    assert [(v.run, v.rule, v.relative_to) for v in report.recovered] == [("mine", "O3-fallback", "w3")]


# ---------------------------------------------- pinned by mutation testing (issue 10)
def test_O5_the_default_wait_between_attempts_is_bounded(ledger, clock, monkeypatch):
    """Without a `sleep`, the sweep waits out a gap on the stop signal with the gap as
    its timeout. Mutation caught: the wait without a timeout (the sweep hangs until a
    stop that never comes)."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 2))
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(ledger.sweep(epoch, gaps=(0.05, 0.05))), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and done and done[0].attempts == 3


@pytest.mark.parametrize("attempts, gaps", [(0, ()), (-1, (1.0,)), (3, (1.0,)), (2, ())])
def test_O5_sweep_refuses_retry_settings_that_do_not_add_up(ledger, attempts, gaps):
    epoch = ledger.boot("worker-1", epoch="w1")
    with pytest.raises(InvalidInput, match="attempts|gaps"):
        ledger.sweep(epoch, attempts=attempts, gaps=gaps)  # the message names what is wrong


@pytest.mark.parametrize("margin, taken", [(5.0, True), (60.0, False)])
def test_O3_dry_run_honours_the_margin(ledger, clock, margin, taken):
    """Mutation caught: `preview` ignoring its margin (judging with the default 1 s)."""
    ledger.boot("worker-1", epoch="w1")
    clock.restart(0)
    clock.step_wall(-10)
    _running(ledger, "r", "worker-1")  # started 10 s before the preview's boot instant
    clock.step_wall(10)
    from epochledger.sweep import preview

    assert ([v.run for v in preview(ledger, "worker-1", margin=margin).recovered] == ["r"]) is taken


def test_O5_every_recovery_records_its_evidence(ledger, clock):
    """The run.recovered event is the audit record: each rule's evidence fields, as the
    verdict had them. Mutation caught: any evidence field dropped or swapped in
    `_recovery` (and the verdict's fields in `epoch_policy`)."""
    ledger.boot("worker-1", epoch="w1")
    ledger.boot("worker-2", epoch="x1")
    ledger.boot("worker-3", epoch="y1")
    _running(ledger, "superseded", "worker-1", "w1")
    _running(ledger, "unowned", "worker-1")
    _running(ledger, "stopped", "worker-3", "y1")
    started = clock.now()
    ledger.stop("y1")
    stopped_at = clock.now()
    clock.advance(600)
    clock.restart(30)
    booted = ledger.boot("worker-1", epoch="w2")
    ledger.sweep(booted, margin=2.0)
    by_run = {r: _recoveries(ledger, r) for r in ("superseded", "unowned", "stopped")}
    [s] = by_run["superseded"]
    assert (s.rule, s.owner_process, s.owner_epoch, s.superseded_by, s.stopped_at, s.started_at) == (
        "O2-superseded",
        "worker-1",
        "w1",
        "w2",
        None,
        started,
    )
    assert (s.swept_by, s.swept_by_process, s.actor, s.booted_at, s.cutoff, s.margin) == (
        "w2",
        "worker-1",
        "w2",
        None,
        None,
        None,
    )
    assert "superseded by epoch w2" in s.reason and "rule O2" in s.reason
    [u] = by_run["unowned"]
    assert (u.rule, u.owner_process, u.owner_epoch, u.started_at, u.booted_at, u.margin) == (
        "O3-fallback",
        "worker-1",
        None,
        started,
        booted.booted_at,
        2.0,
    )
    assert u.cutoff == booted.booted_at - timedelta(seconds=2) and "rule O3" in u.reason
    [t] = by_run["stopped"]
    assert (t.rule, t.owner_process, t.owner_epoch, t.stopped_at, t.superseded_by) == (
        "O2-stopped",
        "worker-3",
        "y1",
        stopped_at,
        None,
    )
    assert all(r.status is Status.FAILED_RESUMABLE and r.code == PROCESS_ORPHANED for rs in by_run.values() for r in rs)


# ------------------------------------------------- hand sweeps: slot and epoch named
def test_O5_a_hand_sweep_of_a_slot_the_ledger_never_saw_is_refused_unless_asked(ledger, clock, capsys):
    """`sweep --process <typo>` booted a new slot for good and exited 0, and `--dry-run`
    did not warn. Now both are refused naming the slot (exit 3, nothing appended) unless
    `--new-slot` asks for one; a service's `startup()` still boots its first slot.
    Mutation caught: `check_slot` not consulted (exit 0, slot 'wroker-1' booted)."""
    _previous_day(ledger, clock)
    before = ledger._store.max_position()
    for extra in ([], ["--dry-run"]):
        assert main(["--store", ledger.url, "sweep", "--process", "wroker-1", *extra]) == 3
        err = capsys.readouterr().err
        assert "UnknownSlot" in err and "'wroker-1' was never booted" in err
    with pytest.raises(UnknownSlot) as refused:
        ledger.startup("wroker-1", new_slot=False)
    assert refused.value.process == "wroker-1"
    assert ledger._store.max_position() == before and ledger.process("wroker-1") is None
    assert main(["--store", ledger.url, "sweep", "--process", "worker-1", "--dry-run"]) == 0  # a known slot
    assert ledger._store.max_position() == before and "would recover 2 orphan(s)" in capsys.readouterr().out
    assert main(["--store", ledger.url, "sweep", "--process", "worker-3", "--new-slot", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["booted"]["process"] == "worker-3"
    assert ledger.startup("api-1")[0].process == "api-1"  # the service path boots a new slot as before


def test_O5_sweep_as_epoch_sweeps_with_an_epoch_booted_earlier_and_boots_nothing(ledger, clock, capsys):
    """A process that booted its epoch itself (and wired no sweep at its start) sweeps
    with it: `sweep --as-epoch E` boots nothing and judges O3 by E's recorded boot
    instant, so a run started after E booted is not taken. An unknown epoch and one
    that is no longer live are refused naming it (exit 3), nothing appended.
    Mutation caught: `require_live` ignored (a superseded epoch "swept", exit 0)."""
    _previous_day(ledger, clock)
    w2 = ledger.boot("worker-1", epoch="w2")
    clock.advance(120)
    _running(ledger, "late", "worker-1")  # started after w2 booted: never w2's orphan (O3)
    assert main(["--store", ledger.url, "sweep", "--as-epoch", "w2", "--dry-run", "--json"]) == 0
    assert [v["run"] for v in json.loads(capsys.readouterr().out)["report"]["recovered"]] == ["owned", "unowned"]
    before = ledger._store.max_position()
    for epoch, why in (("ghost", "UnknownEpoch"), ("w1", "EpochNotLive")):
        for extra in ([], ["--dry-run"]):
            assert main(["--store", ledger.url, "sweep", "--as-epoch", epoch, *extra]) == 3
            err = capsys.readouterr().err
            assert why in err and f"'{epoch}'" in err
    assert "O2-superseded" in err
    with pytest.raises(EpochNotLive) as refused:
        ledger.sweep("w1", require_live=True)
    assert (refused.value.epoch, refused.value.rule) == ("w1", orphans.SUPERSEDED)
    assert ledger._store.max_position() == before
    assert main(["--store", ledger.url, "sweep", "--as-epoch", "w2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["booted"] is None and out["report"]["epoch"] == "w2" and out["report"]["outcome"] == "swept"
    assert [v["run"] for v in out["report"]["recovered"]] == ["owned", "unowned"]
    fallback = _recoveries(ledger, "unowned")[0]
    assert fallback.swept_by == "w2" and fallback.booted_at == w2.booted_at
    assert [e.epoch for e in ledger.process("worker-1").epochs] == ["w1", "w2"]  # nothing booted
    assert ledger.get_run("late").status is Status.RUNNING
