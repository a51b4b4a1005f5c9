"""A run's stream as a Decider, top to bottom: state -> fold (evolve) -> decide -> fence.

- State: `RunState`, with the run's tick failure streak (`TickStreak`) and the fenced
  evidence that binds automation (`FencedEnd`).
- Fold: `evolve(state, event)` is total on well-typed events and never raises: the
  decision was made by `decide` when the event was written. `streak_after` is the one
  definition of how an event moves the tick streak (rule T3): `evolve` and the
  tick-health view (projections/tick_health.py) both call it, so they cannot disagree.
- Decide: `decide(command, state)` refuses an impossible command with a typed error
  naming the run, its status and the attempt (rule L4), returns `[]` when the same
  event is submitted again (a retried delivery), and otherwise returns the event
  stamped with the run's resulting status and code (rules L1, L2).
- Fence: a report written on behalf of an epoch that is no longer live is refused and
  kept as `run.fenced` evidence (rules F1, F2; `fence`). Which epoch, not which run:
  the fence judges the epoch the report names, found (by the application, which does
  the I/O) in whatever slot booted it, whatever the run's own fields say.

Which transition is legal, and every policy question, is asked of ledger/lifecycle.py:
this module holds no status sets. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import assert_never

import msgspec

from epochledger.ledger import lifecycle
from epochledger.ledger.codes import CANCELLED, PROCESS_ORPHANED, TICK_DEADLINE_EXCEEDED
from epochledger.ledger.errors import IllegalTransition, InvalidInput
from epochledger.ledger.events import (
    Cause,
    RunCancelled,
    RunCheckpointed,
    RunCorrected,
    RunDeadLettered,
    RunDeleted,
    RunEvent,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunFinished,
    RunImported,
    RunPaused,
    RunQueued,
    RunRecovered,
    RunResumed,
    RunRewound,
    RunStarted,
    RunTickFailed,
    RunTickRecovered,
    Status,
    tag_of,
)
from epochledger.ledger.process import EpochState, HostState, end_of

replace = msgspec.structs.replace


class TickStreak(msgspec.Struct, frozen=True, kw_only=True):
    """A run's open tick failure streak: consecutive ticks whose steps raised on it (T3).
    It lives in the ledger, not in the driver's memory, so a restart cannot reset it."""

    since: datetime  # the first failure of the streak: the deadline counts from here (T2)
    failures: int  # consecutive failed ticks
    last_at: datetime  # the latest failure
    tick: str  # the tick of the latest failure
    step: str
    error_class: str
    error: str = ""


class Checkpoint(msgspec.Struct, frozen=True, omit_defaults=True):
    ref: str
    node: str | None = None  # None after a rewind to a bare ref


class FencedEnd(msgspec.Struct, frozen=True, kw_only=True):
    """A stale epoch's report, refused and kept as run.fenced evidence, that the run's
    work ended (rule F2): automation may not resume the run until it starts again."""

    epoch: str  # the stale epoch that reported it
    refused: str  # tag of the refused report (run.finished, run.failed)
    reported: Status  # the status it would have set
    at: datetime  # when it was reported


class CancelledFrom(msgspec.Struct, frozen=True, kw_only=True):
    """What a cancel overrode (rule L2): the pause or failure the run was in, with its
    code, error, cause and the reason given for it. The cancel writes CANCELLED; the
    earlier cause stays visible here until the run leaves `cancelled`."""

    status: Status
    code: str = ""
    error: str | None = None
    cause: Cause | None = None
    reason: str | None = None


