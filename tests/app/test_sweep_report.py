"""What the startup sweep tells its caller and the operator, exactly (rule O5).

tests/app/test_sweep.py pins what the sweep recovers; these pin what it says: the whole
`SweepReport` for every outcome, each refusal of its arguments with the argument
named, every log record word for word (an operator greps for them), the alert event
and `SweepFailed` with every field. Mutations caught (make mutation): any report field
dropped from an early return; the argument checks' boundaries (attempts 1, gap 0,
infinite gap, a bool); an argument's name lost from `where`; a log record missing its
process, epoch or error; the alert written without its actor; a lost race counted
wrong; the final conflict losing the streams it lost on.
"""

from __future__ import annotations

import logging
import math

import pytest

from epochledger import open_ledger
from epochledger.app import Batch
from epochledger.ledger.errors import ConflictError, InvalidInput, StoreError, SweepFailed
from epochledger.ledger.events import ProcessSweepFailed, ProcessSweepSkipped, RunRecovered, process_stream
from epochledger.sweep import CONFLICT_ROUNDS, SweepReport, preview
from tests.app.test_sweep import Flaky, _previous_day, _running
from tests.conftest import losing_batch

LOGGER = "epochledger.sweep"


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


Losing = losing_batch("run-owned")  # a batch that loses its race on this stream


def _process_events(ledger, kind):
    return [r.event for r in ledger._store.read_stream(process_stream("worker-1")) if isinstance(r.event, kind)]


# ------------------------------------------------------------------ reports
def test_a_sweep_by_epoch_id_finds_the_slot_and_reports_in_full(ledger, clock):
    _previous_day(ledger, clock)
    ledger.boot("worker-1", epoch="w2")
    report = ledger.sweep("w2")
    assert isinstance(report, SweepReport)
    assert (report.process, report.epoch, report.outcome, report.attempts, report.conflict_rounds) == (
        "worker-1",
        "w2",
        "swept",
        1,
        0,
    )
    assert sorted(v.run for v in report.recovered) == ["owned", "unowned"] and report.fallback_skipped is None


def test_the_superseded_and_stopping_reports_name_the_slot_and_epoch(ledger, clock):
    _previous_day(ledger, clock)
    old = ledger.boot("worker-1", epoch="w2")
    ledger.boot("worker-1", epoch="w3")
    assert ledger.sweep(old) == SweepReport(process="worker-1", epoch="w2", outcome="superseded", attempts=1)
    other = open_ledger(ledger.url, clock=clock)  # another handle records the stop
    other.begin_stop("w3")
    other.close()
    assert ledger.sweep("w3") == SweepReport(process="worker-1", epoch="w3", outcome="stopping", attempts=1)


def test_no_attempt_once_stopping_reports_zero_attempts(ledger, clock):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    ledger.begin_stop("w2")
    assert ledger.sweep(epoch) == SweepReport(process="worker-1", epoch="w2", outcome="stopping", attempts=0)
    # by id, before any attempt read the slot: the slot is not known, and not guessed
    assert ledger.sweep("w2") == SweepReport(process="", epoch="w2", outcome="stopping", attempts=0)


def test_the_preview_reports_its_slot_and_the_preview_epoch(ledger, clock):
    _previous_day(ledger, clock)
    report = preview(ledger, "worker-1")
    assert (report.process, report.epoch, report.outcome) == ("worker-1", "(preview)", "preview")
    assert sorted(v.run for v in report.recovered) == ["owned", "unowned"]
    with pytest.raises(InvalidInput) as err:
        preview(ledger, "")
    assert err.value.where == "process"


