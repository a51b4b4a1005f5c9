"""A process slot's stream as a Decider: its boot epochs (rule O1).

Each `process.booted` starts a new epoch of the slot and supersedes the previous one;
`process.stopping` / `process.stopped` record a clean shutdown of one epoch;
`process.exited` records that someone saw the epoch's process die (rule O7);
`process.retired` that the slot retired with its last epoch (rule O8). A host's
boots, across every slot, fold into a `HostState` (`evolve_host`): which host boot ids
are over because a later boot on that host carried another one. A host is its machine
identity, never its name (rule O10): two machines that share a name are two hosts. Whether a run is orphaned is a fleet-wide question answered by projections/orphans.py from these
facts; this module only keeps one slot's history straight.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, assert_never

import msgspec

from epochledger.ledger.errors import IllegalTransition
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessEvent,
    ProcessExited,
    ProcessRetired,
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
EXITED = "O2-exited"
HOST_REBOOTED = "O2-host-rebooted"


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
    host_boot: str | None = None  # the host's boot id when it booted (rule O7)
    pid_start: int | None = None  # the process's start time, clock ticks after host boot
    machine: str | None = None  # the host's machine id (rule O10): None, no reboot can end it
    superseded_by: str | None = None
    superseded_at: datetime | None = None
    stopping_at: datetime | None = None
    stopped_at: datetime | None = None
    # The first process.exited recorded for it (rule O7): when, who saw it, and how.
    exited_at: datetime | None = None
    exited_by: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    exit_evidence: str | None = None
    # The epoch's sweep skipped the O3 time fallback (why), or gave up (when): rule O5.
    sweep_skipped: str | None = None
    sweep_failed_at: datetime | None = None
    # The slot retired with this epoch, its last (rule O8): when. A later boot brings the
    # slot back with a new epoch, which has none.
    retired_at: datetime | None = None

    @property
    def live(self) -> bool:
        """Live by the facts of its own slot's stream: not superseded, stopped or exited.
        Whether its host rebooted is a fact of the host, not of the slot: ask
        `end_of(epoch, host)` with the host's state, as every rule does."""
        return end_of(self, None) is None


class Reboot(msgspec.Struct, frozen=True, kw_only=True):
    """The boot that showed a host boot id is over: a later boot on the same host that
    carried another host boot id (rule O7)."""

    host_boot: str  # the id the host booted with since
    process: str  # the slot and epoch whose boot carried it
    epoch: str
    at: datetime  # when that boot was recorded


class HostState(msgspec.Struct, frozen=True, kw_only=True):
    """One host's boots, across every slot, in log order: its latest host boot id and
    every host boot id that is over (each with the boot that ended it). A host is one
    machine id (rule O10), whatever names its boots gave it."""

    machine: str
    host_boot: str  # the host boot id of the latest boot that recorded one
    ended: dict[str, Reboot] = {}


def evolve_host(state: HostState | None, e: ProcessBooted) -> HostState | None:
    """The host's state after a boot. A boot that names no machine or no host boot id
    says nothing about any host (rule O10: it cannot tell, so it is never a reboot). A
    host boot id, once over, stays over: a kernel never boots with the same id twice, so
    a boot that still carries an ended id (history recorded late) cannot bring it back,
    and does not end the id that ended it."""
    if e.machine is None or e.host_boot is None:
        return state
    if state is None:
        return HostState(machine=e.machine, host_boot=e.host_boot)
    if e.host_boot == state.host_boot or e.host_boot in state.ended:
        return state
    reboot = Reboot(host_boot=e.host_boot, process=e.process, epoch=e.epoch, at=e.at)
    return HostState(machine=state.machine, host_boot=e.host_boot, ended={**state.ended, state.host_boot: reboot})


def rebooted(epoch: EpochState, host: HostState | None) -> Reboot | None:
    """The boot that showed `epoch`'s host rebooted since `epoch` booted, or None: the
    same machine with another boot id (rule O10). Another machine's boots, whatever its
    name, never end it; an epoch that recorded no machine id or no host boot id cannot
    be told rebooted."""
    if host is None or epoch.host_boot is None or epoch.machine is None or epoch.machine != host.machine:
        return None
    return host.ended.get(epoch.host_boot)


