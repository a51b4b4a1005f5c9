"""The Airflow 3 adapter (rule E1; docs/adapters.md, "Airflow"): what Airflow's listener
hooks mean in the ledger, and the one object that writes it.

This module never imports Airflow: the plugin that Airflow loads
(epochledger/adapters/airflow_plugin.py) reads Airflow's objects into the plain values
below and calls a `Recorder`. So the mapping is tested without Airflow, and the plugin
is a skin over it (rule H1's shape: parse, one call).

The mapping, in one place:

- A task instance's try is a run: `airflow/<dag_id>/<run_id>/<task_id>/<map_index>/<try>`
  (`TaskTry.run`), labels naming each part, and its previous try as `parent` (rule I2),
  so a retry is a new run linked to the one it retries, never a second start of it.
- running -> queued and started in one commit, on behalf of the task runner's epoch
  (Airflow has no hook for its own scheduled and queued states); a try that defers,
  reschedules or awaits input -> paused, kind `orchestrator` (Airflow waits on its own
  and resumes the try in a new task runner: never an orphan meanwhile), and that later
  start -> resumed (by the orchestrator) and started, the next attempt; a waiting try
  Airflow ends (a mark by hand, the scheduler's failure) -> ended from its wait; success -> finished;
  a task that skips itself -> finished, reason "skipped"; failed -> failed, and
  up_for_retry -> failed_resumable, with the code of `failure_code`.
- A failure the scheduler decides (a task instance whose heartbeat stopped, or whose
  executor said it ended while it was running: Airflow's `handle_failure` in the
  scheduler) -> `PROCESS_EXITED`, with no exit fact: Airflow saw no process die, and
  liveness is a fact (rule O7). The exit fact comes from the probe (below).
- A DAG run is a run `airflow/<dag_id>/<run_id>`: running -> queued and started, owned
  by no epoch and naming the slot `airflow/dag-runs` that no process boots (`DAG_RUNS`:
  a DAG run outlives every scheduler process); success -> finished; failed -> failed
  (`task_failure`: ENGINE_ERROR, `all_tasks_deadlocked`: JOIN_FAILED, `timed_out`:
  TIMEOUT). When it ends, the tries the scheduler ended without running them (try 0)
  are recorded: upstream_failed -> queued, then failed JOIN_FAILED; skipped -> queued,
  then cancelled with the reason.
- Processes are slots (rule O8): each task runner process
  `airflow/<host>/task-runner/<pid>` (booted at `on_starting`, stopped at
  `before_stopping`), and each scheduler `airflow/<host>/scheduler/<pid>`, started up
  by the scheduler's watcher (`watch`: a child process, for the reason in
  `Recorder._start_watcher`), which then probes the host every `probe_interval`
  seconds: a task runner that died unseen (SIGKILL, OOM) gets its `process.exited`
  from the watcher's reap or the probe, and the sweep recovers its try
  (PROCESS_ORPHANED).

Every transition crosses `Recorder.append`, the one seam: its events go to the
process's spool (epochledger/spool.py) and the hook returns, whatever the store is
doing; the spool's writer puts them in the store in order, exactly once (rule E1).
Each is decided from what the hook says (its `previous_state`, the try number), never
from a read of the ledger; a word the ledger refuses (about a try that is over) is
written down by the spool with its reason. The scheduler's watcher imports what a dead
process's spool still holds and records its exit (`reap`), before each probe.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Literal, cast

import msgspec

from epochledger import probe as probe_mod
from epochledger import spool as spool_mod
from epochledger.app import Ledger, boot_event, open_ledger
from epochledger.ledger.clock import Clock, SystemClock, checked_clock
from epochledger.ledger.codes import (
    CANCELLED,
    ENGINE_ERROR,
    FAIL_NODE,
    INTERRUPTED,
    JOIN_FAILED,
    PROCESS_EXITED,
    TIMEOUT,
)
from epochledger.ledger.errors import ConflictError, LedgerError, StoreError
from epochledger.ledger.events import (
    Cause,
    ProcessStopped,
    ProcessStopping,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunPaused,
    RunQueued,
    RunResumed,
    RunStarted,
    StreamEvent,
)
from epochledger.ledger.host import SystemHost
from epochledger.ledger.process import EpochState
from epochledger.spool import Fsync, Owner, Spool

log = logging.getLogger("epochledger.airflow")

SOURCE = "airflow"
MAX_ID = 200  # a ledger id's bound (ledger/events.py, Name)
MAX_TEXT = 65536  # an error's bound (LongText)

# Failure codes by exception class name, the first found along the exception's MRO
# (so a subclass of a mapped class gets its code). Open: a user adds their own classes
# (`FAILURE_CODES["MyQuotaError"] = "USAGE_LIMIT_BLOCKED"`); anything else is ENGINE_ERROR.
FAILURE_CODES: dict[str, str] = {
    "AirflowTaskTimeout": TIMEOUT,  # execution_timeout; AirflowSensorTimeout is a subclass
    "AirflowSensorTimeout": TIMEOUT,
    "AirflowFailException": FAIL_NODE,  # "fail now, never retry": a deliberate fail
    "AirflowTaskTerminated": INTERRUPTED,  # Airflow itself stopped the task (marked failed, shut down)
    # Human in the loop (the standard provider's HITLOperator): nobody answered before its
    # response_timeout (and it has no defaults), or an ApprovalOperator with fail_on_reject was
    # rejected, which its author made a deliberate fail; neither is an error of the task's code.
    "HITLTimeoutError": TIMEOUT,
    "HITLRejectException": FAIL_NODE,
}

# How Airflow's API says a user set a DAG run's state by hand (its failure is CANCELLED).
MARKED = "state was manually set"
# A DAG run's failure by the scheduler's own reason (models/dagrun.py, scheduler_job_runner.py).
DAG_RUN_FAILURES: dict[str, str] = {
    "task_failure": ENGINE_ERROR,
    "all_tasks_deadlocked": JOIN_FAILED,
    "timed_out": TIMEOUT,
}

ACTOR = "airflow"
CLOSE_S = 2.0  # how long an unwatched process's exit waits for its spool to drain (the rest waits for a watcher)
# The slot a DAG run names: no process boots it, so no boot judges a DAG run by the time
# fallback (rule O3: a scheduler's boot must not orphan the DAG runs an earlier one
# started), and it is not a run no slot names (rule O9). Airflow's schedulers, any of
# them, move a DAG run; it outlives each of them.
DAG_RUNS = f"{SOURCE}/dag-runs"


# The characters that send an id to its hashed form: whitespace (str.isspace's, which the
# pattern's \s is) and the control characters below 0x20. One search, not a loop over the
# characters in Python: an id is made several times per hook.
_NOT_IN_ID = re.compile(r"[\s\x00-\x1f]")


def ledger_id(*parts: str) -> str:
    """A ledger id for Airflow's ids: `airflow/` and the parts joined by `/` (Airflow's
    dag, run and task ids cannot hold one, so the parts stay apart). Past the id bound,
    `airflow/h/` and a hash of it; the labels keep the parts whole."""
    full = "/".join((SOURCE, *parts))
    if len(full) <= MAX_ID and _NOT_IN_ID.search(full) is None:
        return full
    return f"{SOURCE}/h/{hashlib.sha256(full.encode()).hexdigest()[:40]}"


class TaskTry(msgspec.Struct, frozen=True, kw_only=True):
    """One try of one task instance, as every hook names it."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int = 1

    @property
    def run(self) -> str:
        return ledger_id(self.dag_id, self.run_id, self.task_id, str(self.map_index), str(self.try_number))

    @property
    def parent(self) -> str | None:
        """The try this one retries (rule I2), if any."""
        if self.try_number <= 1:
            return None
        return msgspec.structs.replace(self, try_number=self.try_number - 1).run

    @property
    def dag_run(self) -> str:
        return ledger_id(self.dag_id, self.run_id)

    @property
    def labels(self) -> dict[str, str]:
        return {
            "airflow.dag_id": self.dag_id,
            "airflow.run_id": self.run_id,
            "airflow.task_id": self.task_id,
            "airflow.map_index": str(self.map_index),
            "airflow.try_number": str(self.try_number),
            "airflow.dag_run": self.dag_run,
        }


