"""The run decider: the transition table as a literal table (rules L1, L2, L4).

Given a run in a status, when a command is decided, then the run ends in the listed
status, the command is a no-op (its effect already holds), or it is refused with an
error naming the run, its status and the attempt.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from epochledger.ledger.errors import IllegalTransition
from epochledger.ledger.events import (
    RunCancelled,
    RunCheckpointed,
    RunCorrected,
    RunDeleted,
    RunFailed,
    RunFinished,
    RunPaused,
    RunQueued,
    RunResumed,
    RunRewound,
    RunStarted,
    Status,
)
from epochledger.ledger.run import RunState, decide, evolve, fold

T0 = datetime(2026, 9, 9, 14, 0, tzinfo=UTC)
RUN = "r-1"


def at(i: int) -> datetime:
    return T0 + timedelta(seconds=i)


# The commands of the table, each as the API would build it.
COMMANDS = {
    "queue": lambda t: RunQueued(at=t, run=RUN, workflow="wf"),
    "start": lambda t: RunStarted(at=t, run=RUN),
    "checkpoint": lambda t: RunCheckpointed(at=t, run=RUN, node="n1", ref="ref-1"),
    "pause_operator": lambda t: RunPaused(at=t, run=RUN, kind="operator"),
    "pause_human": lambda t: RunPaused(at=t, run=RUN, kind="waiting_human", interaction="i1", questions=["ok?"]),
    "pause_orchestrator": lambda t: RunPaused(at=t, run=RUN, kind="orchestrator", reason="airflow: deferred"),
    "resume_operator": lambda t: RunResumed(at=t, run=RUN, by="operator", answers={"ok?": "yes"}),
    "resume_auto": lambda t: RunResumed(at=t, run=RUN, by="auto"),
    "resume_orchestrator": lambda t: RunResumed(at=t, run=RUN, by="orchestrator"),
    "fail_resumable": lambda t: RunFailed(at=t, run=RUN, code="TIMEOUT", resumable=True),
    "fail_final": lambda t: RunFailed(at=t, run=RUN, code="FAIL_NODE", resumable=False),
    "cancel": lambda t: RunCancelled(at=t, run=RUN),
    "finish": lambda t: RunFinished(at=t, run=RUN),
    "rewind": lambda t: RunRewound(at=t, run=RUN, to_ref="ref-0"),
    "delete": lambda t: RunDeleted(at=t, run=RUN),
    "correct_to_failed": lambda t: RunCorrected(
        at=t, run=RUN, to=Status.FAILED, code="BAD_OUTPUT", actor="alice", reason="output was empty"
    ),
    "correct_to_finished": lambda t: RunCorrected(
        at=t, run=RUN, to=Status.FINISHED, actor="alice", reason="it had completed"
    ),
}

# How each starting status is reached (None = no such run yet).
PATHS = {
    None: [],
    "queued": ["queue"],
    "running": ["queue", "start"],
    "paused_operator": ["queue", "start", "pause_operator"],
    "paused_waiting_human": ["queue", "start", "pause_human"],
    "paused_orchestrator": ["queue", "start", "pause_orchestrator"],
    "failed_resumable": ["queue", "start", "fail_resumable"],
    "failed": ["queue", "start", "fail_final"],
    "cancelled": ["queue", "cancel"],
    "finished": ["queue", "start", "finish"],
}

X = "REFUSED"
NOOP = "no-op"
DEL = "deleted"
# fmt: off
TABLE = {
    #  from \ command        queue      start       checkpoint  pause_operator      pause_human              pause_orchestrator      resume_operator resume_auto resume_orchestrator fail_resumable fail_final cancel finish     rewind     delete correct_to_failed correct_to_finished
    None:                   ("queued",  X,          X,          X,                  X,                       X,                      X,         X,         X,         X,                   X,         X,            X,           X,         X,    X,         X),
    "queued":               (NOOP,      "running",  X,          X,                  X,                       X,                      X,         X,         X,         "failed_resumable",  "failed",  "cancelled",  X,           "queued",  DEL,  X,         X),
    "running":              (X,         NOOP,       "running",  "paused_operator",  "paused_waiting_human",  "paused_orchestrator",  X,         X,         X,         "failed_resumable",  "failed",  "cancelled",  "finished",  X,         DEL,  X,         X),
    "paused_operator":      (X,         X,          X,          NOOP,               X,                       X,                      "queued",  X,         X,         X,                   X,         "cancelled",  X,           "queued",  DEL,  X,         X),
    "paused_waiting_human": (X,         X,          X,          X,                  NOOP,                    X,                      "queued",  X,         X,         X,                   X,         "cancelled",  X,           "queued",  DEL,  X,         X),
    "paused_orchestrator":  (X,         X,          X,          X,                  X,                       NOOP,                   "queued",  X,         "queued",  "failed_resumable",  "failed",  "cancelled",  "finished",  "queued",  DEL,  X,         X),
    "failed_resumable":     (X,         X,          X,          X,                  X,                       X,                      "queued",  "queued",  X,         NOOP,                X,         "cancelled",  X,           "queued",  DEL,  X,         X),
    "failed":               (X,         X,          X,          X,                  X,                       X,                      X,         X,         X,         X,                   NOOP,      X,            X,           X,         DEL,  "failed",  "finished"),
    "cancelled":            (X,         X,          X,          X,                  X,                       X,                      "queued",  X,         X,         X,                   X,         NOOP,         X,           "queued",  DEL,  X,         X),
    "finished":             (X,         X,          X,          X,                  X,                       X,                      X,         X,         X,         X,                   X,         X,            NOOP,        X,         DEL,  "failed",  X),
}
# fmt: on
CASES = [(start, cmd, TABLE[start][i]) for start in TABLE for i, cmd in enumerate(COMMANDS)]


def given(start: str | None) -> RunState | None:
    state = None
    for i, name in enumerate(PATHS[start]):
        [event] = decide(COMMANDS[name](at(i)), state)
        state = evolve(state, event)
    assert (state.status if state else None) == start
    return state


def test_L4_table_covers_every_status_and_every_command() -> None:
    assert set(TABLE) == {None, *(s.value for s in Status)}
    assert set(PATHS) == set(TABLE)
    assert all(len(row) == len(COMMANDS) for row in TABLE.values())


# The cells of TABLE refused by a rule past the transition table, with its reason.
REFUSED_BY = {
    ("paused_operator", "resume_auto"): "automation may not resume a run that is paused_operator with code UNKNOWN",
    (
        "paused_waiting_human",
        "resume_auto",
    ): "automation may not resume a run that is paused_waiting_human with code UNKNOWN",
    ("cancelled", "resume_auto"): "automation may not resume a run that is cancelled with code CANCELLED",
    (
        "paused_orchestrator",
        "resume_auto",
    ): "automation may not resume a run that is paused_orchestrator with code UNKNOWN",
    **{
        (start, "resume_orchestrator"): "the orchestrator resumes only its own wait (a pause of kind orchestrator)"
        for start in ("paused_operator", "paused_waiting_human", "failed_resumable", "cancelled")
    },
    ("finished", "correct_to_finished"): "the run is already finished with that code",
}


@pytest.mark.parametrize(("start", "cmd", "expected"), CASES, ids=[f"{s}-{c}" for s, c, _ in CASES])
def test_L1_L4_transition_table(start: str | None, cmd: str, expected: str) -> None:
    state = given(start)
    command = COMMANDS[cmd](at(100))
    if expected == X:
        with pytest.raises(IllegalTransition) as refused:
            decide(command, state)
        assert refused.value.run == RUN
        assert refused.value.status == start
        assert refused.value.attempted == command.__struct_config__.tag
        assert RUN in str(refused.value) and command.__struct_config__.tag in str(refused.value)
        # Refused by the check that owns the cell: the transition table itself (no reason
        # beyond it) but for the cells below, not by another check a cell could hide behind.
        assert refused.value.why == REFUSED_BY.get(
            (start, cmd), "a run begins with run.queued" if start is None else ""
        )
        return
    events = decide(command, state)
    if expected == NOOP:
        assert events == []
        return
    [event] = events
    after = evolve(state, event)
    assert event.status == after.status  # the event carries the resulting status (L1)
    if expected == DEL:
        assert after.deleted and after.status == start
    else:
        assert after.status == expected


def test_L2_failure_carries_code_and_other_transitions_clear_it() -> None:
    state = given("failed_resumable")
    assert state.code == "TIMEOUT"
    [resumed] = decide(COMMANDS["resume_auto"](at(100)), state)
    assert resumed.code == "" and evolve(state, resumed).code == ""


def test_L2_cancel_carries_CANCELLED_and_empty_failure_code_is_unknown_not_none() -> None:
    [cancelled] = decide(COMMANDS["cancel"](at(100)), given("running"))
    assert cancelled.code == "CANCELLED"
    [failed] = decide(RunFailed(at=at(100), run=RUN, code="", resumable=True), given("running"))
    assert failed.status == Status.FAILED_RESUMABLE and failed.code == ""


@pytest.mark.parametrize(
    "start", ["paused_operator", "paused_waiting_human", "paused_orchestrator", "failed_resumable"]
)
def test_L2_a_cancel_of_a_pause_or_failure_keeps_the_cause_it_overrides(start: str) -> None:
    """Cancelling a paused or failed run writes CANCELLED and keeps what it was (status,
    code, error, cause, reason) in the state until the run leaves `cancelled`; a cancel of
    an active run overrides nothing. Repro (before the fix): the cancel dropped the
    earlier cause, which only `history` still showed."""
    from epochledger.ledger.events import Cause
    from epochledger.ledger.run import CancelledFrom

    state = given(start)
    if start == "failed_resumable":  # a failure with its text and its cause chain
        state = given("running")
        state = fold(
            decide(
                RunFailed(
                    at=at(50),
                    run=RUN,
                    code="TIMEOUT",
                    resumable=True,
                    error="step s1 took 3h",
                    cause=Cause(code="OOM_KILLED"),
                    reason="budget 2h",
                ),
                state,
            ),
            state,
        )
    before = state
    state = fold(decide(RunCancelled(at=at(100), run=RUN, actor="alice"), state), state)
    assert (state.status, state.code, state.error, state.cause) == (Status.CANCELLED, "CANCELLED", None, None)
    assert state.cancelled_from == CancelledFrom(
        status=before.status, code=before.code, error=before.error, cause=before.cause, reason=before.reason
    )
    if start == "failed_resumable":
        assert state.cancelled_from.code == "TIMEOUT" and state.cancelled_from.cause == Cause(code="OOM_KILLED")
    resumed = fold(decide(COMMANDS["resume_operator"](at(101)), state), state)
    assert resumed.cancelled_from is None  # it left `cancelled`
    for active in ("queued", "running"):
        assert fold(decide(COMMANDS["cancel"](at(100)), given(active)), given(active)).cancelled_from is None


def test_E1_P1_the_orchestrators_own_wait_is_resumed_by_the_orchestrator_and_its_next_start_is_the_next_attempt() -> (
    None
):
    """An Airflow deferral or reschedule: the task runner pauses the run (kind
    `orchestrator`, on behalf of its epoch) and exits; Airflow resumes it in a new
    process: `resume(by="orchestrator")` then a start, attempt 2. Neither its wait nor
    an operator's pause is automation's to end. Mutations caught: the kind mapped to
    another pause status, the wait handed to automation,
    the orchestrator's resume allowed from another status, the attempt not counted."""
    state = given("running")
    assert state is not None and state.attempt == 1
    state = fold(decide(RunPaused(at=at(10), run=RUN, kind="orchestrator", epoch="e1"), state), state)
    assert state is not None and (state.status, state.code) == (Status.PAUSED_ORCHESTRATOR, "")
    # A retry lane (by "auto") may not take the orchestrator's wait over.
    with pytest.raises(IllegalTransition, match="automation may not resume a run that is paused_orchestrator"):
        decide(COMMANDS["resume_auto"](at(15)), state)
    state = fold(decide(RunResumed(at=at(20), run=RUN, by="orchestrator", reason="airflow: rescheduled"), state), state)
    assert state is not None and state.status == Status.QUEUED
    state = fold(decide(RunStarted(at=at(21), run=RUN, epoch="e2"), state), state)
    assert state is not None and (state.status, state.epoch, state.attempt) == (Status.RUNNING, "e2", 2)
    with pytest.raises(IllegalTransition, match="automation may not resume a run that is paused_operator"):
        decide(COMMANDS["resume_auto"](at(30)), given("paused_operator"))


