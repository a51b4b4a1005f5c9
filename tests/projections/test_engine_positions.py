"""The engine's shared pass (rule R3) when its views sit at different tracking positions,
deterministically: `run_together` hands one chunk to every view, and each must apply
exactly the events past its own position, none twice and none skipped. Before these
tests only a two-thread race (tests/projections/test_engine.py) or the PostgreSQL lock soak
(tests/ledger/test_pg_locks.py) reached these branches, and only now and then."""

from __future__ import annotations

import pytest

from epochledger.app import Ledger
from epochledger.projections import engine, epochs, runs, tables
from epochledger.replay import verify as verify_mod


def _four_events(ledger: Ledger) -> None:
    """Boot w, queue a, start a, checkpoint a: positions 1 to 4, run a at version 3."""
    ledger.boot("w", epoch="e1")
    ledger.queue("a", workflow="wf")
    ledger.start("a", epoch="e1", process="w")
    ledger.checkpoint("a", "node", "ref-1")
    assert ledger._store.max_position() == 4


def _nine_events(ledger: Ledger) -> None:
    """The four above, then b2 to b6 queued: positions 1 to 9."""
    _four_events(ledger)
    for n in range(2, 7):
        ledger.queue(f"b{n}", workflow="wf")
    assert ledger._store.max_position() == 9


def _version_of(ledger: Ledger, run: str) -> int:
    state, _ = engine.read_run(ledger._store, run, catch_up_first=False)
    assert state is not None
    return int(state.version)


def test_R3_a_shared_pass_applies_each_view_only_the_events_past_its_own_position(ledger: Ledger) -> None:
    """runs at position 3, epochs at 1 or 2 (and runs at 2, epochs at 1): the pass starts
    at the lower one, and the runs view must not be handed its last event again (its
    checkpoint would count twice). Mutations caught: `c.position >= r.position` for `>`
    when the chunk is cut at a runner's position, and `<=` for `<` in the test that
    hands a runner the whole chunk, or that test made against the chunk's second event
    (runs at 2: the chunk's first event is its own)."""
    _four_events(ledger)
    for runs_at, epochs_at in ((3, 1), (3, 2), (2, 1)):
        engine.rebuild(ledger._store, runs, upto=runs_at)
        engine.rebuild(ledger._store, epochs, upto=epochs_at)
        assert _version_of(ledger, "a") == runs_at - 1
        stats = engine.catch_up_all(ledger._store, [runs, epochs])
        assert [(s.view, s.position) for s in stats] == [("runs", 4), ("epochs", 4)]
        assert _version_of(ledger, "a") == 3
        for v in (runs, epochs):
            assert verify_mod.verify_view(ledger._store, v).difference is None


def test_R3_a_runner_refused_by_a_racing_one_reloads_and_reports_the_position_it_reached(ledger: Ledger) -> None:
    """Two runners of one view in one pass: the second is refused by the first's
    compare-and-set (ConflictError), reloads the position the first committed and has
    nothing left to apply. Its Stats say where the view is, not where it was before the
    race. Mutation caught: `return` for `r.load()` after the refusal (the runner gives
    up on the chunk with a stale position)."""
    _four_events(ledger)
    engine.rebuild(ledger._store, runs, upto=1)
    first, second = engine.Runner(ledger._store, runs), engine.Runner(ledger._store, runs)
    stats, gone = engine.run_together([first, second])
    assert gone == set()
    assert [(s.position, s.events) for s in stats] == [(4, 3), (4, 0)]
    assert _version_of(ledger, "a") == 3
    assert verify_mod.verify_view(ledger._store, runs).difference is None


def test_R3_a_runner_put_behind_the_pass_by_a_swap_reads_the_events_it_missed(ledger: Ledger) -> None:
    """While a pass runs, a rebuild swaps in a view at a position behind the pass (as
    a racing `rebuild` does): the live runner is refused, reloads that position and
    must read from there to the chunk's end, none skipped. Mutation caught: the
    `r.position < before` branch turned off (the runner applies the chunk alone and
    the events between its reloaded position and the chunk are lost)."""
    _four_events(ledger)
    for n in range(2, 6):
        ledger.queue(f"b{n}", workflow="wf")
    head = ledger._store.max_position()
    engine.rebuild(ledger._store, runs, upto=1)
    swapped: list[int] = []

    def progress(view: str, position: int, _head: int) -> None:
        if view == "runs" and position >= 3 and not swapped:  # the pass is past 3: put the view back at 1
            engine.rebuild(ledger._store, runs, upto=1)
            swapped.append(position)

    runner = engine.Runner(ledger._store, runs)
    stats, gone = engine.run_together([runner], progress=progress, batch=2)
    assert swapped and gone == set()
    assert stats[0].position == head
    assert _version_of(ledger, "a") == 3
    assert verify_mod.verify_view(ledger._store, runs).difference is None


