"""Fencing (issue 4): a report written on behalf of a stale epoch is refused with
StaleEpoch and kept as run.fenced evidence; the run's verdict stands. Both backends."""

from __future__ import annotations

import io

import pytest

from epochledger.app import open_ledger
from epochledger.cli import exit_code
from epochledger.ledger.codes import PROCESS_ORPHANED
from epochledger.ledger.errors import IllegalTransition, ImportRejected, StaleEpoch
from epochledger.ledger.events import RunDeadLettered, RunFenced, RunRecovered, RunTickFailed, RunTickRecovered, Status
from epochledger.ndjson import export_to, import_lines


def _setup(ledger, clock):
    """worker-1 epoch w1 runs `r`; then worker-1 is redeployed as w2 (not yet swept)."""
    ledger.boot("worker-1", epoch="w1")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="w1", process="worker-1")
    ledger.checkpoint("r", "extract", "ckpt/1", epoch="w1")
    clock.advance(60)
    clock.restart(1)
    return ledger.boot("worker-1", epoch="w2")


# The refusal of a report by w1 once _setup's w2 superseded it: which rule fenced it (O7's
# end_of sentence), not only that something was refused.
W1_SUPERSEDED = "stale epoch 'w1': epoch w1 of worker-1 was superseded by epoch w2"


def _types(ledger, run):
    return [type(r.event).__name__ for r in ledger.history(run)]


def test_fencing_late_finish_after_recovery_leaves_the_verdict_and_keeps_the_report(ledger, clock):
    """The old process wakes up after the sweep and reports `finish`: refused with
    StaleEpoch; the run stays failed_resumable / PROCESS_ORPHANED; history holds the
    recovery and, after it, the late report as run.fenced evidence. Catches: fencing
    disabled (the late report gets a bare IllegalTransition and is lost), and the
    evidence not kept when the batch is refused."""
    epoch = _setup(ledger, clock)
    ledger.sweep(epoch)
    clock.advance(5)
    with pytest.raises(StaleEpoch) as err:
        ledger.finish("r", epoch="w1", actor="worker-1/pid-4102", reason="all rows loaded")
    e = err.value
    assert (e.run, e.status, e.attempted, e.epoch, exit_code(e)) == (
        "r",
        Status.FAILED_RESUMABLE,
        "run.finished",
        "w1",
        9,
    )
    assert isinstance(e, IllegalTransition) and e.kept_at is not None
    state = ledger.get_run("r")
    assert (state.status, state.code, state.actor) == (Status.FAILED_RESUMABLE, PROCESS_ORPHANED, "w2")
    assert _types(ledger, "r")[-2:] == ["RunRecovered", "RunFenced"]
    fenced = ledger.history("r")[-1]
    assert fenced.position == e.kept_at
    f = fenced.event
    assert isinstance(f, RunFenced)
    assert (f.epoch, f.refused, f.superseded_by, f.status, f.code) == (
        "w1",
        "run.finished",
        "w2",
        Status.FAILED_RESUMABLE,
        PROCESS_ORPHANED,
    )
    assert f.report["reason"] == "all rows loaded" and f.report["epoch"] == "w1" and f.report["type"] == "run.finished"
    assert f.actor == "worker-1/pid-4102"
    # the verdict still stands after the fenced report: a second sweep does nothing
    assert ledger.sweep(epoch).recovered == []


def test_fencing_report_from_superseded_epoch_before_the_sweep(ledger, clock):
    """Owner superseded, sweep not yet run: the stale finish is fenced, the run stays
    running (an orphan), and the sweep then recovers it despite the fenced event.
    Catches: fencing disabled (the stale process finishes an orphan the new epoch owns
    the recovery of)."""
    epoch = _setup(ledger, clock)
    with pytest.raises(StaleEpoch) as refused:
        ledger.finish("r", epoch="w1")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.finished", W1_SUPERSEDED)
    assert ledger.get_run("r").status is Status.RUNNING
    [recovered] = ledger.sweep(epoch).recovered
    assert recovered.run == "r"
    assert _types(ledger, "r")[-2:] == ["RunFenced", "RunRecovered"]