def dag_run_labels(dag_id: str, run_id: str) -> dict[str, str]:
    return {"airflow.dag_id": dag_id, "airflow.run_id": run_id}


def failure_code(error: BaseException | str | None) -> tuple[str, Cause | None]:
    """A task's failure as a code and its cause: the exception's class by FAILURE_CODES
    (along its MRO), else ENGINE_ERROR; the cause names the class and its message."""
    if not isinstance(error, BaseException):
        return ENGINE_ERROR, None
    cause = Cause(code=type(error).__name__[:200], message=(str(error)[:MAX_TEXT] or None))
    for klass in type(error).__mro__:
        if (code := FAILURE_CODES.get(klass.__name__)) is not None:
            return code, cause
    return ENGINE_ERROR, cause


def error_text(error: BaseException | str | None) -> str | None:
    if error is None:
        return None
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    return text[:MAX_TEXT] or None


Component = Literal["scheduler", "task-runner"]
_SPOOL_NUMBERS = itertools.count()


class Recorder:
    """Writes Airflow's transitions into one ledger, from whichever Airflow process the
    hooks run in, through that process's spool (epochledger/spool.py) in `spool`, a
    directory local to the host and shared by its Airflow processes. Its state belongs
    to one process: Airflow forks (the executor's workers, each task runner), so a
    Recorder reached in a child opens a spool of its own and has booted nothing yet
    (the parent's spool refuses the child, and is never closed there)."""

    def __init__(
        self,
        store: str,
        *,
        spool: str,
        probe_interval: float = 5.0,
        opener: Callable[[str], Ledger] = open_ledger,
        host: str | None = None,
        fsync: Fsync = "batch",
        hold: float = spool_mod.HOLD_S,
        clock: Clock | None = None,
    ):
        self.store = store
        self.spool_dir = os.path.abspath(spool)
        self.probe_interval = probe_interval
        self.opener = opener
        self.host = host if host is not None else socket.gethostname()
        self.fsync: Fsync = fsync
        self.hold = hold
        self.clock = checked_clock(clock or SystemClock())
        self.facts = SystemHost()
        # Read here, once: a task runner is forked per try from the process that made the
        # Recorder (the scheduler's executor), and boots with the ids its parent read.
        self.facts.boot_id()
        self.facts.machine_id()
        self.epoch: str | None = None  # the task runner's epoch, once booted
        self.process: str | None = None  # and its slot
        self.spool: Spool | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        # The hooks of one process may run on two threads (the scheduler's start-up waits
        # on a thread of its own: epochledger/adapters/airflow_plugin.py): one append at a time.
        self._lock = threading.RLock()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a forked child: nothing booted here yet, no watcher, no spool (the parent's
        turned itself off: epochledger/spool.py), a fresh lock (the parent's may have
        been held at the fork). The system clock reads the child's own start by itself
        (ledger/clock.py, rule O1)."""
        self.spool, self.epoch, self.process, self._watcher = None, None, None, None
        self._lock = threading.RLock()

    # ----------------------------------------------------------- the seam
    def _open(self) -> Ledger:
        return self.opener(self.store)

    def _here(self, process: str | None = None, epoch: str | None = None) -> Spool:
        """This process's spool, opened (and its writer started) on first use; `process`
        and `epoch`: the task runner's slot and epoch for its lock file, written with the
        opening's own write of it when the spool opens here (one write, not two)."""
        if self.spool is not None and (process is not None or epoch is not None):
            self.spool.set_owner(process=process, epoch=epoch)
        if self.spool is None:
            pid = os.getpid()
            # One Recorder per process in Airflow; a second one (a test's API server
            # beside its task runner) gets a spool of its own.
            n = next(_SPOOL_NUMBERS)
            spool = Spool(
                self._open,
                self.spool_dir,
                f"{SOURCE}.{self.host}.{pid}" + (f".{n}" if n else ""),
                fsync=self.fsync,
                hold=self.hold,
                owner=Owner(pid=pid, process=process, epoch=epoch),
            )
            self.spool = spool.start()
            atexit.register(self._at_exit, pid)
        return self.spool

    def _at_exit(self, pid: int) -> None:
        spool = self.spool
        if os.getpid() == pid and spool is not None and not spool.close(CLOSE_S):
            log.warning("epochledger: spool %s not drained at exit; its lines wait for the watcher", spool.path)

    def _stamp(self) -> datetime:
        return self.clock.now()

    def append(self, what: str, *events: StreamEvent) -> None:
        """The one seam every transition crosses (rule E1): `events`, stamped when
        Airflow made the transition, are one write to this process's spool, and the hook
        returns; the spool's writer puts them in the store, in order, exactly once,
        whenever it can be reached, and a line the ledger refuses is written down with
        its reason (NAME.rejected: epochledger/spool.py). Nothing is raised into Airflow:
        a spool that cannot be written (a full disk) is logged, naming the transition."""
        with self._lock:
            try:
                self._here().append(*events)
            except (LedgerError, OSError) as error:
                log.warning("epochledger: %s not recorded: %s: %s", what, type(error).__name__, error)

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for everything this process recorded to be in
        the store; True if it is (for tests and a clean exit)."""
        return True if self.spool is None else self.spool.flush(timeout)

    # ---------------------------------------------------------- processes
    def slot(self, component: Component) -> str:
        return ledger_id(self.host, component, str(os.getpid()))

    def component_started(self, component: Component) -> str | None:
        """A task runner boots its slot (the epoch is named here, the boot is spooled
        and named in the spool's lock file, so whoever finds this process dead records
        its exit: `watch`). A scheduler starts its watcher (`watch`, a process of its
        own), which starts the scheduler's slot up and probes the host."""
        slot = self.slot(component)
        if component != "task-runner":
            self._start_watcher()
            return None
        epoch = uuid.uuid4().hex
        boot = boot_event(self.facts, self.clock, slot, epoch=epoch, host=self.host, actor=ACTOR)
        with self._lock:
            try:
                self._here(process=slot, epoch=epoch)
            except (LedgerError, OSError) as error:
                log.warning("epochledger: boot of %s not recorded: %s: %s", slot, type(error).__name__, error)
                return None
        self.epoch, self.process = epoch, slot
        self.append(f"boot of {slot}", boot)
        return epoch

    def component_stopping(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.terminate()  # it records the scheduler's clean stop (`watch`)
            try:
                watcher.wait(timeout=10)
            except subprocess.TimeoutExpired:
                watcher.kill()
        epoch, spool, slot = self.epoch, self.spool, self.process
        if epoch is None or spool is None or slot is None:
            return
        at = self._stamp()
        self.append(
            f"stop of {slot}",
            ProcessStopping(at=at, process=slot, epoch=epoch, actor=ACTOR),
            ProcessStopped(at=at, process=slot, epoch=epoch, actor=ACTOR),
        )
        self.epoch = self.process = None
        with self._lock:
            spool.set_owner(stopped=True)
            self.spool = None
            # A watcher on the host reaps this spool once the task runner is gone: the exit
            # need not wait for the store (its lines are on disk). Without one, nobody
            # would import them until a watcher starts, so the exit waits for the drain.
            if spool_mod.watched(self.spool_dir):
                pending = spool.pending()
                spool.leave()
                log.info("epochledger: spool %s left to the watcher's reap (%d bytes pending)", spool.path, pending)
            elif not spool.close(CLOSE_S):  # bounded: the rest waits for a watcher's reap
                log.warning("epochledger: spool %s not drained at the task runner's end", spool.path)

    def _start_watcher(self) -> None:
        # A process, not a thread: the scheduler forks its executor's workers (each task
        # runner descends from one), and a fork taken while another thread is inside
        # SQLite leaves the child's SQLite mutexes and locks as that thread held them (the
        # first task runners hung for 30 s and forever when the probe ran on a thread).
        self._watcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "epochledger.adapters.airflow",
                "watch",
                "--store",
                self.store,
                "--spool",
                self.spool_dir,
                "--pid",
                str(os.getpid()),
                "--host",
                self.host,
                "--interval",
                str(self.probe_interval),
            ]  # fmt: skip
        )

    # -------------------------------------------------------- task tries
    def _queued(self, t: TaskTry, at: datetime, actor: str = ACTOR) -> RunQueued:
        return RunQueued(at=at, run=t.run, workflow=t.dag_id, labels=t.labels, parent=t.parent, actor=actor)

    def task_running(self, t: TaskTry, *, resumed: str | None = None) -> None:
        """The task runner starts the try. `resumed`: Airflow resumes a try that waited
        on it, whose earlier task runner paused it (`task_waiting`), saying how
        ("next_method=execute_complete", "reschedule 2"): resumed by the orchestrator,
        then started under this task runner's epoch, the try's next attempt."""
        at = self._stamp()
        start = RunStarted(at=at, run=t.run, epoch=self.epoch, process=self.process, actor=ACTOR)
        if resumed is None:
            self.append(f"start of {t.run}", self._queued(t, at), start)
            return
        resume = RunResumed(at=at, run=t.run, by="orchestrator", actor=ACTOR, reason=f"airflow: resumed, {resumed}")
        self.append(f"resume of {t.run}", resume, start)

    def task_waiting(self, t: TaskTry, state: str) -> None:
        """The try ended its task runner's part without an outcome: Airflow waits on its
        own (`state`: deferred to the triggerer, up_for_reschedule, awaiting_input) and
        will resume it in a new task runner. A pause of kind `orchestrator`, on behalf of
        this task runner's epoch: the runner then stops, and the try, owned by no
        process while it waits, is never an orphan (docs/lifecycle.md)."""
        self.append(
            f"{state} of {t.run}",
            RunPaused(
                at=self._stamp(),
                run=t.run,
                kind="orchestrator",
                epoch=self.epoch,
                actor=ACTOR,
                reason=f"airflow: {state}",
            ),
        )

    def task_succeeded(self, t: TaskTry) -> None:
        self.append(f"finish of {t.run}", RunFinished(at=self._stamp(), run=t.run, epoch=self.epoch, actor=ACTOR))

    def task_skipped(self, t: TaskTry) -> None:
        self.append(
            f"skip of {t.run}",
            RunFinished(at=self._stamp(), run=t.run, epoch=self.epoch, actor=ACTOR, reason="skipped by the task"),
        )

    def task_failed(self, t: TaskTry, *, retry: bool, error: BaseException | str | None) -> None:
        """The task runner's own report of a failure (it raised)."""
        code, cause = failure_code(error)
        self.append(
            f"failure of {t.run}",
            RunFailed(
                at=self._stamp(),
                run=t.run,
                code=code,
                resumable=retry,
                error=error_text(error),
                cause=cause,
                epoch=self.epoch,
                actor=ACTOR,
            ),
        )

    def task_failed_by_scheduler(
        self, t: TaskTry, *, retry: bool, error: BaseException | str | None, ran: bool = True
    ) -> None:
        """A failure the scheduler decided for a try whose task runner did not report
        one (its heartbeat stopped, or its executor said it ended): PROCESS_EXITED, as
        Airflow reported it, and no exit fact. `ran`: Airflow had the try running (its
        task runner's start is recorded); a try it failed before it ran is queued, then
        failed, as Airflow did. A try that waits (paused for the orchestrator) and that
        the scheduler fails (its executor's word that a poke ended came once the next
        poke was queued: Airflow calls the hook with previous_state running) is failed
        from its wait (rule E1). A try the ledger ended already (the probe found its
        process gone first) is left as it is: the ledger refuses the scheduler's later
        word, and the spool writes it down with that reason."""
        at, actor = self._stamp(), "airflow-scheduler"
        failed = RunFailed(at=at, run=t.run, code=PROCESS_EXITED, resumable=retry, error=error_text(error), actor=actor)
        if ran:
            self.append(f"scheduler's failure of {t.run}", failed)
        else:
            self.append(f"scheduler's failure of {t.run}", self._queued(t, at, actor), failed)

    def task_marked(self, t: TaskTry, state: str, *, note: str | None = None) -> None:
        """A user set the try's state by hand (Airflow's API: mark success, failed or
        skipped). Failed: `failed` CANCELLED (an operator's decision, rule L2); success
        and skipped: `finished` (a try this adapter records is never left queued: its
        queue and start are one commit). A try that waits (paused for the orchestrator)
        is ended from its wait the same way: Airflow ends it without running it again
        (rule E1). A try the ledger ended already, or never saw, is left as it is: the
        ledger refuses the mark, and the spool writes it down."""
        actor, reason, at = "airflow-api", f"airflow: marked {state} by hand", self._stamp()
        if state == "failed":
            event: StreamEvent = RunFailed(
                at=at, run=t.run, code=CANCELLED, resumable=False, error=note, actor=actor, reason=reason
            )
        else:
            event = RunFinished(at=at, run=t.run, actor=actor, reason=reason)
        self.append(f"{state} by hand of {t.run}", event)

    # ----------------------------------------------------------- DAG runs
    def dag_run_running(self, dag_id: str, run_id: str) -> None:
        run, at = ledger_id(dag_id, run_id), self._stamp()
        self.append(
            f"start of {run}",
            RunQueued(at=at, run=run, workflow=dag_id, labels=dag_run_labels(dag_id, run_id), actor=ACTOR),
            RunStarted(at=at, run=run, process=DAG_RUNS, actor=ACTOR),
        )

    def dag_run_ended(
        self,
        dag_id: str,
        run_id: str,
        *,
        success: bool,
        msg: str | None,
        not_run: Mapping[TaskTry, str] | None = None,
    ) -> None:
        """A DAG run's end, and the tries the scheduler ended without running them
        (`not_run`: each try's Airflow state, upstream_failed or skipped)."""
        run = ledger_id(dag_id, run_id)
        for t, state in (not_run or {}).items():
            self._not_run(t, state)
        at = self._stamp()
        if success:
            self.append(f"finish of {run}", RunFinished(at=at, run=run, actor=ACTOR, reason=msg or None))
            return
        code = CANCELLED if MARKED in (msg or "") else DAG_RUN_FAILURES.get(msg or "", ENGINE_ERROR)
        error = f"airflow: {msg}" if msg else None
        self.append(
            f"failure of {run}", RunFailed(at=at, run=run, code=code, resumable=False, error=error, actor=ACTOR)
        )

    def _not_run(self, t: TaskTry, state: str) -> None:
        """A try the scheduler ended without running it. Airflow numbers a try when it
        schedules it, so a try that never ran is try 0; a later try in such a state ran
        (a task that skipped itself, a try cleared and then upstream_failed), and its
        own hooks said what it did: nothing to add."""
        if t.try_number != 0:
            return
        at, actor = self._stamp(), "airflow-scheduler"
        end: StreamEvent
        if state == "upstream_failed":
            end = RunFailed(
                at=at, run=t.run, code=JOIN_FAILED, resumable=False, error="airflow: upstream_failed", actor=actor
            )
        else:
            end = RunCancelled(at=at, run=t.run, actor=actor, reason=f"airflow: {state} by the scheduler")
        self.append(f"{state} of {t.run}", self._queued(t, at, actor), end)