def test_R3_a_runner_put_back_one_event_behind_the_pass_reads_from_there_up_to_the_pass_bound(
    ledger: Ledger,
) -> None:
    """Batches of three, bounded at 8: after the first batch ([2, 3, 4]) a rebuild swaps
    the view in at 3, one event behind the pass. The refused runner reloads 3 and must
    read 4 before the next batch, and never past the pass's `upto`. Mutations caught:
    the pass's read-up-to mark taken from another event of the batch than its last (the
    runner at 3 is then not seen as behind, and 4 is lost), and the catch-up read of a
    runner behind the pass unbounded (it runs to the log's head, past `upto`)."""
    _nine_events(ledger)
    engine.rebuild(ledger._store, runs, upto=1)
    swapped: list[int] = []

    def progress(view: str, position: int, _head: int) -> None:
        if not swapped:  # the pass is at 4: put the view back at 3
            engine.rebuild(ledger._store, runs, upto=3)
            swapped.append(position)

    stats, gone = engine.run_together([engine.Runner(ledger._store, runs)], upto=8, progress=progress, batch=3)
    assert (swapped, gone) == ([4], set())
    assert stats[0].position == 8 == tables.tracking(ledger._store, "runs")[1]
    assert _version_of(ledger, "a") == 3
    engine.catch_up(ledger._store, runs)
    assert verify_mod.verify_view(ledger._store, runs).difference is None


def test_W2_R3_a_catch_up_of_views_at_the_head_makes_no_runner_and_reads_no_event(ledger: Ledger, monkeypatch) -> None:
    """Views whose tracking positions are at the log's head have nothing to apply: the
    catch-up makes no runner and reads no event, and says what the pass would have said
    (no events, at their positions). One view behind, or a view of another VERSION, and
    the pass runs as before. Mutations caught: the head compared with the lowest
    position's `>` for `>=`, or only the first view's position looked at."""
    _four_events(ledger)
    engine.catch_up_all(ledger._store, [runs, epochs])
    made: list[str] = []
    read: list[int] = []
    runner, read_batches = engine.Runner, ledger._store.read_batches

    def counted_runner(store: object, module: object, **kw: object) -> engine.Runner:
        made.append(engine.spec(module).NAME)  # type: ignore[arg-type]
        return runner(store, module, **kw)  # type: ignore[arg-type]

    def counted_read(after: int, *args: object, **kw: object) -> object:
        read.append(after)
        return read_batches(after, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "Runner", counted_runner)
    monkeypatch.setattr(ledger._store, "read_batches", counted_read)
    stats = engine.catch_up_all(ledger._store, [runs, epochs])
    assert [(s.view, s.events, s.parked, s.position, s.rebuilt) for s in stats] == [
        ("runs", 0, 0, 4, False),
        ("epochs", 0, 0, 4, False),
    ]
    assert (made, read) == ([], [])
    engine.rebuild(ledger._store, epochs, upto=3)  # one view behind: the pass runs, for both
    made.clear(), read.clear()
    stats = engine.catch_up_all(ledger._store, [runs, epochs])
    assert [(s.view, s.events, s.position) for s in stats] == [("runs", 0, 4), ("epochs", 1, 4)]
    assert (made, read) == (["runs", "epochs"], [3])
    made.clear(), read.clear()
    ledger.checkpoint("a", "node", "ref-2")  # the head moves past both
    stats = engine.catch_up_all(ledger._store, [runs, epochs])
    assert [(s.view, s.position) for s in stats] == [("runs", 5), ("epochs", 5)]
    assert (made, read) == (["runs", "epochs"], [4])
    assert _version_of(ledger, "a") == 4


@pytest.mark.parametrize("via", ["rebuild_all", "run_together"])
def test_R3_a_rebuild_whose_shadow_is_swapped_in_by_another_leaves_the_other_views_of_its_pass_going(
    ledger: Ledger, via: str
) -> None:
    """runs and epochs rebuilt in one pass, batches of two; before the last batch another
    rebuild of runs (a second replica's) finishes the shared shadow and swaps it in. The
    pass's runs runner finds its shadow gone and drops out, named in the set the pass
    returns; epochs still gets the last batch, and both views end at the head.
    Mutations caught: `break` for `continue` after a runner drops out (the runners after
    it miss that batch), and the set naming None for the view that dropped out."""
    _nine_events(ledger)
    head = ledger._store.max_position()
    raced: list[int] = []

    def progress(view: str, position: int, _head: int) -> None:
        if view == "epochs" and position == 8 and not raced:
            raced.append(engine.rebuild(ledger._store, runs).position)

    if via == "rebuild_all":
        stats = engine.rebuild_all(ledger._store, [runs, epochs], progress=progress, batch=2)
        assert [(s.view, s.position) for s in stats] == [("runs", head), ("epochs", head)]
        assert [tables.tracking(ledger._store, v.NAME)[1] for v in (runs, epochs)] == [head, head]
        for v in (runs, epochs):
            assert verify_mod.verify_view(ledger._store, v).difference is None
    else:
        for v in (runs, epochs):
            key = v.NAME + engine.SHADOW
            tables.reset_view(ledger._store, key, engine.table_of(key), engine.column_spec(v), v.VIEW.VERSION)
        shadows = [engine.Runner(ledger._store, v, shadow=True) for v in (runs, epochs)]
        stats, gone = engine.run_together(shadows, progress=progress, batch=2)
        assert gone == {"runs"}
        assert (stats[1].view, stats[1].position) == ("epochs", head)
        assert tables.tracking(ledger._store, "epochs" + engine.SHADOW)[1] == head
    assert raced == [head]
