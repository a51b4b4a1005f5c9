"""The startup sweep (rule O5): recover every orphan visible to a freshly booted epoch.

The I/O edge of projections/orphans.py: it folds the log into the orphans view, asks
that module for the verdicts, and submits one `run.recovered` event per orphan in one
group commit. The wall clock enters only here, in the O3 step-back guard: if the clock
reads earlier than the epoch's boot instant, the time fallback recovers nothing and
`process.sweep_skipped` says why (never clamp a negative age to zero: the clamp makes
the cutoff "now" and sweeps runs the live process started after the step).

Wire it at process start, never on first query: `ledger.startup(name)` (= `boot()` then
`sweep()`), docs/operations.md. Safe to run twice and from two replicas at once: a
recovery is an append at the run's expected version, the loser of a race gets a
conflict for that run, re-reads, finds it already recovered and recovers nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, overload

import msgspec

from epochledger.ledger.clock import Clock, boot_instant
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import (
    ConflictError,
    DamagedRuns,
    EpochNotLive,
    InvalidInput,
    LedgerError,
    StoreError,
    StreamGap,
    SweepFailed,
    UnknownEpoch,
    UnknownSlot,
)
from epochledger.ledger.events import (
    Name,
    ProcessBooted,
    ProcessEventBase,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    Recorded,
    RunEventBase,
    RunRecovered,
    process_stream,
    run_stream,
)
from epochledger.ledger.process import EpochRef, EpochState, ProcessState
from epochledger.ledger.run import RunState
from epochledger.ledger.store import Poison
from epochledger.projections import orphans

if TYPE_CHECKING:
    import logging

    from epochledger.ledger.host import Host


def log() -> logging.Logger:
    """The sweep's logger ("epochledger.sweep"), imported on first use: the facade's
    reads name SweepReport from here, and a read logs nothing (rule W2)."""
    import logging

    return logging.getLogger("epochledger.sweep")


ATTEMPTS = 3  # rule O5: 3 attempts, 2 gaps
GAPS = (1.0, 4.0)  # seconds before attempt 2 and attempt 3
CONFLICT_ROUNDS = 8  # re-reads after losing a race, within one attempt


class SweepBatch(Protocol):
    """What the sweep needs of a group commit (epochledger.app.Batch): decide against
    the state the verdict was made on, submit, append on a clean exit."""

    def assume(self, state: RunState) -> None: ...

    @overload
    def submit(self, command: RunEventBase) -> RunState: ...

    @overload
    def submit(self, command: ProcessEventBase) -> ProcessState: ...

    def __enter__(self) -> SweepBatch: ...

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...


class SweepTarget(Protocol):
    """What the sweep needs of a ledger (epochledger.app.Ledger is one): the orphan
    rule's view, one write path, the clock port, the host-facts port, the epoch lookup
    and this process's stop signals. The sweep imports no application module, so the
    application imports the sweep, not the other way round."""

    @property
    def clock(self) -> Clock: ...

    @property
    def host(self) -> Host: ...

    def orphan_view(self, *, candidates_only: bool = False, slots: Sequence[str] = ()) -> orphans.View: ...

    def batch(self) -> SweepBatch: ...

    @overload
    def submit(self, command: RunEventBase) -> RunState: ...

    @overload
    def submit(self, command: ProcessEventBase) -> ProcessState: ...

    def epoch(self, epoch: EpochRef | str) -> EpochState: ...

    def is_stopping(self, epoch: str) -> bool: ...

    def wait_for_stop(self, epoch: str, seconds: float) -> bool: ...

    def history(self, run: str) -> list[Recorded | Poison]: ...

    def process(self, process: str) -> ProcessState | None: ...


class DamagedRun(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A run the sweep did not judge: its stream holds a row that does not decode, or
    has a gap (rules T4, O5). Recovering it would decide against a state that misses
    what the bad row said (it may have been the run's finish)."""

    run: str
    position: int  # the bad row's log position (a gap: the position of the row after it)
    tag: str | None = None
    error: str

    def explain(self) -> str:
        return (
            f"not judged: its stream is damaged at position {self.position} ({self.tag or 'unknown type'}: "
            f"{self.error}); an operator decides (docs/operations.md, a damaged log)"
        )


class SweepReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    process: str
    epoch: str
    # "swept": the sweep ran to the end (recovered may be empty);
    # "stopping": the epoch has begun to stop, no (further) attempt was started;
    # "superseded": a later boot of the slot exists; its own sweep is the one that counts;
    # "exited", "host-rebooted": the sweeping epoch itself is no longer live (rule O7): a
    # dead process's sweep recovers nothing;
    # "preview": nothing was written (preview()).
    outcome: str
    recovered: list[orphans.Verdict] = []
    fallback_skipped: str | None = None  # why O3 recovered nothing (clock stepped back)
    attempts: int = 0
    conflict_rounds: int = 0
    damaged: list[DamagedRun] = []  # candidates left unjudged: their stream is damaged (T4)
    unjudged: list[orphans.Unjudged] = []  # running runs no slot can judge (rule O9)

    def damage(self) -> DamagedRuns | None:
        """The damaged log this sweep met, as the error a caller that must not pass over
        it raises (the CLI's exit 8), or None."""
        if not self.damaged:
            return None
        return DamagedRuns(self.process, self.epoch, [(d.run, d.position) for d in self.damaged])


def sweep(
    ledger: SweepTarget,
    epoch: EpochRef | str,
    *,
    margin: float | timedelta = orphans.MARGIN,
    attempts: int = ATTEMPTS,
    gaps: Sequence[float] = GAPS,
    sleep: Callable[[float], object] | None = None,
    require_live: bool = False,
) -> SweepReport:
    """Recover every orphan visible to `epoch` (its state, as `boot()` returns it, any
    object with `.process` and `.epoch`, or the epoch's id), judged with that epoch's
    recorded boot instant. Store errors are retried
    (`attempts` attempts, `gaps` between them); exhaustion logs at ERROR on logger
    `epochledger.sweep`, records `process.sweep_failed` if the store takes it, and
    raises SweepFailed. Once `begin_stop()` was called for the epoch, no attempt starts.
    `sleep` waits out a gap (default: wakes early when the process begins to stop).
    An epoch that is no longer live recovers nothing (outcome "superseded", "exited",
    ...); with `require_live` (a process sweeping with an epoch it booted earlier,
    `epochledger sweep --as-epoch`) that is refused with EpochNotLive instead."""
    process: str | None
    if isinstance(epoch, str):  # an id: its slot is found in the first attempt (a read, retried)
        process, epoch_id = None, check_value(epoch, Name, "epoch")
    else:
        process = check_value(getattr(epoch, "process", None), Name, "epoch.process")
        epoch_id = check_value(getattr(epoch, "epoch", None), Name, "epoch.epoch")
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise InvalidInput(f"attempts must be an int >= 1, got {attempts!r}", where="attempts")
    if (
        not isinstance(gaps, Sequence)
        or len(gaps) < attempts - 1
        or not all(isinstance(g, int | float) and not isinstance(g, bool) and 0 <= g < math.inf for g in gaps)
    ):
        raise InvalidInput(f"need {attempts - 1} gaps of >= 0 finite seconds, got {gaps!r}", where="gaps")
    m = orphans.as_margin(margin)

    def wait(seconds: float) -> object:
        return sleep(seconds) if sleep is not None else ledger.wait_for_stop(epoch_id, seconds)

    last: StoreError | None = None
    for attempt in range(1, attempts + 1):
        if ledger.is_stopping(epoch_id):
            log().warning(
                "sweep of %s epoch %s: the process has begun to stop; no attempt %d", process or "?", epoch_id, attempt
            )
            return SweepReport(process=process or "", epoch=epoch_id, outcome="stopping", attempts=attempt - 1)
        try:
            if process is None:
                process = ledger.epoch(epoch_id).process  # UnknownEpoch if no slot booted it
            report = _attempt(ledger, process, epoch_id, m, require_live)
            report.attempts = attempt
            return report
        except StoreError as e:  # infrastructure: retried. Conflicts are handled inside.
            last = e
            log().warning(
                "sweep of %s epoch %s: attempt %d of %d failed: %s", process or "?", epoch_id, attempt, attempts, e
            )
            if attempt < attempts:
                wait(gaps[attempt - 1])
    assert last is not None
    slot = process or "?"  # "?": an epoch id whose slot no attempt could read
    log().error(
        "sweep of %s epoch %s gave up after %d attempts: %s; orphans may still show as running",
        slot,
        epoch_id,
        attempts,
        last,
    )
    recorded = False
    if process is None:  # the alert belongs on the slot's stream, and no read found the slot
        log().error(
            "sweep of ? epoch %s: its slot could not be read, so process.sweep_failed was not recorded", epoch_id
        )
    else:
        try:
            ledger.submit(
                ProcessSweepFailed(
                    at=ledger.clock.now(),
                    process=process,
                    epoch=epoch_id,
                    actor=epoch_id,
                    attempts=attempts,
                    error=str(last),
                )
            )
            recorded = True
        except LedgerError as e:
            log().error("sweep of %s epoch %s: could not record process.sweep_failed either: %s", process, epoch_id, e)
    raise SweepFailed(slot, epoch_id, attempts, str(last), recorded) from last


