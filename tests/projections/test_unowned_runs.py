"""Runs recorded with neither an epoch nor a process (rule O9): a service whose async
path leaves the claimant empty. No slot could judge them, and nothing said so: they
stayed `running` in silence, absent from `runs --orphaned` and from every sweep report.
Both backends; the real CLI."""

from __future__ import annotations

import json
import logging

import pytest

from epochledger import open_ledger
from epochledger.cli import main
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import LedgerDefaultSlot, Status
from epochledger.projections import orphans


def _unowned(ledger, run):
    """A run queued and started with no process and no epoch."""
    ledger.queue(run)
    ledger.start(run)


def test_O9_a_run_no_slot_can_judge_is_listed_by_runs_orphaned_and_every_sweep_report(ledger, clock, capsys, caplog):
    """Mutation caught: `orphans.unjudged` returning nothing (the old silence: the run
    is in no listing and no report, and stays running)."""
    ledger.boot("api-1", epoch="a1")
    _unowned(ledger, "u")
    ledger.queue("q")  # queued: no owner yet, nothing to judge
    clock.advance(600)
    clock.restart(30)
    assert main(["--store", ledger.url, "runs", "--orphaned", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["rule"], r["orphan"]) for r in rows] == [("u", orphans.UNJUDGED, None)]
    assert "no slot can judge this run: it was started with neither an epoch nor a process" in rows[0]["why"]
    assert main(["--store", ledger.url, "sweep", "--process", "api-1", "--dry-run"]) == 0
    assert "u: O9-no-slot: no slot can judge this run" in capsys.readouterr().out
    with caplog.at_level(logging.WARNING, logger="epochledger.sweep"):
        _, report = ledger.startup("api-1", epoch="a2")
    assert report.recovered == [] and [u.run for u in report.unjudged] == ["u"]
    assert any("1 running run(s) no slot can judge (rule O9): u" in m for m in caplog.messages)
    late = ledger.sweep("a1")  # a superseded epoch's report names it too
    assert late.outcome == "superseded" and [u.run for u in late.unjudged] == ["u"]
    assert main(["--store", ledger.url, "sweep", "--as-epoch", "a2", "--dry-run"]) == 0
    assert "u: O9-no-slot: no slot can judge this run" in capsys.readouterr().out
    with open_ledger(ledger.url, clock=clock) as other:  # another process records a2's shutdown
        other.begin_stop("a2")
    stopping = ledger.sweep("a2")
    assert stopping.outcome == "stopping" and [u.run for u in stopping.unjudged] == ["u"]
    assert main(["--store", ledger.url, "sweep", "--process", "api-1"]) == 0
    assert "u: O9-no-slot: no slot can judge this run" in capsys.readouterr().out
    assert ledger.get_run("u").status is Status.RUNNING  # judged by no one: named, never recovered


