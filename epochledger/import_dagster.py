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
  with `--local-workers`, a worker this host says is gone when its events are read (its
  pid not running or reused), whose run Dagster's events do not end, gets its exit then:
  its start can never be known, so a later probe could not tell it from a reused pid;
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

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from threading import Event
from typing import Any

import msgspec

from epochledger.app import Batch, Ledger
from epochledger.ledger import codes
from epochledger.ledger import run as run_mod
from epochledger.ledger.clock import Clock, SystemClock
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import (
    ConflictError,
    ForeignRunRejected,
    IllegalTransition,
    InvalidInput,
    StaleEpoch,
    StoreError,
)
from epochledger.ledger.events import (
    MAX_CAUSE_DEPTH,
    MAX_LABELS,
    Cause,
    Instant,
    LabelValue,
    Name,
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
from epochledger.ledger.host import Host, SystemHost
from epochledger.ledger.process import EpochState, ProcessState
from epochledger.ledger.run import RunState
from epochledger.ndjson import OnError, Rejected, with_rejects
from epochledger.probe import ProbeReport

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
# ... unless Dagster's run monitoring asked first, from outside the worker, to cancel the
# run for outliving its `dagster/max_runtime` ("Canceling due to exceeding maximum runtime
# of 30 seconds."): then the failure is the policy's timeout, written without waiting
# for the worker to go (it may ignore the termination and live on). No exit fact unless
# an exit was seen (the code server's crash report, CRASH).
MAX_RUNTIME = re.compile(r"exceeding maximum runtime of \d+ seconds")
TIMEOUT_CODE = codes.TIMEOUT
# Run-level events: the only ones read (step events change no status); of them, those
# whose pid is a run worker's (the launcher's and the daemon's events are not).
READ_KINDS = (
    "PIPELINE_ENQUEUED",
    "PIPELINE_DEQUEUED",
    "PIPELINE_STARTING",
    "PIPELINE_START",
    "PIPELINE_SUCCESS",
    "PIPELINE_FAILURE",
    "PIPELINE_CANCELING",
    "PIPELINE_CANCELED",
    "ENGINE_EVENT",
)
WORKER_KINDS = frozenset({"PIPELINE_START", "PIPELINE_SUCCESS", "PIPELINE_FAILURE", "PIPELINE_CANCELED"})
FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})  # Dagster statuses nothing changes but a late write
NOT_LABELS = frozenset({"dagster/failure_reason"})  # a result, imported as the failure's cause, not a label
# Dagster's own tags (its SYSTEM_TAG_PREFIX: max_runtime, code_location, partition, ...;
# HIDDEN_TAG_PREFIX: grpc_info's socket path, ...): Dagster's bookkeeping, not the
# user's labels. Hidden ones never become labels; system ones only on request
# (dagster_tags=True, `--dagster-tags`).
SYSTEM_TAGS = "dagster/"
HIDDEN_TAGS = ".dagster/"
# Dagster's code server, when a worker's process is gone: "Run execution process for
# <id> was terminated by signal 9 (SIGKILL)." / "... unexpectedly exited with code 1."
CRASH = re.compile(
    r"Run execution process for \S+ (?:was terminated by signal (\d+)|unexpectedly exited with code (-?\d+))"
)
UNREADABLE = "Dagster could not read"  # the reason of a run whose record or events Dagster's own read failed on
PAGE = 1000  # events read per call
CHUNK = 100  # runs per transaction
MAX_TEXT = 4000  # characters kept of a message in a Text field (4096)
MAX_LONG = 60000  # ... in a LongText field (65536)
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
    rejected: list[Rejected] = []  # runs the ledger cannot record (on_error="skip"; strict raises at the first)
    by_run: list[RunReport] = []
    newest: datetime | None = None  # the latest update time of the run records listed (Dagster's)


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


class Malformed(Exception):
    """A value of a Dagster record the ledger cannot record, and where it is in the
    record: the whole run is rejected (ForeignRunRejected), never part of it."""

    def __init__(self, field: str, reason: str):
        self.field, self.reason = field, reason
        super().__init__(f"{field}: {reason}")


def _checked(value: Any, tp: Any, field: str) -> Any:
    """`value` by the ledger's own rule for `tp` (ledger/codec.py `check_value`: one
    definition of a valid id, text, instant), or Malformed naming `field`."""
    try:
        return check_value(value, tp, field)
    except InvalidInput as e:
        raise Malformed(field, str(e).removeprefix(f"{field}: ")) from None


def _utc(ts: float | datetime, field: str = "timestamp") -> datetime:
    """A Dagster time (a float of seconds, or a datetime) as an aware UTC instant within
    the ledger's bounds; NaN, infinite, out of range or not a time: Malformed."""
    try:
        if isinstance(ts, datetime):
            at = ts.astimezone(UTC) if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
        elif isinstance(ts, int | float) and not isinstance(ts, bool):
            at = datetime.fromtimestamp(ts, UTC)
        else:
            raise Malformed(field, f"not a time: {type(ts).__name__} {ascii(ts)[:80]}")
    except (ValueError, OverflowError, OSError) as e:  # NaN, inf, a year past 9999
        raise Malformed(field, f"not a time: {ascii(ts)[:80]} ({e})") from None
    result: datetime = _checked(at, Instant, field)
    return result


