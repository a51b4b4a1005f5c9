"""What-if (rule R4) on orders and edges no golden incident has: a run the alternative
took first and the record recovered later, the recorded rule over a sweep that skipped
its time fallback (rule O3), and the boundaries of `flat-age` and `clamp` at exactly
their limit. Histories written through the API with a manual clock, on SQLite."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.ledger.errors import StaleEpoch
from epochledger.replay.whatif import KILLED_LIVE, MISSED, Difference, whatif
from tests.conftest import T0


def _kinds(lg: Ledger, policy: str) -> list[tuple[str, str, str]]:
    return [(d.kind, d.run, d.sweep_epoch) for d in whatif(lg._store, policy).differences]


def test_R4_a_run_the_alternative_took_first_is_not_missed_when_the_record_recovers_it_later(
    sqlite_ledger, clock
) -> None:
    """heartbeat:30m kills the silent run `o` at worker-2's sweep (its owner is live);
    `o` then checkpoints, and worker-1's redeploy recovers it (O2-superseded), when the
    heartbeat no longer finds it. One difference, the kill; not a second one saying the
    alternative missed what it had already taken. Mutation caught: `pass` for
    `continue` after the alternative's earlier kill is found."""
    lg = sqlite_ledger
    lg.boot("worker-1", epoch="w1.e1")
    lg.queue("o", workflow="wf", process="worker-1")
    lg.start("o", epoch="w1.e1", process="worker-1")
    clock.advance(40 * 60)
    lg.startup("worker-2", epoch="w2.e1")
    clock.advance(60)
    lg.checkpoint("o", "node", "ref-1")
    clock.advance(60)
    _, report = lg.startup("worker-1", epoch="w1.e2")
    assert [(v.run, v.rule) for v in report.recovered] == [("o", "O2-superseded")]
    assert _kinds(lg, "heartbeat:30m") == [(KILLED_LIVE, "o", "w2.e1")]


def test_R4_O3_the_recorded_rule_honours_a_sweep_that_skipped_its_time_fallback(sqlite_ledger, clock) -> None:
    """An unowned run of worker-1 is old enough for the time fallback, but the wall clock
    stepped back past the new epoch's boot before its sweep, so the sweep recorded
    process.sweep_skipped and recovered nothing. `--policy epoch` is the recorded rule
    and must list nothing. Mutation caught: the epoch rule ignoring the recorded skip
    (it would report the run as recovered early by the rule that skipped it)."""
    lg = sqlite_ledger
    lg.boot("worker-1", epoch="w1.e1")
    lg.queue("u", workflow="wf", process="worker-1")
    lg.start("u", process="worker-1")  # names no epoch: only O3 can judge it
    clock.advance(40 * 60)
    clock.restart(1)
    booted = lg.boot("worker-1", epoch="w1.e2")
    clock.step_wall(-3600)
    report = lg.sweep(booted)
    assert report.recovered == [] and report.fallback_skipped is not None
    assert _kinds(lg, "epoch") == []


def _one_run_whole(
    tmp_path: Path, name: str, policy: str, then: Callable[[Ledger, ManualClock], None]
) -> list[Difference]:
    """The differences of `policy` over a run `r` started on worker-1's epoch, then what
    `then` does (a new ledger file `name` each time)."""
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(f"sqlite:///{tmp_path / f'{name}.db'}", clock=clock) as lg:
        lg.boot("worker-1", epoch="w1.e1")
        lg.queue("r", workflow="wf", process="worker-1")
        lg.start("r", epoch="w1.e1", process="worker-1")
        then(lg, clock)
        return whatif(lg._store, policy).differences


def _one_run(
    tmp_path: Path, name: str, policy: str, then: Callable[[Ledger, ManualClock], None]
) -> list[tuple[str, str, str]]:
    """`_one_run_whole`'s differences as (kind, run, sweeping epoch)."""
    return [(d.kind, d.run, d.sweep_epoch) for d in _one_run_whole(tmp_path, name, policy, then)]