def test_a_lost_race_is_counted_and_the_winner_keeps_the_recoveries(ledger, clock, monkeypatch):
    """Between this sweep's read and its append, another handle of the same epoch
    recovers the orphans: this sweep's batch conflicts, it re-reads, finds nothing to
    recover, and says it lost one round."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    real = ledger.orphan_view
    calls = []

    def racing(**kw):
        view = real(**kw)
        calls.append(1)
        if len(calls) == 1:
            other = open_ledger(ledger.url, clock=clock)
            other.sweep("w2")
            other.close()
        return view

    monkeypatch.setattr(ledger, "orphan_view", racing)
    report = ledger.sweep(epoch)
    assert report == SweepReport(process="worker-1", epoch="w2", outcome="swept", attempts=1, conflict_rounds=1)
    assert [
        len([r for r in ledger.history(run) if isinstance(r.event, RunRecovered)]) for run in ("owned", "unowned")
    ] == [1, 1]


def _booted_after_a_step_back(ledger, clock):
    """w1 of worker-1 owns a running run; the process restarts as w2 and the wall clock
    steps back an hour: w2's sweep must skip the O3 time fallback."""
    ledger.boot("worker-1", epoch="w1")
    _running(ledger, "owned", "worker-1", "w1")
    clock.advance(600)
    clock.restart(0)
    booted = ledger.boot("worker-1", epoch="w2")
    clock.step_wall(-3600)
    return booted


def test_O3_a_step_back_skip_is_written_with_the_recoveries_of_the_round_that_lands(ledger, clock, monkeypatch):
    """The skip rides in the recoveries' batch: a lost round writes neither, the round
    that lands writes the skip once, with the sweeping epoch as its actor."""
    booted = _booted_after_a_step_back(ledger, clock)
    rounds = []

    def batch():
        rounds.append(1)
        return Losing(ledger) if len(rounds) == 1 else Batch(ledger)  # the first round loses a race

    monkeypatch.setattr(ledger, "batch", batch)
    report = ledger.sweep(booted)
    assert (report.conflict_rounds, [v.run for v in report.recovered]) == (1, ["owned"])
    assert report.fallback_skipped is not None and "stepped back" in report.fallback_skipped
    [skip] = _process_events(ledger, ProcessSweepSkipped)
    assert (skip.actor, skip.epoch, skip.why) == ("w2", "w2", report.fallback_skipped)


def test_losing_every_race_raises_a_conflict_naming_the_streams(ledger, clock, monkeypatch):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    entered = []

    def batch():
        entered.append(1)
        return Losing(ledger)

    monkeypatch.setattr(ledger, "batch", batch)
    with pytest.raises(ConflictError) as err:
        ledger.sweep(epoch)
    assert err.value.streams == ["run-owned"] and len(entered) == CONFLICT_ROUNDS
    assert f"sweep of worker-1 epoch 'w2' kept losing races after {CONFLICT_ROUNDS} re-reads" in str(err.value)
    assert not any(isinstance(r.event, RunRecovered) for r in ledger._store.read_all())


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "kwargs, where, says",
    [
        ({"attempts": 0, "gaps": ()}, "attempts", "attempts must be an int >= 1, got 0"),
        ({"attempts": True, "gaps": ()}, "attempts", "attempts must be an int >= 1, got True"),
        ({"attempts": 2.0, "gaps": (1.0,)}, "attempts", "got 2.0"),
        ({"attempts": 3, "gaps": (1.0,)}, "gaps", "need 2 gaps of >= 0 finite seconds, got (1.0,)"),
        ({"attempts": 2, "gaps": (-1.0,)}, "gaps", "need 1 gaps"),
        ({"attempts": 2, "gaps": (math.inf,)}, "gaps", "need 1 gaps"),
        ({"attempts": 2, "gaps": (True,)}, "gaps", "need 1 gaps"),
        ({"attempts": 2, "gaps": ("1",)}, "gaps", "need 1 gaps"),
        ({"attempts": 2, "gaps": 1.0}, "gaps", "need 1 gaps"),
    ],
)
def test_retry_settings_that_do_not_add_up_are_refused_by_name(ledger, kwargs, where, says):
    epoch = ledger.boot("worker-1", epoch="w1")
    with pytest.raises(InvalidInput) as err:
        ledger.sweep(epoch, **kwargs)
    assert err.value.where == where and says in str(err.value)
    assert str(err.value).startswith(f"{where}: ")