class RunState(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    status: Status
    code: str = ""
    error: str | None = None
    cause: Cause | None = None
    workflow: str | None = None
    process: str | None = None
    epoch: str | None = None
    checkpoint: Checkpoint | None = None
    interaction: str | None = None  # pending interaction of a pause (rule L7)
    questions: list[str] | None = None
    answers: dict[str, str] | None = None  # handed over by the last resume
    queued_at: datetime
    started_at: datetime | None = None
    updated_at: datetime
    actor: str | None = None  # who made the last transition
    reason: str | None = None
    version: int = 0
    deleted: bool = False
    corrections: int = 0  # audited corrections out of a final status
    last: RunEvent | None = None  # the last event, to recognise "the same event again"
    tick_streak: TickStreak | None = None  # open tick failure streak (rule T3, ledger/run.py)
    slot_epoch: str | None = None  # a start without epoch: its slot's epoch then (rule O3)
    fenced: int = 0  # stale reports refused and kept as run.fenced evidence (rule F1)
    fenced_end: FencedEnd | None = None  # since the last start (rule F2)
    labels: dict[str, str] = {}  # set when queued (rule I2)
    parent: str | None = None  # the run this one re-executes or retries (rule I2)
    cancelled_from: CancelledFrom | None = None  # a cancelled pause or failure: what it was (rule L2)
    queued_process: str | None = None  # the process run.queued named; `process` follows the starts (rule L1)
    attempt: int = 0  # starts so far: 1 from the first start, +1 for each start after a resume or retry
    # What its source scheduler called the run when an importer last read it (rule I3,
    # run.imported): the ledger's status follows only what the source's workers did,
    # so a window the ledger has no status for shows here (Dagster's STARTING beside
    # `queued`, CANCELING beside `running`), and so does a source that disagrees.
    source: str | None = None  # the scheduler: "dagster"
    source_status: str | None = None  # its status of the run, as read: "STARTING", "CANCELING", ...


# -------------------------------------------------------------------- fold
def streak_after(streak: TickStreak | None, e: RunEventBase) -> TickStreak | None:
    """The run's streak after event `e` (stamped with its resulting status)."""
    if streak is None and type(e) is not RunTickFailed:
        return None  # the healthy path, most events of every run: nothing to open or close
    if isinstance(e, RunTickFailed):
        return TickStreak(
            since=streak.since if streak is not None else e.at,
            failures=(streak.failures if streak is not None else 0) + 1,
            last_at=e.at,
            tick=e.tick,
            step=e.step,
            error_class=e.error_class,
            error=e.error,
        )
    if isinstance(e, RunTickRecovered | RunDeadLettered | RunDeleted):
        return None
    # A run that leaves the statuses the tick drives (an operator paused it, a step
    # finished or failed it) is no longer ticked: its streak cannot continue, and an open
    # one would show in `runs --streaking` forever. A later resume starts afresh.
    assert e.status is not None
    if not lifecycle.is_active(e.status, e.code):
        return None
    return streak


def evolve(state: RunState | None, e: RunEvent) -> RunState:
    assert e.status is not None, "stored run events are stamped by decide"
    if isinstance(e, RunQueued):
        return RunState(
            run=e.run,
            status=e.status,
            code=e.code,
            workflow=e.workflow,
            process=e.process,
            queued_at=e.at,
            updated_at=e.at,
            actor=e.actor,
            reason=e.reason,
            version=1,
            last=e,
            labels=e.labels,
            parent=e.parent,
            queued_process=e.process,
        )
    assert state is not None, f"{tag_of(e)} before run.queued"
    if type(e) is RunFenced:
        # Evidence only: a refused late report changes neither status nor who made the
        # last transition; it only takes a version of the stream. A claim that the work
        # ended binds automation until the next start (rule F2).
        end = state.fenced_end
        if e.reported is not None:
            end = FencedEnd(epoch=e.epoch, refused=e.refused, reported=e.reported, at=e.at)
        return replace(state, version=state.version + 1, last=e, fenced=state.fenced + 1, fenced_end=end)
    if type(e) is RunImported:
        # Bookkeeping only (rule I3): an importer's cursor changes neither the run's
        # status nor who made it, not even `last`, so a retried delivery of the last
        # report is still recognised as the same event again; only the source's own
        # status, as read, is kept beside the ledger's.
        return replace(state, version=state.version + 1, source=e.source, source_status=e.source_status)
    # What every transition sets, in one replace with explicit keywords (a shared
    # **kwargs dict costs twice as much, and this runs for every event of a rebuild).
    new = replace(
        state,
        status=e.status,
        code=e.code,
        updated_at=e.at,
        actor=e.actor,
        reason=e.reason,
        version=state.version + 1,
        last=e,
        tick_streak=streak_after(state.tick_streak, e),
        cancelled_from=None,
    )
    match e:
        case RunCheckpointed():
            return replace(new, checkpoint=Checkpoint(ref=e.ref, node=e.node))
        case RunStarted():
            return replace(
                new,
                epoch=e.epoch,
                process=e.process or state.process,
                started_at=e.at,
                slot_epoch=e.slot_epoch,
                error=None,
                cause=None,
                fenced_end=None,
                attempt=state.attempt + 1,
            )
        case RunCancelled():
            # A cancel keeps what it overrode: a pause or a failure's cause stays visible
            # (rule L2). The interaction goes: its question and answers are evidence only
            # while the run waits on them (rule L7); `history` keeps them.
            prior = None
            if lifecycle.is_terminal(state.status):  # a pause or a resumable failure: no final status cancels
                prior = CancelledFrom(
                    status=state.status, code=state.code, error=state.error, cause=state.cause, reason=state.reason
                )
            return replace(
                new, error=None, cause=None, interaction=None, questions=None, answers=None, cancelled_from=prior
            )
        case RunFinished():
            return replace(new, error=None, cause=None)
        case RunFailed():
            return replace(new, error=e.error, cause=e.cause)
        case RunPaused():
            # A new pause starts a new interaction and drops answers handed over by an
            # earlier resume, so they can never reach the next resume (rule L7).
            return replace(new, interaction=e.interaction, questions=e.questions, answers=None, error=None, cause=None)
        case RunResumed():
            # The resume consumes the pending interaction (rule L7).
            return replace(new, interaction=None, questions=None, answers=e.answers, error=None, cause=None)
        case RunCorrected():
            failure = lifecycle.is_failure(e.status)
            return replace(
                new,
                error=e.error if failure else None,
                cause=state.cause if failure else None,
                corrections=state.corrections + 1,
            )
        case RunRewound():
            # Rewinding is one of the two ways a checkpoint may go (rule L6).
            checkpoint = Checkpoint(ref=e.to_ref) if e.to_ref is not None else None
            return replace(
                new, checkpoint=checkpoint, interaction=None, questions=None, answers=None, error=None, cause=None
            )
        case RunDeleted():
            return replace(new, deleted=True, checkpoint=None, interaction=None, questions=None, answers=None)
        case RunTickFailed() | RunTickRecovered():
            return new
        case RunDeadLettered():
            return replace(new, error=f"{e.error_class}: {e.error}" if e.error else e.error_class)
        case RunRecovered():  # an orphan recovered by a sweep (rule O5)
            return replace(new, error=None)
        case RunFenced() | RunImported():  # handled above; here for exhaustiveness
            raise AssertionError
        case RunQueued():  # handled above; here for exhaustiveness
            raise AssertionError
        case _:
            assert_never(e)


def fold(events: Iterable[RunEvent], state: RunState | None = None) -> RunState | None:
    for e in events:
        state = evolve(state, e)
    return state


# ------------------------------------------------------------------ decide
# The status each kind of pause leaves the run in.
PAUSE_STATUS: dict[str, Status] = {
    "operator": Status.PAUSED_OPERATOR,
    "waiting_human": Status.PAUSED_WAITING_HUMAN,
    "orchestrator": Status.PAUSED_ORCHESTRATOR,
}


def result_of(cmd: RunEvent, state: RunState | None) -> tuple[Status, str]:
    """The status and code a command would leave the run in (legality aside)."""
    match cmd:
        case RunQueued() | RunResumed() | RunRewound():
            return Status.QUEUED, ""
        case RunStarted():
            return Status.RUNNING, ""
        case RunPaused():
            return PAUSE_STATUS[cmd.kind], ""
        case RunFailed():
            return (Status.FAILED_RESUMABLE if cmd.resumable else Status.FAILED), cmd.code
        case RunCancelled():
            return Status.CANCELLED, cmd.code or CANCELLED
        case RunFinished():
            return Status.FINISHED, ""
        case RunCorrected():
            return cmd.to, cmd.code
        case RunCheckpointed() | RunDeleted() | RunTickFailed() | RunTickRecovered() | RunFenced() | RunImported():
            assert state is not None
            return state.status, state.code
        case RunDeadLettered():
            return Status.FAILED, TICK_DEADLINE_EXCEEDED
        case RunRecovered():
            return Status.FAILED_RESUMABLE, PROCESS_ORPHANED
        case _:
            assert_never(cmd)


def _sans_stamp(e: RunEvent) -> RunEvent:
    """The event without what a retried delivery may change: its time, who, why, and
    what the ledger stamps from the moment (a start's `slot_epoch`)."""
    e = replace(e, at=datetime.min.replace(tzinfo=UTC), actor=None, reason=None)
    return replace(e, slot_epoch=None) if type(e) is RunStarted else e


def _queued_again(cmd: RunQueued, state: RunState) -> list[RunEvent]:
    """A queue of a run that is queued (again, after a resume or a rewind): its effect
    already holds if it names the fields the run was queued with, whatever its time,
    actor and reason, so an adapter retrying after a timeout, or re-publishing a retry,
    appends nothing (rule L1). Other fields are refused, naming each (rule L4)."""
    differs = [
        f"{name} {theirs!r}, not {mine!r}"
        for name, mine, theirs in (
            ("workflow", cmd.workflow, state.workflow),
            ("process", cmd.process, state.queued_process),
            ("labels", cmd.labels, state.labels),
            ("parent", cmd.parent, state.parent),
        )
        if mine != theirs
    ]
    if differs:
        raise IllegalTransition(
            cmd.run, state.status, "run.queued", "the run is already queued with other fields: " + "; ".join(differs)
        )
    return []


def decide(cmd: RunEvent, state: RunState | None) -> list[RunEvent]:
    """Command (a run event with `status` unset, or set to what the caller expects)
    and current state -> the events to append, [] if its effect already holds, or a
    typed refusal. Pure: no clock, no I/O."""
    tag = tag_of(cmd)
    status = None if state is None else state.status
    if state is not None and state.deleted:
        if isinstance(cmd, RunDeleted):
            return []
        raise IllegalTransition(cmd.run, "deleted", tag, "a deleted run accepts nothing")
    if state is None and not isinstance(cmd, RunQueued):
        raise IllegalTransition(cmd.run, None, tag, "a run begins with run.queued")
    if isinstance(cmd, RunQueued) and cmd.parent == cmd.run:
        raise InvalidInput(f"run {cmd.run!r} cannot be its own parent", where="parent")
    new_status, new_code = result_of(cmd, state)
    if (
        not lifecycle.is_failure(new_status)
        and cmd.code
        and not isinstance(cmd, RunCheckpointed | RunDeleted | RunFenced | RunImported)
    ):
        raise IllegalTransition(
            cmd.run, status, tag, f"a code ({cmd.code!r}) belongs only on a failure status, not {new_status}"
        )
    if cmd.status is not None and cmd.status != new_status:
        raise IllegalTransition(
            cmd.run, status, tag, f"the event says status {cmd.status} but the transition gives {new_status}"
        )
    event = replace(cmd, status=new_status, code=new_code, at=cmd.at.astimezone(UTC))
    if state is not None and state.last is not None and _sans_stamp(event) == _sans_stamp(state.last):
        return []  # the same event again: its effect already holds
    if not lifecycle.allowed_from(tag, status):
        raise IllegalTransition(cmd.run, status, tag)
    if isinstance(cmd, RunQueued) and state is not None:  # queued already (the table said so)
        return _queued_again(cmd, state)
    if isinstance(cmd, RunTickRecovered) and state is not None and state.tick_streak is None:
        return []  # no streak is open: "recovered" already holds (rule T3)
    if isinstance(cmd, RunResumed):
        assert status is not None and state is not None
        end = state.fenced_end
        if cmd.by == "auto" and not lifecycle.can_auto_resume(status, state.code, fenced_end=end is not None):
            if end is not None:
                raise IllegalTransition(
                    cmd.run,
                    status,
                    tag,
                    f"automation may not resume it: stale epoch {end.epoch} "
                    f"reported {end.refused} ({end.reported}) at {end.at.isoformat()}, kept as "
                    "fenced evidence; an operator decides (rule F2)",
                )
            raise IllegalTransition(
                cmd.run,
                status,
                tag,
                f"automation may not resume a run that is {status} with code {state.code or 'UNKNOWN'}",
            )
        if cmd.by == "operator" and not lifecycle.can_operator_resume(status, state.code):
            raise IllegalTransition(cmd.run, status, tag)
        if cmd.by == "orchestrator" and not lifecycle.can_orchestrator_resume(status, state.code):
            raise IllegalTransition(
                cmd.run, status, tag, "the orchestrator resumes only its own wait (a pause of kind orchestrator)"
            )
        if lifecycle.requires_resume_answers(status, state.code) and not cmd.answers:
            raise IllegalTransition(cmd.run, status, tag, "a run waiting on a human needs answers to resume")
    if isinstance(cmd, RunCorrected):
        if not cmd.actor or not cmd.reason:
            raise IllegalTransition(cmd.run, status, tag, "a correction needs an actor and a reason")
        if not lifecycle.is_correction_target(cmd.to):
            raise IllegalTransition(cmd.run, status, tag, f"a correction may not set {cmd.to}")
        if cmd.to == status and new_code == state.code:  # type: ignore[union-attr]
            raise IllegalTransition(cmd.run, status, tag, f"the run is already {status} with that code")
    return [event]


# ------------------------------------------------------------------- fence
# The reports a scheduler process writes for a run it drives, its tick's included.
FENCED_REPORTS = (
    RunStarted,
    RunCheckpointed,
    RunPaused,
    RunFailed,
    RunFinished,
    RunTickFailed,
    RunTickRecovered,
    RunDeadLettered,
)
# The reports in which a worker states the outcome of its work. Fenced, they bind
# automation until the run starts again (rule F2).
OUTCOME_REPORTS = (RunFinished, RunFailed)


def writer_epoch(cmd: RunEventBase) -> str | None:
    """The epoch a report is written on behalf of, if it names one."""
    if isinstance(cmd, FENCED_REPORTS):
        return cmd.epoch
    return None


def slot_hint(cmd: RunEventBase, run: RunState | None) -> str | None:
    """Where to look the writer's epoch up first: the slot a start names, else the slot
    of the run's owner when the report names the owner epoch. Only a hint: the epoch is
    found wherever it booted, and a start naming a slot must name one of its epochs."""
    if isinstance(cmd, RunStarted) and cmd.process is not None:
        return cmd.process
    if run is not None and run.epoch is not None and run.epoch == writer_epoch(cmd):
        return run.process
    return None


def fence(cmd: RunEventBase, run: RunState | None, writer: EpochState, host: HostState | None) -> RunFenced | None:
    """The `run.fenced` evidence to keep instead of `cmd`, or None if `cmd` may proceed.
    `cmd` is the report as submitted, before the ledger stamps anything into it (a
    start's slot): its `report` is the report itself, so a re-sent line is found to be
    that evidence (rule I1). `writer` is the epoch the report names; `host` its host's boots (the hosts view), so
    a report from an epoch that was superseded, stopped, exited or whose host rebooted
    is refused alike (ledger.process.end_of, rule O7). A report on a run that does not
    exist (or was deleted) is not evidence about it: `decide` refuses it like any
    command on such a run."""
    if run is None or run.deleted:
        return None
    ended = end_of(writer, host)
    if ended is None:
        return None
    rule, why = ended
    reported = result_of(cmd, run)[0] if isinstance(cmd, OUTCOME_REPORTS) else None
    return RunFenced(
        at=cmd.at,
        run=cmd.run,
        actor=cmd.actor,
        reason=f"{tag_of(cmd)} refused and kept as evidence: {why} (rule F1)",
        epoch=writer.epoch,
        refused=tag_of(cmd),
        why=why,
        superseded_by=writer.superseded_by,
        stopped_at=writer.stopped_at if writer.superseded_by is None else None,
        report=msgspec.to_builtins(cmd),
        reported=reported,
        rule=rule,
    )


# A report kept as evidence that named no epoch (RunFenced.epoch is required).
UNATTRIBUTED = "-"


def refused_report(cmd: RunEventBase, run: RunState | None, why: str) -> RunFenced | None:
    """The `run.fenced` evidence to keep for a report that `decide` refused because the
    run's status does not allow it, though the report is a real observation: a late
    success after a cancel, a late failure after a sweep recovered the run, a second
    start. The tolerant import keeps it (rule I1) as the fence keeps a stale epoch's
    report (rule F1), so an outcome report binds automation in the same way (rule F2).
    None for anything else: an operator's command, a report on a run that does not exist
    or was deleted, a report whose own fields are inconsistent (a code on a finish)."""
    if run is None or run.deleted or not isinstance(cmd, FENCED_REPORTS):
        return None
    tag = tag_of(cmd)
    if lifecycle.allowed_from(tag, run.status):
        return None
    reported = result_of(cmd, run)[0] if isinstance(cmd, OUTCOME_REPORTS) else None
    return RunFenced(
        at=cmd.at,
        run=cmd.run,
        actor=cmd.actor,
        reason=f"{tag} refused and kept as evidence: {why} (rule I1)"[:65536],
        epoch=writer_epoch(cmd) or UNATTRIBUTED,
        refused=tag,
        why=why[:4096],
        report=msgspec.to_builtins(cmd),
        reported=reported,
    )
