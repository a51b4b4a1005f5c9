"""Celery, live: a worker's lifecycle and its tasks' transitions from Celery's signals
(rule E1; the mapping is docs/adapters.md, "Celery").

    from epochledger.adapters.celery import install
    install(app, store="postgresql://...", spool="/var/lib/epochledger/spool")

Processes are slots (rule O8): the worker's main process is `celery:<node>:main`, each
prefork pool child `celery:<node>:child:<pid>`, each with an epoch per start. A task is
a run, its id the run's id; a retry (the same id) is a new attempt of that run; a
revoke is a cancel; a failure's code comes from its exception class (`CODES`, which
`install(codes=...)` extends). Every transition goes through the process's spool
(epochledger/spool.py): a signal handler appends a line and returns; the spool's
writer thread puts it in the store. The main process sees a pool child's death when
that child's spool lock comes free (the kernel drops it when the child dies), imports
what the child's spool still held, records the child's exit (`process.exited`,
observed by `celery-main@<host>`) and sweeps: the child's run is recovered, never
left running, and a redelivered attempt starts it again (the spool holds that start
until the exit and the sweep have landed).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from celery import Celery, signals

from epochledger import spool as spool_mod
from epochledger.adapters import failure_code
from epochledger.app import Ledger, boot_event, open_ledger
from epochledger.ledger.clock import Clock, SystemClock, checked_clock
from epochledger.ledger.codes import CANCELLED, PROCESS_EXITED, TIMEOUT
from epochledger.ledger.errors import ConflictError, StoreError
from epochledger.ledger.events import (
    ProcessStopped,
    ProcessStopping,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunQueued,
    RunResumed,
    RunStarted,
)
from epochledger.ledger.host import Host, SystemHost
from epochledger.spool import Fsync, Owner, Spool

log = logging.getLogger("epochledger.celery")

RETRY = "RETRY"  # a Celery retry: failed_resumable, then the next attempt (docs/lifecycle.md, "Attempts")

# Exception class name -> failure code. Anything not listed gets its class name in
# upper snake case (ValueError -> VALUE_ERROR): codes are open-world (rule L3).
CODES: dict[str, str] = {
    "TimeLimitExceeded": TIMEOUT,
    "SoftTimeLimitExceeded": TIMEOUT,
    "WorkerLostError": PROCESS_EXITED,
    "Terminated": CANCELLED,
    "Retry": RETRY,
}

QUEUED_HEADER = "epochledger_queued"  # the publisher's queue stamp, so the worker's queue line is the same line
REAP_EVERY_S = 0.2  # how often the main process looks for its pool children's free locks
CLOSE_S = 2.0  # how long a process's exit waits for its spool to drain (then it stays for the next reap)
_ERROR_CHARS = 2000


def code_of(exc: BaseException, codes: Mapping[str, str] = CODES) -> str:
    """The failure code of an exception, by this adapter's CODES unless given
    (epochledger.adapters.failure_code)."""
    return failure_code(exc, codes)


def _error(exc: object) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]


class CeleryAdapter:
    """The signal handlers, and each process's spool. One per process (a forked pool
    child inherits the main process's and turns it into its own at
    `worker_process_init`). Use `install`."""

    def __init__(
        self,
        store: str | None,
        spool_dir: str,
        *,
        codes: Mapping[str, str] | None = None,
        fsync: Fsync = "batch",
        hold: float = spool_mod.HOLD_S,
        reap_every: float = REAP_EVERY_S,
        clock: Clock | None = None,
        host: Host | None = None,
    ):
        self.store = store
        self.spool_dir = os.path.abspath(spool_dir)
        self.codes = {**CODES, **(codes or {})}
        self.fsync: Fsync = fsync
        self.hold = hold
        self.reap_every = reap_every
        self.clock = checked_clock(clock or SystemClock())
        self.host = host if host is not None else SystemHost()
        self.hostname = self.host.name()
        self.role: str | None = None  # "main", "child" or "client", in this process
        self.node: str | None = None  # the worker's node name (w1@host), known from worker_init on
        self.slot: str | None = None
        self.epoch: str | None = None
        self.spool: Spool | None = None
        self._pid: int | None = None

    # ------------------------------------------------------------ plumbing
    def _open(self) -> Ledger:
        return open_ledger(self.store, clock=self.clock, host=self.host)

    def _spool(self, name: str, owner: Owner) -> Spool:
        self._pid = os.getpid()
        self.spool = Spool(self._open, self.spool_dir, name, fsync=self.fsync, hold=self.hold, owner=owner)
        return self.spool

    def _here(self) -> Spool:
        """This process's spool; a process that is no worker (a producer calling
        `.delay()`) gets a client spool on first use, drained at its exit."""
        if self.spool is None or self._pid != os.getpid():
            self.role, self.slot, self.epoch = "client", None, None
            spool = self._spool(f"client.{self.hostname}.{os.getpid()}", Owner(pid=os.getpid()))
            spool.start()
            atexit.register(spool.close, CLOSE_S)
        return self.spool  # type: ignore[return-value] # set just above

    def _stamp(self) -> datetime:
        return self.clock.now()

    def _handlers(self) -> tuple[tuple[Any, Any], ...]:
        return (
            (signals.before_task_publish, self.on_publish),
            (signals.worker_init, self.on_worker_init),
            (signals.worker_ready, self.on_worker_ready),
            (signals.worker_shutdown, self.on_worker_shutdown),
            (signals.worker_process_init, self.on_child_init),
            (signals.worker_process_shutdown, self.on_child_shutdown),
            (signals.task_prerun, self.on_prerun),
            (signals.task_success, self.on_success),
            (signals.task_failure, self.on_failure),
            (signals.task_revoked, self.on_revoked),
        )

    def connect(self) -> CeleryAdapter:
        for signal, handler in self._handlers():
            signal.connect(handler, weak=False)
        return self

    def disconnect(self, timeout: float = CLOSE_S) -> bool:
        """Stop recording in this process: the handlers go, and this process's spool is
        drained (bounded by `timeout`) and closed. True if it was drained."""
        for signal, handler in self._handlers():
            signal.disconnect(handler)
        spool, self.spool = self.spool, None
        if spool is None or self._pid != os.getpid():
            return True
        return spool.close(timeout)

    # ----------------------------------------------------- the publisher
    def on_publish(self, sender: str | None = None, headers: dict[str, Any] | None = None, **_: Any) -> None:
        """A task published: `run.queued`. The stamp travels in a header, so the
        worker's own queue line (for a publisher without the adapter, or whose spool is
        late) is the same line, and one of the two is a duplicate.

        A retry re-publishes the same id from the pool child running it, before Celery
        sends task_retry: its `failed_resumable` (RETRY) is recorded here, stamped
        before the message leaves, so the next attempt (maybe in the other child, a
        millisecond later) never starts before the failure it follows. task_retry comes
        after the next attempt may have begun: it records nothing."""
        if not headers:
            return
        at = self._stamp()
        retries = headers.get("retries") or 0
        if retries:
            if self.role == "child" and self.epoch is not None:
                handled = sys.exc_info()[1]
                error = f"retry {retries} published" + (f" after {_error(handled)}" if handled is not None else "")
                self._here().append(
                    RunFailed(
                        at=at,
                        run=headers["id"],
                        code=RETRY,
                        resumable=True,
                        error=error[:_ERROR_CHARS],
                        epoch=self.epoch,
                        actor="celery-worker",
                    )
                )
            return
        headers[QUEUED_HEADER] = at.isoformat()
        self._here().append(self._queued(headers["id"], sender or headers.get("task"), headers, at, "celery-client"))

    @staticmethod
    def _queued(run: str, task: str | None, fields: Mapping[str, Any], at: datetime, actor: str) -> RunQueued:
        labels = {"celery_task": task} if task else {}
        for field, label in (("parent_id", "celery_parent"), ("root_id", "celery_root")):
            value = fields.get(field)
            if value and value != run:
                labels[label] = str(value)
        return RunQueued(at=at, run=run, workflow=task, labels=labels, actor=actor)

    # ----------------------------------------------------- the main process
    def on_worker_init(self, sender: Any = None, **_: Any) -> None:
        """The worker's main process, before its pool starts: what dead processes'
        spools still hold is imported, their exits recorded, then `startup()` (boot,
        the host's earlier exits, sweep: rule O5). With the store unreachable the boot
        is spooled, and the reap and a probe run once it lands."""
        self.role = "main"
        self.node = str(getattr(sender, "hostname", None) or f"celery@{self.hostname}")
        self.slot = f"celery:{self.node}:main"
        self.epoch = uuid.uuid4().hex
        spool = self._spool(
            f"{self.node}.main.{os.getpid()}", Owner(process=self.slot, epoch=self.epoch, pid=os.getpid())
        )
        try:
            ledger = spool.ledger()
            self._reap(ledger, sweep=False)
            ledger.startup(self.slot, epoch=self.epoch, actor="celery-main")
        except (StoreError, ConflictError) as e:
            log.warning("celery main %s: the store is unreachable at start (%s); the boot is spooled", self.node, e)
            spool.append(self._boot(self.slot, self.epoch))
            epoch = self.epoch
            spool.when_drained(lambda ledger: (self._reap(ledger), ledger.probe(epoch=epoch)))
        spool.start()

    def on_worker_ready(self, **_: Any) -> None:
        """The pool is up: from now on the main process watches its children's spools."""
        if self.role == "main" and self.spool is not None:
            self.spool.every(self.reap_every, self._reap)

    def _boot(self, slot: str, epoch: str) -> Any:
        return boot_event(self.host, self.clock, slot, epoch=epoch, actor=f"celery-{self.role}")

    def _reap(self, ledger: Ledger, *, sweep: bool = True) -> list[spool_mod.Dead]:
        """Import the spools of dead processes in the spool directory, record the exit
        of each whose owner booted an epoch and did not stop, then sweep with this
        process's epoch (their runs are orphans now: rule O7)."""
        own = [self.spool.name] if self.spool is not None else []

        def exits(dead: list[spool_mod.Dead]) -> None:
            ended = [d.owner for d in dead if d.owner.epoch and d.owner.process and not d.owner.stopped]
            for owner in ended:
                assert owner.process is not None and owner.epoch is not None
                ledger.exited(
                    owner.process,
                    owner.epoch,
                    observed_by=f"celery-main@{self.hostname}",
                    evidence=f"pid {owner.pid} is gone: its spool's lock came free",
                    actor="celery-main",
                )
            if ended and sweep and self.epoch is not None:
                ledger.sweep(self.epoch)

        return spool_mod.reap(ledger, self.spool_dir, exclude=own, then=exits)

    def on_worker_shutdown(self, **_: Any) -> None:
        """The main process stops: its children have exited; whatever their spools
        still hold is imported and their exits recorded, then its own clean stop."""
        if self.role != "main" or self.spool is None or self.slot is None or self.epoch is None:
            return
        spool = self.spool
        spool.every(0, None)  # the last reap is this one, below
        if spool.flush(CLOSE_S):
            try:
                self._reap(spool.ledger())
            except (StoreError, ConflictError) as e:
                log.warning("celery main %s: the children's spools are left for the next start (%s)", self.node, e)
        self._stop(spool, "worker shutdown")

    def _stop(self, spool: Spool, reason: str) -> None:
        assert self.slot is not None and self.epoch is not None
        at = self._stamp()
        actor = f"celery-{self.role}"
        spool.append(
            ProcessStopping(at=at, process=self.slot, epoch=self.epoch, actor=actor, reason=reason),
            ProcessStopped(at=at, process=self.slot, epoch=self.epoch, actor=actor, reason=reason),
        )
        spool.set_owner(stopped=True)
        if not spool.close(CLOSE_S):
            log.warning("spool %s: not drained at exit; its lines wait for the next reap", spool.path)

    def on_revoked(
        self, request: Any = None, terminated: bool = False, signum: Any = None, expired: bool = False, **_: Any
    ) -> None:
        """A revoke (in the main process): `run.cancelled`. Celery's own words in the
        reason: terminated (the child got the signal), or expired."""
        if request is None:
            return
        why = "expired" if expired else f"revoked (terminated={bool(terminated)}, signal={signum})"
        self._here().append(RunCancelled(at=self._stamp(), run=request.id, actor="celery-revoke", reason=why))

    # ---------------------------------------------------- a pool child
    def on_child_init(self, **_: Any) -> None:
        """A prefork pool child: a slot of its own (rule O8), booted in its spool."""
        self.role = "child"
        node = self.node or f"celery@{self.hostname}"
        pid = os.getpid()
        self.slot = f"celery:{node}:child:{pid}"
        self.epoch = uuid.uuid4().hex
        spool = self._spool(f"{node}.child.{pid}", Owner(process=self.slot, epoch=self.epoch, pid=pid))
        spool.append(self._boot(self.slot, self.epoch))
        spool.start()

    def on_child_shutdown(self, pid: Any = None, exitcode: Any = None, **_: Any) -> None:
        if self.role == "child" and self.spool is not None and self._pid == os.getpid():
            self._stop(self.spool, f"pool child exits (exit code {exitcode})")

    def on_prerun(self, task_id: str | None = None, task: Any = None, **_: Any) -> None:
        """An attempt starts: a first delivery queues (the publisher's line again, or
        the worker's own) and starts; a retry or a redelivery resumes and starts (the
        next attempt; the redelivery's predecessor was recovered by the sweep that
        followed its worker's exit)."""
        if task_id is None or self.role != "child":
            return
        request = getattr(task, "request", None)
        spool = self._here()
        at = self._stamp()
        retries = getattr(request, "retries", 0) or 0
        info = getattr(request, "delivery_info", None) or {}
        lines: list[Any] = []
        if retries or info.get("redelivered"):
            lines.append(RunResumed(at=at, run=task_id, by="auto", actor="celery-worker", reason=f"retries={retries}"))
        else:
            stamp = getattr(request, QUEUED_HEADER, None)
            if stamp:
                queued = self._queued(task_id, task.name, vars(request), datetime.fromisoformat(stamp), "celery-client")
            else:
                queued = self._queued(task_id, task.name, vars(request), at, "celery-worker")
            lines.append(queued)
        lines.append(RunStarted(at=at, run=task_id, epoch=self.epoch, process=self.slot, actor="celery-worker"))
        spool.append(*lines)

    def on_success(self, sender: Any = None, **_: Any) -> None:
        if self.role == "child" and sender is not None:
            self._here().append(
                RunFinished(at=self._stamp(), run=sender.request.id, epoch=self.epoch, actor="celery-worker")
            )

    def on_failure(self, task_id: str | None = None, exception: BaseException | None = None, **_: Any) -> None:
        """In a pool child: the task raised, `failed` with its code. In the main
        process: a lost child (WorkerLostError) is the reaper's, now (its exit fact and
        the sweep: `failed_resumable`, PROCESS_ORPHANED, rule O7); anything else the
        main process reports (a hard time limit: TIMEOUT) is `failed`, by the main
        process, without an epoch (it is no report of the child's)."""
        if task_id is None or exception is None:
            return
        code = code_of(exception, self.codes)
        error = _error(exception)
        if self.role == "child":
            self._here().append(
                RunFailed(
                    at=self._stamp(),
                    run=task_id,
                    code=code,
                    resumable=False,
                    error=error,
                    epoch=self.epoch,
                    actor="celery-worker",
                )
            )
        elif self.role == "main" and self.spool is not None:
            if type(exception).__name__ == "WorkerLostError":
                self.spool.when_drained(self._reap)  # now, not at the next period
                return
            self.spool.append(
                RunFailed(at=self._stamp(), run=task_id, code=code, resumable=False, error=error, actor="celery-main")
            )


def install(
    app: Celery | None = None,
    *,
    store: str | None = None,
    spool: str | None = None,
    codes: Mapping[str, str] | None = None,
    fsync: Fsync = "batch",
    hold: float = spool_mod.HOLD_S,
    reap_every: float = REAP_EVERY_S,
) -> CeleryAdapter:
    """Record `app`'s workers and tasks (every Celery app of the process: signals are
    global) into the ledger at `store` (default: $EPOCHLEDGER_STORE), through spools in
    the directory `spool` (default: $EPOCHLEDGER_SPOOL, else ./epochledger-spool; local
    to the host, shared by its workers and producers). `codes`: exception class names
    -> failure codes, on top of CODES. `fsync`: "always" syncs each line before the
    signal handler returns (a power loss loses nothing; ~ a disk flush per transition),
    "batch" before each import (a process kill loses nothing; a power loss, the lines
    not yet in the store). Call it where both the worker and the producers import it
    (the module that defines `app`)."""
    del app  # Celery's signals are process-wide; the app is taken for the reader's sake
    directory = spool or os.environ.get("EPOCHLEDGER_SPOOL") or "epochledger-spool"
    adapter = CeleryAdapter(store, directory, codes=codes, fsync=fsync, hold=hold, reap_every=reap_every)
    return adapter.connect()


__all__ = ["CODES", "CeleryAdapter", "code_of", "install"]