@pytest.mark.parametrize("attempts, gaps", [(1, ()), (2, (0,)), (2, (0.0,)), (3, (0, 1e9))])
def test_the_least_retry_settings_are_accepted(ledger, attempts, gaps):
    """One attempt with no gap, and a gap of zero seconds, are legitimate settings."""
    epoch = ledger.boot("worker-1", epoch="w1")
    assert ledger.sweep(epoch, attempts=attempts, gaps=gaps, sleep=lambda s: None).outcome == "swept"


@pytest.mark.parametrize(
    "epoch, where",
    [("", "epoch"), ("x" * 300, "epoch"), (object(), "epoch.process"), (42, "epoch.process")],
)
def test_an_epoch_that_is_neither_a_state_nor_an_id_is_refused_by_name(ledger, epoch, where):
    with pytest.raises(InvalidInput) as err:
        ledger.sweep(epoch)
    assert err.value.where == where


def test_a_state_whose_epoch_id_is_malformed_is_refused_by_name(ledger):
    class Half:
        process = "worker-1"
        epoch = ""

    with pytest.raises(InvalidInput) as err:
        ledger.sweep(Half())  # type: ignore[arg-type]
    assert err.value.where == "epoch.epoch"


def test_an_unbooted_epoch_is_refused_in_the_sweeps_name(ledger):
    class Ghost:
        process = "worker-1"
        epoch = "ghost"

    with pytest.raises(InvalidInput) as err:
        ledger.sweep(Ghost())  # type: ignore[arg-type]
    assert err.value.where == "sweep" and "epoch 'ghost' of 'worker-1' was never booted" in str(err.value)


# ----------------------------------------------------------- the operator
def test_every_record_names_the_slot_the_epoch_the_attempt_and_the_error(ledger, clock, monkeypatch, caplog):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 99))
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(SweepFailed) as err:
        ledger.sweep(epoch, sleep=lambda s: None)
    assert _messages(caplog, logging.WARNING) == [
        f"sweep of worker-1 epoch w2: attempt {i} of 3 failed: read the log: connection refused" for i in (1, 2, 3)
    ]
    assert _messages(caplog, logging.ERROR) == [
        "sweep of worker-1 epoch w2 gave up after 3 attempts: read the log: connection refused; "
        "orphans may still show as running"
    ]
    e = err.value
    assert (e.process, e.epoch, e.attempts, e.error, e.alert_recorded) == (
        "worker-1",
        "w2",
        3,
        "read the log: connection refused",
        True,
    )
    assert isinstance(e.__cause__, StoreError)
    [failed] = _process_events(ledger, ProcessSweepFailed)
    assert (failed.actor, failed.process, failed.epoch, failed.attempts, failed.error) == (
        "w2",
        "worker-1",
        "w2",
        3,
        "read the log: connection refused",
    )


def test_the_record_of_an_alert_that_could_not_be_written_names_why(ledger, clock, monkeypatch, caplog):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 99))

    def down(writes, **kw):
        raise StoreError("append: connection refused")

    monkeypatch.setattr(ledger._store, "append", down)
    with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(SweepFailed) as err:
        ledger.sweep(epoch, attempts=1, gaps=())
    assert _messages(caplog, logging.ERROR)[1] == (
        "sweep of worker-1 epoch w2: could not record process.sweep_failed either: append: connection refused"
    )
    assert err.value.alert_recorded is False and "could not be written either" in str(err.value)


def test_a_sweep_by_id_whose_slot_no_attempt_could_read_alerts_in_the_log_only(ledger, clock, monkeypatch, caplog):
    """The alert event belongs on the slot's stream; with the slot unknown nothing is
    written anywhere (not on a stream named "?"), and the log says so."""
    ledger.boot("worker-1", epoch="w2")
    before = ledger._store.max_position()

    def unreadable(epoch):
        raise StoreError("read the epoch: connection refused")

    monkeypatch.setattr(ledger, "epoch", unreadable)
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(SweepFailed) as err:
        ledger.sweep("w2", attempts=2, gaps=(0,), sleep=lambda s: None)
    assert _messages(caplog, logging.WARNING)[0] == (
        "sweep of ? epoch w2: attempt 1 of 2 failed: read the epoch: connection refused"
    )
    assert _messages(caplog, logging.ERROR) == [
        "sweep of ? epoch w2 gave up after 2 attempts: read the epoch: connection refused; orphans may still show as running",
        "sweep of ? epoch w2: its slot could not be read, so process.sweep_failed was not recorded",
    ]
    assert (err.value.process, err.value.epoch, err.value.alert_recorded) == ("?", "w2", False)
    assert ledger._store.max_position() == before


