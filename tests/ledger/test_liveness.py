"""The one liveness definition (rules O7, O8): `ledger.process.end_of(epoch, host)`.

An epoch stops being live when a later boot of its slot supersedes it, it records a
clean stop, someone records `process.exited` for it, or a later boot on its host
carries another host boot id. The same answer must come out of the fold, the orphan
rule (projections/orphans.py), the fence (ledger/run.py via epochledger/writes.py) and the
sweep (epochledger/sweep.py), on both stores.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, StaleEpoch, open_ledger
from epochledger.app import Ledger
from epochledger.ledger import process as process_mod
from epochledger.ledger.clock import Clock
from epochledger.ledger.errors import ConflictError, IllegalTransition, StoreError
from epochledger.ledger.events import ProcessBooted, ProcessExited, ProcessRetired, ProcessStopped
from epochledger.ledger.host import FakeHost
from epochledger.ledger.process import EpochState, HostState, end_of, evolve_host
from epochledger.projections import orphans
from tests.conftest import T0

S, P, E, R = process_mod.SUPERSEDED, process_mod.STOPPED, process_mod.EXITED, process_mod.HOST_REBOOTED

# superseded, stopped, exited, host rebooted -> the rule end_of names (None: live).
# The first fact that holds, in this order, names the rule: a literal table.
TABLE: list[tuple[bool, bool, bool, bool, str | None]] = [
    (False, False, False, False, None),
    (True, False, False, False, S),
    (False, True, False, False, P),
    (False, False, True, False, E),
    (False, False, False, True, R),
    (True, True, False, False, S),
    (True, False, True, False, S),
    (True, False, False, True, S),
    (False, True, True, False, P),
    (False, True, False, True, P),
    (False, False, True, True, E),
    (True, True, True, False, S),
    (True, True, False, True, S),
    (True, False, True, True, S),
    (False, True, True, True, P),
    (True, True, True, True, S),
]


def test_O7_the_truth_table_covers_every_combination_of_facts_once() -> None:
    assert sorted(row[:4] for row in TABLE) == sorted(itertools.product([False, True], repeat=4))


def _epoch(superseded: bool, stopped: bool, exited: bool) -> EpochState:
    return EpochState(
        process="w",
        epoch="e1",
        booted_at=T0,
        recorded_at=T0,
        host="h",
        pid=7,
        host_boot="b1",
        pid_start=100,
        machine="m-h",
        superseded_by="e2" if superseded else None,
        stopped_at=T0 + timedelta(seconds=5) if stopped else None,
        exited_at=T0 + timedelta(seconds=6) if exited else None,
        exited_by="supervisor:s" if exited else None,
        exit_signal=9 if exited else None,
    )


def _host_state(rebooted: bool) -> HostState | None:
    boot = ProcessBooted(at=T0, process="x", epoch="x1", booted_at=T0, host="h", host_boot="b1", machine="m-h")
    state = evolve_host(None, boot)
    if rebooted:
        state = evolve_host(
            state,
            ProcessBooted(
                at=T0 + timedelta(seconds=9),
                process="y",
                epoch="y1",
                booted_at=T0,
                host="h",
                host_boot="b2",
                machine="m-h",
            ),
        )
    return state


@pytest.mark.parametrize("superseded, stopped, exited, rebooted, rule", TABLE)
def test_O7_end_of_truth_table(superseded: bool, stopped: bool, exited: bool, rebooted: bool, rule: str | None) -> None:
    """The fold's answer. Mutations caught: the exited check dropped from end_of (rows
    with only `exited`), `rebooted()` ignoring the host (rows with only `host rebooted`),
    the order of the checks changed (the combined rows)."""
    ended = end_of(_epoch(superseded, stopped, exited), _host_state(rebooted))
    assert (ended[0] if ended else None) == rule
    if rule == E:
        assert "supervisor:s" in ended[1] and "signal 9" in ended[1]  # type: ignore[index]
    if rule == R:
        assert "host boot b1" in ended[1] and "host boot b2" in ended[1]  # type: ignore[index]


def test_O7_a_host_boot_id_once_over_never_comes_back_and_other_hosts_are_not_touched() -> None:
    """A kernel never boots twice with one id: a late boot still carrying an ended id
    (history recorded late) neither revives it nor ends the id that ended it; a reboot
    of one host says nothing about another; a boot without a host boot id says nothing."""
    h = _host_state(True)
    late = ProcessBooted(
        at=T0 + timedelta(seconds=20), process="z", epoch="z1", booted_at=T0, host="h", host_boot="b1", machine="m-h"
    )
    assert evolve_host(h, late) == h
    assert evolve_host(h, ProcessBooted(at=T0, process="z", epoch="z2", booted_at=T0, host="h", machine="m-h")) == h
    e = _epoch(False, False, False)
    assert end_of(e, h) is not None
    assert end_of(msgspec_replace(e, host_boot="b2"), h) is None
    assert end_of(msgspec_replace(e, host="other", machine="m-other"), h) is None  # another host's reboot
    assert end_of(msgspec_replace(e, host="other"), h) is not None  # a host renamed is the same machine (O10)
    assert end_of(msgspec_replace(e, machine="m-twin"), h) is None  # another machine of the same name (O10)
    assert end_of(msgspec_replace(e, host_boot=None), h) is None  # no id recorded: nothing to judge by
    assert end_of(msgspec_replace(e, machine=None), h) is None  # no machine id: it cannot tell (O10)


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        ({"superseded_by": "e2"}, "epoch e1 of w was superseded by epoch e2"),
        ({"stopped_at": T0}, f"epoch e1 of w recorded a clean stop at {T0.isoformat()}"),
        ({"exited_at": T0, "exited_by": "probe@h"}, f"epoch e1 of w exited (seen by probe@h at {T0.isoformat()})"),
        (
            {"exited_at": T0, "exited_by": "supervisor:s", "exit_code": 137},
            f"epoch e1 of w exited (seen by supervisor:s at {T0.isoformat()}, exit code 137)",
        ),
        (
            {"exited_at": T0, "exited_by": "supervisor:s", "exit_signal": 9, "exit_evidence": "oom-killer"},
            f"epoch e1 of w exited (seen by supervisor:s at {T0.isoformat()}, signal 9): oom-killer",
        ),
        (
            {"exited_at": T0, "exited_by": "s", "exit_code": 0, "exit_signal": 0, "exit_evidence": ""},
            f"epoch e1 of w exited (seen by s at {T0.isoformat()}, exit code 0, signal 0)",
        ),
    ],
)
def test_O7_end_of_names_its_evidence_word_for_word(changes: dict[str, object], sentence: str) -> None:
    """The sentence verdicts, recoveries and the fence quote. Mutations caught: a word of
    a sentence changed, the exit code or signal dropped or shown when absent (an exit
    code of 0 and a signal of 0 are facts, not absent), the evidence shown when empty."""
    e = msgspec_replace(_epoch(False, False, False), **changes)
    assert end_of(e, None) == (
        {"superseded_by": S, "stopped_at": P}.get(next(iter(changes)), E),
        sentence,
    )


def test_O7_end_of_names_the_reboot_word_for_word() -> None:
    """Mutation caught: a word of the host-rebooted sentence changed."""
    assert end_of(_epoch(False, False, False), _host_state(True)) == (
        R,
        "host h (machine m-h) of epoch e1 of w rebooted: it booted with host boot b1, and epoch y1 of y booted on "
        f"that machine at {(T0 + timedelta(seconds=9)).isoformat()} with host boot b2",
    )


def msgspec_replace(e: EpochState, **kw: object) -> EpochState:
    return msgspec.structs.replace(e, **kw)


def msgspec_replace_boot(e: ProcessBooted, **kw: object) -> ProcessBooted:
    return msgspec.structs.replace(e, **kw)


def msgspec_replace_exit(e: ProcessExited, **kw: object) -> ProcessExited:
    return msgspec.structs.replace(e, **kw)


# ------------------------------------------------------- process.exited, decided
def _at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


BOOT = ProcessBooted(
    at=_at(0), process="w", epoch="e1", booted_at=_at(-5), host="h", pid=7, host_boot="b1", pid_start=99
)
EXIT = ProcessExited(
    at=_at(10), process="w", epoch="e1", observed_by="supervisor:s", exit_code=137, signal=9, evidence="killed"
)
STOPPED_E1 = ProcessStopped(at=_at(5), process="w", epoch="e1")
# given the slot's history -> what `process.exited` for e1 (and for an epoch no boot made) decides
EXIT_TABLE = {
    "empty": ([], "refused", "refused"),
    "booted": ([BOOT], "append", "refused"),
    "stopped": ([BOOT, STOPPED_E1], "append", "refused"),  # both are facts: the exit is kept
    "exited": ([BOOT, EXIT], "no-op", "refused"),  # the first exit stands
    "superseded": ([BOOT, msgspec_replace_boot(BOOT, epoch="e2", at=_at(20))], "append", "refused"),
}


@pytest.mark.parametrize("given", list(EXIT_TABLE))
def test_O7_process_exited_decide_table(given: str) -> None:
    history, for_e1, for_ghost = EXIT_TABLE[given]
    state = process_mod.fold(history)
    for cmd, expected in ((EXIT, for_e1), (msgspec_replace_exit(EXIT, epoch="ghost"), for_ghost)):
        if expected == "refused":
            with pytest.raises(IllegalTransition) as refused:
                process_mod.decide(cmd, state)
            # Mutations caught: the refusal naming no slot, no attempt, or another text.
            got = refused.value
            assert (got.run, got.status, got.attempted, got.why) == (
                "w",
                None,
                "process.exited",
                f"unknown epoch {cmd.epoch!r}",
            )
            continue
        events = process_mod.decide(cmd, state)
        assert events == ([] if expected == "no-op" else [cmd])


def test_O7_the_fold_keeps_the_boot_and_exit_facts_and_the_first_exit() -> None:
    """Mutation caught: host_boot, pid_start or an exit field dropped by `evolve`; a
    second exit (history imported with two) replacing the first."""
    second = msgspec_replace_exit(EXIT, at=_at(30), observed_by="probe@h", exit_code=None, signal=None, evidence="late")
    state = process_mod.fold([BOOT, EXIT, second])
    assert state is not None and state.version == 3
    e = state.epochs[0]
    assert (e.host_boot, e.pid_start) == ("b1", 99)
    assert (e.exited_at, e.exited_by, e.exit_code, e.exit_signal, e.exit_evidence) == (
        _at(10),
        "supervisor:s",
        137,
        9,
        "killed",
    )


# ---------------------------------------------------------------- both stores
@pytest.fixture
def fake_ledger(store_url: str) -> Iterator[tuple[Ledger, FakeHost, ManualClock]]:
    host = FakeHost(name="sched-host", boot_id="sb1")
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(store_url, clock=clock, host=host) as lg:
        yield lg, host, clock


def _apply(lg: Ledger, i: int, superseded: bool, stopped: bool, exited: bool, rebooted: bool) -> EpochState:
    """Slot w<i> on host h<i> under host boot b1 owns running run r<i>; then the facts."""
    host = f"h{i}"
    e = lg.boot(f"w{i}", epoch=f"w{i}.e1", host=host, host_boot="b1", pid=100 + i, pid_start=5, machine=f"m-{host}")
    lg.queue(f"r{i}")
    lg.start(f"r{i}", epoch=e)
    if stopped:
        lg.stop(e)
    if exited:
        lg.exited(f"w{i}", e, observed_by="supervisor:s", exit_code=137, signal=9, evidence=f"child {100 + i} killed")
    if rebooted:  # another slot boots on that host after a reboot
        lg.boot(f"x{i}", epoch=f"x{i}.e1", host=host, host_boot="b2", pid=1, pid_start=1, machine=f"m-{host}")
    if superseded:
        lg.boot(
            f"w{i}",
            epoch=f"w{i}.e2",
            host=host,
            host_boot="b2" if rebooted else "b1",
            pid=200 + i,
            pid_start=9,
            machine=f"m-{host}",
        )
    return e


def test_O7_F1_O5_liveness_truth_table_on_both_stores(fake_ledger: tuple[Ledger, FakeHost, ManualClock]) -> None:
    """Every combination of facts, recorded through the API on SQLite and the real
    PostgreSQL: `liveness()` (what `epochs` lists), the fence (a late checkpoint of the
    epoch: refused with StaleEpoch naming the rule, kept as run.fenced evidence) and a
    sweep by a new epoch (the run recovered with that rule and its evidence) all give
    the table's answer. Mutations caught: Batch.end_of / the fence passing host=None
    (the `host rebooted` rows accept the report), orphans.View.end_of ignoring hosts
    (the sweep leaves those runs running), the exit not folded into EpochState (every
    `exited`-only row)."""
    lg, _host, clock = fake_ledger
    for i, (superseded, stopped, exited, rebooted, _rule) in enumerate(TABLE):
        _apply(lg, i, superseded, stopped, exited, rebooted)
    clock.advance(30)
    ends = {e.epoch: (ended[0] if ended else None) for e, ended in lg.liveness()}
    for i, row in enumerate(TABLE):
        rule = row[4]
        assert ends[f"w{i}.e1"] == rule, (i, row)
        try:
            lg.checkpoint(f"r{i}", "n", f"ref{i}", epoch=f"w{i}.e1")
            refused = None
        except StaleEpoch as e:
            assert e.evidence is not None
            refused = e.evidence.rule
        assert refused == rule, (i, row)
    sched = lg.boot("sched")
    report = lg.sweep(sched)
    recovered = {v.run: v for v in report.recovered}
    for i, (_s, _p, _e, _r, rule) in enumerate(TABLE):
        v = recovered.get(f"r{i}")
        assert (v.rule if v else None) == rule, (i, TABLE[i])
        state = lg.get_run(f"r{i}")
        assert state.status == ("running" if rule is None else "failed_resumable")
    recorded = {r.event.run: r.event for r in lg.events() if type(r.event).__name__ == "RunRecovered"}  # type: ignore[union-attr]
    exited_only, rebooted_only = recorded["r3"], recorded["r4"]
    assert (exited_only.rule, exited_only.observed_by, exited_only.exit_code, exited_only.signal) == (
        E,
        "supervisor:s",
        137,
        9,
    )
    assert exited_only.evidence is not None and "child 103 killed" in exited_only.evidence
    assert (
        rebooted_only.rule,
        rebooted_only.host,
        rebooted_only.host_boot,
        rebooted_only.rebooted_to,
        rebooted_only.rebooted_by,
    ) == (R, "h4", "b1", "b2", "x4.e1")


def test_O7_an_exited_epoch_cannot_sweep_and_a_second_exit_appends_nothing(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    lg, _host, _clock = fake_ledger
    e = lg.boot("w")
    lg.exited("w", e, observed_by="supervisor:s", exit_code=1)
    head = lg._store.max_position()
    lg.exited("w", e.epoch, observed_by="probe@sched-host", evidence="pid 4242 not running")
    assert lg._store.max_position() == head  # the first exit stands
    assert lg.epoch(e).exited_by == "supervisor:s"
    assert lg.sweep(e).outcome == "exited"


# ------------------------------------------------------------------------- O8
def test_O8_worker_slots_never_supersede_each_other(fake_ledger: tuple[Ledger, FakeHost, ManualClock]) -> None:
    """One slot per worker, any number at once on one host: every worker's epoch stays
    live, a scheduler's startup sweep recovers none of their runs, and a worker that
    ends normally (stop()) leaves only its own run to the next sweep and is no longer
    listed as live. Mutation caught (the incident's mapping): `Ledger.boot` recording
    every boot in one slot per host (`process=host`), so each worker's boot supersedes
    the one before and their healthy runs are swept."""
    lg, host, clock = fake_ledger
    workers = []
    for i in range(12):
        host.spawn(5000 + i, 700 + i)
        w = lg.boot(f"worker-{i}", pid=5000 + i)
        assert (w.host, w.host_boot, w.pid_start) == ("sched-host", "sb1", 700 + i)
        lg.queue(f"run-{i}")
        lg.start(f"run-{i}", epoch=w)
        workers.append(w)
        clock.advance(1)
    clock.advance(3600)
    _sched, report = lg.startup("scheduler")
    assert report.recovered == []
    assert all(ended is None for e, ended in lg.liveness() if e.process.startswith("worker-"))
    lg.finish("run-3", epoch=workers[3])
    lg.stop(workers[3])
    lg.stop(workers[5])  # ended while its run still ran: that run is an orphan
    _sched2, report = lg.startup("scheduler")
    assert [(v.run, v.rule) for v in report.recovered] == [("run-5", P)]
    live = sorted(e.process for e, ended in lg.liveness() if ended is None and e.process.startswith("worker-"))
    assert live == sorted(f"worker-{i}" for i in range(12) if i not in (3, 5))


# ------------------------------------------------------------------ the law
# A history that a real fleet can produce: three slots booted on two hosts, then slots
# boot again (on either host), a host reboots (a fresh boot id, never an old one) and a
# slot boots on it, a slot's current epoch (or an earlier one: a late writer) stops, is seen to exit,
# or starts a run. The test's own model of "live by every fact" is written from the
# rule's words, not from end_of.
SLOTS, HOSTS = 3, 2
_slot_i, _host_i = st.integers(0, SLOTS - 1), st.integers(0, HOSTS - 1)
_which = st.sampled_from([0, 0, 0, 1])  # 0: the slot's current epoch; 1: the one before it
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("boot"), _slot_i, _host_i),
        st.tuples(st.just("reboot"), _host_i, _slot_i),  # the host comes back up; a slot boots on it
        st.tuples(st.just("stop"), _slot_i, _which),
        st.tuples(st.just("exit"), _slot_i, _which),
        st.tuples(st.just("start"), _slot_i, _which),
        st.tuples(st.just("start"), _slot_i, _which),
    ),
    min_size=3,
    max_size=25,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_O7_law_no_healthy_run_is_ever_swept_and_every_orphan_is(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[int | str, ...]]
) -> None:
    """Over generated histories: a sweep recovers exactly the running runs whose owner
    is not live by some fact (a later boot of its slot, a stop, an exit, a later boot on
    its host under another boot id), and never a run whose owner is live by every fact.
    The fence agrees along the way: a start by an epoch is refused exactly when the
    model says the epoch is not live. The two hosts share one name and differ by machine
    id (rule O10). Mutations caught (each checked by hand): end_of
    ignoring exits, evolve_host never ending an id, the orphans view ignoring hosts
    (orphans missed), rebooted() returning the host's first reboot whatever the epoch's
    id (a healthy epoch booted after the reboot is ended: its start is fenced), the
    hosts keyed by name again (a boot on one twin ends the other's epochs: the N3
    incident of docs/rules.md)."""
    host = FakeHost(name="sched-host", boot_id="sb1")
    clock = ManualClock(T0, uptime=60.0)
    path: Path = tmp_path_factory.mktemp("law") / "l.db"
    boot_ids = [0] * HOSTS
    boots: list[tuple[str, str, int, str]] = []  # (slot, epoch, host, boot id) in log order
    stopped: set[str] = set()
    exited: set[str] = set()
    owner: dict[str, str] = {}  # run -> owner epoch
    queued: list[str] = []
    with open_ledger(str(path), clock=clock, host=host) as lg:

        def boot(slot: str, h: int) -> None:
            epoch = f"{slot}.e{len(boots)}"
            # Both machines go by one name (cloned images): only the machine id tells them apart (O10).
            lg.boot(
                slot,
                epoch=epoch,
                host="twin",
                host_boot=f"h{h}-b{boot_ids[h]}",
                pid=len(boots) + 10,
                pid_start=1,
                machine=f"m{h}",
            )
            boots.append((slot, epoch, h, f"h{h}-b{boot_ids[h]}"))

        def live(epoch: str) -> bool:
            i = next(i for i, b in enumerate(boots) if b[1] == epoch)
            slot, _e, h, boot_id = boots[i]
            later = boots[i + 1 :]
            return (
                not any(b[0] == slot for b in later)
                and epoch not in stopped
                and epoch not in exited
                and not any(b[2] == h and b[3] != boot_id for b in later)
            )

        for i in range(SLOTS):
            boot(f"s{i}", i % HOSTS)
        for op in ops:
            clock.advance(1)
            if op[0] == "boot":
                boot(f"s{op[1]}", int(op[2]))
                continue
            if op[0] == "reboot":
                boot_ids[int(op[1])] += 1  # every boot on that host from now on carries a fresh id
                boot(f"s{op[2]}", int(op[1]))
                continue
            slot = f"s{op[1]}"
            mine = [b[1] for b in boots if b[0] == slot]
            epoch = mine[max(0, len(mine) - 1 - int(op[2]))]
            if op[0] == "stop":
                lg.stop(epoch)
                stopped.add(epoch)
            elif op[0] == "exit":
                lg.exited(slot, epoch, observed_by="supervisor:law")
                exited.add(epoch)
            else:
                run = f"r{len(queued)}"
                queued.append(run)
                lg.queue(run)
                try:
                    lg.start(run, epoch=epoch)
                    owner[run] = epoch
                except StaleEpoch:
                    assert not live(epoch)  # the fence asks the same definition (F1)
                    continue
                assert live(epoch)

        clock.advance(3600)
        sched = lg.boot("sweeper", host="elsewhere")
        recovered = {v.run for v in lg.sweep(sched).recovered}
        healthy = {run for run, epoch in owner.items() if live(epoch)}
        assert not recovered & healthy
        assert recovered == set(owner) - healthy
        assert {run for run in owner if lg.get_run(run).status == "running"} == healthy


def test_O4_O7_the_orphans_view_folds_host_reboots_like_the_hosts_view(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """The orphan rule's fold and the materialized hosts view agree (rule O4)."""
    from epochledger.projections import engine, hosts

    lg, _host, _clock = fake_ledger
    for i, row in enumerate(TABLE):
        _apply(lg, i, *row[:4])
    from_log = orphans.fold(lg.events())
    from_view, lag = engine.read_view(lg._store, hosts)
    assert lag == 0 and from_view == from_log.hosts and len(from_view) == len(TABLE)


def test_O7_A1_the_audit_epochs_view_agrees_and_exits_are_not_orphaned_while_live(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock], tmp_path: Path
) -> None:
    """The audit's SQL (projections/audit/views.sql) reads the same facts: its `live`
    column equals end_of's answer for every row of the truth table, and recoveries by
    O2-exited / O2-host-rebooted are not listed by the orphaned_while_live invariant.
    Mutation caught: the exit or reboot conditions dropped from the report (the
    legitimate recoveries are listed as marked under a live owner)."""
    from epochledger.projections import audit

    lg, _host, clock = fake_ledger
    for i, row in enumerate(TABLE):
        _apply(lg, i, *row[:4])
    clock.advance(30)
    lg.sweep(lg.boot("sched"))
    path = str(tmp_path / "audit.duckdb")
    audit.sync(lg._store, path)
    live = dict(audit.query(path, "SELECT epoch, live FROM epochs").rows)
    assert {f"w{i}.e1": row[4] is None for i, row in enumerate(TABLE)} == {
        k: v for k, v in live.items() if k.endswith(".e1") and k.startswith("w")
    }
    exited = audit.query(
        path, "SELECT exited_by, rebooted_to FROM epochs WHERE epoch = 'w3.e1' OR epoch = 'w4.e1' ORDER BY epoch"
    ).rows
    assert exited == [("supervisor:s", None), (None, "b2")]
    assert audit.report(path, "orphaned_while_live").rows == []


