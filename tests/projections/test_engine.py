"""The projection engine: exactly-once materialized views, rebuild, verify, poison
parking (rules R2, R3, T4). Every test runs on SQLite and PostgreSQL unless it says
why not."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.ledger.errors import ConflictError, RunNotFound
from epochledger.projections import engine, failures, registry, runs, tables
from epochledger.replay import verify as verify_mod
from tests.conftest import T0
from tests.helpers.engine_helpers import bulk_history, canonical, corrupt, random_history, tamper_view


def live_rows(store, module):
    tracking, rows = tables.view_rows(
        store, module.NAME, engine.table_of(module.NAME), [c for c, _ in engine.column_spec(module)]
    )
    return tracking, sorted(rows)


def replayed(store, module, upto=None):
    rows, parked = verify_mod.replay_rows(store, module, store.max_position() if upto is None else upto)
    return rows, parked


# ------------------------------------------------------------- rebuild == incremental
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(1, 99), max_size=4),
    batch=st.sampled_from([1, 3, 50, 10_000]),
    cache=st.sampled_from([2, 5, 100_000]),
)
def test_R3_rebuild_equals_incremental_catch_up(seed: int, cuts: list[int], batch: int, cache: int) -> None:
    """Catching up in random slices (random batch sizes, a tiny cache that forces
    reloads from the table) gives the same rows as one rebuild from zero and as an
    in-memory replay. SQLite only: hypothesis makes many ledgers; the PostgreSQL case
    is test_R3_rebuild_equals_incremental_on_both_stores."""
    tmp = tempfile.mkdtemp()
    try:
        clock = ManualClock(T0, uptime=60)
        with open_ledger(f"sqlite:///{tmp}/l.db", clock=clock) as lg:
            random_history(lg, seed, runs=6, ops=150)
            head = lg._store.max_position()
            for cut in sorted(set(cuts)):
                for v in registry.VIEWS:
                    engine.catch_up(lg._store, v, upto=head * cut // 100, batch=batch, cache_limit=cache)
            for v in registry.VIEWS:
                engine.catch_up(lg._store, v, batch=batch, cache_limit=cache)
            incremental = {v.NAME: live_rows(lg._store, v) for v in registry.VIEWS}
            for v in registry.VIEWS:
                engine.rebuild(lg._store, v)
                assert live_rows(lg._store, v) == incremental[v.NAME]
                assert incremental[v.NAME][1] == replayed(lg._store, v)[0]
                assert incremental[v.NAME][0] == (v.VERSION, head)
    finally:
        shutil.rmtree(tmp)


def test_R3_rebuild_equals_incremental_on_both_stores(ledger) -> None:
    random_history(ledger, 11, runs=10, ops=300)
    for v in registry.VIEWS:
        engine.catch_up(ledger._store, v, upto=40, batch=7, cache_limit=3)
    random_history(ledger, 12, runs=10, ops=200)
    for v in registry.VIEWS:
        engine.catch_up(ledger._store, v, batch=7, cache_limit=3)
        before = live_rows(ledger._store, v)
        assert before[1] == replayed(ledger._store, v)[0]
        stats = engine.rebuild(ledger._store, v)
        assert stats.rebuilt and stats.events == ledger._store.max_position()
        assert live_rows(ledger._store, v) == before
    # a second rebuild (table and index names reused after the swap)
    engine.rebuild(ledger._store, runs)
    assert live_rows(ledger._store, runs)[1] == replayed(ledger._store, runs)[0]


def test_R3_a_racing_runner_never_applies_a_batch_twice(ledger) -> None:
    """Two runners on one view: the one that folded a batch from a stale tracking
    position is refused (compare-and-set on the position) and writes nothing.
    Catches: tracking written without the compare (failure counts double); proved by
    dropping the `AND position=?` condition."""
    bulk_history(ledger, 50)
    engine.catch_up(ledger._store, failures)
    bulk_history(ledger, 50, prefix="more")
    slow = engine.Runner(ledger._store, failures)
    slow.load()
    chunk = next(ledger._store.read_batches(slow.position, None, 10_000))
    engine.catch_up(ledger._store, failures)  # another process applies the same events
    with pytest.raises(ConflictError) as refused:
        slow.apply(chunk, engine.Stats(view="failures"))
    assert refused.value.streams == ["failures"]  # the view whose tracking moved
    assert slow.run().events == 0  # reloads from the table: nothing left to do
    assert live_rows(ledger._store, failures)[1] == replayed(ledger._store, failures)[0]
    counts = {r[0]: r[3] for r in live_rows(ledger._store, failures)[1]}
    assert counts == {"failed_resumable TIMEOUT": 10, "failed_resumable ": 10}


def test_R3_rebuild_readers_see_the_old_view_until_the_swap(ledger) -> None:
    bulk_history(ledger, 300)
    engine.catch_up(ledger._store, runs)
    old = live_rows(ledger._store, runs)
    seen = []

    def progress(view: str, position: int, head: int) -> None:
        seen.append(live_rows(ledger._store, runs) == old)

    engine.rebuild(ledger._store, runs, progress=progress, batch=100)
    assert len(seen) > 3 and all(seen)
    assert live_rows(ledger._store, runs) == old


def test_R3_version_change_marks_the_view_for_rebuild(ledger, monkeypatch) -> None:
    bulk_history(ledger, 20)
    assert engine.catch_up(ledger._store, runs).rebuilt  # never built: built
    assert not engine.catch_up(ledger._store, runs).rebuilt
    monkeypatch.setattr(runs, "VIEW", msgspec.structs.replace(runs.VIEW, VERSION=runs.VERSION + 1))
    assert engine.behind(ledger._store, runs) == ledger._store.max_position()
    assert verify_mod.verify_view(ledger._store, runs).difference is not None
    stats = engine.catch_up(ledger._store, runs)
    assert stats.rebuilt and tables.tracking(ledger._store, "runs") == (runs.VIEW.VERSION, ledger._store.max_position())


# ------------------------------------------------------------------------ poison
def test_T4_poison_event_is_parked_and_the_view_moves_on(ledger, store_url) -> None:
    """An undecodable payload, and one that decodes but that evolve refuses (a
    run.started for a run that was never queued), are each parked with position, tag
    and error after bounded attempts; every other run is still applied; a rebuild
    after the payload is repaired applies it and clears the parked list."""
    bulk_history(ledger, 10)
    good = next(ledger._store.read_all(5, 6))
    corrupt(store_url, 6, b'{"type":"run.finished","at":"yesterday"}')
    corrupt(
        store_url,
        12,
        msgspec.json.encode({"type": "run.started", "at": "2026-09-09T14:00:00Z", "run": "ghost", "status": "running"}),
    )
    ledger.queue("after-poison")
    for v in registry.VIEWS:
        engine.catch_up(ledger._store, v)
    parked = tables.parked(ledger._store, "runs")
    assert [(p[1], p[3], p[5]) for p in parked] == [
        (6, "run.finished", engine.MAX_ATTEMPTS),
        (12, "run.started", engine.MAX_ATTEMPTS),
    ]
    assert "AssertionError" in parked[1][4] and "Invalid" in parked[0][4]
    assert parked[0][6] is not None  # ledger time of the last event seen
    found, lag = engine.read_runs(ledger._store)
    assert lag == 0 and "after-poison" in {s.run for s in found}
    assert "ghost" not in {s.run for s in found}
    assert verify_mod.verify_view(ledger._store, runs).difference is None
    # the failures view parks the undecodable one; the ghost start is no failure
    assert [p[1] for p in tables.parked(ledger._store, "failures")] == [6]
    # repair (e.g. a migration fixed the payload): the next rebuild retries it
    from epochledger.ledger import codec

    corrupt(store_url, 6, codec.encode(good.event))
    engine.rebuild(ledger._store, runs)
    assert [p[1] for p in tables.parked(ledger._store, "runs")] == [12]
    assert live_rows(ledger._store, runs)[1] == replayed(ledger._store, runs)[0]


def test_T4_parked_cli_lists_poison_and_exit_codes(ledger, store_url, capsys) -> None:
    bulk_history(ledger, 3)
    corrupt(store_url, 2, b"\x00not json")
    assert main(["--store", store_url, "rebuild"]) == 0
    assert main(["--store", store_url, "parked", "--json"]) == 0
    out = capsys.readouterr().out
    rows = msgspec.json.decode(
        out[out.index("\n[") + 1 :] if not out.startswith("[") else out
    )  # after rebuild's summaries
    assert {(r["view"], r["position"], r["attempts"]) for r in rows} == {(v.NAME, 2, 3) for v in registry.VIEWS}
    assert main(["--store", store_url, "parked", "nope"]) == 3


# ------------------------------------------------------------------------ verify
def test_R2_verify_names_the_first_difference(ledger, store_url, capsys) -> None:
    """Catches: a view row that drifted from the log (a bug in catch-up, a hand edit).
    Proved by tampering one column of one row."""
    bulk_history(ledger, 30)
    assert main(["--store", store_url, "verify"]) == 0
    assert "runs: not built yet" in capsys.readouterr().out
    assert main(["--store", store_url, "rebuild"]) == 0
    assert main(["--store", store_url, "verify"]) == 0
    assert "runs: ok" in capsys.readouterr().out
    tamper_view(store_url, "view_runs", "bulk-000007", "status", "running")
    assert main(["--store", store_url, "verify"]) == 10
    captured = capsys.readouterr()
    assert "row 'bulk-000007' column status: live 'running', replay 'finished'" in captured.out
    r = verify_mod.verify_view(ledger._store, runs).difference
    assert r is not None and (r.key, r.column) == ("bulk-000007", "status")
    tamper_view(store_url, "view_failures", "failed_resumable TIMEOUT", "transitions", 1)
    assert verify_mod.verify_view(ledger._store, failures).difference.column == "transitions"  # type: ignore[union-attr]
    engine.rebuild(ledger._store, runs)
    assert verify_mod.verify_view(ledger._store, runs).difference is None


# ------------------------------------------------------------------- fleet reads
def test_R3_show_and_runs_read_the_view_and_say_how_far_behind(ledger, store_url, capsys) -> None:
    ledger.queue("a", workflow="wf")
    assert main(["--store", store_url, "runs"]) == 0
    assert "a " in capsys.readouterr().out
    ledger.queue("b", workflow="wf")
    assert main(["--store", store_url, "runs", "--no-catch-up"]) == 0
    got = capsys.readouterr()
    assert "b " not in got.out and "1 positions behind" in got.err
    assert main(["--store", store_url, "show", "b", "--no-catch-up"]) == 4
    assert main(["--store", store_url, "show", "b", "--json"]) == 0
    shown = msgspec.json.decode(capsys.readouterr().out)
    shown.pop("tick_health")
    assert shown == msgspec.json.decode(msgspec.json.encode(_record(ledger.get_run("b"))))
    ledger.delete("b")
    with pytest.raises(RunNotFound) as e:
        engine.read_run(ledger._store, "b")
    assert e.value.deleted


def _record(state):
    from epochledger.cli.common import run_record

    return run_record(state)


# ------------------------------------------------------------------- live catch-up
def test_R3_follow_keeps_views_caught_up_live(ledger) -> None:
    """SQLite: polling; PostgreSQL: woken by LISTEN/NOTIFY (Store.wake_ups).
    Waits for the result (bounded), asserts no speed."""
    import threading
    import time

    from epochledger.ledger.store import open_store

    ledger.queue("first")
    follower_store = open_store(ledger.url)
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            engine.follow(follower_store, stop=stop, poll=0.05)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    try:
        bulk_history(ledger, 30)
        head = ledger._store.max_position()
        deadline = time.monotonic() + 30
        while any(engine.status(ledger._store, v) != (v.VERSION, head) for v in registry.VIEWS):
            assert not errors, errors
            assert time.monotonic() < deadline, [engine.status(ledger._store, v) for v in registry.VIEWS]
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(30)
        follower_store.close()
    assert not thread.is_alive() and not errors
    assert verify_mod.verify_view(ledger._store, runs).difference is None


def test_R3_a_views_commit_does_not_wait_for_the_disk_and_an_append_still_does(ledger, monkeypatch) -> None:
    """A view's commit (commit_view) is the one write not waited onto the disk: it moves
    only with its tracking position, so losing it in a crash leaves the view where the
    next catch-up applies the same events again, once (R3). Every other write keeps its
    wait: a rebuild's reset and swap, and every append on the same thread after a view's
    commit, even one that failed (a lost compare-and-set). Seen on the connection itself:
    SQLite's `PRAGMA synchronous` (1 NORMAL, 2 FULL), PostgreSQL's synchronous_commit."""
    store = ledger._store
    asked: list[tuple[bool, bool]] = []  # (commit, durable) of each write transaction, in turn
    seen: list[str] = []  # the connection's setting inside each of them
    real = store.transaction

    def setting(cur) -> str:
        if store.kind == "sqlite":
            cur.execute("PRAGMA synchronous")
        else:
            cur.execute("SHOW synchronous_commit")
        return str(cur.fetchone()[0])

    @contextmanager
    def spy(commit: bool = True, *, durable: bool = True):
        with real(commit, durable=durable) as cur:
            if commit:
                asked.append((commit, durable))
                seen.append(setting(cur))
            yield cur

    engine.catch_up_all(store)  # builds the views (a rebuild of each)
    bulk_history(ledger, 5)
    monkeypatch.setattr(store, "transaction", spy)
    engine.catch_up_all(store)  # the views exist: a commit_view of each, nothing else
    lazy, full = ("1", "2") if store.kind == "sqlite" else ("off", "on")
    assert asked and all(not durable for _, durable in asked), asked
    assert set(seen) == {lazy}, seen

    asked.clear()
    seen.clear()
    engine.rebuild(store, runs)  # a reset and a swap: durable, around the shadow's commit_views
    assert asked[0][1] and asked[-1][1] and not all(d for _, d in asked), asked
    assert seen[0] == seen[-1] == full

    with pytest.raises(ConflictError):  # a view's commit that fails: the setting is back after it
        tables.commit_view(store, "runs", -1, 0, engine.table_of("runs"), ["status"], [], [])
    monkeypatch.undo()
    with store.transaction() as cur:
        assert setting(cur) == full
    if store.kind == "sqlite":  # the append's own connection on this thread: FULL, as before
        ledger.queue("after-the-views")
        assert store._writer().execute("PRAGMA synchronous").fetchone()[0] == 2
    assert verify_mod.verify_view(store, runs).difference is None


# ------------------------------------------------------- views stored whole
def test_R2_views_stored_whole_rebuild_catch_up_verify_and_replay(ledger) -> None:
    """A view whose state is not a dict (the tick-health view, registered; the orphans
    fold, which the registry covers as runs + epochs instead) is materialized as one row:
    catch-up in slices equals a rebuild and a replay, and verify passes."""
    from epochledger.projections import orphans, tick_health
    from epochledger.replay import state_at

    random_history(ledger, 31, runs=8, ops=250)
    head = ledger._store.max_position()
    for v in (orphans, tick_health):
        engine.catch_up(ledger._store, v, upto=head // 3, batch=5)
        engine.catch_up(ledger._store, v, batch=5)
        incremental = live_rows(ledger._store, v)
        assert [r[0] for r in incremental[1]] == [engine.WHOLE]
        assert incremental[1] == replayed(ledger._store, v)[0]
        assert verify_mod.verify_view(ledger._store, v).difference is None
        engine.rebuild(ledger._store, v)
        assert live_rows(ledger._store, v) == incremental
        found, lag = engine.read_view(ledger._store, v)
        state = state_at(ledger._store, views=(v,))
        assert lag == 0
        assert canonical(found) == canonical(state.views[v.NAME])


def test_R3_a_view_built_by_another_writer_during_a_read_is_read_not_an_error(ledger, monkeypatch) -> None:
    """A reader that finds no table, while another writer builds the view and commits
    its table and tracking row together, then finds the tracking row: the view exists
    now, so it is read again. Before: "view runs has a tracking row but no table" (seen
    as a flaky `follow` test on PostgreSQL: a reader polling a view that follow was
    building for the first time). Mutation caught: the second read dropped."""
    ledger.queue("r1")
    real = tables.tracking
    built = []

    def tracking_after_a_build(store, view):  # the other writer's build lands here
        if not built:
            built.append(view)
            engine.catch_up(store, runs)
        return real(store, view)

    monkeypatch.setattr(tables, "tracking", tracking_after_a_build)
    found, _lag = engine.read_view(ledger._store, runs, catch_up_first=False)
    assert built and set(found) == {"r1"}


def test_R3_two_runners_building_a_view_at_once_neither_fails_nor_doubles(ledger) -> None:
    """Two replicas booting on a fresh ledger both catch up an unbuilt view, so both
    rebuild it into the same shadow. Catches: the loser, finding the shadow swapped in
    under it, failing ("view runs__rebuild has no tracking row") instead of seeing
    the view it was building live."""
    import threading

    bulk_history(ledger, 300)
    barrier, errors = threading.Barrier(2), []

    def go() -> None:
        try:
            barrier.wait()
            for v in registry.VIEWS:
                engine.catch_up(ledger._store, v, batch=50)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for v in registry.VIEWS:
        assert verify_mod.verify_view(ledger._store, v).difference is None


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # a fold in memory: the backend is not its subject
def test_R2_a_view_skips_only_events_its_evolve_leaves_alone(ledger, clock) -> None:
    """A view's TYPES (projections/view.py) lets the engine skip its evolve for every
    other event class; folding only those events must equal folding them all, for
    every registered view that declares TYPES, over histories of run and slot events
    (boots on hosts with host boot ids, reboots, stops, fenced reports, deletions).
    Mutation: drop ProcessBooted from epochs.TYPES (or RunFailed from failures.TYPES)
    and the filtered fold differs."""
    from tests.helpers.incident_histories import redeploy_0220

    redeploy_0220(ledger, clock)
    random_history(ledger, 7, runs=12, ops=200)
    for n in range(3):
        ledger.boot("w9", epoch=f"h{n}", host="host-9", host_boot=f"hb{n // 2}")
        clock.advance(1)
    ledger.stop("h2")
    records = list(ledger._store.read_all())
    typed = [v for v in registry.VIEWS if engine.types_of(v) is not None]
    assert {v.NAME for v in typed} >= {"runs", "epochs", "epoch_index", "hosts", "failures"}
    for v in typed:
        types = engine.types_of(v)
        assert types is not None
        kept = [r for r in records if type(r.event) in types]
        assert kept and len(kept) < len(records) or v.NAME == "runs", v.NAME  # the test skips something
        assert canonical(v.fold(kept)) == canonical(v.fold(records)), v.NAME


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_a_view_that_skips_run_events_parks_with_the_ledger_time_of_the_event_before(ledger, store_url) -> None:
    """Rebuilt in one pass, the epochs view is handed no run events (its TYPES), yet a
    poison it parks carries the ledger time of the last event before it in the log,
    as the runs view's row does: the same for every view. Mutation: keep `last` to
    the records a view folded (drop `_latest`) and the epochs view's parked_at is None."""
    from epochledger.projections import epochs

    bulk_history(ledger, 10)
    before = next(ledger._store.read_all(5, 6))
    corrupt(store_url, 7, b'{"type":"run.finished","at":"yesterday"}')
    engine.rebuild_all(ledger._store)
    times = {v.NAME: [(p[1], p[6]) for p in tables.parked(ledger._store, v.NAME)] for v in (runs, epochs)}
    assert times["runs"] == times["epochs"] == [(7, before.event.at.isoformat())]


