"""The ledger facade: the one object the embedded API, the CLI and the importers call.

It composes the facade's pieces, each in a module of its own: the write path and
group commit (epochledger/writes.py: `Commands`, `Batch`; every write is a command
submitted to a batch, rules L1, L5), the state cache (epochledger/cache.py,
`StateCache`, rule W1), the epoch lookup (epochledger/epochs_lookup.py: a report's
epoch, rule F1, and the hosts' boots, rule O10), and the reads and reports
(epochledger/reports.py, `Reports`). Time comes from the injected clock (rule L8).
The names those modules define are re-exported here (`epochledger.app.Batch`,
`stream_of`, `_fold_stream`, ...), where their callers import them.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, overload

from epochledger.cache import CACHE_STREAMS, StateCache, _holds
from epochledger.epochs_lookup import EpochLookup, HostStates
from epochledger.ledger import process as process_stream_mod
from epochledger.ledger import run as run_mod
from epochledger.ledger import settings as settings_mod
from epochledger.ledger.clock import Clock, boot_instant, checked_clock
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import ConflictError, InvalidInput, LedgerError, RunNotFound, StaleEpoch
from epochledger.ledger.events import (
    IdempotencyStream,
    LedgerDefaultSlot,
    LedgerStream,
    Name,
    PassStream,
    ProcessBooted,
    ProcessStream,
    Recorded,
    RoleStream,
    RunFenced,
    RunStream,
    StreamEvent,
    TokenIssued,
    TokenRevoked,
    TokenStream,
    ledger_stream,
    process_stream,
    role_stream,
    run_stream,
    token_stream,
)
from epochledger.ledger.process import EpochState, HostState
from epochledger.ledger.store import Poison, Store, open_store
from epochledger.projections import orphans as orphans_mod
from epochledger.projections.orphans import MARGIN
from epochledger.reports import Reports
from epochledger.writes import (
    _RUN_TYPES,
    Batch,
    Commands,
    EpochArg,
    Savepoint,
    _at_version,
    _epoch_id,
    _fold_stream,
    _labels,
    stream_of,
)

# Imported where used, not here (rule W2: `show RUN` loads none of them): the sweep
# (with logging), the probe and slot retirement, the host port (socket), the role and
# token deciders (hmac), secrets. Their names stay for the type checker below.
if TYPE_CHECKING:
    from epochledger.ledger import role as role_mod
    from epochledger.ledger import tokens as tokens_mod
    from epochledger.ledger.host import Host
    from epochledger.ledger.idempotency import KeptOutcome
    from epochledger.ledger.passes import PassState
    from epochledger.ledger.streams import StreamState
    from epochledger.probe import ProbeReport
    from epochledger.sweep import SweepReport
    from epochledger.tick import TickOutcome, TickReport

__all__ = [  # the facade's own names, then what it re-exports from its pieces
    "ORPHAN_MARGIN_S",
    "Ledger",
    "ProcessState",
    "RunState",
    "boot_event",
    "open_ledger",
    "CACHE_STREAMS",
    "StateCache",
    "EpochLookup",
    "HostStates",
    "Batch",
    "Commands",
    "EpochArg",
    "Savepoint",
    "stream_of",
    "_RUN_TYPES",
    "_at_version",
    "_epoch_id",
    "_fold_stream",
    "_holds",
    "_labels",
]

RunState = run_mod.RunState
ORPHAN_MARGIN_S = MARGIN.total_seconds()  # the O3 margin, defined in projections/orphans.py
ProcessState = process_stream_mod.ProcessState
BOOT_ATTEMPTS = 5  # a boot is always legal: one that loses a race to another boot is decided again
ROLE_ATTEMPTS = 5  # a grant that loses the role stream's race is decided again: re-read, then refused (T7)


# Fork (docs/adapters.md, "Fork"): a Ledger used on both sides of os.fork() (a prefork
# pool's children inherit the parent's objects) reopens its store in the child, on the
# child's first use of it (the hook itself does no I/O: a store that is down at the
# fork fails the child's first call, as it would any call). The parent's connections
# are kept referenced and never closed in the child: closing an inherited SQLite
# connection may checkpoint and delete the WAL the parent still uses, and closing an
# inherited PostgreSQL connection sends the server a Terminate on the parent's own
# socket. Held here so that garbage collection cannot close them either.
_LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()
_INHERITED: list[Store] = []
_FORK_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    global _FORK_LOCK
    _FORK_LOCK = threading.RLock()  # another thread may have held it at the fork
    for ledger in list(_LEDGERS):
        ledger._forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


class Ledger(Commands, Reports):
    """The embedded API. Open one with `ledger.open_ledger(url, clock=...)`. A Ledger
    survives os.fork(): the child reopens its store (docs/adapters.md, "Fork")."""

    def __init__(self, store: Store, clock: Clock | None = None, host: Host | None = None):
        self._opened = store  # the store as opened; `_store` is what a write or read uses
        self._forked = False  # set in a forked child: the store is the parent's (reopened on first use)
        self.clock = checked_clock(clock)  # every reading checked (ledger/clock.py)
        self._host = host  # the host-facts port (ledger/host.py); SystemHost() on first use (`host`)
        self._host_states = HostStates()  # every host's boots (host_state; epochledger/epochs_lookup.py)
        self._cache = StateCache()  # streams' states between writes (rule W1)
        self._stopping: dict[str, threading.Event] = {}  # epochs this process has begun to stop
        self._stopping_lock = threading.Lock()
        _LEDGERS.add(self)

    @property
    def _store(self) -> Store:
        """The store this process writes through; in a forked child, a store of its own
        at the same URL, opened on first use (see _INHERITED). Private to the facade
        and the modules behind it: a skin (the CLI, the service, the console, an
        adapter) makes facade calls, never store calls (rule H1)."""
        if self._forked:
            self._reopen_in_child()
        return self._opened

    def _reopen_in_child(self) -> None:
        """A store of the child's own, and fresh in-process state (a lock another
        thread of the parent held at the fork would never be released here; what the
        parent had cached is read again)."""
        with _FORK_LOCK:
            if not self._forked:
                return
            inherited = self._opened
            self._opened = open_store(inherited.url, create=False)
            _INHERITED.append(inherited)  # never closed in the child (see _INHERITED)
            self._host_states = HostStates()
            self._cache = StateCache()
            self._stopping = {}
            self._stopping_lock = threading.Lock()
            self._forked = False

    @property
    def host(self) -> Host:
        """The host-facts port: the one given, else this machine's (SystemHost), made
        on first use so a read never imports it (socket, rule W2)."""
        if self._host is None:
            from epochledger.ledger.host import SystemHost

            self._host = SystemHost()
        return self._host

    @host.setter
    def host(self, host: Host) -> None:
        self._host = host

    @property
    def url(self) -> str:
        return self._store.url

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- writes
    def batch(self) -> Batch:
        return Batch(self)

    @overload
    def read_state(self, stream: RunStream) -> RunState | None: ...
    @overload
    def read_state(self, stream: ProcessStream) -> ProcessState | None: ...
    @overload
    def read_state(self, stream: LedgerStream) -> settings_mod.Settings | None: ...
    @overload
    def read_state(self, stream: RoleStream) -> role_mod.RoleState | None: ...
    @overload
    def read_state(self, stream: PassStream) -> PassState | None: ...
    @overload
    def read_state(self, stream: IdempotencyStream) -> KeptOutcome | None: ...
    @overload
    def read_state(self, stream: TokenStream) -> tokens_mod.TokenRegistry | None: ...
    @overload
    def read_state(self, stream: str) -> StreamState | None: ...

    def read_state(self, stream: str) -> StreamState | None:
        """The stream's state as of the log now, for a write to decide against (rule W1):
        the cached state plus the events after its version, or a fold from zero when
        nothing is cached. The read starts at the cached version itself, so a cached
        state whose version the stream does not hold at that event (a foreign or
        forged entry) is seen and folded again from zero."""
        return self.read_states([stream])[stream]

    @overload
    def read_states(self, streams: Sequence[RunStream]) -> Mapping[str, RunState | None]: ...
    @overload
    def read_states(self, streams: Sequence[ProcessStream]) -> Mapping[str, ProcessState | None]: ...
    @overload
    def read_states(self, streams: Sequence[str]) -> Mapping[str, StreamState | None]: ...

    def read_states(self, streams: Sequence[str]) -> Mapping[str, StreamState | None]:
        """read_state for several streams (typed by their kind where all are of one), in one query per `Store.streams_per_read`
        (Batch.prefetch). A stream whose cached state is fresh (StateCache.fresh:
        nothing was appended to the log since that state was its latest, by the store's
        log token) is not read at all; the append's version check stays exact either
        way (Store.append)."""
        # The token only where a mark could be used or made on something cached (one
        # PRAGMA, ~4 us): a new run's first write reads anyway, and its state is
        # marked by its commit (StateCache.committed).
        # Nothing cached (a group commit of new runs): no token, no lookups; an entry put
        # by another thread meanwhile is only not used (the stream is read whole).
        held = self._cache.holds_any(streams)
        token = self._store.log_token() if held else None
        out: dict[str, StreamState | None] = self._cache.fresh(streams, token)
        if out:
            if len(out) == len(streams):
                return out
            streams = [s for s in streams if s not in out]
        cached = self._cache.get_many(streams) if held else {}
        since = {s: state.version - 1 for s, state in cached.items() if state is not None and state.version > 0}
        if len(streams) == 1:
            only = streams[0]
            read = {only: self._store.read_stream(only, since.get(only, 0))}
        else:
            read = self._store.read_streams(streams, since)
        got: list[tuple[str, StreamState | None]] = []
        again = []
        for stream, history in read.items():
            if stream in since:
                state = cached[stream]
                if state is None or not history or not _holds(state, history[0]):
                    again.append(stream)  # not the stream's state at that version: fold from zero
                    continue
                state = _fold_stream(stream, history[1:], state)
            elif history:
                state = _fold_stream(stream, history)
            else:
                out[stream] = None  # no such stream (yet): nothing to cache
                continue
            out[stream] = state
            got.append((stream, state))
        for stream in again:
            self._cache.drop(stream)
            out[stream] = state = _fold_stream(stream, self._store.read_stream(stream))
            got.append((stream, state))
        # Read after `token` was taken: each is its stream's latest at that token.
        self._cache.put_many(got, fresh_at=token)
        return out

    def _submit(self, command: StreamEvent) -> Any:
        with self.batch() as b:
            return b.submit(command)

    def _slot_of(self, epoch: EpochArg) -> tuple[str, str]:
        return self.batch()._slot_of(epoch)

    def epoch(self, epoch: EpochArg) -> EpochState:
        """An epoch's state (booted, superseded, stopped, ...), found wherever it booted.
        UnknownEpoch if no slot booted it."""
        process, epoch_id = self._slot_of(epoch)
        return self.batch().find_epoch(epoch_id, process)

    def boot(
        self,
        process: str,
        *,
        epoch: str | None = None,
        host: str | None = None,
        pid: int | None = None,
        actor: str | None = None,
        host_boot: str | None = None,
        pid_start: int | None = None,
        machine: str | None = None,
        booted_at: datetime | None = None,
    ) -> EpochState:
        """Start a new epoch of `process`, superseding its previous epoch (rule O1), and
        return its state. The boot instant is now - monotonic uptime, from the clock
        port, or `booted_at`: the instant a process that runs elsewhere says it started,
        by its own clock (a foreign scheduler booting over HTTP, rule H2). The returned
        state is what every later report names (`epoch=`).

        Liveness facts (rules O7, O10), from the host port (ledger/host.py) unless
        given: the host's name, machine id and boot id, the pid and its start time. A
        boot for another host (`host=` naming another machine) records only what it is
        given (without `machine=`, no later boot can prove that host rebooted); a boot
        for another pid on this host (a supervisor booting its worker's slot) reads that
        pid's start time."""
        event = boot_event(
            self.host,
            self.clock,
            process,
            epoch=epoch,
            host=host,
            pid=pid,
            actor=actor,
            host_boot=host_boot,
            pid_start=pid_start,
            machine=machine,
            booted_at=booted_at,
        )
        for attempt in range(BOOT_ATTEMPTS):  # a boot is always legal: a lost race just retries
            try:
                state = self.submit(event).epoch(event.epoch)
                assert state is not None
                return state
            except ConflictError:
                if attempt == BOOT_ATTEMPTS - 1:
                    raise
        raise AssertionError  # pragma: no cover

    def boot_event(
        self,
        process: str,
        *,
        epoch: str | None = None,
        host: str | None = None,
        pid: int | None = None,
        actor: str | None = None,
        host_boot: str | None = None,
        pid_start: int | None = None,
        machine: str | None = None,
        booted_at: datetime | None = None,
    ) -> ProcessBooted:
        """The `process.booted` event `boot()` appends, stamped now and appending
        nothing (`boot_event` below, with this ledger's host port and clock)."""
        return boot_event(
            self.host,
            self.clock,
            process,
            epoch=epoch,
            host=host,
            pid=pid,
            actor=actor,
            host_boot=host_boot,
            pid_start=pid_start,
            machine=machine,
            booted_at=booted_at,
        )

    # ----------------------------------------------------- epochs, sweep, fencing
    def begin_stop(self, epoch: EpochArg, *, actor: str | None = None, reason: str | None = None) -> ProcessState:
        """Record `process.stopping`. The local flag is raised first, so a sweep of this
        epoch starts no further attempt even if the store cannot take the event (O5)."""
        epoch_id = _epoch_id(epoch)
        self._stop_signal(check_value(epoch_id, Name, "epoch")).set()
        return super().begin_stop(epoch, actor=actor, reason=reason)

    def stop(self, epoch: EpochArg, *, actor: str | None = None, reason: str | None = None) -> ProcessState:
        epoch_id = _epoch_id(epoch)
        self._stop_signal(check_value(epoch_id, Name, "epoch")).set()
        return super().stop(epoch, actor=actor, reason=reason)

    def _stop_signal(self, epoch: str) -> threading.Event:
        with self._stopping_lock:
            return self._stopping.setdefault(epoch, threading.Event())

    def is_stopping(self, epoch: str) -> bool:
        """Has this process begun to stop `epoch` (begin_stop/stop called here)?"""
        return self._stop_signal(epoch).is_set()

    def wait_for_stop(self, epoch: str, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when `epoch` begins to stop."""
        return self._stop_signal(epoch).wait(seconds)

    def sweep(
        self,
        epoch: EpochArg,
        *,
        margin: float | timedelta = ORPHAN_MARGIN_S,
        attempts: int | None = None,
        gaps: Sequence[float] | None = None,
        sleep: Callable[[float], object] | None = None,
        require_live: bool = False,
    ) -> SweepReport:
        """Recover every orphan visible to `epoch` (its state, as boot() returns it, or its
        id, judged with its recorded boot instant): rule O5, epochledger/sweep.py.
        `attempts` and `gaps` default to that module's ATTEMPTS and GAPS, rule O5's one
        home, read when called (no copy of the numbers here). `require_live`: refuse an
        epoch that is no longer live (EpochNotLive) instead of reporting that it
        recovered nothing."""
        from epochledger import sweep as sweep_mod

        return sweep_mod.sweep(
            self,
            epoch,
            margin=margin,
            attempts=sweep_mod.ATTEMPTS if attempts is None else attempts,
            gaps=sweep_mod.GAPS if gaps is None else gaps,
            sleep=sleep,
            require_live=require_live,
        )

    def startup(
        self,
        process: str,
        *,
        margin: float | timedelta = ORPHAN_MARGIN_S,
        epoch: str | None = None,
        host: str | None = None,
        pid: int | None = None,
        actor: str | None = None,
        new_slot: bool = True,
        booted_at: datetime | None = None,
        host_boot: str | None = None,
        pid_start: int | None = None,
        machine: str | None = None,
    ) -> tuple[EpochState, SweepReport]:
        """The documented way to start a scheduler process: `boot()` a new epoch, then
        `sweep()` with it, before serving anything (never on first query; rule O5).
        Between the two, on this host, the probe's first half (epochledger/probe.py,
        `exits_at_startup`): the exits of this host's earlier epochs that nobody
        reported (a whole worker SIGKILLed with its pool children, each its own slot,
        rule O8) are recorded, so this one sweep recovers what they left (rule O7), with
        no second call to remember. After the sweep, slots whose last epoch is over and
        that have no run left running retire (rule O8, epochledger/retire.py). Returns
        the epoch's state and the sweep report. A bad margin is refused before the boot
        is appended; so is a slot the ledger has never seen with `new_slot=False`
        (UnknownSlot: a hand sweep of a mistyped name). `booted_at`, `host_boot`,
        `pid_start`, `machine`: as for `boot()` (a process booting from elsewhere)."""
        from epochledger import sweep as sweep_mod
        from epochledger.probe import exits_at_startup
        from epochledger.retire import retire

        orphans_mod.as_margin(margin)
        sweep_mod.check_slot(self, check_value(process, Name, "process"), new_slot=new_slot)
        booted = self.boot(
            process,
            epoch=epoch,
            host=host,
            pid=pid,
            actor=actor,
            booted_at=booted_at,
            host_boot=host_boot,
            pid_start=pid_start,
            machine=machine,
        )
        if host is None or host == self.host.name():  # another host's pids are not ours to judge
            exits_at_startup(self)
        report = self.sweep(booted, margin=margin)
        if report.outcome == "swept":
            retire(self, booted)  # slots left with nothing live retire (rule O8, epochledger/retire.py)
        return booted, report

    def probe(self, *, epoch: EpochArg | None = None, sweep: bool = True) -> ProbeReport:
        """Check every live epoch recorded for this host's current boot against the
        kernel (pid gone, a zombie, or its start time differs: `process.exited` by
        `probe@<host>` with the evidence), then sweep: with `epoch` (the caller's own
        live epoch) or an epoch of slot `probe@<host>` booted for it (rules O7, O8;
        epochledger/probe.py)."""
        from epochledger.probe import probe

        return probe(self, epoch=epoch, sweep=sweep)

    def tick_report(
        self,
        epoch: EpochArg,
        outcomes: Sequence[TickOutcome],
        *,
        tick: str | None = None,
        tick_failure_deadline: timedelta | float | None = None,
        actor: str = "tick",
    ) -> TickReport:
        """Record a tick a scheduler ran itself (a foreign tick loop reporting over HTTP):
        each run's outcome, judged by the tick driver's rules T1-T3 (epochledger/tick.py,
        `report_tick`; the deadline defaults to its DEFAULT_TICK_FAILURE_DEADLINE), on
        behalf of `epoch`. Returns the tick's report, whose `dead_letters` name the runs
        it dead-lettered. A tick that could not be recorded raises its error: StaleEpoch
        (the epoch is no longer live; what it reported is kept as run.fenced evidence),
        RunNotFound (a reported run is unknown: nothing appended), a StoreError (the store
        failed under the writes: send the same report with the same `tick` again, which
        appends nothing that already landed)."""
        from epochledger import tick as tick_mod

        deadline = tick_mod.DEFAULT_TICK_FAILURE_DEADLINE if tick_failure_deadline is None else tick_failure_deadline
        report = tick_mod.report_tick(self, epoch, outcomes, tick_id=tick, tick_failure_deadline=deadline, actor=actor)
        if report.fatal is not None and isinstance(report.fatal.exception, LedgerError):
            raise report.fatal.exception
        return report

    def keep_fenced(self, refusal: StaleEpoch) -> None:
        """Append the run.fenced evidence of a refused stale report (its own
        transaction; re-decided on a conflict, since run.fenced is legal from any status)."""
        evidence = refusal.evidence
        if evidence is None:
            return
        for attempt in range(5):
            try:
                assert isinstance(evidence, RunFenced)
                with self.batch() as b:
                    b.submit(evidence)
                refusal.kept_at = b.recorded[-1].position if b.recorded else None
                return
            except ConflictError:
                if attempt == 4:
                    raise

    def orphan_view(
        self, *, candidates_only: bool = False, slots: Sequence[str] = (), retired: bool = False
    ) -> orphans_mod.View:
        """What the orphan rule reads (projections/orphans.py): every slot's epochs and
        every run's state, from the materialized `epochs` and `runs` views after
        catching both up to the same head. Like `runs`, it costs the events since the
        last catch-up, and an event that no longer decodes is parked by the views (T4)
        instead of stopping every boot's sweep. Facts it reads only ever accrue (an
        epoch once superseded or stopped stays so), and a sweep's recoveries still
        expect each run's version, so a concurrent writer is caught at append.

        candidates_only: `runs` holds only the runs the orphan rule (its default
        policy) could judge orphaned, selected by the views' columns: a running run
        not owned by its slot's live current epoch. What the sweep reads: its cost is
        the candidates, not the fleet (docs/benchmarks.md, "Fleet size"). A
        counterfactual policy reads every run.

        Retired slots (rule O8: their last epoch is over and no run of theirs was left
        running when they retired) are left out, selected by the epochs view's
        `retired` column, so the view follows the live fleet, not every worker ever
        booted; no verdict needs them (orphans.retirable). `slots`: read these too,
        retired or not (the sweeping epoch's own slot); `retired=True`: read them all."""
        from epochledger.projections import engine, epochs, hosts, orphans, runs

        head = self._store.max_position()
        settings = self.settings()  # the ledger's own stream (rule O9): a few events, read whole
        if self._store.read_only:  # a backup copy: folded in memory, nothing written
            by_run, _ = engine.read_view(self._store, runs)
            by_process, _ = engine.read_view(self._store, epochs)
            by_host, _ = engine.read_view(self._store, hosts)
            if not retired:
                by_process = {k: p for k, p in by_process.items() if not p.retired or k in slots}
            return orphans.View(
                processes=by_process, runs=by_run, hosts=by_host, position=self._store.max_position(), settings=settings
            )
        for view in (runs, epochs, hosts):
            engine.catch_up(self._store, view, upto=head)
        by_process, _ = engine.read_view(
            self._store, epochs, catch_up_first=False, where=() if retired else [("retired", 0)]
        )
        if not retired and (wanted := tuple(k for k in dict.fromkeys(slots) if k not in by_process)):
            by_process.update(engine.read_view(self._store, epochs, catch_up_first=False, where=[("k", wanted)])[0])
        by_host, _ = engine.read_view(self._store, hosts, catch_up_first=False)
        found = orphans.View(processes=by_process, runs={}, hosts=by_host, position=head, settings=settings)
        if candidates_only:
            # The epochs view's `live` column knows the slot's own facts; a host reboot
            # is a fact of the host (end_of with the hosts view): such slots' runs are
            # candidates too, whoever owns them.
            rebooted = [
                p.process
                for p in by_process.values()
                if (cur := p.current) is not None and cur.live and found.end_of(cur) is not None
            ]
            found.runs = engine.read_orphan_candidates(self._store, also_slots=rebooted)
        else:
            found.runs, _ = engine.read_view(self._store, runs, catch_up_first=False)
        return found

    def settings(self) -> settings_mod.Settings | None:
        """The ledger's settings (ledger/settings.py), folded from its own stream; None
        if none was ever recorded."""
        found = _fold_stream(ledger_stream(), self._store.read_stream(ledger_stream()))
        assert found is None or type(found) is settings_mod.Settings  # the ledger stream's fold
        return found

    def set_default_slot(
        self, slot: str | None, *, actor: str | None = None, reason: str | None = None
    ) -> settings_mod.Settings:
        """Name the slot whose boots judge the running runs recorded with neither an
        epoch nor a process, by the O3 time fallback (rule O9); None: no slot does
        (they are listed as runs no slot can judge). Recorded as `ledger.default_slot`;
        setting the value it already has appends nothing."""
        found = self.submit(LedgerDefaultSlot(at=self.clock.now(), slot=slot, actor=actor, reason=reason))
        return found if found is not None else settings_mod.Settings()  # None cleared on a ledger that never set it

    def acquire_role(
        self, role: str, epoch: EpochArg, *, actor: str | None = None, reason: str | None = None
    ) -> role_mod.RoleState:
        """Take the exclusive role `role` for `epoch` (its state or its id), or keep it
        (rule T7; ledger/role.py). Returns the grant, whose `token` (it only grows) is
        for the systems the scheduler drives. Held by this epoch already: appends
        nothing. Held by another live epoch: RoleHeld. `epoch` not live: StaleEpoch.
        A racing acquirer's grant that landed first is re-read, then refused (up to
        ROLE_ATTEMPTS decisions; the service's route decides as often)."""
        for attempt in range(ROLE_ATTEMPTS):
            try:
                return super().acquire_role(role, epoch, actor=actor, reason=reason)
            except ConflictError:
                if attempt == ROLE_ATTEMPTS - 1:
                    raise
        raise AssertionError  # pragma: no cover

    def role(self, role: str) -> role_mod.RoleState | None:
        """Who holds `role` (its last grant, rule T7), or None if it was never granted.
        The holder may since have ended: `acquire_role` is what judges that."""
        from epochledger.ledger import role as role_mod

        role = check_value(role, Name, "role")
        found = _fold_stream(role_stream(role), self._store.read_stream(role_stream(role)))
        assert found is None or type(found) is role_mod.RoleState  # a role stream's fold
        return found

    # ------------------------------------------------------------- tokens (rule H4)
    def issue_token(
        self,
        role: str,
        *,
        name: str | None = None,
        slots: Sequence[str] = (),
        actor: str | None = None,
        reason: str | None = None,
    ) -> tokens_mod.IssuedToken:
        """Issue a bearer token of `role` (ledger/access.py), for the HTTP service (rule
        H4): 256 random bits, returned once in `IssuedToken.secret` and stored only as
        its SHA-256 digest (`token.issued`; ledger/tokens.py says why that hash is
        enough). `slots`: a writer token's process slots (names or fnmatch patterns)."""
        if isinstance(slots, str):  # a lone slot name would be read as its characters
            raise InvalidInput("expected a list of slot names or patterns, got one string", where="slots")
        import secrets

        from epochledger.ledger import tokens as tokens_mod

        token_id = secrets.token_hex(8)
        secret = f"{tokens_mod.PREFIX}.{token_id}.{secrets.token_urlsafe(32)}"
        command = TokenIssued(
            at=self.clock.now(),
            token=token_id,
            role=role,
            digest=tokens_mod.digest(secret),
            name=name,
            slots=list(slots),
            actor=actor,
            reason=reason,
        )
        for attempt in range(5):  # the one token stream: a rival issue or revoke landed first
            try:
                registry = self.submit(command)
                return tokens_mod.IssuedToken(secret=secret, token=registry.tokens[token_id])
            except ConflictError:
                if attempt == 4:
                    raise
        raise AssertionError  # pragma: no cover

    def revoke_token(self, token: str, *, actor: str | None = None, reason: str | None = None) -> tokens_mod.Token:
        """Revoke token `token` (its id, as `tokens()` lists it): refused from the next
        request on, by every server on this store (rule H4). Revoked already: appends
        nothing. Never issued: TokenNotFound."""
        command = TokenRevoked(at=self.clock.now(), token=token, actor=actor, reason=reason)
        for attempt in range(5):
            try:
                return self.submit(command).tokens[command.token]
            except ConflictError:
                if attempt == 4:
                    raise
        raise AssertionError  # pragma: no cover

    def token_registry(self) -> tokens_mod.TokenRegistry:
        """Every token ever issued, as of the log now: the cached registry plus the token
        events after its version (Ledger.read_state; on SQLite no read at all while the
        log is unchanged). What the service checks each request against (rule H4)."""
        from epochledger.ledger import tokens as tokens_mod

        found = self.read_state(token_stream())
        return found if found is not None else tokens_mod.TokenRegistry()

    def tokens(self) -> list[tokens_mod.Token]:
        """Every token ever issued, revoked ones included, oldest first: never a token's
        text or digest."""
        return sorted(self.token_registry().tokens.values(), key=lambda t: (t.issued_at, t.id))

    def authenticate(self, secret: str) -> tokens_mod.Token | None:
        """The live token `secret` is, or None (unknown, revoked, or not a token)."""
        from epochledger.ledger import tokens as tokens_mod

        return tokens_mod.matches(self.token_registry(), secret)

    def unjudged(self) -> list[tuple[RunState, orphans_mod.Unjudged]]:
        """Every running run no slot can judge (rule O9: no owner epoch, no process, and
        no default slot), with why; the sweep reports list them too. Reads only."""
        view = self.orphan_view(candidates_only=True)
        return [(view.runs[u.run], u) for u in orphans_mod.unjudged(view)]

    def epochs(self, *, retired: bool = False) -> list[process_stream_mod.EpochState]:
        """Every epoch of every process slot, live or not; of retired slots (rule O8)
        only with `retired=True`."""
        from epochledger.projections import orphans

        # Epochs need no runs: the candidates are the fewest the view reads (not the fleet).
        return orphans.epochs(self.orphan_view(candidates_only=True, retired=retired))

    def liveness(self, *, retired: bool = False) -> list[tuple[EpochState, tuple[str, str] | None]]:
        """Every epoch of every process slot with why it is no longer live, as (rule,
        sentence), or None while it is live (ledger.process.end_of with its host's
        facts, rule O7), in one read of the views; of retired slots (rule O8) only with
        `retired=True` (none of their epochs is live)."""
        from epochledger.projections import orphans

        # No runs needed: the candidates are the fewest the view reads, so a startup's
        # probe (epochledger/probe.py) costs the live slots, never the whole runs view.
        view = self.orphan_view(candidates_only=True, retired=retired)
        return [(e, view.end_of(e)) for e in orphans.epochs(view)]

    def orphans(self, margin: float = ORPHAN_MARGIN_S) -> list[tuple[RunState, orphans_mod.Verdict]]:
        """Every running run the ledger's events say is an orphan, with its verdict
        (clock-free; O3 judged against each process's current epoch). Reads only. The
        running runs no slot can judge are `unjudged()` (rule O9). Reads the orphan
        candidates, as the sweep does: every other run is owned by its slot's live
        current epoch, which the orphan rule never orphans, so the verdicts are the
        fleet's and the read costs the candidates, not the fleet."""
        view = self.orphan_view(candidates_only=True)
        return [(view.runs[v.run], v) for v in orphans_mod.verdicts(view, margin=margin)]

    # -------------------------------------------------------------- reads
    def get_run(self, run: str) -> RunState:
        """A run's state, folded from its stream as the write side folds it (an event
        that does not decode is skipped, as the views park it)."""
        run = check_value(run, Name, "run")
        state = _fold_stream(run_stream(run), self._store.read_stream(run_stream(run)))
        if state is None:
            raise RunNotFound(run)
        assert type(state) is RunState  # a run stream's fold
        if state.deleted:
            raise RunNotFound(run, deleted=True)
        return state

    def history(self, run: str) -> list[Recorded | Poison]:
        """Every event of a run in order; an event that does not decode is a Poison in
        its place (position, version, tag and error), so a history always shows."""
        run = check_value(run, Name, "run")
        history = self._store.read_stream(run_stream(run))
        if not history:
            raise RunNotFound(run)
        return history

    def process(self, process: str) -> ProcessState | None:
        process = check_value(process, Name, "process")
        found = _fold_stream(process_stream(process), self._store.read_stream(process_stream(process)))
        assert found is None or type(found) is ProcessState  # a slot stream's fold
        return found

    def host_state(self, machine: str) -> HostState | None:
        """The boots of the host with this machine id across every slot, as of the log's
        head: which of its host boot ids are over (rules O7, O10; projections/hosts.py).
        The fence asks it for every report whose epoch recorded a machine id and a host
        boot id, so it is kept (HostStates, epochledger/epochs_lookup.py) and brought
        forward by the boots recorded since it was last asked (one read of the log's
        tail, which decodes only process.booted rows), never by catching the hosts view
        up (a write) on every report. Folding a boot twice changes nothing (evolve_host)."""
        return self._host_states.get(self._store, machine)

    def epoch_slots(self, epoch: str) -> list[str]:
        """The slots that booted this epoch id (normally one), from the epoch index
        view, caught up first (projections/epoch_index.py)."""
        from epochledger.projections import engine, epoch_index

        found, _ = engine.read_view(self._store, epoch_index, key=epoch)
        return list(found.get(epoch, []))

    def events(self, after: int = 0, upto: int | None = None) -> Iterator[Recorded]:
        return self._store.read_all(after, upto)

    def runs(self, where: Callable[[RunState], bool] | None = None) -> list[RunState]:
        """Every live (not deleted) run, sorted by run id, from the materialized runs
        view after catching it up (projections/engine.py): the cost is the events since
        the last catch-up, not the whole log, and an event that no longer decodes is
        parked there instead of failing every caller (rule T4; the tick driver lists
        its active runs here)."""
        from epochledger.projections import engine

        return engine.read_runs(self._store, where)[0]


def boot_event(
    facts: Host,
    clock: Clock,
    process: str,
    *,
    epoch: str | None = None,
    host: str | None = None,
    pid: int | None = None,
    actor: str | None = None,
    host_boot: str | None = None,
    pid_start: int | None = None,
    machine: str | None = None,
    booted_at: datetime | None = None,
) -> ProcessBooted:
    """The `process.booted` event `Ledger.boot()` appends, with the same facts (from
    the host port `facts` and the clock), stamped now, needing no store: for a writer
    that records it later (an adapter's spool, epochledger/spool.py), so the boot
    instant and the pid's start time are those of the moment the process booted, not
    of the replay, and a process can boot while its store is unreachable."""
    here = facts.name()
    on_this_host = host is None or host == here
    if pid is None:
        pid = facts.pid()
    if on_this_host and host_boot is None:
        host_boot = facts.boot_id()
    if on_this_host and machine is None:
        machine = facts.machine_id()
    if on_this_host and pid_start is None and type(pid) is int:  # a bad pid is refused by checked()
        try:
            found = facts.process(pid)
        except OSError:
            found = None  # no /proc: no start time to record
        pid_start = found.start if found is not None else None
    event = ProcessBooted(
        at=clock.now(),
        process=process,
        epoch=epoch or uuid.uuid4().hex,
        booted_at=booted_at if booted_at is not None else boot_instant(clock),
        host=host if host is not None else here,
        pid=pid,
        actor=actor,
        host_boot=host_boot,
        pid_start=pid_start,
        machine=machine,
    )
    return event


def open_ledger(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    create: bool = True,
    init: bool = False,
    host: Host | None = None,
) -> Ledger:
    """Open the ledger at `url` (default: $EPOCHLEDGER_STORE, then ./epochledger.db;
    ledger/store/url.py). create=True (the embedded default: zero set-up) creates a
    store that does not exist; create=False refuses it, naming it and `epochledger
    init`, and writes nothing. init=True is the owner's create-or-upgrade (`epochledger
    init`): the log's tables, the projection engine's tracking and parked tables, and
    every view's table, built and caught up (projections/engine.py, `init_views`).
    `host` is the host-facts port (ledger/host.py; default: this host, from /proc)."""
    clock = checked_clock(clock)  # a clock that cannot work is refused before the store opens
    store = open_store(url, create=create, init=init)
    if init:
        from epochledger.projections import engine

        try:
            engine.init_views(store)  # every view's table: a read never runs DDL (R3)
        except BaseException:
            store.close()
            raise
    return Ledger(store, clock, host)