NOT_RUN_STATES = frozenset({"upstream_failed", "skipped"})
# The states in which a try's task runner ends with the try still Airflow's to resume
# (task SDK 1.3.2, task_runner.py: TaskDeferred, AirflowRescheduleException,
# TaskAwaitingInput): no state hook runs for them, only before_stopping.
WAIT_STATES = frozenset({"deferred", "up_for_reschedule", "awaiting_input"})


def reap(led: Ledger, spool: str, *, host: str, epoch: str | None) -> list[spool_mod.Dead]:
    """Import what the spools of dead Airflow processes in `spool` still hold, record
    the exit of each dead task runner that booted and did not stop (observed by the
    watcher: its spool's lock came free, so its process is gone), then sweep with the
    scheduler's `epoch` (their tries are orphans now: rule O7)."""

    def exits(dead: list[spool_mod.Dead]) -> None:
        ended = [d.owner for d in dead if d.owner.process and d.owner.epoch and not d.owner.stopped]
        for owner in ended:
            assert owner.process is not None and owner.epoch is not None
            led.exited(
                owner.process,
                owner.epoch,
                observed_by=f"airflow-watcher@{host}",
                evidence=f"pid {owner.pid} is gone: its spool's lock came free",
                actor=ACTOR,
            )
        if ended and epoch is not None:
            led.sweep(epoch)

    return spool_mod.reap(led, spool, then=exits)


