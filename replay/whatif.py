"""What-if: another orphan policy over the recorded history (rule R4).

The record holds the decision points: every boot's sweep (and any later sweep of an
epoch). At each one this module folds the orphans view exactly as the sweep saw it (the
log up to just before the sweep's own records: its `process.sweep_skipped`, its
`run.recovered` events, one group commit), asks the alternative policy for its verdicts
through the one orphan rule's entry point (`projections.orphans.verdicts(...,
policy=...)`), sets them beside what the recorded sweep did, and lists every
difference:

- `killed-live`: the alternative would have recovered a run the recorded rule holds to
  be healthy (not an orphan by rule O2/O3 at that instant), with its owner, its age at
  the sweep, its last checkpoint and what the record says happened to it next;
- `missed`: the recorded sweep recovered an orphan the alternative never recovers, with
  how long it would have stayed `running` (to the end of the replay, or until the record
  starts it again);
- `late`: the alternative recovers it only at a later sweep, with how much later;
- `early`: the alternative recovers an orphan (by the recorded rule) before any recorded
  sweep did.

The alternative's own world. Once the alternative has missed an orphan, later sweeps see
that run still `running` as it was before the recorded recovery (the record's later
events on it answered a recovery that, under the alternative, never happened); once it
has killed a run, later sweeps see it recovered until the record starts it again. This
is a replay of verdicts, not of the scheduler: what a scheduler would have done
differently after a different verdict (resume a run, start another) is not invented.

A policy is a plain function (`Policy` below); a NAME[:ARG] is turned into one by a
factory, built in (`BUILTIN`) or installed under the entry point group
`epochledger.policies` (docs/forensics.md, "What-if"). Nothing here reads the clock:
the sweep's "now" is the wall-clock reading its records carry.

What is read. A built-in policy judges a run by that run alone (`_judges_one_run`), so
its what-if reads the slots' streams, the ledger's settings and the runs a sweep could
judge (projections/decisions.py: the rule that makes it enough), and every other event
by its position only (`_judged`, `_Replay.passed`); a plug-in's reads the whole log.
The two give the same result (tests/replay/test_whatif_reads.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from epochledger.ledger import lifecycle
from epochledger.ledger.codes import PROCESS_ORPHANED
from epochledger.ledger.errors import BadPolicy, InvalidInput, StreamGap
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    Recorded,
    RunCheckpointed,
    RunDeleted,
    RunEventBase,
    RunFenced,
    RunRecovered,
    RunStarted,
    Status,
    ledger_stream,
    process_stream,
    run_stream,
)
from epochledger.ledger.process import EpochState
from epochledger.ledger.run import RunState
from epochledger.ledger.store import Store, check_position
from epochledger.projections import decisions, orphans
from epochledger.projections.decisions import sweep_records
from epochledger.projections.orphans import Verdict, View
from epochledger.projections.spans import micros

if TYPE_CHECKING:  # importlib.metadata (~10 ms of a traced start) is imported where a policy is looked up (W2)
    from importlib import metadata

ENTRY_POINT_GROUP = "epochledger.policies"

replace = msgspec.structs.replace


# ------------------------------------------------------------ decision points
class Beat(msgspec.Struct, frozen=True, kw_only=True):
    """A run's last checkpoint as the log holds it (RunState keeps no instant for it)."""

    at: datetime
    node: str
    ref: str


class Sweep(msgspec.Struct):
    """One decision point: the sweep of `epoch`, as the record holds it.

    - `view`: the orphans view the sweep judged (the alternative's world: see the module doc);
    - `epoch`: the sweeping epoch; `now`: the sweep's wall-clock reading, from its records
      (`process.sweep_skipped.now`, a recovery's `at`), else the boot's recorded instant;
    - `margin`: the O3 margin (1 s); `fallback_skipped`: the recorded sweep skipped the
      time fallback (the clock stepped back) and said why;
    - `beats`: each run's last checkpoint since its last start (`beat(run)`)."""

    view: View
    epoch: EpochState
    now: datetime
    position: int
    margin: timedelta = orphans.MARGIN
    fallback_skipped: str | None = None
    beats: dict[str, Beat] = msgspec.field(default_factory=dict)

    def beat(self, run: str) -> Beat | None:
        return self.beats.get(run)


