"""Prefect, live: a flow run's transitions from Prefect's state hooks (rule E1; the
mapping is docs/adapters.md, "Prefect").

    from epochledger.adapters.prefect import install
    ledger_hooks = install(store="postgresql://...", spool="/var/lib/epochledger/spool")

    @flow(retries=2, **ledger_hooks.hooks())
    def nightly() -> None: ...

A flow run is run `prefect:<flow_run.id>` (workflow: the flow's name). The process
running it is an epoch of the run's own slot `prefect:flow-run:<flow_run.id>` (rule O8),
booted at the first `on_running` the process sees, with this host's facts (pid, its
start time, the host's boot); the terminal hook stops that epoch. A retry (`on_running`
again, `run_count` > 1) is a new attempt of the same run: `failed_resumable` (RETRY),
`resume(by="auto")`, `start`. `on_completion` finishes, `on_failure` fails with the code
of the exception's class (`CODES`, which `install(codes=...)` extends), `on_crashed`
fails with PROCESS_EXITED, `on_cancellation` cancels. Every transition goes through the
process's spool (epochledger/spool.py): a hook appends a line and returns; the spool's
writer thread puts it in the store. A flow process that is SIGKILLed runs no hook: its
spool's lines and its death are found by `recover()` (on this host: the dead processes'
spools imported, then the probe records the epoch's exit and sweeps; the run is
recovered), which `install()` also runs once its spool reaches the store.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from epochledger import spool as spool_mod
from epochledger.adapters import failure_code
from epochledger.app import Ledger, boot_event, open_ledger
from epochledger.ledger.clock import Clock, SystemClock, checked_clock
from epochledger.ledger.codes import ENGINE_ERROR, PROCESS_EXITED, TIMEOUT
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
from epochledger.probe import ProbeReport
from epochledger.spool import Fsync, Owner, Spool

log = logging.getLogger("epochledger.prefect")

RETRY = "RETRY"  # a Prefect flow retry: failed_resumable, then the next attempt (docs/lifecycle.md, "Attempts")

# Exception class name -> failure code. Anything not listed gets its class name in
# upper snake case (ValueError -> VALUE_ERROR): codes are open-world (rule L3).
CODES: dict[str, str] = {
    "TimeoutError": TIMEOUT,
    "FlowRunTimeoutError": TIMEOUT,
    "CancelledError": ENGINE_ERROR,
}

CLOSE_S = 2.0  # how long a process's exit waits for its spool to drain (then it waits for recover())
_ERROR_CHARS = 2000


def code_of(exc: BaseException, codes: Mapping[str, str] = CODES) -> str:
    """The failure code of an exception, by this adapter's CODES unless given
    (epochledger.adapters.failure_code)."""
    return failure_code(exc, codes)


def run_id(flow_run: Any) -> str:
    return f"prefect:{flow_run.id}"


def slot_of(flow_run: Any) -> str:
    return f"prefect:flow-run:{flow_run.id}"


def _exception(state: Any) -> BaseException | None:
    """The exception a failed or crashed state carries (Prefect keeps it in the state's
    data in the flow's own process), or None."""
    try:
        found = state.result(raise_on_failure=False)
    except Exception as e:  # noqa: BLE001 - a result Prefect cannot read back: the error is that
        return e
    return found if isinstance(found, BaseException) else None


def _error(state: Any, exc: BaseException | None) -> str:
    """The exception's class and message; Prefect's own message for the state when the
    exception has none (a TerminationSignal: "Execution was aborted by a termination
    signal.") or there is no exception."""
    said = str(getattr(state, "message", "") or state)
    text = f"{type(exc).__name__}: {str(exc) or said}" if exc is not None else said
    return text[:_ERROR_CHARS]


class PrefectAdapter:
    """The state hooks, and this process's spool. Use `install`."""

    def __init__(
        self,
        store: str | None,
        spool_dir: str,
        *,
        codes: Mapping[str, str] | None = None,
        fsync: Fsync = "batch",
        hold: float = spool_mod.HOLD_S,
        clock: Clock | None = None,
        host: Host | None = None,
    ):
        self.store = store
        self.spool_dir = os.path.abspath(spool_dir)
        self.codes = {**CODES, **(codes or {})}
        self.fsync: Fsync = fsync
        self.hold = hold
        self.clock = checked_clock(clock or SystemClock())
        self.host = host if host is not None else SystemHost()
        self.hostname = self.host.name()
        self.spool: Spool | None = None
        self._pid: int | None = None
        self._mutex = threading.Lock()
        self._epochs: dict[str, str] = {}  # run -> the epoch of its slot this process booted
        self._attempts: dict[str, int] = {}  # run -> the last run_count this process started

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled (Prefect's runner cloudpickles a flow, its hooks with it, into the
        process that runs it) as its settings only: the process that unpickles it gets
        an adapter of its own, with its own spool, this host's clock and facts."""
        return (_rebuilt, (self.store, self.spool_dir, self.codes, self.fsync, self.hold))

    # ------------------------------------------------------------ plumbing
    def _open(self) -> Ledger:
        return open_ledger(self.store, clock=self.clock, host=self.host)

    def _here(self) -> Spool:
        """This process's spool (a forked child makes its own), started on first use,
        drained at exit; once it reaches the store, the dead processes' spools on this
        host are recovered."""
        with self._mutex:
            if self.spool is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._epochs, self._attempts = {}, {}
                name = f"prefect.{self.hostname}.{self._pid}"
                self.spool = Spool(
                    self._open, self.spool_dir, name, fsync=self.fsync, hold=self.hold, owner=Owner(pid=self._pid)
                )
                self.spool.when_drained(lambda ledger: self.recover(ledger))
                self.spool.start()
                atexit.register(self.close, CLOSE_S)
            return self.spool

    def hooks(self) -> dict[str, list[Any]]:
        """The keyword arguments of `@flow(...)` that record its runs."""
        return {
            "on_running": [self.on_running],
            "on_completion": [self.on_completion],
            "on_failure": [self.on_failure],
            "on_crashed": [self.on_crashed],
            "on_cancellation": [self.on_cancellation],
        }

    def close(self, timeout: float = CLOSE_S) -> bool:
        """Drain this process's spool (bounded by `timeout`) and close it. True if drained."""
        spool, self.spool = self.spool, None
        if spool is None or self._pid != os.getpid():
            return True
        return spool.close(timeout)

    def flush(self, timeout: float = CLOSE_S) -> bool:
        """Wait (at most `timeout`) until this process's spool has reached the store."""
        return self.spool is None or self.spool.flush(timeout)

    def recover(self, ledger: Ledger | None = None) -> ProbeReport:
        """What dead flow processes on this host left: their spools' lines imported
        (in order, rule I1), then the probe (rule O8): each epoch whose pid is gone gets
        its `process.exited`, and the sweep recovers its runs."""
        ledger = ledger if ledger is not None else self._open()
        own = [self.spool.name] if self.spool is not None and self._pid == os.getpid() else []
        spool_mod.reap(ledger, self.spool_dir, exclude=own)
        return ledger.probe()

    # ------------------------------------------------------------ the hooks
    def on_running(self, flow: Any, flow_run: Any, state: Any) -> None:
        """An attempt starts in this process. The first this process sees boots the
        run's slot's epoch here; the first attempt queues the run, a later one ends the
        attempt before it (`failed_resumable`, RETRY, when it ran in this process) and
        resumes."""
        spool = self._here()
        run, slot = run_id(flow_run), slot_of(flow_run)
        count = int(getattr(flow_run, "run_count", 1) or 1)
        at = self.clock.now()
        lines: list[Any] = []
        epoch = self._epochs.get(run)
        if epoch is None:
            epoch = self._epochs[run] = uuid.uuid4().hex
            lines.append(boot_event(self.host, self.clock, slot, epoch=epoch, actor="prefect-flow"))
        before = self._attempts.get(run)
        if count <= 1 and before is None:
            labels = {"prefect_flow_run_name": str(flow_run.name)}
            tags = [str(t) for t in (getattr(flow_run, "tags", None) or [])]
            if tags:
                labels["prefect_tags"] = ",".join(sorted(tags))
            parent = getattr(flow_run, "parent_task_run_id", None)
            if parent:
                labels["prefect_parent_task_run"] = str(parent)
            lines.append(RunQueued(at=at, run=run, workflow=str(flow.name), labels=labels, actor="prefect-flow"))
        else:
            if before is not None:
                lines.append(
                    RunFailed(
                        at=at,
                        run=run,
                        code=RETRY,
                        resumable=True,
                        error=f"prefect retry: run_count {count} after {before}",
                        epoch=epoch,
                        actor="prefect-flow",
                    )
                )
            lines.append(RunResumed(at=at, run=run, by="auto", actor="prefect-flow", reason=f"run_count={count}"))
        lines.append(RunStarted(at=at, run=run, epoch=epoch, process=slot, actor="prefect-flow"))
        self._attempts[run] = count
        spool.append(*lines)

    def _end(self, flow_run: Any, event: Any, reason: str) -> None:
        run, slot = run_id(flow_run), slot_of(flow_run)
        lines = [event]
        epoch = self._epochs.pop(run, None)
        self._attempts.pop(run, None)
        if epoch is not None:
            at = self.clock.now()
            lines += [
                ProcessStopping(at=at, process=slot, epoch=epoch, actor="prefect-flow", reason=reason),
                ProcessStopped(at=at, process=slot, epoch=epoch, actor="prefect-flow", reason=reason),
            ]
        self._here().append(*lines)

    def on_completion(self, flow: Any, flow_run: Any, state: Any) -> None:
        epoch = self._epochs.get(run_id(flow_run))
        event = RunFinished(at=self.clock.now(), run=run_id(flow_run), epoch=epoch, actor="prefect-flow")
        self._end(flow_run, event, "flow run completed")

    def on_failure(self, flow: Any, flow_run: Any, state: Any) -> None:
        """The final failure (Prefect calls it after the last retry): `failed` with the
        code of the exception's class."""
        exc = _exception(state)
        code = code_of(exc, self.codes) if exc is not None else ENGINE_ERROR
        run = run_id(flow_run)
        event = RunFailed(
            at=self.clock.now(),
            run=run,
            code=code,
            resumable=False,
            error=_error(state, exc),
            epoch=self._epochs.get(run),
            actor="prefect-flow",
        )
        self._end(flow_run, event, "flow run failed")

    def on_crashed(self, flow: Any, flow_run: Any, state: Any) -> None:
        """Prefect's Crashed: the flow process was interrupted outside the user's code
        (a signal, an interrupt): `failed`, PROCESS_EXITED. Then the spool is flushed,
        bounded by CLOSE_S: after a SIGTERM's crash hooks Prefect sends the signal again
        under its default handler (prefect/utilities/engine, `capture_sigterm`), so the
        process dies without running its exit handlers, and the crash would otherwise
        wait in its spool for the next `recover()` on the host."""
        run = run_id(flow_run)
        event = RunFailed(
            at=self.clock.now(),
            run=run,
            code=PROCESS_EXITED,
            resumable=False,
            error=_error(state, _exception(state)),
            epoch=self._epochs.get(run),
            actor="prefect-flow",
        )
        self._end(flow_run, event, "flow run crashed")
        if not self.flush(CLOSE_S):
            log.warning("epochledger: the crash of %s is not in the store yet; recover() imports it", run)

    def on_cancellation(self, flow: Any, flow_run: Any, state: Any) -> None:
        reason = str(getattr(state, "message", "") or "cancelled")[:_ERROR_CHARS]
        event = RunCancelled(at=self.clock.now(), run=run_id(flow_run), actor="prefect-flow", reason=reason)
        self._end(flow_run, event, "flow run cancelled")


def _rebuilt(store: str | None, spool_dir: str, codes: Mapping[str, str], fsync: Fsync, hold: float) -> PrefectAdapter:
    return PrefectAdapter(store, spool_dir, codes=codes, fsync=fsync, hold=hold)


def install(
    *,
    store: str | None = None,
    spool: str | None = None,
    codes: Mapping[str, str] | None = None,
    fsync: Fsync = "batch",
    hold: float = spool_mod.HOLD_S,
) -> PrefectAdapter:
    """An adapter recording into the ledger at `store` (default: $EPOCHLEDGER_STORE),
    through spools in the directory `spool` (default: $EPOCHLEDGER_SPOOL, else
    ./epochledger-spool; local to the host, shared by its flow processes). `codes`:
    exception class names -> failure codes, on top of CODES. `fsync` as for the Celery
    adapter ("always": each line synced before the hook returns). Pass
    `adapter.hooks()` to each `@flow` to record."""
    directory = spool or os.environ.get("EPOCHLEDGER_SPOOL") or "epochledger-spool"
    return PrefectAdapter(store, directory, codes=codes, fsync=fsync, hold=hold)


__all__ = ["CODES", "PrefectAdapter", "code_of", "install", "run_id", "slot_of"]
