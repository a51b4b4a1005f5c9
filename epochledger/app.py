"""The ledger service: the one place that does I/O for the write side.

Every write, from the Python API, the CLI or an NDJSON import, is a command submitted
to a `Batch`: the stream's events are read and folded, `decide` (ledger.run /
ledger.process) returns the events, and the batch appends all of its streams in one
transaction (group commit), all or nothing (rules L1, L5). A single API call is a
batch of one. Time comes from the injected clock (rule L8).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, overload

import msgspec

from epochledger import sweep as sweep_mod
from epochledger.probe import ProbeReport, exits_at_startup, probe
from epochledger.reports import Reports
from epochledger.retire import retire
from epochledger.sweep import SweepReport
from ledger import passes as passes_mod
from ledger import process as process_stream_mod
from ledger import role as role_mod
from ledger import run as run_mod
from ledger import settings as settings_mod
from ledger.clock import Clock, boot_instant, checked_clock
from ledger.codec import check_value, checked
from ledger.errors import (
    CommitUnknown,
    ConflictError,
    IllegalTransition,
    InvalidInput,
    RunNotFound,
    StaleEpoch,
    UnknownEpoch,
)
from ledger.events import (
    RUN_EVENT_TYPES,
    Cause,
    LedgerDefaultSlot,
    LedgerEventBase,
    Name,
    PassEvent,
    PassEventBase,
    ProcessBooted,
    ProcessEventBase,
    ProcessExited,
    ProcessStopped,
    ProcessStopping,
    Recorded,
    RoleEventBase,
    RoleGranted,
    RunCancelled,
    RunCheckpointed,
    RunCorrected,
    RunDeleted,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunFinished,
    RunPaused,
    RunQueued,
    RunResumed,
    RunRewound,
    RunStarted,
    Status,
    StreamEvent,
    ledger_stream,
    pass_stream,
    process_stream,
    role_stream,
    run_stream,
    tag_of,
)
from ledger.host import Host, SystemHost
from ledger.process import EpochRef, EpochState, HostState
from ledger.store import Append, Poison, Store, open_store
from projections import orphans as orphans_mod
from projections.orphans import MARGIN

RunState = run_mod.RunState
ORPHAN_MARGIN_S = MARGIN.total_seconds()  # the O3 margin, defined in projections/orphans.py
ProcessState = process_stream_mod.ProcessState


_RUN_TYPES = frozenset(RUN_EVENT_TYPES)  # a set lookup first: isinstance on msgspec classes costs ~75 ns a class


def stream_of(event: StreamEvent) -> str:
    if isinstance(event, RunEventBase):
        return run_stream(event.run)
    if isinstance(event, LedgerEventBase):
        return ledger_stream()
    if isinstance(event, RoleEventBase):
        return role_stream(event.role)
    if isinstance(event, PassEventBase):
        return pass_stream(event.name)
    assert isinstance(event, ProcessEventBase)
    return process_stream(event.process)


def _fold_stream(stream: str, history: list[Recorded | Poison], state: Any = None) -> Any:
    """A stream's state by the fold of its kind (run or process slot), as the views fold
    it: an event that does not decode, or that its fold cannot apply, is skipped (the
    views park it, rule T4), so one bad row never makes a run or a slot unwritable.
    The state's version is the stream's, bad rows included: the next append takes the
    version after them. `state`: the stream's state before `history` (a cached state
    and the events after its version, rule W1); None folds from the start."""
    if not history:
        return state
    if stream.startswith(run_stream("")):
        evolve: Callable[[Any, Any], Any] = run_mod.evolve
    elif stream == ledger_stream():
        evolve = settings_mod.evolve
    elif stream.startswith(role_stream("")):
        evolve = role_mod.evolve
    elif stream.startswith(pass_stream("")):
        evolve = passes_mod.evolve
    else:
        evolve = process_stream_mod.evolve
    for rec in history:
        if type(rec) is not Recorded:
            continue
        try:
            state = evolve(state, rec.event)
        except Exception:  # noqa: BLE001 - the engine's poison rule: skip, as the views park it
            continue
    if state is not None and state.version != history[-1].version:
        state = _at_version(state, history[-1].version)
    return state


def _labels(labels: Any) -> Any:
    """A copy of a caller's label dict, so mutating it later cannot change the event;
    anything else is passed on for `checked` to refuse, naming the field."""
    if labels is None:
        return {}
    return dict(labels) if isinstance(labels, dict) else labels


_ABSENT = object()  # Batch.savepoint: the stream was not held yet


def _at_version(state: Any, version: int) -> Any:
    if isinstance(state, ProcessState):
        return state.with_version(version)
    return msgspec.structs.replace(state, version=version)


CACHE_STREAMS = 10_000  # streams whose state a Ledger keeps between writes (rule W1)


class StateCache:
    """The states of recently written streams, each with its stream version: a write
    decides against the cached state plus the events after its version (one indexed
    read), never a re-fold of the whole stream (rule W1; Equinox's caching strategy).

    Only states that are true of the log go in: a state as read and folded from the
    store, or a batch's state after its commit landed. A batch's own uncommitted state
    never does, so a rolled-back batch cannot poison it. A stale entry (another writer
    moved the stream) costs the read of what it missed; a wrong one (a version the
    stream does not hold at that event) is found by that same read and folded again
    from zero, and the store's own check (Store.append) refuses any version that is
    taken or beyond the stream's end, so a cache can cost a re-read, never a wrong
    write. Bounded (least recently used out first); safe across threads.

    Fresh entries: where the store has a log token (Store.log_token: SQLite), the cache
    also knows which of its states were their stream's latest when the log's token was
    `_fresh_at` (read after that token was taken, or written by a commit that landed
    at it). While the store's token is still that one, nothing was appended since, so
    a write decides against such a state without reading its stream at all. Marked by
    identity: a state put any other way (`put`, a forged entry) is read as before."""

    def __init__(self, limit: int = CACHE_STREAMS):
        self.limit = limit
        self._states: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._fresh: dict[str, Any] = {}  # stream -> the state (this very object) latest at _fresh_at
        self._fresh_at: Any = None

    def fresh(self, streams: Sequence[str], token: Any) -> dict[str, Any]:
        """The cached states of `streams` that are their stream's latest now, the log's
        token being `token` (taken on this thread just before). A token other than the
        one the marks were made at forgets every mark: the log may have moved."""
        if token is None:
            return {}
        with self._lock:
            if token != self._fresh_at:
                self._fresh.clear()
                self._fresh_at = token
                return {}
            out = {}
            states, fresh = self._states, self._fresh
            for stream in streams:
                state = fresh.get(stream)
                if state is not None and states.get(stream) is state:
                    states.move_to_end(stream)
                    out[stream] = state
            return out

    def get(self, stream: str) -> Any:
        with self._lock:
            state = self._states.get(stream)
            if state is not None:
                self._states.move_to_end(stream)
            return state

    def holds_any(self, streams: Sequence[str]) -> bool:
        """Is any of these streams cached?"""
        held = self._states
        return any(s in held for s in streams)  # a read of a dict: no lock needed for a hint

    def get_many(self, streams: Sequence[str]) -> dict[str, Any]:
        """`get` for each stream (None if not cached), under one taking of the lock."""
        with self._lock:
            held = self._states
            out = {s: held.get(s) for s in streams}
            for s, state in out.items():
                if state is not None:
                    held.move_to_end(s)
            return out

    def put(self, stream: str, state: Any) -> None:
        """One stream's state, not marked fresh (put_many)."""
        if state is not None:
            self.put_many([(stream, state)])

    def committed(self, states: Sequence[tuple[str, Any]], after_append: Callable[[Any], Any]) -> None:
        """`put_many` of a landed batch's states. `after_append` (the store's
        token_after_append) gives the log's token just after the batch from the token
        the marks were made at: then the marks carry over to it (the log at it is that
        log plus this batch) and the batch's states are marked too; None forgets them."""
        if self.limit <= 0:
            return
        with self._lock:
            after = after_append(self._fresh_at)
            if after is None:
                self._fresh.clear()
            self._fresh_at = after
            self._put(states, mark=after is not None)

    def put_many(self, states: Sequence[tuple[str, Any]], fresh_at: Any = None) -> None:
        """`put` for each (stream, state), under one taking of the lock. `fresh_at`: the
        log token taken before these states were read (`fresh`), to mark them fresh."""
        if self.limit <= 0:
            return
        with self._lock:
            self._put(states, mark=fresh_at is not None and fresh_at == self._fresh_at)

    def _put(self, states: Sequence[tuple[str, Any]], mark: bool) -> None:
        held, fresh = self._states, self._fresh
        for stream, state in states:
            if state is None:  # moved, state unknown here: whatever is cached is read again
                fresh.pop(stream, None)
                continue
            old = held.get(stream)
            if old is not None:
                if old.version > state.version:
                    continue  # both are true of the log; keep the later one
                held.move_to_end(stream)
            held[stream] = state
            if mark:
                fresh[stream] = state
        while len(held) > self.limit:
            fresh.pop(held.popitem(last=False)[0], None)

    def drop(self, stream: str) -> None:
        with self._lock:
            self._states.pop(stream, None)
            self._fresh.pop(stream, None)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()
            self._fresh.clear()

    def __len__(self) -> int:
        return len(self._states)


def _holds(state: Any, rec: Recorded | Poison) -> bool:
    """Is `rec` (the stored event at the state's version) the event the state last
    folded? A run's state keeps its last event; a slot's, only the version. A row that
    no longer decodes was skipped by the fold (T4): nothing to compare."""
    if rec.version != state.version:
        return False
    if type(rec) is Recorded and isinstance(state, RunState) and state.last is not None:
        return bool(state.last == rec.event)
    return True


EpochArg = EpochRef | str  # an epoch's state (boot()'s result) or its id


def _epoch_id(epoch: EpochArg | None) -> str | None:
    """The id of an epoch given as its state (or any EpochRef) or as its id."""
    if epoch is None or isinstance(epoch, str):
        return epoch
    found = getattr(epoch, "epoch", None)
    if isinstance(found, str) and isinstance(getattr(epoch, "process", None), str):
        return found
    raise InvalidInput(f"expected an epoch (boot()'s result, or its id), got {epoch!r}", where="epoch")


class Commands:
    """One method per event of the catalogue. `submit` is the only write path.

    Every report a process writes for a run names the epoch it writes on behalf of with
    `epoch=`: boot()'s result (an EpochState) or its id. A start given the state also
    names its slot."""

    clock: Clock

    @overload
    def submit(self, command: RunEventBase) -> RunState: ...

    @overload
    def submit(self, command: ProcessEventBase) -> ProcessState: ...

    @overload
    def submit(self, command: LedgerEventBase) -> settings_mod.Settings: ...

    @overload
    def submit(self, command: RoleEventBase) -> role_mod.RoleState: ...

    @overload
    def submit(self, command: PassEventBase) -> passes_mod.PassState: ...

    def submit(
        self, command: StreamEvent
    ) -> RunState | ProcessState | settings_mod.Settings | role_mod.RoleState | passes_mod.PassState:
        """Decide `command` against its stream and append what it decides: the one
        write path (rule L1). Returns the stream's state after it."""
        result: RunState | ProcessState | settings_mod.Settings | role_mod.RoleState | passes_mod.PassState = (
            self._submit(command)
        )
        return result

    def _submit(self, command: StreamEvent) -> Any:
        raise NotImplementedError

    def _at(self, at: datetime | None) -> datetime:
        return at if at is not None else self.clock.now()

    def queue(
        self,
        run: str,
        *,
        workflow: str | None = None,
        process: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
        labels: dict[str, str] | None = None,
        parent: str | None = None,
    ) -> RunState:
        """Queue a new run. `labels` (string -> string, bounded: ledger/events.py) and
        `parent` (the run it re-executes or retries) are set here, once (rule I2)."""
        return self.submit(
            RunQueued(
                at=self._at(at),
                run=run,
                workflow=workflow,
                process=process,
                actor=actor,
                reason=reason,
                labels=_labels(labels),
                parent=parent,
            )
        )

    def start(
        self,
        run: str,
        *,
        epoch: EpochArg | None = None,
        process: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        if process is None and epoch is not None and not isinstance(epoch, str):
            process = getattr(epoch, "process", None)
        return self.submit(
            RunStarted(at=self._at(at), run=run, epoch=_epoch_id(epoch), process=process, actor=actor, reason=reason)
        )

    def checkpoint(
        self,
        run: str,
        node: str,
        ref: str,
        *,
        epoch: EpochArg | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        return self.submit(
            RunCheckpointed(
                at=self._at(at), run=run, node=node, ref=ref, epoch=_epoch_id(epoch), actor=actor, reason=reason
            )
        )

    def pause(
        self,
        run: str,
        kind: Literal["operator", "waiting_human"],
        *,
        interaction: str | None = None,
        questions: list[str] | None = None,
        epoch: EpochArg | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        return self.submit(
            RunPaused(
                at=self._at(at),
                run=run,
                kind=kind,
                interaction=interaction,
                questions=questions,
                epoch=_epoch_id(epoch),
                actor=actor,
                reason=reason,
            )
        )

    def resume(
        self,
        run: str,
        by: Literal["operator", "auto"],
        *,
        answers: dict[str, str] | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        return self.submit(RunResumed(at=self._at(at), run=run, by=by, answers=answers, actor=actor, reason=reason))

    def fail(
        self,
        run: str,
        code: str,
        *,
        resumable: bool,
        error: str | None = None,
        cause: Cause | None = None,
        epoch: EpochArg | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        return self.submit(
            RunFailed(
                at=self._at(at),
                run=run,
                code=code,
                resumable=resumable,
                error=error,
                cause=cause,
                epoch=_epoch_id(epoch),
                actor=actor,
                reason=reason,
            )
        )

    def correct(
        self,
        run: str,
        to: Status,
        *,
        actor: str,
        reason: str,
        code: str = "",
        error: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        """Move a final run (failed, finished) to another verdict: audited, attributed,
        and shown as a correction in every history (docs/lifecycle.md)."""
        try:
            to = Status(to)
        except ValueError:
            raise InvalidInput(f"{to!r} is not a status; one of {', '.join(Status)}", where="to") from None
        return self.submit(
            RunCorrected(at=self._at(at), run=run, to=to, code=code, error=error, actor=actor, reason=reason)
        )

    def cancel(
        self, run: str, *, actor: str | None = None, reason: str | None = None, at: datetime | None = None
    ) -> RunState:
        return self.submit(RunCancelled(at=self._at(at), run=run, actor=actor, reason=reason))

    def finish(
        self,
        run: str,
        *,
        epoch: EpochArg | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        return self.submit(RunFinished(at=self._at(at), run=run, epoch=_epoch_id(epoch), actor=actor, reason=reason))

    def rewind(
        self,
        run: str,
        *,
        to_ref: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> RunState:
        return self.submit(RunRewound(at=self._at(at), run=run, to_ref=to_ref, actor=actor, reason=reason))

    def delete(
        self, run: str, *, actor: str | None = None, reason: str | None = None, at: datetime | None = None
    ) -> RunState:
        return self.submit(RunDeleted(at=self._at(at), run=run, actor=actor, reason=reason))

    def _slot_of(self, epoch: EpochArg) -> tuple[str, str]:
        """(process, epoch id) of an epoch given as its state or its id (found wherever
        it booted)."""
        raise NotImplementedError

    def begin_stop(self, epoch: EpochArg, *, actor: str | None = None, reason: str | None = None) -> ProcessState:
        """Record that this epoch has begun to shut down (`process.stopping`)."""
        process, epoch_id = self._slot_of(epoch)
        return self.submit(
            ProcessStopping(at=self.clock.now(), process=process, epoch=epoch_id, actor=actor, reason=reason)
        )

    def stop(self, epoch: EpochArg, *, actor: str | None = None, reason: str | None = None) -> ProcessState:
        """Record a clean stop: `process.stopping` (unless already recorded) then
        `process.stopped`. A stopped epoch's running runs are orphans (rule O2)."""
        process, epoch_id = self._slot_of(epoch)
        now = self.clock.now()
        self.submit(ProcessStopping(at=now, process=process, epoch=epoch_id, actor=actor, reason=reason))
        return self.submit(ProcessStopped(at=now, process=process, epoch=epoch_id, actor=actor, reason=reason))

    def exited(
        self,
        process: str,
        epoch: EpochArg,
        *,
        observed_by: str,
        exit_code: int | None = None,
        signal: int | None = None,
        evidence: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> ProcessState:
        """Record that epoch `epoch` of slot `process` exited (`process.exited`, rule O7):
        for whoever saw it die (a supervisor whose child ended, the probe, an importer),
        named by `observed_by`. From here on the epoch is not live: its running runs are
        orphans for the next sweep, and its late reports are fenced. A second exit of
        the same epoch appends nothing (the first stands)."""
        epoch_id = _epoch_id(epoch)
        if epoch_id is None:
            raise InvalidInput("exited() needs the epoch that exited", where="epoch")
        if not isinstance(epoch, str) and getattr(epoch, "process", process) != process:
            raise InvalidInput(
                f"epoch {epoch_id!r} is an epoch of {epoch.process!r}, not of {process!r}", where="epoch"
            )
        return self.submit(
            ProcessExited(
                at=self._at(at),
                process=process,
                epoch=epoch_id,
                observed_by=observed_by,
                exit_code=exit_code,
                signal=signal,
                evidence=evidence,
                actor=actor,
                reason=reason,
            )
        )


class Batch(Commands):
    """Commands decided against the batch's own view of each stream, appended together
    on `commit()` in one transaction. Use as a context manager: commit on success,
    nothing appended if the block raises."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.clock = ledger.clock
        self._state: dict[str, Any] = {}
        self._pending: list[Append] = []  # in submission order: the log order
        self._epochs: dict[str, str] = {}  # epoch id -> slot, learned in this batch
        self._hosts: dict[str, HostState | None] = {}  # machine id -> its boots (rules O7, O10), read once a batch
        self.recorded: list[Recorded] = []
        self._resend = False  # a commit of these very appends may have landed (CommitUnknown)
        self._assumed: set[str] = set()

    def state(self, stream: str) -> Any:
        """The stream's state as this batch sees it: its own decisions first (the
        batch's in-memory state is the source within a batch), else the ledger's
        cached state brought up to date (Ledger.read_state, rule W1)."""
        if stream not in self._state:
            self._state[stream] = self.ledger.read_state(stream)
        return self._state[stream]

    def prefetch(self, streams: list[str]) -> None:
        """Read these streams in bulk before submitting to them (one query per 5,000
        streams read from their start, e.g. new runs; per 500 cached streams on SQLite,
        5,000 on PostgreSQL; instead of one per stream: the bulk of a large
        group commit's time on PostgreSQL, docs/benchmarks.md); a cached stream reads
        only the events after its cached version, a fresh one nothing (SQLite's log
        token, Ledger.read_states). Optional: `submit` reads what is missing."""
        missing = [s for s in dict.fromkeys(streams) if s not in self._state]
        self._state.update(self.ledger.read_states(missing))

    def preload(self, histories: dict[str, list[Recorded | Poison]]) -> None:
        """Fold streams the caller has already read (`Store.read_streams`), instead of
        reading them again: the NDJSON import reads each stream's history once, both to
        find events already recorded (rule I1) and to decide against. Streams the
        batch already holds keep their state (it includes the batch's own events)."""
        for stream, history in histories.items():
            if stream not in self._state:
                self._state[stream] = _fold_stream(stream, history)

    def savepoint(self, stream: str) -> tuple[int, str, Any, int]:
        """What `rollback` needs to forget the next submit to `stream`, and only it."""
        return len(self._pending), stream, self._state.get(stream, _ABSENT), len(self._epochs)

    def rollback(self, point: tuple[int, str, Any, int]) -> None:
        """Forget every submit since `savepoint` (one stream's): the tolerant import
        refuses a line whose recorded event would differ from what it states, after
        deciding it (epochledger/ndjson.py)."""
        pending, stream, state, epochs = point
        del self._pending[pending:]
        if state is _ABSENT:
            self._state.pop(stream, None)
        else:
            self._state[stream] = state
        for epoch in list(self._epochs)[epochs:]:  # learned since (a boot): forget them
            del self._epochs[epoch]

    def decide_at(self, command: StreamEvent, state: Any) -> list[Any]:
        """The events `submit` would append for `command` were its stream at `state`
        (an earlier state of it), by the one write path, appending and keeping
        nothing: the import judges a line at its place in the file (rule I1)."""
        point = self.savepoint(stream_of(command))
        hosts = dict(self._hosts)
        self._state[point[1]] = state
        try:
            self._submit(command)
            return [a.event for a in self.appended_since(point[0])]
        finally:
            self.rollback(point)
            self._hosts = hosts

    def appended_since(self, pending: int) -> list[Append]:
        """The appends submitted after the first `pending` ones, in order."""
        return self._pending[pending:]

    def assume(self, state: RunState) -> None:
        """Decide this run's next commands against `state`, already folded by the caller
        (e.g. from a fleet listing), instead of reading its stream again. Safe: the
        append still expects `state.version`, so if another writer moved the run in the
        meantime, `commit` raises ConflictError naming its stream. No-op if the batch
        already holds the stream. Used by the tick driver (docs/tick.md)."""
        stream = run_stream(state.run)
        if stream not in self._state:
            self._state[stream] = state
            self._assumed.add(stream)  # a view's fold, not the stream's: never cached (rule W1)

    def declare_epoch(self, epoch: str, process: str) -> None:
        """Say which slot booted `epoch`, so reports naming it find it without a lookup
        (the tick driver declares its own epoch). Checked when used: the slot's stream
        must know the epoch."""
        self._epochs[epoch] = process

    def _slot_of(self, epoch: EpochArg) -> tuple[str, str]:
        if epoch is None:  # the API's callers may pass anything (rule L4): refused by name, not asserted
            raise InvalidInput("expected an epoch (boot()'s result, or its id), got None", where="epoch")
        if not isinstance(epoch, str):
            epoch_id = _epoch_id(epoch)
            assert epoch_id is not None
            return epoch.process, epoch_id
        found = self.find_epoch(check_value(epoch, Name, "epoch"))
        return found.process, found.epoch

    def _submit(self, command: StreamEvent) -> Any:
        checked(command)  # from here on, an instance of a catalogue class, not of a subclass (L4)
        is_run = type(command) in _RUN_TYPES
        stream = stream_of(command)
        held = self._state
        state = held[stream] if stream in held else self.state(stream)
        new_state: Any
        if is_run:
            events: list[Any] = self._decide_run(command, state)  # type: ignore[arg-type] # a run event (_RUN_TYPES)
            new_state = run_mod.evolve(state, events[0]) if len(events) == 1 else run_mod.fold(events, state)
        elif isinstance(command, LedgerEventBase):
            events = settings_mod.decide(command, state)  # type: ignore[arg-type] # a LedgerEvent member
            new_state = settings_mod.fold(events, state)
        elif isinstance(command, RoleEventBase):
            events = self._decide_role(command, state)  # type: ignore[arg-type] # a RoleEvent member
            new_state = role_mod.fold(events, state)
        elif isinstance(command, PassEventBase):
            events = self._decide_pass(command, state)  # type: ignore[arg-type] # a PassEvent member
            new_state = passes_mod.fold(events, state)
        else:
            events = process_stream_mod.decide(command, state)  # type: ignore[arg-type] # a ProcessEvent member
            new_state = process_stream_mod.fold(events, state)
            if isinstance(command, ProcessBooted) and events:
                self._epochs.setdefault(command.epoch, command.process)
                if command.machine is not None and command.machine in self._hosts:
                    self._hosts[command.machine] = process_stream_mod.evolve_host(self._hosts[command.machine], command)
        if events:
            held[stream] = new_state
            if len(events) == 1:
                self._pending.append(Append(stream, new_state.version, events[0]))
            else:
                version = new_state.version - len(events)
                self._pending.extend(Append(stream, version + i, e) for i, e in enumerate(events, start=1))
        return new_state

    def find_epoch(
        self, epoch: str, hint: str | None = None, *, must_be_in: str | None = None
    ) -> process_stream_mod.EpochState:
        """The epoch with this id, wherever it booted: in slot `hint` if it is there,
        else in the slot this batch or the epoch index (projections/epoch_index.py)
        knows for it. `must_be_in`: the report names that slot, so the epoch must be
        one of its epochs. Raises UnknownEpoch if no slot booted it (its liveness
        cannot be judged), or if two slots booted the same id."""
        for slot in (must_be_in or hint, self._epochs.get(epoch)):
            if slot is not None:
                known: ProcessState | None = self.state(process_stream(slot))
                found = known.epoch(epoch) if known is not None else None
                if found is not None:
                    return found
            if must_be_in is not None:
                break
        slots = self.ledger.epoch_slots(epoch)
        if must_be_in is not None:
            elsewhere = f"it was booted by slot {', '.join(slots)}" if slots else "no slot booted it (boot() first)"
            raise UnknownEpoch(epoch, f"epoch {epoch!r} is not an epoch of slot {must_be_in!r}: {elsewhere}")
        if not slots:
            raise UnknownEpoch(
                epoch,
                f"no process slot ever booted epoch {epoch!r}, so its liveness cannot be "
                "judged (boot() the process first and name the epoch it returns)",
            )
        if len(slots) > 1:
            raise UnknownEpoch(
                epoch,
                f"epoch id {epoch!r} was booted by several slots ({', '.join(slots)}); name the slot with process=",
            )
        known = self.state(process_stream(slots[0]))
        found = known.epoch(epoch) if known is not None else None
        if found is None:  # the index and the slot's stream disagree: an index of another ledger?
            raise UnknownEpoch(
                epoch,
                f"the epoch index says slot {slots[0]!r} booted {epoch!r}, but its stream "
                "does not hold that boot; rebuild the views (epochledger rebuild)",
            )
        self._epochs[epoch] = slots[0]
        return found

    def host_state(self, machine: str) -> HostState | None:
        """The boots of the host with this machine id (the hosts view,
        projections/hosts.py), with the boots this batch has decided so far: what
        `end_of` needs to know whether the host rebooted (rule O10)."""
        if machine not in self._hosts:
            found = self.ledger.host_state(machine)
            for a in self._pending:
                if type(a.event) is ProcessBooted and a.event.machine == machine:
                    found = process_stream_mod.evolve_host(found, a.event)
            self._hosts[machine] = found
        return self._hosts[machine]

    def host_of(self, epoch: EpochState) -> HostState | None:
        """The boots of `epoch`'s machine, or None when it recorded no machine id or no
        host boot id: such an epoch can never be told rebooted (rule O10), so no host is
        read for it."""
        if epoch.machine is None or epoch.host_boot is None:
            return None
        return self.host_state(epoch.machine)

    def end_of(self, epoch: EpochState) -> tuple[str, str] | None:
        """Why `epoch` is no longer live, or None: THE liveness definition
        (ledger.process.end_of, rule O7), with its host's facts (host_of)."""
        return process_stream_mod.end_of(epoch, self.host_of(epoch))

    def _decide_role(self, command: RoleGranted, state: role_mod.RoleState | None) -> list[Any]:
        """role.decide (rule T7) with the liveness of the asking epoch and of the
        current holder's, each from `end_of`: the one liveness definition (rule O7)."""
        asker = self.find_epoch(command.epoch, must_be_in=command.process)
        holder = None if state is None else self.find_epoch(state.epoch, must_be_in=state.process)
        return list(
            role_mod.decide(
                command, state, asker_end=self.end_of(asker), holder_end=None if holder is None else self.end_of(holder)
            )
        )

    def _decide_pass(self, command: PassEvent, state: passes_mod.PassState | None) -> list[Any]:
        """passes.decide (rule T6), fenced like a report: an item's event written on
        behalf of an epoch that is no longer live (end_of, rule O7) is refused (F1)."""
        if command.epoch is not None:
            ended = self.end_of(self.find_epoch(command.epoch))
            if ended is not None:
                raise StaleEpoch("", None, tag_of(command), command.epoch, ended[1])
        return list(passes_mod.decide(command, state))

    def _decide_run(self, command: RunEventBase, state: RunState | None) -> list[Any]:
        """run.decide, behind the fence (ledger/run.py): a report written on behalf of
        a stale epoch raises StaleEpoch carrying the run.fenced evidence to keep. A
        retried delivery whose effect already holds stays a no-op, stale or not.

        Before deciding, the ledger stamps what only it knows: a start that names an
        epoch but no slot gets the epoch's slot (the run's owner is the epoch its last
        start named, wherever it booted: rule O2); a start that names no epoch gets its
        slot's current epoch (`slot_epoch`, rule O3)."""
        evidence = None
        epoch = run_mod.writer_epoch(command)
        if epoch is not None:
            named = command.process if isinstance(command, RunStarted) else None
            writer = self.find_epoch(epoch, run_mod.slot_hint(command, state), must_be_in=named)
            host = self.host_of(writer)
            # Judged as submitted, before the stamp: the evidence keeps the report itself (rule I1)
            evidence = run_mod.fence(command, state, writer, host)
            if isinstance(command, RunStarted) and command.process is None:
                command = msgspec.structs.replace(command, process=writer.process)
        elif type(command) is RunStarted:  # `checked` refused anything but the catalogue's own classes
            slot = command.process or (state.process if state is not None else None)
            known = self.state(process_stream(slot)) if slot is not None else None
            current = known.current if known is not None else None
            command = msgspec.structs.replace(command, slot_epoch=current.epoch if current is not None else None)
        try:
            events: list[Any] = run_mod.decide(command, state)  # type: ignore[arg-type]
        except IllegalTransition:
            if evidence is None:
                raise
            events = [command]
        if evidence is not None and events:
            assert state is not None
            raise StaleEpoch(command.run, state.status, tag_of(command), evidence.epoch, evidence.why, evidence)
        return events

    @property
    def pending(self) -> int:
        return len(self._pending)

    def commit(self) -> list[Recorded]:
        """Append the batch. After CommitUnknown, calling commit() again sends the same
        appends, and appends nothing if they had landed (Store.append, resend)."""
        pending = self._pending
        # Every stream the batch did not `assume` was read from the store at the
        # version it decided on: the store need not look for that row again (W1).
        read = dict.fromkeys([a.stream for a in pending])
        for stream in self._assumed:
            read.pop(stream, None)
        try:
            positions = self.ledger.store.append(pending, resend=self._resend, verified=read)
        except CommitUnknown:
            self._resend = True
            raise
        self.recorded = [Recorded(pos, a.stream, a.version, a.event) for pos, a in zip(positions, pending, strict=True)]
        # Landed: each written stream's state is now true of the log, so it is what the
        # next write decides against (rule W1). Only now, never before the commit.
        # An `assume`d stream moved too: None unmarks its cached state, which is read
        # and checked again by the next write (its cached version is now behind).
        state = self._state
        landed = [(stream, state.get(stream)) for stream in read]
        landed.extend((stream, None) for stream in self._assumed if state.get(stream) is not None)
        self.ledger.cache.committed(landed, self.ledger.store.token_after_append)
        self._pending = []
        self._state.clear()
        return self.recorded

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        elif isinstance(exc, StaleEpoch):
            # The batch is dropped like any refused batch, but the late report is kept
            # as run.fenced evidence in a transaction of its own (rule F1).
            self._pending = []
            self.ledger.keep_fenced(exc)


class Ledger(Commands, Reports):
    """The embedded API. Open one with `ledger.open_ledger(url, clock=...)`."""

    def __init__(self, store: Store, clock: Clock | None = None, host: Host | None = None):
        self.store = store
        self.clock = checked_clock(clock)  # every reading checked (ledger/clock.py)
        self.host: Host = host if host is not None else SystemHost()  # the host-facts port (ledger/host.py)
        self._hosts: dict[str, HostState] | None = None  # every host's boots, folded up to _hosts_at
        self._hosts_at = 0
        self._hosts_lock = threading.Lock()
        self.cache = StateCache()  # streams' states between writes (rule W1)
        self._stopping: dict[str, threading.Event] = {}  # epochs this process has begun to stop
        self._stopping_lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.store.url

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- writes
    def batch(self) -> Batch:
        return Batch(self)

    def read_state(self, stream: str) -> Any:
        """The stream's state as of the log now, for a write to decide against (rule W1):
        the cached state plus the events after its version, or a fold from zero when
        nothing is cached. The read starts at the cached version itself, so a cached
        state whose version the stream does not hold at that event (a foreign or
        forged entry) is seen and folded again from zero."""
        return self.read_states([stream])[stream]

    def read_states(self, streams: Sequence[str]) -> dict[str, Any]:
        """read_state for several streams, in one query per `Store.streams_per_read`
        (Batch.prefetch). A stream whose cached state is fresh (StateCache.fresh:
        nothing was appended to the log since that state was its latest, by the store's
        log token) is not read at all; the append's version check stays exact either
        way (Store.append)."""
        # The token only where a mark could be used or made on something cached (one
        # PRAGMA, ~4 us): a new run's first write reads anyway, and its state is
        # marked by its commit (StateCache.committed).
        # Nothing cached (a group commit of new runs): no token, no lookups; an entry put
        # by another thread meanwhile is only not used (the stream is read whole).
        held = self.cache.holds_any(streams)
        token = self.store.log_token() if held else None
        out: dict[str, Any] = self.cache.fresh(streams, token)
        if out:
            if len(out) == len(streams):
                return out
            streams = [s for s in streams if s not in out]
        cached = self.cache.get_many(streams) if held else {}
        since = {s: state.version - 1 for s, state in cached.items() if state is not None and state.version > 0}
        if len(streams) == 1:
            only = streams[0]
            read = {only: self.store.read_stream(only, since.get(only, 0))}
        else:
            read = self.store.read_streams(streams, since)
        got: list[tuple[str, Any]] = []
        again = []
        for stream, history in read.items():
            if stream in since:
                state = cached[stream]
                if not history or not _holds(state, history[0]):
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
            self.cache.drop(stream)
            out[stream] = state = _fold_stream(stream, self.store.read_stream(stream))
            got.append((stream, state))
        # Read after `token` was taken: each is its stream's latest at that token.
        self.cache.put_many(got, fresh_at=token)
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
    ) -> EpochState:
        """Start a new epoch of `process`, superseding its previous epoch (rule O1), and
        return its state. The boot instant is now - monotonic uptime, from the clock
        port. The returned state is what every later report names (`epoch=`).

        Liveness facts (rules O7, O10), from the host port (ledger/host.py) unless
        given: the host's name, machine id and boot id, the pid and its start time. A
        boot for another host (`host=` naming another machine) records only what it is
        given (without `machine=`, no later boot can prove that host rebooted); a boot
        for another pid on this host (a supervisor booting its worker's slot) reads that
        pid's start time."""
        facts = self.host
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
            at=self.clock.now(),
            process=process,
            epoch=epoch or uuid.uuid4().hex,
            booted_at=boot_instant(self.clock),
            host=host if host is not None else here,
            pid=pid,
            actor=actor,
            host_boot=host_boot,
            pid_start=pid_start,
            machine=machine,
        )
        for attempt in range(5):  # a boot is always legal: a lost race just retries
            try:
                state = self.submit(event).epoch(event.epoch)
                assert state is not None
                return state
            except ConflictError:
                if attempt == 4:
                    raise
        raise AssertionError  # pragma: no cover

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
        (UnknownSlot: a hand sweep of a mistyped name)."""
        orphans_mod.as_margin(margin)
        sweep_mod.check_slot(self, check_value(process, Name, "process"), new_slot=new_slot)
        booted = self.boot(process, epoch=epoch, host=host, pid=pid, actor=actor)
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
        return probe(self, epoch=epoch, sweep=sweep)

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
        from projections import engine, epochs, hosts, orphans, runs

        head = self.store.max_position()
        settings = self.settings()  # the ledger's own stream (rule O9): a few events, read whole
        if self.store.read_only:  # a backup copy: folded in memory, nothing written
            by_run, _ = engine.read_view(self.store, runs)
            by_process, _ = engine.read_view(self.store, epochs)
            by_host, _ = engine.read_view(self.store, hosts)
            if not retired:
                by_process = {k: p for k, p in by_process.items() if not p.retired or k in slots}
            return orphans.View(
                processes=by_process, runs=by_run, hosts=by_host, position=self.store.max_position(), settings=settings
            )
        for view in (runs, epochs, hosts):
            engine.catch_up(self.store, view, upto=head)
        by_process, _ = engine.read_view(
            self.store, epochs, catch_up_first=False, where=() if retired else [("retired", 0)]
        )
        if not retired and (wanted := tuple(k for k in dict.fromkeys(slots) if k not in by_process)):
            by_process.update(engine.read_view(self.store, epochs, catch_up_first=False, where=[("k", wanted)])[0])
        by_host, _ = engine.read_view(self.store, hosts, catch_up_first=False)
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
            found.runs = engine.read_orphan_candidates(self.store, also_slots=rebooted)
        else:
            found.runs, _ = engine.read_view(self.store, runs, catch_up_first=False)
        return found

    def settings(self) -> settings_mod.Settings | None:
        """The ledger's settings (ledger/settings.py), folded from its own stream; None
        if none was ever recorded."""
        found: settings_mod.Settings | None = _fold_stream(ledger_stream(), self.store.read_stream(ledger_stream()))
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
        A racing acquirer's grant that landed first is re-read, then refused."""
        process, epoch_id = self._slot_of(epoch)
        command = RoleGranted(
            at=self.clock.now(), role=role, epoch=epoch_id, process=process, actor=actor, reason=reason
        )
        for attempt in range(5):
            try:
                return self.submit(command)
            except ConflictError:
                if attempt == 4:
                    raise
        raise AssertionError  # pragma: no cover

    def role(self, role: str) -> role_mod.RoleState | None:
        """Who holds `role` (its last grant, rule T7), or None if it was never granted.
        The holder may since have ended: `acquire_role` is what judges that."""
        role = check_value(role, Name, "role")
        found: role_mod.RoleState | None = _fold_stream(role_stream(role), self.store.read_stream(role_stream(role)))
        return found

    def unjudged(self) -> list[tuple[RunState, orphans_mod.Unjudged]]:
        """Every running run no slot can judge (rule O9: no owner epoch, no process, and
        no default slot), with why; the sweep reports list them too. Reads only."""
        view = self.orphan_view(candidates_only=True)
        return [(view.runs[u.run], u) for u in orphans_mod.unjudged(view)]

    def epochs(self, *, retired: bool = False) -> list[process_stream_mod.EpochState]:
        """Every epoch of every process slot, live or not; of retired slots (rule O8)
        only with `retired=True`."""
        from projections import orphans

        # Epochs need no runs: the candidates are the fewest the view reads (not the fleet).
        return orphans.epochs(self.orphan_view(candidates_only=True, retired=retired))

    def liveness(self, *, retired: bool = False) -> list[tuple[EpochState, tuple[str, str] | None]]:
        """Every epoch of every process slot with why it is no longer live, as (rule,
        sentence), or None while it is live (ledger.process.end_of with its host's
        facts, rule O7), in one read of the views; of retired slots (rule O8) only with
        `retired=True` (none of their epochs is live)."""
        from projections import orphans

        # No runs needed: the candidates are the fewest the view reads, so a startup's
        # probe (epochledger/probe.py) costs the live slots, never the whole runs view.
        view = self.orphan_view(candidates_only=True, retired=retired)
        return [(e, view.end_of(e)) for e in orphans.epochs(view)]

    def orphans(self, margin: float = ORPHAN_MARGIN_S) -> list[tuple[RunState, orphans_mod.Verdict]]:
        """Every running run the ledger's events say is an orphan, with its verdict
        (clock-free; O3 judged against each process's current epoch). Reads only. The
        running runs no slot can judge are `unjudged()` (rule O9)."""
        view = self.orphan_view()
        return [(view.runs[v.run], v) for v in orphans_mod.verdicts(view, margin=margin)]

    # -------------------------------------------------------------- reads
    def get_run(self, run: str) -> RunState:
        """A run's state, folded from its stream as the write side folds it (an event
        that does not decode is skipped, as the views park it)."""
        run = check_value(run, Name, "run")
        state = _fold_stream(run_stream(run), self.store.read_stream(run_stream(run)))
        if state is None:
            raise RunNotFound(run)
        if state.deleted:
            raise RunNotFound(run, deleted=True)
        return state  # type: ignore[no-any-return]

    def history(self, run: str) -> list[Recorded | Poison]:
        """Every event of a run in order; an event that does not decode is a Poison in
        its place (position, version, tag and error), so a history always shows."""
        run = check_value(run, Name, "run")
        history = self.store.read_stream(run_stream(run))
        if not history:
            raise RunNotFound(run)
        return history

    def process(self, process: str) -> ProcessState | None:
        process = check_value(process, Name, "process")
        return _fold_stream(process_stream(process), self.store.read_stream(process_stream(process)))  # type: ignore[no-any-return]

    def host_state(self, machine: str) -> HostState | None:
        """The boots of the host with this machine id across every slot, as of the log's
        head: which of its host boot ids are over (rules O7, O10; projections/hosts.py).
        The fence asks it for every report whose epoch recorded a machine id and a host
        boot id, so it is kept here and brought forward by the boots recorded since it
        was last asked (one read of the log's tail, which decodes only process.booted
        rows), never by catching the hosts view up (a write) on every report. Folding a
        boot twice changes nothing (evolve_host)."""
        from projections import engine, hosts

        with self._hosts_lock:
            if self._hosts is None:
                before = self.store.max_position()
                found, lag = engine.read_view(self.store, hosts)
                # The view's position is at least before - lag: fold from there (again).
                self._hosts, self._hosts_at = dict(found), max(0, before - lag)
            known = self._hosts
            for rows in self.store.read_raw(self._hosts_at):
                for position, stream, _version, state in rows:
                    self._hosts_at = position
                    if not (stream.startswith("process:") and b"process.booted" in state):
                        continue
                    try:
                        e = msgspec.json.decode(state, type=ProcessBooted)
                    except msgspec.DecodeError:
                        continue  # not a boot after all, or a bad row: the views park it (T4)
                    if e.machine is not None and (h := process_stream_mod.evolve_host(known.get(e.machine), e)):
                        known[e.machine] = h
            return known.get(machine)

    def epoch_slots(self, epoch: str) -> list[str]:
        """The slots that booted this epoch id (normally one), from the epoch index
        view, caught up first (projections/epoch_index.py)."""
        from projections import engine, epoch_index

        found, _ = engine.read_view(self.store, epoch_index, key=epoch)
        return list(found.get(epoch, []))

    def events(self, after: int = 0, upto: int | None = None) -> Iterator[Recorded]:
        return self.store.read_all(after, upto)

    def runs(self, where: Callable[[RunState], bool] | None = None) -> list[RunState]:
        """Every live (not deleted) run, sorted by run id, from the materialized runs
        view after catching it up (projections/engine.py): the cost is the events since
        the last catch-up, not the whole log, and an event that no longer decodes is
        parked there instead of failing every caller (rule T4; the tick driver lists
        its active runs here)."""
        from projections import engine

        return engine.read_runs(self.store, where)[0]


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
        from projections import engine

        try:
            engine.init_views(store)  # every view's table: a read never runs DDL (R3)
        except BaseException:
            store.close()
            raise
    return Ledger(store, clock, host)
