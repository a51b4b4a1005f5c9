"""The write path: every write, from the Python API, the CLI or an NDJSON import, is a
command submitted to a `Batch`: the stream's events are read and folded, `decide`
(ledger.run / ledger.process) returns the events, and the batch appends all of its
streams in one transaction (group commit), all or nothing (rules L1, L5). A single
API call is a batch of one (`Commands`, which the Ledger facade in epochledger/app.py
inherits). Time comes from the injected clock (rule L8).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, overload

import msgspec

from epochledger.epochs_lookup import EpochLookup
from epochledger.ledger import process as process_stream_mod
from epochledger.ledger import run as run_mod
from epochledger.ledger import settings as settings_mod
from epochledger.ledger.clock import Clock
from epochledger.ledger.codec import check_value, checked
from epochledger.ledger.errors import CommitUnknown, IllegalTransition, InvalidInput, StaleEpoch
from epochledger.ledger.events import (
    RUN_EVENT_TYPES,
    AnyEvent,
    Cause,
    IdempotencyEventBase,
    IdempotencyKept,
    IdempotencyStream,
    LedgerEventBase,
    LedgerStream,
    Name,
    PassEvent,
    PassEventBase,
    PassStream,
    ProcessBooted,
    ProcessEventBase,
    ProcessExited,
    ProcessStopped,
    ProcessStopping,
    ProcessStream,
    Recorded,
    RoleEventBase,
    RoleGranted,
    RoleStream,
    RunCancelled,
    RunCheckpointed,
    RunCorrected,
    RunDeleted,
    RunEventBase,
    RunFailed,
    RunFinished,
    RunPaused,
    RunQueued,
    RunResumed,
    RunRewound,
    RunStarted,
    RunStream,
    Status,
    StreamEvent,
    TokenEventBase,
    TokenStream,
    idempotency_stream,
    ledger_stream,
    pass_stream,
    process_stream,
    role_stream,
    run_stream,
    tag_of,
    token_stream,
)
from epochledger.ledger.process import EpochRef, HostState, ProcessState
from epochledger.ledger.run import RunState
from epochledger.ledger.store import Append, Poison

# The deciders of the role, pass, idempotency and token streams are imported where a
# command or a fold of their kind needs them, not here: a start that writes or folds
# none (`show RUN`, rule W2) never loads them (tokens brings hmac). A run's decider,
# the hot path, and the slots' and the settings' (which every read's views fold) stay.
if TYPE_CHECKING:
    from epochledger.app import Ledger
    from epochledger.ledger import idempotency as idempotency_mod
    from epochledger.ledger import passes as passes_mod
    from epochledger.ledger import role as role_mod
    from epochledger.ledger import tokens as tokens_mod
    from epochledger.ledger.streams import StreamState

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
    if isinstance(event, IdempotencyEventBase):
        return idempotency_stream(event.key)
    if isinstance(event, TokenEventBase):
        return token_stream()
    assert isinstance(event, ProcessEventBase)
    return process_stream(event.process)


def _fold_stream(stream: str, history: list[Recorded | Poison], state: StreamState | None = None) -> StreamState | None:
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
        from epochledger.ledger import role as role_mod

        evolve = role_mod.evolve
    elif stream.startswith(pass_stream("")):
        from epochledger.ledger import passes as passes_mod

        evolve = passes_mod.evolve
    elif stream.startswith(idempotency_stream("")):
        from epochledger.ledger import idempotency as idempotency_mod

        evolve = idempotency_mod.evolve
    elif stream == token_stream():
        from epochledger.ledger import tokens as tokens_mod

        evolve = tokens_mod.evolve
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


class Savepoint(msgspec.Struct, frozen=True, kw_only=True):
    """What `Batch.rollback` needs to forget the submits since `Batch.savepoint` to one
    stream: how many events were pending, the stream, whether the batch held its state
    then (`held`) and that state, and how many epochs it had learned."""

    pending: int
    stream: str
    held: bool
    state: StreamState | None
    epochs: int


def _at_version(state: StreamState, version: int) -> StreamState:
    if isinstance(state, ProcessState):
        return state.with_version(version)
    return msgspec.structs.replace(state, version=version)


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

    @overload
    def submit(self, command: IdempotencyEventBase) -> idempotency_mod.KeptOutcome: ...

    @overload
    def submit(self, command: TokenEventBase) -> tokens_mod.TokenRegistry: ...

    def submit(
        self, command: StreamEvent
    ) -> (
        RunState
        | ProcessState
        | settings_mod.Settings
        | role_mod.RoleState
        | passes_mod.PassState
        | idempotency_mod.KeptOutcome
        | tokens_mod.TokenRegistry
    ):
        """Decide `command` against its stream and append what it decides: the one
        write path (rule L1). Returns the stream's state after it."""
        result: (
            RunState
            | ProcessState
            | settings_mod.Settings
            | role_mod.RoleState
            | passes_mod.PassState
            | idempotency_mod.KeptOutcome
            | tokens_mod.TokenRegistry
        ) = self._submit(command)
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
        kind: Literal["operator", "waiting_human", "orchestrator"],
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

    def acquire_role(
        self, role: str, epoch: EpochArg, *, actor: str | None = None, reason: str | None = None
    ) -> role_mod.RoleState:
        """Take the exclusive role `role` for `epoch` (its state or its id), or keep it
        (`role.granted`, rule T7; ledger/role.py decides, with end_of for the asker and
        the holder). Held by this epoch already: appends nothing. Held by another live
        epoch: RoleHeld. `epoch` not live: StaleEpoch. A batch that loses the commit race
        conflicts; `Ledger.acquire_role` decides again."""
        process, epoch_id = self._slot_of(epoch)
        return self.submit(
            RoleGranted(at=self.clock.now(), role=role, epoch=epoch_id, process=process, actor=actor, reason=reason)
        )


