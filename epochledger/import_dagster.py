"""Import a Dagster instance's run history into the ledger (rule I3; docs/import-dagster.md).

Read through Dagster's public instance API (`DagsterInstance.from_ref`,
`get_run_records`, `get_records_for_run`), written through the ledger's one write path
(`Batch.submit`, rule L1), incrementally and idempotently:

- each Dagster run is the ledger run `dagster:<run_id>`: its job is the workflow, its
  tags are labels, its `parent_run_id` is the parent (rule I2);
- each run worker (a pid that writes the run's own run-level events) is an epoch of the
  run's own slot `dagster:<run_id>` (rule O8): one slot per worker, so two runs at once
  never supersede each other; a restarted worker is a later epoch of the same slot;
- run-level events map to transitions (FAILURE_CODES and docs/import-dagster.md); a
  failure Dagster reported from outside the worker (a code server that saw it exit,
  RUN_WORKER_RESTART, run monitoring) is also an exit fact of the worker's epoch
  (`process.exited`, rule O7); a worker that wrote its run's end records a clean stop;
- the cursor: after reading a run's new events the importer appends `run.imported`
  (source "dagster", cursor = the last storage id read, Dagster's status and update
  time). The next import reads only events after it, and skips a finished run whose
  record has not changed. Nothing new: nothing appended (a second import appends nothing);
- a transition the ledger refuses is never lost: a stale worker's report is kept as
  `run.fenced` (rule F1), any other refusal as import evidence (rule I1).

Dagster is imported lazily, inside the functions that need it: the core works without
the extra `epochledger[dagster]`, and only this module may import it (an import-linter
contract in pyproject.toml).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from epochledger.app import Batch, Ledger
from ledger import codes
from ledger import run as run_mod
from ledger.errors import ConflictError, IllegalTransition, InvalidInput, StaleEpoch
from ledger.events import (
    MAX_CAUSE_DEPTH,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    Cause,
    ProcessBooted,
    ProcessEventBase,
    ProcessExited,
    ProcessStopped,
    ProcessStopping,
    RunCancelled,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunFinished,
    RunImported,
    RunQueued,
    RunStarted,
    process_stream,
    run_stream,
)
from ledger.host import Host, SystemHost
from ledger.process import EpochState, ProcessState
from ledger.run import RunState

SOURCE = "dagster"
PREFIX = "dagster:"  # a Dagster run's ledger run id, and its workers' slot: dagster:<run_id>
ACTOR = "dagster-import"  # the actor of every imported event
OBSERVER = ACTOR  # observed_by of a worker Dagster reported dead from outside it (the evidence quotes Dagster)
EXTRA = "pip install 'epochledger[dagster]'"

# RunFailureReason (Dagster's `dagster/failure_reason`) -> the ledger's failure code. The
# reason itself is kept verbatim as the failure's cause code. None: no reason given.
FAILURE_CODES: dict[str | None, str] = {
    "STEP_FAILURE": codes.ENGINE_ERROR,  # a step (op) raised
    "RUN_EXCEPTION": codes.ENGINE_ERROR,  # the run raised outside any step
    "JOB_INITIALIZATION_FAILURE": codes.ENGINE_ERROR,  # resources or the plan failed to initialize
    "START_TIMEOUT": codes.TIMEOUT,  # run monitoring: it did not start in time
    "UNEXPECTED_TERMINATION": codes.PROCESS_EXITED,  # run monitoring: the worker died
    "RUN_WORKER_RESTART": codes.PROCESS_EXITED,  # a new worker found the run started: the old one died
    "UNKNOWN": codes.UNKNOWN,
    None: codes.UNKNOWN,  # reported by the worker itself without a reason
}
# A failure reported from outside the worker with no reason: Dagster's code server saw
# the worker's process exit (its message says how), so the worker died.
OUTSIDE_NO_REASON_CODE = codes.PROCESS_EXITED
# Run-level events: the only ones read (step events change no status); of them, those
# whose pid is a run worker's (the launcher's and the daemon's events are not).
READ_KINDS = ("PIPELINE_ENQUEUED", "PIPELINE_DEQUEUED", "PIPELINE_STARTING", "PIPELINE_START", "PIPELINE_SUCCESS",
              "PIPELINE_FAILURE", "PIPELINE_CANCELING", "PIPELINE_CANCELED", "ENGINE_EVENT")  # fmt: skip
WORKER_KINDS = frozenset({"PIPELINE_START", "PIPELINE_SUCCESS", "PIPELINE_FAILURE", "PIPELINE_CANCELED"})
FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})  # Dagster statuses nothing changes but a late write
NOT_LABELS = frozenset({"dagster/failure_reason"})  # a result, imported as the failure's cause, not a label
# Dagster's code server, when a worker's process is gone: "Run execution process for
# <id> was terminated by signal 9 (SIGKILL)." / "... unexpectedly exited with code 1."
CRASH = re.compile(r"Run execution process for \S+ (?:was terminated by signal (\d+)|unexpectedly exited with code (-?\d+))")
PAGE = 1000  # events read per call
CHUNK = 100  # runs per transaction
MAX_TEXT = 4000  # characters kept of a message in a Text field (4096)
MAX_LONG = 60000  # ... in a LongText field (65536)
_NAME_OK = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")
_VALUE_BAD = re.compile(r"[\x00-\x1f\x7f]")


class SourceEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One run-level Dagster event, as read."""

    storage_id: int
    at: datetime
    kind: str  # DagsterEventType value (PIPELINE_START, ...)
    pid: int | None
    message: str = ""
    reason: str | None = None  # RunFailureReason value, on PIPELINE_FAILURE
    error: Cause | None = None  # the SerializableErrorInfo chain, on failures and cancels