# ------------------------------------------------------------- indexes (INDEXES)
def _plan(store, sql: str, params) -> str:
    with store.transaction(commit=False) as cur:
        cur.execute(("EXPLAIN QUERY PLAN " if store.kind == "sqlite" else "EXPLAIN ") + sql, params)
        return " ".join(str(c) for row in cur.fetchall() for c in row)


def test_R3_view_indexes_exist_after_every_rebuild_and_swap(ledger, monkeypatch) -> None:
    """The runs view's INDEXES are on the live table under their names after the first
    build, after each rebuild (the names are reused across swaps: a second rebuild used
    to be where a carried-over name would collide), after a VERSION bump's rebuild, and
    never on the shadow table while it is built. Both stores."""
    from tests.helpers.engine_helpers import view_indexes

    want = {tables.index_name("view_runs", n): cols for n, cols in runs.INDEXES.items()}
    assert want == {
        "view_runs__status": ("status", "k", "deleted", "process", "epoch"),
        "view_runs__parent": ("parent", "k"),
        "view_runs__launch": ("counts_against_launch_limit", "deleted", "process", "k"),
    }
    random_history(ledger, 5, runs=8, ops=120)
    engine.catch_up(ledger._store, runs)  # first build: a rebuild from zero and its swap
    assert view_indexes(ledger._store, "view_runs") == want
    for _ in range(2):
        engine.rebuild(ledger._store, runs)
        assert view_indexes(ledger._store, "view_runs") == want
    # a shadow being built has none (killed rebuilds resume into it)
    tables.reset_view(ledger._store, "runs__rebuild", "view_runs__rebuild", engine.column_spec(runs), runs.VERSION)
    assert view_indexes(ledger._store, "view_runs__rebuild") == {}
    engine.rebuild(ledger._store, runs)  # resumes from the reset shadow, swaps it in
    assert view_indexes(ledger._store, "view_runs") == want
    assert not ledger._store.table_exists("view_runs__rebuild")
    monkeypatch.setattr(runs, "VIEW", msgspec.structs.replace(runs.VIEW, VERSION=runs.VERSION + 1))
    assert engine.catch_up(ledger._store, runs).rebuilt
    assert view_indexes(ledger._store, "view_runs") == want
    assert live_rows(ledger._store, runs)[1] == replayed(ledger._store, runs)[0]
    # every other view has the indexes it declares (the spans view its interval index), and only those
    for v in registry.VIEWS:
        if v.NAME != runs.NAME:
            engine.catch_up(ledger._store, v)
            declared = {tables.index_name(engine.table_of(v.NAME), n): cols for n, cols in v.INDEXES.items()}
            assert view_indexes(ledger._store, engine.table_of(v.NAME)) == declared, v.NAME
    assert {v.NAME for v in registry.VIEWS if v.INDEXES} == {"runs", "spans"}