class Policy(Protocol):
    """The signature of a what-if policy: a plain function.

        def policy(sweep: Sweep, run: RunState, relative_to: EpochState | None) -> Verdict | None

    Called for every run of `sweep.view` (deleted and non-running runs included: ask
    `ledger.lifecycle.can_be_orphaned`). `relative_to` is the epoch an unowned run is judged
    against by time: the sweeping epoch for its own slot's runs, None for another slot's
    (exactly as projections/orphans.py asks the recorded rule). Return a Verdict to recover
    the run; its `rule` names your rule. A verdict whose rule is `O3-fallback` counts as
    time-based and is dropped for another slot's runs, like the recorded rule's."""

    def __call__(self, sweep: Sweep, run: RunState, relative_to: EpochState | None, /) -> Verdict | None: ...


Factory = Callable[[str | None], Policy]  # NAME[:ARG] -> a policy; raises ValueError on a bad ARG

_ONE_RUN = "_judges_one_run"  # set on each built-in policy by _judges_one_run


def _judges_one_run(policy: Policy) -> Policy:
    """A built-in policy, marked: its verdict on a run rests on that run's own state and
    beat, the sweep's epoch, instant, margin and step-back skip, and the view's slots,
    hosts and settings, and it judges only a run the orphan rule can judge at all
    (`lifecycle.can_be_orphaned`). The what-if then reads only the runs a sweep could
    judge (projections/decisions.py); a plug-in, which may judge a run by the others,
    is replayed over the whole log."""
    setattr(policy, _ONE_RUN, True)
    return policy


# ------------------------------------------------------------ built-in policies
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | None) -> timedelta:
    """`90s`, `30m`, `1h30m`, `2d`, or plain seconds (`1800`); > 0 and at most a year."""
    if not text:
        raise ValueError("needs a duration, e.g. 30m, 90s, 1h30m or 1800 (seconds)")
    pos, seconds = 0, 0.0
    while pos < len(text):
        m = _DURATION.match(text, pos)
        if m is None:
            raise ValueError(f"not a duration: {text!r} (e.g. 30m, 90s, 1h30m, 1800)")
        seconds += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not 0 < seconds <= orphans.MAX_MARGIN.total_seconds():
        raise ValueError(f"the duration must be more than 0 and at most a year, got {text!r}")
    return timedelta(seconds=seconds)


def epoch_rule(arg: str | None) -> Policy:
    """`epoch`: the recorded rule itself (O2, then O3 with its step-back guard as the
    record says it ran). Over a history the current rule recorded it lists nothing: a
    check of the harness."""
    _no_arg("epoch", arg)

    def policy(sweep: Sweep, run: RunState, relative_to: EpochState | None) -> Verdict | None:
        v = orphans.epoch_policy(sweep.view, run, relative_to, sweep.margin)
        return None if v is not None and v.uses_time and sweep.fallback_skipped is not None else v

    return _judges_one_run(policy)


def flat_age(arg: str | None) -> Policy:
    """`flat-age:D`: any running run older than D at the sweep, whoever owns it (the
    30-minute threshold that swept the healthy 88-minute nightly)."""
    limit = parse_duration(arg)

    def policy(sweep: Sweep, run: RunState, relative_to: EpochState | None) -> Verdict | None:
        if run.deleted or run.started_at is None or not lifecycle.can_be_orphaned(run.status, run.code):
            return None
        if sweep.now - run.started_at <= limit:
            return None
        return Verdict(
            run=run.run,
            rule=f"flat-age:{arg}",
            owner_process=run.process,
            owner_epoch=run.epoch,  # the epoch its start named (its owner, if a slot booted it: owner_of)
            started_at=run.started_at,
            cutoff=sweep.now - limit,
        )

    return _judges_one_run(policy)


def floor(arg: str | None) -> Policy:
    """`floor:D`: the epoch rule with the cutoff floored at D: a verdict stands only if
    the run started at least D before the sweep (the floor that missed the run started
    at 02:00 and redeployed at 02:20)."""
    limit = parse_duration(arg)
    rule = epoch_rule(None)

    def policy(sweep: Sweep, run: RunState, relative_to: EpochState | None) -> Verdict | None:
        v = rule(sweep, run, relative_to)
        if v is None or run.started_at is None or run.started_at > sweep.now - limit:
            return None
        return v

    return _judges_one_run(policy)


