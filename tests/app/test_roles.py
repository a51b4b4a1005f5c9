"""One holder of a role (rule T7, docs/tick.md "Exclusive steps", docs/operations.md
"Exclusive roles"): an epoch holds a role such as "admission" until a fact of O7 ends
that epoch; each grant carries a fencing token that only grows.

The incident: two live drivers both admitted the same runs. The ledger kept its own
writes single, but the scheduler's side effects happened twice. Every test here runs on
SQLite and the real PostgreSQL; the last one with two drivers in two OS processes and a
SIGKILL of the holder.
"""

from __future__ import annotations

import multiprocessing.synchronize
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Batch, Ledger
from epochledger.ledger.errors import ConflictError, RoleHeld, StaleEpoch
from epochledger.ledger.events import Recorded, RoleGranted, role_stream
from epochledger.ledger.process import EpochState
from epochledger.ledger.run import RunState
from epochledger.tick import TickDriver
from tests.conftest import race
from tests.helpers.tick_helpers import lines, wait_for

ROLE = "admission"


def grants(lg: Ledger) -> list[RoleGranted]:
    return [r.event for r in lg.events() if isinstance(r.event, RoleGranted)]


def test_T7_one_live_holder_at_a_time_another_gets_RoleHeld_and_nothing_is_appended(ledger: Ledger) -> None:
    """The first live epoch to ask gets token 1; another live epoch is refused by name
    (role, the holder's epoch and slot, its token) and appends nothing. Mutation caught:
    decide granting whenever the asker differs (the holder's liveness ignored)."""
    a, b = ledger.boot("driver-a"), ledger.boot("driver-b")
    held = ledger.acquire_role(ROLE, a)
    assert (held.epoch, held.process, held.token) == (a.epoch, "driver-a", 1)
    head = ledger._store.max_position()
    with pytest.raises(RoleHeld) as refused:
        ledger.acquire_role(ROLE, b)
    e = refused.value
    assert (e.role, e.epoch, e.holder_epoch, e.holder_process, e.token) == (ROLE, b.epoch, a.epoch, "driver-a", 1)
    assert ledger._store.max_position() == head
    assert ledger.role(ROLE) == held


def test_T7_the_holder_asking_again_appends_nothing_and_keeps_its_token(ledger: Ledger) -> None:
    """A retried call (every tick asks again) returns the grant that stands. Mutation
    caught: decide granting the holder again (a new event and token each tick)."""
    a = ledger.boot("driver-a")
    first = ledger.acquire_role(ROLE, a)
    head = ledger._store.max_position()
    assert ledger.acquire_role(ROLE, a.epoch) == first  # by its id too
    assert ledger._store.max_position() == head and len(grants(ledger)) == 1


def _superseded(lg: Ledger, a: EpochState) -> None:
    lg.boot("driver-a")


def _stopped(lg: Ledger, a: EpochState) -> None:
    lg.stop(a)


def _exited(lg: Ledger, a: EpochState) -> None:
    lg.exited("driver-a", a, observed_by="supervisor:test", signal=9, evidence="SIGKILL")


def _host_rebooted(lg: Ledger, a: EpochState) -> None:
    lg.boot("other-slot", host="far", host_boot="boot-2", machine="machine-far")  # the same machine (rule O10)


ENDS: dict[str, Callable[[Ledger, EpochState], None]] = {
    "O2-superseded": _superseded,
    "O2-stopped": _stopped,
    "O2-exited": _exited,
    "O2-host-rebooted": _host_rebooted,
}


@pytest.mark.parametrize("rule", list(ENDS))
def test_T7_the_role_passes_on_each_fact_of_O7_with_a_token_that_only_grows(ledger: Ledger, rule: str) -> None:
    """While the holder is live the role stays; once a fact of O7 ends its epoch, the
    next asker gets it with token + 1, and the grant names the previous holder and the
    fact that ended it, as end_of (the one liveness definition) words it. Mutations
    caught: a token that restarts at 1, a liveness check that knows only the slot's own
    facts (`EpochState.live`: the host reboot is missed)."""
    a = ledger.boot("driver-a", host="far", host_boot="boot-1", machine="machine-far")
    b = ledger.boot("driver-b")
    ledger.acquire_role(ROLE, a)
    with pytest.raises(RoleHeld):
        ledger.acquire_role(ROLE, b)
    ENDS[rule](ledger, a)
    passed = ledger.acquire_role(ROLE, b)
    assert (passed.epoch, passed.token) == (b.epoch, 2)
    last = grants(ledger)[-1]
    assert (last.previous_epoch, last.previous_process, last.previous_token, last.previous_rule) == (
        a.epoch,
        "driver-a",
        1,
        rule,
    )
    assert last.previous_evidence and a.epoch in last.previous_evidence