def _text(value: Any, field: str, limit: int) -> str:
    """Free text from Dagster (a message, an error), cut to `limit` characters: text the
    ledger can store (a str without lone surrogates), else Malformed."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(field, f"not text: {type(value).__name__} {ascii(value)[:80]}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise Malformed(field, f"not storable text: {e.reason} at character {e.start}") from None
    return value[:limit]


def _cause(error: Any, depth: int = 0) -> Cause | None:
    """A SerializableErrorInfo chain (message, cls_name, cause, context) as a Cause chain."""
    if error is None or depth >= MAX_CAUSE_DEPTH:
        return None
    deeper = getattr(error, "cause", None) or getattr(error, "context", None)
    code = _VALUE_BAD.sub(" ", _text(getattr(error, "cls_name", None), "error.cls_name", 200))
    message = _text(getattr(error, "message", None), "error.message", MAX_LONG).strip() or None
    return Cause(code=code, message=message, cause=_cause(deeper, depth + 1))


def run_id_of(record: Any) -> str:
    """The record's Dagster run id as the reports name it: printable whatever it holds."""
    return _printable(getattr(getattr(record, "dagster_run", None), "run_id", None))


def source_run(record: Any) -> SourceRun:
    """One run record, every value checked (Malformed names the first bad one). A tag
    that is not a string to a string is kept for queue() to drop and name, as any tag
    that fits no label."""
    run = record.dagster_run
    run_id = _text(run.run_id, "run_id", MAX_LONG)
    _checked(PREFIX + run_id, Name, "run_id")  # the ledger's run and slot id: dagster:<run_id>
    parent = run.parent_run_id
    if parent is not None:
        _checked(PREFIX + _text(parent, "parent_run_id", MAX_LONG), Name, "parent_run_id")
    status = getattr(run.status, "value", run.status)
    _checked(status, Name, "status")
    job = run.job_name if isinstance(run.job_name, str) else ""
    return SourceRun(
        run_id=run_id,
        job=job,
        status=status,
        tags=dict(run.tags or {}),
        parent=parent,
        created=_utc(record.create_timestamp, "create_timestamp"),
        updated=_utc(record.update_timestamp, "update_timestamp"),
    )


def source_events(instance: Any, run_id: str, after: int) -> Iterator[SourceEvent]:
    """The run's run-level events after storage id `after`, in storage order."""
    from dagster import DagsterEventType
    from dagster._core.event_api import EventLogCursor

    kinds = {DagsterEventType(k) for k in READ_KINDS}
    cursor = EventLogCursor.from_storage_id(after).to_string() if after else None
    while True:
        try:
            conn = instance.get_records_for_run(run_id, cursor=cursor, of_type=kinds, limit=PAGE)
        except Exception as e:  # noqa: BLE001 - Dagster's own error on a row it cannot read rejects this run, not the import
            raise Malformed("events", f"{UNREADABLE} them: {type(e).__name__}: {ascii(str(e))[:300]}") from None
        for rec in conn.records:
            entry = rec.event_log_entry
            ev = entry.dagster_event
            if ev is None or ev.step_key is not None:
                continue
            yield source_event(rec)
        if not conn.has_more or not conn.records:
            return
        cursor = conn.cursor


def source_event(rec: Any) -> SourceEvent:
    """One run-level event record, every value checked (Malformed names the first bad
    one, with the event's storage id)."""
    entry = rec.event_log_entry
    ev = entry.dagster_event
    where = f"event {rec.storage_id}"
    try:
        pid = ev.pid
        if pid is not None and (type(pid) is not int or pid <= 0):
            raise Malformed("pid", f"not a pid: {ascii(pid)[:80]}")
        data = ev.event_specific_data
        reason = getattr(getattr(data, "failure_reason", None), "value", None)
        if reason is not None:
            _checked(reason, Name, "failure_reason")
        message = _text(ev.message, "message", MAX_LONG) or _text(entry.user_message, "user_message", MAX_LONG)
        return SourceEvent(
            storage_id=rec.storage_id,
            at=_utc(entry.timestamp),
            kind=ev.event_type_value,
            pid=pid,
            message=message.strip(),
            reason=reason,
            error=_cause(getattr(data, "error", None)),
        )
    except Malformed as e:
        raise Malformed(f"{where} ({ev.event_type_value}) {e.field}", e.reason) from None


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
                found[run] = Known(
                    cursor=e.cursor, source_updated=e.source_updated, source_status=e.source_status, last_at=last_at
                )
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

    def __init__(self, host: Host | None = None, clock: Clock | None = None):
        self.host = host or SystemHost()
        self.clock = clock or SystemClock()
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

    def worker(self, pid: int, when: datetime) -> Seen:
        """What this host says now of the worker that was `pid` at `when` (its first
        event). A process with this pid that runs now and started no later than `when`
        is that worker (a pid is reused only after its process is gone): its start
        (clock ticks after host boot) is known. No such process, a zombie, or one
        started after `when` (the pid reused): the worker is gone, and its start can
        never be known (Dagster records none); `gone` says why."""
        at = self.clock.now()
        if self.boot_id is None or when.timestamp() < self.booted:
            return Seen(at=at)  # not of this boot, or no boot to judge by (gone_with_reboot)
        try:
            facts = self.host.process(pid)
        except OSError:  # no /proc: the pid cannot be judged
            return Seen(at=at)
        if facts is None:
            return Seen(at=at, gone=f"pid {pid} not running")
        if facts.zombie:
            return Seen(at=at, gone=f"pid {pid} is a zombie: it exited and was not reaped yet")
        started = self.booted + facts.start / self.tick
        if started > when.timestamp():
            return Seen(
                at=at,
                gone=f"pid {pid} runs a process started at {_utc(started).isoformat()}, after the "
                f"worker's first event at {when.isoformat()}: the pid was reused",
            )
        return Seen(at=at, pid_start=facts.start)


