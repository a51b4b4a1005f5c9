"""Orphan verdicts: the ONE definition of "this run is an orphan" (rules O2, O3, O4).

A view is a pure fold of recorded events (process streams and run streams, through the
same `evolve` functions as the write side), and a verdict is a pure function of the
view: no clock, no environment, so a live view, a replay of any prefix and a rebuild
give the same verdicts. The sweep (epochledger/sweep.py), the CLI (`runs --orphaned`) and
replay ask this module; nothing else decides what an orphan is.

The rules (argued in docs/operations.md):
- O2, clock-free: a running run whose owner epoch is no longer live (superseded by a
  later boot of its process, cleanly stopped, recorded as exited, or its host rebooted:
  ledger.process.end_of, rule O7) is orphaned at ANY age. A run owned by a live
  epoch is NEVER orphaned, however long it runs. No age threshold enters here: a flat
  threshold kills the healthy 88-minute nightly and misses the 20-minute-old orphan.
- O3, the fallback for a running run with a process but no (known) owner epoch: it is
  orphaned relative to an epoch of that process iff it started before that epoch's
  `booted_at - margin`. NO FLOOR on that cutoff ("at least 30 minutes old" misses a run
  started at 02:00 and redeployed at 02:20 forever). Both instants are in the events,
  so this too is clock-free; the wall clock enters only in the sweep's step-back guard,
  and once a sweep has recorded `process.sweep_skipped` for an epoch, the fallback
  relative to that epoch is off here as well, so the view never disagrees with it.
- O9, no running run escapes judgement in silence: a running run recorded with neither
  an epoch nor a process has no slot to judge it by O3. If the ledger names a default
  slot (`ledger.default_slot`, ledger/settings.py), that slot's epochs judge it by O3;
  otherwise it is listed (`unjudged`) as one no slot can judge, by `runs --orphaned`
  and every sweep report, never passed over without a word.

A policy is a function `(view, run, relative_to, margin) -> Verdict | None`;
`verdicts(..., policy=...)` lets counterfactual replay (rule R4) plug in another one,
such as a flat 30-minute threshold, over the same view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

import msgspec

from epochledger.ledger import lifecycle
from epochledger.ledger import process as process_mod
from epochledger.ledger import run as run_mod
from epochledger.ledger import settings as settings_mod
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import LedgerEventBase, ProcessBooted, ProcessEventBase, Recorded, RunEventBase
from epochledger.ledger.process import EpochState, HostState, ProcessState
from epochledger.ledger.run import RunState
from epochledger.ledger.settings import Settings
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "orphans"
VERSION = 4  # 3: hosts keyed by machine id (rule O10); 4: the ledger's settings (its default slot, rule O9)

MARGIN = timedelta(seconds=1)  # rule O3; configurable per call, never floored

SUPERSEDED = process_mod.SUPERSEDED
STOPPED = process_mod.STOPPED
EXITED = process_mod.EXITED
HOST_REBOOTED = process_mod.HOST_REBOOTED
FALLBACK = "O3-fallback"
UNJUDGED = "O9-no-slot"  # a running run no slot can judge (rule O9)


_INDEX = "_by_id"  # View.find_epoch's index, by epoch id


class View(msgspec.Struct, dict=True):
    """Every process slot's epochs, every host's boots and every run's state, as of
    `position`. A msgspec Struct, not a dataclass, whose module imports `inspect` into
    every start (rule W2); its epoch index (`find_epoch`) is a cache kept in the
    instance's `__dict__`, outside its fields: never compared, shown or encoded."""

    processes: dict[str, ProcessState] = msgspec.field(default_factory=dict)
    runs: dict[str, RunState] = msgspec.field(default_factory=dict)
    position: int = 0
    hosts: dict[str, HostState] = msgspec.field(default_factory=dict)  # by machine id (rule O10)
    settings: Settings | None = None  # the ledger's own stream (ledger/settings.py)

    def epoch(self, process: str, epoch: str) -> EpochState | None:
        p = self.processes.get(process)
        return p.epoch(epoch) if p is not None else None

    def find_epoch(self, epoch: str) -> EpochState | None:
        """The epoch with this id, in whatever slot booted it; None if no slot did, or
        if two slots booted the same id (the view refuses to guess)."""
        index: dict[str, list[EpochState]] | None = self.__dict__.get(_INDEX)
        if index is None:
            index = {}
            for p in self.processes.values():
                for e in p.epochs:
                    index.setdefault(e.epoch, []).append(e)
            self.__dict__[_INDEX] = index
        found = index.get(epoch, [])
        return found[0] if len(found) == 1 else None

    def current(self, process: str) -> EpochState | None:
        p = self.processes.get(process)
        return p.current if p is not None else None

    def host_of(self, epoch: EpochState) -> HostState | None:
        """The boots of `epoch`'s machine (rule O10: never of its host name)."""
        return self.hosts.get(epoch.machine) if epoch.machine is not None else None

    def end_of(self, epoch: EpochState) -> tuple[str, str] | None:
        """Why `epoch` is no longer live, or None: ledger.process.end_of with its host's
        facts (rule O7)."""
        return process_mod.end_of(epoch, self.host_of(epoch))

    @property
    def default_slot(self) -> str | None:
        """The slot whose epochs judge runs recorded with neither epoch nor process (O9)."""
        return self.settings.default_slot if self.settings is not None else None