class SourceRun(msgspec.Struct, frozen=True, kw_only=True):
    """One Dagster run record, as read."""

    run_id: str
    job: str
    status: str  # DagsterRunStatus value
    tags: dict[str, str]
    parent: str | None
    created: datetime
    updated: datetime


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """A Dagster transition the ledger refused, and where it is kept."""

    run: str
    storage_id: int
    kind: str
    error: str
    kept_as: str  # "run.fenced" or the evidence event's type


class RunReport(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    dagster_status: str
    ledger_status: str | None  # None: the run was not imported (see `skipped`)
    events: int  # Dagster events read this time
    appended: int
    skipped: str | None = None


class ImportReport(msgspec.Struct, kw_only=True):
    instance: str
    runs: int = 0  # Dagster runs seen
    read: int = 0  # of them, runs whose history was read (new or changed)
    events: int = 0  # Dagster events read
    appended: int = 0  # ledger events appended
    refused: list[Refusal] = []
    dropped_labels: list[str] = []  # "run: tag" of tags that do not fit a label (named in run.queued's reason)
    by_run: list[RunReport] = []


# ------------------------------------------------------------------ reading Dagster
def _require_dagster() -> Any:
    try:
        import dagster
    except ImportError:
        raise InvalidInput(f"the Dagster importer needs Dagster: {EXTRA}", where="import-dagster") from None
    return dagster


def _instance_home(home: str) -> Path:
    """DAGSTER_HOME, checked to be an existing instance, so a mistyped path is refused
    instead of becoming a new, empty instance."""
    path = Path(home)
    if not path.is_dir():
        raise InvalidInput("not a directory (expected a DAGSTER_HOME)", where=home)
    if not (path / "dagster.yaml").is_file() and not (path / "history" / "runs.db").is_file():
        raise InvalidInput("not a Dagster instance: no dagster.yaml and no history/runs.db", where=home)
    return path


def open_instance(home: str) -> Any:
    """The Dagster instance in DAGSTER_HOME `home`, opened as Dagster opens it
    (its dagster.yaml decides the storage: SQLite files, PostgreSQL, ...)."""
    dagster = _require_dagster()
    from dagster._core.instance.ref import InstanceRef

    return dagster.DagsterInstance.from_ref(InstanceRef.from_dir(str(_instance_home(home))))


def _utc(ts: float | datetime) -> datetime:
    if isinstance(ts, datetime):
        return ts.astimezone(UTC) if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
    return datetime.fromtimestamp(ts, UTC)


def _cause(error: Any, depth: int = 0) -> Cause | None:
    """A SerializableErrorInfo chain (message, cls_name, cause, context) as a Cause chain."""
    if error is None or depth >= MAX_CAUSE_DEPTH:
        return None
    deeper = getattr(error, "cause", None) or getattr(error, "context", None)
    code = _VALUE_BAD.sub(" ", str(getattr(error, "cls_name", None) or ""))[:200]
    message = str(getattr(error, "message", "") or "").strip()[:MAX_LONG] or None
    return Cause(code=code, message=message, cause=_cause(deeper, depth + 1))


def source_run(record: Any) -> SourceRun:
    run = record.dagster_run
    return SourceRun(run_id=run.run_id, job=run.job_name, status=run.status.value, tags=dict(run.tags),
                     parent=run.parent_run_id, created=_utc(record.create_timestamp),
                     updated=_utc(record.update_timestamp))  # fmt: skip


def source_events(instance: Any, run_id: str, after: int) -> Iterator[SourceEvent]:
    """The run's run-level events after storage id `after`, in storage order."""
    from dagster import DagsterEventType
    from dagster._core.event_api import EventLogCursor

    kinds = {DagsterEventType(k) for k in READ_KINDS}
    cursor = EventLogCursor.from_storage_id(after).to_string() if after else None
    while True:
        conn = instance.get_records_for_run(run_id, cursor=cursor, of_type=kinds, limit=PAGE)
        for rec in conn.records:
            entry = rec.event_log_entry
            ev = entry.dagster_event
            if ev is None or ev.step_key is not None:
                continue
            data = ev.event_specific_data
            reason = getattr(getattr(data, "failure_reason", None), "value", None)
            yield SourceEvent(storage_id=rec.storage_id, at=_utc(entry.timestamp), kind=ev.event_type_value,
                              pid=ev.pid, message=(ev.message or entry.user_message or "").strip(), reason=reason,
                              error=_cause(getattr(data, "error", None)))  # fmt: skip
        if not conn.has_more or not conn.records:
            return
        cursor = conn.cursor


# -------------------------------------------------------------- what the ledger knows
class Known(msgspec.Struct, frozen=True, kw_only=True):
    """What the ledger holds of one Dagster run: its last run.imported, if any."""

    cursor: int = 0
    source_updated: datetime | None = None
    source_status: str | None = None
    last_at: datetime | None = None  # the time of the run's last event in the ledger


def known_cursors(ledger: Ledger, runs: Sequence[str]) -> dict[str, Known]:
    """The last `run.imported` (source dagster) of each run's stream."""
    found: dict[str, Known] = {}
    histories = ledger.store.read_streams([run_stream(r) for r in runs])
    for run in runs:
        history = histories.get(run_stream(run), [])
        last_at = max((e.at for rec in history if (e := getattr(rec, "event", None)) is not None), default=None)
        for rec in reversed(history):
            e = getattr(rec, "event", None)
            if type(e) is RunImported and e.source == SOURCE:
                found[run] = Known(cursor=e.cursor, source_updated=e.source_updated, source_status=e.source_status,
                                   last_at=last_at)  # fmt: skip
                break
        else:
            if last_at is not None:
                found[run] = Known(last_at=last_at)
    return found


# ------------------------------------------------------------- facts of local workers
class LocalHost:
    """This host's facts for workers that ran here (`--local-workers`): its name, its
    boot id, when it booted, and when a pid that runs now started (all from the kernel,
    through ledger/host.py, plus CLOCK_BOOTTIME to put a pid's start on the wall clock)."""

    def __init__(self, host: Host | None = None):
        self.host = host or SystemHost()
        self.name = self.host.name()
        booted = self.host_booted()
        # Without a boot id or a boot instant (off Linux) a worker's pid cannot be judged:
        # only the host's name is recorded.
        self.boot_id = self.host.boot_id() if booted is not None else None
        self.machine = self.host.machine_id()  # rule O10: the host is this machine, not its name
        self.booted = booted if booted is not None else 0.0
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    @staticmethod
    def host_booted() -> float | None:
        """This host's boot instant on the wall clock (seconds since the epoch), or None
        where the kernel has no CLOCK_BOOTTIME."""
        boottime = getattr(time, "CLOCK_BOOTTIME", None)
        return time.time() - time.clock_gettime(boottime) if boottime is not None else None

    def started_before(self, pid: int, when: datetime) -> int | None:
        """The pid's start (clock ticks after host boot) if a process with this pid runs
        now and started no later than `when`: then it is the process that was this pid
        at `when` (a pid is reused only after its process is gone), else None."""
        try:
            facts = self.host.process(pid)
        except OSError:  # no /proc: the pid cannot be judged
            return None
        if facts is None or facts.zombie:
            return None
        return facts.start if self.booted + facts.start / self.tick <= when.timestamp() else None


# -------------------------------------------------------------------------- mapping
class _RunImport:
    """One Dagster run's new events, submitted to the batch in storage order."""

    def __init__(self, batch: Batch, report: ImportReport, src: SourceRun, local: LocalHost | None,
                 last_at: datetime | None = None):  # fmt: skip
        self.batch, self.report, self.src, self.local = batch, report, src, local
        self.last_at = last_at  # the run's latest event time: Dagster's times may step back (clock skew)
        self.run = PREFIX + src.run_id
        self.slot = PREFIX + src.run_id
        self.crash: tuple[int | None, int | None, str] | None = None  # a code server's crash report
        self.appended = 0

    def submit(self, command: RunEventBase | ProcessEventBase, ev: SourceEvent | None) -> bool:
        """Submit one command; a refusal is kept (run.fenced, or import evidence) and
        listed. True if the command itself was accepted."""
        before = self.batch.pending
        if isinstance(command, RunEventBase):
            if self.last_at is not None and command.at < self.last_at:
                # No negative durations (as the NDJSON import refuses them): recorded at
                # the run's latest time, Dagster's own time kept in the reason.
                said = f"Dagster's time {command.at.isoformat()} is earlier than the run's previous event " \
                       f"({self.last_at.isoformat()}): recorded at the latter"  # fmt: skip
                command = msgspec.structs.replace(command, at=self.last_at,
                                                  reason=f"{command.reason or ''} [{said}]"[:MAX_LONG])  # fmt: skip
            self.last_at = command.at
        try:
            self.batch.submit(command)
            return True
        except StaleEpoch as e:
            if isinstance(e.evidence, RunFenced):
                self.batch.submit(e.evidence)
            self._refused(ev, e, "run.fenced")
        except (IllegalTransition, InvalidInput) as e:
            self._refused(ev, e, keep_evidence(self.batch, command, e))
        finally:
            self.appended += self.batch.pending - before
        return False

    def _refused(self, ev: SourceEvent | None, e: Exception, kept_as: str) -> None:
        self.report.refused.append(Refusal(run=self.run, storage_id=ev.storage_id if ev else 0,
                                           kind=ev.kind if ev else "run", error=str(e), kept_as=kept_as))  # fmt: skip

    def slot_state(self) -> ProcessState | None:
        state: ProcessState | None = self.batch.state(process_stream(self.slot))
        return state

    def current(self) -> EpochState | None:
        state = self.slot_state()
        return state.current if state is not None else None

    def queue(self) -> None:
        src = self.src
        labels: dict[str, str] = {}
        dropped: list[str] = []
        for key, value in sorted(src.tags.items()):
            if key in NOT_LABELS:
                continue
            if not _NAME_OK.fullmatch(key) or len(value) > MAX_LABEL_VALUE or _VALUE_BAD.search(value) \
                    or len(labels) >= MAX_LABELS:  # fmt: skip
                dropped.append(key)
                continue
            labels[key] = value
        reason = None
        if dropped:
            shown = ", ".join(repr(k)[:100] for k in dropped)
            reason = f"Dagster tags not kept as labels (no label fits them): {shown}"[:MAX_TEXT]
            self.report.dropped_labels.extend(f"{self.run}: {k!r}"[:300] for k in dropped)
        parent = PREFIX + src.parent if src.parent else None
        self.submit(RunQueued(at=src.created, run=self.run, workflow=_name(src.job), process=self.slot, labels=labels,
                              parent=parent, actor=ACTOR, reason=reason), None)  # fmt: skip

    def boot(self, ev: SourceEvent) -> EpochState | None:
        """A new run worker: the first run-level event its pid wrote. Its boot instant is
        that event's time (Dagster records no process start: an upper bound)."""
        assert ev.pid is not None
        host = host_boot = pid_start = machine = None
        if self.local is not None:
            host, machine = self.local.name, self.local.machine
            if self.local.boot_id is not None and ev.at.timestamp() >= self.local.booted:
                host_boot = self.local.boot_id
                pid_start = self.local.started_before(ev.pid, ev.at)
        epoch = f"{self.slot}:{ev.storage_id}"
        self.submit(ProcessBooted(at=ev.at, process=self.slot, epoch=epoch, booted_at=ev.at, host=host, pid=ev.pid,
                                  host_boot=host_boot, pid_start=pid_start, machine=machine, actor=ACTOR,
                                  reason=f"run worker pid {ev.pid}: first wrote Dagster event {ev.storage_id} "
                                         f"({ev.kind})"), ev)  # fmt: skip
        found = self.slot_state()
        return found.epoch(epoch) if found is not None else None

    def gone_with_reboot(self) -> None:
        """`--local-workers`: a live worker that booted on this host before the host's
        current boot is gone (its whole history is before the reboot): an exit fact at
        the host's boot instant, after everything it wrote."""
        slot = self.slot_state()
        if self.local is None or self.local.boot_id is None or slot is None:
            return
        booted = _utc(self.local.booted)
        for worker in slot.epochs:
            here = self.local.machine is not None and worker.machine == self.local.machine  # rule O10
            if worker.live and here and worker.booted_at < booted:
                self.submit(ProcessExited(at=max(booted, worker.recorded_at), process=self.slot, epoch=worker.epoch,
                                          observed_by=f"{ACTOR}@{self.local.name}",
                                          evidence=f"host {self.local.name} booted at {booted.isoformat()} (boot id "
                                                   f"{self.local.boot_id}), after this worker ran", actor=ACTOR), None)  # fmt: skip

    def stop(self, worker: EpochState, ev: SourceEvent) -> None:
        """The worker wrote its run's end: its work is over (a clean stop)."""
        why = f"run worker pid {worker.pid} wrote the run's end (Dagster event {ev.storage_id}, {ev.kind})"
        self.submit(ProcessStopping(at=ev.at, process=self.slot, epoch=worker.epoch, actor=ACTOR, reason=why), ev)
        self.submit(ProcessStopped(at=ev.at, process=self.slot, epoch=worker.epoch, actor=ACTOR, reason=why), ev)

    def exited(self, worker: EpochState, ev: SourceEvent) -> None:
        """Dagster reported, from outside the worker, that the run failed because its
        worker is gone: an exit fact, with what Dagster said."""
        signal = exit_code = None
        said = ev.message
        if self.crash is not None:
            signal, exit_code, said = self.crash
        evidence = f"Dagster event {ev.storage_id} ({ev.kind}, {ev.reason or 'no reason'}) reported by Dagster " \
                   f"outside the worker: {said or 'no message'}"  # fmt: skip
        self.submit(ProcessExited(at=ev.at, process=self.slot, epoch=worker.epoch, observed_by=OBSERVER,
                                  exit_code=exit_code, signal=signal, evidence=evidence[:MAX_TEXT], actor=ACTOR), ev)  # fmt: skip

    def apply(self, ev: SourceEvent) -> None:
        worker = self.current()
        if ev.kind in WORKER_KINDS and ev.pid is not None and (worker is None or worker.pid != ev.pid):
            worker = self.boot(ev) or worker
        own = worker is not None and ev.pid is not None and worker.pid == ev.pid  # written by the worker itself
        epoch = worker.epoch if own and worker is not None else None
        reason = f"Dagster event {ev.storage_id} ({ev.kind}): {ev.message}"[:MAX_LONG]
        if ev.kind == "ENGINE_EVENT":
            if ev.pid is None and (m := CRASH.search(ev.message)):
                self.crash = (int(m[1]) if m[1] else None, int(m[2]) if m[2] else None, ev.message[:MAX_TEXT])
            return
        if ev.kind == "PIPELINE_START":
            self.submit(RunStarted(at=ev.at, run=self.run, epoch=epoch, process=self.slot, actor=ACTOR, reason=reason), ev)
        elif ev.kind == "PIPELINE_SUCCESS":
            self.submit(RunFinished(at=ev.at, run=self.run, epoch=epoch, actor=ACTOR, reason=reason), ev)
        elif ev.kind == "PIPELINE_FAILURE":
            outside = not own
            code = OUTSIDE_NO_REASON_CODE if outside and ev.reason is None else FAILURE_CODES.get(ev.reason, codes.UNKNOWN)
            if outside and worker is not None and worker.live:
                self.exited(worker, ev)  # the worker's own restart already ended the old epoch (superseded)
            cause = Cause(code=ev.reason or "", message=ev.error.message if ev.error else None,
                          cause=ev.error.cause if ev.error else None)  # fmt: skip
            error = ev.error.message if ev.error and ev.error.message else (self.crash[2] if self.crash else ev.message)
            self.submit(RunFailed(at=ev.at, run=self.run, code=code, resumable=False, error=(error or None),
                                  cause=cause, epoch=epoch if not outside else None, actor=ACTOR, reason=reason), ev)  # fmt: skip
        elif ev.kind == "PIPELINE_CANCELED":
            self.submit(RunCancelled(at=ev.at, run=self.run, actor=ACTOR, reason=reason), ev)
        else:  # ENQUEUED, DEQUEUED, STARTING, CANCELING: the ledger's run stays as it is
            return
        if own and worker is not None and ev.kind != "PIPELINE_START":
            self.stop(worker, ev)


def keep_evidence(batch: Batch, command: RunEventBase | ProcessEventBase, error: Exception) -> str:
    """Keep a refused Dagster report as evidence in the batch, as the tolerant import
    keeps a refused real observation (`run.fenced`, ledger.run.refused_report, rule I1);
    returns how it is kept. What is no report (a cancel, a slot's event) is listed in
    the import's report only."""
    if isinstance(command, RunEventBase):
        evidence = run_mod.refused_report(command, batch.state(run_stream(command.run)), str(error))
        if evidence is not None:
            batch.submit(evidence)
            return "run.fenced"
    return "the import's report only"


def _name(value: str) -> str | None:
    return value if _NAME_OK.fullmatch(value) else None


def _import_run(batch: Batch, report: ImportReport, src: SourceRun, known: Known | None, instance: Any,
                local: LocalHost | None) -> None:  # fmt: skip
    run = PREFIX + src.run_id
    state: RunState | None = batch.state(run_stream(run))
    if state is not None and state.deleted:
        report.by_run.append(RunReport(run=run, dagster_status=src.status, ledger_status=None, events=0, appended=0,
                                       skipped="deleted in the ledger"))  # fmt: skip
        return
    if state is not None and known is not None and known.source_updated == src.updated and src.status in FINISHED \
            and known.source_status == src.status:  # fmt: skip
        report.by_run.append(RunReport(run=run, dagster_status=src.status, ledger_status=state.status, events=0,
                                       appended=0))  # fmt: skip
        return  # finished, and its record has not changed since the last import
    report.read += 1
    job = _RunImport(batch, report, src, local, known.last_at if known is not None else None)
    if state is None:
        job.queue()
    cursor = known.cursor if known is not None else 0
    n = 0
    for ev in source_events(instance, src.run_id, cursor):
        job.apply(ev)
        cursor, n = ev.storage_id, n + 1
    report.events += n
    job.gone_with_reboot()
    after: RunState | None = batch.state(run_stream(run))
    if after is not None and (known is None or cursor != known.cursor or src.updated != known.source_updated
                              or src.status != known.source_status):  # fmt: skip
        at = max(src.updated, job.last_at) if job.last_at is not None else src.updated
        job.submit(RunImported(at=at, run=run, source=SOURCE, cursor=cursor,
                               source_status=src.status, source_updated=src.updated, actor=ACTOR), None)  # fmt: skip
        after = batch.state(run_stream(run))
    report.appended += job.appended
    report.by_run.append(RunReport(run=run, dagster_status=src.status, ledger_status=after.status if after else None,
                                   events=n, appended=job.appended))  # fmt: skip


def import_dagster(ledger: Ledger, home: str, *, local_workers: bool = False, host: Host | None = None,
                   attempts: int = 3) -> ImportReport:  # fmt: skip
    """Import every run of the Dagster instance in DAGSTER_HOME `home` (rule I3): new
    runs, and new events of known runs after their cursor. `local_workers`: the run
    workers ran on this host (a local instance: `dagster dev`, `dagster job execute`,
    the default run launcher), so each worker's epoch records this host, its boot id
    and, when the pid still runs, its start time, and the probe can judge it (rule O8).
    Runs are written CHUNK at a time, each chunk one transaction with its cursors; a
    chunk that meets a concurrent writer is read again and re-decided."""
    _require_dagster()
    local = LocalHost(host or ledger.host) if local_workers else None
    report = ImportReport(instance=str(Path(home)))
    with open_instance(home) as instance:
        records = sorted(instance.get_run_records(), key=lambda r: r.storage_id)
        runs = [source_run(r) for r in records]
        report.runs = len(runs)
        for i in range(0, len(runs), CHUNK):
            chunk = runs[i : i + CHUNK]
            for attempt in range(attempts):
                part = ImportReport(instance=report.instance)
                batch = ledger.batch()
                names = [PREFIX + r.run_id for r in chunk]
                known = known_cursors(ledger, names)
                batch.prefetch([run_stream(n) for n in names] + [process_stream(n) for n in names])
                for src in chunk:
                    _import_run(batch, part, src, known.get(PREFIX + src.run_id), instance, local)
                try:
                    batch.commit()
                except ConflictError:
                    if attempt == attempts - 1:
                        raise
                    continue
                report.read += part.read
                report.events += part.events
                report.appended += part.appended
                report.refused += part.refused
                report.dropped_labels += part.dropped_labels
                report.by_run += part.by_run
                break
    return report
