"""The engine's tracking under poison (rules T4, R3): which event a parked row is
stamped with, how many reads and evolves an event gets before it is parked, and what a
runner says about the position it reached. A torn read (a row that does not decode once
and does on a second read) is made by answering the engine's one-event re-read with the
stored record, as a read that raced a disk fault heals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from epochledger.app import Ledger
from epochledger.ledger.errors import RunNotFound
from epochledger.ledger.events import Recorded
from epochledger.ledger.store import Poison
from epochledger.projections import engine, runs, tables
from epochledger.projections.view import ViewSpec
from epochledger.replay import verify as verify_mod
from tests.helpers.engine_helpers import corrupt, delete_row

BAD = b"\x00 no longer decodes"


def _queued(ledger: Ledger, n: int) -> list[Recorded]:
    """n runs queued, a second apart: positions 1 to n, each with its own ledger time."""
    for i in range(1, n + 1):
        ledger.queue(f"r{i}", workflow="wf")
        ledger.clock.advance(1)  # type: ignore[attr-defined]
    records = list(ledger._store.read_all())
    assert [r.position for r in records] == list(range(1, n + 1))
    return records


def _torn_once(ledger: Ledger, monkeypatch: pytest.MonkeyPatch, *good: Recorded) -> Counter[int]:
    """The first read of each `good` record's row sees it torn (a Poison, as stored);
    every later read, however it is asked for, sees the record. Returns how often each
    position was read (every read of the store's log, the engine's re-reads among them)."""
    read_batches = ledger._store.read_batches
    healed = {g.position: g for g in good}
    reads: Counter[int] = Counter()

    def torn(after: int = 0, upto: int | None = None, batch: int = 500) -> Iterator[list[Recorded | Poison]]:
        for chunk in read_batches(after, upto, batch):
            reads.update(c.position for c in chunk)
            yield [healed[c.position] if c.position in healed and reads[c.position] > 1 else c for c in chunk]

    monkeypatch.setattr(ledger._store, "read_batches", torn)
    return reads


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_a_row_parked_after_a_healed_reread_carries_the_time_of_the_healed_event(
    ledger: Ledger, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of two: [1, 2] where 2 does not decode and heals on its re-read, then
    [3, 4] where 3 stays bad and 4 heals too. 3 is parked with the ledger time of the
    last event before it, 2 (healed), not 1: the record kept from the first batch is
    later than the last one the batch decoded. Mutations caught: `_latest` returning the
    batch's last decoded record (1) whatever the record kept; the healed keys' set not
    made anew after a batch (the second heal fails)."""
    records = _queued(ledger, 4)
    for p in (2, 3, 4):
        corrupt(store_url, p, BAD)
    reads = _torn_once(ledger, monkeypatch, records[1], records[3])
    stats = engine.rebuild(ledger._store, runs, batch=2)
    assert (stats.events, stats.parked, stats.position) == (4, 1, 4)
    parked = tables.parked(ledger._store, "runs")
    assert [(p[1], p[6]) for p in parked] == [(3, records[1].event.at.isoformat())]
    # 2 and 4 healed at their first re-read; 3 read MAX_ATTEMPTS times in all, 1 once
    assert reads == {1: 1, 2: 2, 3: engine.MAX_ATTEMPTS, 4: 2}
    state, _ = engine.read_run(ledger._store, "r4", catch_up_first=False)
    assert state is not None and state.run == "r4"
    state, _ = engine.read_run(ledger._store, "r2", catch_up_first=False)
    assert state is not None and state.run == "r2"
    with pytest.raises(RunNotFound):
        engine.read_run(ledger._store, "r3", catch_up_first=False)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_a_healed_event_of_an_entry_not_cached_folds_onto_the_entry_in_the_table(
    ledger: Ledger, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs view holds `a` queued (in its table, not in a new runner's cache). The
    batch [start a (torn once), queue b] names only `b` among its decoded records; when
    the start heals on its re-read, `a` is loaded from the table, the start folded onto
    it, and `a`'s row written with the batch. Mutations caught: the re-read loading the
    entries already cached instead of the missing ones, or storing them undecoded."""
    ledger.queue("a", workflow="wf")
    engine.catch_up(ledger._store, runs)
    ledger.start("a", process="w1")
    ledger.queue("b", workflow="wf")
    start = list(ledger._store.read_all())[1]
    corrupt(store_url, 2, BAD)
    reads = _torn_once(ledger, monkeypatch, start)
    stats = engine.catch_up(ledger._store, runs)
    assert (stats.events, stats.parked, stats.position) == (2, 0, 3)
    assert reads == {2: 2, 3: 1}
    assert tables.parked(ledger._store, "runs") == []
    state, _ = engine.read_run(ledger._store, "a", catch_up_first=False)
    assert (state.status, state.version) == ("running", 2)
    assert verify_mod.verify_view(ledger._store, runs).difference is None


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
@pytest.mark.parametrize("poison", [False, True], ids=["clean batch", "batch with poison"])
def test_T4_an_evolve_that_raises_is_tried_max_attempts_times_in_all_and_one_that_heals_is_folded(
    ledger: Ledger, store_url: str, monkeypatch: pytest.MonkeyPatch, poison: bool
) -> None:
    """r2's queue raises at every call, r3's at its first only: r2's is called
    MAX_ATTEMPTS times and parked with the last attempt's error, r3's is folded at its
    second call, and every other event is evolved once. In a clean batch (the fast fold,
    `_fold_clean`) and in one with an undecodable row (the loop of `Runner.apply`).
    Mutations caught: one attempt more or fewer, and a retry that evolves another view
    or record than the one that raised."""
    records = _queued(ledger, 5)
    if poison:
        corrupt(store_url, 5, BAD)
    calls: Counter[int] = Counter()
    real = runs.evolve

    def flaky(view: Any, rec: Recorded) -> Any:
        calls[rec.position] += 1
        if rec.position == 2 or (rec.position == 3 and calls[3] == 1):
            raise RuntimeError(f"attempt {calls[rec.position]}")
        return real(view, rec)

    monkeypatch.setattr(runs, "VIEW", msgspec.structs.replace(runs.VIEW, evolve=flaky))
    stats = engine.rebuild(ledger._store, runs)
    assert calls == ({1: 1, 2: engine.MAX_ATTEMPTS, 3: 2, 4: 1} | ({} if poison else {5: 1}))
    parked = [(p[1], p[4], p[5]) for p in tables.parked(ledger._store, "runs")]
    assert parked == [(2, f"RuntimeError: attempt {engine.MAX_ATTEMPTS}", engine.MAX_ATTEMPTS)] + (
        [(5, parked[-1][1], engine.MAX_ATTEMPTS)] if poison else []
    )
    assert (stats.events, stats.parked, stats.position) == (5, 2 if poison else 1, 5)
    # an event that decodes but that evolve refuses is stamped with its own ledger time
    assert tables.parked(ledger._store, "runs")[0][6] == records[1].event.at.isoformat()
    state, _ = engine.read_run(ledger._store, "r3", catch_up_first=False)
    assert (state.run, state.version) == ("r3", 1)
    with pytest.raises(RunNotFound):
        engine.read_run(ledger._store, "r2", catch_up_first=False)
    assert records[2].event.run == "r3"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_R3_a_runner_runs_to_upto_in_batches_and_reports_each_against_the_head_it_is_told(ledger: Ledger) -> None:
    """`Runner.run` is one view's pass: from its tracking position to `upto`, `batch`
    events at a time, calling `progress(view, position reached, head)` after each batch
    (head 0 unless told), and its Stats say where the view is. r1 is in the table at
    position 1 and its start (2) is in the first batch: it is looked up there. A shadow
    runner whose shadow is gone raises ShadowGone naming its tracking key. Mutations
    caught: each of `upto`, `progress`, `head`, `batch` not passed on, the default head 1
    (of `run` and of `run_together`), the Stats of another runner, ShadowGone without its
    key, a batch committed without the view's kept counts (rule H9's fleet counts), a
    view at position 1 taken for one rebuilt from zero (its entries not looked up)."""
    ledger.queue("r1", workflow="wf")
    ledger.start("r1", process="w1")
    for run in ("r2", "r3", "r4"):
        ledger.queue(run, workflow="wf")
    engine.rebuild(ledger._store, runs, upto=1)
    seen: list[tuple[str, int, int]] = []
    runner = engine.Runner(ledger._store, runs)
    stats = runner.run(upto=4, progress=lambda *a: seen.append(a), head=9, batch=2)
    assert (stats.view, stats.events, stats.parked, stats.position) == ("runs", 3, 0, 4)
    assert seen == [("runs", 3, 9), ("runs", 4, 9)]
    state, _ = engine.read_run(ledger._store, "r1", catch_up_first=False)
    assert (state.status, state.version) == ("running", 2)
    seen.clear()
    stats = runner.run(progress=lambda *a: seen.append(a))
    assert (stats.events, stats.position, seen) == (1, 5, [("runs", 5, 0)])
    assert tables.tracking(ledger._store, "runs") == (runs.VIEW.VERSION, 5)
    kept = engine.read_fleet_counts(ledger._store, catch_up_first=False)[0]  # moved by each batch's commit
    engine.rebuild(ledger._store, runs)  # the swap counts the table afresh
    assert kept == engine.read_fleet_counts(ledger._store, catch_up_first=False)[0] != []
    ledger.queue("r5", workflow="wf")
    seen.clear()
    together, gone = engine.run_together([engine.Runner(ledger._store, runs)], progress=lambda *a: seen.append(a))
    assert (gone, [(s.events, s.position) for s in together], seen) == (set(), [(1, 6)], [("runs", 6, 0)])
    shadow = engine.Runner(ledger._store, runs, shadow=True)
    for call in (shadow.load, shadow.run):
        with pytest.raises(engine.ShadowGone) as lost:
            call()
        assert lost.value.args == ("runs" + engine.SHADOW,)
    assert engine.run_together([shadow])[1] == {"runs"}  # the pass names the view that dropped out


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_a_poison_row_removed_before_its_reread_is_parked_not_replaced_by_the_next_event(
    ledger: Ledger, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Position 2 does not decode, and is removed (a hand edit, a bad restore) after the
    pass read it: its re-reads find nothing at 2 and it is parked; the event after it (3)
    is folded once, in its place in the batch, not taken for the healed 2. Mutation
    caught: the re-read asking for the first event after 1 with no upper bound."""
    _queued(ledger, 4)
    corrupt(store_url, 2, BAD)
    read_batches = ledger._store.read_batches

    def removed_after_read(
        after: int = 0, upto: int | None = None, batch: int = 500
    ) -> Iterator[list[Recorded | Poison]]:
        for chunk in read_batches(after, upto, batch):
            if any(c.position == 2 for c in chunk):
                delete_row(store_url, 2)
            yield chunk

    monkeypatch.setattr(ledger._store, "read_batches", removed_after_read)
    stats = engine.rebuild(ledger._store, runs)
    assert (stats.events, stats.parked, stats.position) == (4, 1, 4)
    assert [(p[1], p[5]) for p in tables.parked(ledger._store, "runs")] == [(2, engine.MAX_ATTEMPTS)]
    versions = {r: engine.read_run(ledger._store, r, catch_up_first=False)[0].version for r in ("r1", "r3", "r4")}
    assert versions == {"r1": 1, "r3": 1, "r4": 1}


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
@pytest.mark.parametrize("view", ["spans", "epochs"])
def test_T4_a_poison_first_in_its_batch_carries_the_time_of_the_last_event_of_the_batch_before(
    ledger: Ledger, store_url: str, view: str
) -> None:
    """Batches of three: [boot, queue a, queue b], then [4 (undecodable), ...]. The
    poison is parked with the time of queue b, the last event of the batch before,
    whether the view folds every event (spans: no TYPES) or only the boot (epochs: the
    rest of the batch is other views' events). Mutations caught: the last record of a
    clean batch forgotten or taken from another place than its end, and a typed view
    keeping the last event it folded rather than the batch's last; the parked count or
    the position of a pass taken from its last batch alone."""
    from epochledger.projections import registry

    module = next(v for v in registry.VIEWS if engine.spec(v).NAME == view)
    ledger.boot("w", epoch="e1")
    for run in ("a", "b", "c", "d", "e", "f"):
        ledger.clock.advance(1)  # type: ignore[attr-defined]
        ledger.queue(run, workflow="wf")
    records = list(ledger._store.read_all())
    corrupt(store_url, 4, BAD)
    stats = engine.rebuild(ledger._store, module, batch=3)  # [1, 2, 3], [4, 5, 6], [7]: the last parks none
    assert (stats.events, stats.parked, stats.position) == (7, 1, 7)
    parked = tables.parked(ledger._store, view)
    assert [(p[1], p[6]) for p in parked] == [(4, records[2].event.at.isoformat())]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_R3_rebuild_and_catch_up_pass_their_bound_batch_and_progress_on_and_behind_counts_from_the_view(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rebuild` and `catch_up` are one view's `rebuild_all` and `catch_up_all`: each
    reads up to `upto`, `batch` events at a time, and tells `progress` after each batch.
    `behind` is the log's head less the view's position: the whole log when the view was
    never built or is of another VERSION. Mutations caught: `upto`, `batch` or `progress`
    not passed on, another view's Stats, `behind` counting from 1 for a view not built,
    or reading the position of a view of another VERSION."""
    _queued(ledger, 7)
    store = ledger._store
    assert engine.behind(store, runs) == 7 and not engine.is_current(store, runs)
    seen: list[tuple[str, int, int]] = []
    stats = engine.rebuild(store, runs, upto=4, batch=3, progress=lambda *a: seen.append(a))
    assert (stats.view, stats.events, stats.position, stats.rebuilt) == ("runs", 4, 4, True)
    assert seen == [("runs", 3, 4), ("runs", 4, 4)]
    assert engine.behind(store, runs) == 3 and engine.is_current(store, runs)
    assert engine.status(store, runs) == (runs.VIEW.VERSION, 4)
    seen.clear()
    stats = engine.catch_up(store, runs, upto=6, batch=1, progress=lambda *a: seen.append(a))
    assert (stats.view, stats.events, stats.position, stats.rebuilt) == ("runs", 2, 6, False)
    assert seen == [("runs", 5, 7), ("runs", 6, 7)]
    seen.clear()
    stats = engine.catch_up(store, runs, batch=1, progress=lambda *a: seen.append(a))
    assert (stats.events, stats.position, seen) == (1, 7, [("runs", 7, 7)])
    assert engine.behind(store, runs) == 0
    monkeypatch.setattr(runs, "VIEW", msgspec.structs.replace(runs.VIEW, VERSION=runs.VIEW.VERSION + 1))
    assert engine.behind(store, runs) == 7 and not engine.is_current(store, runs)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_R3_a_poison_parked_again_after_a_lost_race_is_never_stamped_with_a_later_events_time(
    ledger: Ledger, store_url: str
) -> None:
    """Batches of three, 6 undecodable. After the first batch a rebuild swaps the view in
    at 5; the runner's batch [5, 6, 7] is refused (its compare-and-set on 4), it reloads
    5 and applies [6, 7] again. 6 is never stamped with the time of 7, an event after it
    (the last record of the refused batch, which the runner kept across the reload before
    `load` forgot it): the part applied again holds no event before 6, so its time is not
    known there (None), as for a poison first in a runner's first batch."""
    records = _queued(ledger, 9)
    corrupt(store_url, 6, BAD)
    engine.rebuild(ledger._store, runs, upto=1)
    swapped: list[int] = []

    def progress(view: str, position: int, _head: int) -> None:
        if not swapped:  # the pass is at 4: put the view at 5, ahead of it
            engine.rebuild(ledger._store, runs, upto=5)
            swapped.append(position)

    stats, _ = engine.run_together([engine.Runner(ledger._store, runs)], progress=progress, batch=3)
    assert swapped == [4] and stats[0].position == 9
    parked = tables.parked(ledger._store, "runs")
    assert [(p[1], p[6]) for p in parked] == [(6, None)]
    assert records[6].event.at > records[4].event.at  # the two times the stamp could have been


def _open_runs(view: dict[str, str], rec: Recorded) -> dict[str, str]:
    """A view with no `keys`, stored entry by entry: the runs not yet finished, by status."""
    from epochledger.ledger.events import RunEventBase, RunFinished

    event = rec.event
    if isinstance(event, RunFinished):
        return {k: v for k, v in view.items() if k != event.run}
    if isinstance(event, RunEventBase):
        return {**view, event.run: str(event.status)}
    return view


OPEN_RUNS = ViewSpec(NAME="test_open_runs", VERSION=1, initial=dict, evolve=_open_runs, STATE=str)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_R3_a_view_without_keys_deletes_the_row_of_an_entry_its_evolve_removed(ledger: Ledger) -> None:
    """A view stored entry by entry but with no `keys` (the engine diffs its whole state
    against what it flushed): a run that finishes leaves the view, and its row leaves
    the table with the batch that removed it; the rows stay the view's. Mutations
    caught: the rows to delete taken from the entries still there, or named None."""
    store = ledger._store
    for run in ("a", "b"):
        ledger.queue(run, workflow="wf")
    engine.catch_up(store, OPEN_RUNS)
    table = engine.table_of(OPEN_RUNS.NAME)
    assert [k for k, _ in tables.view_rows(store, OPEN_RUNS.NAME, table, [])[1]] == ["a", "b"]
    ledger.start("a", process="w1")
    ledger.finish("a")
    ledger.start("b", process="w1")
    engine.catch_up(store, OPEN_RUNS, batch=1)
    rows = tables.view_rows(store, OPEN_RUNS.NAME, table, [])[1]
    assert [(k, msgspec.json.decode(state)) for k, state in rows] == [("b", "running")]
    assert verify_mod.verify_view(store, OPEN_RUNS).difference is None