def initial() -> View:
    return View()


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if isinstance(e, RunEventBase):
        view.runs[e.run] = run_mod.evolve(view.runs.get(e.run), e)
    elif isinstance(e, LedgerEventBase):
        view.settings = settings_mod.evolve(view.settings, e)
    elif isinstance(e, ProcessEventBase):  # a role's grant (rule T7) is no fact of the orphan rule
        view.processes[e.process] = process_mod.evolve(view.processes.get(e.process), e)
        view.__dict__.pop(_INDEX, None)
        if (
            type(e) is ProcessBooted
            and e.machine is not None
            and (h := process_mod.evolve_host(view.hosts.get(e.machine), e))
        ):
            view.hosts[e.machine] = h
    view.position = rec.position
    return view


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    return fold_records(initial, evolve, records, view)


# As a view (projections/view.py): not registered (the registry covers it as the runs,
# epochs and hosts views), yet the engine can materialize it whole (tests/projections/test_engine.py).
VIEW: ViewSpec[View] = ViewSpec(NAME=NAME, VERSION=VERSION, initial=initial, evolve=evolve)


# ------------------------------------------------------------------ verdicts
class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why a run is an orphan, from the ledger alone: the evidence a sweep copies into
    its `run.recovered` event."""

    run: str
    rule: str  # SUPERSEDED | STOPPED | EXITED | HOST_REBOOTED | FALLBACK
    owner_process: str | None = None
    owner_epoch: str | None = None
    superseded_by: str | None = None  # O2-superseded
    stopped_at: datetime | None = None  # O2-stopped
    exited_at: datetime | None = None  # O2-exited: the owner's process.exited
    observed_by: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    host: str | None = None  # O2-host-rebooted: the owner's host and host boot id,
    host_boot: str | None = None
    rebooted_to: str | None = None  # the later boot's host boot id,
    rebooted_by: str | None = None  # and its epoch
    evidence: str | None = None  # O2-exited / O2-host-rebooted: end_of's sentence
    started_at: datetime | None = None
    relative_to: str | None = None  # O3: the epoch the fallback was judged against
    default_slot: str | None = None  # O9: the run named no process; the ledger's default slot judged it
    booted_at: datetime | None = None  # O3: its boot instant
    cutoff: datetime | None = None  # O3: booted_at - margin
    margin: float | None = None  # O3, seconds

    @property
    def uses_time(self) -> bool:
        """The verdict rests on wall-clock stamps (O3), so the sweep's step-back guard
        applies to it. O2 verdicts rest on epoch facts alone."""
        return self.rule == FALLBACK

    def explain(self) -> str:
        if self.rule == SUPERSEDED:
            return (
                f"owner epoch {self.owner_epoch} of {self.owner_process} was superseded by "
                f"epoch {self.superseded_by}; orphaned at any age, rule O2"
            )
        if self.rule == STOPPED:
            return (
                f"owner epoch {self.owner_epoch} of {self.owner_process} recorded a clean stop at "
                f"{_iso(self.stopped_at)}; orphaned at any age, rule O2"
            )
        if self.rule in (EXITED, HOST_REBOOTED):
            return f"owner {self.evidence}; orphaned at any age, rules O2, O7"
        if self.default_slot is not None:
            return (
                f"no epoch and no process; started at {_iso(self.started_at)}, before the cutoff "
                f"{_iso(self.cutoff)} = boot instant {_iso(self.booted_at)} of epoch {self.relative_to} "
                f"of {self.default_slot} (the ledger's default slot for unowned runs) - {self.margin:g}s "
                "margin; the time fallback, rules O3, O9"
            )
        return (
            f"no live owner epoch; started at {_iso(self.started_at)}, before the cutoff "
            f"{_iso(self.cutoff)} = boot instant {_iso(self.booted_at)} of epoch {self.relative_to} "
            f"of {self.owner_process} - {self.margin:g}s margin; the time fallback, rule O3"
        )


def _iso(t: datetime | None) -> str:
    return t.isoformat() if t is not None else "?"


Policy = Callable[[View, RunState, "EpochState | None", timedelta], "Verdict | None"]


def owner_of(view: View, run: RunState) -> EpochState | None:
    """The epoch that owns a run: the epoch its last start named, wherever that epoch
    booted (its run's `process` may name another slot: a run queued for one slot can be
    started by another slot's epoch). None if the start named no epoch, or one no slot
    booted."""
    if run.epoch is None:
        return None
    if run.process is not None and (e := view.epoch(run.process, run.epoch)) is not None:
        return e
    return view.find_epoch(run.epoch)


def judging_slot(view: View, run: RunState) -> str | None:
    """The slot whose epochs judge `run` by the O3 fallback: its own process, else, for
    a run recorded with neither an epoch nor a process, the ledger's default slot (rule
    O9), else None (no slot can judge it: `unjudged`)."""
    if run.process is not None:
        return run.process
    return view.default_slot if run.epoch is None else None


def epoch_policy(view: View, run: RunState, relative_to: EpochState | None, margin: timedelta) -> Verdict | None:
    """Rule O2 then O3. `relative_to` is the epoch an unowned run is judged against
    (the sweeping epoch, or its process's current epoch when None)."""
    if run.deleted or not lifecycle.can_be_orphaned(run.status, run.code):
        return None
    owner = owner_of(view, run)
    if owner is not None:
        # O2. Liveness is a fact of the process stream (ledger.process.end_of); the
        # run's age plays no part. Replacing this with an age check is the
        # 30-minute-threshold incident.
        ended = view.end_of(owner)
        if ended is None:
            return None  # a live owner: never an orphan, however long the run has run
        return _o2_verdict(view, run, owner, *ended)
    # O3 fallback: a process (or the default slot, O9) but no known owner epoch.
    judge = judging_slot(view, run)
    if judge is None or run.started_at is None:
        return None
    rel = relative_to if relative_to is not None else view.current(judge)
    if rel is None or rel.process != judge or rel.sweep_skipped is not None:
        return None
    if run.slot_epoch is not None:
        # Log order, not the clock: a run whose start was recorded while `rel` (or a
        # later epoch) was its slot's current epoch was started after `rel` booted, so
        # it is never `rel`'s orphan, even if the wall clock read early when it started.
        slot = view.processes.get(judge)
        if slot is not None and slot.booted_no_later(rel.epoch, run.slot_epoch):
            return None
    # No floor: the cutoff is the boot instant minus the margin, never "at least N
    # minutes old" (a floor misses a run started at 02:00 and redeployed at 02:20).
    cutoff = rel.booted_at - margin
    if run.started_at < cutoff:
        return Verdict(
            run=run.run,
            rule=FALLBACK,
            owner_process=run.process,
            owner_epoch=run.epoch,
            started_at=run.started_at,
            relative_to=rel.epoch,
            booted_at=rel.booted_at,
            cutoff=cutoff,
            margin=margin.total_seconds(),
            default_slot=judge if run.process is None else None,
        )
    return None


def _o2_verdict(view: View, run: RunState, owner: EpochState, rule: str, why: str) -> Verdict:
    """The verdict of an owner that is no longer live, with the evidence of the fact
    that ended it (the first of end_of's facts that holds)."""
    v = Verdict(
        run=run.run,
        rule=rule,
        owner_process=owner.process,
        owner_epoch=owner.epoch,
        superseded_by=owner.superseded_by,
        started_at=run.started_at,
    )
    if rule == STOPPED:
        return msgspec.structs.replace(v, stopped_at=owner.stopped_at)
    if rule == EXITED:
        return msgspec.structs.replace(
            v,
            exited_at=owner.exited_at,
            observed_by=owner.exited_by,
            exit_code=owner.exit_code,
            signal=owner.exit_signal,
            evidence=why,
        )
    if rule == HOST_REBOOTED:
        reboot = process_mod.rebooted(owner, view.host_of(owner))
        assert reboot is not None
        return msgspec.structs.replace(
            v,
            host=owner.host,
            host_boot=owner.host_boot,
            rebooted_to=reboot.host_boot,
            rebooted_by=reboot.epoch,
            evidence=why,
        )
    return v


MAX_MARGIN = timedelta(days=365)


def as_margin(margin: float | timedelta) -> timedelta:
    """Seconds (an int or a float) or a timedelta, from 0 to MAX_MARGIN (a year): the one
    check of every margin (sweep, preview, orphans, the CLI). Zero is allowed; negative
    is refused (it would turn the margin around and orphan runs the new process
    started itself); so are NaN, infinities and anything longer than a year (1e15 s
    overflowed timedelta, and `booted_at - margin` must stay far from datetime's ends)."""
    if isinstance(margin, bool) or not isinstance(margin, int | float | timedelta):
        raise InvalidInput(f"margin must be a number of seconds, got {margin!r}", where="margin")
    seconds = margin.total_seconds() if isinstance(margin, timedelta) else margin
    if not 0 <= seconds <= MAX_MARGIN.total_seconds():  # NaN fails both comparisons
        raise InvalidInput(
            f"margin must be from 0 to {MAX_MARGIN.total_seconds():.0f} seconds (a year), got {margin!r}",
            where="margin",
        )
    return margin if isinstance(margin, timedelta) else timedelta(seconds=seconds)


def verdicts(
    view: View, epoch: EpochState | None = None, margin: float | timedelta = MARGIN, policy: Policy = epoch_policy
) -> list[Verdict]:
    """Every orphan visible in `view`, sorted by run id.

    With `epoch` (a sweep): O2 orphans fleet-wide, and O3 fallback orphans of that
    epoch's own process judged against it. Without (a read): O2 orphans, and O3 judged
    against each process's current epoch."""
    m = as_margin(margin)
    out = [v for run in view.runs.values() if (v := _judge(view, run, epoch, m, policy)) is not None]
    return sorted(out, key=lambda v: v.run)


def _judge(view: View, run: RunState, epoch: EpochState | None, margin: timedelta, policy: Policy) -> Verdict | None:
    if epoch is None or judging_slot(view, run) == epoch.process:
        return policy(view, run, epoch, margin)
    # Another slot's run, seen by this slot's sweep: O2 facts hold fleet-wide, but the
    # time fallback is judged only by that slot's own epoch, against its own clock.
    v = policy(view, run, None, margin)
    return None if v is None or v.uses_time else v


def is_orphaned(
    view: View,
    run: str,
    epoch: EpochState | None = None,
    margin: float | timedelta = MARGIN,
    policy: Policy = epoch_policy,
) -> bool:
    state = view.runs.get(run)
    return state is not None and _judge(view, state, epoch, as_margin(margin), policy) is not None


class Unjudged(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A running run no slot can judge (rule O9): it has no owner epoch and no slot
    judges it by O3 (no process, and the ledger names no default slot)."""

    run: str
    rule: str = UNJUDGED
    started_at: datetime | None = None
    epoch: str | None = None  # an epoch its start named that no slot booted

    def explain(self) -> str:
        how = (
            f"its start named epoch {self.epoch}, which no slot booted, and no process"
            if self.epoch is not None
            else "it was started with neither an epoch nor a process"
        )
        return (
            f"no slot can judge this run: {how}, and the ledger names no default slot for unowned runs; "
            "it stays running until someone records its end, rule O9"
        )


def unjudged(view: View) -> list[Unjudged]:
    """Every running run in `view` no slot can judge, sorted by run id (rule O9): the
    orphan rule cannot say whether it is an orphan, so it is named, never passed over."""
    out = [
        Unjudged(run=run.run, started_at=run.started_at, epoch=run.epoch)
        for run in view.runs.values()
        if not run.deleted
        and lifecycle.can_be_orphaned(run.status, run.code)
        and owner_of(view, run) is None
        and judging_slot(view, run) is None
    ]
    return sorted(out, key=lambda u: u.run)


def retirable(view: View) -> list[EpochState]:
    """The last epochs of the slots that retire now (rule O8), sorted by slot: slots not
    retired yet whose last epoch is over (end_of, rule O7) and that no run the orphan
    rule could still judge names, by its slot or its owner epoch. Those runs are the
    running ones (`lifecycle.can_be_orphaned`): until the sweep recovers them the slot
    stays, so a retired slot never hides an orphan. In a view of the orphan candidates
    (Ledger.orphan_view(candidates_only=True)) every such run is there: a running run
    that is not a candidate is owned by its slot's live current epoch."""
    named: set[str] = set()
    for run in view.runs.values():
        if run.deleted or not lifecycle.can_be_orphaned(run.status, run.code):
            continue
        if run.process is not None:
            named.add(run.process)
        if (owner := owner_of(view, run)) is not None:
            named.add(owner.process)
        if (judge := judging_slot(view, run)) is not None:
            named.add(judge)  # the default slot judges unowned runs (rule O9): it stays while they run
    out = []
    for name in sorted(view.processes):
        slot = view.processes[name]
        last = slot.current
        if last is None or slot.retired or name in named or view.end_of(last) is None:
            continue
        out.append(last)
    return out


def epochs(view: View) -> list[EpochState]:
    """Every epoch of every process slot, slots sorted by name, epochs in boot order."""
    return [e for name in sorted(view.processes) for e in view.processes[name].epochs]
