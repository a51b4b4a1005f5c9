"""The process-slot decider as a literal table (rules O1, O2, O5): given a slot's
epochs, when a process command is decided, then it appends, is a no-op (its effect
already holds), or is refused with an error naming the slot, the state and the
attempt. Plus the fold: each boot supersedes the epoch before it, and marks land on
their own epoch only (tests/projections/test_orphans.py pins the supersession chain)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from epochledger.ledger import process as process_mod
from epochledger.ledger.errors import IllegalTransition
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessStopped,
    ProcessStopping,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    tag_of,
)

T0 = datetime(2026, 9, 9, 14, 0, tzinfo=UTC)
P = "worker-1"


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


COMMANDS = {
    "boot_e1_again": lambda: ProcessBooted(at=at(0), process=P, epoch="e1", booted_at=at(-5)),
    "boot_e1_other": lambda: ProcessBooted(at=at(99), process=P, epoch="e1", booted_at=at(90)),
    "boot_e1_recorded_later": lambda: ProcessBooted(at=at(99), process=P, epoch="e1", booted_at=at(-5)),
    "boot_e1_other_instant": lambda: ProcessBooted(at=at(0), process=P, epoch="e1", booted_at=at(90)),
    "boot_e2": lambda: ProcessBooted(at=at(100), process=P, epoch="e2", booted_at=at(95)),
    "stopping_e1": lambda: ProcessStopping(at=at(50), process=P, epoch="e1"),
    "stopped_e1": lambda: ProcessStopped(at=at(60), process=P, epoch="e1"),
    "stopping_ghost": lambda: ProcessStopping(at=at(50), process=P, epoch="ghost"),
    "stopped_ghost": lambda: ProcessStopped(at=at(50), process=P, epoch="ghost"),
    "skipped_e1": lambda: ProcessSweepSkipped(at=at(70), process=P, epoch="e1", why="clock stepped back"),
    "skipped_ghost": lambda: ProcessSweepSkipped(at=at(70), process=P, epoch="ghost", why="x"),
    "failed_e1": lambda: ProcessSweepFailed(at=at(80), process=P, epoch="e1", attempts=3, error="down"),
    "failed_ghost": lambda: ProcessSweepFailed(at=at(80), process=P, epoch="ghost", attempts=3, error="down"),
}
GIVEN = {
    "empty": [],
    "booted": ["boot_e1_again"],
    "stopping": ["boot_e1_again", "stopping_e1"],
    "stopped": ["boot_e1_again", "stopping_e1", "stopped_e1"],
    "stopped_only": ["boot_e1_again", "stopped_e1"],  # an imported history may lack the stopping mark
}
A, NOOP = "append", "no-op"
REFUSED = ("refused", None)  # IllegalTransition(process, None, tag, "unknown epoch ...")
DUP = ("refused", "booted")  # IllegalTransition(process, "booted", tag, "... already booted")
# fmt: off
TABLE = {
    #               boot_e1_again boot_e1_other later other_instant boot_e2 stopping_e1 stopped_e1 stopping_ghost stopped_ghost skipped_e1 skipped_ghost failed_e1 failed_ghost
    "empty":        (A,           A,            A,    A,            A,      REFUSED,    REFUSED,   REFUSED,       REFUSED,      REFUSED,   REFUSED,      REFUSED,  REFUSED),
    "booted":       (NOOP,        DUP,          DUP,  DUP,          A,      A,          A,         REFUSED,       REFUSED,      A,         REFUSED,      A,        REFUSED),
    "stopping":     (NOOP,        DUP,          DUP,  DUP,          A,      NOOP,       A,         REFUSED,       REFUSED,      A,         REFUSED,      A,        REFUSED),
    "stopped":      (NOOP,        DUP,          DUP,  DUP,          A,      NOOP,       NOOP,      REFUSED,       REFUSED,      A,         REFUSED,      A,        REFUSED),
    "stopped_only": (NOOP,        DUP,          DUP,  DUP,          A,      NOOP,       NOOP,      REFUSED,       REFUSED,      A,         REFUSED,      A,        REFUSED),
}
# fmt: on


def given(name: str) -> process_mod.ProcessState | None:
    state = None
    for cmd in GIVEN[name]:
        events = process_mod.decide(COMMANDS[cmd](), state)
        state = process_mod.fold(events, state)
    return state


def test_O1_table_covers_every_slot_state_and_every_command() -> None:
    assert set(TABLE) == set(GIVEN)
    assert all(len(row) == len(COMMANDS) for row in TABLE.values())


@pytest.mark.parametrize(
    ("start", "command", "expected"), [(s, c, TABLE[s][i]) for s in TABLE for i, c in enumerate(COMMANDS)]
)
def test_O1_O2_process_decide_table(start: str, command: str, expected: object) -> None:
    state = given(start)
    cmd = COMMANDS[command]()
    if isinstance(expected, tuple):
        with pytest.raises(IllegalTransition) as e:
            process_mod.decide(cmd, state)
        assert (e.value.run, e.value.status, e.value.attempted) == (P, expected[1], tag_of(cmd))
        # Word for word (mutations caught: the refusal's text changed or emptied).
        assert e.value.why == (
            f"epoch {cmd.epoch!r} was already booted" if expected[1] else f"unknown epoch {cmd.epoch!r}"
        )
        # What the caller reads names the slot, not a run (before: "run 'worker-1' is
        # (no such run): process.stopping refused (...)" for a slot that exists).
        assert str(e.value) == f"process slot {P!r}: {tag_of(cmd)} refused ({e.value.why})"
        return
    events = process_mod.decide(cmd, state)
    assert events == ([] if expected == NOOP else [cmd])


def test_O5_every_sweep_skip_and_failure_is_its_own_fact() -> None:
    """No dedupe for sweep marks: a second skip of the same epoch is a second fact."""
    state = given("booted")
    for name in ("skipped_e1", "failed_e1"):
        state = process_mod.fold(process_mod.decide(COMMANDS[name](), state), state)
        assert process_mod.decide(COMMANDS[name](), state) == [COMMANDS[name]()]


def test_L8_decide_stamps_times_in_utc() -> None:
    """Mutation caught: the `at` or `booted_at` of a boot kept in its caller's zone, or
    converted to the machine's local zone (astimezone() without UTC): the process runs
    in a zone that is not UTC for this test."""
    import os
    import time

    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        plus2 = timezone(timedelta(hours=2))
        boot = ProcessBooted(at=at(0).astimezone(plus2), process=P, epoch="e1", booted_at=at(-5).astimezone(plus2))
        [e] = process_mod.decide(boot, None)
        assert e.at.utcoffset() == timedelta(0) and e.booted_at.utcoffset() == timedelta(0)
        assert (e.at, e.booted_at) == (at(0), at(-5))
        state = process_mod.fold([e])
        [s] = process_mod.decide(ProcessStopping(at=at(5).astimezone(plus2), process=P, epoch="e1"), state)
        assert s.at.utcoffset() == timedelta(0)
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_O1_the_fold_keeps_the_boot_facts() -> None:
    """Mutation caught: host, pid, superseded_at dropped by `evolve`."""
    e1 = ProcessBooted(at=at(0), process=P, epoch="e1", booted_at=at(-5), host="sched-a", pid=4102)
    e2 = ProcessBooted(at=at(100), process=P, epoch="e2", booted_at=at(95), host="sched-b", pid=7001)
    state = process_mod.fold([e1, e2])
    assert state is not None
    first, second = state.epochs
    assert (first.host, first.pid, first.booted_at, first.recorded_at) == ("sched-a", 4102, at(-5), at(0))
    assert (first.superseded_by, first.superseded_at) == ("e2", at(100))
    assert (second.host, second.pid, second.superseded_by, second.superseded_at) == ("sched-b", 7001, None, None)


def test_O2_booted_no_later_is_none_when_either_epoch_is_unknown() -> None:
    state = process_mod.fold([COMMANDS["boot_e1_again"](), COMMANDS["boot_e2"]()])
    assert state is not None
    assert state.booted_no_later("e1", "e2") is True and state.booted_no_later("e2", "e1") is False
    assert state.booted_no_later("ghost", "e1") is None and state.booted_no_later("e1", "ghost") is None


def test_I1_O10_a_boot_resent_with_another_machine_id_is_another_boot_not_the_same_again() -> None:
    """The same boot again states every fact of the boot as recorded, its machine id
    included (rule O10 keys a host by it): a re-send that names another machine is
    refused naming the field, never dropped as a duplicate. Mutation caught: the
    comparison leaving `machine` out."""
    from epochledger.ledger.events import ProcessBooted

    at = datetime(2026, 9, 9, 14, tzinfo=UTC)
    boot = ProcessBooted(at=at, process="w", epoch="e1", booted_at=at, host="h", pid=7, host_boot="b1", machine="m1")
    state = process_mod.fold([boot])
    assert process_mod.decide(boot, state) == []
    with pytest.raises(IllegalTransition) as refused:
        process_mod.decide(msgspec.structs.replace(boot, machine="m2"), state)
    assert "with machine 'm1', not 'm2'" in refused.value.why
