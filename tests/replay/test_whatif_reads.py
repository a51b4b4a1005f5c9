"""A built-in policy's what-if reads only what its verdicts can depend on (rule R4): the
slots' streams, the ledger's settings and the runs a sweep could judge (the decisions
view, projections/decisions.py), and its result is the whole log's replay, every byte,
on generated ledgers (sweeps whose records other runs' events and a role's grant split,
runs queued again, recovered, deleted, fenced, undecodable events, instants back and
forth, a default slot set and cleared, cuts at an instant and a position), on SQLite
and PostgreSQL, on the demo and on the recorded incidents.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from epochledger import open_ledger
from epochledger.demo import run_demo
from epochledger.ledger.events import (
    LedgerDefaultSlot,
    RoleGranted,
    RunFinished,
    RunQueued,
    RunRecovered,
    RunStarted,
    Status,
    ledger_stream,
    role_stream,
    run_stream,
)
from epochledger.ledger.store import Append, Store, open_store
from epochledger.ndjson import import_lines
from epochledger.projections import decisions, engine
from epochledger.replay import whatif as whatif_mod
from epochledger.replay.whatif import Policy, WhatIf, resolve, whatif
from tests.conftest import new_pg_store
from tests.helpers import incident_histories as incidents
from tests.replay.test_timeline_window import RUNS, STEP, T0, Recorder

POLICIES = ["epoch", "flat-age:30m", "floor:1h", "clamp", "heartbeat:20m"]


class Whatifs(Recorder):
    """The incident picture's generated ledgers, and the facts only a what-if reads: a
    role granted between a sweep's records (an event of no run and no slot), the ledger's
    default slot set and cleared (rule O9), a recovery that begins a sweep of several."""

    def step(self, what: str, k: int, minutes: int) -> None:
        at = T0 + timedelta(minutes=minutes)
        if what == "role":
            self.put(role_stream("leader"), RoleGranted(at=at, role="leader", epoch="x", process="w0", token=k + 1))
        elif what == "default":
            self.put(ledger_stream(), LedgerDefaultSlot(at=at, slot=None if k % 2 else "w0"))
        elif what == "sweep":  # two recoveries of one sweep, one commit, the second run's slot's
            epochs = self.epochs.get("w0", [])
            if not epochs:
                return
            appends = []
            for run in (RUNS[k], RUNS[(k + 3) % len(RUNS)]):
                stream = run_stream(run)
                version = self.versions.get(stream, 0) + 1
                appends.append(
                    Append(
                        stream,
                        version,
                        RunRecovered(
                            at=at,
                            run=run,
                            status=Status.FAILED_RESUMABLE,
                            code="PROCESS_ORPHANED",
                            rule="O2-superseded",
                            swept_by=epochs[-1],
                            swept_by_process="w0",
                        ),
                    )
                )
                self.versions[stream] = version
            self.store.append(appends)
        else:
            super().step(what, k, minutes)


WHATIF_STEP = st.one_of(
    STEP,
    st.tuples(st.sampled_from(["role", "default", "sweep"]), st.integers(0, 7), st.integers(-120, 600)),
    # what makes differences: runs queued and started, then boots and sweeps over them
    st.tuples(
        st.sampled_from(["queue", "start", "start", "checkpoint", "boot", "recover", "sweep"]),
        st.integers(0, 7),
        st.integers(-120, 600),
    ),
)


def unmarked(spec: str) -> Policy:
    """The built-in policy `spec`, as a plug-in would give it: the same verdicts, not
    marked as judging one run, so its what-if reads the whole log (the anchor)."""
    builtin = resolve(spec)

    def policy(sweep: Any, run: Any, relative_to: Any) -> Any:
        return builtin(sweep, run, relative_to)

    return policy


def same_result(store: Store, spec: str, **cut: Any) -> WhatIf:
    assert engine.read_decisions(store) is not None  # the read that is not the whole log
    got = whatif(store, spec, **cut)
    want = whatif(store, unmarked(spec), name=spec, **cut)
    assert msgspec.json.encode(got) == msgspec.json.encode(want)
    return got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(WHATIF_STEP, min_size=1, max_size=45),
    policy=st.sampled_from(POLICIES),
    cuts=st.lists(st.one_of(st.none(), st.integers(-130, 610)), min_size=1, max_size=3),
    position=st.one_of(st.none(), st.integers(1, 50)),
    block=st.sampled_from([1, 3, 8, decisions.BLOCK]),
)
# Found by the law: an event the orphans fold refuses (a finish of a run never queued) between
# a boot and its sweep; the sweep judged the view as of it, parked (rule T4), whichever read.
@example(
    steps=[("queue", 0, 0), ("boot", 0, 0), ("finish", 1, 0), ("sweep", 0, 0)],
    policy="epoch",
    cuts=[None],
    position=None,
    block=1,
)
def test_R4_a_builtin_policys_whatif_reads_its_runs_and_is_the_whole_logs_on_generated_ledgers(
    tmp_path_factory, monkeypatch, steps, policy, cuts, position, block
) -> None:
    """`block`: the positions a block of the `at` cut holds, as small as one (the view
    is built with it), so a cut falls in a later block than the first."""
    monkeypatch.setattr(decisions, "BLOCK", block)
    store = open_store(str(tmp_path_factory.mktemp("w") / "l.db"))
    try:
        rec = Whatifs(store)
        for s in steps:
            rec.step(*s)
        for minutes in cuts:
            at = None if minutes is None else T0 + timedelta(minutes=minutes)
            same_result(store, policy, at=at)
        same_result(store, policy, position=position)
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_R4_a_builtin_policys_whatif_is_the_whole_logs_on_sqlite_and_postgresql(tmp_path, backend) -> None:
    """A plan with every difference kind under some policy, on both stores (PostgreSQL's
    positions have gaps, its views are built by the writer's first catch-up): a sweep
    split by another run's event and a role's grant, a run started again after its
    recovery, an orphan left running, an instant that stepped back, a run recovered by
    the first record of a sweep with no decision point while it ran."""
    cleanups: list[Any] = []
    try:
        store = open_store(str(tmp_path / "l.db") if backend == "sqlite" else new_pg_store(cleanups))
        try:
            rec = Whatifs(store)
            plan = [
                ("boot", 0, 0),
                ("boot", 1, 0),
                ("queue", 0, 1),
                ("start", 0, 2),
                ("queue", 3, 3),
                ("start", 3, 4),
                ("queue", 1, 5),
                ("start", 1, 6),
                ("queue", 2, 7),  # never started: no sweep can judge it
                ("finish", 2, 8),
                ("checkpoint", 0, 40),
                ("boot", 0, 60),  # w0.e2: r0 and r3 are orphans of w0.e1 (rule O2)
                ("sweep", 0, 61),  # r0 and r3, one commit
                ("role", 0, 62),
                ("recover", 3, 62),  # a record of the same sweep after the role's grant
                ("queue", 0, 90),  # queued again, started again after its recovery
                ("start", 0, 91),
                ("queue", 4, 95),
                ("start", 4, 10),  # the clock stepped back
                ("default", 0, 100),
                ("boot", 1, 120),  # w1.e2: r1 and r4 orphans, left running (missed by nobody)
                ("queue", 7, 130),  # started after every boot, recovered by its sweep's first record:
                ("start", 7, 131),  # no decision point in its stretch, yet flat-age misses it
                ("recover", 7, 132),
                ("finish", 0, 200),
                ("stop", 2, 300),
            ]
            for s in plan:
                rec.step(*s)
            found = engine.read_decisions(store)
            assert found is not None and "r2" not in found.runs and {"r0", "r1", "r3"} <= set(found.runs)
            seen: set[str] = set()  # every kind of difference is among the results compared
            for policy in POLICIES:
                for minutes in (None, 61, 62, 90, 150):
                    at = None if minutes is None else T0 + timedelta(minutes=minutes)
                    seen |= {d.kind for d in same_result(store, policy, at=at).differences}
            assert seen == {"killed-live", "missed", "late", "early"}
            kinds = {(d.kind, d.run) for d in same_result(store, "flat-age:30m").differences}
            assert {("killed-live", "r1"), ("missed", "r7")} <= kinds, kinds
        finally:
            store.close()
    finally:
        for undo in cleanups:
            undo()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_R4_the_demo_and_the_recorded_incidents_give_the_whole_logs_whatif(tmp_path, backend) -> None:
    cleanups: list[Any] = []
    db = str(tmp_path / "demo.db")
    run_demo(db, out=lambda _: None)
    sources = [db]
    try:
        for name in incidents.INCIDENTS:
            url = str(tmp_path / f"{name}.db") if backend == "sqlite" else new_pg_store(cleanups)
            with open_ledger(url) as lg, open(incidents.path(name), "rb") as f:
                import_lines(lg, f, clock_steps="keep")
            sources.append(url)
        if backend == "postgresql":
            url = new_pg_store(cleanups)
            with open_ledger(db, create=False) as src, open_ledger(url) as dst:
                dst._store.append([Append(r.stream, r.version, r.event) for r in src._store.read_all()])
            sources[0] = url
        for url in sources:
            with open_ledger(url, create=False) as lg:
                instants = sorted({r.event.at for r in lg._store.read_all()})
                for policy in [*POLICIES, "floor:30m", "heartbeat:5m"]:
                    same_result(lg._store, policy)
                    for t in instants[:: max(1, len(instants) // 6)]:
                        same_result(lg._store, policy, at=t)
    finally:
        for undo in cleanups:
            undo()


def test_R4_the_whatif_reads_the_runs_a_sweep_could_judge_not_the_log(tmp_path, monkeypatch) -> None:
    """2,000 runs that finished before the slots booted and 20 running across a restart:
    the what-if reads the slots' streams and the 20 runs' (the decisions view's rows
    are those 20 and the blocks), and gives the whole log's result; a plug-in's reads
    the whole log."""
    store = open_store(str(tmp_path / "l.db"))
    try:
        rec = Whatifs(store)
        for i in range(2000):
            run = f"done-{i:05d}"
            rec.put(run_stream(run), RunQueued(at=T0, run=run, status=Status.QUEUED, process="w0"))
            rec.put(run_stream(run), RunStarted(at=T0, run=run, status=Status.RUNNING, process="w0"))
            rec.put(run_stream(run), RunFinished(at=T0, run=run, status=Status.FINISHED))
        rec.step("boot", 0, 10)
        epoch = rec.epochs["w0"][-1]
        for i in range(20):
            run = f"live-{i:02d}"
            at = T0 + timedelta(minutes=20)
            rec.put(run_stream(run), RunQueued(at=at, run=run, status=Status.QUEUED, process="w0"))
            rec.put(run_stream(run), RunStarted(at=at, run=run, status=Status.RUNNING, process="w0", epoch=epoch))
        rec.step("boot", 0, 60)
        found = engine.read_decisions(store)
        assert found is not None and found.runs == [f"live-{i:02d}" for i in range(20)]
        assert found.slots == ["w0"]
        read: list[str] = []
        original = store.read_streams

        def spy(streams: Any, after: Any = None) -> Any:
            read.extend(streams)
            return original(streams, after)

        monkeypatch.setattr(store, "read_streams", spy)
        result = same_result(store, "flat-age:30m")
        assert len(result.differences) == 20 and result.sweeps == 2
        assert sorted(read) == sorted(
            [ledger_stream(), "process:w0", *(run_stream(f"live-{i:02d}") for i in range(20))]
        )
        rows = engine.read_view(store, decisions)[0]
        assert sum(k.startswith(decisions.RUN) for k in rows) == 20
    finally:
        store.close()


def test_R4_a_plug_in_policy_is_replayed_over_the_whole_log(tmp_path, monkeypatch) -> None:
    """A policy not built in may judge a run by the others: its what-if never asks the
    decisions view (the whole log, as before)."""
    store = open_store(str(tmp_path / "l.db"))
    try:
        Whatifs(store).step("boot", 0, 0)
        asked: list[int] = []
        monkeypatch.setattr(whatif_mod, "_judged", lambda *a: asked.append(1))
        whatif(store, unmarked("epoch"), name="mine")
        assert asked == []
        whatif(store, "epoch")
        assert asked == [1]
    finally:
        store.close()


def test_R4_a_stream_with_a_removed_event_is_replayed_from_the_whole_log(tmp_path) -> None:
    """A run's stream with a version missing (a row removed by hand) cannot be read as a
    stream (StreamGap); the whole log still can, so the what-if reads it, and gives
    what it gave before the read was the decisions view's."""
    from tests.helpers.engine_helpers import delete_row

    path = tmp_path / "l.db"
    store = open_store(str(path))
    try:
        rec = Whatifs(store)
        for step in [("boot", 0, 0), ("queue", 0, 1), ("start", 0, 2), ("checkpoint", 0, 3), ("boot", 0, 60)]:
            rec.step(*step)
        started = next(r.position for r in store.read_stream(run_stream("r0")) if r.version == 2)
    finally:
        store.close()
    delete_row(f"sqlite:///{path}", started)
    store = open_store(str(path))
    try:
        assert engine.read_decisions(store) is not None and whatif_mod._judged(store, None, None) is None
        same_result(store, "flat-age:30m")
    finally:
        store.close()


def test_R4_the_views_markers_are_the_run_events_whose_stamped_status_run_evolve_ignores() -> None:
    """The decisions view reads a run's stretches from its events' stamped statuses,
    except the events whose status `run.evolve` keeps (projections/decisions.py
    `_MARKERS`): every run event, stamped with a status other than the run's, is one
    of those exactly when evolve keeps the run's status, so the view's stretches are
    a superset of the fold's (a marker read as a transition could end a stretch the
    fold keeps open, and lose a run a sweep judged)."""
    import typing
    from datetime import datetime

    from epochledger.ledger import run as run_mod
    from epochledger.ledger.events import RunEvent

    def filler(name: str, tp: Any) -> Any:
        while typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        if typing.get_origin(tp) is typing.Literal:
            return typing.get_args(tp)[0]
        return {"at": T0, "run": "r"}.get(name) or {
            str: "x",
            int: 1,
            float: 1.0,
            bool: True,
            datetime: T0,
            Status: Status.FINISHED,
        }[tp]

    state = run_mod.evolve(
        run_mod.evolve(None, RunQueued(at=T0, run="r", status=Status.QUEUED)),
        RunStarted(at=T0, run="r", status=Status.RUNNING),
    )
    kinds = typing.get_args(RunEvent)
    assert len(kinds) > 10
    for kind in kinds:
        fields = {f.name: filler(f.name, f.type) for f in msgspec.structs.fields(kind) if f.required}
        e = kind(**fields, status=Status.FINISHED)
        kept = run_mod.evolve(state, e).status is Status.RUNNING
        assert kept == (kind in decisions._MARKERS), kind
