"""What each event leaves in a run's state: the whole RunState, field by field.

The transition table (tests/ledger/test_decider.py) pins which status every command gives;
these pin everything else a fold carries, which the CLI's `show`, the orphan rule and
the resume guards read: who made the last transition and why, when, the workflow, the
checkpoint, the error and its cause, the fenced evidence. Each snapshot is compared
whole (`last` aside), so a field the fold forgets to set, or sets from the wrong
source, fails here. Mutations caught (make mutation): every keyword of `evolve`'s
replaces dropped or set to None; a correction's error/cause taken regardless of the
corrected status; fenced evidence without an outcome dropping an earlier one (F2);
`fence` on a deleted or missing run; `slot_hint` preferring the wrong slot.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from epochledger.ledger.events import (
    Cause,
    RunCancelled,
    RunCheckpointed,
    RunCorrected,
    RunDeadLettered,
    RunDeleted,
    RunEvent,
    RunFailed,
    RunFenced,
    RunFinished,
    RunPaused,
    RunQueued,
    RunRecovered,
    RunResumed,
    RunRewound,
    RunStarted,
    RunTickFailed,
    Status,
)
from epochledger.ledger.process import EpochState
from epochledger.ledger.run import Checkpoint, FencedEnd, RunState, decide, evolve, fence, slot_hint

T0 = datetime(2026, 9, 9, 14, 0, tzinfo=UTC)
RUN = "r-1"
replace = msgspec.structs.replace


def at(i: int) -> datetime:
    return T0 + timedelta(seconds=i)


def step(state: RunState | None, cmd: RunEvent) -> RunState:
    (event,) = decide(cmd, state)
    return evolve(state, event)


def same(state: RunState, expected: RunState) -> None:
    """Whole-state equality, `last` aside (it is the event itself)."""
    assert replace(state, last=None) == expected


QUEUED = RunState(
    run=RUN,
    status=Status.QUEUED,
    workflow="wf",
    process="slot-a",
    queued_process="slot-a",
    queued_at=at(0),
    updated_at=at(0),
    actor="sched",
    reason="cron",
    version=1,
)


def queued() -> RunState:
    return step(None, RunQueued(at=at(0), run=RUN, workflow="wf", process="slot-a", actor="sched", reason="cron"))


def running() -> RunState:
    return step(queued(), RunStarted(at=at(1), run=RUN, epoch="e1", actor="worker", reason="picked up"))


RUNNING = replace(
    QUEUED,
    status=Status.RUNNING,
    epoch="e1",
    started_at=at(1),
    updated_at=at(1),
    actor="worker",
    reason="picked up",
    version=2,
    attempt=1,
)


def test_queued_carries_workflow_slot_actor_reason_and_times() -> None:
    same(queued(), QUEUED)


def test_started_sets_owner_start_time_and_who_and_keeps_the_queued_slot() -> None:
    same(running(), RUNNING)


def test_a_start_naming_a_slot_replaces_it_and_one_without_keeps_the_queued_slot() -> None:
    s = step(queued(), RunStarted(at=at(1), run=RUN, epoch="e1", process="slot-b"))
    assert s.process == "slot-b"
    s = step(queued(), RunStarted(at=at(1), run=RUN, slot_epoch="e0"))
    assert (s.process, s.epoch, s.slot_epoch) == ("slot-a", None, "e0")


def test_checkpoint_keeps_ref_and_node() -> None:
    s = step(running(), RunCheckpointed(at=at(2), run=RUN, node="n1", ref="ref-1", actor="worker"))
    same(s, replace(RUNNING, checkpoint=Checkpoint(ref="ref-1", node="n1"), updated_at=at(2), reason=None, version=3))


def test_failure_carries_its_error_and_cause_and_a_restart_clears_them() -> None:
    cause = Cause(code="UPSTREAM", message="503 from the API")
    s = step(
        running(), RunFailed(at=at(2), run=RUN, code="TIMEOUT", resumable=True, error="took too long", cause=cause)
    )
    failed = replace(
        RUNNING,
        status=Status.FAILED_RESUMABLE,
        code="TIMEOUT",
        error="took too long",
        cause=cause,
        updated_at=at(2),
        actor=None,
        reason=None,
        version=3,
    )
    same(s, failed)
    s = step(s, RunResumed(at=at(3), run=RUN, by="auto", actor="sched"))
    same(
        s,
        replace(
            failed,
            status=Status.QUEUED,
            code="",
            error=None,
            cause=None,
            answers=None,
            updated_at=at(3),
            actor="sched",
            version=4,
        ),
    )
    s = step(s, RunStarted(at=at(4), run=RUN, epoch="e1"))
    assert (s.error, s.cause, s.started_at) == (None, None, at(4))


@pytest.mark.parametrize(
    "end",
    [RunFinished(at=at(3), run=RUN, status=Status.FINISHED), RunCancelled(at=at(3), run=RUN, status=Status.CANCELLED)],
    ids=["finished", "cancelled"],
)
def test_finish_and_cancel_clear_a_standing_error(end: RunEvent) -> None:
    """A fold over any stored history: the error a run carried does not outlive its end."""
    s = replace(running(), error="x", cause=Cause(code="C"))
    s = evolve(s, end)
    assert (s.status, s.error, s.cause) == (end.status, None, None)


def test_pause_and_resume_move_the_interaction_and_clear_the_error() -> None:
    s = step(running(), RunPaused(at=at(2), run=RUN, kind="waiting_human", interaction="i1", questions=["ok?"]))
    assert (s.interaction, s.questions, s.answers, s.error) == ("i1", ["ok?"], None, None)
    s = step(s, RunResumed(at=at(3), run=RUN, by="operator", answers={"ok?": "yes"}, actor="alice", reason="approved"))
    same(
        s,
        replace(
            RUNNING,
            status=Status.QUEUED,
            answers={"ok?": "yes"},
            updated_at=at(3),
            actor="alice",
            reason="approved",
            version=4,
        ),
    )


def test_a_pause_clears_the_error_a_rewound_run_carried() -> None:
    failed = step(
        running(), RunFailed(at=at(2), run=RUN, code="TIMEOUT", resumable=True, error="x", cause=Cause(code="C"))
    )
    s = evolve(failed, RunPaused(at=at(3), run=RUN, kind="operator", status=Status.PAUSED_OPERATOR))
    assert (s.error, s.cause) == (None, None)
    s = evolve(failed, RunResumed(at=at(3), run=RUN, by="operator", status=Status.QUEUED))
    assert (s.error, s.cause) == (None, None)


def test_a_correction_to_a_failure_takes_its_error_and_keeps_the_cause() -> None:
    cause = Cause(code="UPSTREAM")
    s = step(running(), RunFailed(at=at(2), run=RUN, code="TIMEOUT", resumable=False, error="old", cause=cause))
    s = step(
        s,
        RunCorrected(
            at=at(3),
            run=RUN,
            to=Status.FAILED,
            code="BAD_OUTPUT",
            error="output was empty",
            actor="alice",
            reason="audit",
        ),
    )
    assert (s.status, s.code, s.error, s.cause, s.corrections, s.actor, s.reason) == (
        Status.FAILED,
        "BAD_OUTPUT",
        "output was empty",
        cause,
        1,
        "alice",
        "audit",
    )


def test_a_correction_to_success_clears_error_and_cause() -> None:
    s = step(running(), RunFailed(at=at(2), run=RUN, code="CRASH", resumable=False, error="old", cause=Cause(code="C")))
    s = step(
        s,
        RunCorrected(at=at(3), run=RUN, to=Status.FINISHED, error="ignored", actor="alice", reason="it had completed"),
    )
    assert (s.status, s.error, s.cause, s.corrections) == (Status.FINISHED, None, None, 1)


def test_rewind_clears_error_interaction_and_sets_the_bare_ref() -> None:
    s = step(running(), RunFailed(at=at(2), run=RUN, code="TIMEOUT", resumable=True, error="x", cause=Cause(code="C")))
    s = step(s, RunRewound(at=at(3), run=RUN, to_ref="ref-0"))
    assert (s.checkpoint, s.error, s.cause, s.interaction) == (Checkpoint(ref="ref-0"), None, None, None)


def test_delete_marks_and_drops_checkpoint_and_interaction() -> None:
    s = step(running(), RunCheckpointed(at=at(2), run=RUN, node="n", ref="r"))
    s = step(s, RunDeleted(at=at(3), run=RUN, actor="alice"))
    assert (s.deleted, s.checkpoint, s.actor, s.updated_at) == (True, None, "alice", at(3))


def test_dead_letter_and_recovery_set_their_error() -> None:
    tick = RunTickFailed(at=at(2), run=RUN, tick="t1", step="s", error_class="KeyError", error="k")
    s = step(running(), tick)
    s = step(
        s,
        RunDeadLettered(
            at=at(3),
            run=RUN,
            tick="t2",
            step="s",
            error_class="KeyError",
            error="k",
            failing_since=at(2),
            failures=2,
            deadline_s=1.0,
        ),
    )
    assert (s.status, s.error, s.tick_streak) == (Status.FAILED, "KeyError: k", None)
    s = step(
        running(),
        RunDeadLettered(
            at=at(3),
            run=RUN,
            tick="t2",
            step="s",
            error_class="KeyError",
            failing_since=at(2),
            failures=2,
            deadline_s=1.0,
        ),
    )
    assert s.error == "KeyError"
    s = evolve(
        replace(running(), error="left over"),
        RunRecovered(
            at=at(6), run=RUN, rule="O2-stopped", swept_by="e2", swept_by_process="p", status=Status.FAILED_RESUMABLE
        ),
    )
    assert (s.status, s.error, s.updated_at) == (Status.FAILED_RESUMABLE, None, at(6))


def _fenced(reported: Status | None, i: int, refused: str = "run.finished") -> RunFenced:
    return RunFenced(
        at=at(i), run=RUN, epoch="e0", refused=refused, why="superseded", reported=reported, status=Status.RUNNING
    )


def test_F2_fenced_evidence_without_an_outcome_keeps_the_earlier_outcome_evidence() -> None:
    s = evolve(running(), _fenced(Status.FINISHED, 2))
    end = FencedEnd(epoch="e0", refused="run.finished", reported=Status.FINISHED, at=at(2))
    assert (s.fenced, s.fenced_end) == (1, end)
    s = evolve(s, _fenced(None, 3, refused="run.checkpointed"))
    assert (s.fenced, s.fenced_end, s.status, s.actor, s.updated_at, s.version) == (
        2,
        end,
        Status.RUNNING,
        "worker",
        at(1),
        4,
    )
    s = step(s, RunFailed(at=at(4), run=RUN, resumable=True))
    s = step(s, RunResumed(at=at(5), run=RUN, by="operator"))
    s = step(s, RunStarted(at=at(6), run=RUN, epoch="e1"))
    assert s.fenced_end is None  # a new start: the evidence no longer binds (F2)


def test_a_retried_start_is_recognised_although_the_ledger_stamped_its_slot_epoch() -> None:
    """Mutation caught: `_sans_stamp` keeping `slot_epoch`, so the retry (unstamped, as
    the caller sends it again) reads as a second start and is refused."""
    s = step(queued(), RunStarted(at=at(1), run=RUN, slot_epoch="e0"))
    assert decide(RunStarted(at=at(9), run=RUN), s) == []


STALE = EpochState(process="slot-a", epoch="e0", booted_at=at(0), recorded_at=at(0), superseded_by="e1")
LIVE = EpochState(process="slot-a", epoch="e1", booted_at=at(1), recorded_at=at(1))


def test_F1_fence_ignores_reports_on_missing_or_deleted_runs_and_spares_live_writers() -> None:
    cmd = RunFinished(at=at(5), run=RUN, epoch="e0")
    assert fence(cmd, None, STALE, None) is None
    assert fence(cmd, replace(running(), deleted=True), STALE, None) is None
    assert fence(cmd, running(), LIVE, None) is None
    kept = fence(cmd, running(), STALE, None)
    assert kept is not None and (kept.epoch, kept.refused, kept.reported, kept.superseded_by) == (
        "e0",
        "run.finished",
        Status.FINISHED,
        "e1",
    )


def test_slot_hint_is_the_start_slot_else_the_owner_slot_for_the_owner_epoch() -> None:
    run = running()  # owner e1 in slot-a
    assert slot_hint(RunStarted(at=at(5), run=RUN, epoch="e9", process="slot-b"), run) == "slot-b"
    assert slot_hint(RunStarted(at=at(5), run=RUN, epoch="e9"), None) is None
    assert slot_hint(RunFinished(at=at(5), run=RUN, epoch="e1"), run) == "slot-a"
    assert slot_hint(RunFinished(at=at(5), run=RUN, epoch="e7"), run) is None
    assert slot_hint(RunFinished(at=at(5), run=RUN, epoch="e1"), None) is None
    assert slot_hint(RunFinished(at=at(5), run=RUN, epoch="e1"), replace(run, epoch=None)) is None


# ------------------------------------------- found by mutation testing (docs/mutation.md)
def test_a_start_clears_an_error_left_on_a_queued_state() -> None:
    """A fold over any stored history: a start begins a clean attempt. Mutation caught:
    `error=None` or `cause=None` dropped from the start's replace."""
    s = evolve(
        replace(queued(), error="left over", cause=Cause(code="C")),
        RunStarted(at=at(1), run=RUN, epoch="e1", status=Status.RUNNING),
    )
    assert (s.error, s.cause) == (None, None)