FENCED_REPORTS = [
    # name, call
    ("finish", lambda lg: lg.finish("r", epoch="w1")),
    ("fail", lambda lg: lg.fail("r", "TIMEOUT", resumable=True, epoch="w1")),
    ("checkpoint", lambda lg: lg.checkpoint("r", "load", "ckpt/2", epoch="w1")),
    ("pause", lambda lg: lg.pause("r", "waiting_human", questions=["ok?"], epoch="w1")),
    # the tick's reports (rules T1-T3), as epochledger/tick.py submits them; mutations
    # caught (make mutation): any of them dropped from epochledger.ledger.run.FENCED_REPORTS
    (
        "tick_failed",
        lambda lg: lg.submit(
            RunTickFailed(at=lg.clock.now(), run="r", tick="t9", step="s", error_class="KeyError", epoch="w1")
        ),
    ),
    (
        "dead_lettered",
        lambda lg: lg.submit(
            RunDeadLettered(
                at=lg.clock.now(),
                run="r",
                tick="t9",
                step="s",
                error_class="KeyError",
                failing_since=lg.clock.now(),
                failures=3,
                deadline_s=60.0,
                epoch="w1",
            )
        ),
    ),
]


@pytest.mark.parametrize("name, call", FENCED_REPORTS, ids=[n for n, _ in FENCED_REPORTS])
def test_fencing_every_report_of_a_stale_epoch_is_fenced(ledger, clock, name, call):
    _setup(ledger, clock)
    before = ledger.get_run("r")
    with pytest.raises(StaleEpoch) as refused:
        call(ledger)
    assert (refused.value.run, refused.value.epoch, refused.value.why) == ("r", "w1", W1_SUPERSEDED)
    after = ledger.get_run("r")
    assert (after.status, after.code, after.checkpoint) == (before.status, before.code, before.checkpoint)
    assert after.version == before.version + 1 and isinstance(after.last, RunFenced)


def test_fencing_a_stale_tick_recovery_is_fenced_while_a_streak_is_open(ledger, clock):
    """A stale epoch's tick may not close the streak the live owner's ticks opened
    (rules F1, T3). Mutation caught (make mutation): RunTickRecovered dropped from
    ledger.run.FENCED_REPORTS."""
    _setup(ledger, clock)
    ledger.boot("worker-1", epoch="w3")
    ledger.submit(RunTickFailed(at=clock.now(), run="r", tick="t8", step="s", error_class="KeyError", epoch="w3"))
    with pytest.raises(StaleEpoch) as refused:
        ledger.submit(RunTickRecovered(at=clock.now(), run="r", tick="t9", epoch="w1"))
    assert (refused.value.run, refused.value.attempted, refused.value.epoch) == ("r", "run.tick_recovered", "w1")
    assert ledger.get_run("r").tick_streak is not None


def test_fencing_a_stale_epoch_cannot_start_a_run(ledger, clock):
    _setup(ledger, clock)
    ledger.queue("q", process="worker-1")
    with pytest.raises(StaleEpoch) as refused:
        ledger.start("q", epoch="w1", process="worker-1")
    assert (refused.value.run, refused.value.status, refused.value.attempted, refused.value.why) == (
        "q",
        Status.QUEUED,
        "run.started",
        W1_SUPERSEDED,
    )
    assert ledger.get_run("q").status is Status.QUEUED
    ledger.start("q", epoch="w2", process="worker-1")
    assert ledger.get_run("q").epoch == "w2"


