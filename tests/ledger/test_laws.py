"""Laws over random command sequences (hypothesis): rules L2, L6, L7, and the fold laws
(folding in two parts equals folding at once; a final state absorbs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from epochledger.ledger import lifecycle
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
from epochledger.ledger.run import decide, evolve, fold

T0 = datetime(2026, 9, 9, tzinfo=UTC)
R = "r"
codes = st.sampled_from(["", "TIMEOUT", "NODE_NOT_FOUND", "FAIL_NODE", "OOM_KILLED", "weird code ü"])
refs = st.sampled_from(["a", "b", "c"])
commands = st.one_of(
    st.builds(lambda: RunQueued(at=T0, run=R)),
    st.builds(lambda: RunStarted(at=T0, run=R)),
    st.builds(lambda n, r: RunCheckpointed(at=T0, run=R, node=n, ref=r), st.sampled_from(["n1", "n2"]), refs),
    st.builds(
        lambda k, i: RunPaused(at=T0, run=R, kind=k, interaction=i, questions=["q"]),
        st.sampled_from(["operator", "waiting_human"]),
        st.sampled_from(["i1", "i2"]),
    ),
    st.builds(
        lambda by, a: RunResumed(at=T0, run=R, by=by, answers=a),
        st.sampled_from(["operator", "auto"]),
        st.sampled_from([None, {"q": "yes"}, {"q": "no"}]),
    ),
    st.builds(lambda c, r: RunFailed(at=T0, run=R, code=c, resumable=r), codes, st.booleans()),
    st.builds(lambda: RunCancelled(at=T0, run=R)),
    st.builds(lambda: RunFinished(at=T0, run=R)),
    st.builds(lambda r: RunRewound(at=T0, run=R, to_ref=r), st.one_of(st.none(), refs)),
    st.builds(lambda: RunDeleted(at=T0, run=R)),
    st.builds(
        lambda to, c, who: RunCorrected(at=T0, run=R, to=to, code=c, actor=who, reason=who and "audit"),
        st.sampled_from(list(Status)),
        codes,
        st.sampled_from([None, "alice"]),
    ),
)


def play(cmds):
    """Decide each command in turn (refusals skipped); return the events and states."""
    state, events, states = None, [], []
    for i, c in enumerate(cmds):
        c = c.__class__(**{**{f: getattr(c, f) for f in c.__struct_fields__}, "at": T0 + timedelta(seconds=i)})
        try:
            new = decide(c, state)
        except IllegalTransition:
            continue
        for e in new:
            prev, state = state, evolve(state, e)
            events.append(e)
            states.append((prev, e, state))
    return events, states


@settings(max_examples=400, deadline=None)
@given(st.lists(commands, max_size=40))
def test_L2_code_only_on_failure_statuses(cmds) -> None:
    for _, e, s in play(cmds)[1]:
        if not lifecycle.is_failure(s.status):
            assert s.code == "" and e.code == "" and s.error is None
        assert e.status == s.status  # L1: the event carries the resulting status


@settings(max_examples=400, deadline=None)
@given(st.lists(commands, max_size=40))
def test_L6_only_delete_and_rewind_remove_a_checkpoint(cmds) -> None:
    for prev, e, s in play(cmds)[1]:
        if prev is not None and prev.checkpoint is not None and s.checkpoint != prev.checkpoint:
            assert isinstance(e, RunCheckpointed | RunRewound | RunDeleted), e


@settings(max_examples=400, deadline=None)
@given(st.lists(commands, max_size=40))
def test_L7_answers_never_outlive_the_next_pause(cmds) -> None:
    for _prev, e, s in play(cmds)[1]:
        if isinstance(e, RunPaused):
            assert s.answers is None
        if isinstance(e, RunResumed):
            assert s.interaction is None and s.questions is None and s.answers == e.answers


@settings(max_examples=300, deadline=None)
@given(st.lists(commands, max_size=40), st.integers(min_value=0, max_value=40))
def test_R1_fold_in_two_parts_equals_fold_at_once(cmds, cut) -> None:
    events = play(cmds)[0]
    cut = min(cut, len(events))
    assert fold(events[cut:], fold(events[:cut])) == fold(events)


@settings(max_examples=300, deadline=None)
@given(st.lists(commands, max_size=40), st.lists(commands, max_size=20))
def test_L4_final_states_absorb_everything_but_delete_and_an_attributed_correction(cmds, more) -> None:
    events, _ = play(cmds)
    state = fold(events)
    if state is None or not lifecycle.is_final_success(state.status) and not lifecycle.is_final_failure(state.status):
        return
    for c in more:
        try:
            new = decide(c, state)
        except IllegalTransition:
            continue
        for e in new:
            assert isinstance(e, RunDeleted) or (isinstance(e, RunCorrected) and e.actor and e.reason), e
