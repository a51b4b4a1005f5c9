"""The lifecycle contract: the only home of status sets (rules P1, P3).

Every policy question a consumer asks of a run (stop polling? launch slot? may
automation resume it?) is one predicate here over `(status, failure_code)`, and the
transition table (which event is legal from which status) is here too. The write side
(ledger.run.decide), the projections, replay and the CLI all ask these functions;
`tests/ledger/test_negative_space.py` fails on a hand-written set of statuses anywhere else.

The cells that are not obvious are argued in docs/lifecycle.md, whose tables are
rendered from this module (`python -m epochledger.ledger.lifecycle`) and checked by a test.
"""

from __future__ import annotations

from collections.abc import Callable

from epochledger.ledger.codes import NO_AUTO_RESUME
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import Status

S = Status
StatusLike = Status | str  # a Status, or its value as JSON, DuckDB or a CLI flag carries it


def as_status(value: StatusLike) -> Status:
    """The Status a value names: a Status, or its string value ("finished"). Anything
    else is refused (InvalidInput): a predicate never answers for a status it does not
    know. Predicates compare by value, so "finished" and Status.FINISHED agree."""
    if type(value) is Status:
        return value
    try:
        return Status(value)
    except ValueError:
        raise InvalidInput(
            f"unknown status {value!r} (known: {', '.join(s.value for s in Status)})", where="status"
        ) from None


# --------------------------------------------------------------- status sets
_PAUSED = frozenset({S.PAUSED_OPERATOR, S.PAUSED_WAITING_HUMAN, S.PAUSED_ORCHESTRATOR})
# The orchestrator's own wait (an Airflow deferral or reschedule): resumed by the
# orchestrator that runs the work, and nothing else is; nor is it the ledger's
# automation's to end. The orchestrator holds the work while it waits, so it may also end
# it from there (a failure, a finish: the transition table below; rule E1).
_ORCHESTRATOR_WAIT = frozenset({S.PAUSED_ORCHESTRATOR})
# Resumable by an operator: a pause, a resumable failure, and a cancel (an operator
# may undo an operator's stop; automation may not, see can_auto_resume).
_TERMINAL_RESUMABLE = _PAUSED | {S.FAILED_RESUMABLE, S.CANCELLED}
# Absorbing: nothing but delete (and an audited correction) leaves these.
_FINAL = frozenset({S.FAILED, S.FINISHED})
# Stop polling: nothing will change until someone acts.
_TERMINAL = _TERMINAL_RESUMABLE | _FINAL
# Carry a failure code (rule L2); every other status clears it.
_FAILURE = frozenset({S.FAILED, S.FAILED_RESUMABLE, S.CANCELLED})
# Driven by the scheduler's tick.
_ACTIVE = frozenset({S.QUEUED, S.RUNNING})
# What an audited correction may set a final run to: the other final verdict, or a
# resumable failure (so an operator can resume a run failed by mistake). Not an active
# or paused status: nothing would be driving the run.
_CORRECTION_TARGETS = _FINAL | {S.FAILED_RESUMABLE}
# Hold a launch slot: only a run that is executing. A queued run has not launched; a
# paused or failed run has released its worker.
_LAUNCH_SLOT = frozenset({S.RUNNING})


# ---------------------------------------------------------------- predicates
def is_terminal(status: StatusLike, code: str = "") -> bool:
    """Stop polling: the run will not move until an operator, a human or automation acts."""
    return as_status(status) in _TERMINAL


def is_paused(status: StatusLike, code: str = "") -> bool:
    return as_status(status) in _PAUSED


def is_final_success(status: StatusLike, code: str = "") -> bool:
    return as_status(status) == S.FINISHED


def is_final_failure(status: StatusLike, code: str = "") -> bool:
    """Failed for good. `cancelled` is not final: an operator may resume it."""
    return as_status(status) == S.FAILED


def is_terminal_resumable(status: StatusLike, code: str = "") -> bool:
    """Stopped, but a resume can bring it back."""
    return as_status(status) in _TERMINAL_RESUMABLE


def is_queued(status: StatusLike, code: str = "") -> bool:
    return as_status(status) == S.QUEUED


def is_active(status: StatusLike, code: str = "") -> bool:
    """Driven by the scheduler's tick (queued or running)."""
    return as_status(status) in _ACTIVE