def test_fencing_a_cleanly_stopped_epoch_is_fenced_a_stopping_one_is_not(ledger, clock):
    ledger.boot("worker-1", epoch="w1")
    for run in ("a", "b"):
        ledger.queue(run, process="worker-1")
        ledger.start(run, epoch="w1", process="worker-1")
    ledger.begin_stop("w1")
    ledger.finish("a", epoch="w1")  # draining: still live, the finish lands
    assert ledger.get_run("a").status is Status.FINISHED
    ledger.stop("w1")
    with pytest.raises(StaleEpoch, match="clean stop"):
        ledger.finish("b", epoch="w1")
    assert ledger.history("b")[-1].event.stopped_at is not None


def test_fencing_live_epoch_and_unnamed_writer_are_not_fenced(ledger, clock):
    _setup(ledger, clock)
    ledger.queue("s", process="worker-1")
    ledger.start("s", epoch="w2", process="worker-1")
    ledger.finish("s", epoch="w2")
    assert ledger.get_run("s").status is Status.FINISHED
    ledger.finish("r")  # no epoch named: an operator's hand is not fenced
    assert ledger.get_run("r").status is Status.FINISHED


def test_fencing_a_retried_delivery_of_a_landed_report_is_a_no_op(ledger, clock):
    """w1 finished the run before the redeploy; its retry of the same report after the
    redeploy is a duplicate, not a late report: no error, nothing appended."""
    ledger.boot("worker-1", epoch="w1")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="w1", process="worker-1")
    at = clock.now()
    ledger.finish("r", epoch="w1", at=at)
    ledger.boot("worker-1", epoch="w2")
    before = ledger._store.max_position()
    ledger.finish("r", epoch="w1", at=at)
    assert ledger._store.max_position() == before


def test_fencing_in_a_batch_drops_the_batch_and_keeps_the_evidence(ledger, clock):
    _setup(ledger, clock)
    ledger.queue("other", process="worker-1")
    with pytest.raises(StaleEpoch) as refused, ledger.batch() as b:
        b.start("other", epoch="w2", process="worker-1")
        b.finish("r", epoch="w1")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.finished", W1_SUPERSEDED)
    assert ledger.get_run("other").status is Status.QUEUED  # the batch was dropped
    assert isinstance(ledger.history("r")[-1].event, RunFenced)  # the evidence was kept


def test_fencing_import_of_a_stale_report_rejects_the_file(ledger, clock):
    _setup(ledger, clock)
    before = ledger._store.max_position()
    line = b'{"type":"run.finished","at":"2026-09-09T15:00:00Z","run":"r","epoch":"w1"}\n'
    with pytest.raises(ImportRejected, match="line 1"):
        import_lines(ledger, [line])
    assert ledger._store.max_position() == before


def test_fencing_recovered_and_fenced_events_round_trip_through_export_and_import(ledger, clock, tmp_path):
    """run.recovered and run.fenced are part of the on-disk format: export -> import
    into an empty ledger -> export is byte-identical, and the verdict replays."""
    epoch = _setup(ledger, clock)
    ledger.sweep(epoch)
    with pytest.raises(StaleEpoch) as refused:
        ledger.fail("r", "", resumable=False, epoch="w1", error="late")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.failed", W1_SUPERSEDED)
    first = io.BytesIO()
    export_to(ledger, first)
    with open_ledger(f"sqlite:///{tmp_path / 'copy.db'}", clock=clock) as copy:
        import_lines(copy, first.getvalue().splitlines(keepends=True))
        second = io.BytesIO()
        export_to(copy, second)
        assert second.getvalue() == first.getvalue()
        kinds = [type(r.event) for r in copy.history("r")]
        assert RunRecovered in kinds and RunFenced in kinds
        assert copy.get_run("r").code == PROCESS_ORPHANED


