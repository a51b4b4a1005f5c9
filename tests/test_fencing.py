"""Fencing (issue 4): a report written on behalf of a stale epoch is refused with
StaleEpoch and kept as run.fenced evidence; the run's verdict stands. Both backends."""

from __future__ import annotations

import io

import pytest

from ledger.codes import PROCESS_ORPHANED
from ledger.errors import IllegalTransition, ImportRejected, StaleEpoch
from ledger.events import RunFenced, RunRecovered, Status
from ledger.ndjson import export_to, import_lines
from ledger.service import open_ledger


def _setup(ledger, clock):  # noqa: ANN001
    """worker-1 epoch w1 runs `r`; then worker-1 is redeployed as w2 (not yet swept)."""
    ledger.boot("worker-1", epoch="w1")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="w1", process="worker-1")
    ledger.checkpoint("r", "extract", "ckpt/1", epoch="w1")
    clock.advance(60)
    clock.restart(1)
    return ledger.boot("worker-1", epoch="w2")


def _types(ledger, run):  # noqa: ANN001
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
    assert (e.run, e.status, e.attempted, e.epoch, e.exit_code) == ("r", Status.FAILED_RESUMABLE, "run.finished", "w1", 9)
    assert isinstance(e, IllegalTransition) and e.kept_at is not None
    state = ledger.get_run("r")
    assert (state.status, state.code, state.actor) == (Status.FAILED_RESUMABLE, PROCESS_ORPHANED, "w2")
    assert _types(ledger, "r")[-2:] == ["RunRecovered", "RunFenced"]
    fenced = ledger.history("r")[-1]
    assert fenced.position == e.kept_at
    f = fenced.event
    assert isinstance(f, RunFenced)
    assert (f.epoch, f.refused, f.superseded_by, f.status, f.code) == ("w1", "run.finished", "w2", Status.FAILED_RESUMABLE, PROCESS_ORPHANED)
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
    with pytest.raises(StaleEpoch):
        ledger.finish("r", epoch="w1")
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
]


@pytest.mark.parametrize("name, call", FENCED_REPORTS, ids=[n for n, _ in FENCED_REPORTS])
def test_fencing_every_report_of_a_stale_epoch_is_fenced(ledger, clock, name, call):
    _setup(ledger, clock)
    before = ledger.get_run("r")
    with pytest.raises(StaleEpoch):
        call(ledger)
    after = ledger.get_run("r")
    assert (after.status, after.code, after.checkpoint) == (before.status, before.code, before.checkpoint)
    assert after.version == before.version + 1 and isinstance(after.last, RunFenced)


def test_fencing_a_stale_epoch_cannot_start_a_run(ledger, clock):
    _setup(ledger, clock)
    ledger.queue("q", process="worker-1")
    with pytest.raises(StaleEpoch):
        ledger.start("q", epoch="w1", process="worker-1")
    assert ledger.get_run("q").status is Status.QUEUED
    ledger.start("q", epoch="w2", process="worker-1")
    assert ledger.get_run("q").epoch == "w2"


def test_fencing_a_cleanly_stopped_epoch_is_fenced_a_stopping_one_is_not(ledger, clock):
    ledger.boot("worker-1", epoch="w1")
    for run in ("a", "b"):
        ledger.queue(run, process="worker-1")
        ledger.start(run, epoch="w1", process="worker-1")
    ledger.begin_stop("worker-1", "w1")
    ledger.finish("a", epoch="w1")  # draining: still live, the finish lands
    assert ledger.get_run("a").status is Status.FINISHED
    ledger.stop("worker-1", "w1")
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
    before = ledger.store.max_position()
    ledger.finish("r", epoch="w1", at=at)
    assert ledger.store.max_position() == before


def test_fencing_in_a_batch_drops_the_batch_and_keeps_the_evidence(ledger, clock):
    _setup(ledger, clock)
    ledger.queue("other", process="worker-1")
    with pytest.raises(StaleEpoch), ledger.batch() as b:
        b.start("other", epoch="w2", process="worker-1")
        b.finish("r", epoch="w1")
    assert ledger.get_run("other").status is Status.QUEUED  # the batch was dropped
    assert isinstance(ledger.history("r")[-1].event, RunFenced)  # the evidence was kept


def test_fencing_import_of_a_stale_report_rejects_the_file(ledger, clock):
    _setup(ledger, clock)
    before = ledger.store.max_position()
    line = b'{"type":"run.finished","at":"2026-09-09T15:00:00Z","run":"r","epoch":"w1"}\n'
    with pytest.raises(ImportRejected, match="line 1"):
        import_lines(ledger, [line])
    assert ledger.store.max_position() == before


def test_fencing_recovered_and_fenced_events_round_trip_through_export_and_import(ledger, clock, tmp_path):
    """run.recovered and run.fenced are part of the on-disk format: export -> import
    into an empty ledger -> export is byte-identical, and the verdict replays."""
    epoch = _setup(ledger, clock)
    ledger.sweep(epoch)
    with pytest.raises(StaleEpoch):
        ledger.fail("r", "", resumable=False, epoch="w1", error="late")
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