class Seen(msgspec.Struct, frozen=True, kw_only=True):
    """A run worker as this host saw it at `at` (LocalHost.worker): alive with its start
    known, gone (why), or neither (it cannot be judged here)."""

    at: datetime
    pid_start: int | None = None
    gone: str | None = None


# -------------------------------------------------------------------------- mapping
class _RunImport:
    """One Dagster run's new events, submitted to the batch in storage order."""

    def __init__(
        self,
        batch: Batch,
        report: ImportReport,
        src: SourceRun,
        local: LocalHost | None,
        last_at: datetime | None = None,
        dagster_tags: bool = False,
    ):
        self.batch, self.report, self.src, self.local = batch, report, src, local
        self.dagster_tags = dagster_tags
        self.last_at = last_at  # the run's latest event time: Dagster's times may step back (clock skew)
        self.run = PREFIX + src.run_id
        self.slot = PREFIX + src.run_id
        self.crash: tuple[int | None, int | None, str] | None = None  # a code server's crash report
        self.timeout: str | None = None  # run monitoring's max-runtime cancel request (its message)
        self.seen: dict[int, Seen] = {}  # --local-workers: this host's word on each worker first read now
        self.booted: list[str] = []  # epochs booted by this import
        self.appended = 0

    def submit(self, command: RunEventBase | ProcessEventBase, ev: SourceEvent | None) -> bool:
        """Submit one command; a refusal is kept (run.fenced, or import evidence) and
        listed. True if the command itself was accepted."""
        before = self.batch.pending
        if isinstance(command, RunEventBase):
            if self.last_at is not None and command.at < self.last_at:
                # No negative durations (as the NDJSON import refuses them): recorded at
                # the run's latest time, Dagster's own time kept in the reason.
                said = (
                    f"Dagster's time {command.at.isoformat()} is earlier than the run's previous event "
                    f"({self.last_at.isoformat()}): recorded at the latter"
                )
                command = msgspec.structs.replace(
                    command, at=self.last_at, reason=f"{command.reason or ''} [{said}]"[:MAX_LONG]
                )
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
        self.report.refused.append(
            Refusal(
                run=self.run,
                storage_id=ev.storage_id if ev else 0,
                kind=ev.kind if ev else "run",
                error=str(e),
                kept_as=kept_as,
            )
        )

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
        for key, value in sorted(src.tags.items(), key=_tag_order):
            if key in NOT_LABELS or not self.labelled(key):
                continue
            if len(labels) >= MAX_LABELS or not _fits(key, Name) or not _fits(value, LabelValue):
                dropped.append(key)
                continue
            labels[key] = value
        reason = None
        if dropped:
            shown = ", ".join(ascii(k)[:100] for k in dropped)
            reason = f"Dagster tags not kept as labels (no label fits them): {shown}"[:MAX_TEXT]
            self.report.dropped_labels.extend(f"{self.run}: {k!a}"[:300] for k in dropped)
        parent = PREFIX + src.parent if src.parent else None
        self.submit(
            RunQueued(
                at=src.created,
                run=self.run,
                workflow=_name(src.job),
                process=self.slot,
                labels=labels,
                parent=parent,
                actor=ACTOR,
                reason=reason,
            ),
            None,
        )

    def labelled(self, key: Any) -> bool:
        """Is a tag with this key a label (not one of Dagster's own, unless asked for)?"""
        if not isinstance(key, str):
            return True  # not Dagster's: queue() drops and names it (no label fits it)
        if key.startswith(HIDDEN_TAGS):
            return False
        return self.dagster_tags or not key.startswith(SYSTEM_TAGS)

    def boot(self, ev: SourceEvent) -> EpochState | None:
        """A new run worker: the first run-level event its pid wrote. Its boot instant is
        that event's time (Dagster records no process start: an upper bound)."""
        assert ev.pid is not None
        host = host_boot = pid_start = machine = None
        if self.local is not None:
            host, machine = self.local.name, self.local.machine
            if self.local.boot_id is not None and ev.at.timestamp() >= self.local.booted:
                host_boot = self.local.boot_id
                seen = self.seen.get(ev.pid)
                pid_start = seen.pid_start if seen is not None else None
        epoch = f"{self.slot}:{ev.storage_id}"
        self.booted.append(epoch)
        self.submit(
            ProcessBooted(
                at=ev.at,
                process=self.slot,
                epoch=epoch,
                booted_at=ev.at,
                host=host,
                pid=ev.pid,
                host_boot=host_boot,
                pid_start=pid_start,
                machine=machine,
                actor=ACTOR,
                reason=f"run worker pid {ev.pid}: first wrote Dagster event {ev.storage_id} ({ev.kind})",
            ),
            ev,
        )
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
                self.submit(
                    ProcessExited(
                        at=max(booted, worker.recorded_at),
                        process=self.slot,
                        epoch=worker.epoch,
                        observed_by=f"{ACTOR}@{self.local.name}",
                        evidence=f"host {self.local.name} booted at {booted.isoformat()} (boot id "
                        f"{self.local.boot_id}), after this worker ran",
                        actor=ACTOR,
                    ),
                    None,
                )

    def gone_before_import(self) -> None:
        """`--local-workers`: a worker first read now, still live after all Dagster said
        of it, that this host saw gone when it was read (its pid not running, a zombie,
        or reused) died without a word: an exit fact, as the probe would record it, now
        rather than at a later probe, when the pid may run another process that the
        probe, without the worker's start, could not tell from it."""
        slot = self.slot_state()
        if self.local is None or slot is None:
            return
        for worker in slot.epochs:
            seen = self.seen.get(worker.pid) if worker.pid is not None else None
            if (
                worker.epoch in self.booted
                and worker.live
                and seen is not None
                and seen.gone is not None
                and worker.host_boot == self.local.boot_id
            ):
                self.submit(
                    ProcessExited(
                        at=max(seen.at, worker.recorded_at),
                        process=self.slot,
                        epoch=worker.epoch,
                        observed_by=f"{ACTOR}@{self.local.name}",
                        evidence=f"{seen.gone} at {seen.at.isoformat()}, when the import read the "
                        "worker's events (none ended its run)",
                        actor=ACTOR,
                    ),
                    None,
                )

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
        evidence = (
            f"Dagster event {ev.storage_id} ({ev.kind}, {ev.reason or 'no reason'}) reported by Dagster "
            f"outside the worker: {said or 'no message'}"
        )
        self.submit(
            ProcessExited(
                at=ev.at,
                process=self.slot,
                epoch=worker.epoch,
                observed_by=OBSERVER,
                exit_code=exit_code,
                signal=signal,
                evidence=evidence[:MAX_TEXT],
                actor=ACTOR,
            ),
            ev,
        )

    def note(self, ev: SourceEvent) -> None:
        """What Dagster said from outside the worker that explains a later failure: a
        code server's crash report, run monitoring's max-runtime cancel request. Read
        from the events of this import and, for a failure read now, of earlier ones."""
        if ev.pid is not None:
            return
        if ev.kind == "ENGINE_EVENT" and (m := CRASH.search(ev.message)):
            self.crash = (int(m[1]) if m[1] else None, int(m[2]) if m[2] else None, ev.message[:MAX_TEXT])
        elif ev.kind == "PIPELINE_CANCELING" and MAX_RUNTIME.search(ev.message):
            self.timeout = ev.message[:MAX_TEXT]

    def apply(self, ev: SourceEvent) -> None:
        self.note(ev)
        worker = self.current()
        if ev.kind in WORKER_KINDS and ev.pid is not None and (worker is None or worker.pid != ev.pid):
            worker = self.boot(ev) or worker
        own = worker is not None and ev.pid is not None and worker.pid == ev.pid  # written by the worker itself
        epoch = worker.epoch if own and worker is not None else None
        reason = f"Dagster event {ev.storage_id} ({ev.kind}): {ev.message}"[:MAX_LONG]
        if ev.kind == "ENGINE_EVENT":
            return
        if ev.kind == "PIPELINE_START":
            self.submit(
                RunStarted(at=ev.at, run=self.run, epoch=epoch, process=self.slot, actor=ACTOR, reason=reason), ev
            )
        elif ev.kind == "PIPELINE_SUCCESS":
            self.submit(RunFinished(at=ev.at, run=self.run, epoch=epoch, actor=ACTOR, reason=reason), ev)
        elif ev.kind == "PIPELINE_FAILURE":
            outside = not own
            timeout = outside and ev.reason is None and self.timeout is not None
            code = FAILURE_CODES.get(ev.reason, codes.UNKNOWN)
            if outside and ev.reason is None:
                code = TIMEOUT_CODE if timeout else OUTSIDE_NO_REASON_CODE
            # An exit fact only where the worker is known gone: not for a timeout Dagster
            # wrote without seeing the worker exit (rule O7: a fact, never a guess).
            if outside and worker is not None and worker.live and (not timeout or self.crash is not None):
                self.exited(worker, ev)  # the worker's own restart already ended the old epoch (superseded)
            if timeout:
                reason = f"{reason} [after run monitoring's cancel request: {self.timeout}]"[:MAX_LONG]
            cause = Cause(
                code=ev.reason or "",
                message=ev.error.message if ev.error else (self.timeout if timeout else None),
                cause=ev.error.cause if ev.error else None,
            )
            error = ev.error.message if ev.error and ev.error.message else (self.crash[2] if self.crash else ev.message)
            self.submit(
                RunFailed(
                    at=ev.at,
                    run=self.run,
                    code=code,
                    resumable=False,
                    error=(error or None),
                    cause=cause,
                    epoch=epoch if not outside else None,
                    actor=ACTOR,
                    reason=reason,
                ),
                ev,
            )
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
    return value if _fits(value, Name) else None