def test_O9_a_default_slot_named_at_init_judges_unowned_runs_by_O3(ledger, clock, capsys):
    """`init --default-slot api-1`: api-1's boots judge runs with neither epoch nor
    process by the time fallback (started before the boot instant - margin); another
    slot's sweep never does. Mutation caught: `judging_slot` ignoring the default
    slot (the run stays running, listed as no slot's)."""
    assert main(["--store", ledger.url, "init", "--default-slot", "api-1"]) == 0
    assert "default slot for runs with neither epoch nor process: api-1" in capsys.readouterr().out
    before = ledger._store.max_position()
    assert main(["--store", ledger.url, "init", "--default-slot", "api-1"]) == 0  # the same setting again
    assert ledger._store.max_position() == before
    capsys.readouterr()
    ledger.boot("api-1", epoch="a1")
    _unowned(ledger, "u")
    clock.advance(600)
    clock.restart(30)
    ledger.boot("worker-1", epoch="w1")
    _, other = ledger.startup("worker-1", epoch="w2")  # another slot: O3 is the default slot's alone
    assert other.recovered == [] and other.unjudged == []
    assert main(["--store", ledger.url, "runs", "--orphaned", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # judged: api-1's current epoch a1 booted before u started
    booted, report = ledger.startup("api-1", epoch="a2")
    assert [(v.run, v.rule, v.default_slot, v.relative_to) for v in report.recovered] == [
        ("u", orphans.FALLBACK, "api-1", "a2")
    ]
    assert report.unjudged == []
    recovered = ledger.history("u")[-1].event
    assert recovered.swept_by == "a2" and recovered.booted_at == booted.booted_at
    assert "the ledger's default slot for unowned runs" in recovered.reason and "rules O3, O9" in recovered.reason
    assert ledger.get_run("u").status is Status.FAILED_RESUMABLE


def test_O9_O4_the_default_slot_is_a_fact_of_the_log_and_a_replay_knows_it_as_it_was(ledger, clock):
    """The setting is an event (`ledger.default_slot`), so a fold of any prefix of the
    log gives the verdicts the live ledger gave there: before it, the run is no slot's;
    after it, an O3 orphan of the default slot's current epoch; cleared, no slot's again.
    Mutation caught: the orphans fold skipping the ledger's own events (the replay
    disagrees with the live view after the setting)."""
    ledger.boot("api-1", epoch="a1")
    _unowned(ledger, "u")
    clock.advance(600)
    clock.restart(30)
    ledger.boot("api-1", epoch="a2")
    seen = [(ledger._store.max_position(), [v for _, v in ledger.orphans()], [u for _, u in ledger.unjudged()])]
    ledger.set_default_slot("api-1", actor="operator")
    seen.append((ledger._store.max_position(), [v for _, v in ledger.orphans()], [u for _, u in ledger.unjudged()]))
    assert ledger.set_default_slot("api-1").default_slot == "api-1" and ledger._store.max_position() == seen[-1][0]
    ledger.set_default_slot(None)
    seen.append((ledger._store.max_position(), [v for _, v in ledger.orphans()], [u for _, u in ledger.unjudged()]))
    assert [([v.run for v in found], [u.run for u in left]) for _, found, left in seen] == [
        ([], ["u"]),
        (["u"], []),
        ([], ["u"]),
    ]
    assert [type(r.event) for r in ledger.events()].count(LedgerDefaultSlot) == 2
    for position, found, left in seen:
        replayed = orphans.fold(ledger.events(upto=position))
        assert orphans.verdicts(replayed) == found and orphans.unjudged(replayed) == left


@pytest.mark.parametrize("bad", [123, "", "a b", "x" * 201, b"api-1", ["api-1"]])
def test_O9_L4_a_bad_default_slot_is_refused_naming_the_field_and_appends_nothing(ledger, bad):
    before = ledger._store.max_position()
    with pytest.raises(InvalidInput, match=r"\$\.slot"):
        ledger.set_default_slot(bad)
    assert ledger._store.max_position() == before and ledger.settings() is None


def test_O9_clearing_a_default_slot_that_was_never_set_appends_nothing(ledger):
    before = ledger._store.max_position()
    assert ledger.set_default_slot(None).default_slot is None
    assert ledger._store.max_position() == before and ledger.settings() is None


def test_O9_a_default_slot_is_stamped_in_UTC_whatever_the_callers_offset() -> None:
    from datetime import UTC, timedelta, timezone

    from epochledger.ledger import settings
    from tests.conftest import T0

    plus2 = timezone(timedelta(hours=2))
    (event,) = settings.decide(LedgerDefaultSlot(at=T0.astimezone(plus2), slot="api"), None)
    assert event.at == T0 and event.at.tzinfo is UTC and event.slot == "api"


def test_O9_the_settings_fold_and_decider_refuse_an_event_of_another_stream_by_name() -> None:
    """A row of another stream handed to the settings Decider (a routing bug) fails
    loudly, naming the event, instead of folding to nothing or deciding nothing."""
    from epochledger.ledger import settings
    from epochledger.ledger.events import ProcessRetired
    from tests.conftest import T0

    stray = ProcessRetired(at=T0, process="w", epoch="e1")
    with pytest.raises(AssertionError, match=r"unreachable, but got: ProcessRetired\(") as folded:
        settings.evolve(None, stray)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match=r"unreachable, but got: ProcessRetired\(") as decided:
        settings.decide(stray, None)  # type: ignore[arg-type]
    assert str(folded.value).startswith("Expected code to be unreachable")
    assert str(decided.value).startswith("Expected code to be unreachable")
