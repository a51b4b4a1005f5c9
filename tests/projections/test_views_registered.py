"""The views the issue names are materialized (runs, epochs/orphans, tick health,
failure counts), and orphan verdicts read from the materialized runs + epochs views
equal the verdicts of a fold of the log (rule O4: same live, replayed or rebuilt)."""

from __future__ import annotations

from datetime import timedelta

from epochledger import ManualClock
from epochledger.app import Ledger
from epochledger.projections import (
    decisions,
    engine,
    epoch_index,
    epochs,
    failures,
    hosts,
    orphans,
    registry,
    runs,
    spans,
    tick_health,
)
from epochledger.replay import verify as verify_mod


def test_R3_registry_holds_every_fleet_view() -> None:
    assert set(registry.VIEWS) == {
        m.VIEW for m in (runs, epochs, epoch_index, hosts, tick_health, failures, spans, decisions)
    }
    assert len({v.NAME for v in registry.VIEWS}) == len(registry.VIEWS)


def test_O4_orphan_verdicts_from_materialized_views_equal_the_fold(ledger: Ledger, clock: ManualClock) -> None:
    a1 = ledger.boot("a")
    ledger.boot("b")
    for i in range(6):
        ledger.queue(f"r{i}")
        ledger.start(f"r{i}", epoch=a1.epoch if i % 2 else None, process="a")
    clock.advance(120)
    engine.catch_up(ledger._store, runs)
    engine.catch_up(ledger._store, epochs)
    clock.restart(after=30)
    a2 = ledger.boot("a")  # supersedes a1: the odd runs are O2 orphans, the even ones O3
    ledger.stop(ledger.process("b").current.epoch)  # type: ignore[union-attr]
    live_runs, lag_runs = engine.read_view(ledger._store, runs)
    live_epochs, lag_epochs = engine.read_view(ledger._store, epochs)
    assert lag_runs == lag_epochs == 0
    live_hosts, _ = engine.read_view(ledger._store, hosts)
    from_views = orphans.View(processes=live_epochs, runs=live_runs, hosts=live_hosts)
    from_log = orphans.fold(ledger.events())
    epoch = from_log.epoch("a", a2.epoch)
    expected = orphans.verdicts(from_log, epoch, timedelta(seconds=1))
    assert expected and {v.run for v in expected} == {f"r{i}" for i in range(6)}
    assert orphans.verdicts(from_views, epoch, timedelta(seconds=1)) == expected
    assert verify_mod.verify_view(ledger._store, epochs).difference is None
