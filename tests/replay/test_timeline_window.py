"""A window of the incident picture is read in proportion to the window (rule V2), and
is the page the whole log gives: every byte, on generated ledgers (instants out of log
order across runs and within one, runs queued again, fenced, recovered, corrected and
deleted, slots booted, stopped, exited and rebooted under them) and on the recorded
incidents with a what-if's flags, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from epochledger import open_ledger
from epochledger.demo import run_demo
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessExited,
    ProcessStopped,
    ProcessStopping,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    Recorded,
    RunCancelled,
    RunCheckpointed,
    RunCorrected,
    RunDeleted,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunFinished,
    RunPaused,
    RunQueued,
    RunRecovered,
    RunResumed,
    RunStarted,
    Status,
    process_stream,
    run_stream,
)
from epochledger.ledger.store import Append, Store, open_store
from epochledger.ndjson import import_lines
from epochledger.projections import engine, spans
from epochledger.replay import timeline
from epochledger.replay.whatif import whatif
from tests.conftest import new_pg_store
from tests.helpers import fleet_ledgers
from tests.helpers import incident_histories as incidents

T0 = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)
SLOTS = ("w0", "w1", "w2")
RUNS = tuple(f"r{i}" for i in range(8))

# One step of a generated ledger: (what, which run or slot, minutes from T0 of its instant).
# The minutes are drawn independently, so instants go back and forth across positions.
STEP = st.tuples(
    st.sampled_from(
        [
            "queue",
            "start",
            "checkpoint",
            "finish",
            "fail",
            "pause",
            "resume",
            "undecodable",
            "fence",
            "recover",
            "correct",
            "delete",
            "cancel",
            "boot",
            "reboot",
            "stop",
            "stopping",
            "exit",
            "sweep-failed",
            "sweep-skipped",
        ]
    ),
    st.integers(0, 7),
    st.integers(-120, 600),
)


class Recorder:
    """Appends the generated steps to a store, each stream at its next version."""

    def __init__(self, store: Store):
        self.store = store
        self.versions: dict[str, int] = {}
        self.epochs: dict[str, list[str]] = {}
        self.host_boots: dict[str, int] = {}

    def put(self, stream: str, event: Any) -> None:
        version = self.versions.get(stream, 0) + 1
        self.store.append([Append(stream, version, event)])
        self.versions[stream] = version

    def step(self, what: str, k: int, minutes: int) -> None:
        at = T0 + timedelta(minutes=minutes)
        run, slot = RUNS[k], SLOTS[k % len(SLOTS)]
        epochs = self.epochs.setdefault(slot, [])
        epoch = epochs[-1] if epochs else None
        r = run_stream(run)
        run_events = {
            "queue": lambda: RunQueued(
                at=at, run=run, status=Status.QUEUED, workflow="etl", process=None if k == 7 else slot
            ),
            "start": lambda: RunStarted(at=at, run=run, status=Status.RUNNING, process=slot, epoch=epoch),
            "checkpoint": lambda: RunCheckpointed(at=at, run=run, status=Status.RUNNING, node="n", ref="c/1"),
            "finish": lambda: RunFinished(at=at, run=run, status=Status.FINISHED),
            "fail": lambda: RunFailed(
                at=at, run=run, status=Status.FAILED_RESUMABLE, code="TIMEOUT" if k % 2 else "", resumable=True
            ),
            "pause": lambda: RunPaused(at=at, run=run, status=Status.PAUSED_OPERATOR, kind="operator"),
            "resume": lambda: RunResumed(at=at, run=run, status=Status.QUEUED, by="operator"),
            # appended, but no reader decodes it (a value its type does not allow): left out
            # of the page as the views park it (rule T4)
            "undecodable": lambda: RunResumed(at=at, run=run, status=Status.QUEUED, by="op"),  # type: ignore[arg-type]
            "fence": lambda: RunFenced(
                at=at, run=run, epoch=epoch or "gone", refused="finish", why="superseded", reported="finished"
            ),
            "recover": lambda: RunRecovered(
                at=at,
                run=run,
                status=Status.FAILED_RESUMABLE,
                code="PROCESS_ORPHANED",
                rule="O2",
                reason="its owner was superseded",
                swept_by=epoch or "e?",
                swept_by_process=slot if k != 6 else "sweeper",
            ),
            "correct": lambda: RunCorrected(
                at=at, run=run, status=Status.FINISHED if k % 2 else Status.RUNNING, to="finished", actor="op"
            ),
            "delete": lambda: RunDeleted(at=at, run=run, status=Status.CANCELLED),
            "cancel": lambda: RunCancelled(at=at, run=run, status=Status.CANCELLED),
        }
        if what in run_events:
            self.put(r, run_events[what]())
            return
        p = process_stream(slot)
        if what in ("boot", "reboot"):
            if what == "reboot":  # the same machine with another host boot id: its epochs there are over (O7)
                self.host_boots[slot] = self.host_boots.get(slot, 0) + 1
            new = f"{slot}.e{len(epochs) + 1}"
            booted_at = at - timedelta(minutes=k)  # a boot shows at its booted_at, before it was recorded
            machine = "m-shared" if k % 2 else f"m-{slot}"
            hb = f"hb-{machine}-{self.host_boots.get(slot, 0)}"
            self.put(
                p, ProcessBooted(at=at, process=slot, epoch=new, booted_at=booted_at, machine=machine, host_boot=hb)
            )
            epochs.append(new)
            return
        if epoch is None:
            return  # a slot event before any boot: the generator records none
        process_events = {
            "stop": lambda: ProcessStopped(at=at, process=slot, epoch=epoch),
            "stopping": lambda: ProcessStopping(at=at, process=slot, epoch=epoch),
            "exit": lambda: ProcessExited(at=at, process=slot, epoch=epoch, observed_by="probe", exit_code=1),
            "sweep-failed": lambda: ProcessSweepFailed(at=at, process=slot, epoch=epoch, attempts=3, error="locked"),
            "sweep-skipped": lambda: ProcessSweepSkipped(at=at, process=slot, epoch=epoch, why="clock stepped back"),
        }
        self.put(p, process_events[what]())


def whole(store: Store, **window: Any) -> str:
    """The page the whole log gives (the read every window was made by before V2)."""
    h = timeline.whole_history(store)
    for run in window.get("runs") or ():
        assert run in h.bars
    return timeline.render(h, **window)


def same_page(store: Store, **window: Any) -> None:
    assert (
        timeline.window_history(
            store, window["start"], window["end"], cursor=window.get("cursor"), runs=window.get("runs")
        )
        is not None
    )
    assert timeline.page(store, **window) == whole(store, **window)


WINDOW = st.tuples(st.integers(-180, 660), st.integers(1, 600), st.one_of(st.none(), st.integers(-200, 700)))


def _window(lo: int, length: int, at: int | None) -> dict[str, Any]:
    start = T0 + timedelta(minutes=lo)
    return {
        "start": start,
        "end": start + timedelta(minutes=length),
        "cursor": None if at is None else T0 + timedelta(minutes=at),
    }


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(STEP, min_size=1, max_size=40),
    windows=st.lists(WINDOW, min_size=1, max_size=4),
    only=st.lists(st.integers(0, 7), max_size=2),
)
# Found by the law: r0 recovered by a sweep of w0, the slot r3 is queued on; the page of
# r3 alone shows w0's lane, so that sweep's marker too, made of r0's stream.
@example(steps=[("recover", 0, 0), ("queue", 3, 0)], windows=[(-10, 30, 0)], only=[3])
@pytest.mark.parametrize("runs_max", [timeline.RUNS_MAX, 2, 0])
def test_V2_a_window_is_the_whole_logs_page_on_generated_ledgers(
    tmp_path_factory, runs_max, steps, windows, only
) -> None:
    """With the picture's RUNS_MAX as it is, and at 2 and 0 so that these few runs fold
    (rule V1) and the runs that only pass through a window are drawn from the spans view."""
    store = open_store(str(tmp_path_factory.mktemp("w") / "l.db"))
    patch = pytest.MonkeyPatch()
    patch.setattr(timeline, "RUNS_MAX", runs_max)
    try:
        rec = Recorder(store)
        for s in steps:
            rec.step(*s)
        queued = {
            x.event.run
            for chunk in store.read_batches(0)
            for x in chunk
            if isinstance(x, Recorded) and isinstance(x.event, RunEventBase)
        }
        runs = sorted({RUNS[k] for k in only} & queued) or None
        for w in windows:
            same_page(store, **_window(*w))
            if runs:
                same_page(store, **_window(*w), runs=runs)
    finally:
        patch.undo()
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_V2_a_window_is_the_whole_logs_page_on_sqlite_and_postgresql(tmp_path, backend) -> None:
    """The generated ledgers' shape on both stores (PostgreSQL's positions have gaps,
    its view is built by the writer's first catch-up): each step kind at instants back
    and forth, bars that span a window with no event in it, a run queued again."""
    cleanups: list[Any] = []
    try:
        store = open_store(str(tmp_path / "l.db") if backend == "sqlite" else new_pg_store(cleanups))
        try:
            rec = Recorder(store)
            plan = [
                ("boot", 0, 0),
                ("boot", 1, 5),
                ("queue", 0, 10),
                ("start", 0, 12),
                ("queue", 1, 8),  # an earlier instant at a later position
                ("start", 1, 9),
                ("queue", 7, 30),
                ("checkpoint", 0, 200),
                ("fence", 3, 40),
                ("boot", 3, 60),
                ("recover", 0, 61),
                ("recover", 6, 61),
                ("queue", 0, 90),  # queued again: a second bar, the first left as it was
                ("start", 0, 95),
                ("pause", 1, 100),
                ("correct", 1, 110),
                ("reboot", 1, 120),
                ("exit", 4, 130),
                ("sweep-failed", 3, 140),
                ("sweep-skipped", 4, 141),
                ("delete", 7, 150),
                ("finish", 0, 80),  # before the bar it ends started: the clock stepped back
                ("stop", 2, 170),
            ]
            for s in plan:
                rec.step(*s)
            for w in [(-10, 30, 5), (0, 60, None), (58, 5, 61), (85, 20, 90), (140, 400, 150), (300, 10, 305)]:
                same_page(store, **_window(*w))
                same_page(store, **_window(*w), runs=["r0", "r1"])
        finally:
            store.close()
    finally:
        for undo in cleanups:
            undo()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize("policy", ["flat-age:30s", "floor:1h", "clamp"])
def test_V2_R4_a_window_of_the_demo_with_a_whatif_is_the_whole_logs_page(tmp_path, backend, policy) -> None:
    """The demo's day and the recorded incidents, in windows around their sweeps, with
    a what-if's flags: the same bytes as the whole log's page."""
    cleanups: list[Any] = []
    db = str(tmp_path / "demo.db")
    run_demo(db, out=lambda _: None)
    sources = [db]
    try:
        for name in ("whatif_nightly_88", "whatif_redeploy_0220", "whatif_clock_step"):
            url = str(tmp_path / f"{name}.db") if backend == "sqlite" else new_pg_store(cleanups)
            with open_ledger(url) as lg, open(incidents.path(name), "rb") as f:
                import_lines(lg, f, clock_steps="keep")  # recorded through the API under a stepped clock
            sources.append(url)
        if backend == "postgresql":  # the demo's day copied event by event
            url = new_pg_store(cleanups)
            with open_ledger(db, create=False) as src, open_ledger(url) as dst:
                dst._store.append(
                    [Append(r.stream, r.version, r.event) for r in src._store.read_all()]  # type: ignore[attr-defined]
                )
            sources[0] = url
        for url in sources:
            with open_ledger(url, create=False) as lg:
                store = lg._store
                found = whatif(store, policy)
                h = timeline.whole_history(store)
                assert h.first is not None and h.last is not None
                first, last = h.first, h.last
                span = last - first
                marks = sorted(
                    {m.at for lane in h.lanes.values() for m in lane.marks} | {d.at for d in found.differences}
                )
                marks = marks[:: max(1, len(marks) // 10)]  # ten of them at most, spread over the day
                windows = [(first, last + timedelta(seconds=1), first + span / 2)]
                windows += [(t - span / 20, t + span / 20, t) for t in marks]
                windows += [(t - timedelta(minutes=10), t + timedelta(minutes=5), None) for t in marks[:3]]
                for start, end, cursor in windows:
                    same_page(store, start=start, end=end, cursor=cursor, whatif=found, live=True, assets="/")
                    same_page(store, start=start, end=end, cursor=cursor)
    finally:
        for undo in cleanups:
            undo()


def test_V2_the_window_reads_its_runs_not_the_log(tmp_path) -> None:
    """At 2,000 runs, an hour apart each, a window of an hour reads a few runs' streams
    (the one it shows and those whose hull reaches it), not the log: the spans view's
    interval read, and nothing of the log outside them (the page is still the whole
    log's)."""
    store = open_store(str(tmp_path / "l.db"))
    try:
        rec = Recorder(store)
        rec.step("boot", 0, -60)
        for i in range(2000):
            at = T0 + timedelta(hours=i)
            run = f"run-{i:05d}"
            rec.put(run_stream(run), RunQueued(at=at, run=run, status=Status.QUEUED, process="w0"))
            rec.put(run_stream(run), RunStarted(at=at + timedelta(minutes=1), run=run, status=Status.RUNNING))
            rec.put(run_stream(run), RunFinished(at=at + timedelta(minutes=20), run=run, status=Status.FINISHED))
        start = T0 + timedelta(hours=1000, minutes=10)
        found = engine.read_spans(store, spans.micros(start), spans.micros(start + timedelta(hours=1)))
        assert found is not None and found.runs == ["run-01000", "run-01001"]
        assert found.events == 6001 and found.lanes == {"w0": True}
        window = {"start": start, "end": start + timedelta(hours=1), "cursor": start + timedelta(minutes=5)}
        same_page(store, **window)
    finally:
        store.close()


def test_V2_a_window_that_folds_its_runs_is_the_whole_logs_page(tmp_path) -> None:
    """Over RUNS_MAX runs the picture draws those that matter and folds the others
    (rule V1): which runs are folded, and each band's counts, are the window's, so a
    windowed page is still the whole log's, every byte (with a cursor, whose runs are
    kept as rows; with a what-if-like fold link; and the whole history, where runs
    that finished are folded too, by status)."""
    db = str(tmp_path / "dense.db")
    t, matter = fleet_ledgers.dense(db, 900, finished=400)
    with open_ledger(db, create=False) as lg:
        store = lg._store
        link = lambda lane, status: f"/runs?process={lane}&status={status}"
        hour = t + timedelta(hours=1)
        for start, end, cursor in (
            (hour, hour + timedelta(hours=1), hour + timedelta(minutes=30)),
            (hour, hour + timedelta(hours=1), None),
            (t - timedelta(minutes=5), t + timedelta(minutes=30), t + timedelta(minutes=3)),
            (hour + timedelta(minutes=19), hour + timedelta(minutes=21), hour + timedelta(minutes=20)),
        ):
            page = timeline.page(store, start=start, end=end, cursor=cursor, fold_link=link)
            assert page == whole(store, start=start, end=end, cursor=cursor, fold_link=link)
            assert 'class="fold"' in page, (start, end)
        everything = timeline.page(store)
        bands = everything.split('<g class="fold" data-status="')[1:]
        counts: dict[str, int] = {}
        for band in bands:
            status, n = band.split('"', 1)[0], int(band.split('data-count="', 1)[1].split('"', 1)[0])
            counts[status] = counts.get(status, 0) + n
        # 1,301 runs, 500 drawn: the two marked, then by start and name (every one moved
        # in the whole history): done-00000 and the fleet's first 498; the 801 others
        # folded, each in a band of each status it was in: the 400 late finished runs but
        # the first, the fleet's rest, and the run queued at 1 h 29 (queued only)
        assert everything.count('<g class="run" data-run="') == 500
        assert 'data-run="done-00000"' in everything and 'data-run="done-00001"' not in everything
        assert counts == {"queued": 801, "running": 800, "finished": 399}