def test_E1_L2_the_orchestrators_own_wait_ended_by_the_orchestrator_is_failed_or_finished_as_it_said() -> None:
    """An Airflow user marks a waiting try failed or success by hand, or Airflow's
    scheduler fails it: the orchestrator ended the work while it waited. The ledger
    records that end from the wait, with the orchestrator's actor, code and error, and
    no start it never made (the attempt stays); another pause is still left only by a
    resume or a cancel. Repro (before the fix): both were refused, and the try stayed
    paused_orchestrator where Airflow had ended it."""
    waiting = given("paused_orchestrator")
    assert waiting is not None and waiting.attempt == 1
    marked = RunFailed(
        at=at(100), run=RUN, code="CANCELLED", resumable=False, error="marked failed", actor="airflow-api"
    )
    failed = fold(decide(marked, waiting), waiting)
    assert failed is not None
    assert (failed.status, failed.code, failed.error, failed.actor, failed.attempt) == (
        Status.FAILED,
        "CANCELLED",
        "marked failed",
        "airflow-api",
        1,
    )
    by_scheduler = RunFailed(at=at(100), run=RUN, code="PROCESS_EXITED", resumable=True, actor="airflow-scheduler")
    retried = fold(decide(by_scheduler, waiting), waiting)
    assert retried is not None and (retried.status, retried.code) == (Status.FAILED_RESUMABLE, "PROCESS_EXITED")
    done = fold(decide(RunFinished(at=at(100), run=RUN, actor="airflow-api"), waiting), waiting)
    assert done is not None and (done.status, done.code, done.attempt) == (Status.FINISHED, "", 1)
    for other in ("paused_operator", "paused_waiting_human"):
        for command in (marked, RunFinished(at=at(100), run=RUN, actor="airflow-api")):
            with pytest.raises(IllegalTransition):
                decide(command, given(other))