def _flat_age_at(tmp_path: Path, seconds: float) -> list[tuple[str, str, str]]:
    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(seconds)
        lg.startup("worker-2", epoch="w2.e1")

    return _one_run(tmp_path, f"flat-{seconds}", "flat-age:30m", then)


def test_R4_flat_age_takes_a_run_only_older_than_its_limit(tmp_path: Path) -> None:
    """A run exactly 30 minutes old at the sweep is not older than 30 minutes; one
    second more and flat-age:30m kills it (its owner is live). Mutation caught: `<` for
    `<=` in flat-age's test of the age."""
    assert _flat_age_at(tmp_path, 1800) == []
    assert _flat_age_at(tmp_path, 1801) == [(KILLED_LIVE, "r", "w2.e1")]


def test_R4_clamp_is_the_recorded_rule_at_a_sweep_whose_clock_reads_exactly_the_boot_instant(
    sqlite_ledger, clock
) -> None:
    """The clock reads the boot instant itself at the sweep: it did not step back, so
    clamp is the epoch rule, whose log-order check keeps the run started after the
    boot (stamped two hours early by a clock that stepped back and then forward again)
    and leaves it alone.
    Mutation caught: `>` for `>=` in clamp's test of the sweep's clock."""
    lg = sqlite_ledger
    lg.boot("worker-1", epoch="w1.e0")
    lg.queue("old", workflow="wf", process="worker-1")
    lg.start("old", epoch="w1.e0", process="worker-1")
    clock.advance(60)
    clock.restart(0)  # a new process: its boot instant is the wall clock now
    booted = lg.boot("worker-1", epoch="w1.e1")
    clock.step_wall(-7200)
    lg.queue("late", workflow="wf", process="worker-1")
    lg.start("late", process="worker-1")
    clock.step_wall(7200)
    assert clock.now() == booted.booted_at
    # The sweep records a recovery (the superseded epoch's run), so it is judged at its own instant.
    assert [(v.run, v.rule) for v in lg.sweep(booted).recovered] == [("old", "O2-superseded")]
    assert _kinds(lg, "clamp") == [] and _kinds(lg, "epoch") == []


def _heartbeat_at(tmp_path: Path, seconds: float) -> list[tuple[str, str, str]]:
    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(600)
        lg.checkpoint("r", "node", "ref-1")  # its last heartbeat
        clock.advance(seconds)
        lg.startup("worker-2", epoch="w2.e1")

    return _one_run(tmp_path, f"beat-{seconds}", "heartbeat:30m", then)


def test_R4_heartbeat_takes_a_run_only_silent_longer_than_its_limit(tmp_path: Path) -> None:
    """Silent exactly 30 minutes since its last checkpoint at the sweep is not silent
    longer than 30 minutes; one second more and heartbeat:30m kills it (its owner is
    live), counted from the checkpoint, not the start. Mutation caught: `<` for `<=`
    in heartbeat's test of the silence."""
    assert _heartbeat_at(tmp_path, 1800) == []
    assert _heartbeat_at(tmp_path, 1801) == [(KILLED_LIVE, "r", "w2.e1")]


def _floor_at(tmp_path: Path, seconds: float) -> list[tuple[str, str, str]]:
    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(seconds)
        clock.restart(0)
        _, report = lg.startup("worker-1", epoch="w1.e2")  # a redeploy: its sweep recovers r (O2)
        assert [(v.run, v.rule) for v in report.recovered] == [("r", "O2-superseded")]

    return _one_run(tmp_path, f"floor-{seconds}", "floor:30m", then)


def test_R4_floor_keeps_a_verdict_on_a_run_started_exactly_its_floor_before_the_sweep(tmp_path: Path) -> None:
    """A run started exactly 30 minutes before the redeploy's sweep passes floor:30m
    (started at least 30 minutes before), so the floor recovers it as the record did;
    one second younger and the floor misses it. Mutation caught: `>=` for `>` in the
    floor's test of the start."""
    assert _floor_at(tmp_path, 1800) == []
    assert _floor_at(tmp_path, 1799) == [(MISSED, "r", "w1.e2")]


