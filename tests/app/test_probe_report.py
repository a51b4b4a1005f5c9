"""What the host probe tells its caller and writes, exactly (rule O7).

tests/app/test_probe.py pins what the probe judges against real processes; these pin what
it says: the whole `ProbeReport` and every `Finding` field by field (the pid too), the
evidence text of each verdict word for word (an operator reads it in `epochledger
probe` and in `process.exited`), each refusal with its `where`, the actor and reason of
everything the probe appends (the exits, its own boot and stop), the pid boundaries, and
the races it loses. Mutations caught (make mutation): a Finding's pid dropped; any
verdict's evidence dropped or reworded; a report field dropped; the refusals' message or
`where` changed; an event written without its actor or the stop without its reason;
`probe()` not sweeping by default; the pid check's boundary or its `or`; a lost race
ending the probe instead of judging again; the final conflict's streams and message.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import msgspec
import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Batch, Ledger
from epochledger.ledger.clock import boot_instant
from epochledger.ledger.errors import ConflictError, InvalidInput
from epochledger.ledger.events import ProcessBooted, ProcessExited, ProcessStopped, ProcessStopping
from epochledger.ledger.host import FakeHost, PidFacts, SystemHost
from epochledger.probe import CONFLICT_ROUNDS, Finding, ProbeReport, probe
from tests.conftest import T0, losing_batch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads Linux's /proc")

PROBE = "probe@node-1"


class Unreadable(FakeHost):
    """A host whose kernel will not say anything about one pid (as /proc does for a pid
    it hides from this user): reading it raises OSError."""

    def __init__(self, hidden: int, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.hidden = hidden

    def process(self, pid: int) -> PidFacts | None:
        if pid == self.hidden:
            raise PermissionError(13, "Permission denied", f"/proc/{pid}/stat")
        return super().process(pid)


Losing = losing_batch("process-gone")  # a batch that loses its race on this stream


def _legacy_boot(lg: Ledger, process: str, pid: int, host: str, host_boot: str | None) -> str:
    """A boot with a pid the API now refuses (0, negative: rule L4), as a ledger written
    before that bound holds it: appended straight to the store. Its epoch id."""
    from epochledger.ledger.events import process_stream
    from epochledger.ledger.store import Append

    epoch = f"e-{process}"
    machine = lg.host.machine_id() if host == lg.host.name() else None  # as boot() records it (rule O10)
    booted = ProcessBooted(
        at=T0,
        process=process,
        epoch=epoch,
        booted_at=boot_instant(lg.clock),
        host=host,
        host_boot=host_boot,
        pid=pid,
        machine=machine,
    )
    lg._store.append([Append(process_stream(process), 1, booted)])
    return epoch


def _events(lg: Ledger, kind: type) -> list:
    return [r.event for r in lg.events() if isinstance(r.event, kind)]


@pytest.fixture
def host() -> Unreadable:
    return Unreadable(16, name="node-1", boot_id="boot-A", pid=10, processes={10: 1, 11: 50, 12: 60, 13: 70})


@pytest.fixture
def lg(sqlite_url: str, host: Unreadable) -> Iterator[Ledger]:
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=60.0), host=host) as ledger:
        yield ledger


def _dead_worker_with_a_run(lg: Ledger, host: FakeHost) -> str:
    """A worker on pid 12 running run `r`, then SIGKILLed (its pid gone): its epoch id."""
    w = lg.boot("gone", pid=12)
    lg.queue("r")
    lg.start("r", epoch=w)
    host.kill(12)
    return w.epoch


# ------------------------------------------------------------------ reports
def test_O7_a_probe_reports_every_verdict_with_its_pid_and_evidence_word_for_word(lg: Ledger, host: Unreadable) -> None:
    """One epoch per verdict on this host, plus one of another host and a stopped one
    (neither judged). The whole report, every Finding with its pid, and every exit
    with its actor. Mutations caught: Finding.pid None or dropped; the evidence of
    "no pid recorded", "cannot be read" and "unverified" dropped, None or reworded, their
    verdict None; the report's host, host_boot or observed_by None; the exited event's
    actor None or dropped."""
    e = {
        name: lg.boot(name, pid=pid).epoch
        for name, pid in (("alive", 11), ("gone", 12), ("zombie", 13), ("legacy", 15), ("hidden", 16))
    }
    e["zero"] = _legacy_boot(lg, "zero", 0, "node-1", "boot-A")
    e["reused"] = lg.boot("reused", pid=14, pid_start=80).epoch
    lg.submit(
        ProcessBooted(
            at=T0,
            process="nopid",
            epoch="e-nopid",
            booted_at=boot_instant(lg.clock),
            host="node-1",
            host_boot="boot-A",
            machine=host.machine_id(),
        )
    )  # an imported boot: no pid at all
    lg.boot("elsewhere", host="node-2", pid=12)  # another host's pid 12: not ours to judge
    lg.stop(lg.boot("done", pid=11))  # stopped: not live
    host.kill(12)
    host.zombies.add(13)
    host.spawn(14, 90)  # another process got pid 14
    host.spawn(15, 95)  # pid 15 did not run at its boot: no start time recorded
    head = lg._store.max_position()

    report = lg.probe(sweep=False)
    assert report == ProbeReport(
        host="node-1",
        host_boot="boot-A",
        observed_by=PROBE,
        exited=3,
        findings=[
            Finding(process="alive", epoch=e["alive"], pid=11, verdict="alive"),
            Finding(process="gone", epoch=e["gone"], pid=12, verdict="exited", evidence="pid 12 not running"),
            Finding(
                process="hidden",
                epoch=e["hidden"],
                pid=16,
                verdict="unjudged",
                evidence="pid 16 cannot be read on this host: [Errno 13] Permission denied: '/proc/16/stat'",
            ),
            Finding(
                process="legacy",
                epoch=e["legacy"],
                pid=15,
                verdict="unverified",
                evidence="pid 15 runs, but the boot recorded no start time to tell a reused pid apart",
            ),
            Finding(process="nopid", epoch="e-nopid", verdict="unjudged", evidence="no pid recorded"),
            Finding(
                process="reused",
                epoch=e["reused"],
                pid=14,
                verdict="exited",
                evidence="pid 14 start 90 != recorded 80 (the pid was reused)",
            ),
            Finding(process="zero", epoch=e["zero"], pid=0, verdict="unjudged", evidence="no pid recorded"),
            Finding(
                process="zombie",
                epoch=e["zombie"],
                pid=13,
                verdict="exited",
                evidence="pid 13 is a zombie: it exited and was not reaped yet",
            ),
        ],
    )
    assert report.swept_by is None and report.sweep is None
    assert [(x.process, x.epoch, x.observed_by, x.actor, x.evidence) for x in _events(lg, ProcessExited)] == [
        ("gone", e["gone"], PROBE, PROBE, "pid 12 not running"),
        ("reused", e["reused"], PROBE, PROBE, "pid 14 start 90 != recorded 80 (the pid was reused)"),
        ("zombie", e["zombie"], PROBE, PROBE, "pid 13 is a zombie: it exited and was not reaped yet"),
    ]
    assert lg._store.max_position() == head + 3


def test_O7_after_a_reboot_the_probe_says_which_boots_and_boots_and_stops_its_own_slot_by_name(
    lg: Ledger, host: Unreadable
) -> None:
    """The host rebooted: the old boot's epochs are found `host-rebooted` with both boot
    ids in the evidence and their pid kept; the probe's own boot and its stop are by
    `probe@<host>`, the stop saying why. Mutations caught: the rebooted evidence None or
    dropped; the own boot's actor None or dropped; the stop's actor None or dropped,
    its reason None, dropped or reworded."""
    w = lg.boot("w1", pid=11)
    lg.queue("r1")
    lg.start("r1", epoch=w)
    host.reboot("boot-B")
    report = lg.probe()
    assert report.sweep is not None and report.swept_by is not None
    assert msgspec.structs.replace(report, sweep=None, swept_by=None) == ProbeReport(
        host="node-1",
        host_boot="boot-B",
        observed_by=PROBE,
        exited=0,
        findings=[
            Finding(
                process="w1",
                epoch=w.epoch,
                pid=11,
                verdict="host-rebooted",
                evidence="booted under host boot boot-A; this host now runs host boot boot-B",
            )
        ],
        retired=["w1"],
    )  # its run recovered, nothing of w1 is live: it retires (rule O8)
    assert (report.sweep.process, report.sweep.epoch, [(v.run, v.rule) for v in report.sweep.recovered]) == (
        PROBE,
        report.swept_by,
        [("r1", "O2-host-rebooted")],
    )
    [own] = [b for b in _events(lg, ProcessBooted) if b.process == PROBE]
    assert (own.epoch, own.actor, own.host, own.host_boot, own.pid) == (report.swept_by, PROBE, "node-1", "boot-B", 10)
    stops = [(type(x).__name__, x.epoch, x.actor, x.reason) for x in _events(lg, (ProcessStopping, ProcessStopped))]
    assert stops == [
        (kind, report.swept_by, PROBE, "the probe's sweep is done") for kind in ("ProcessStopping", "ProcessStopped")
    ]
    assert _events(lg, ProcessExited) == []


def test_O7_the_probe_function_sweeps_unless_told_not_to(lg: Ledger, host: Unreadable) -> None:
    """`probe(ledger)` called as the module's function (Ledger.probe passes `sweep`
    explicitly): it sweeps by default. Mutation caught: the default `sweep=False`."""
    epoch = _dead_worker_with_a_run(lg, host)
    report = probe(lg)
    assert report.exited == 1 and report.sweep is not None
    assert [(v.run, v.rule, v.owner_epoch, v.observed_by) for v in report.sweep.recovered] == [
        ("r", "O2-exited", epoch, PROBE)
    ]
    assert lg.get_run("r").status == "failed_resumable"


# --------------------------------------------------------------- pid bounds
def test_O7_pid_0_and_negative_pids_are_no_pid_and_pid_1_is_judged(sqlite_url: str) -> None:
    """On the real host (/proc): a pid 0 or -1, recorded before the API refused them
    (rule L4), names no process (`unjudged`, "no pid recorded", nothing appended), pid 1 (init, which runs, with the start time its
    boot recorded) is `alive`, and an imported boot without a pid is `unjudged`.
    Mutations caught: `pid < 0` (pid 0 asked of the kernel: "pid 0 not running", an exit
    recorded), `pid <= 1` (init left unjudged), `or` -> `and` (pid 0 asked of the
    kernel; no pid at all compared with 0: TypeError)."""
    here = SystemHost()
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=60.0)) as lg:
        init = lg.boot("init", pid=1)
        zero, negative = (
            _legacy_boot(lg, name, pid, socket.gethostname(), here.boot_id())
            for name, pid in (("zero", 0), ("negative", -1))
        )
        assert init.pid_start == here.process(1).start  # type: ignore[union-attr]
        lg.submit(
            ProcessBooted(
                at=T0,
                process="nopid",
                epoch="e-nopid",
                booted_at=boot_instant(lg.clock),
                host=socket.gethostname(),
                host_boot=here.boot_id(),
                machine=here.machine_id(),
            )
        )
        head = lg._store.max_position()
        report = lg.probe(sweep=False)
        assert report.findings == [
            Finding(process="init", epoch=init.epoch, pid=1, verdict="alive"),
            Finding(process="negative", epoch=negative, pid=-1, verdict="unjudged", evidence="no pid recorded"),
            Finding(process="nopid", epoch="e-nopid", verdict="unjudged", evidence="no pid recorded"),
            Finding(process="zero", epoch=zero, pid=0, verdict="unjudged", evidence="no pid recorded"),
        ]
        assert report.exited == 0 and lg._store.max_position() == head


# ---------------------------------------------------------------- refusals
def test_O7_a_host_without_a_boot_id_is_refused_in_the_probes_name(sqlite_url: str) -> None:
    """Mutations caught: the message reworded (either half), `where` None, dropped or
    reworded."""
    with open_ledger(sqlite_url, clock=ManualClock(T0), host=FakeHost(boot_id=None)) as lg:
        lg.boot("w")
        head = lg._store.max_position()
        with pytest.raises(InvalidInput) as err:
            lg.probe()
        assert err.value.where == "probe"
        assert str(err.value) == (
            "probe: the probe needs this host's boot id (/proc/sys/kernel/random/boot_id on Linux); "
            "this host has none, so a pid cannot be judged"
        )
        assert lg._store.max_position() == head


def test_O7_a_host_name_too_long_for_the_probes_slot_is_refused_by_name(sqlite_url: str) -> None:
    """A host name of 195 characters is a valid host for a boot, but `probe@<host>` (201)
    is not a valid slot name: refused naming `host`, nothing appended. Mutations caught:
    the `where` of that check None or reworded."""
    name = "n" * 195
    with open_ledger(sqlite_url, clock=ManualClock(T0), host=FakeHost(name=name)) as lg:
        lg.boot("w", pid=11)
        head = lg._store.max_position()
        with pytest.raises(InvalidInput) as err:
            lg.probe()
        assert err.value.where == "host" and str(err.value).startswith("host: ")
        assert str(err.value).startswith("host: str 'probe@nnnn")  # the slot name it would have used
        assert lg._store.max_position() == head


# ------------------------------------------------------------------- races
def test_O7_a_lost_race_is_judged_again_and_the_next_round_records_the_exit(
    lg: Ledger, host: Unreadable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first round's batch loses its race (nothing appended); the probe reads and
    judges again, and the second round records the exit. Mutation caught: `continue` ->
    `break` (the probe returns after the lost round: exited 0, no exit recorded)."""
    epoch = _dead_worker_with_a_run(lg, host)
    rounds: list[int] = []

    def batch() -> Batch:
        rounds.append(1)
        return Losing(lg) if len(rounds) == 1 else Batch(lg)

    monkeypatch.setattr(lg, "batch", batch)
    report = lg.probe(sweep=False)
    assert len(rounds) == 2
    assert report == ProbeReport(
        host="node-1",
        host_boot="boot-A",
        observed_by=PROBE,
        exited=1,
        findings=[Finding(process="gone", epoch=epoch, pid=12, verdict="exited", evidence="pid 12 not running")],
    )
    assert [(x.epoch, x.evidence) for x in _events(lg, ProcessExited)] == [(epoch, "pid 12 not running")]


def test_O7_losing_every_race_raises_a_conflict_saying_so(
    lg: Ledger, host: Unreadable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CONFLICT_ROUNDS lost races: ConflictError naming the streams the last race was
    lost on (as the sweep's does), nothing appended. Mutations caught: its streams
    None, empty or the message passed as the streams; its detail None or dropped."""
    _dead_worker_with_a_run(lg, host)
    head = lg._store.max_position()
    entered: list[int] = []

    def batch() -> Batch:
        entered.append(1)
        return Losing(lg)

    monkeypatch.setattr(lg, "batch", batch)
    with pytest.raises(ConflictError) as err:
        lg.probe()
    assert err.value.streams == ["process-gone"] and len(entered) == CONFLICT_ROUNDS
    assert str(err.value) == (
        "concurrent write to process-gone: another writer appended first; nothing was appended "
        f"(the probe of node-1 kept losing races after {CONFLICT_ROUNDS} re-reads)"
    )
    assert lg._store.max_position() == head