def test_L7_a_cancel_of_a_human_wait_drops_its_question_and_answers() -> None:
    """Interaction evidence only while paused: a run that leaves paused_waiting_human for
    `cancelled` no longer holds the pending question (L7 already held for a resume), and
    a cancel of a run holding answers handed over by a resume drops them too."""
    state = given("paused_waiting_human")
    cancelled = fold(decide(COMMANDS["cancel"](at(100)), state), state)
    assert (cancelled.interaction, cancelled.questions, cancelled.answers) == (None, None, None)
    state = fold(decide(COMMANDS["resume_operator"](at(10)), state), state)
    state = fold(decide(COMMANDS["start"](at(11)), state), state)
    assert state.answers == {"ok?": "yes"}
    assert fold(decide(COMMANDS["cancel"](at(12)), state), state).answers is None


def test_L1_a_queue_of_a_run_queued_with_the_same_fields_is_a_no_op_after_a_retry() -> None:
    """An adapter retrying after a timeout, or re-publishing a retried task, queues a run
    that is queued again (after fail, resume): the same fields at a later time, by
    another actor, append nothing. Repro (before the fix): IllegalTransition, because the
    last event was the resume, not the queue."""
    state = given("failed_resumable")
    state = fold(decide(COMMANDS["resume_auto"](at(100)), state), state)
    assert state.status == Status.QUEUED and state.last is not None and type(state.last) is RunResumed
    assert decide(RunQueued(at=at(200), run=RUN, workflow="wf", actor="celery", reason="retry 1"), state) == []
    # The fields are the queue's: a start in another slot moves `process`, not what was queued.
    state = None
    for cmd in (
        RunQueued(at=at(0), run=RUN, process="slot-a", labels={"team": "data"}),
        RunStarted(at=at(1), run=RUN, process="slot-b"),
        RunFailed(at=at(2), run=RUN, resumable=True),
        RunResumed(at=at(3), run=RUN, by="auto"),
    ):
        state = fold(decide(cmd, state), state)
    assert state is not None and state.process == "slot-b"
    assert decide(RunQueued(at=at(4), run=RUN, process="slot-a", labels={"team": "data"}), state) == []
    with pytest.raises(IllegalTransition, match="process 'slot-a', not 'slot-b'"):
        decide(RunQueued(at=at(4), run=RUN, process="slot-b", labels={"team": "data"}), state)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("workflow", "other", "workflow 'wf', not 'other'"),
        ("process", "slot-b", "process None, not 'slot-b'"),
        ("labels", {"team": "ml"}, "labels {}, not {'team': 'ml'}"),
        ("parent", "r-0", "parent None, not 'r-0'"),
    ],
)
def test_L4_a_queue_of_a_queued_run_with_other_fields_is_refused_naming_them(
    field: str, value: object, named: str
) -> None:
    for state in (given("queued"), fold(decide(COMMANDS["rewind"](at(50)), given("cancelled")), given("cancelled"))):
        cmd = msgspec.structs.replace(COMMANDS["queue"](at(100)), **{field: value})
        with pytest.raises(IllegalTransition, match="already queued with other fields") as e:
            decide(cmd, state)
        assert named in str(e.value) and e.value.run == RUN and e.value.status == "queued"
    with pytest.raises(IllegalTransition, match=r"workflow 'wf', not 'other'; parent None, not 'r-0'\)$"):
        decide(RunQueued(at=at(100), run=RUN, workflow="other", parent="r-0"), given("queued"))  # each one named
    with pytest.raises(IllegalTransition):  # a run that is not queued: as before
        decide(COMMANDS["queue"](at(100)), given("running"))


