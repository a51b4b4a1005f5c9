"""The host probe (rules O7, O8): record the exits nobody reported, then sweep.

A worker per run (O8) dies without a word when it is SIGKILLed, OOM-killed or its
container is torn down, and its supervisor may die with it. The probe runs on the
worker's host and asks the kernel, through the host-facts port (ledger/host.py), about
every epoch the ledger still holds live on this host (this machine id, rule O10, and
this host name, which stands for the pid namespace: docs/operations.md):

- recorded under this host's current boot id: its pid is gone, a zombie, or runs with
  another start time than the boot recorded (the pid was reused) -> `process.exited`,
  `observed_by="probe@<host>"`, with that evidence; a pid that runs with the recorded
  start time is alive and left alone;
- recorded under another boot id of this host: the host rebooted since. Nothing is
  recorded for it: the probe's own boot (below), made under the current boot id, is the
  fact that ends it (`O2-host-rebooted`, ledger.process.end_of);
- a pid that runs but whose start time the boot did not record cannot be told from a
  reused pid: left alone and reported `unverified` (docs/operations.md).

Then the usual sweep recovers the orphans (O5), and the slots left with nothing live
retire (O8, epochledger/retire.py): with the caller's own epoch when a
scheduler probes from its timer or at its boot, else with an epoch of the probe's own
slot `probe@<host>`, booted for the purpose and stopped cleanly afterwards (booted only
when there is something to recover, so a probe on a timer that finds nothing appends
nothing). The probe judges only its own host: it cannot see another host's pids, and
another machine that shares its name is another host.

It takes a ProbeTarget, never the application facade: the application imports the
probe, not the other way round (the import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import msgspec

from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import ConflictError, InvalidInput, StoreError
from epochledger.ledger.events import Name, ProcessExited, Recorded
from epochledger.ledger.host import Host
from epochledger.ledger.process import EpochRef, EpochState, ProcessState
from epochledger.ledger.run import RunState
from epochledger.projections.orphans import Verdict
from epochledger.retire import RetireBatch, RetireTarget, retire
from epochledger.sweep import SweepReport


class ProbeBatch(RetireBatch, Protocol):
    """What the probe needs of a group commit (epochledger.app.Batch): retiring's, and
    the events it appended, to count the exits."""

    @property
    def recorded(self) -> Sequence[Recorded]: ...

    def __enter__(self) -> ProbeBatch: ...


class ProbeTarget(RetireTarget, Protocol):
    """What the probe needs of a ledger (epochledger.app.Ledger is one): retiring's, the
    host-facts port, the liveness and orphan reads, the epoch lookup, and the boot,
    sweep and stop of the epoch it sweeps with."""

    @property
    def host(self) -> Host: ...

    def batch(self) -> ProbeBatch: ...

    def epoch(self, epoch: EpochRef | str) -> EpochState: ...

    def liveness(self) -> Sequence[tuple[EpochState, tuple[str, str] | None]]: ...

    def orphans(self) -> Sequence[tuple[RunState, Verdict]]: ...

    def boot(self, process: str, *, actor: str | None = None) -> EpochState: ...

    def sweep(self, epoch: EpochRef | str) -> SweepReport: ...

    def stop(self, epoch: EpochRef | str, *, actor: str | None = None, reason: str | None = None) -> ProcessState: ...


ALIVE = "alive"  # the pid runs with the recorded start time
EXITED = "exited"  # the probe recorded process.exited for it
UNVERIFIED = "unverified"  # the pid runs, but no start time was recorded to compare
REBOOTED = "host-rebooted"  # recorded under another boot of this host: the host rebooted since
UNJUDGED = "unjudged"  # no pid recorded: nothing to ask the kernel

CONFLICT_ROUNDS = 8

log = logging.getLogger("epochledger.probe")


class Finding(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the probe found for one live epoch of this host."""

    process: str
    epoch: str
    verdict: str  # ALIVE | EXITED | UNVERIFIED | REBOOTED | UNJUDGED
    pid: int | None = None
    evidence: str | None = None


class ProbeReport(msgspec.Struct, kw_only=True):
    host: str
    host_boot: str | None
    observed_by: str
    findings: list[Finding] = []
    exited: int = 0  # process.exited events the probe appended
    swept_by: str | None = None  # the epoch whose sweep followed (None: no sweep was needed or asked)
    sweep: SweepReport | None = None
    retired: list[str] = []  # the slots that retired after that sweep (rule O8, epochledger/retire.py)


def observer(host: str) -> str:
    return f"probe@{host}"