def clamp(arg: str | None) -> Policy:
    """`clamp`: the epoch rule, except at a sweep whose wall clock read earlier than the
    boot instant (the clock stepped back): instead of skipping the time fallback, the
    negative age is clamped to zero, so the cutoff becomes the clock's reading minus the
    margin and every unowned running run of the slot stamped before it is taken, by its
    stamps alone (the clamp replaces the step-back handling, the log-order check
    included)."""
    _no_arg("clamp", arg)
    rule = epoch_rule(None)

    def policy(sweep: Sweep, run: RunState, relative_to: EpochState | None) -> Verdict | None:
        rel = relative_to
        if rel is None or sweep.now >= rel.booted_at:
            return rule(sweep, run, relative_to)
        owned = orphans.epoch_policy(sweep.view, run, None, sweep.margin)
        if owned is not None and not owned.uses_time:
            return owned  # O2 is clock-free: the clamp changes nothing there
        if (
            run.deleted
            or not lifecycle.can_be_orphaned(run.status, run.code)
            or run.process != rel.process
            or run.started_at is None
            or orphans.owner_of(sweep.view, run) is not None
        ):
            return None
        cutoff = sweep.now - sweep.margin  # booted_at clamped to "now": age max(0, now - booted_at) = 0
        if run.started_at < cutoff:
            return Verdict(
                run=run.run,
                rule="clamp",
                owner_process=run.process,
                owner_epoch=run.epoch,
                started_at=run.started_at,
                relative_to=rel.epoch,
                booted_at=rel.booted_at,
                cutoff=cutoff,
                margin=sweep.margin.total_seconds(),
            )
        return None

    return _judges_one_run(policy)


def heartbeat(arg: str | None) -> Policy:
    """`heartbeat:D`: a running run silent for longer than D at the sweep, judged by its
    heartbeats (its last checkpoint since its last start, else the start itself),
    whoever owns it."""
    limit = parse_duration(arg)

    def policy(sweep: Sweep, run: RunState, relative_to: EpochState | None) -> Verdict | None:
        if run.deleted or run.started_at is None or not lifecycle.can_be_orphaned(run.status, run.code):
            return None
        beat = sweep.beat(run.run)
        last = max(run.started_at, beat.at) if beat is not None else run.started_at
        if sweep.now - last <= limit:
            return None
        return Verdict(
            run=run.run,
            rule=f"heartbeat:{arg}",
            owner_process=run.process,
            owner_epoch=run.epoch,
            started_at=run.started_at,
            cutoff=sweep.now - limit,
        )

    return _judges_one_run(policy)


def _no_arg(name: str, arg: str | None) -> None:
    if arg is not None:
        raise ValueError(f"{name} takes no argument, got {arg!r}")


BUILTIN: dict[str, Factory] = {
    "epoch": epoch_rule,
    "flat-age": flat_age,
    "floor": floor,
    "clamp": clamp,
    "heartbeat": heartbeat,
}


def installed() -> dict[str, metadata.EntryPoint]:
    """Third-party policies: entry points in the group `epochledger.policies`, each
    naming a factory `(arg: str | None) -> Policy`."""
    from importlib import metadata

    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def resolve(spec: str) -> Policy:
    """NAME[:ARG] -> a policy; BadPolicy (exit 3) for an unknown name or a bad argument."""
    name, sep, rest = spec.partition(":")
    arg = rest if sep else None
    factory: Any = BUILTIN.get(name)
    if factory is None:
        found = installed().get(name)
        if found is None:
            known = sorted({*BUILTIN, *installed()})
            raise BadPolicy(
                spec,
                f"no policy named {name!r}; known: {', '.join(known)} "
                f"(third-party policies: entry point group {ENTRY_POINT_GROUP})",
            )
        try:
            factory = found.load()
        except Exception as e:  # noqa: BLE001 - a broken plug-in is bad input, not our bug
            raise BadPolicy(
                spec, f"policy {name!r} ({found.value}) could not be loaded: {type(e).__name__}: {e}"
            ) from None
    try:
        policy = factory(arg)
    except ValueError as e:
        raise BadPolicy(spec, f"policy {name!r}: {e}") from None
    if not callable(policy):
        raise BadPolicy(spec, f"policy {name!r}: its factory returned {type(policy).__name__}, not a function")
    return policy  # type: ignore[no-any-return]