def test_L2_code_on_a_non_failure_transition_is_refused() -> None:
    with pytest.raises(IllegalTransition, match="belongs only on a failure"):
        decide(RunFinished(at=at(100), run=RUN, code="TIMEOUT"), given("running"))


def test_L1_a_command_claiming_the_wrong_resulting_status_is_refused() -> None:
    with pytest.raises(IllegalTransition, match="transition gives finished"):
        decide(RunFinished(at=at(100), run=RUN, status=Status.FAILED), given("running"))


def test_L4_waiting_human_resume_needs_answers() -> None:
    with pytest.raises(IllegalTransition, match="needs answers"):
        decide(RunResumed(at=at(100), run=RUN, by="operator"), given("paused_waiting_human"))


@pytest.mark.parametrize("code", ["NODE_NOT_FOUND", "RESUME_INVALID", "FAIL_NODE"])
def test_P1_auto_resume_refused_for_pointless_codes(code: str) -> None:
    state = given("running")
    [failed] = decide(RunFailed(at=at(50), run=RUN, code=code, resumable=True), state)
    state = evolve(state, failed)
    with pytest.raises(IllegalTransition, match="automation may not resume"):
        decide(COMMANDS["resume_auto"](at(100)), state)
    [resumed] = decide(COMMANDS["resume_operator"](at(100)), state)  # an operator may
    assert resumed.status == Status.QUEUED