def test_shutdown_during_a_gap_is_logged_with_the_attempt_not_started(ledger, clock, monkeypatch, caplog):
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 99))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        report = ledger.sweep(epoch, sleep=lambda s: ledger.begin_stop("w2"))
    assert _messages(caplog, logging.WARNING)[-1] == (
        "sweep of worker-1 epoch w2: the process has begun to stop; no attempt 2"
    )
    assert report == SweepReport(process="worker-1", epoch="w2", outcome="stopping", attempts=1)


# ------------------------------------------- found by mutation testing (docs/mutation.md)
def test_a_state_without_an_epoch_id_is_refused_by_name(ledger):
    """Mutation caught: `getattr(epoch, "epoch")` without its default (an AttributeError
    instead of InvalidInput naming `epoch.epoch`)."""

    class NoEpoch:
        process = "worker-1"

    with pytest.raises(InvalidInput) as err:
        ledger.sweep(NoEpoch())  # type: ignore[arg-type]
    assert err.value.where == "epoch.epoch"


def test_the_default_gap_wakes_when_the_sweeping_epoch_begins_to_stop(ledger, clock, monkeypatch):
    """Without `sleep=`, a gap is `wait_for_stop` on the sweeping epoch: a shutdown
    handler (here SIGALRM's, as a scheduler's SIGTERM handler would) that begins the
    stop ends the gap at once instead of after 60 s. Mutation caught: the wait asked
    about another epoch (None), so it sleeps the whole gap."""
    import signal
    import time

    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    monkeypatch.setattr(ledger, "orphan_view", Flaky(ledger, 99))
    previous = signal.signal(signal.SIGALRM, lambda *_: ledger.begin_stop("w2"))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        started = time.monotonic()
        report = ledger.sweep(epoch, attempts=2, gaps=(60.0,))
        waited = time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert report == SweepReport(process="worker-1", epoch="w2", outcome="stopping", attempts=1)
    assert waited < 30


def test_a_stop_seen_before_the_slot_is_known_logs_a_question_mark(ledger, clock, caplog):
    """Mutation caught: the placeholder for an unknown slot in the stopping record."""
    _previous_day(ledger, clock)
    ledger.boot("worker-1", epoch="w2")
    ledger.begin_stop("w2")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ledger.sweep("w2")
    assert _messages(caplog, logging.WARNING) == ["sweep of ? epoch w2: the process has begun to stop; no attempt 1"]


@pytest.mark.parametrize("then", ["stopping", "superseded"])
def test_a_stop_or_supersession_after_a_lost_round_counts_the_round(ledger, clock, monkeypatch, then):
    """The first round loses its race; before the second, the epoch begins to stop or a
    new boot supersedes it. Mutation caught: conflict_rounds dropped from those early
    returns."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    rounds = []

    def batch():
        rounds.append(1)
        other = open_ledger(ledger.url, clock=clock)
        if then == "stopping":
            other.begin_stop("w2")
        else:
            other.boot("worker-1", epoch="w3")
        other.close()
        return Losing(ledger)

    monkeypatch.setattr(ledger, "batch", batch)
    report = ledger.sweep(epoch)
    assert report == SweepReport(process="worker-1", epoch="w2", outcome=then, attempts=1, conflict_rounds=1)
    assert len(rounds) == 1


def test_O3_the_step_back_skip_says_why_word_for_word(ledger, clock):
    """An operator greps for it. Mutation caught: any change to the reason's text."""
    booted = _booted_after_a_step_back(ledger, clock)
    report = ledger.sweep(booted)
    now, boot = clock.now().isoformat(), booted.booted_at.isoformat()
    assert report.fallback_skipped == (
        f"wall clock {now} reads earlier than the boot instant {boot} (it stepped back): "
        "the time fallback recovers nothing in this sweep, rule O3"
    )