def test_R3_the_fleet_reads_use_the_status_index_on_sqlite(sqlite_ledger) -> None:
    """`runs --status S` and the sweep's candidates are read through the status index,
    not by scanning the table (docs/benchmarks.md, "Fleet size"): SQLite's plan for the
    engine's own statements names it, with no sort for the key order."""
    from epochledger.ledger import lifecycle
    from epochledger.ledger.events import Status

    random_history(sqlite_ledger, 6, runs=8, ops=120)
    store = sqlite_ledger._store
    engine.catch_up_all(store, [runs, registry.by_name("epochs")])
    sql, params = tables.rows_query(store, "view_runs", [], [("status", ("running",))])
    listing = _plan(store, sql, params)
    assert "USING INDEX view_runs__status (status=?)" in listing and "TEMP B-TREE" not in listing, listing
    statuses = [str(s) for s in Status if lifecycle.can_be_orphaned(s)]
    sql, params = tables.candidates_query(store, "view_runs", "view_epochs", statuses, ["w1"])
    plan = _plan(store, sql, params)
    assert "SEARCH r USING INDEX view_runs__status (status=?)" in plan and "TEMP B-TREE" not in plan, plan


def test_R3_a_swap_drops_the_old_table_with_secure_delete_fast_and_restores_it_on_sqlite(sqlite_ledger) -> None:
    """A rebuild's swap drops the old live table under secure_delete FAST (W1: the
    build's default ON wrote the old table's whole size again to zero it), and leaves
    the connection's own setting as it found it, ON or OFF, for everything else."""
    random_history(sqlite_ledger, 7, runs=8, ops=120)
    store = sqlite_ledger._store
    engine.catch_up(store, runs)
    conn = store._reader()
    for setting in (1, 0):
        conn.execute(f"PRAGMA secure_delete={setting}")
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            engine.rebuild(store, runs)
        finally:
            conn.set_trace_callback(None)
        drop = statements.index('DROP TABLE IF EXISTS "view_runs"')
        assert statements[drop - 1 : drop + 2] == [
            "PRAGMA secure_delete=FAST",
            statements[drop],
            f"PRAGMA secure_delete={setting}",
        ], statements
        assert int(conn.execute("PRAGMA secure_delete").fetchone()[0]) == setting
        assert live_rows(store, runs)[1] == replayed(store, runs)[0]
    conn.execute("PRAGMA secure_delete=1")