def test_L4_deleted_run_accepts_nothing_but_delete_again() -> None:
    state = evolve(given("running"), decide(COMMANDS["delete"](at(50)), given("running"))[0])
    assert decide(COMMANDS["delete"](at(60)), state) == []
    for name in COMMANDS:
        if name != "delete":
            with pytest.raises(IllegalTransition, match="deleted"):
                decide(COMMANDS[name](at(70)), state)


def test_L6_rewind_sets_checkpoint_to_ref_and_delete_removes_it() -> None:
    state = given("running")
    state = fold(decide(COMMANDS["checkpoint"](at(10)), state), state)
    state = fold(decide(COMMANDS["pause_operator"](at(11)), state), state)
    assert state.checkpoint is not None and state.checkpoint.ref == "ref-1"
    rewound = fold(decide(COMMANDS["rewind"](at(12)), state), state)
    assert rewound.checkpoint is not None and rewound.checkpoint.ref == "ref-0"
    to_start = fold(decide(RunRewound(at=at(12), run=RUN), state), state)
    assert to_start.checkpoint is None
    deleted = fold(decide(COMMANDS["delete"](at(13)), state), state)
    assert deleted.checkpoint is None


def test_L6_finished_run_keeps_its_checkpoint() -> None:
    state = given("running")
    state = fold(decide(COMMANDS["checkpoint"](at(10)), state), state)
    kept = state.checkpoint
    state = fold(decide(COMMANDS["finish"](at(11)), state), state)
    assert state.status == Status.FINISHED and kept is not None and state.checkpoint == kept


def test_L7_resume_consumes_the_interaction_and_a_later_pause_drops_old_answers() -> None:
    state = given("paused_waiting_human")
    assert state.interaction == "i1" and state.questions == ["ok?"]
    state = fold(decide(COMMANDS["resume_operator"](at(10)), state), state)
    assert state.interaction is None and state.questions is None and state.answers == {"ok?": "yes"}
    state = fold(decide(COMMANDS["start"](at(11)), state), state)
    state = fold(
        decide(RunPaused(at=at(12), run=RUN, kind="waiting_human", interaction="i2", questions=["again?"]), state),
        state,
    )
    assert state.answers is None and state.interaction == "i2"
    with pytest.raises(IllegalTransition, match="needs answers"):
        decide(RunResumed(at=at(13), run=RUN, by="operator"), state)


