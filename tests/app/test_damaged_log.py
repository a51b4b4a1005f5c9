"""A damaged log on the write side and on the read commands (rules T4, T2, L5): one
undecodable row, or one removed row, must not disable a slot, make a run unwritable,
or turn every read into an error. Both backends; the damage is done to the database
directly, as a disk fault, a hand edit or a bad restore would."""

from __future__ import annotations

from datetime import timedelta

import pytest

from epochledger.cli import exit_code, main
from epochledger.ledger.codes import TICK_DEADLINE_EXCEEDED
from epochledger.ledger.errors import StreamGap
from epochledger.ledger.events import Status
from epochledger.ledger.store import Poison
from epochledger.tick import TickDriver
from tests.helpers.engine_helpers import corrupt, delete_row

BAD = b"\x00 no longer decodes"


def _position_of(ledger, stream, version):
    return next(r.position for r in ledger._store.read_stream(stream) if r.version == version)


def test_T4_a_bad_row_in_a_process_stream_leaves_the_slot_usable(ledger, clock, store_url, capsys):
    """Issue repro (item 8): one undecodable row in a process stream disabled the slot
    for good: boot, startup, `sweep --process` and every report naming its epochs
    exited 8. The write side folds the slot as the views do: the bad row is skipped
    (the views park it), the next event takes the version after it.
    Mutation caught: `_fold_stream` raising on a Poison (the old strict read)."""
    ledger.boot("worker-1", epoch="e0")
    e1 = ledger.boot("worker-1", epoch="e1")
    ledger.queue("r", process="worker-1")
    ledger.start("r", epoch="e1", process="worker-1")
    corrupt(store_url, _position_of(ledger, "process:worker-1", 1), BAD)  # e0's boot
    ledger.checkpoint("r", "extract", "ckpt/1", epoch="e1")  # a report naming the slot's epoch
    assert ledger.process("worker-1").version == 2
    assert main(["--store", store_url, "sweep", "--process", "worker-1", "--dry-run"]) == 0
    clock.advance(60)
    clock.restart(0)
    _, report = ledger.startup("worker-1", epoch="e2")
    assert [(v.run, v.rule) for v in report.recovered] == [("r", "O2-superseded")]
    assert ledger.process("worker-1").epoch("e1").superseded_by == "e2"
    assert main(["--store", store_url, "epochs"]) == 0
    del e1


def test_T2_T4_a_run_with_a_bad_row_can_still_be_failed_and_dead_lettered(ledger, clock, store_url):
    """Issue repro (item 8): a bad row in a run stream made the run unwritable and its
    tick streak unrecordable, so it hot-looped without ever being dead-lettered. Now the
    streak is recorded and the bound fires. Mutation caught: as above (strict fold)."""
    scheduler = ledger.boot("scheduler", epoch="s1")
    ledger.queue("r")
    ledger.start("r", epoch="s1")
    ledger.checkpoint("r", "extract", "ckpt/1", epoch="s1")
    ledger.queue("other")
    corrupt(store_url, _position_of(ledger, "run:r", 3), BAD)

    def advance(s):
        if s.run == "r":
            raise RuntimeError("payload does not decode")

    driver = TickDriver(ledger, {"advance": advance}, epoch=scheduler, tick_failure_deadline=timedelta(minutes=5))
    assert [f.run for f in driver.tick().failures] == ["r"]
    assert ledger.get_run("r").tick_streak is not None
    clock.advance(301)
    report = driver.tick()
    assert [d.run for d in report.dead_letters] == ["r"] and report.dead_letters[0].recorded
    state = ledger.get_run("r")
    assert (state.status, state.code) == (Status.FAILED, TICK_DEADLINE_EXCEEDED)
    ledger.fail("other", "TIMEOUT", resumable=True)  # and a plain fail of a damaged run works too
    assert ledger.get_run("other").status is Status.FAILED_RESUMABLE