def test_R4_no_policy_judges_a_deleted_a_failed_or_a_queued_run(tmp_path: Path) -> None:
    """An hour after they were queued, their slot redeploys and its sweep judges them: a
    run deleted while it ran (its status stays running: a deletion keeps the status),
    one that started and failed, and one still queued are no policy's to take, however
    old. Mutation caught: flat-age's and heartbeat's guards with `and` for `or` (the
    deleted run, or the failed one, killed)."""

    def then(lg: Ledger, clock: ManualClock) -> None:
        for run in ("deleted", "failed", "queued"):
            lg.queue(run, workflow="wf", process="worker-1")
        for run in ("deleted", "failed"):
            lg.start(run, epoch="w1.e1", process="worker-1")
        clock.advance(60)
        lg.startup("worker-2", epoch="w2.e1")  # a decision point while they run: the what-if reads them
        lg.delete("deleted")
        lg.fail("failed", "TIMEOUT", resumable=True)
        lg.finish("r")
        clock.advance(3600)
        clock.restart(0)
        _, report = lg.startup("worker-1", epoch="w1.e2")
        assert report.recovered == []

    for policy in ("flat-age:30m", "heartbeat:30m", "floor:30m", "epoch", "clamp"):
        assert _one_run(tmp_path, f"none-{policy.replace(':', '_')}", policy, then) == [], policy


def test_R4_O9_the_alternatives_world_keeps_the_default_slot_after_a_miss(tmp_path: Path) -> None:
    """The ledger names worker-1 the default slot (rule O9). floor:10m misses `young` at
    worker-1's first redeploy (5 minutes old), so from then on the alternative judges a
    world of its own, where `young` still runs; at the second redeploy, that world must
    still know the default slot: the floor takes the unowned run `u` as the record's O3
    fallback did (no difference for it), and `young`, an hour late. Defect caught: the
    alternative's world was rebuilt without the ledger's settings, so it listed `u` as
    missed."""
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(f"sqlite:///{tmp_path / 'default-slot.db'}", clock=clock) as lg:
        lg.set_default_slot("worker-1", actor="operator")
        lg.boot("worker-1", epoch="w1.e1")
        clock.advance(55 * 60)
        lg.queue("young", workflow="wf", process="worker-1")
        lg.start("young", epoch="w1.e1", process="worker-1")
        clock.advance(5 * 60)
        clock.restart(0)
        _, first = lg.startup("worker-1", epoch="w1.e2")
        assert [(v.run, v.rule) for v in first.recovered] == [("young", "O2-superseded")]
        clock.advance(60)
        lg.queue("u")
        lg.start("u")  # neither process nor epoch: the default slot judges it
        clock.advance(59 * 60)
        clock.restart(0)
        _, second = lg.startup("worker-1", epoch="w1.e3")
        assert [(v.run, v.rule) for v in second.recovered] == [("u", "O3-fallback")]
        found = whatif(lg._store, "floor:10m").differences
    assert [(d.kind, d.run, d.sweep_epoch) for d in found] == [("late", "young", "w1.e2")]