def judge(ledger: ProbeTarget, epoch: EpochState, host_boot: str | None) -> Finding:
    """One live epoch of this host, judged by the kernel's facts about its pid."""

    def found(verdict: str, evidence: str | None = None) -> Finding:
        return Finding(process=epoch.process, epoch=epoch.epoch, pid=epoch.pid, verdict=verdict, evidence=evidence)

    if epoch.host_boot is not None and host_boot is not None and epoch.host_boot != host_boot:
        return found(REBOOTED, f"booted under host boot {epoch.host_boot}; this host now runs host boot {host_boot}")
    pid = epoch.pid
    if pid is None or pid <= 0:
        return found(UNJUDGED, "no pid recorded")
    try:
        now = ledger.host.process(pid)
    except OSError as e:
        return found(UNJUDGED, f"pid {pid} cannot be read on this host: {e}")
    if now is None:
        return found(EXITED, f"pid {pid} not running")
    if now.zombie:
        return found(EXITED, f"pid {pid} is a zombie: it exited and was not reaped yet")
    if epoch.pid_start is None:
        return found(UNVERIFIED, f"pid {pid} runs, but the boot recorded no start time to tell a reused pid apart")
    if now.start != epoch.pid_start:
        return found(EXITED, f"pid {pid} start {now.start} != recorded {epoch.pid_start} (the pid was reused)")
    return found(ALIVE)


def probe(ledger: ProbeTarget, *, epoch: EpochRef | str | None = None, sweep: bool = True) -> ProbeReport:
    """Probe this host's live epochs, record an exit for each dead one, then sweep.

    `epoch`: the caller's own live epoch (a scheduler probing from its timer): its sweep
    recovers the orphans. Without it the probe boots an epoch of slot `probe@<host>` to
    sweep with, only if there is an orphan to recover or a reboot to record, and stops it
    after. `sweep=False`: record the exits only. Refused (InvalidInput, nothing
    appended) where the host port cannot read the host's boot id (no /proc) or its
    machine id (no /etc/machine-id: its epochs could not be told from those of another
    machine with the same name, rule O10), and (UnknownEpoch, nothing appended) for an
    `epoch` no slot booted."""
    facts = ledger.host
    here = facts.name()
    boot_id = facts.boot_id()
    if boot_id is None:
        raise InvalidInput(
            "the probe needs this host's boot id (/proc/sys/kernel/random/boot_id on Linux); "
            "this host has none, so a pid cannot be judged",
            where="probe",
        )
    machine = facts.machine_id()
    if machine is None:
        raise InvalidInput(
            "the probe needs this host's machine id (/etc/machine-id); this host has none, so its "
            "epochs cannot be told from another machine's with the same name (rule O10)",
            where="probe",
        )
    by = check_value(observer(here), Name, "host")
    if epoch is not None:  # rule L4: the caller's epoch is checked before anything is appended
        epoch = ledger.epoch(epoch)  # UnknownEpoch (nothing appended) if no slot booted it
    findings: list[Finding] = []
    exited = 0
    lost: list[str] = []  # the streams the last lost race named
    for _round in range(CONFLICT_ROUNDS):
        findings = [
            judge(ledger, e, boot_id)
            for e, ended in ledger.liveness()
            if ended is None and e.machine == machine and e.host == here
        ]
        try:
            with ledger.batch() as b:
                for f in findings:
                    if f.verdict == EXITED:
                        b.submit(
                            ProcessExited(
                                at=ledger.clock.now(),
                                process=f.process,
                                epoch=f.epoch,
                                observed_by=by,
                                evidence=f.evidence,
                                actor=by,
                            )
                        )
            exited = len(b.recorded)
            break
        except ConflictError as e:
            lost = e.streams
            continue  # another writer moved a slot (a boot, another probe): judge again
    else:
        raise ConflictError(lost, f"the probe of {here} kept losing races after {CONFLICT_ROUNDS} re-reads")
    report = ProbeReport(host=here, host_boot=boot_id, observed_by=by, findings=findings, exited=exited)
    if not sweep:
        return report
    if epoch is not None:
        report.sweep = ledger.sweep(epoch)
        report.swept_by = report.sweep.epoch
        if report.sweep.outcome == "swept":
            report.retired = retire(ledger, epoch)  # rule O8: a probe on a timer retires too
        return report
    rebooted = any(f.verdict == REBOOTED for f in findings)
    if rebooted or any(not v.uses_time for _run, v in ledger.orphans()):
        own = ledger.boot(by, actor=by)  # under the current host boot: ends the epochs of earlier boots
        try:
            report.sweep = ledger.sweep(own)
            if report.sweep.outcome == "swept":
                report.retired = retire(ledger, own)  # before its own stop: the probe's slot stays
        finally:
            ledger.stop(own, actor=by, reason="the probe's sweep is done")
        report.swept_by = own.epoch
    return report


def exits_at_startup(ledger: ProbeTarget) -> ProbeReport | None:
    """The probe without its sweep, for `Ledger.startup` (rules O5, O7): after the new
    epoch's boot and before its sweep, record the exits of this host's live epochs
    whose pids are gone, so that sweep recovers their runs. Epochs of an earlier boot
    of this host need nothing: the new boot ended them. Where this host cannot be
    probed (no boot id, no machine id) it does nothing and returns None: the startup
    still boots and sweeps. A store error or a race lost every round is logged at
    WARNING and leaves the exits to the next probe; the sweep that follows has the
    bounded retries of rule O5."""
    facts = ledger.host
    if facts.boot_id() is None or facts.machine_id() is None:
        return None
    try:
        return probe(ledger, sweep=False)
    except (StoreError, ConflictError) as e:
        log.warning("startup on %s: the exits of this host's earlier epochs were not recorded: %s", facts.name(), e)
        return None
