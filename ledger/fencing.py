"""Fencing: a report written on behalf of a stale epoch is refused and kept (rule F1).

Pure, like the deciders: the service finds the epoch a report names (in whatever slot
booted it) and passes it in as a fact. A report is written "on behalf of" an epoch when
it names one: `epoch=` on start, checkpoint, pause, fail and finish, and the tick
driver's own events (`run.tick_failed`, `run.tick_recovered`, `run.dead_lettered`),
which carry the ticking epoch. If that epoch is no longer live
(`ledger.process.end_of`: superseded by a later boot of its slot, or cleanly stopped),
the report is refused with `StaleEpoch` and kept as a `run.fenced` event: the run's
verdict stands, and nothing the old process said is lost.

Which epoch, not which run: the fence judges the epoch the report names, whatever the
run's own `process` or `epoch` fields say (a run queued for one slot may be started by
another slot's epoch; a run recovered from an old epoch is still fenced against it).
A report that names no epoch is not fenced (an operator's hand). A report naming an
epoch that no slot ever booted is refused as bad input by the service
(`UnknownEpoch`): its liveness cannot be judged. See docs/operations.md, "Fencing".
"""

from __future__ import annotations

import msgspec

from ledger.events import (
    RunCheckpointed,
    RunDeadLettered,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunFinished,
    RunPaused,
    RunStarted,
    RunTickFailed,
    RunTickRecovered,
    tag_of,
)
from ledger.process import end_of
from ledger.process import EpochState
from ledger.run import RunState, result_of

# The reports a scheduler process writes for a run it drives, its tick's included.
FENCED_REPORTS = (RunStarted, RunCheckpointed, RunPaused, RunFailed, RunFinished,
                  RunTickFailed, RunTickRecovered, RunDeadLettered)  # fmt: skip
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


def fence(cmd: RunEventBase, run: RunState | None, writer: EpochState) -> RunFenced | None:
    """The `run.fenced` evidence to keep instead of `cmd`, or None if `cmd` may proceed.
    A report on a run that does not exist (or was deleted) is not evidence about it:
    `decide` refuses it like any command on such a run."""
    if run is None or run.deleted:
        return None
    ended = end_of(writer)
    if ended is None:
        return None
    _rule, why = ended
    reported = result_of(cmd, run)[0] if isinstance(cmd, OUTCOME_REPORTS) else None  # type: ignore[arg-type]
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
    )