def is_failure(status: StatusLike, code: str = "") -> bool:
    """The status carries a failure code (rule L2)."""
    return as_status(status) in _FAILURE


def can_operator_resume(status: StatusLike, code: str = "") -> bool:
    return as_status(status) in _TERMINAL_RESUMABLE


def requires_resume_answers(status: StatusLike, code: str = "") -> bool:
    """A resume must hand the run the answers to the questions it is waiting on."""
    return as_status(status) == S.PAUSED_WAITING_HUMAN


def can_auto_resume(status: StatusLike, code: str = "", *, fenced_end: bool = False) -> bool:
    """Automation may resume only a resumable failure, and not one whose cause makes a
    resume pointless (the node is gone, the resume itself is invalid, the flow failed
    on purpose). Never a cancel or an operator pause: automation must not override an
    operator's stop. Never a human wait: a human must answer. Never the orchestrator's
    own wait: the orchestrator ends it (can_orchestrator_resume), and a retry lane that
    resumed it would invent a start the orchestrator never made. Unknown codes (open
    world, including "" = UNKNOWN) are allowed: the refusal list is a deny-list.

    `fenced_end`: the run's fenced evidence holds an outcome report (finished, failed)
    made by a stale epoch after the run's last start. Evidence binds (F2): a stale
    worker said the work ended, so resuming could run the job twice; an operator
    decides."""
    return as_status(status) == S.FAILED_RESUMABLE and code not in NO_AUTO_RESUME and not fenced_end


def can_orchestrator_resume(status: StatusLike, code: str = "") -> bool:
    """The orchestrator that runs the work resumes its own wait (`paused_orchestrator`:
    an Airflow deferral or reschedule, `run.resumed` by "orchestrator"), and only that.
    Fenced evidence does not bind it (rule F2 binds the ledger's decisions): the
    orchestrator resumes the work whatever the ledger holds, and refusing its word would
    lose a transition it made (rule E1). Asked by ledger.run decide."""
    return as_status(status) in _ORCHESTRATOR_WAIT


def counts_against_launch_limit(status: StatusLike, code: str = "") -> bool:
    return as_status(status) in _LAUNCH_SLOT


def is_correction_target(status: StatusLike, code: str = "") -> bool:
    """A status that run.corrected may move a final run to."""
    return as_status(status) in _CORRECTION_TARGETS


def can_be_orphaned(status: StatusLike, code: str = "") -> bool:
    """Only a run that is executing has a process that can die under it (rules O2, O3).
    A queued run has no owner yet; a paused or failed run has released its worker, so
    a dead process strands nothing there: an orchestrator's own wait
    (`paused_orchestrator`) is never an orphan, though the process that ran it exited.
    Asked by projections/orphans.py."""
    return as_status(status) in _LAUNCH_SLOT


PREDICATES: dict[str, Callable[[StatusLike, str], bool]] = {
    f.__name__: f
    for f in (
        is_terminal,
        is_paused,
        is_final_success,
        is_final_failure,
        is_terminal_resumable,
        is_queued,
        is_active,
        can_operator_resume,
        requires_resume_answers,
        can_auto_resume,
        counts_against_launch_limit,
    )
}


def predicates(status: StatusLike, code: str = "", *, fenced_end: bool = False) -> dict[str, bool]:
    """Every predicate of PREDICATES for one run; `fenced_end` as in can_auto_resume."""
    status = as_status(status)
    out = {name: f(status, code) for name, f in PREDICATES.items()}
    out["can_auto_resume"] = can_auto_resume(status, code, fenced_end=fenced_end)
    return out