def _tag_order(tag: tuple[Any, Any]) -> tuple[bool, str]:
    """Tags in key order; a key that is no string (Dagster's storage can hold one) after them."""
    key = tag[0]
    return (False, key) if isinstance(key, str) else (True, ascii(key))


def _fits(value: Any, tp: Any) -> bool:
    """Does `value` hold the ledger's rule for `tp` (a label key, a label value, a name)?"""
    try:
        check_value(value, tp, "tag")
    except InvalidInput:
        return False
    return True


def _unchanged(src: SourceRun, known: Known | None) -> bool:
    """A finished run whose record has not changed since the last import: nothing to read."""
    return (
        known is not None
        and known.source_updated == src.updated
        and src.status in FINISHED
        and known.source_status == src.status
    )


class _Read(msgspec.Struct, frozen=True, kw_only=True):
    """One Dagster run as read, before anything is decided: its record and its events
    after the cursor then known (None: unchanged, not read)."""

    src: SourceRun
    events: list[SourceEvent] | None
    earlier: list[SourceEvent] = []  # for a failure read now: what Dagster said before it, outside the worker
    seen: dict[int, Seen] = {}  # --local-workers: this host's word on each worker pid first read now


END_KINDS = frozenset({"PIPELINE_SUCCESS", "PIPELINE_FAILURE", "PIPELINE_CANCELED"})
SETTLE = 3  # host checks and re-reads of a run whose worker may be writing as it is read