def _stepped_back(tmp_path: Path, name: str, back: float | None = None, policy: str = "clamp") -> list[Difference]:
    """worker-1 (the default slot, O9) redeploys; the wall clock steps back before the new
    epoch's sweep, which skips its time fallback (O3) and recovers nothing. Runs of the
    slot then: `u` (its process, no epoch: O3's), `mine` (started on the new, live epoch
    under the stepped clock), `dflt` (neither process nor epoch: the default slot's), a
    run that failed and two deleted while they ran, one owned and one as `u` (all read:
    a decision point fell while they ran). `back`: seconds the clock steps back
    (default: ten minutes). The differences of `policy`."""
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(f"sqlite:///{tmp_path / f'{name}.db'}", clock=clock) as lg:
        lg.set_default_slot("worker-1", actor="operator")
        lg.boot("worker-1", epoch="w1.e1")
        lg.queue("u", workflow="wf", process="worker-1")
        lg.start("u", process="worker-1")
        for run in ("failed", "deleted"):
            lg.queue(run, workflow="wf", process="worker-1")
            lg.start(run, epoch="w1.e1", process="worker-1")
        lg.queue("dflt")
        lg.start("dflt")
        lg.queue("gone", workflow="wf", process="worker-1")
        lg.start("gone", process="worker-1")  # unowned as `u`, then deleted while it ran
        clock.advance(60)
        lg.startup("worker-2", epoch="w2.e1")  # a decision point while they run
        lg.fail("failed", "TIMEOUT", resumable=True)
        lg.delete("deleted")
        lg.delete("gone")
        clock.advance(40 * 60)
        clock.restart(1)
        booted = lg.boot("worker-1", epoch="w1.e2")
        step = back if back is not None else 600.0
        clock.step_wall(-step)
        lg.queue("mine", workflow="wf", process="worker-1")
        lg.start("mine", epoch="w1.e2", process="worker-1")
        clock.advance(120)
        report = lg.sweep(booted)
        assert report.recovered == [] and report.fallback_skipped is not None
        return whatif(lg._store, policy).differences


def test_R4_O9_the_clamp_takes_only_the_slots_own_unowned_runs_at_a_stepped_back_sweep(tmp_path: Path) -> None:
    """At the sweep whose clock stepped back, the clamp takes `u`, whose start was stamped
    before the clock's reading minus the margin, though the record held it (its owner's
    epoch ended, yet the recorded rule skipped the time fallback): killed while "not
    live". It leaves the run owned by the live epoch, the default slot's run (no process:
    not the slot's own), the failed and the deleted runs. Mutation caught: each of the
    clamp's guards with `and` for `or`, the view or the margin not passed."""
    found = _stepped_back(tmp_path, "clamp")
    assert [(d.kind, d.run, d.sweep_epoch) for d in found] == [(KILLED_LIVE, "u", "w1.e2")]
    [d] = found
    assert d.alternative is not None and (d.alternative.rule, d.alternative.relative_to) == ("clamp", "w1.e2")
    assert d.owner_live is False
    assert "of worker-1 was not live, yet the recorded rule holds the run healthy; it was" in d.message
    # flat-age takes the default slot's run too, which has no owner to speak of
    [dflt] = [d for d in _stepped_back(tmp_path, "flat", policy="flat-age:30m") if d.run == "dflt"]
    assert dflt.owner_live is None and "while its owner ? of ? is not known; it was" in dflt.message


def test_R4_the_clamp_takes_a_run_only_stamped_before_its_cutoff(tmp_path: Path) -> None:
    """The same history with the clock stepped back so far that the sweep reads `u`'s
    start plus the margin exactly (43 minutes): `u` was stamped at the
    clamp's cutoff, not before it, and stays; a second less far back and the clamp takes
    it. Mutation caught: `<=` for `<` in the clamp's test of the start."""
    assert _stepped_back(tmp_path, "at-cutoff", back=2580.0) == []
    assert [(d.kind, d.run) for d in _stepped_back(tmp_path, "past-cutoff", back=2579.0)] == [(KILLED_LIVE, "u")]


def test_R4_a_run_the_alternative_killed_is_failed_in_its_world_and_not_killed_again(tmp_path: Path) -> None:
    """flat-age:30m kills `r` at worker-2's sweep, 40 minutes in, while its owner is
    live; at worker-3's sweep five minutes later the record still holds it running, but
    in the alternative's world it failed at the first: one difference, not two.
    Mutation caught: the alternative's world leaving a killed run as it was."""

    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(40 * 60)
        lg.startup("worker-2", epoch="w2.e1")
        clock.advance(5 * 60)
        lg.startup("worker-3", epoch="w3.e1")

    assert _one_run(tmp_path, "killed-once", "flat-age:30m", then) == [(KILLED_LIVE, "r", "w2.e1")]