# ------------------------------------------------ which epoch, not which run (issue 10)
def test_F1_stale_finish_on_a_run_queued_without_a_process_is_fenced(ledger, clock):
    """Issue repro (item 5): a run queued without a process, started by w1's epoch; w1 is
    redeployed; the old epoch's finish landed on its unswept orphan, because the fence
    looked the writer's epoch up in the run's process slot, which was None.
    Mutation caught: `fence` skipped when the run has no process (writer looked up only
    in `run.process`)."""
    ledger.boot("worker-1", epoch="w1")
    ledger.queue("r")  # no process
    ledger.start("r", epoch="w1")  # no process either: the ledger finds w1's slot
    assert ledger.get_run("r").process == "worker-1"
    ledger.boot("worker-1", epoch="w2")
    with pytest.raises(StaleEpoch) as refused:
        ledger.finish("r", epoch="w1")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.finished", W1_SUPERSEDED)
    assert ledger.get_run("r").status is Status.RUNNING
    assert isinstance(ledger.history("r")[-1].event, RunFenced)


def test_F1_old_owner_cannot_overwrite_the_new_owners_checkpoint(ledger, clock):
    """Issue repro (item 5): after recovery and a restart by the new owner, the old
    epoch's checkpoint replaced the new owner's, since the run's fields named the new
    owner and the old epoch was looked up nowhere. Every report naming an epoch is
    fenced by that epoch's liveness, whatever the run's fields.
    Mutation caught: the writer's epoch taken from the run (`run.epoch`) instead of the
    command."""
    epoch = _setup(ledger, clock)
    ledger.sweep(epoch)
    ledger.resume("r", "auto")
    ledger.start("r", epoch="w2", process="worker-1")
    ledger.checkpoint("r", "load", "ckpt/new-owner", epoch="w2")
    with pytest.raises(StaleEpoch) as refused:
        ledger.checkpoint("r", "load", "ckpt/old-owner", epoch="w1")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.checkpointed", W1_SUPERSEDED)
    state = ledger.get_run("r")
    assert state.checkpoint is not None and state.checkpoint.ref == "ckpt/new-owner"
    assert (state.epoch, state.status) == ("w2", Status.RUNNING)


def test_F1_a_run_recorded_before_slots_were_stamped_is_still_fenced(ledger, clock):
    """Histories written before the ledger stamped a start's slot: the start names w1's
    epoch, the run's process names another slot. The epoch index finds w1 anyway.
    Mutation caught: the epoch looked up only in `run.process` (or in the hint slot)."""
    from epochledger.ledger.events import RunQueued, RunStarted
    from epochledger.ledger.store import Append

    ledger.boot("worker-1", epoch="w1")
    ledger.boot("api", epoch="api.e1")
    t = clock.now()
    ledger._store.append(
        [
            Append("run:old", 1, RunQueued(at=t, run="old", process="api", status=Status.QUEUED)),
            Append("run:old", 2, RunStarted(at=t, run="old", epoch="w1", status=Status.RUNNING)),
        ]
    )
    ledger.boot("worker-1", epoch="w2")
    with pytest.raises(StaleEpoch) as e:
        ledger.finish("old", epoch="w1")
    assert e.value.epoch == "w1" and ledger.get_run("old").status is Status.RUNNING


def test_F1_a_report_naming_an_epoch_no_slot_booted_is_refused_and_appends_nothing(ledger, clock):
    """An epoch no slot booted has no liveness to judge: the report is refused as bad
    input (UnknownEpoch, exit 3) instead of landing unfenced.
    Mutation caught: an unknown epoch treated as live (`fence` given None passes)."""
    from epochledger.ledger.errors import UnknownEpoch

    ledger.boot("worker-1", epoch="w1")
    ledger.queue("r", process="worker-1")
    before = ledger._store.max_position()
    with pytest.raises(UnknownEpoch, match="no process slot ever booted epoch 'ghost'") as e:
        ledger.start("r", epoch="ghost")
    assert exit_code(e.value) == 3 and e.value.epoch == "ghost"
    with pytest.raises(UnknownEpoch, match="not an epoch of slot 'worker-1'"):
        ledger.start("r", epoch="ghost", process="worker-1")
    ledger.start("r", epoch="w1", process="worker-1")
    before = ledger._store.max_position()
    with pytest.raises(UnknownEpoch) as refused:
        ledger.checkpoint("r", "n", "ref", epoch="ghost")
    assert (refused.value.epoch, refused.value.where) == ("ghost", "epoch")
    assert ledger._store.max_position() == before