def test_R2_a_views_KEY_is_its_keys_for_every_event_of_its_TYPES(ledger, clock) -> None:
    """A view's KEY (projections/view.py) lets the engine take a clean batch's dirty keys
    as `rec.event.<KEY>` in C instead of calling keys(rec) per event: for every event
    of its TYPES the two must agree. Mutation: KEY = "workflow" on the runs view, or
    "epoch" on the epochs view, and this fails."""
    from tests.helpers.incident_histories import redeploy_0220

    redeploy_0220(ledger, clock)
    random_history(ledger, 8, runs=12, ops=200)
    records = list(ledger._store.read_all())
    keyed = [v for v in registry.VIEWS if v.KEY is not None]
    assert {v.NAME for v in keyed} == {"runs", "epochs"}
    for v in keyed:
        types = engine.types_of(v)
        assert types is not None, v.NAME  # KEY is only read with TYPES
        mine = [r for r in records if type(r.event) in types]
        assert mine, v.NAME
        for r in mine:
            assert v.keys(r) == (getattr(r.event, v.KEY),), (v.NAME, r)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_an_evolve_that_raises_in_a_clean_batch_parks_that_event_and_folds_the_rest(
    ledger, store_url, monkeypatch
) -> None:
    """A batch with no poison is folded by the engine's fast loop (Runner._fold_clean);
    an evolve that raises there (a bug in a view) is retried, parked with its own ledger
    time, and the fold goes on with the next event of the batch: the
    same rows as a fold that skips exactly those events. Mutation: resume the loop at
    the raising event (or at the batch's start) and the rows or the parked list differ."""
    bulk_history(ledger, 30)
    records = list(ledger._store.read_all())
    bad = {records[4].position, records[40].position, records[41].position, records[-1].position}
    real = runs.evolve

    def buggy(view, rec):
        if rec.position in bad:
            raise RuntimeError(f"bug at {rec.position}")
        return real(view, rec)

    # the oracle: the plain loop, one event at a time, skipping what raises (and what
    # a skipped event makes the fold refuse after it, e.g. a start whose queue raised)
    expected: dict = {}
    raised = []
    for r in records:
        try:
            expected = buggy(expected, r)
        except Exception as e:
            raised.append((r.position, f"{type(e).__name__}: {e}"))
    assert len(raised) > len(bad)
    monkeypatch.setattr(runs, "VIEW", msgspec.structs.replace(runs.VIEW, evolve=buggy))
    engine.rebuild(ledger._store, runs, batch=50)
    parked = tables.parked(ledger._store, "runs")
    assert [(p[1], p[4], p[5]) for p in parked] == [(p, e, engine.MAX_ATTEMPTS) for p, e in raised]
    by_position = {r.position: r for r in records}
    assert [p[6] for p in parked] == [by_position[p - 1].event.at.isoformat() for p, _ in raised]
    got = {k: msgspec.json.decode(state, type=runs.STATE) for k, *_, state in live_rows(ledger._store, runs)[1]}
    assert got == expected
