"""The fleet now (`Reports.fleet`, the console's first page, rule H9): its counts by
status and its running runs by slot are the counts the runs view keeps beside its table
(projections/runs.py COUNTS, moved by every commit) and must be the numbers a fold over
the log gives, on both backends and on a read-only copy; its orphans and streaking
runs, read from the candidates and the open streaks alone, must be those of the whole
fleet."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.ledger import lifecycle
from epochledger.projections import engine, orphans, tables, tick_health
from epochledger.projections import runs as runs_view
from epochledger.reports import RUNNING_PREDICATE
from tests.conftest import T0, race, read_only_backup
from tests.helpers.engine_helpers import bulk_history, random_history
from tests.helpers.tick_helpers import make_driver


def _folded(lg: Ledger) -> tuple[dict[str, int], dict[str, int]]:
    """The counts by a fold of the whole log (the runs view's own evolve, no table):
    live runs by status, and the runs holding a launch slot by slot."""
    live = [s for s in runs_view.fold(lg.events()).values() if not s.deleted]
    by_status = Counter(str(s.status) for s in live)
    running = Counter(s.process or "" for s in live if lifecycle.counts_against_launch_limit(s.status, s.code))
    return dict(sorted(by_status.items())), dict(sorted(running.items()))


def _unowned(lg: Ledger, n: int) -> None:
    """Runs started with no slot (the "" row of running by slot) and one of them deleted."""
    for i in range(n):
        lg.queue(f"loose-{i}")
        lg.start(f"loose-{i}")
    lg.delete("loose-0")


@pytest.mark.parametrize("seed", [3, 11])
def test_H9_P4_fleet_counts_equal_a_fold_over_the_log(ledger: Ledger, seed: int) -> None:
    """Over random histories (every status, deletes, boots that supersede, runs with no
    slot), the fleet's counts are the fold's, before and after more events are
    appended (the view caught up by the call). Mutation caught: a count_key that counts
    a deleted run."""
    random_history(ledger, seed, runs=30, ops=260)
    _unowned(ledger, 3)
    now = ledger.fleet()
    by_status, running = _folded(ledger)
    assert now.by_status == by_status and now.running_by_slot == running
    assert len(by_status) >= 4 and sum(running.values()) > 0 and "" in running  # a history worth counting
    random_history(ledger, seed + 100, runs=40, ops=120)
    now = ledger.fleet()
    assert (now.by_status, now.running_by_slot) == _folded(ledger)
    assert now.lags and all(v.lag == 0 for v in now.lags if v.view == runs_view.NAME)


def test_H9_fleet_orphans_and_streaks_are_the_whole_fleets(ledger: Ledger, clock: ManualClock) -> None:
    """The fleet reads the orphan candidates and the runs its open streaks name, not
    the fleet: its orphans are the verdicts of the whole runs view, its streaking runs
    those the tick-health fold holds open, oldest first, a deleted run's left out.
    Failed before the fleet caught every view up first: the tick-health view was read
    as it stood, and a streak opened since was missing from the page."""
    random_history(ledger, 5, runs=20, ops=200)
    first = ledger.boot("ow", epoch="ow.e1")
    for r in ("orph-a", "orph-b", "kept"):
        ledger.queue(r, process="ow")
    ledger.start("orph-a", epoch=first)
    ledger.start("orph-b", process="ow")  # no owner epoch: the time fallback (rule O3)
    clock.advance(600)
    clock.restart(5)
    second = ledger.boot("ow", epoch="ow.e2")  # supersedes ow.e1 (rule O2)
    ledger.start("kept", epoch=second)
    with ledger.batch() as b:
        for r in ("stuck", "stuck-2", "gone", "fine"):
            b.queue(r)
            b.start(r)

    def poll(s: object) -> None:
        if getattr(s, "run", "") in ("stuck", "stuck-2", "gone"):
            raise TimeoutError("upstream did not answer")

    driver = make_driver(ledger, [("poll", poll)], tick_failure_deadline=3600)
    for t in range(3):
        driver.tick(tick_id=f"t{t}")
        clock.advance(60)
    ledger.delete("gone")
    now = ledger.fleet()
    whole = orphans.verdicts(ledger.orphan_view())
    assert {"orph-a", "orph-b"} <= {v.run for v in whole} and "kept" not in {v.run for v in whole}
    assert [(o.state.run, o.rule) for o in now.orphans if o.verdict is not None] == [(v.run, v.rule) for v in whole]
    folded = tick_health.open_streaks(tick_health.fold(ledger.events()))
    live = {s.run for s in runs_view.fold(ledger.events()).values() if not s.deleted}
    assert [s.state.run for s in now.streaking] == [st.run for st in folded if st.run in live]
    assert {"stuck", "stuck-2"} <= {s.state.run for s in now.streaking} and "gone" not in {
        s.state.run for s in now.streaking
    }
    assert [s.state.run for s in now.streaking] == [s.state.run for s in ledger.streaking().runs]
    assert [s.state.run for s in ledger.streaking(statuses=["queued"]).runs] == []


def test_H9_fleet_counts_of_a_read_only_copy_are_the_live_ones(tmp_path: Path) -> None:
    """A backup copy on a read-only mount cannot catch its views up: its counts are the
    stored view's folded on in memory, and equal the live ledger's, events appended
    after the view was last written included."""
    live = tmp_path / "live"
    live.mkdir()
    with open_ledger(f"sqlite:///{live}/l.db", clock=ManualClock(T0, uptime=5)) as lg:
        random_history(lg, 8, runs=25, ops=220)
        lg.fleet()  # the views as stored
        _unowned(lg, 2)  # after them: the copy folds these in memory
        expected = _folded(lg)
        assert (lg.fleet().by_status, lg.fleet().running_by_slot) == expected
        lg.queue("after-the-view")
    with read_only_backup(live / "l.db", tmp_path / "backup") as backup:
        with open_ledger(f"sqlite:///{backup}", create=False) as copy:
            assert copy._store.read_only
            now = copy.fleet()
            assert (now.by_status, now.running_by_slot) == _folded(copy)
            assert now.by_status["queued"] == expected[0].get("queued", 0) + 1


def _grouped(lg: Ledger) -> list[tuple[object, ...]]:
    """The kept counts as a GROUP BY of the runs view's table would give them."""
    with lg._store.transaction(commit=False) as cur:
        cur.execute(f"SELECT {', '.join(runs_view.COUNTS.reads)} FROM {lg._store.quote('view_runs')}")
        counted = Counter(g for values in cur.fetchall() if (g := runs_view.count_key(*values)) is not None)
    return [(*g, n) for g, n in sorted(counted.items())]


def test_R3_H9_the_kept_counts_are_the_tables_after_commits_rebuilds_and_a_lost_race(ledger: Ledger) -> None:
    """The counts the runs view keeps (COUNTS: moved by every commit, made anew at a
    rebuild's swap) are always a count of the table's rows: after incremental
    catch-ups, after a rebuild, and after a catch-up whose commit lost its race (its
    counts are not applied twice, rule R3). Mutation caught: a commit that adds the new
    rows' groups without taking away those of the rows they replace."""
    random_history(ledger, 21, runs=25, ops=150)
    engine.catch_up(ledger._store, runs_view)
    for round_ in range(3):
        random_history(ledger, 40 + round_, runs=25, ops=60)
        engine.catch_up(ledger._store, runs_view)
        kept, lag = engine.read_fleet_counts(ledger._store, catch_up_first=False)
        assert lag == 0 and kept == _grouped(ledger) and kept
    engine.rebuild(ledger._store, runs_view)
    assert engine.read_fleet_counts(ledger._store)[0] == _grouped(ledger)
    _unowned(ledger, 3)
    stale = engine.Runner(ledger._store, runs_view)
    stale.load()
    engine.catch_up(ledger._store, runs_view)  # another runner applies the events first
    stale.run()  # its commit loses the compare-and-set: it reloads and applies nothing twice
    kept = engine.read_fleet_counts(ledger._store)[0]
    assert kept == _grouped(ledger) and runs_view.fleet_of(kept) == _folded(ledger)


def test_H9_a_slots_running_runs_are_a_range_of_the_launch_index_on_sqlite(sqlite_ledger: Ledger) -> None:
    """The fleet page's link from a slot's count, the runs of that slot that hold a
    launch slot, is one page read through the launch index in key order, not a scan of
    the table. Mutation caught: the launch index dropped from INDEXES."""
    random_history(sqlite_ledger, 4, runs=10, ops=80)
    store = sqlite_ledger._store
    engine.catch_up(store, runs_view)
    where = [(RUNNING_PREDICATE, 1), ("process", ("w1",)), ("deleted", 0)]
    sql, params = tables.rows_query(store, "view_runs", [], where, after="run-000", limit=101)
    with store.transaction(commit=False) as cur:
        cur.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = " ".join(str(c) for row in cur.fetchall() for c in row)
    assert "USING INDEX view_runs__launch" in plan and "TEMP B-TREE" not in plan, plan


def test_R2_verify_names_a_kept_count_that_is_not_the_replays(ledger: Ledger) -> None:
    """`verify` compares the runs view's kept counts with a count of the replayed view
    (rule R2), read in the snapshot of its rows: a count edited by hand is named, the
    view and every other count agreeing."""
    random_history(ledger, 9, runs=15, ops=120)
    engine.catch_up(ledger._store, runs_view)
    assert all(v.difference is None for v in ledger.verify().views)
    table = ledger._store.quote(tables.counts_table("view_runs"))
    with ledger._store.transaction() as cur:
        cur.execute(f"UPDATE {table} SET n = n + 1 WHERE status = ?", ("failed",))
    found = next(v for v in ledger.verify().views if v.view == runs_view.NAME)
    assert found.difference is not None and found.difference.column == "counts"
    assert "kept count of ('failed', 0, '')" in found.difference.message
    assert found.difference.live == found.difference.replay + 1  # type: ignore[operator]


def _catch_up_racing(store_url: str, worker: int, go: Any, results: Any) -> None:
    """One of two OS processes catching the runs view up at once (the kept counts race)."""
    from epochledger.ledger.store import open_store

    store = open_store(store_url)
    try:
        go.wait()
        for _ in range(3):
            engine.catch_up(store, runs_view, batch=200)  # small batches: the commits interleave
        results.put((worker, "ok"))
    finally:
        store.close()


def test_R3_H9_two_processes_catching_up_at_once_keep_the_tables_counts(ledger: Ledger) -> None:
    """Two real processes catch the runs view up over the same new events at once: one
    commit wins each compare-and-set, the loser moves no count, and the kept counts are
    the table's and the fold's afterwards (rule R3)."""
    random_history(ledger, 13, runs=20, ops=100)
    engine.catch_up(ledger._store, runs_view)
    bulk_history(ledger, 3000, prefix="race")  # thousands of events for the two to share
    assert sorted(race(_catch_up_racing, ledger.url)) == [(1, "ok"), (2, "ok")]
    kept, lag = engine.read_fleet_counts(ledger._store, catch_up_first=False)
    assert lag == 0 and kept == _grouped(ledger) and runs_view.fleet_of(kept) == _folded(ledger)