def _read(instance: Any, src: SourceRun, known: Known | None, local: LocalHost | None) -> _Read:
    if _unchanged(src, known):
        return _Read(src=src, events=None)
    cursor = known.cursor if known is not None else 0
    events = list(source_events(instance, src.run_id, cursor))
    seen: dict[int, Seen] = {}
    for _ in range(SETTLE if local is not None else 0):
        # The host is asked first, then Dagster again: a worker writes its run's end
        # before it exits, so a worker seen gone whose end is not in a read made after
        # that look wrote none. What a re-read finds is read with the rest.
        seen = _seen(local, events) if local is not None else {}
        if not any(s.gone for s in seen.values()):
            break
        more = list(source_events(instance, src.run_id, events[-1].storage_id if events else cursor))
        if not more:
            break
        events += more
    else:
        seen = {pid: msgspec.structs.replace(s, gone=None) for pid, s in seen.items()}  # still moving: not judged
    earlier: list[SourceEvent] = []
    if cursor and any(e.kind == "PIPELINE_FAILURE" for e in events):
        # A failure's explanation may be in events an earlier import read (a cancel
        # request a second before): read again, only to note it (_RunImport.note).
        earlier = [e for e in source_events(instance, src.run_id, 0) if e.storage_id <= cursor and e.pid is None]
    return _Read(src=src, events=events, earlier=earlier, seen=seen)


def _seen(local: LocalHost, events: list[SourceEvent]) -> dict[int, Seen]:
    """This host's word on each worker pid of `events` (at its first event); a worker
    that wrote its run's end is not gone without a word, whatever the host says."""
    first: dict[int, SourceEvent] = {}
    ended: set[int] = set()
    for ev in events:
        if ev.kind in WORKER_KINDS and ev.pid is not None:
            first.setdefault(ev.pid, ev)
            if ev.kind in END_KINDS:
                ended.add(ev.pid)
    seen = {pid: local.worker(pid, ev.at) for pid, ev in first.items()}
    return {pid: msgspec.structs.replace(s, gone=None) if pid in ended else s for pid, s in seen.items()}


def _import_run(
    batch: Batch, report: ImportReport, read: _Read, known: Known | None, local: LocalHost | None, dagster_tags: bool
) -> None:
    src = read.src
    run = PREFIX + src.run_id
    state: RunState | None = batch.state(run_stream(run))
    if state is not None and state.deleted:
        report.by_run.append(
            RunReport(
                run=run,
                dagster_status=src.status,
                ledger_status=None,
                events=0,
                appended=0,
                skipped="deleted in the ledger",
            )
        )
        return
    if state is not None and _unchanged(src, known):
        report.by_run.append(
            RunReport(run=run, dagster_status=src.status, ledger_status=state.status, events=0, appended=0)
        )
        return  # finished, and its record has not changed since the last import
    report.read += 1
    job = _RunImport(batch, report, src, local, known.last_at if known is not None else None, dagster_tags)
    if state is None:
        job.queue()
    cursor = known.cursor if known is not None else 0
    for ev in read.earlier:
        if ev.storage_id <= cursor:
            job.note(ev)
    job.seen = read.seen
    n = 0
    # Only what is after the cursor now: a retried chunk whose runs another import moved
    # on meanwhile applies nothing twice.
    for ev in (e for e in read.events or () if e.storage_id > cursor):
        job.apply(ev)
        cursor, n = ev.storage_id, n + 1
    report.events += n
    job.gone_before_import()
    job.gone_with_reboot()
    after: RunState | None = batch.state(run_stream(run))
    if after is not None and (
        known is None
        or cursor != known.cursor
        or src.updated != known.source_updated
        or src.status != known.source_status
    ):
        at = max(src.updated, job.last_at) if job.last_at is not None else src.updated
        job.submit(
            RunImported(
                at=at,
                run=run,
                source=SOURCE,
                cursor=cursor,
                source_status=src.status,
                source_updated=src.updated,
                actor=ACTOR,
            ),
            None,
        )
        after = batch.state(run_stream(run))
    report.appended += job.appended
    report.by_run.append(
        RunReport(
            run=run,
            dagster_status=src.status,
            ledger_status=after.status if after else None,
            events=n,
            appended=job.appended,
        )
    )