# ---------------------------------------------------------- transition table
# Which statuses each event is legal from. `None` stands for "no such run yet".
# run.resumed is gated by can_operator_resume / can_auto_resume / can_orchestrator_resume
# (by = operator/auto/orchestrator); run.deleted is legal from everywhere. A pause is left
# by a resume or a cancel, but for the orchestrator's own wait: the orchestrator holds
# that work, and when it fails or finishes it while it waits (an Airflow user's mark by
# hand, its scheduler's failure of a waiting try), the ledger records that end from the
# wait, or it would lose a transition the orchestrator made (rule E1). Failed and finished absorb everything else:
# rewind is "from any non-running status" except those two, because a verdict that
# downstream systems may already have acted on is only changed by an audited
# correction (docs/lifecycle.md).
_ALL = frozenset(Status)
TRANSITIONS: dict[str, frozenset[Status | None]] = {
    # From queued too: a queue of a queued run is a no-op if it names the fields the run
    # was queued with (an adapter's retry), refused otherwise (ledger.run decide, L1).
    "run.queued": frozenset({None, S.QUEUED}),
    "run.started": frozenset({S.QUEUED}),
    "run.checkpointed": frozenset({S.RUNNING}),
    "run.paused": frozenset({S.RUNNING}),
    "run.resumed": frozenset(_TERMINAL_RESUMABLE),
    "run.failed": frozenset(_ACTIVE | _ORCHESTRATOR_WAIT),
    "run.cancelled": frozenset((_ACTIVE | _TERMINAL_RESUMABLE) - {S.CANCELLED}),
    "run.finished": frozenset({S.RUNNING} | _ORCHESTRATOR_WAIT),
    "run.rewound": frozenset(_ALL - _FINAL - {S.RUNNING}),
    "run.deleted": frozenset(_ALL),
    "run.corrected": frozenset(_FINAL),
    # Tick fault isolation (rules T1-T3, docs/tick.md): only runs the tick drives.
    "run.tick_failed": frozenset(_ACTIVE),
    "run.tick_recovered": frozenset(_ACTIVE),
    "run.dead_lettered": frozenset(_ACTIVE),
    # Rules O5, F1: a sweep recovers only a run that is running (an orphan); a fenced late
    # report is evidence and is kept whatever the run's status.
    "run.recovered": frozenset({S.RUNNING}),
    "run.fenced": frozenset(_ALL),
    # Rule I3: an importer's per-run cursor is bookkeeping, kept whatever the status.
    "run.imported": frozenset(_ALL),
}


def allowed_from(tag: str, status: StatusLike | None) -> bool:
    """Is event `tag` legal from `status` (None: no such run yet)?"""
    return (None if status is None else as_status(status)) in TRANSITIONS[tag]


def render_markdown() -> str:
    """The truth tables of docs/lifecycle.md, generated from this module."""
    from epochledger.ledger.codes import KNOWN_CODES

    statuses = list(Status)
    lines = ['### Predicates by status (code = "")', ""]
    lines.append("| status | " + " | ".join(f"`{n}`" for n in PREDICATES) + " |")
    lines.append("|---|" + "---|" * len(PREDICATES))
    for s in statuses:
        row = predicates(s, "")
        lines.append(f"| `{s}` | " + " | ".join("yes" if row[n] else "-" for n in PREDICATES) + " |")
    lines += ["", "### `can_auto_resume` for `failed_resumable` by code", ""]
    lines.append("| code | can_auto_resume |")
    lines.append("|---|---|")
    for code in ["", *sorted(KNOWN_CODES)]:
        shown = f"`{code}`" if code else '`""` (UNKNOWN)'
        lines.append(f"| {shown} | {'yes' if can_auto_resume(S.FAILED_RESUMABLE, code) else '-'} |")
    lines += ["", "### Transition table (event legal from status)", ""]
    cols: list[Status | None] = [None, *statuses]
    lines.append("| event | " + " | ".join("(new)" if c is None else f"`{c}`" for c in cols) + " |")
    lines.append("|---|" + "---|" * len(cols))
    for tag, sources in TRANSITIONS.items():
        lines.append(f"| `{tag}` | " + " | ".join("yes" if c in sources else "-" for c in cols) + " |")
    return "\n".join(lines) + "\n"


def write_doc(path: str = "docs/lifecycle.md") -> None:
    """Replace the generated block of docs/lifecycle.md with the tables above."""
    import re

    with open(path) as f:
        doc = f.read()
    block = "<!-- BEGIN GENERATED by `python -m epochledger.ledger.lifecycle --write` -->\n"
    new, n = re.subn(
        r"<!-- BEGIN GENERATED .*? -->\n.*?(?=<!-- END GENERATED -->)",
        lambda _: block + render_markdown(),
        doc,
        flags=re.S,
    )
    if n != 1:
        raise SystemExit(f"{path}: expected one generated block, found {n}")
    with open(path, "w") as f:
        f.write(new)


if __name__ == "__main__":  # pragma: no cover
    import sys

    if "--write" in sys.argv:
        write_doc()
    else:
        print(render_markdown(), end="")