def test_T4_read_commands_work_while_another_row_is_undecodable(ledger, clock, store_url, capsys):
    """Issue repro (item 9): `tick-health`, `runs --streaking` and `show` exited 8 while
    any row anywhere was undecodable: they folded the raw log. They read the views,
    which park the row. `history` of the damaged run shows the row in its place.
    Mutation caught: `tick.tick_health` folding `ledger.events()` again."""
    ledger.queue("a")
    ledger.queue("b")
    corrupt(store_url, _position_of(ledger, "run:b", 1), BAD)
    assert main(["--store", store_url, "tick-health"]) == 0
    assert main(["--store", store_url, "runs", "--streaking"]) == 0
    assert main(["--store", store_url, "show", "a"]) == 0
    assert main(["--store", store_url, "history", "b"]) == 0
    assert "UNDECODABLE" in capsys.readouterr().out
    history = ledger.history("b")
    assert isinstance(history[0], Poison) and history[0].version == 1


def test_L5_a_removed_row_is_named_as_a_gap_not_a_write_conflict(ledger, clock, store_url, capsys):
    """Issue repro (item 17): a deleted row made its run unwritable with a misleading
    "another writer appended first". The stream read checks the versions are
    contiguous and says what is wrong and where (exit 8). A ledger that holds the
    run's state in its cache reads only the events after it (rule W1), so the gap is
    found by the first read from zero: here a cold cache, as after a restart.
    Mutation caught: the contiguity check removed (ConflictError on the next write)."""
    ledger.queue("r")
    ledger.start("r")
    ledger.checkpoint("r", "n", "ckpt/1")
    removed = _position_of(ledger, "run:r", 2)
    delete_row(store_url, removed)
    before = ledger._store.max_position()
    ledger._cache.clear()
    with pytest.raises(StreamGap) as e:
        ledger.checkpoint("r", "n", "ckpt/2")
    assert (e.value.stream, e.value.missing, exit_code(e.value)) == ("run:r", 2, 8)
    assert e.value.before > removed and "an event was removed from the store" in str(e.value)
    assert ledger._store.max_position() == before
    assert main(["--store", store_url, "history", "r"]) == 8
    assert "stream run:r has a gap: version 2 is missing" in capsys.readouterr().err


def test_T4_O5_a_damaged_run_stream_is_named_and_the_slots_other_orphans_are_recovered(
    ledger, clock, store_url, capsys, caplog
):
    """The incident: one undecodable row in a run stream made every sweep of its slot
    fail with a false ConflictError after 8 re-reads (the views park the row, so the
    state the verdict was made on stays a version behind the stream), and the slot's
    other orphans stayed running. Now the damaged run is left unjudged and named with
    the bad row's position, the others are recovered, and the CLI exits 8 (a damaged
    log), not 6. Mutation caught: the conflict handler no longer looking for damage
    (`_damaged` not consulted: ConflictError out of startup, `b` still running)."""
    e1 = ledger.boot("w1", epoch="e1")
    for run in ("a", "b"):
        ledger.queue(run, process="w1")
        ledger.start(run, epoch=e1)
    ledger.checkpoint("a", "n", "ckpt/1", epoch=e1)
    bad = _position_of(ledger, "run:a", 3)
    corrupt(store_url, bad, BAD)
    clock.advance(60)
    clock.restart(0)
    assert main(["--store", store_url, "sweep", "--process", "w1", "--dry-run"]) == 8  # the preview says so too
    out = capsys.readouterr().out
    assert "would recover 1 orphan(s)" in out and f"a: not judged: its stream is damaged at position {bad}" in out
    with caplog.at_level("ERROR", logger="epochledger.sweep"):
        _, report = ledger.startup("w1", epoch="e2")
    assert report.outcome == "swept" and [v.run for v in report.recovered] == ["b"]
    assert [(d.run, d.position) for d in report.damaged] == [("a", bad)]
    assert any(f"run a not judged: its stream is damaged at position {bad}" in m for m in caplog.messages)
    assert ledger.get_run("b").status is Status.FAILED_RESUMABLE and ledger.get_run("a").status is Status.RUNNING
    damage = report.damage()
    assert damage is not None and damage.runs == [("a", bad)] and exit_code(damage) == 8
    capsys.readouterr()
    assert main(["--store", store_url, "sweep", "--process", "w1"]) == 8
    out, err = capsys.readouterr()
    assert f"a: not judged: its stream is damaged at position {bad}" in out
    assert "DamagedRuns" in err and f"a (position {bad})" in err and "ConflictError" not in err