def test_F1_a_start_naming_one_slot_and_another_slots_epoch_is_refused(ledger, clock):
    from epochledger.ledger.errors import UnknownEpoch

    ledger.boot("worker-1", epoch="w1")
    ledger.boot("worker-2", epoch="v1")
    ledger.queue("r")
    with pytest.raises(UnknownEpoch, match="'v1' is not an epoch of slot 'worker-1': it was booted by slot worker-2"):
        ledger.start("r", epoch="v1", process="worker-1")
    assert ledger.get_run("r").status is Status.QUEUED


def test_F1_an_epoch_id_booted_by_two_slots_is_not_guessed(ledger, clock):
    """Two slots booted the same id (ids chosen by hand): a report that names only the
    epoch is refused rather than fenced against either slot's guess; naming the slot on
    the start resolves it, and later reports find it through the run."""
    from epochledger.ledger.errors import UnknownEpoch

    ledger.boot("worker-1", epoch="dup")
    ledger.boot("worker-2", epoch="dup")
    ledger.queue("r")
    with pytest.raises(UnknownEpoch, match="several slots"):
        ledger.start("r", epoch="dup")
    ledger.start("r", epoch="dup", process="worker-2")
    ledger.checkpoint("r", "n", "ref", epoch="dup")  # the run's owner slot: no guess needed
    assert ledger.get_run("r").checkpoint is not None


# ---------------------------------------------------------------- F2: evidence binds
def test_F2_a_fenced_finish_after_the_last_start_stops_automation_from_resuming(ledger, clock):
    """The incident: an old worker reported the run finished just after a redeploy; the
    report was fenced, the sweep then recovered the run as an orphan and automation
    resumed it: the job ran twice. With the evidence kept, automation is refused and an
    operator decides; a new start clears it.
    Mutation caught: `fenced_end` not consulted by can_auto_resume (or not set by the
    fold): the auto resume lands."""
    epoch = _setup(ledger, clock)
    with pytest.raises(StaleEpoch) as refused:
        ledger.finish("r", epoch="w1", reason="all rows loaded")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.finished", W1_SUPERSEDED)
    [v] = ledger.sweep(epoch).recovered
    state = ledger.get_run("r")
    assert (state.status, state.code) == (Status.FAILED_RESUMABLE, PROCESS_ORPHANED)
    assert state.fenced_end is not None and (state.fenced_end.epoch, state.fenced_end.refused) == ("w1", "run.finished")
    assert state.fenced_end.reported is Status.FINISHED
    from epochledger.ledger import lifecycle

    assert lifecycle.can_auto_resume(state.status, state.code)  # the code alone would allow it
    assert not lifecycle.can_auto_resume(state.status, state.code, fenced_end=True)
    before = ledger._store.max_position()
    with pytest.raises(IllegalTransition, match="rule F2") as e:
        ledger.resume("r", "auto")
    assert "stale epoch w1 reported run.finished" in str(e.value)
    assert ledger._store.max_position() == before
    ledger.resume("r", "operator", actor="alice", reason="checked: output incomplete")
    ledger.start("r", epoch="w2", process="worker-1")
    assert ledger.get_run("r").fenced_end is None  # a new start: the old claim is spent
    ledger.fail("r", "TIMEOUT", resumable=True, epoch="w2")
    ledger.resume("r", "auto")