def _attempt(ledger: SweepTarget, process: str, epoch_id: str, margin: timedelta, require_live: bool) -> SweepReport:
    skipped: str | None = None
    lost: list[str] = []
    damaged: dict[str, DamagedRun] = {}
    for rounds in range(CONFLICT_ROUNDS):
        # The runs that could be orphans, not the fleet; its own slot even if it retired (O8)
        view = ledger.orphan_view(candidates_only=True, slots=(process,))
        unjudged = orphans.unjudged(view)  # named in every report, whatever its outcome (rule O9)
        me = view.epoch(process, epoch_id)
        if me is None:
            raise InvalidInput(
                f"epoch {epoch_id!r} of {process!r} was never booted; boot() before sweep()", where="sweep"
            )
        if me.stopping_at is not None or me.stopped_at is not None:
            return SweepReport(
                process=process, epoch=epoch_id, outcome="stopping", conflict_rounds=rounds, unjudged=unjudged
            )
        ended = view.end_of(me)  # the one liveness definition (ledger.process.end_of, rule O7)
        if ended is not None and require_live:
            raise EpochNotLive(epoch_id, process, *ended)
        if ended is not None:
            outcome = {
                orphans.SUPERSEDED: "superseded",
                orphans.EXITED: "exited",
                orphans.HOST_REBOOTED: "host-rebooted",
            }.get(ended[0], "stopping")
            return SweepReport(
                process=process, epoch=epoch_id, outcome=outcome, conflict_rounds=rounds, unjudged=unjudged
            )
        now = ledger.clock.now()
        found = orphans.verdicts(view, me, margin)
        if now < me.booted_at or skipped is not None:
            # The wall clock stepped back past the boot instant: every O3 stamp compared
            # with it is suspect, so the fallback recovers nothing. Do NOT clamp the
            # negative age to zero (that makes the cutoff "now": an incident in docs/rules.md).
            skipped = skipped or (
                f"wall clock {now.isoformat()} reads earlier than the boot instant "
                f"{me.booted_at.isoformat()} (it stepped back): the time fallback "
                "recovers nothing in this sweep, rule O3"
            )
            found = [v for v in found if not v.uses_time]
        found = [v for v in found if v.run not in damaged]
        try:
            with ledger.batch() as b:
                if skipped is not None:  # in the same batch: a lost race writes neither
                    b.submit(
                        ProcessSweepSkipped(
                            at=now,
                            process=process,
                            epoch=epoch_id,
                            actor=epoch_id,
                            why=skipped,
                            now=now,
                            booted_at=me.booted_at,
                        )
                    )
                for v in found:
                    # Decide against the state the verdict was made on; the append still
                    # expects its version, so a run that moved since the fold (another
                    # replica recovered it) fails the batch and we judge again.
                    b.assume(view.runs[v.run])
                    b.submit(_recovery(v, now, process, epoch_id))
        except ConflictError as e:
            lost = e.streams
            # Another writer (another replica's sweep) moved a stream: re-read. Or the
            # stream is damaged: the views parked its bad row, so the state the verdict
            # was made on is a version behind the stream for good, and every re-read
            # would "lose" again (a false conflict). Such a run is left unjudged and
            # named; the others are recovered (rule T4).
            damaged.update(_damaged(ledger, [v.run for v in found if run_stream(v.run) in lost]))
            continue
        for d in damaged.values():
            log().error("sweep of %s epoch %s: run %s %s", process, epoch_id, d.run, d.explain())
        if unjudged:  # O9: never in silence
            log().warning(
                "sweep of %s epoch %s: %d running run(s) no slot can judge (rule O9): %s",
                process,
                epoch_id,
                len(unjudged),
                ", ".join(u.run for u in unjudged),
            )
        return SweepReport(
            process=process,
            epoch=epoch_id,
            outcome="swept",
            recovered=found,
            fallback_skipped=skipped,
            conflict_rounds=rounds,
            damaged=sorted(damaged.values(), key=lambda d: d.run),
            unjudged=unjudged,
        )
    raise ConflictError(
        lost, f"sweep of {process} epoch {epoch_id!r} kept losing races after {CONFLICT_ROUNDS} re-reads"
    )


def _damaged(ledger: SweepTarget, runs: list[str]) -> dict[str, DamagedRun]:
    """The runs among `runs` whose stream holds an undecodable row or a gap, each with
    the position of its first bad row."""
    out: dict[str, DamagedRun] = {}
    for run in runs:
        try:
            bad = next((r for r in ledger.history(run) if type(r) is Poison), None)
        except StreamGap as gap:
            out[run] = DamagedRun(run=run, position=gap.before, error=str(gap))
            continue
        if bad is not None:
            out[run] = DamagedRun(run=run, position=bad.position, tag=bad.tag, error=bad.error)
    return out