def test_T7_a_dead_epoch_takes_no_role_and_appends_nothing(ledger: Ledger) -> None:
    """The asker must be live itself (rule F1): a stopped epoch asking for a free role
    is refused with StaleEpoch, nothing appended. Mutation caught: decide skipping the
    asker's liveness (a dead driver would be granted a free role)."""
    a = ledger.boot("driver-a")
    ledger.stop(a)
    head = ledger._store.max_position()
    with pytest.raises(StaleEpoch) as refused:
        ledger.acquire_role(ROLE, a)
    assert refused.value.epoch == a.epoch and refused.value.evidence is None
    assert ledger._store.max_position() == head and ledger.role(ROLE) is None


def test_T7_two_grants_decided_together_one_lands_the_other_conflicts_then_is_refused(ledger: Ledger) -> None:
    """Two acquirers decide against the same (empty) role stream: the stream's version
    check lets one grant land; the other's commit conflicts, and asking again after
    the re-read is a typed refusal, never a second holder."""
    a, b = ledger.boot("driver-a"), ledger.boot("driver-b")
    first, second = ledger.batch(), ledger.batch()
    for batch, epoch in ((first, a), (second, b)):
        batch.submit(RoleGranted(at=ledger.clock.now(), role=ROLE, epoch=epoch.epoch, process=epoch.process))
    first.commit()
    with pytest.raises(ConflictError) as conflict:
        second.commit()
    assert role_stream(ROLE) in conflict.value.streams
    with pytest.raises(RoleHeld):
        ledger.acquire_role(ROLE, b)
    assert [(g.epoch, g.token) for g in grants(ledger)] == [(a.epoch, 1)]