def test_L1_same_event_again_is_a_no_op_even_at_a_later_time() -> None:
    state = given("running")
    state = fold(decide(COMMANDS["checkpoint"](at(10)), state), state)
    assert decide(COMMANDS["checkpoint"](at(99)), state) == []
    assert decide(RunCheckpointed(at=at(99), run=RUN, node="n1", ref="ref-2"), state) != []


# ---------------------------------------------- pinned by mutation testing (issue 10)
def test_L1_a_second_different_start_of_a_running_run_is_refused() -> None:
    """Only the same start again is a no-op; a start naming another owner is a new
    command, and `run.started` is legal only from queued. Mutation caught: the
    duplicate check comparing tags alone (or `_sans_stamp` dropping `epoch`)."""
    state = fold(decide(RunStarted(at=at(1), run=RUN, epoch="e1"), given("queued")), given("queued"))
    assert decide(RunStarted(at=at(5), run=RUN, epoch="e1"), state) == []
    with pytest.raises(IllegalTransition, match="is running: run.started refused"):
        decide(RunStarted(at=at(5), run=RUN, epoch="e2"), state)


def test_L1_a_repeat_finish_is_a_no_op_and_a_different_cancel_is_refused() -> None:
    finished = given("finished")
    assert decide(RunFinished(at=at(50), run=RUN), finished) == []
    with pytest.raises(IllegalTransition) as refused:
        decide(RunFinished(at=at(50), run=RUN, epoch="other"), finished)
    assert (refused.value.run, refused.value.status, refused.value.attempted, refused.value.why) == (
        RUN,
        Status.FINISHED,
        "run.finished",
        "",
    )
    cancelled = given("cancelled")
    assert decide(RunCancelled(at=at(50), run=RUN), cancelled) == []
    with pytest.raises(IllegalTransition, match="is cancelled: run.cancelled refused"):
        decide(RunCancelled(at=at(50), run=RUN, code="DUPLICATE"), cancelled)


@pytest.mark.parametrize(
    "to", [s for s in Status if s not in (Status.FAILED, Status.FINISHED, Status.FAILED_RESUMABLE)]
)
def test_L4_a_correction_may_not_set_an_active_paused_or_cancelled_status(to: Status) -> None:
    for start in ("failed", "finished"):
        with pytest.raises(IllegalTransition, match=f"may not set {to}"):
            decide(RunCorrected(at=at(50), run=RUN, to=to, actor="alice", reason="why"), given(start))


def test_L4_a_correction_needs_an_actor_and_a_reason_and_a_change() -> None:
    for actor, reason in ((None, "why"), ("alice", None), ("", "why")):
        with pytest.raises(IllegalTransition, match="needs an actor and a reason"):
            decide(RunCorrected(at=at(50), run=RUN, to=Status.FINISHED, actor=actor, reason=reason), given("failed"))
    with pytest.raises(IllegalTransition, match="already finished"):
        decide(RunCorrected(at=at(50), run=RUN, to=Status.FINISHED, actor="a", reason="r"), given("finished"))
    [e] = decide(
        RunCorrected(at=at(50), run=RUN, to=Status.FAILED, code="OTHER", actor="a", reason="r"), given("failed")
    )
    assert (e.status, e.code) == (Status.FAILED, "OTHER")


# (command, the status it leaves the run in) for every command whose result is not a failure
NON_FAILURE = [
    ("queue", None, lambda: RunQueued(at=at(50), run=RUN, code="X")),
    ("start", "queued", lambda: RunStarted(at=at(50), run=RUN, code="X")),
    ("pause_operator", "running", lambda: RunPaused(at=at(50), run=RUN, kind="operator", code="X")),
    ("pause_human", "running", lambda: RunPaused(at=at(50), run=RUN, kind="waiting_human", code="X")),
    ("pause_orchestrator", "running", lambda: RunPaused(at=at(50), run=RUN, kind="orchestrator", code="X")),
    ("resume", "failed_resumable", lambda: RunResumed(at=at(50), run=RUN, by="operator", code="X")),
    ("rewind", "cancelled", lambda: RunRewound(at=at(50), run=RUN, code="X")),
    ("finish", "running", lambda: RunFinished(at=at(50), run=RUN, code="X")),
]