def test_R4_a_run_started_by_another_slots_epoch_is_that_epochs_to_own(tmp_path: Path) -> None:
    """`x` is queued for worker-1 and started by worker-2's epoch (naming no process),
    so worker-2's epoch owns it, not worker-1's epoch of the time: the kill names that
    owner and its slot (the start records the epoch's slot as the run's: rule F1)."""
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(f"sqlite:///{tmp_path / 'cross.db'}", clock=clock) as lg:
        lg.boot("worker-1", epoch="w1.e1")
        lg.boot("worker-2", epoch="w2.e1")
        lg.queue("x", workflow="wf", process="worker-1")
        lg.start("x", epoch="w2.e1")
        clock.advance(40 * 60)
        lg.startup("worker-3", epoch="w3.e1")
        [d] = whatif(lg._store, "flat-age:30m").differences
    assert (d.kind, d.run, d.owner_process, d.owner_epoch, d.owner_live) == (
        KILLED_LIVE,
        "x",
        "worker-2",
        "w2.e1",
        True,
    )


def test_R4_a_missed_orphan_runs_until_the_record_starts_it_again_or_deletes_it(tmp_path: Path) -> None:
    """floor:10m misses two young orphans the redeploy recovered (5 minutes old). Each
    would have stayed running until the record's next say on it: `again` until it was
    resumed and started again, `gone` until it was deleted. Mutation caught: the missed
    run's end taken from no event, or said with another reason."""
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(f"sqlite:///{tmp_path / 'missed-until.db'}", clock=clock) as lg:
        lg.boot("worker-1", epoch="w1.e1")
        clock.advance(55 * 60)
        for run in ("again", "gone"):
            lg.queue(run, workflow="wf", process="worker-1")
            lg.start(run, epoch="w1.e1", process="worker-1")
        clock.advance(5 * 60)
        clock.restart(0)
        _, report = lg.startup("worker-1", epoch="w1.e2")
        assert sorted(v.run for v in report.recovered) == ["again", "gone"]
        clock.advance(10 * 60)
        lg.resume("again", by="operator")
        restarted = lg.start("again", epoch="w1.e2", process="worker-1").started_at
        clock.advance(10 * 60)
        lg.delete("gone")
        deleted = clock.now()
        found = whatif(lg._store, "floor:10m").differences
    got = [(d.kind, d.run, d.until, d.until_why, d.running_for_s) for d in found]
    assert got == [
        (MISSED, "again", restarted, "the record started it again", 600.0),
        (MISSED, "gone", deleted, "the record deleted it", 1200.0),
    ]


def test_R4_a_run_the_alternative_took_earlier_does_not_hide_another_a_later_sweep_missed(tmp_path: Path) -> None:
    """flat-age:30m kills `r` (40 minutes old) at worker-2's sweep; worker-1's redeploy
    then recovers `r` and the young `s`: `r` was the alternative's already, `s` it
    misses. Mutation caught: `break` for `continue` after the first (the miss of `s`
    lost)."""

    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(35 * 60)
        lg.queue("s", workflow="wf", process="worker-1")
        lg.start("s", epoch="w1.e1", process="worker-1")
        clock.advance(5 * 60)
        lg.startup("worker-2", epoch="w2.e1")
        clock.advance(60)
        clock.restart(0)
        _, report = lg.startup("worker-1", epoch="w1.e2")
        assert sorted(v.run for v in report.recovered) == ["r", "s"]

    assert _one_run(tmp_path, "took-then-missed", "flat-age:30m", then) == [
        (KILLED_LIVE, "r", "w2.e1"),
        (MISSED, "s", "w1.e2"),
    ]