def import_dagster(
    ledger: Ledger,
    home: str,
    *,
    local_workers: bool = False,
    host: Host | None = None,
    attempts: int = 3,
    on_error: OnError = "stop",
    rejects: str | None = None,
    protected: Iterable[str] = (),
    dagster_tags: bool = False,
) -> ImportReport:
    """Import every run of the Dagster instance in DAGSTER_HOME `home` (rule I3): new
    runs, and new events of known runs after their cursor. `local_workers`: the run
    workers ran on this host (a local instance: `dagster dev`, `dagster job execute`,
    the default run launcher), so each worker's epoch records this host, its boot id
    and, when the pid still runs, its start time, and the probe can judge it (rule O8).
    The user's tags become labels; Dagster's own (`dagster/...`) only with
    `dagster_tags`, its hidden ones (`.dagster/...`) never.

    Every run is read (and checked) before anything is written. A run whose record or
    events hold a value the ledger cannot record (a NaN time, an id that is not text) is
    rejected whole, as NDJSON's import rejects a line (rule I1): on_error="stop" (strict,
    the default) raises ForeignRunRejected for the first and appends nothing;
    on_error="skip" (tolerant) imports every other run and lists each rejected one in
    `rejected` (and, given `rejects`, writes it there: epochledger/ndjson.py
    `with_rejects`, the same file as NDJSON's). Runs are written CHUNK at a time, each
    chunk one transaction with its cursors; a chunk that meets a concurrent writer is
    read again from the ledger and re-decided."""
    return with_rejects(
        ledger,
        on_error,
        rejects,
        protected,
        lambda: _import(ledger, home, local_workers, host, attempts, on_error == "skip", dagster_tags),
    )


def _import(
    ledger: Ledger,
    home: str,
    local_workers: bool,
    host: Host | None,
    attempts: int,
    tolerant: bool,
    dagster_tags: bool,
    *,
    instance: Any = None,
    since: datetime | None = None,
    remembered: dict[str, Stamp] | None = None,
) -> ImportReport:
    """One import round. `instance`: an open Dagster instance (a follower's, kept across
    rounds; else opened and closed here). `since`: list only the run records Dagster
    updated after it (a follower's later rounds). `remembered`: each run's record stamp
    as this process last imported it; a record listed with the same stamp is skipped
    (nothing in the ledger is read for it), and every run imported is remembered."""
    _require_dagster()
    local = LocalHost(host or ledger.host, ledger.clock) if local_workers else None
    report = ImportReport(instance=str(Path(home)))
    with nullcontext(instance) if instance is not None else open_instance(home) as instance:
        records, unreadable = _run_records(instance, since)
        report.runs = len(records) + len(unreadable)
        report.newest = max((u for r in records if (u := _updated(r)) is not None), default=None)
        stamps = {run_id_of(r): _stamp(r) for r in records}
        if remembered is not None:
            records = [r for r in records if remembered.get(run_id_of(r)) != stamps[run_id_of(r)]]
        for run_id, why in unreadable:
            error = ForeignRunRejected(SOURCE, _printable(run_id), "record", why)
            if not tolerant:
                raise error
            report.rejected.append(
                Rejected(
                    line=0,
                    reason=_said(error),
                    content=json.dumps({"run_id": run_id}, default=ascii, ensure_ascii=True).encode(),
                )
            )
        reads: list[_Read] = []
        for i in range(0, len(records), CHUNK):
            chunk: list[tuple[Any, SourceRun]] = []
            for record in records[i : i + CHUNK]:
                try:
                    chunk.append((record, source_run(record)))
                except Malformed as e:
                    _reject(report, record, e, tolerant)
            known = known_cursors(ledger, [PREFIX + src.run_id for _, src in chunk])
            for record, src in chunk:
                try:
                    reads.append(_read(instance, src, known.get(PREFIX + src.run_id), local))
                except Malformed as e:
                    _reject(report, record, e, tolerant)
    for i in range(0, len(reads), CHUNK):
        part_reads = reads[i : i + CHUNK]
        names = [PREFIX + r.src.run_id for r in part_reads]
        for attempt in range(attempts):
            part = ImportReport(instance=report.instance)
            batch = ledger.batch()
            known = known_cursors(ledger, names)
            batch.prefetch([run_stream(n) for n in names] + [process_stream(n) for n in names])
            for read in part_reads:
                _import_run(batch, part, read, known.get(PREFIX + read.src.run_id), local, dagster_tags)
            try:
                batch.commit()
            except ConflictError:
                if attempt == attempts - 1:
                    raise
                continue
            if remembered is not None:
                remembered.update((r.src.run_id, stamps[r.src.run_id]) for r in part_reads)
            report.read += part.read
            report.events += part.events
            report.appended += part.appended
            report.refused += part.refused
            report.dropped_labels += part.dropped_labels
            report.by_run += part.by_run
            break
    return report