@pytest.mark.parametrize(("name", "start", "command"), NON_FAILURE, ids=[n for n, _, _ in NON_FAILURE])
def test_L2_every_transition_to_a_non_failure_status_refuses_a_code(name, start, command) -> None:
    """Rule L2: a code belongs only on a failure status; queued, running and paused
    carry none. Mutation caught: the code check limited to some commands."""
    with pytest.raises(IllegalTransition, match="belongs only on a failure status"):
        decide(command(), given(start))


@pytest.mark.parametrize("start", [s.value for s in Status])
def test_F1_fenced_evidence_is_kept_from_every_status_and_changes_nothing(start: str) -> None:
    """`run.fenced` is legal from every status and is evidence, not a transition: status,
    code, checkpoint and last actor stay; the count goes up. Mutation caught: run.fenced
    limited to some statuses, or evolved like a transition."""
    from epochledger.ledger.events import RunFenced

    state = given(start)
    assert state is not None
    fenced = RunFenced(
        at=at(99),
        run=RUN,
        epoch="old",
        refused="run.finished",
        why="superseded",
        actor="old-worker",
        reported=Status.FINISHED,
    )
    [e] = decide(fenced, state)
    after = evolve(state, e)
    assert (after.status, after.code, after.checkpoint, after.actor, after.updated_at) == (
        state.status,
        state.code,
        state.checkpoint,
        state.actor,
        state.updated_at,
    )
    assert after.fenced == state.fenced + 1 and after.version == state.version + 1
    assert after.fenced_end is not None and after.fenced_end.epoch == "old"


# ------------------------------------------- found by mutation testing (docs/mutation.md)
def _queued_then_deleted() -> RunState:
    s = fold(decide(RunQueued(at=at(0), run=RUN, workflow="wf"), None))
    (event,) = decide(RunDeleted(at=at(1), run=RUN), s)
    return evolve(s, event)


@pytest.mark.parametrize(
    "state, cmd, status, why",
    [
        (_queued_then_deleted, RunStarted(at=at(2), run=RUN), "deleted", "a deleted run accepts nothing"),
        (lambda: None, RunStarted(at=at(2), run=RUN), None, "a run begins with run.queued"),
        (
            lambda: fold(decide(RunQueued(at=at(0), run=RUN), None)),
            RunStarted(at=at(2), run=RUN, code="TIMEOUT"),
            Status.QUEUED,
            "a code ('TIMEOUT') belongs only on a failure status, not running",
        ),
        (
            lambda: fold(decide(RunQueued(at=at(0), run=RUN), None)),
            RunStarted(at=at(2), run=RUN, status=Status.FINISHED),
            Status.QUEUED,
            "the event says status finished but the transition gives running",
        ),
    ],
    ids=["deleted", "no-such-run", "code-on-running", "status-mismatch"],
)
def test_L4_a_refusal_names_the_run_its_status_the_attempt_and_why(state, cmd, status, why):
    """Every field of the refusal, which the CLI prints and a caller branches on.
    Mutations caught: the run, status, tag or reason of any of these four refusals
    dropped, replaced or reworded."""
    with pytest.raises(IllegalTransition) as err:
        decide(cmd, state())
    e = err.value
    assert (e.run, e.status, e.attempted, e.why) == (RUN, status, "run.started", why)
    shown = status if status is not None else "(no such run)"
    assert str(e) == f"run {RUN!r} is {shown}: run.started refused ({why})"


def test_L1_an_event_is_stamped_in_utc_whatever_zone_the_command_came_in() -> None:
    """The log holds UTC instants only, so replays and the audit compare like with like.
    Mutations caught: the `at=...astimezone(UTC)` dropped, or converting to the
    machine's local zone (an object that is not `UTC`, even where the machine runs UTC)."""
    from datetime import timezone

    cest = timezone(timedelta(hours=2))
    (event,) = decide(RunQueued(at=datetime(2026, 9, 9, 16, 0, tzinfo=cest), run=RUN), None)
    assert event.at == T0 and event.at.tzinfo is UTC


def _fenced_then_failed() -> RunState:
    """A running run whose stale epoch reported it finished (kept as evidence), then
    failed resumably: automation may not resume it (rule F2)."""
    from epochledger.ledger.events import RunFenced

    s = given("running")
    s = evolve(
        s,
        RunFenced(
            at=at(5),
            run=RUN,
            epoch="e0",
            refused="run.finished",
            why="superseded",
            reported=Status.FINISHED,
            status=Status.RUNNING,
        ),
    )
    (event,) = decide(RunFailed(at=at(6), run=RUN, code="TIMEOUT", resumable=True), s)
    return evolve(s, event)