def test_O7_F1_a_reboot_recorded_by_another_writer_fences_the_next_report(store_url: str) -> None:
    """The fence keeps each host's boots in memory (Ledger.host_state) and brings them
    forward from the log's tail on every report: a reboot that another process recorded
    after this one last looked fences this one's next report. Mutation caught: the tail
    read skipped once the cache is built (the report lands)."""
    clock = ManualClock(T0, uptime=60.0)
    with (
        open_ledger(store_url, clock=clock, host=FakeHost(name="n1", boot_id="b1")) as one,
        open_ledger(store_url, clock=clock, host=FakeHost(name="n1", boot_id="b2")) as other,
    ):
        w = one.boot("worker")
        one.queue("r")
        one.start("r", epoch=w)
        one.checkpoint("r", "a", "ref-1", epoch=w)  # the cache is built here
        other.boot("after-reboot")  # the host came back with another boot id
        with pytest.raises(StaleEpoch) as refused:
            one.checkpoint("r", "b", "ref-2", epoch=w)
        assert refused.value.evidence is not None and refused.value.evidence.rule == R


def test_O7_R4_whatif_with_the_recorded_rule_finds_no_difference_over_exits_and_reboots(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """Counterfactual replay with the rule the sweeps used (`epoch`) over a history with
    an exit and a host reboot, each boot sweeping at startup, differs from the record
    nowhere: what-if judges by the same liveness. Mutation caught: the orphans view not
    folding host boots (orphans.evolve), so the alternative misses the host-rebooted
    orphan the record holds."""
    from epochledger.replay import whatif

    lg, host, clock = fake_ledger
    host.spawn(11, 50)
    host.spawn(12, 60)
    w, _ = lg.startup("w", pid=11)
    v, _ = lg.startup("v", pid=12)
    for run, e in (("r1", w), ("r2", v)):
        lg.queue(run)
        lg.start(run, epoch=e)
    clock.advance(60)
    lg.exited("w", w, observed_by="supervisor:s")
    _s1, first = lg.startup("s1")
    host.reboot("sb2")
    clock.advance(60)
    _s2, second = lg.startup("s2")
    assert [(x.run, x.rule) for x in (*first.recovered, *second.recovered)] == [("r1", E), ("r2", R)]
    result = whatif.whatif(lg._store, "epoch")
    assert result.sweeps >= 2 and result.differences == []  # s1 and s2 among them


def test_O7_V1_the_timeline_draws_an_exit(fake_ledger: tuple[Ledger, FakeHost, ManualClock]) -> None:
    """The incident picture ends an exited epoch's bar at its exit, with an exit mark
    naming who saw it (rule V1 lists exits); the page says so in the epoch's detail.
    Mutation caught: the timeline's ProcessExited case dropped (the epoch stays open)."""
    from epochledger.replay import timeline

    lg, _host, clock = fake_ledger
    w = lg.boot("worker")
    lg.queue("r")
    lg.start("r", epoch=w)
    clock.advance(5)
    lg.exited("worker", w, observed_by="supervisor:s", signal=9, evidence="OOM-killed")
    h = timeline.history(lg.events())
    [ep] = h.lanes["worker"].epochs
    assert (ep.end_kind, ep.end) == ("exit", T0 + timedelta(seconds=5))
    [mark] = [m for m in h.lanes["worker"].marks if m.kind == "exit"]
    assert "supervisor:s" in mark.detail and "signal 9" in mark.detail and "OOM-killed" in mark.detail
    assert "exited at" in timeline.render(h)


def test_O7_V1_the_timeline_ends_an_epoch_where_end_of_does_and_draws_a_host_reboot(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """The page asks end_of, the one liveness definition, after every process event:
    an epoch's bar ends at the event that made end_of say it is over, named by its rule,
    and a host reboot (a later boot on the host with another boot id) ends every live
    epoch of every slot on that host, with a reboot mark carrying end_of's sentence.
    Before: the page kept its own fold of supersede, stop and exit, and a rebooted
    epoch stayed live to the end of the page. Mutation caught: the timeline's host
    facts not folded (the reboot rows stay live)."""
    from epochledger.replay import timeline

    lg, host, clock = fake_ledger
    host.spawn(11, 50)
    host.spawn(12, 60)
    w, _ = lg.startup("w", pid=11)
    v, _ = lg.startup("v", pid=12)
    clock.advance(10)
    lg.stop(v)  # v ends by its clean stop, before the reboot
    clock.advance(50)
    host.reboot("b-after")
    s, _ = lg.startup("s")
    h = timeline.history(lg.events())
    [ew] = h.lanes["w"].epochs
    [ev] = h.lanes["v"].epochs
    [es] = h.lanes["s"].epochs
    reboot_at = [r.event.at for r in lg.events() if getattr(r.event, "epoch", None) == s.epoch][0]
    assert (ew.end_kind, ew.end) == ("reboot", reboot_at)
    assert ew.end_why == end_of(lg.epoch(w), lg.host_state(host.machine_id() or ""))[1]  # type: ignore[index]
    assert (
        ev.end_kind == "stop"
        and ev.end_why is not None
        and ev.end_why.startswith(f"epoch {v.epoch} of v recorded a clean stop")
    )
    assert (es.end_kind, es.end) == (None, None)
    [mark] = [m for m in h.lanes["w"].marks if m.kind == "reboot"]
    assert mark.detail.startswith(f"host sched-host (machine {host.machine_id()}) of epoch {w.epoch} of w rebooted")
    assert "rule O7" in mark.detail
    assert not [m for m in h.lanes["v"].marks if m.kind == "reboot"]  # already over: not ended twice
    page = timeline.render(h)
    assert "its host rebooted, seen at" in page


def test_O7_O10_the_hosts_view_folds_any_history_and_keeps_only_boots_that_name_machine_and_boot_id() -> None:
    """The hosts view's `fold` over a whole log (run events, other process events, a boot
    with a boot id but no machine id, one with a machine id but no boot id) equals the
    view built event by event, and holds only the boots that name both, keyed by machine
    id whatever the host name (rule O10). Mutations caught (make
    mutation): `fold` passing the wrong initial, evolve, records or view; `evolve`'s
    guard with `and` turned into `or` (a run event or a machine-less boot reaching
    evolve_host), the view keyed by host name (both machines in one row)."""
    from epochledger.ledger.events import Recorded, RunQueued
    from epochledger.projections import hosts

    def boot(i: int, epoch: str, machine: str | None, host_boot: str | None) -> Recorded:
        e = ProcessBooted(
            at=T0 + timedelta(seconds=i),
            process="w",
            epoch=epoch,
            booted_at=T0,
            host="h",
            host_boot=host_boot,
            machine=machine,
        )
        return Recorded(i, "process:w", i, e)

    records = [
        boot(1, "e1", "m1", "b1"),
        Recorded(2, "run:r", 1, RunQueued(at=T0, run="r")),
        boot(3, "e2", None, "b9"),
        boot(4, "e3", "m2", None),
        Recorded(5, "process:w", 5, ProcessStopped(at=T0, process="w", epoch="e3")),
        boot(6, "e4", "m1", "b2"),
        boot(7, "e5", "m3", "b7"),  # another machine of the same name: a row of its own
    ]
    folded = hosts.fold(records)
    assert set(folded) == {"m1", "m3"} and folded["m1"].host_boot == "b2" and set(folded["m1"].ended) == {"b1"}
    assert folded["m3"].ended == {}
    by_one: dict[str, HostState] = {}
    for rec in records:
        if hosts.keys(rec):
            hosts.evolve(by_one, rec)
    assert folded == by_one
    assert hosts.fold(records[3:], hosts.fold(records[:3])) == folded  # in two parts, as the engine resumes


# ------------------------------------------- found by mutation testing (docs/mutation.md)
def _host_ledger(tmp_path: Path) -> tuple[Ledger, FakeHost, ManualClock]:
    clock, host = ManualClock(T0), FakeHost()
    return open_ledger(str(tmp_path / "l.db"), clock=clock, host=host), host, clock


def test_O7_a_sweep_by_an_epoch_that_exited_or_whose_host_rebooted_names_that_outcome(tmp_path: Path) -> None:
    """A dead process's sweep recovers nothing and says why. Mutations caught: the
    outcome's name for an exited epoch or a rebooted host changed."""
    from epochledger.sweep import SweepReport

    lg, host, clock = _host_ledger(tmp_path)
    with lg:
        gone = lg.boot("w1")
        lg.exited("w1", gone, observed_by="supervisor:s", signal=9)
        assert lg.sweep(gone) == SweepReport(process="w1", epoch=gone.epoch, outcome="exited", attempts=1)
        old = lg.boot("w2")
        host.reboot("boot-2")
        clock.advance(60)
        lg.boot("w3")
        assert lg.sweep(old) == SweepReport(process="w2", epoch=old.epoch, outcome="host-rebooted", attempts=1)


def test_O7_recoveries_and_verdicts_carry_the_exit_and_the_reboot_as_evidence(tmp_path: Path) -> None:
    """A recovery copies its verdict's evidence: for O2-exited when and by whom the exit
    was seen, its signal and evidence; for O2-host-rebooted the host, both host boot
    ids, the epoch that carried the new one, and end_of's sentence. The preview of a
    boot on a rebooted host (`sweep --dry-run`) sees the reboot by the host facts its
    folded boot carries. Mutations caught: exited_at or evidence dropped from the
    verdict or from run.recovered; the preview's boot without its host or host boot id."""
    from epochledger.ledger.events import RunRecovered
    from epochledger.sweep import preview

    lg, host, clock = _host_ledger(tmp_path)
    with lg:
        w1 = lg.boot("w1")
        lg.queue("r-exit", workflow="wf")
        lg.start("r-exit", epoch=w1)
        clock.advance(30)
        lg.exited("w1", w1, observed_by="supervisor:s", signal=9, evidence="child reaped")
        w2 = lg.boot("w2")
        lg.queue("r-boot", workflow="wf")
        lg.start("r-boot", epoch=w2)
        host.reboot("boot-2")
        clock.advance(30)
        [v] = [v for v in preview(lg, "w9").recovered if v.run == "r-boot"]
        assert (v.rule, v.host_boot, v.rebooted_to) == ("O2-host-rebooted", "boot-1", "boot-2")
        w3 = lg.boot("w3")
        recovered = {v.run: v for v in lg.sweep(w3).recovered}
        exit_at = T0 + timedelta(seconds=30)
        by_exit, by_boot = recovered["r-exit"], recovered["r-boot"]
        assert (by_exit.rule, by_exit.exited_at, by_exit.observed_by, by_exit.signal) == (
            "O2-exited",
            exit_at,
            "supervisor:s",
            9,
        )
        assert by_exit.evidence is not None and "child reaped" in by_exit.evidence
        assert (by_boot.rule, by_boot.host, by_boot.host_boot, by_boot.rebooted_to, by_boot.rebooted_by) == (
            "O2-host-rebooted",
            "host-a",
            "boot-1",
            "boot-2",
            w3.epoch,
        )
        assert by_boot.evidence is not None and "rebooted" in by_boot.evidence
        [e1] = [r.event for r in lg.history("r-exit") if isinstance(r.event, RunRecovered)]
        [e2] = [r.event for r in lg.history("r-boot") if isinstance(r.event, RunRecovered)]
        assert (e1.exited_at, e1.observed_by, e1.signal, e1.evidence) == (exit_at, "supervisor:s", 9, by_exit.evidence)
        assert (e2.host_boot, e2.rebooted_to, e2.evidence) == ("boot-1", "boot-2", by_boot.evidence)


# ------------------------------------------------------------------------ O10
def test_O10_two_machines_with_one_host_name_never_end_each_others_epochs(store_url: str) -> None:
    """Two machines both named `sched` (cloned images), each with its own machine id and
    boot id. A boot and a startup sweep on A leave B's live epoch live: its running run
    is not recovered, its next report lands, and the probe on A judges none of B's pids.
    A boot on B itself under another boot id (B rebooted) does end it. On SQLite and the
    real PostgreSQL. Mutation caught: the hosts keyed by host name again (B's epoch ends
    as O2-host-rebooted, its healthy run is swept and its report fenced: the incident)."""
    clock = ManualClock(T0, uptime=100)
    b = FakeHost(name="sched", boot_id="boot-B", pid=200, machine_id="machine-b")
    a = FakeHost(name="sched", boot_id="boot-A", pid=100, machine_id="machine-a", processes={100: 9})
    with open_ledger(store_url, clock=clock, host=b) as on_b, open_ledger(store_url, clock=clock, host=a) as on_a:
        b.spawn(200, 7)
        eb, _ = on_b.startup("worker-b")
        assert (eb.host, eb.machine, eb.host_boot) == ("sched", "machine-b", "boot-B")
        on_b.queue("long-job", process="worker-b")
        on_b.start("long-job", epoch=eb)
        clock.advance(600)
        ea, report = on_a.startup("api-a")
        assert ea.machine == "machine-a" and report.recovered == []
        assert [ended for e, ended in on_a.liveness() if e.epoch == eb.epoch] == [None]
        probed = on_a.probe(epoch=ea)
        assert [f.process for f in probed.findings] == ["api-a"] and probed.exited == 0  # B's pid 200 is not A's
        on_b.checkpoint("long-job", "step", "ref-1", epoch=eb)  # not fenced: B is alive
        assert on_b.get_run("long-job").status == "running"

        b.reboot("boot-B2")  # B itself comes back with another boot id: that is a reboot
        _eb2, after = on_b.startup("worker-b2")
        assert [(v.run, v.rule, v.rebooted_to) for v in after.recovered] == [("long-job", R, "boot-B2")]
        assert on_a.epoch(ea).live and [ended for e, ended in on_a.liveness() if e.epoch == ea.epoch] == [None]


def test_O10_a_boot_that_cannot_tell_its_machine_is_never_taken_as_a_reboot(store_url: str) -> None:
    """A boot recorded before machine ids (an old log: no `machine` field, decoded with
    its default) or on a machine without one: a later boot with the same host name and
    another boot id ends nothing, and a boot without a machine id ends no epoch that
    has one. Mutation caught: evolve_host or rebooted() falling back to the host name
    when the machine id is missing."""
    clock = ManualClock(T0, uptime=100)
    with (
        open_ledger(store_url, clock=clock, host=FakeHost(name="n", boot_id="b1", machine_id=None)) as old,
        open_ledger(store_url, clock=clock, host=FakeHost(name="n", boot_id="b2")) as new,
    ):
        legacy = old.boot("legacy")
        assert legacy.machine is None
        old.queue("r1")
        old.start("r1", epoch=legacy)
        known = new.boot("known")
        new.queue("r2")
        new.start("r2", epoch=known)
        clock.advance(60)
        old.boot("legacy-2")  # no machine id, a third boot id: proves nothing about `known`
        _e, swept = new.startup("sweeper")
        assert swept.recovered == []
        assert {e.epoch: ended for e, ended in new.liveness() if e.epoch in (legacy.epoch, known.epoch)} == {
            legacy.epoch: None,
            known.epoch: None,
        }
    decoded = msgspec.json.decode(
        b'{"type":"process.booted","at":"2026-09-09T14:00:00Z","process":"w","epoch":"e",'
        b'"booted_at":"2026-09-09T14:00:00Z","host":"n","host_boot":"b1"}',
        type=ProcessBooted,
    )
    assert decoded.machine is None and evolve_host(None, decoded) is None


# ------------------------------------------------------------ O8: retirement
def test_O8_a_slot_whose_last_epoch_is_over_with_no_run_left_running_retires_and_the_live_reads_skip_it(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """Worker-per-run slots: one stopped after its run finished, one that exited with
    its run still running, one stopped with its run still running, one alive. The next
    startup recovers the two orphans and retires the three slots whose last epoch is
    over, so `epochs`, `liveness()` and the sweep's own view hold only the live fleet;
    `epochs(retired=True)` and a fold of the log keep all of them; a boot of a retired
    slot brings it back. On SQLite and the real PostgreSQL. Mutations caught: no
    retirement after the sweep (every worker ever booted stays in the sweep's view),
    `retirable` ignoring running runs (a slot retired before its orphan was recovered:
    the sweep reads no such slot, its orphan is missed), the orphan view not skipping
    retired slots."""
    lg, host, clock = fake_ledger
    made = {}
    for i, name in enumerate(("done", "died", "stopped-early", "alive")):
        host.spawn(300 + i, 10 + i)
        made[name] = w = lg.boot(f"worker-{name}", pid=300 + i)
        lg.queue(f"run-{name}")
        lg.start(f"run-{name}", epoch=w)
    lg.finish("run-done", epoch=made["done"])
    lg.stop(made["done"])
    lg.exited("worker-died", made["died"], observed_by="supervisor:s", signal=9)
    lg.stop(made["stopped-early"])
    clock.advance(5)

    sched, report = lg.startup("scheduler")
    assert sorted((v.run, v.rule) for v in report.recovered) == [("run-died", E), ("run-stopped-early", P)]
    gone = {"worker-done", "worker-died", "worker-stopped-early"}
    assert {e.process for e in lg.epochs()} == {"worker-alive", "scheduler"}
    assert {e.process for e, _ended in lg.liveness()} == {"worker-alive", "scheduler"}
    assert set(lg.orphan_view(candidates_only=True).processes) == {"worker-alive", "scheduler"}
    assert {e.process for e in lg.epochs(retired=True)} == gone | {"worker-alive", "scheduler"}
    assert all(lg.process(p).retired for p in gone)  # type: ignore[union-attr]
    assert set(orphans.fold(lg.events()).processes) >= gone  # history and replay keep them
    assert lg.sweep(made["died"]).outcome == "exited"  # a retired slot's epoch still sweeps as what it is
    head = lg._store.max_position()
    lg.startup("scheduler")  # nothing new to retire: the old scheduler epoch's slot booted again
    assert [type(r.event).__name__ for r in lg.events(after=head)].count("ProcessRetired") == 0

    back = lg.boot("worker-died", pid=400)  # the pid came back as a new pool child: the slot is back
    assert not lg.process("worker-died").retired  # type: ignore[union-attr]
    assert back.epoch in {e.epoch for e in lg.epochs()}
    assert sched.epoch not in {e.epoch for e, ended in lg.liveness() if ended is None}


def test_O8_retirement_is_refused_for_an_epoch_that_is_not_the_slots_last_and_said_once() -> None:
    """The fold's part: `process.retired` names the slot's last epoch, a second one
    appends nothing, a boot after it brings the slot back. Mutations caught: decide
    accepting an older epoch (a retirement racing a boot would retire a live slot),
    the retired mark kept across a boot."""
    from epochledger.ledger.events import ProcessRetired

    first = ProcessBooted(at=_at(0), process="w", epoch="e1", booted_at=_at(0))
    state = process_mod.fold([first])
    retire_e1 = ProcessRetired(at=_at(1), process="w", epoch="e1")
    assert process_mod.decide(retire_e1, state) == [retire_e1]
    state = process_mod.fold([retire_e1], state)
    assert state is not None and state.retired and process_mod.decide(retire_e1, state) == []
    state = process_mod.fold([ProcessBooted(at=_at(2), process="w", epoch="e2", booted_at=_at(2))], state)
    assert state is not None and not state.retired
    with pytest.raises(IllegalTransition, match="not the slot's last epoch"):
        process_mod.decide(ProcessRetired(at=_at(3), process="w", epoch="e1"), state)
    with pytest.raises(IllegalTransition, match="unknown epoch"):
        process_mod.decide(ProcessRetired(at=_at(3), process="w", epoch="e9"), state)


def test_O8_a_slot_with_a_run_left_running_never_retires_so_no_orphan_is_hidden(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """Retiring before the sweep (a retirer racing it): the exited worker's run is still
    running, so its slot stays, and the sweep that follows finds the orphan. Once the
    run is recovered, the slot retires. Mutation caught: `retirable` ignoring running
    runs (the slot retires, the sweep's view lacks the owner, and the orphan stays
    running for good)."""
    from epochledger.retire import retire

    lg, host, _clock = fake_ledger
    host.spawn(300, 10)
    w = lg.boot("worker-1", pid=300)
    lg.queue("r")
    lg.start("r", epoch=w)
    lg.exited("worker-1", w, observed_by="supervisor:s")
    sched = lg.boot("scheduler")
    assert retire(lg, sched) == []
    assert [(v.run, v.rule) for v in lg.sweep(sched).recovered] == [("r", E)]
    assert retire(lg, sched) == ["worker-1"]


def test_O8_O9_the_default_slot_never_retires_while_an_unowned_run_it_judges_runs(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """A run started with neither epoch nor process is judged by the ledger's default
    slot (rule O9). Were that slot retired while such a run runs, the orphan view (which
    leaves retired slots out) would lose its judge and the run would stay running
    unjudged. Mutation caught: `retirable` counting only a run's own slot and owner."""
    from epochledger.retire import retire

    lg, _host, clock = fake_ledger
    lg.set_default_slot("api")
    api = lg.boot("api")
    lg.queue("r")
    lg.start("r")  # no epoch, no process: the default slot judges it by O3
    lg.stop(api)
    clock.advance(5)
    other = lg.boot("scheduler")
    assert retire(lg, other) == [], "the default slot judges a running run: it stays"
    assert "api" in lg.orphan_view(candidates_only=True).processes
    _again, report = lg.startup("api")  # its next boot judges the run by O3, after it started
    assert report.recovered == [] and lg.get_run("r").status == "running"


class _Retirer:
    """A RetireTarget over a real ledger (epochledger/retire.py takes the Protocol, not
    the facade) whose first `conflicts` group commits lose a race, and whose reads fail
    when `down`: the two ways a retirement is housekeeping, never an error."""

    def __init__(self, lg: Ledger, *, conflicts: int = 0, down: bool = False) -> None:
        self.lg, self.conflicts, self.down, self.rounds = lg, conflicts, down, 0
        self.reads: list[dict[str, Any]] = []

    @property
    def clock(self) -> Clock:
        return self.lg.clock

    def orphan_view(self, **options: Any) -> orphans.View:
        self.reads.append(options)
        if self.down:
            raise StoreError("the store is unreachable")
        return self.lg.orphan_view(**options)

    def batch(self) -> Any:
        self.rounds += 1
        if self.conflicts:
            self.conflicts -= 1
            return _LostRace()
        return self.lg.batch()


class _LostRace:
    def submit(self, command: object) -> None:
        pass

    def __enter__(self) -> _LostRace:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            raise ConflictError(["process:worker-1"])


def _exited_worker(lg: Ledger, host: FakeHost) -> EpochState:
    host.spawn(300, 10)
    w = lg.boot("worker-1", pid=300)
    lg.exited("worker-1", w, observed_by="supervisor:s")
    return lg.boot("scheduler")


def test_O8_a_retirement_names_the_retiring_epoch_and_why(fake_ledger: tuple[Ledger, FakeHost, ManualClock]) -> None:
    from epochledger.retire import retire

    lg, host, _clock = fake_ledger
    sched = _exited_worker(lg, host)
    assert retire(lg, sched) == ["worker-1"]
    retired = [r.event for r in lg.events() if isinstance(r.event, ProcessRetired)]
    [event] = retired
    assert (event.process, event.actor, event.reason) == (
        "worker-1",
        sched.epoch,
        "its last epoch is over and no run of it is left running",
    )


def test_O8_a_retirement_that_loses_a_race_judges_again_and_retires(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock], caplog: pytest.LogCaptureFixture
) -> None:
    from epochledger.retire import retire

    lg, host, _clock = fake_ledger
    sched = _exited_worker(lg, host)
    target = _Retirer(lg, conflicts=1)
    assert retire(target, sched) == ["worker-1"] and target.rounds == 2
    assert lg.process("worker-1").retired  # type: ignore[union-attr]
    assert not caplog.records


def test_O8_a_retirement_that_keeps_losing_races_or_cannot_read_is_logged_and_left_to_the_next_startup(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock], caplog: pytest.LogCaptureFixture
) -> None:
    from epochledger.retire import CONFLICT_ROUNDS, retire

    lg, host, _clock = fake_ledger
    sched = _exited_worker(lg, host)
    caplog.set_level("WARNING", logger="epochledger.retire")
    racing = _Retirer(lg, conflicts=100)
    assert retire(racing, sched) == [] and racing.rounds == CONFLICT_ROUNDS == 4
    assert retire(_Retirer(lg, down=True), sched) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"retiring slots after the sweep of scheduler epoch {sched.epoch} kept losing races; "
        "the next startup retires them",
        f"retiring slots after the sweep of scheduler epoch {sched.epoch} failed: the store is unreachable",
    ]
    assert not lg.process("worker-1").retired  # type: ignore[union-attr]


def test_O8_a_retirement_reads_the_orphan_candidates_and_its_own_slot_not_the_fleet(
    fake_ledger: tuple[Ledger, FakeHost, ManualClock],
) -> None:
    """Retirement runs on every startup: its one read is the sweep's (the candidates,
    whose cost follows the live fleet, docs/benchmarks.md "Fleet size") plus the
    retiring epoch's own slot, never every run ever recorded."""
    from epochledger.retire import retire

    lg, host, _clock = fake_ledger
    sched = _exited_worker(lg, host)
    target = _Retirer(lg)
    assert retire(target, sched) == ["worker-1"]
    assert target.reads == [{"candidates_only": True, "slots": ("scheduler",)}]