def test_T7_acquire_role_that_loses_the_commit_race_re_reads_and_is_refused(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ledger.acquire_role decides on an empty role stream, and a rival's grant lands
    just before its commit (a real conflict on the store's version check): it re-reads
    and raises the typed refusal, not ConflictError, and appends nothing. Mutation
    caught: acquire_role without its re-read on a conflict."""
    a, b = ledger.boot("driver-a"), ledger.boot("driver-b")
    commits: list[int] = []

    class RivalFirst(Batch):
        def commit(self) -> list[Recorded]:
            commits.append(self.pending)
            if len(commits) == 1:
                with Batch(ledger) as rival:
                    rival.submit(RoleGranted(at=ledger.clock.now(), role=ROLE, epoch=a.epoch, process=a.process))
            return super().commit()

    monkeypatch.setattr(ledger, "batch", lambda: RivalFirst(ledger))
    with pytest.raises(RoleHeld) as refused:
        ledger.acquire_role(ROLE, b)
    assert refused.value.holder_epoch == a.epoch and commits == [1]  # the second decision appended nothing
    assert [(g.epoch, g.token) for g in grants(ledger)] == [(a.epoch, 1)]


def _racer(url: str, worker: int, go: multiprocessing.synchronize.Barrier, results: Any) -> None:
    with open_ledger(url) as lg:
        epoch = lg.boot(f"racer-{worker}")
        go.wait()
        try:
            results.put(("granted", lg.acquire_role(ROLE, epoch).token))
        except RoleHeld as e:
            results.put(("refused", e.token))


def test_T7_two_processes_racing_for_a_free_role_one_holds_it_the_other_is_refused(store_url: str) -> None:
    """Two OS processes ask at the same instant (a barrier): exactly one grant (token
    1); the other gets RoleHeld naming token 1, after its conflict's re-read if it
    lost the commit race (the test above pins that path deterministically)."""
    with open_ledger(store_url, init=True):
        pass
    outcomes = race(_racer, store_url)
    assert sorted(outcomes) == [("granted", 1), ("refused", 1)]  # type: ignore[type-var]
    with open_ledger(store_url) as lg:
        assert len(grants(lg)) == 1


def test_T7_an_exclusive_step_runs_only_in_a_tick_whose_epoch_holds_its_role(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Two drivers, one role: the holder's tick runs `admit` with the grant's token in
    hand; the other's tick skips `admit` (not a failure: no tick event, no streak) and
    still runs its other steps; the report says which roles it held. Once the holder's
    epoch stops, the other's next tick takes the role with token 2. Mutation caught:
    the driver running an exclusive step whatever the role (both drivers admit)."""
    with ledger.batch() as b:
        b.queue("r1", workflow="wf")
    admitted: list[tuple[str, str, int]] = []
    observed: list[str] = []

    def driver(slot: str) -> TickDriver:
        epoch = ledger.boot(slot)
        d: TickDriver

        def admit(s: RunState) -> None:
            admitted.append((slot, s.run, d.token(ROLE)))

        def observe(s: RunState) -> None:
            observed.append(slot)

        d = TickDriver(
            ledger, [("admit", admit), ("observe", observe)], epoch=epoch, exclusive={"admit": ROLE}, step_deadline=None
        )
        return d

    a, b = driver("driver-a"), driver("driver-b")
    ra, rb = a.tick(), b.tick()
    assert ra.ok and rb.ok
    assert (dict(ra.roles_held), dict(ra.roles_not_held), ra.steps_skipped) == ({ROLE: 1}, {}, ())
    assert dict(rb.roles_held) == {} and rb.steps_skipped == ("admit",)
    assert rb.roles_not_held == {ROLE: f"epoch {a.epoch} of driver-a, token 1"}
    assert admitted == [("driver-a", "r1", 1)] and observed == ["driver-a", "driver-b"]
    assert rb.appended == 0 and ledger.get_run("r1").tick_streak is None
    ledger.stop(a.epoch)
    clock.advance(1)
    rb = b.tick()
    assert dict(rb.roles_held) == {ROLE: 2} and rb.steps_skipped == ()
    assert admitted[-1] == ("driver-b", "r1", 2)
    assert rb.to_builtins()["roles_held"] == {ROLE: 2}


# ------------------------------------------------- two drivers, two OS processes
DRIVER = r"""
import json, os, sys, time
from epochledger import open_ledger
from epochledger.tick import TickDriver

url, slot, log, sink, stop = sys.argv[1:]
with open_ledger(url) as lg:
    epoch = lg.boot(slot)

    def admit(run):
        # The system the scheduler drives: it keeps the highest token it has seen and
        # refuses a call that carries a lower one (a stale holder).
        token = driver.token("admission")
        with open(sink, "a") as f:
            f.write(json.dumps({"slot": slot, "run": run.run, "token": token}) + "\n")

    driver = TickDriver(lg, [("admit", admit)], epoch=epoch, exclusive={"admit": "admission"}, step_deadline=None)
    with open(log, "a") as f:
        f.write(json.dumps({"booted": epoch.epoch, "pid": os.getpid()}) + "\n")
    while not os.path.exists(stop):
        report = driver.tick()
        with open(log, "a") as f:
            f.write(json.dumps({"held": dict(report.roles_held), "not_held": dict(report.roles_not_held),
                                "fatal": None if report.fatal is None else report.fatal.error}) + "\n")
        time.sleep(0.05)
    lg.stop(epoch)
"""


@pytest.fixture
def drivers(children: list[subprocess.Popen[bytes]]) -> list[subprocess.Popen[bytes]]:
    """The driver processes a test starts: killed if still running and reaped at teardown (conftest `children`)."""
    return children


def test_T7_O7_two_driver_processes_the_holder_sigkilled_its_role_passes_with_a_higher_token(
    store_url: str, tmp_path: Path, drivers: list[subprocess.Popen[bytes]]
) -> None:
    """Two drivers in two OS processes, both live, tick the same run with an exclusive
    `admit`: only the holder admits; the other reports the role held by the first. The
    holder is SIGKILLed; the probe on this host records its exit (a fact of O7, pid not
    running), and the survivor's next tick takes the role with token 2. The driven
    system (a sink) sees every call of the first driver with token 1, then only the
    second's with token 2: never both at once, never a token going back. Mutations
    caught: decide ignoring the holder's liveness (both drivers admit), a token that
    restarts at 1."""
    with open_ledger(store_url, init=True) as lg:
        with lg.batch() as b:
            b.queue("r1", workflow="wf")
    sink, stop = tmp_path / "sink.ndjson", tmp_path / "stop"

    def spawn(slot: str) -> Path:
        log = tmp_path / f"{slot}.ndjson"
        drivers.append(
            subprocess.Popen([sys.executable, "-c", DRIVER, store_url, slot, str(log), str(sink), str(stop)])
        )
        return log

    log_a = spawn("driver-a")
    wait_for(log_a, lambda x: x.get("held") == {ROLE: 1})
    log_b = spawn("driver-b")
    refused = wait_for(log_b, lambda x: ROLE in x.get("not_held", {}))
    booted_a = wait_for(log_a, lambda x: "booted" in x)
    assert refused["not_held"][ROLE] == f"epoch {booted_a['booted']} of driver-a, token 1"
    time.sleep(0.3)  # a few more ticks of both: the second still admits nothing
    assert {s["slot"] for s in lines(sink)} == {"driver-a"}

    holder = drivers[0]
    holder.send_signal(signal.SIGKILL)
    assert holder.wait(timeout=30) == -signal.SIGKILL
    time.sleep(0.3)  # silence is no fact of O7: the role stays with the dead holder until its exit is recorded
    assert {s["slot"] for s in lines(sink)} == {"driver-a"}
    with open_ledger(store_url) as lg:
        probed = lg.probe(sweep=False)
        assert probed.exited == 1
    wait_for(log_b, lambda x: x.get("held") == {ROLE: 2})
    wait_for(sink, lambda x: x["slot"] == "driver-b")
    stop.touch()
    assert drivers[1].wait(timeout=60) == 0

    calls = lines(sink)
    tokens = [c["token"] for c in calls]
    assert tokens == sorted(tokens) and {c["slot"]: c["token"] for c in calls} == {"driver-a": 1, "driver-b": 2}
    first_b = next(i for i, c in enumerate(calls) if c["slot"] == "driver-b")
    assert all(c["slot"] == "driver-b" for c in calls[first_b:])
    with open_ledger(store_url) as lg:
        passed = grants(lg)[-1]
        assert (passed.token, passed.process, passed.previous_rule) == (2, "driver-b", "O2-exited")
        assert passed.previous_evidence and f"pid {booted_a['pid']} not running" in passed.previous_evidence
        assert os.getpid() != booted_a["pid"]


@pytest.mark.parametrize("role", ["", "two words", "x" * 201, 7, None])
def test_T7_L4_a_bad_role_name_is_refused_by_name_and_nothing_is_appended(ledger: Ledger, role: Any) -> None:
    """A role is a Name (rule L4): acquire_role and role refuse anything else with
    InvalidInput naming the `role` field, and nothing is appended."""
    from epochledger.ledger.errors import InvalidInput

    a = ledger.boot("driver-a")
    head = ledger._store.max_position()
    for call in (lambda: ledger.acquire_role(role, a), lambda: ledger.role(role)):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert "role" in (refused.value.where or "") or "$.role" in str(refused.value)
    assert ledger._store.max_position() == head


def test_T7_L4_an_asker_named_by_nothing_is_refused_by_name_and_appends_nothing(ledger: Ledger) -> None:
    """`acquire_role(role, None)` (an API caller's hole) is refused naming the epoch
    parameter, as `epoch(None)` is, never an assertion. Found by the API fuzz."""
    from epochledger.ledger.errors import InvalidInput

    head = ledger._store.max_position()
    for call in (lambda: ledger.acquire_role(ROLE, None), lambda: ledger.epoch(None)):  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.where == "epoch"
    assert ledger._store.max_position() == head