def end_of(epoch: EpochState, host: HostState | None) -> tuple[str, str] | None:
    """Why `epoch` is no longer live, as (rule, sentence), or None while it is live.

    THE liveness definition (rule O7): fencing (ledger/run.py), the orphan rule
    (projections/orphans.py), the sweep, the probe and the CLI all ask it. `host` is the
    state of the epoch's host (the hosts view, projections/hosts.py), or None when no
    host facts are known. An epoch is no longer live when a later boot of its slot
    superseded it, it recorded a clean stop, someone recorded that its process exited,
    or a later boot on its host (the same machine id, rule O10) carried another host
    boot id; the first that holds, in
    that order, names the rule. Each is an event with its evidence: never a guess from
    the clock or the run's age."""
    if epoch.superseded_by is not None:
        return SUPERSEDED, f"epoch {epoch.epoch} of {epoch.process} was superseded by epoch {epoch.superseded_by}"
    if epoch.stopped_at is not None:
        return (
            STOPPED,
            f"epoch {epoch.epoch} of {epoch.process} recorded a clean stop at {epoch.stopped_at.isoformat()}",
        )
    if epoch.exited_at is not None:
        how = "".join(
            f", {k} {v}" for k, v in (("exit code", epoch.exit_code), ("signal", epoch.exit_signal)) if v is not None
        )
        said = f": {epoch.exit_evidence}" if epoch.exit_evidence else ""
        return EXITED, (
            f"epoch {epoch.epoch} of {epoch.process} exited (seen by {epoch.exited_by} at "
            f"{epoch.exited_at.isoformat()}{how}){said}"
        )
    if (r := rebooted(epoch, host)) is not None:
        return HOST_REBOOTED, (
            f"host {epoch.host} (machine {epoch.machine}) of epoch {epoch.epoch} of "
            f"{epoch.process} rebooted: it booted with host boot {epoch.host_boot}, and epoch "
            f"{r.epoch} of {r.process} booted on that machine at {r.at.isoformat()} with host "
            f"boot {r.host_boot}"
        )
    return None


class ProcessRow(msgspec.Struct, frozen=True, kw_only=True):
    """A slot's state as stored and hashed (the epochs view's rows, replay's state):
    the shape ProcessState had when it was a Struct, so the bytes are unchanged."""

    process: str
    epochs: tuple[EpochState, ...] = ()
    version: int = 0


class _Core:
    """The slot's history shared by successive states of one fold (rule W1): epochs in
    boot order, and each epoch's revisions as (step, EpochState). Append-only: a state
    reads it as of its own step, so a state handed out never changes. Only the state at
    the tip extends it (O(1)); evolving an older state (a batch that was rolled back, a
    second fold from one state) first copies the part that state sees (a fork)."""

    __slots__ = ("at", "boot_steps", "lock", "open", "order", "revisions", "tip")

    def __init__(self) -> None:
        self.order: list[str] = []  # epoch ids in boot order
        self.boot_steps: list[int] = []  # the step that booted order[i] (increasing)
        self.revisions: list[list[tuple[int, EpochState]]] = []  # per index, by step
        self.at: dict[str, list[int]] = {}  # epoch id -> its indices (one, unless a log booted an id twice)
        self.open: list[int] = []  # indices not superseded at the tip (normally the last one)
        self.tip = 0
        self.lock = threading.Lock()

    def fork(self, step: int) -> _Core:
        """A new core holding what the state at `step` sees."""
        core = _Core()
        for i, boot_step in enumerate(self.boot_steps):
            if boot_step > step:
                break
            core.order.append(self.order[i])
            core.boot_steps.append(boot_step)
            core.revisions.append([r for r in self.revisions[i] if r[0] <= step])
            core.at.setdefault(self.order[i], []).append(i)
            if core.revisions[i][-1][1].superseded_by is None:
                core.open.append(i)
        core.tip = step
        return core

    def epoch_at(self, i: int, step: int) -> EpochState:
        revisions = self.revisions[i]
        for k in range(len(revisions) - 1, -1, -1):  # the tip's is the last; an older state's a few back
            if revisions[k][0] <= step:
                return revisions[k][1]
        raise AssertionError("an epoch is read only by states that saw its boot")

    def count_at(self, step: int) -> int:
        if step >= self.tip:
            return len(self.order)
        return bisect.bisect_right(self.boot_steps, step)


