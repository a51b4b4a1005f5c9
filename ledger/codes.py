"""Failure codes: open-world (rules L2, L3).

This registry is documentation, not validation: any string round-trips through every
store, export and import unchanged. The empty code means UNKNOWN (a failure whose cause
was not classified), never "no failure". Codes are short upper-case strings by
convention; the ledger does not enforce the convention.
"""

from __future__ import annotations

from typing import NamedTuple


class CodeInfo(NamedTuple):
    meaning: str
    writer: str  # who persists it


UNKNOWN = ""
TIMEOUT = "TIMEOUT"
CANCELLED = "CANCELLED"
INTERRUPTED = "INTERRUPTED"
FAIL_NODE = "FAIL_NODE"
ENGINE_ERROR = "ENGINE_ERROR"
PROCESS_ORPHANED = "PROCESS_ORPHANED"
NODE_NOT_FOUND = "NODE_NOT_FOUND"
RESUME_INVALID = "RESUME_INVALID"
USAGE_LIMIT_BLOCKED = "USAGE_LIMIT_BLOCKED"
TICK_DEADLINE_EXCEEDED = "TICK_DEADLINE_EXCEEDED"
PROCESS_EXITED = "PROCESS_EXITED"
LOOP_EXHAUSTED = "LOOP_EXHAUSTED"
JOIN_FAILED = "JOIN_FAILED"
QUEUE_SCHEMA_MISMATCH = "QUEUE_SCHEMA_MISMATCH"

KNOWN_CODES: dict[str, CodeInfo] = {
    TIMEOUT: CodeInfo("a step or the run exceeded its time budget", "engine (step timeout)"),
    CANCELLED: CodeInfo("an operator or API client cancelled the run", "run.cancelled (operator cancel)"),
    INTERRUPTED: CodeInfo(
        "the engine interrupted the run itself (shutdown, preemption)", "engine (internal interruption)"
    ),
    FAIL_NODE: CodeInfo("the workflow reached a deliberate fail node", "engine (deliberate fail node)"),
    ENGINE_ERROR: CodeInfo("an unhandled error in the engine or a step", "engine (engine failure)"),
    PROCESS_ORPHANED: CodeInfo(
        "the process that owned the run is gone; recovered by a sweep", "sweep (orphan recovery)"
    ),
    NODE_NOT_FOUND: CodeInfo(
        "the checkpointed node no longer exists after a source edit", "engine (resume after source edit)"
    ),
    RESUME_INVALID: CodeInfo("a resume was attempted with state that cannot be resumed", "engine (resume validation)"),
    USAGE_LIMIT_BLOCKED: CodeInfo("a usage or spend cap blocked the run", "engine (usage cap)"),
    TICK_DEADLINE_EXCEEDED: CodeInfo(
        "the scheduler's tick failed on this run past its deadline", "tick driver (dead-letter)"
    ),
    LOOP_EXHAUSTED: CodeInfo(
        "a loop reached its iteration limit without meeting its exit condition", "engine (loop guard)"
    ),
    JOIN_FAILED: CodeInfo("a join could not complete: a branch it waits on failed or never arrived", "engine (join)"),
    QUEUE_SCHEMA_MISMATCH: CodeInfo(
        "the queued payload does not match the schema the workflow expects", "engine (admission)"
    ),
    PROCESS_EXITED: CodeInfo(
        "the process running the run died under it, as its orchestrator reported",
        "importers (Dagster: a worker restart, an unexpected termination, a code server's report)",
    ),
}

# Codes for which an automatic resume is pointless or harmful (see
# ledger.lifecycle.can_auto_resume; argued in docs/lifecycle.md): a resume would fail
# the same way (the node is gone, the loop is still exhausted, the join's branch still
# failed), is itself invalid, or contradicts a deliberate fail.
NO_AUTO_RESUME: frozenset[str] = frozenset({NODE_NOT_FOUND, RESUME_INVALID, FAIL_NODE, LOOP_EXHAUSTED, JOIN_FAILED})


def show_code(code: str) -> str:
    """How a code is shown to a person: the empty code is UNKNOWN, others verbatim."""
    return code if code else "UNKNOWN"