def _waiting() -> RunState:
    return step(running(), RunPaused(at=at(2), run=RUN, kind="waiting_human", interaction="i1", questions=["ok?"]))


def _answered() -> RunState:
    return step(_waiting(), RunResumed(at=at(3), run=RUN, by="operator", answers={"ok?": "yes"}))


def test_L7_rewind_and_delete_drop_the_pending_interaction_and_handed_answers() -> None:
    """Neither a rewound nor a deleted run keeps a question or an answer that could reach
    a later resume (rule L7). Mutations caught: interaction=, questions= or answers=
    dropped from the rewind's or the delete's replace."""
    for cmd in (RunRewound(at=at(4), run=RUN, to_ref="ref-0"), RunDeleted(at=at(4), run=RUN)):
        for before in (_waiting(), _answered()):
            s = step(before, cmd)
            assert (s.interaction, s.questions, s.answers) == (None, None, None), (type(cmd).__name__, before.status)


def test_I1_F2_a_refused_report_is_kept_with_its_actor_and_claims_an_outcome_only_if_it_reports_one() -> None:
    """What the tolerant import keeps of a report decide refused because of the run's
    status (ledger.run.refused_report): the report's own actor, and `reported` only for
    an outcome (a late finish binds automation, rule F2; a late checkpoint does not).
    A report refused for its own fields (a code on a finish, rule L2) is not an
    observation of the run and is not kept. Mutations caught: the actor dropped; every
    report claiming an outcome; the status check asked of no run."""
    from epochledger.ledger.run import refused_report

    cancelled = step(queued(), RunCancelled(at=at(1), run=RUN))
    finish = RunFinished(at=at(2), run=RUN, epoch="e1", actor="worker")
    kept = refused_report(finish, cancelled, "run 'r-1' is cancelled: run.finished refused")
    assert kept is not None and (kept.actor, kept.reported, kept.refused, kept.epoch) == (
        "worker",
        Status.FINISHED,
        "run.finished",
        "e1",
    )
    ckpt = RunCheckpointed(at=at(2), run=RUN, node="n", ref="r", epoch="e1", actor="worker")
    kept = refused_report(ckpt, cancelled, "refused")
    assert kept is not None and (kept.actor, kept.reported) == ("worker", None)
    assert refused_report(RunFinished(at=at(2), run=RUN, code="X"), running(), "a code belongs on failures") is None