def _recovery(v: orphans.Verdict, now: datetime, process: str, epoch_id: str) -> RunRecovered:
    return RunRecovered(
        at=now,
        run=v.run,
        actor=epoch_id,
        reason=v.explain(),
        rule=v.rule,
        swept_by=epoch_id,
        swept_by_process=process,
        owner_process=v.owner_process,
        owner_epoch=v.owner_epoch,
        superseded_by=v.superseded_by,
        stopped_at=v.stopped_at,
        started_at=v.started_at,
        booted_at=v.booted_at,
        cutoff=v.cutoff,
        margin=v.margin,
        exited_at=v.exited_at,
        observed_by=v.observed_by,
        exit_code=v.exit_code,
        signal=v.signal,
        host=v.host,
        host_boot=v.host_boot,
        rebooted_to=v.rebooted_to,
        rebooted_by=v.rebooted_by,
        evidence=v.evidence,
    )


PREVIEW_EPOCH = "(preview)"


def check_slot(ledger: SweepTarget, process: str, *, new_slot: bool) -> None:
    """Refuse a hand sweep of a slot the ledger has never seen (no event in its stream)
    unless `new_slot`: booting a mistyped name creates a slot for good and recovers
    nothing of the slot meant. UnknownSlot, before anything is appended."""
    if not new_slot and ledger.process(process) is None:
        raise UnknownSlot(process)


def preview(
    ledger: SweepTarget,
    process: str | None,
    *,
    margin: float = orphans.MARGIN.total_seconds(),
    new_slot: bool = True,
    as_epoch: str | None = None,
) -> SweepReport:
    """What booting a new epoch of `process` now and sweeping with it would recover,
    without writing anything: the same verdicts (projections/orphans.py) over the log
    plus a boot that is only folded, never appended. For `epochledger sweep --dry-run`.
    `new_slot=False` refuses a slot the ledger has never seen (check_slot). With
    `as_epoch`: what sweeping with that existing epoch would recover (it must be live:
    UnknownEpoch, EpochNotLive), judged with its recorded boot instant."""
    m = orphans.as_margin(margin)
    if as_epoch is not None:
        epoch_id = check_value(as_epoch, Name, "epoch")
        view = ledger.orphan_view()
        me = view.find_epoch(epoch_id)
        if me is None or (process is not None and me.process != process):
            me = ledger.epoch(epoch_id)  # UnknownEpoch naming it, or the slot that booted it
            if process is not None and me.process != process:
                raise UnknownEpoch(epoch_id, f"epoch {epoch_id!r} is an epoch of {me.process!r}, not of {process!r}")
        if (ended := view.end_of(me)) is not None:
            raise EpochNotLive(epoch_id, me.process, *ended)
        return _previewed(ledger, view, me, m)
    process = check_value(process, Name, "process")
    check_slot(ledger, process, new_slot=new_slot)
    view = ledger.orphan_view(slots=(process,))  # its slot even if it retired (rule O8), as the sweep reads it
    now = ledger.clock.now()
    # The boot startup() would record, host facts included: on a host that rebooted, it
    # ends the epochs of the earlier boot (O2-host-rebooted), and the preview says so.
    facts = ledger.host
    boot = ProcessBooted(
        at=now,
        process=process,
        epoch=PREVIEW_EPOCH,
        booted_at=boot_instant(ledger.clock),
        host=facts.name(),
        host_boot=facts.boot_id(),
        machine=facts.machine_id(),
    )
    orphans.evolve(view, Recorded(view.position, process_stream(process), 0, boot))
    me = view.epoch(process, PREVIEW_EPOCH)
    assert me is not None
    return _previewed(ledger, view, me, m)


def _previewed(ledger: SweepTarget, view: orphans.View, me: EpochState, margin: timedelta) -> SweepReport:
    """The preview's report: the verdicts the sweep would act on, with the runs it would
    leave unjudged because their stream is damaged (it learns that from a conflict; a
    preview writes nothing, so it reads each verdict's stream) and those no slot can
    judge (rule O9)."""
    found = orphans.verdicts(view, me, margin)
    damaged = _damaged(ledger, [v.run for v in found])
    return SweepReport(
        process=me.process,
        epoch=me.epoch,
        outcome="preview",
        recovered=[v for v in found if v.run not in damaged],
        damaged=sorted(damaged.values(), key=lambda d: d.run),
        unjudged=orphans.unjudged(view),
    )