def _run_records(instance: Any, since: datetime | None = None) -> tuple[list[Any], list[tuple[Any, str]]]:
    """Every run record in storage order (`since`: only those Dagster updated after it,
    one indexed query on its runs table), and the runs Dagster cannot read (run id,
    why). Dagster lists its runs in one query, and one record it cannot read (a tag
    value that is not a string fails its own type check) fails the whole listing: then
    each run is read by its id, so one bad record rejects one run, not the import."""
    from dagster import RunsFilter

    filters = RunsFilter(updated_after=since) if since is not None else None
    try:
        listed: list[Any] = instance.get_run_records(filters=filters)
    except Exception:  # noqa: BLE001 - Dagster's own error on a record; read run by run to find which
        listed = []
    else:
        return sorted(listed, key=lambda r: r.storage_id), []
    records: list[Any] = []
    unreadable: list[tuple[Any, str]] = []
    for run_id in instance.get_run_ids(filters=filters):
        try:
            record = instance.get_run_record_by_id(run_id)
        except Exception as e:  # noqa: BLE001 - Dagster's own error on this record rejects this run only
            unreadable.append((run_id, f"{UNREADABLE} it: {type(e).__name__}: {ascii(str(e))[:300]}"))
            continue
        if record is not None:
            records.append(record)
    return sorted(records, key=lambda r: r.storage_id), unreadable


# ------------------------------------------------------------------- following
# A follower's later rounds list only the run records Dagster updated after the newest
# one it listed, less OVERLAP_S: Dagster stamps a record with its event's time (the
# writer's clock), and writes it after the event, so a record can land stamped a little
# earlier than one already listed (another writer's clock, a slow commit). Records in
# the overlap that this follower imported with the same stamp are skipped unread.
OVERLAP_S = 60.0
# The watermark never passes this host's clock (a writer whose clock runs ahead would
# move it past records the others stamp later), and every FULL_EVERY_S a round lists
# every record again (the net for a writer whose clock runs more than OVERLAP_S
# behind); records this follower imported unchanged are still skipped unread.
FULL_EVERY_S = 600.0
# The probe's sweep waits this long after a round that recorded an exit (_Sweeps).
SETTLE_S = 2.0
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.05, 3600.0


class FollowRound(msgspec.Struct, kw_only=True):
    """One round of `follow_dagster`: what the import read and appended, and what the
    probe in the loop found and recovered."""

    round: int  # 1, 2, ...
    since: datetime | None  # the records listed were updated after this (None: every record, the first round)
    seconds: float  # the round's wall time, import and probe
    imported: ImportReport
    probe: ProbeReport | None = None  # local_workers only: this host's live epochs judged, the exits recorded
    swept: ProbeReport | None = None  # the probe again with its sweep, when one was due (_Sweeps)
    error: str | None = None  # a store or Dagster error that ended the round; the next round tries again

    @property
    def quiet(self) -> bool:
        """Nothing appended, nothing exited, no error: a round not worth a line."""
        return (
            self.error is None
            and self.imported.appended == 0
            and not self.imported.refused
            and (self.probe is None or self.probe.exited == 0)
            and self.swept is None
        )