# ------------------------------------------------------------ differences
KILLED_LIVE = "killed-live"
MISSED = "missed"
LATE = "late"
EARLY = "early"


class Difference(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One verdict the alternative gives differently, with its evidence."""

    kind: str  # KILLED_LIVE | MISSED | LATE | EARLY
    run: str
    sweep_process: str  # the decision point: the sweep of this epoch
    sweep_epoch: str
    position: int  # the log position the sweep judged (its view's last event)
    at: datetime  # the sweep's wall-clock reading
    owner_process: str | None = None
    owner_epoch: str | None = None
    owner_live: bool | None = None
    started_at: datetime | None = None
    age_s: float | None = None  # the run's age at the sweep
    last_checkpoint: Beat | None = None
    alternative: Verdict | None = None  # the alternative's verdict (killed-live, early, late)
    recorded_rule: str | None = None  # the recorded recovery's rule (missed, late)
    found_at: datetime | None = None  # late: the sweep that did recover it
    found_by: str | None = None
    running_for_s: float | None = None  # missed, late: how much longer it stayed running
    until: datetime | None = None  # missed: to when that is counted
    until_why: str | None = None
    then: str | None = None  # killed-live, early: what the record says happened next
    message: str = ""


class WhatIf(msgspec.Struct, kw_only=True):
    policy: str
    position: int  # the last position replayed
    at: datetime | None  # ledger time of the last event replayed
    sweeps: int  # decision points
    differences: list[Difference]


class _Missed(msgspec.Struct):
    state: RunState  # as the recorded sweep found it
    diff: Difference


class _Killed(msgspec.Struct):
    diff: Difference


class _Replay:
    def __init__(self, policy: Policy):
        self.policy = policy
        self.view = orphans.initial()
        self.beats: dict[str, Beat] = {}
        self.missed: dict[str, _Missed] = {}
        self.killed: dict[str, _Killed] = {}
        self.done: list[Difference] = []
        self.sweeps = 0
        self.swept: set[str] = set()  # epochs whose sweeps left records (found by a first pass)
        self.failed: set[str] = set()  # epochs whose sweep gave up and left no other record
        self.open: tuple[Sweep, list[Verdict], dict[str, RunState]] | None = None  # a sweep group being read

    # -- the alternative's world
    def alt_view(self) -> View:
        if not self.missed and not self.killed:
            return self.view
        runs = dict(self.view.runs)
        for run, m in self.missed.items():
            runs[run] = m.state
        for run in self.killed:
            if run in runs:
                runs[run] = replace(runs[run], status=Status.FAILED_RESUMABLE, code=PROCESS_ORPHANED)
        return replace(self.view, runs=runs)  # every other fact of the record's view: slots, hosts, settings

    def point(self, epoch: EpochState, now: datetime, skipped: str | None) -> Sweep:
        return Sweep(
            view=self.alt_view(),
            epoch=epoch,
            now=now,
            position=self.view.position,
            fallback_skipped=skipped,
            beats=self.beats,
        )

    def judge(self, sweep: Sweep) -> list[Verdict]:
        def bound(view: View, run: RunState, rel: EpochState | None, margin: timedelta) -> Verdict | None:
            return self.policy(sweep, run, rel)

        return orphans.verdicts(sweep.view, sweep.epoch, sweep.margin, policy=bound)

    # -- the pass
    def apply(self, rec: Recorded) -> None:
        e = rec.event
        owner = sweep_records(e)
        if self.open is not None and owner != self.open[0].epoch.epoch:
            self.close()
        if owner is not None and self.open is None:
            slot = (
                e.swept_by_process
                if isinstance(e, RunRecovered)
                else e.process
                if isinstance(e, ProcessSweepSkipped)
                else ""
            )
            epoch = self.view.epoch(slot, owner)
            if epoch is not None:
                self.begin(epoch, e)  # judged just before the sweep's first record
        if self.open is not None and type(e) is RunRecovered and e.run in self.view.runs:
            self.open[2][e.run] = self.view.runs[e.run]  # as the sweep found it
        self.evolve(rec)
        if type(e) is ProcessBooted and e.epoch not in self.swept and e.epoch not in self.failed:
            # This boot's sweep recorded nothing (or there was none): judge at the boot. A
            # sweep that gave up (process.sweep_failed) judged nothing: no decision point.
            epoch = self.view.epoch(e.process, e.epoch)
            if epoch is not None:
                self.at_boot(epoch, e.at)

    def passed(self, position: int) -> None:
        """An event the replay does not read (of a run no sweep could judge: `whatif`)
        lies at `position`: like every event that is no sweep's record, it ends a sweep
        being read, and the view stood at it (what the next sweep judged)."""
        if self.open is not None:
            self.close()
        self.view.position = position

    def at_boot(self, epoch: EpochState, now: datetime) -> None:
        sweep = self.point(epoch, now, None)
        self.open = (sweep, self.judge(sweep), {})
        self.close()

    def begin(self, epoch: EpochState, first: Any) -> None:
        now = first.now if type(first) is ProcessSweepSkipped and first.now is not None else first.at
        skipped = first.why if type(first) is ProcessSweepSkipped else None
        sweep = self.point(epoch, now, skipped)
        self.open = (sweep, self.judge(sweep), {})

    def evolve(self, rec: Recorded) -> None:
        e = rec.event
        if isinstance(e, RunStarted | RunDeleted):
            self.beats.pop(e.run, None)
            if (m := self.missed.pop(e.run, None)) is not None:
                why = "the record started it again" if type(e) is RunStarted else "the record deleted it"
                self.finish_missed(m, e.at, why)
            self.killed.pop(e.run, None)
        elif type(e) is RunCheckpointed:
            self.beats[e.run] = Beat(at=e.at, node=e.node, ref=e.ref)
        elif isinstance(e, RunEventBase) and (k := self.killed.get(e.run)) is not None and k.diff.then is None:
            if type(e) is not RunFenced and e.status is not Status.RUNNING:
                k.diff.then = f"{e.status} at {e.at.isoformat()} ({e.actor or '?'})"
        try:
            orphans.evolve(self.view, rec)
        except Exception:  # noqa: BLE001 - the engine's poison rule (T4): park what cannot apply, move on
            self.view.position = rec.position  # as an event not read moves it (`passed`): the view stood at it

    def close(self) -> None:
        assert self.open is not None
        sweep, found, recorded = self.open
        self.open = None
        self.sweeps += 1
        record_view = self.view  # the record's own view (for liveness and the recorded rule)
        alt = {v.run: v for v in found}
        for run, v in alt.items():
            if run in recorded:
                continue
            if (m := self.missed.pop(run, None)) is not None:
                m.diff.kind = LATE
                m.diff.found_at, m.diff.found_by, m.diff.alternative = sweep.now, sweep.epoch.epoch, v
                m.diff.running_for_s = (sweep.now - m.diff.at).total_seconds()
                m.diff.message = (
                    f"{run}: the alternative recovers it {_dur(m.diff.running_for_s)} later, at the sweep "
                    f"of {sweep.epoch.epoch} ({sweep.now.isoformat()}); the recorded rule did at the "
                    f"sweep of {m.diff.sweep_epoch} ({m.diff.at.isoformat()})"
                )
                self.done.append(m.diff)
                continue
            state = sweep.view.runs[run]
            self.killed[run] = _Killed(self.alt_kill(sweep, state, v, record_view))
        for run in sorted(recorded.keys() - alt.keys()):
            if self.killed.pop(run, None) is not None:
                continue  # the alternative had already recovered it
            state = recorded[run]
            diff = self.base(MISSED, sweep, state)
            last = record_view.runs[run].last
            diff.recorded_rule = last.rule if isinstance(last, RunRecovered) else None
            self.missed[run] = _Missed(state=state, diff=diff)

    def alt_kill(self, sweep: Sweep, state: RunState, v: Verdict, record_view: View) -> Difference:
        diff = self.base(KILLED_LIVE, sweep, state)
        diff.alternative = v
        # Healthy or orphan is the recorded rule's call, fleet-wide, at the same instant.
        orphan = orphans.is_orphaned(record_view, state.run)  # a run the record's view lacks is none
        if orphan:
            diff.kind = EARLY
            diff.message = (
                f"{state.run}: the alternative recovers this orphan at the sweep of {sweep.epoch.epoch} "
                f"({sweep.now.isoformat()}), before any recorded sweep did"
            )
        else:
            ck = diff.last_checkpoint
            live = {
                True: "was live",
                False: "was not live, yet the recorded rule holds the run healthy",
                None: "is not known",
            }[diff.owner_live]
            diff.message = (
                f"{state.run}: the alternative kills it at the sweep of {sweep.epoch.epoch} "
                f"({sweep.now.isoformat()}) while its owner {diff.owner_epoch or '?'} of "
                f"{diff.owner_process or '?'} {live}; it was {_dur(diff.age_s)} old, last checkpoint "
                + (f"{ck.node} {ck.ref} at {ck.at.isoformat()}" if ck is not None else "none")
            )
        self.done.append(diff)
        return diff

    def base(self, kind: str, sweep: Sweep, state: RunState) -> Difference:
        owner = orphans.owner_of(sweep.view, state)
        if owner is None and state.slot_epoch is not None and state.process is not None:
            owner = sweep.view.epoch(state.process, state.slot_epoch)  # an unowned run: its slot's epoch at its start
        age = (sweep.now - state.started_at).total_seconds() if state.started_at is not None else None
        return Difference(
            kind=kind,
            run=state.run,
            sweep_process=sweep.epoch.process,
            sweep_epoch=sweep.epoch.epoch,
            position=sweep.position,
            at=sweep.now,
            owner_process=owner.process if owner is not None else state.process,
            owner_epoch=owner.epoch if owner is not None else state.epoch,
            owner_live=(sweep.view.end_of(owner) is None) if owner is not None else None,
            started_at=state.started_at,
            age_s=age,
            last_checkpoint=self.beats.get(state.run),
        )

    def finish_missed(self, m: _Missed, until: datetime, why: str) -> None:
        m.diff.until, m.diff.until_why = until, why
        m.diff.running_for_s = (until - m.diff.at).total_seconds()
        m.diff.message = (
            f"{m.diff.run}: the alternative never recovers this orphan (the recorded rule did, "
            f"{m.diff.recorded_rule}, at the sweep of {m.diff.sweep_epoch}, {m.diff.at.isoformat()}); "
            f"it stays running for {_dur(m.diff.running_for_s)} more, until {until.isoformat()} ({why})"
        )
        self.done.append(m.diff)

    def end(self, last_at: datetime | None) -> None:
        if self.open is not None:
            self.close()
        for run in sorted(self.missed):
            m = self.missed.pop(run)
            until = last_at if last_at is not None and last_at > m.diff.at else m.diff.at
            self.finish_missed(m, until, "the end of the replayed history")


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    sign, s = ("-", -s) if s < 0 else ("", s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return sign + (f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s" if m else f"{sec}s")


def _records(store: Store, at: datetime | None, position: int | None) -> Iterator[Recorded]:
    """The prefix `replay` would fold: up to `position`, and before the first event
    stamped after `at` (log order is the truth)."""
    for chunk in store.read_batches(0, position):
        for rec in chunk:
            if type(rec) is not Recorded:
                continue  # undecodable: parked by the views, skipped here (rule T4)
            if at is not None and rec.event.at > at:
                return
            yield rec


class _Read(msgspec.Struct):
    """What the what-if of a built-in policy reads (`_judged`): the events of every
    slot, of the ledger's settings and of the runs a sweep could judge, in log order,
    and the last event of the prefix replayed (None for an empty one)."""

    records: list[Recorded]
    last: Recorded | None


def _last_event(store: Store, upto: int, after: int = 0) -> Recorded | None:
    """The last decoded event with after < position <= upto: read backwards from
    `upto`, a window 16 times the last each time, so the read is the distance to it."""
    window = 16
    while upto > after:
        lo = max(after, upto - window)
        found = [rec for chunk in store.read_batches(lo, upto) for rec in chunk if type(rec) is Recorded]
        if found:
            return found[-1]
        upto, window = lo, window * 16
    return None


def _first_after(store: Store, blocks: dict[int, int], at: datetime, upto: int) -> int | None:
    """The position of the first decoded event (up to `upto`) stamped after `at`: in
    the first block whose latest instant is after it (projections/decisions.py), read
    whole; None if there is none."""
    t = micros(at)
    for n in sorted(blocks):
        if blocks[n] <= t:
            continue
        lo = n * decisions.BLOCK
        if lo > upto:
            return None
        for chunk in store.read_batches(max(0, lo - 1), min(upto, lo + decisions.BLOCK - 1)):
            for rec in chunk:
                if type(rec) is Recorded and rec.event.at > at:
                    return rec.position
        return None
    return None


def _judged(store: Store, at: datetime | None, position: int | None) -> _Read | None:
    """The prefix `_records` gives, of the streams a built-in policy's what-if can
    depend on (projections/decisions.py): every slot's, the ledger's settings and the
    runs a sweep could judge, up to the decisions view's position. None on a read-only
    copy (no view to catch up) or a stream with a removed event: read the whole log."""
    from epochledger.projections import engine  # the store's view tables: only where they are read

    found = engine.read_decisions(store)
    if found is None:
        return None
    upto = found.position if position is None else min(found.position, position)
    if at is not None and (cut := _first_after(store, found.blocks, at, upto)) is not None:
        upto = cut - 1
    streams = [ledger_stream(), *map(process_stream, found.slots), *map(run_stream, found.runs)]
    try:
        read = store.read_streams(streams)
    except StreamGap:
        return None
    records = sorted(
        (rec for recs in read.values() for rec in recs if type(rec) is Recorded and rec.position <= upto),
        key=lambda rec: rec.position,
    )
    return _Read(records=records, last=_last_event(store, upto))


def whatif(
    store: Store,
    policy: str | Policy,
    *,
    at: datetime | None = None,
    position: int | None = None,
    name: str | None = None,
) -> WhatIf:
    """Replay the log (up to `at` or `position`, as `replay` cuts it) and list every verdict
    `policy` (NAME[:ARG], or a Policy) gives differently from the recorded sweeps.

    A built-in policy's what-if reads only what its verdicts can depend on (`_judged`:
    the slots' streams and the runs a sweep could judge, rule R4); each event it does
    not read counts by its position alone, where it ends a sweep group (`passed`), and
    the last event replayed is the log's. A plug-in's reads the whole log. Both give the
    same result (tests/replay/test_whatif_reads.py holds them to it)."""
    if at is not None and at.tzinfo is None:
        raise InvalidInput("the instant needs a time zone (e.g. 2026-09-09T14:29:19Z)", where="--at")
    if position is not None:
        check_position(position, "--position")
    label = policy if isinstance(policy, str) else (name or str(getattr(policy, "__name__", "policy")))
    fn = resolve(policy) if isinstance(policy, str) else policy
    replay = _Replay(fn)
    read = _judged(store, at, position) if getattr(fn, _ONE_RUN, False) is True else None

    def records() -> Iterable[Recorded]:
        return read.records if read is not None else _records(store, at, position)

    # Two passes: the first finds which epochs' sweeps left records, so that a boot whose
    # sweep came later (a boot, other events, then `sweep`) is judged where its sweep ran.
    for rec in records():
        if (owner := sweep_records(rec.event)) is not None:
            replay.swept.add(owner)
        elif type(rec.event) is ProcessSweepFailed:
            replay.failed.add(rec.event.epoch)
    replay.failed -= replay.swept
    last_position, last_at, previous = 0, None, 0
    for rec in records():
        if read is not None and rec.position > previous + 1 and sweep_records(rec.event) is not None:
            # Between the last event read and a sweep's record: an event not read ends the
            # sweep group before it, and the sweep judged the view as of the last of them.
            if (other := _last_event(store, rec.position - 1, previous)) is not None:
                replay.passed(other.position)
        replay.apply(rec)
        last_position, last_at, previous = rec.position, rec.event.at, rec.position
    if read is not None and read.last is not None:
        last_position, last_at = read.last.position, read.last.event.at
    end = at if at is not None else last_at
    replay.end(end)
    order = {KILLED_LIVE: 0, EARLY: 1, LATE: 2, MISSED: 3}
    diffs = sorted(replay.done, key=lambda d: (d.position, order[d.kind], d.run))
    return WhatIf(policy=label, position=last_position, at=last_at, sweeps=replay.sweeps, differences=diffs)