class ProcessState:
    """A slot's state: its epochs in boot order and its stream version. An immutable
    value (equality, encoding as ProcessRow) whose fold is linear and whose per-write use
    is O(1): a boot appends one epoch and supersedes the previous one, a stop revises one
    epoch, and a lookup by id is a dict lookup (rule W1), instead of a tuple of every
    epoch rebuilt on each boot."""

    __slots__ = ("_core", "_step", "process", "version")

    def __init__(self, *, process: str, epochs: Iterable[EpochState] = (), version: int = 0):
        core = _Core()
        for i, e in enumerate(epochs):
            core.order.append(e.epoch)
            core.boot_steps.append(0)
            core.revisions.append([(0, e)])
            core.at.setdefault(e.epoch, []).append(i)
            if e.superseded_by is None:
                core.open.append(i)
        self._init(process, version, core, 0)

    def _init(self, process: str, version: int, core: _Core, step: int) -> None:
        object.__setattr__(self, "process", process)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_step", step)

    @classmethod
    def _of(cls, process: str, version: int, core: _Core, step: int) -> ProcessState:
        state = cls.__new__(cls)
        state._init(process, version, core, step)
        return state

    process: str
    version: int
    _core: _Core
    _step: int

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ProcessState is immutable ({name})")

    @property
    def epochs(self) -> tuple[EpochState, ...]:
        """Every epoch in boot order. O(epochs): for readers of the whole slot."""
        core, step = self._core, self._step
        return tuple(core.epoch_at(i, step) for i in range(core.count_at(step)))

    def __len__(self) -> int:
        """How many epochs the slot has booted."""
        return self._core.count_at(self._step)

    @property
    def current(self) -> EpochState | None:
        n = len(self)
        return self._core.epoch_at(n - 1, self._step) if n else None

    @property
    def retired(self) -> bool:
        """The slot retired with its last epoch and has not booted since (rule O8)."""
        current = self.current
        return current is not None and current.retired_at is not None

    def _index(self, epoch: str) -> int | None:
        found = self._core.at.get(epoch)
        if not found or found[0] >= len(self):
            return None
        return found[0]

    def epoch(self, epoch: str) -> EpochState | None:
        i = self._index(epoch)
        return None if i is None else self._core.epoch_at(i, self._step)

    def booted_no_later(self, first: str, second: str) -> bool | None:
        """Was epoch `first` booted at or before epoch `second` in this slot's log order?
        None if either is not an epoch of this slot."""
        a, b = self._index(first), self._index(second)
        if a is None or b is None:
            return None
        return a <= b

    def with_version(self, version: int) -> ProcessState:
        return ProcessState._of(self.process, version, self._core, self._step)

    def row(self) -> ProcessRow:
        return ProcessRow(process=self.process, epochs=self.epochs, version=self.version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProcessState):
            return NotImplemented
        return (self.process, self.version, self.epochs) == (other.process, other.version, other.epochs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ProcessState(process={self.process!r}, epochs={self.epochs!r}, version={self.version!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_from_row, (self.row(),))


def _from_row(row: ProcessRow) -> ProcessState:
    return ProcessState(process=row.process, epochs=row.epochs, version=row.version)


def enc_hook(obj: Any) -> Any:
    """msgspec's enc_hook for a ProcessState: its ProcessRow (the stored shape)."""
    if isinstance(obj, ProcessState):
        return obj.row()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def dec_hook(tp: Any, obj: Any) -> Any:
    """msgspec's dec_hook for a ProcessState stored as a ProcessRow."""
    if tp is ProcessState:
        return _from_row(msgspec.convert(obj, ProcessRow, strict=False))
    raise NotImplementedError(f"cannot decode {tp}")


def evolve(state: ProcessState | None, e: ProcessEvent) -> ProcessState:
    if state is None:
        state = ProcessState(process=e.process)
    core, step = state._core, state._step
    with core.lock:
        if core.tip != step:  # this state was evolved before: fork what it sees
            core = core.fork(step)
        match e:
            case ProcessBooted():
                for i in core.open:  # the previous epoch (every earlier one already is)
                    latest = core.revisions[i][-1][1]
                    core.revisions[i].append((step + 1, replace(latest, superseded_by=e.epoch, superseded_at=e.at)))
                new = EpochState(
                    process=e.process,
                    epoch=e.epoch,
                    booted_at=e.booted_at,
                    recorded_at=e.at,
                    host=e.host,
                    pid=e.pid,
                    host_boot=e.host_boot,
                    pid_start=e.pid_start,
                    machine=e.machine,
                )
                core.at.setdefault(e.epoch, []).append(len(core.order))
                core.open = [len(core.order)]
                core.order.append(e.epoch)
                core.boot_steps.append(step + 1)
                core.revisions.append([(step + 1, new)])
            case ProcessStopping():
                _with_epoch(core, step, e.epoch, stopping_at=e.at)
            case ProcessStopped():
                _with_epoch(core, step, e.epoch, stopped_at=e.at)
            case ProcessExited():
                # decide keeps only the first exit of an epoch; a fold of history written
                # otherwise (an import) still keeps the first as the epoch's end.
                if (known := state.epoch(e.epoch)) is None or known.exited_at is None:
                    _with_epoch(
                        core,
                        step,
                        e.epoch,
                        exited_at=e.at,
                        exited_by=e.observed_by,
                        exit_code=e.exit_code,
                        exit_signal=e.signal,
                        exit_evidence=e.evidence,
                    )
            case ProcessSweepSkipped():
                _with_epoch(core, step, e.epoch, sweep_skipped=e.why)
            case ProcessSweepFailed():
                _with_epoch(core, step, e.epoch, sweep_failed_at=e.at)
            case ProcessRetired():
                _with_epoch(core, step, e.epoch, retired_at=e.at)
            case _:
                assert_never(e)
        core.tip = step + 1
    return ProcessState._of(state.process, state.version + 1, core, step + 1)


def _with_epoch(core: _Core, step: int, epoch: str, **changes: object) -> None:
    for i in core.at.get(epoch, ()):
        core.revisions[i].append((step + 1, replace(core.revisions[i][-1][1], **changes)))


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
                # The same boot again (a retried delivery) states every fact of the boot
                # as recorded; a re-send that differs in one (another pid) is another
                # boot claiming the epoch, never dropped as a duplicate (rule I1).
                recorded = (
                    known.recorded_at,
                    known.booted_at,
                    known.host,
                    known.pid,
                    known.host_boot,
                    known.pid_start,
                    known.machine,
                )
                stated = (cmd.at, cmd.booted_at, cmd.host, cmd.pid, cmd.host_boot, cmd.pid_start, cmd.machine)
                if recorded == stated:
                    return []
                why = f"epoch {cmd.epoch!r} was already booted"
                if recorded[:2] == stated[:2]:  # the same instants: name the fact the re-send changes
                    names = ("host", "pid", "host_boot", "pid_start", "machine")
                    field, was, now = next(
                        (n, a, b) for n, a, b in zip(names, recorded[2:], stated[2:], strict=True) if a != b
                    )
                    why += f", with {field} {was!r}, not {now!r}: a re-send that differs is not the same boot"
                raise IllegalTransition(cmd.process, "booted", tag, why)
            return [cmd]
        case ProcessStopping():
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [] if known.stopping_at is not None or known.stopped_at is not None else [cmd]
        case ProcessStopped():
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [] if known.stopped_at is not None else [cmd]
        case ProcessExited():
            # A process dies once: the first report of its exit stands, and a second
            # one (the probe and the supervisor both saw it) finds the effect already
            # holds and appends nothing. A stop before an exit is no reason to refuse
            # it: both are facts about the epoch.
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [] if known.exited_at is not None else [cmd]
        case ProcessSweepSkipped() | ProcessSweepFailed():
            # Every sweep that skips or gives up says so: no dedupe (a second sweep of
            # the same epoch is a second fact).
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            return [cmd]
        case ProcessRetired():
            # A slot retires with its last epoch: an older one says nothing about the
            # slot now (a boot raced the retirement). Whether the epoch is over and no
            # run is left running is the retirer's question, asked of the orphan view
            # (projections/orphans.py, `retirable`), where the runs and the hosts are.
            if known is None:
                raise IllegalTransition(cmd.process, None, tag, f"unknown epoch {cmd.epoch!r}")
            assert state is not None
            current = state.current
            if current is None or current.epoch != cmd.epoch:
                raise IllegalTransition(
                    cmd.process,
                    "booted",
                    tag,
                    f"epoch {cmd.epoch!r} is not the slot's last epoch: a slot retires only with its last epoch",
                )
            return [] if known.retired_at is not None else [cmd]
        case _:
            assert_never(cmd)