class Batch(Commands, EpochLookup):
    """Commands decided against the batch's own view of each stream, appended together
    on `commit()` in one transaction. Use as a context manager: commit on success,
    nothing appended if the block raises."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.clock = ledger.clock
        self._state: dict[str, StreamState | None] = {}
        self._pending: list[Append] = []  # in submission order: the log order
        self._epochs: dict[str, str] = {}  # epoch id -> slot, learned in this batch
        self._hosts: dict[str, HostState | None] = {}  # machine id -> its boots (rules O7, O10), read once a batch
        self.recorded: list[Recorded] = []
        self._resend = False  # a commit of these very appends may have landed (CommitUnknown)
        self._assumed: set[str] = set()

    @overload
    def state(self, stream: RunStream) -> RunState | None: ...
    @overload
    def state(self, stream: ProcessStream) -> ProcessState | None: ...
    @overload
    def state(self, stream: LedgerStream) -> settings_mod.Settings | None: ...
    @overload
    def state(self, stream: RoleStream) -> role_mod.RoleState | None: ...
    @overload
    def state(self, stream: PassStream) -> passes_mod.PassState | None: ...
    @overload
    def state(self, stream: IdempotencyStream) -> idempotency_mod.KeptOutcome | None: ...
    @overload
    def state(self, stream: TokenStream) -> tokens_mod.TokenRegistry | None: ...
    @overload
    def state(self, stream: str) -> StreamState | None: ...

    def state(self, stream: str) -> StreamState | None:
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

    def savepoint(self, stream: str) -> Savepoint:
        """What `rollback` needs to forget the next submit to `stream`, and only it."""
        return Savepoint(
            pending=len(self._pending),
            stream=stream,
            held=stream in self._state,
            state=self._state.get(stream),
            epochs=len(self._epochs),
        )

    def rollback(self, point: Savepoint) -> None:
        """Forget every submit since `savepoint` (one stream's): the tolerant import
        refuses a line whose recorded event would differ from what it states, after
        deciding it (epochledger/ndjson.py)."""
        del self._pending[point.pending :]
        if point.held:
            self._state[point.stream] = point.state
        else:
            self._state.pop(point.stream, None)
        for epoch in list(self._epochs)[point.epochs :]:  # learned since (a boot): forget them
            del self._epochs[epoch]

    def mark(self) -> tuple[int, dict[str, StreamState | None], dict[str, str], dict[str, HostState | None]]:
        """What `restore` needs to forget every submit since, to any stream: the
        service joins concurrent requests in one batch (epochledger/service/app.py,
        `Service.write`) and drops a refused request's submits alone, so one bad
        request never fails the others committed with it."""
        return len(self._pending), dict(self._state), dict(self._epochs), dict(self._hosts)

    def restore(
        self, mark: tuple[int, dict[str, StreamState | None], dict[str, str], dict[str, HostState | None]]
    ) -> None:
        """Forget every submit since `mark`: the batch is as it was then."""
        pending, state, epochs, hosts = mark
        del self._pending[pending:]
        self._state, self._epochs, self._hosts = state, epochs, hosts

    def decide_at(self, command: StreamEvent, state: StreamState | None) -> list[AnyEvent]:
        """The events `submit` would append for `command` were its stream at `state`
        (an earlier state of it), by the one write path, appending and keeping
        nothing: the import judges a line at its place in the file (rule I1)."""
        point = self.savepoint(stream_of(command))
        hosts = dict(self._hosts)
        self._state[point.stream] = state
        try:
            self._submit(command)
            return [a.event for a in self.appended_since(point.pending)]
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
        # Each branch's state is of its command's stream kind (stream_of, _fold_stream):
        # the asserts say so to the type checker (a `type() is` test, ~30 ns a write).
        new_state: Any
        if is_run:
            assert state is None or type(state) is RunState
            events: list[Any] = self._decide_run(command, state)  # type: ignore[arg-type] # a run event (_RUN_TYPES)
            new_state = run_mod.evolve(state, events[0]) if len(events) == 1 else run_mod.fold(events, state)
        elif isinstance(command, LedgerEventBase):
            assert state is None or type(state) is settings_mod.Settings
            events = settings_mod.decide(command, state)  # type: ignore[arg-type] # a LedgerEvent member
            new_state = settings_mod.fold(events, state)
        elif isinstance(command, RoleEventBase):
            from epochledger.ledger import role as role_mod

            assert state is None or type(state) is role_mod.RoleState
            events = self._decide_role(command, state)  # type: ignore[arg-type] # a RoleEvent member
            new_state = role_mod.fold(events, state)
        elif isinstance(command, PassEventBase):
            from epochledger.ledger import passes as passes_mod

            assert state is None or type(state) is passes_mod.PassState
            events = self._decide_pass(command, state)  # type: ignore[arg-type] # a PassEvent member
            new_state = passes_mod.fold(events, state)
        elif isinstance(command, IdempotencyKept):
            from epochledger.ledger import idempotency as idempotency_mod

            assert state is None or type(state) is idempotency_mod.KeptOutcome
            events = list(idempotency_mod.decide(command, state))
            new_state = idempotency_mod.fold(events, state)
        elif isinstance(command, TokenEventBase):
            from epochledger.ledger import tokens as tokens_mod

            assert state is None or type(state) is tokens_mod.TokenRegistry
            events = tokens_mod.decide(command, state)  # type: ignore[arg-type] # a TokenEvent member
            new_state = tokens_mod.fold(events, state)
        else:
            assert state is None or type(state) is ProcessState
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

    def _decide_role(self, command: RoleGranted, state: role_mod.RoleState | None) -> list[Any]:
        """role.decide (rule T7) with the liveness of the asking epoch and of the
        current holder's, each from `end_of`: the one liveness definition (rule O7)."""
        asker = self.find_epoch(command.epoch, must_be_in=command.process)
        holder = None if state is None else self.find_epoch(state.epoch, must_be_in=state.process)
        from epochledger.ledger import role as role_mod

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
        from epochledger.ledger import passes as passes_mod

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
            positions = self.ledger._store.append(pending, resend=self._resend, verified=read)
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
        self.ledger._cache.committed(landed, self.ledger._store.token_after_append)
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