def follow_dagster(
    ledger: Ledger,
    home: str,
    *,
    stop: Event,
    interval: float = 1.0,
    local_workers: bool = False,
    host: Host | None = None,
    dagster_tags: bool = False,
    on_round: Callable[[FollowRound], None] | None = None,
    attempts: int = 3,
    overlap: float = OVERLAP_S,
    full_every: float = FULL_EVERY_S,
) -> int:
    """Keep the ledger current from the Dagster instance in `home` until `stop` is set
    (rules I3, I4; docs/import-dagster.md, "Following"): a round every `interval`
    seconds, each an import of what changed since the last round and, with
    `local_workers`, the probe in the loop (epochledger/probe.py: this host's live
    epochs against the kernel), so a worker that died without a word is an orphan at the
    next round, and the sweep recovers its run SETTLE_S later unless Dagster's own
    verdict came meanwhile (_Sweeps). Returns the number of rounds.

    The first round imports every run (as `import_dagster`); each later round lists only
    the run records Dagster updated since the newest one listed (less `overlap`), skips
    those this follower imported unchanged, and reads the events of the rest after their
    cursors: a quiet instance costs one query of Dagster's runs table and one probe.
    Strict: a Dagster run the ledger cannot record ends the follow (ForeignRunRejected),
    as it ends an import. A store error or Dagster's own read error ends only its round
    (`FollowRound.error`); the next round tries again from the same watermark, so
    nothing is skipped. The watermark never passes this host's clock, and every
    `full_every` seconds a round lists every record again (OVERLAP_S, FULL_EVERY_S).
    `on_round` is called after every round."""
    if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
        raise InvalidInput(f"from {MIN_INTERVAL_S} to {MAX_INTERVAL_S:g} seconds", where="interval")
    _require_dagster()
    remembered: dict[str, Stamp] = {}
    since: datetime | None = None  # None: list every record (the first round, and until one succeeds)
    newest: datetime | None = None
    rounds = 0
    full_at = time.monotonic()  # when the last full listing was made
    sweeps = _Sweeps()
    with open_instance(home) as instance:
        while not stop.is_set():
            rounds += 1
            t0 = time.monotonic()
            if t0 - full_at >= full_every:
                since, full_at = None, t0
            round_ = FollowRound(
                round=rounds, since=since, seconds=0.0, imported=ImportReport(instance=str(Path(home)))
            )
            try:
                round_.imported = _import(
                    ledger,
                    home,
                    local_workers,
                    host,
                    attempts,
                    False,
                    dagster_tags,
                    instance=instance,
                    since=since,
                    remembered=remembered,
                )
                if local_workers:
                    sweeps.round(ledger, round_)
            except (StoreError, ConflictError) as e:
                round_.error = f"{type(e).__name__}: {e}"
            except ForeignRunRejected as e:
                if e.field != "events" or not e.reason.startswith(UNREADABLE):
                    raise  # a value the ledger cannot record: strict, as an import
                # Dagster's own read of a run's events failed (a locked SQLite file, a
                # dropped connection): the next round reads them again.
                round_.error = _said(e)
            else:
                listed = round_.imported.newest
                if listed is not None and (newest is None or listed > newest):
                    newest = min(listed, ledger.clock.now())
                since = (newest or datetime.fromtimestamp(0, UTC)) - timedelta(seconds=overlap)
            round_.seconds = time.monotonic() - t0
            if on_round is not None:
                on_round(round_)
            stop.wait(max(0.0, interval - round_.seconds))
    return rounds


class _Sweeps:
    """When the probe in the loop sweeps (epochledger/probe.py; rule O5).

    The probe judges this host's live epochs every round and records the exits at once
    (the run is an `O2-exited` orphan from that round on). Its sweep, which recovers
    the orphans, waits SETTLE_S after the round that recorded an exit or appended
    anything: a code server that launched the worker reports its death within 0.5 s
    (its cleanup tick), and a round after that imports Dagster's failure (failed,
    `PROCESS_EXITED`, with the signal), so Dagster's verdict, where it has one, is the
    one recorded, and the sweep recovers only the runs that nobody else will end. A
    quiet round with no sweep due costs the judgement of the live epochs only (no
    orphan read)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.due: float | None = 0.0  # the first round sweeps at once (what earlier runs left)

    def round(self, ledger: Ledger, round_: FollowRound) -> None:
        round_.probe = ledger.probe(sweep=False)
        now = self.clock()
        if round_.probe.exited:
            self.due = now + SETTLE_S  # this exit's settle, from now
        elif self.due is None and round_.imported.appended:
            self.due = now + SETTLE_S
        if self.due is not None and now >= self.due:
            self.due = None
            round_.swept = ledger.probe()


Stamp = tuple[str, str]  # a run record's update time and status, as Dagster listed them


def _updated(record: Any) -> datetime | None:
    """The record's update time as an aware UTC instant (Dagster's own), None if it is not one."""
    ts = record.update_timestamp
    if not isinstance(ts, datetime):
        return None
    return ts.astimezone(UTC) if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _stamp(record: Any) -> Stamp:
    run = record.dagster_run
    return (ascii(record.update_timestamp), ascii(getattr(run.status, "value", run.status)))


def _printable(value: Any) -> str:
    return value if isinstance(value, str) and value.isprintable() and value.isascii() else ascii(value)


def _said(error: ForeignRunRejected) -> str:
    """A rejected run's reason in a report: the error's words, less what only a strict
    import can say."""
    return str(error).removesuffix(" (nothing was imported)")


def _reject(report: ImportReport, record: Any, e: Malformed, tolerant: bool) -> None:
    """A run Dagster holds that the ledger cannot record: strict, refuse the import
    (nothing was written yet); tolerant, list it (NDJSON's Rejected: `line` is the run
    record's storage id in Dagster's run storage, `content` the record as read)."""
    run_id = run_id_of(record)
    error = ForeignRunRejected(SOURCE, run_id, e.field, e.reason)
    if not tolerant:
        raise error
    report.rejected.append(Rejected(line=record.storage_id, reason=_said(error), content=_as_read(record)))


def _as_read(record: Any) -> bytes:
    """The run record as read, as JSON text (what a rejects file keeps as `raw`): NaN
    and infinities as Python writes them, anything else by its ASCII repr."""
    run = record.dagster_run
    fields = {
        "storage_id": record.storage_id,
        "run_id": run.run_id,
        "job_name": run.job_name,
        "status": getattr(run.status, "value", run.status),
        "tags": {k if isinstance(k, str) else ascii(k): v for k, v in dict(run.tags or {}).items()},
        "parent_run_id": run.parent_run_id,
        "create_timestamp": record.create_timestamp,
        "update_timestamp": record.update_timestamp,
    }

    def shown(value: Any) -> Any:
        return value.isoformat() if isinstance(value, datetime) else ascii(value)

    return json.dumps(fields, default=shown, ensure_ascii=True).encode()