def _failed_with(code: str) -> RunState:
    s = given("running")
    (event,) = decide(RunFailed(at=at(5), run=RUN, code=code, resumable=True), s)
    return evolve(s, event)


_FENCE_WHY = (
    "automation may not resume it: stale epoch e0 reported run.finished (finished) at "
    f"{at(5).isoformat()}, kept as fenced evidence; an operator decides (rule F2)"
)


@pytest.mark.parametrize(
    "state, cmd, status, attempted, why",
    [
        (_fenced_then_failed, COMMANDS["resume_auto"](at(9)), Status.FAILED_RESUMABLE, "run.resumed", _FENCE_WHY),
        (
            lambda: _failed_with("NODE_NOT_FOUND"),
            COMMANDS["resume_auto"](at(9)),
            Status.FAILED_RESUMABLE,
            "run.resumed",
            "automation may not resume a run that is failed_resumable with code NODE_NOT_FOUND",
        ),
        (
            lambda: given("paused_operator"),
            COMMANDS["resume_auto"](at(9)),
            Status.PAUSED_OPERATOR,
            "run.resumed",
            "automation may not resume a run that is paused_operator with code UNKNOWN",
        ),
        (
            lambda: given("paused_waiting_human"),
            RunResumed(at=at(9), run=RUN, by="operator"),
            Status.PAUSED_WAITING_HUMAN,
            "run.resumed",
            "a run waiting on a human needs answers to resume",
        ),
        (
            lambda: given("failed"),
            RunCorrected(at=at(9), run=RUN, to=Status.FINISHED, actor="alice"),
            Status.FAILED,
            "run.corrected",
            "a correction needs an actor and a reason",
        ),
        (
            lambda: given("failed"),
            RunCorrected(at=at(9), run=RUN, to=Status.QUEUED, actor="alice", reason="r"),
            Status.FAILED,
            "run.corrected",
            "a correction may not set queued",
        ),
        (
            lambda: given("failed"),
            RunCorrected(at=at(9), run=RUN, to=Status.FAILED, code="FAIL_NODE", actor="a", reason="r"),
            Status.FAILED,
            "run.corrected",
            "the run is already failed with that code",
        ),
        (lambda: given("finished"), COMMANDS["start"](at(9)), Status.FINISHED, "run.started", ""),
    ],
    ids=[
        "fenced-auto-resume",
        "pointless-code",
        "unknown-code-paused",
        "answers",
        "correction-actor",
        "correction-target",
        "correction-no-change",
        "table",
    ],
)
def test_L4_F2_every_refusal_of_a_resume_or_correction_names_run_status_attempt_and_why(
    state, cmd, status, attempted, why
):
    """Mutations caught: any refusal's run, status, tag or reason dropped, replaced or
    reworded; `state.code or 'UNKNOWN'` turned into `and`."""
    with pytest.raises(IllegalTransition) as err:
        decide(cmd, state())
    e = err.value
    assert (e.run, e.status, e.attempted, e.why) == (RUN, status, attempted, why)
    assert str(e) == f"run {RUN!r} is {status}: {attempted} refused" + (f" ({why})" if why else "")


@pytest.mark.parametrize("start", [s.value for s in Status])
def test_I3_an_importers_cursor_is_kept_from_every_status_and_changes_nothing(start: str) -> None:
    """`run.imported` (an importer's per-run cursor) is legal from every status and is
    bookkeeping: status, code, the last report and who made it, and the updated time
    all stay; only the version moves, and the source's own status as read is kept
    beside them, so a retried delivery of the last report is still recognised.
    Mutation caught: run.imported limited to some statuses, or evolved like a
    transition (the actor and `last` would change)."""
    from epochledger.ledger.events import RunImported

    state = given(start)
    assert state is not None
    imported = RunImported(at=at(99), run=RUN, source="dagster", cursor=17, source_status="SUCCESS", actor="importer")
    [e] = decide(imported, state)
    after = evolve(state, e)
    assert after == msgspec.structs.replace(state, version=state.version + 1, source="dagster", source_status="SUCCESS")
    assert e.status == state.status and e.code == state.code
