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
  (Airflow has no hook for its own scheduled and queued states); success -> finished;
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
  TIMEOUT). When it ends, the tries the scheduler ended without running them are
  recorded: upstream_failed -> queued, then failed JOIN_FAILED; skipped -> queued, then
  cancelled with the reason.
- Processes are slots (rule O8): each task runner process
  `airflow/<host>/task-runner/<pid>` (booted at `on_starting`, stopped at
  `before_stopping`), and each scheduler `airflow/<host>/scheduler/<pid>`, started up
  by the scheduler's watcher (`watch`: a child process, for the reason in
  `Recorder._start_watcher`), which then probes the host every `probe_interval`
  seconds: a task runner that died unseen (SIGKILL, OOM) gets its `process.exited`
  from the probe, and the sweep recovers its try (PROCESS_ORPHANED).

Every write crosses `Recorder.write`, the one seam a spool routes through: a write the
store refuses or cannot take is logged and dropped there, never raised into Airflow
(an outage loses those transitions until a spool stands in that seam; docs/adapters.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Literal, TypeVar

import msgspec

from epochledger.app import Ledger, open_ledger
from ledger.codes import CANCELLED, ENGINE_ERROR, FAIL_NODE, INTERRUPTED, JOIN_FAILED, PROCESS_EXITED, TIMEOUT
from ledger.errors import LedgerError, RunNotFound
from ledger.events import Cause, Status
from ledger.process import EpochState

log = logging.getLogger("epochledger.airflow")

T = TypeVar("T")

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
SLOW_WRITE_S = 0.5  # a write slower than this is logged: Airflow's hook waited on it
# The slot a DAG run names: no process boots it, so no boot judges a DAG run by the time
# fallback (rule O3: a scheduler's boot must not orphan the DAG runs an earlier one
# started), and it is not a run no slot names (rule O9). Airflow's schedulers, any of
# them, move a DAG run; it outlives each of them.
DAG_RUNS = f"{SOURCE}/dag-runs"


def ledger_id(*parts: str) -> str:
    """A ledger id for Airflow's ids: `airflow/` and the parts joined by `/` (Airflow's
    dag, run and task ids cannot hold one, so the parts stay apart). Past the id bound,
    `airflow/h/` and a hash of it; the labels keep the parts whole."""
    full = "/".join((SOURCE, *parts))
    if len(full) <= MAX_ID and not any(c.isspace() or ord(c) < 0x20 for c in full):
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


class Recorder:
    """Writes Airflow's transitions into one ledger, from whichever Airflow process the
    hooks run in. Its state belongs to one process: Airflow forks (the executor's
    workers, each task runner), so a Recorder reached in a child opens its own Ledger
    and has booted nothing yet. A Ledger inherited across fork is kept, never used or
    closed (its SQLite connection is the parent's)."""

    def __init__(
        self,
        store: str,
        *,
        probe_interval: float = 5.0,
        opener: Callable[[str], Ledger] = open_ledger,
        host: str | None = None,
    ):
        self.store = store
        self.probe_interval = probe_interval
        self.opener = opener
        self.host = host if host is not None else socket.gethostname()
        self._ledger: Ledger | None = None
        self._inherited: list[Ledger] = []
        self.epoch: EpochState | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        # The hooks of one process may run on two threads (the scheduler's start-up waits
        # on a thread of its own: epochledger/adapters/airflow_plugin.py): one write at a time.
        self._lock = threading.RLock()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a forked child: nothing booted here yet, no probe thread, a fresh lock (the
        parent's may have been held at the fork), and the parent's Ledger kept aside."""
        if self._ledger is not None:
            self._inherited.append(self._ledger)
        self._ledger, self.epoch, self._watcher = None, None, None
        self._lock = threading.RLock()

    # ----------------------------------------------------------- the seam
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = self.opener(self.store)
        return self._ledger

    def write(self, what: str, call: Callable[[Ledger], T]) -> T | None:
        """The one seam every transition crosses (rule E1). A LedgerError (the store
        refused it, or could not be reached) is logged, naming the transition, and the
        hook returns: Airflow's task never fails for the ledger's sake. This is where a
        durable spool takes the write instead of dropping it."""
        with self._lock:
            began = time.monotonic()
            try:
                return call(self.ledger())
            except LedgerError as error:
                log.warning("epochledger: %s not recorded: %s: %s", what, type(error).__name__, error)
                return None
            finally:
                if (took := time.monotonic() - began) > SLOW_WRITE_S:
                    log.warning("epochledger: %s took %.2f s", what, took)

    # ---------------------------------------------------------- processes
    def slot(self, component: Component) -> str:
        return ledger_id(self.host, component, str(os.getpid()))

    def component_started(self, component: Component) -> EpochState | None:
        """A task runner boots its slot. A scheduler starts its watcher (`watch`, a
        process of its own), which starts the scheduler's slot up and probes the host."""
        slot = self.slot(component)
        if component == "task-runner":
            self.epoch = self.write(f"boot of {slot}", lambda led: led.boot(slot, actor=ACTOR))
            return self.epoch
        self._start_watcher()
        return None

    def component_stopping(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.terminate()  # it records the scheduler's clean stop (`watch`)
            try:
                watcher.wait(timeout=10)
            except subprocess.TimeoutExpired:
                watcher.kill()
        epoch = self.epoch
        if epoch is not None:
            self.write(f"stop of {epoch.process}", lambda led: led.stop(epoch, actor=ACTOR))

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
                "--pid",
                str(os.getpid()),
                "--host",
                self.host,
                "--interval",
                str(self.probe_interval),
            ]  # fmt: skip
        )

    # -------------------------------------------------------- task tries
    def task_running(self, t: TaskTry) -> None:
        epoch = self.epoch

        def call(led: Ledger) -> None:
            with led.batch() as b:
                b.queue(t.run, workflow=t.dag_id, labels=t.labels, parent=t.parent, actor=ACTOR)
                b.start(t.run, epoch=epoch, actor=ACTOR)

        self.write(f"start of {t.run}", call)

    def task_succeeded(self, t: TaskTry) -> None:
        epoch = self.epoch
        self.write(f"finish of {t.run}", lambda led: led.finish(t.run, epoch=epoch, actor=ACTOR))

    def task_skipped(self, t: TaskTry) -> None:
        epoch = self.epoch
        self.write(
            f"skip of {t.run}", lambda led: led.finish(t.run, epoch=epoch, actor=ACTOR, reason="skipped by the task")
        )

    def task_failed(self, t: TaskTry, *, retry: bool, error: BaseException | str | None) -> None:
        """The task runner's own report of a failure (it raised)."""
        code, cause = failure_code(error)
        epoch = self.epoch
        self.write(
            f"failure of {t.run}",
            lambda led: led.fail(
                t.run, code, resumable=retry, error=error_text(error), cause=cause, epoch=epoch, actor=ACTOR
            ),
        )

    def task_failed_by_scheduler(self, t: TaskTry, *, retry: bool, error: BaseException | str | None) -> None:
        """A failure the scheduler decided for a try whose task runner did not report
        one (its heartbeat stopped, or its executor said it ended): PROCESS_EXITED, as
        Airflow reported it, and no exit fact. A try the ledger already ended (the probe
        found its process gone first) is left as it is; a try it never saw start is
        queued and failed, as Airflow did."""

        def call(led: Ledger) -> None:
            try:
                status = led.get_run(t.run).status
            except RunNotFound:
                status = None
            if status not in (None, Status.QUEUED, Status.RUNNING):
                return
            with led.batch() as b:
                if status is None:
                    b.queue(t.run, workflow=t.dag_id, labels=t.labels, parent=t.parent, actor=ACTOR)
                b.fail(t.run, PROCESS_EXITED, resumable=retry, error=error_text(error), actor="airflow-scheduler")

        self.write(f"scheduler's failure of {t.run}", call)

    def task_marked(self, t: TaskTry, state: str, *, note: str | None = None) -> None:
        """A user set the try's state by hand (Airflow's API: mark success, failed or
        skipped). Failed: `failed` CANCELLED (an operator's decision, rule L2); success
        and skipped: `finished` (skipped from queued: `cancelled`). A try the ledger
        ended already, or never saw, is left as it is (the ledger has no way from
        queued to finished: that mark is logged, not recorded)."""
        actor, reason = "airflow-api", f"airflow: marked {state} by hand"

        def call(led: Ledger) -> None:
            status = led.get_run(t.run).status
            if status not in (Status.QUEUED, Status.RUNNING):
                return
            if state == "failed":
                led.fail(t.run, CANCELLED, resumable=False, error=note, actor=actor, reason=reason)
            elif state == "skipped" and status == Status.QUEUED:
                led.cancel(t.run, actor=actor, reason=reason)
            else:
                led.finish(t.run, actor=actor, reason=reason)

        self.write(f"{state} by hand of {t.run}", call)

    # ----------------------------------------------------------- DAG runs
    def dag_run_running(self, dag_id: str, run_id: str) -> None:
        run = ledger_id(dag_id, run_id)

        def call(led: Ledger) -> None:
            with led.batch() as b:
                b.queue(run, workflow=dag_id, labels=dag_run_labels(dag_id, run_id), actor=ACTOR)
                b.start(run, process=DAG_RUNS, actor=ACTOR)

        self.write(f"start of {run}", call)

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
        if success:
            self.write(f"finish of {run}", lambda led: led.finish(run, actor=ACTOR, reason=msg or None))
            return
        code = CANCELLED if MARKED in (msg or "") else DAG_RUN_FAILURES.get(msg or "", ENGINE_ERROR)
        self.write(
            f"failure of {run}",
            lambda led: led.fail(run, code, resumable=False, error=f"airflow: {msg}" if msg else None, actor=ACTOR),
        )

    def _not_run(self, t: TaskTry, state: str) -> None:
        def call(led: Ledger) -> None:
            try:
                led.get_run(t.run)
                return  # it ran (or was recorded already): its own hooks said what it did
            except RunNotFound:
                pass
            with led.batch() as b:
                b.queue(t.run, workflow=t.dag_id, labels=t.labels, parent=t.parent, actor="airflow-scheduler")
                if state == "upstream_failed":
                    b.fail(
                        t.run, JOIN_FAILED, resumable=False, error="airflow: upstream_failed", actor="airflow-scheduler"
                    )
                else:
                    b.cancel(t.run, actor="airflow-scheduler", reason=f"airflow: {state} by the scheduler")

        self.write(f"{state} of {t.run}", call)


NOT_RUN_STATES = frozenset({"upstream_failed", "skipped"})


def watch(
    store: str, scheduler_pid: int, *, interval: float, host: str, opener: Callable[[str], Ledger] = open_ledger
) -> int:
    """The scheduler's watcher, a child process of the scheduler: starts the scheduler's
    slot up (boot for the scheduler's pid, the host's unreported exits, sweep: rule O5),
    then probes the host every `interval` seconds (rules O7, O8): a task runner that
    died unseen gets its `process.exited`, and the sweep recovers its try. SIGTERM (the
    scheduler's before_stopping) records the scheduler's clean stop; a scheduler that
    dies unseen (the watcher is reparented) is left to one last probe, which records
    its exit."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    slot = ledger_id(host, "scheduler", str(scheduler_pid))
    with opener(store) as led:
        epoch, _ = led.startup(slot, pid=scheduler_pid, actor=ACTOR)
        while not stop.wait(interval if interval > 0 else None):
            if os.getppid() != scheduler_pid:
                led.probe()  # the scheduler is gone: the probe records its exit, the sweep what it left
                return 0
            try:
                led.probe(epoch=epoch)
            except LedgerError as error:
                log.warning("epochledger: probe failed: %s: %s", type(error).__name__, error)
        led.stop(epoch, actor=ACTOR, reason="the scheduler stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m epochledger.adapters.airflow")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("watch", help="the scheduler's watcher (started by the plugin; not for hands)")
    w.add_argument("--store", required=True)
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--host", required=True)
    w.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return watch(args.store, args.pid, interval=args.interval, host=args.host)
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
    "Recorder",
    "TaskTry",
    "error_text",
    "failure_code",
    "ledger_id",
]