def test_R4_what_the_record_did_next_to_a_killed_run_skips_its_fenced_report(tmp_path: Path) -> None:
    """flat-age:30m kills `r` at worker-2's sweep; worker-1 is redeployed with boot() alone,
    the old epoch's late finish of `r` is fenced (evidence, no status), and the new
    epoch's sweep then recovers it: what happened next is that recovery, by the epoch
    that swept."""
    recovered_at = []

    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(40 * 60)
        lg.startup("worker-2", epoch="w2.e1")
        clock.advance(60)
        clock.restart(0)
        booted = lg.boot("worker-1", epoch="w1.e2")
        with pytest.raises(StaleEpoch):  # a stale epoch's report: refused, kept as evidence (run.fenced)
            lg.finish("r", epoch="w1.e1")
        assert type(list(lg.events())[-1].event).__name__ == "RunFenced"
        clock.advance(60)
        assert [v.run for v in lg.sweep(booted).recovered] == ["r"]
        recovered_at.append(clock.now())

    [d] = _one_run_whole(tmp_path, "then", "flat-age:30m", then)
    assert d.kind == KILLED_LIVE and d.then == f"failed_resumable at {recovered_at[0].isoformat()} (w1.e2)"


def test_R4_a_missed_orphan_never_runs_for_less_than_nothing(tmp_path: Path) -> None:
    """floor:10m misses the young orphan at the redeploy; the last event of the history is
    stamped an hour earlier (another slot's boot under a clock that stepped back), so the
    miss is counted to the sweep itself: it stayed running 0 s more, not minus an hour.
    Mutation caught: the end of the history taken whatever its instant."""

    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(55 * 60)
        lg.queue("young", workflow="wf", process="worker-1")
        lg.start("young", epoch="w1.e1", process="worker-1")
        clock.advance(5 * 60)
        clock.restart(0)
        lg.startup("worker-1", epoch="w1.e2")
        clock.step_wall(-3600)
        lg.boot("worker-2", epoch="w2.e1")

    [d] = [d for d in _one_run_whole(tmp_path, "end-earlier", "floor:10m", then) if d.run == "young"]
    assert d.kind == MISSED and d.sweep_epoch == "w1.e2"
    assert d.until == d.at and d.running_for_s == 0.0 and d.until_why == "the end of the replayed history"


def test_R4_a_killed_run_started_again_is_the_records_again_without_its_old_checkpoint(tmp_path: Path) -> None:
    """flat-age:30m kills `r` at worker-2's sweep; the record then fails it (no actor
    named: what happened next says `?`), resumes it and starts it again, and at
    worker-3's sweep 45 minutes later the alternative kills it again: a second
    difference, which shows no checkpoint (its last one was before the restart).
    Mutation caught: a restarted run left the alternative's, or keeping its old
    checkpoint, or the missing actor printed otherwise."""
    failed_at = []

    def then(lg: Ledger, clock: ManualClock) -> None:
        clock.advance(5 * 60)
        lg.checkpoint("r", "node", "ref-1")
        clock.advance(35 * 60)
        lg.startup("worker-2", epoch="w2.e1")
        clock.advance(60)
        lg.fail("r", "TIMEOUT", resumable=True)
        failed_at.append(clock.now())
        lg.resume("r", by="operator")
        lg.start("r", epoch="w1.e1", process="worker-1")
        clock.advance(45 * 60)
        lg.startup("worker-3", epoch="w3.e1")

    found = _one_run_whole(tmp_path, "again", "flat-age:30m", then)
    assert [(d.kind, d.run, d.sweep_epoch, d.last_checkpoint is None) for d in found] == [
        (KILLED_LIVE, "r", "w2.e1", False),
        (KILLED_LIVE, "r", "w3.e1", True),
    ]
    assert found[0].then == f"failed_resumable at {failed_at[0].isoformat()} (?)"