def watch(
    store: str,
    scheduler_pid: int,
    *,
    interval: float,
    host: str,
    spool: str,
    opener: Callable[[str], Ledger] = open_ledger,
) -> int:
    """The scheduler's watcher, a child process of the scheduler: imports what dead
    processes' spools still hold (`reap`), starts the scheduler's slot up (boot for the
    scheduler's pid, the host's unreported exits, sweep: rule O5), then every
    `interval` seconds reaps again and probes the host (rules O7, O8): a task runner
    that died unseen gets its `process.exited`, and the sweep recovers its try. The
    reap comes before the probe, so a dead task runner's last reports are in before
    its exit is. A store that cannot be reached is waited out (its start-up and each
    round tried again). From its first round on it holds the spool directory's watch
    (`spool.watch`), so a task runner's exit leaves its last lines to the next reap
    instead of waiting for the store (`Recorder.component_stopping`). SIGTERM (the
    scheduler's before_stopping) lets the watch go, reaps once more and records the
    scheduler's clean stop; a scheduler that dies unseen (the watcher is reparented)
    is left to one last probe, which records its exit."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    slot = ledger_id(host, "scheduler", str(scheduler_pid))
    pause = interval if interval > 0 else None
    led: Ledger | None = None
    epoch: str | None = None
    delay = spool_mod.FIRST_RETRY_S
    while epoch is None:
        try:
            led = led or opener(store)
            reap(led, spool, host=host, epoch=None)
            epoch = led.startup(slot, pid=scheduler_pid, actor=ACTOR)[0].epoch
        except (StoreError, ConflictError) as error:
            log.warning(
                "epochledger: the scheduler's start-up waits for the store: %s: %s", type(error).__name__, error
            )
            if isinstance(error, StoreError):
                led = None
            if stop.wait(delay):
                return 0
            delay = min(delay * 2, spool_mod.RETRY_MAX_S)
    assert led is not None
    # While it holds the directory's watch (`spool.watch`: the kernel drops it when this
    # process dies), a task runner's exit leaves its spool to this reap instead of
    # waiting for the store. Only with rounds to reap in; another scheduler's watcher on
    # the host may hold it, then this one takes it over when that one is gone.
    watching: int | None = None
    with led:
        try:
            while not stop.wait(pause):
                if watching is None and pause is not None:
                    watching = spool_mod.watch(spool)
                try:
                    if os.getppid() != scheduler_pid:
                        _unwatch(watching)
                        watching = None
                        reap(led, spool, host=host, epoch=epoch)
                        probe(led, spool, epoch=None)  # the scheduler is gone: the probe records its exit
                        return 0
                    reap(led, spool, host=host, epoch=epoch)
                    probe(led, spool, epoch=epoch)
                except LedgerError as error:
                    log.warning("epochledger: probe failed: %s: %s", type(error).__name__, error)
            # The watch let go first, then one last reap: a task runner that left its spool
            # before that is imported now (one that is still exiting waits for the next watcher).
            _unwatch(watching)
            watching = None
            try:
                reap(led, spool, host=host, epoch=epoch)
            except LedgerError as error:
                log.warning("epochledger: the last reap failed: %s: %s", type(error).__name__, error)
            led.stop(epoch, actor=ACTOR, reason="the scheduler stopped")
        finally:
            _unwatch(watching)
    return 0


class _SpoolsFirst:
    """The ledger as the watcher's probe sees it: the epochs that own a spool in the
    directory are left out, for the spool's reap to judge (its exit once the lock is
    free, after its last lines). A task runner that left its spool to the watcher and
    exited after this round's reap has its stop in its spool, not yet in the store: the
    probe would find its pid gone, record an exit first and fence its last reports."""

    def __init__(self, led: Ledger, spool: str):
        self._led, self._spool = led, spool

    def __getattr__(self, name: str) -> object:
        return getattr(self._led, name)

    def liveness(self) -> list[tuple[EpochState, tuple[str, str] | None]]:
        spooled = {o.epoch for o in spool_mod.owners(self._spool) if o.epoch}
        return [(e, ended) for e, ended in self._led.liveness() if e.epoch not in spooled]


def probe(led: Ledger, spool: str, *, epoch: str | None) -> probe_mod.ProbeReport:
    """The watcher's probe of the host (`Ledger.probe`, rule O7), but for the epochs that
    own a spool in `spool`: those are the reap's to judge (`_SpoolsFirst`)."""
    return probe_mod.probe(cast(probe_mod.ProbeTarget, _SpoolsFirst(led, spool)), epoch=epoch)


def _unwatch(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # drops the watch: task runners drain their own spools again


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m epochledger.adapters.airflow")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("watch", help="the scheduler's watcher (started by the plugin; not for hands)")
    w.add_argument("--store", required=True)
    w.add_argument("--spool", required=True)
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--host", required=True)
    w.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return watch(args.store, args.pid, interval=args.interval, host=args.host, spool=args.spool)
    except LedgerError as error:
        log.error("epochledger: the scheduler's watcher stopped: %s: %s", type(error).__name__, error)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = [
    "ACTOR",
    "DAG_RUN_FAILURES",
    "FAILURE_CODES",
    "NOT_RUN_STATES",
    "WAIT_STATES",
    "Recorder",
    "TaskTry",
    "error_text",
    "failure_code",
    "ledger_id",
]
