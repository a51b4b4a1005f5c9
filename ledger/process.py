"""A process slot's stream as a Decider: its boot epochs (rule O1).

Each `process.booted` starts a new epoch of the slot and supersedes the previous one;
`process.stopping` / `process.stopped` record a clean shutdown of one epoch. Whether a
run is orphaned is a fleet-wide question answered by projections/orphans.py from these
facts; this module only keeps one slot's history straight.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol, assert_never

import msgspec

from ledger.errors import IllegalTransition
from ledger.events import (
    ProcessBooted,
    ProcessEvent,
    ProcessStopped,
    ProcessStopping,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    tag_of,
)

replace = msgspec.structs.replace

# Why an epoch is no longer live: the rule ids verdicts, fenced reports and docs name.
SUPERSEDED = "O2-superseded"
STOPPED = "O2-stopped"


class EpochRef(Protocol):
    """Anything naming one epoch of one slot: boot()'s `process.booted` event, an
    EpochState, a sweep's argument."""

    @property
    def process(self) -> str: ...

    @property
    def epoch(self) -> str: ...


class EpochState(msgspec.Struct, frozen=True, kw_only=True):
    process: str
    epoch: str
    booted_at: datetime  # the instant the process started (now - uptime, rule O1)
    recorded_at: datetime  # when the boot was recorded
    host: str | None = None
    pid: int | None = None
    superseded_by: str | None = None
    superseded_at: datetime | None = None
    stopping_at: datetime | None = None
    stopped_at: datetime | None = None
    # The epoch's sweep skipped the O3 time fallback (why), or gave up (when): rule O5.
    sweep_skipped: str | None = None
    sweep_failed_at: datetime | None = None

    @property
    def live(self) -> bool:
        """Not superseded by a later boot of the slot and not cleanly stopped."""
        return end_of(self) is None


def end_of(epoch: EpochState) -> tuple[str, str] | None:
    """Why `epoch` is no longer live, as (rule, sentence), or None while it is live.

    The one liveness definition: fencing (ledger/run.py), the orphan rule
    (projections/orphans.py), the sweep and the CLI all ask it. Liveness is a fact of
    the slot's stream, never a guess from the clock or the run's age."""
    if epoch.superseded_by is not None:
        return SUPERSEDED, f"epoch {epoch.epoch} of {epoch.process} was superseded by epoch {epoch.superseded_by}"
    if epoch.stopped_at is not None:
        return STOPPED, f"epoch {epoch.epoch} of {epoch.process} recorded a clean stop at {epoch.stopped_at.isoformat()}"
    return None


class ProcessState(msgspec.Struct, frozen=True, kw_only=True):
    process: str
    epochs: tuple[EpochState, ...] = ()
    version: int = 0

    @property
    def current(self) -> EpochState | None:
        return self.epochs[-1] if self.epochs else None

    def epoch(self, epoch: str) -> EpochState | None:
        for e in self.epochs:
            if e.epoch == epoch:
                return e
        return None

    def booted_no_later(self, first: str, second: str) -> bool | None:
        """Was epoch `first` booted at or before epoch `second` in this slot's log order?
        None if either is not an epoch of this slot."""
        order = {e.epoch: i for i, e in enumerate(self.epochs)}
        if first not in order or second not in order:
            return None
        return order[first] <= order[second]


def evolve(state: ProcessState | None, e: ProcessEvent) -> ProcessState:
    if state is None:
        state = ProcessState(process=e.process)
    match e:
        case ProcessBooted():
            epochs = tuple(
                replace(x, superseded_by=e.epoch, superseded_at=e.at) if x.superseded_by is None else x
                for x in state.epochs
            )
            new = EpochState(process=e.process, epoch=e.epoch, booted_at=e.booted_at,
                             recorded_at=e.at, host=e.host, pid=e.pid)  # fmt: skip
            return replace(state, epochs=(*epochs, new), version=state.version + 1)
        case ProcessStopping():
            return _with_epoch(state, e.epoch, stopping_at=e.at)
        case ProcessStopped():
            return _with_epoch(state, e.epoch, stopped_at=e.at)
        case ProcessSweepSkipped():
            return _with_epoch(state, e.epoch, sweep_skipped=e.why)
        case ProcessSweepFailed():
            return _with_epoch(state, e.epoch, sweep_failed_at=e.at)
        case _:
            assert_never(e)


def _with_epoch(state: ProcessState, epoch: str, **changes: object) -> ProcessState:
    epochs = tuple(replace(x, **changes) if x.epoch == epoch else x for x in state.epochs)
    return replace(state, epochs=epochs, version=state.version + 1)


def fold(events: Iterable[ProcessEvent], state: ProcessState | None = None) -> ProcessState | None:
    for e in events:
        state = evolve(state, e)
    return state


def decide(cmd: ProcessEvent, state: ProcessState | None) -> list[ProcessEvent]:
    tag = tag_of(cmd)
    cmd = replace(cmd, at=cmd.at.astimezone(UTC))
    known = state.epoch(cmd.epoch) if state is not None else None
    match cmd:
        case ProcessBooted():
            cmd = replace(cmd, booted_at=cmd.booted_at.astimezone(UTC))
            if known is not None:
                if known.booted_at == cmd.booted_at and known.recorded_at == cmd.at:
                    return []  # the same boot again
                raise IllegalTransition(cmd.process, "booted", tag, f"epoch {cmd.epoch!r} was already booted")
            return [cmd]
        case ProcessStopping():
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [] if known.stopping_at is not None or known.stopped_at is not None else [cmd]
        case ProcessStopped():
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [] if known.stopped_at is not None else [cmd]
        case ProcessSweepSkipped() | ProcessSweepFailed():
            # Every sweep that skips or gives up says so: no dedupe (a second sweep of
            # the same epoch is a second fact).
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [cmd]
        case _:
            assert_never(cmd)