@pytest.mark.parametrize(
    "report, binds",
    [
        (lambda lg: lg.finish("r", epoch="w1"), True),
        (lambda lg: lg.fail("r", "OOM", resumable=False, epoch="w1"), True),
        (lambda lg: lg.fail("r", "OOM", resumable=True, epoch="w1"), True),
        (lambda lg: lg.checkpoint("r", "load", "ckpt/2", epoch="w1"), False),
        (lambda lg: lg.pause("r", "operator", epoch="w1"), False),
    ],
    ids=["finished", "failed", "failed_resumable", "checkpoint", "pause"],
)
def test_F2_only_outcome_reports_bind(ledger, clock, report, binds):
    """Finished or failed, the stale worker says the work ended; a checkpoint or a pause
    does not. Mutation caught: every fenced report binding (or none)."""
    epoch = _setup(ledger, clock)
    with pytest.raises(StaleEpoch) as refused:
        report(ledger)
    assert (refused.value.run, refused.value.epoch, refused.value.why) == ("r", "w1", W1_SUPERSEDED)
    ledger.sweep(epoch)
    state = ledger.get_run("r")
    assert (state.fenced_end is not None) is binds and state.fenced == 1
    fenced = [r.event for r in ledger.history("r") if isinstance(r.event, RunFenced)][0]
    assert (fenced.reported is not None) is binds


def test_F2_show_history_runs_view_and_audit_show_fenced_reports(ledger, clock, store_url, tmp_path, capsys):
    from epochledger.cli import main
    from epochledger.projections import audit, engine

    epoch = _setup(ledger, clock)
    with pytest.raises(StaleEpoch) as refused:
        ledger.finish("r", epoch="w1", reason="all rows loaded")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.finished", W1_SUPERSEDED)
    ledger.sweep(epoch)
    capsys.readouterr()
    assert main(["--store", store_url, "show", "r"]) == 0
    out = capsys.readouterr().out
    assert "fenced end: stale epoch w1 reported run.finished (finished)" in out and "rule F2" in out
    assert "can_auto_resume" not in out.split("predicates:")[1]
    assert main(["--store", store_url, "show", "r", "--json"]) == 0
    shown = __import__("json").loads(capsys.readouterr().out)
    assert shown["fenced_end"]["epoch"] == "w1" and shown["predicates"]["can_auto_resume"] is False
    assert main(["--store", store_url, "history", "r"]) == 0
    assert "FENCED run.finished -> finished" in capsys.readouterr().out
    state, _ = engine.read_run(ledger._store, "r")  # the materialized runs view
    assert state.fenced_end is not None and state.fenced == 1
    path = str(tmp_path / "audit.duckdb")
    audit.sync(ledger._store, path)
    rows = audit.report(path, "fenced_reports").records()
    assert [(r["run"], r["epoch"], r["refused"], r["reported"], r["binds_automation"]) for r in rows] == [
        ("r", "w1", "run.finished", "finished", True)
    ]
    runs = audit.query(path, "SELECT run, fenced_end_epoch, can_auto_resume FROM runs WHERE run = 'r'").rows
    assert runs == [("r", "w1", False)]


def test_F1_the_evidence_says_why_in_its_reason_and_names_the_one_fact_that_ended_the_epoch(ledger, clock):
    """An epoch that stopped cleanly and was later superseded too: the fence names the
    supersession (`end_of`'s first fact) and not a stop instant beside it, and the
    kept event's reason says what was refused and why. Mutations caught: the reason
    dropped; `stopped_at` recorded beside `superseded_by`."""
    ledger.boot("worker-1", epoch="w1")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="w1", process="worker-1")
    ledger.stop("w1")
    ledger.boot("worker-1", epoch="w2")
    with pytest.raises(StaleEpoch) as refused:
        ledger.checkpoint("r", "n", "ref", epoch="w1")
    assert (refused.value.run, refused.value.attempted, refused.value.why) == ("r", "run.checkpointed", W1_SUPERSEDED)
    f = ledger.history("r")[-1].event
    assert isinstance(f, RunFenced)
    assert (f.superseded_by, f.stopped_at, f.reported) == ("w2", None, None)
    assert (
        f.reason
        == "run.checkpointed refused and kept as evidence: epoch w1 of worker-1 was superseded by epoch w2 (rule F1)"
    )
