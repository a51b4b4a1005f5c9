"""Fencing: a report written on behalf of a stale epoch is refused and kept (issue 4).

Pure, like the deciders: the service reads the writer's epoch from the process stream
and passes it in as a fact. A report is written "on behalf of" an epoch when it names
one (`epoch=` on start, checkpoint, pause, fail, finish). If that epoch is no longer
live (a later boot of its process superseded it, or it recorded a clean stop), the
report is refused with `StaleEpoch` and kept as a `run.fenced` event: the run's
verdict stands (an O2 orphan, or already recovered), and nothing the old process said
is lost. A report that names no epoch is not fenced (an operator's hand, or a caller
that predates epochs); one that names an epoch the ledger never saw boot cannot be
proven stale and is not fenced either (docs/operations.md, "Fencing").
"""

from __future__ import annotations

import msgspec

from ledger.events import (
    RunCheckpointed,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunFinished,
    RunPaused,
    RunStarted,
    tag_of,
)
from ledger.process import EpochState
from ledger.run import RunState

# The reports a scheduler process writes for a run it drives.
FENCED_REPORTS = (RunStarted, RunCheckpointed, RunPaused, RunFailed, RunFinished)


def writer_epoch(cmd: RunEventBase) -> str | None:
    """The epoch a report is written on behalf of, if it names one."""
    if isinstance(cmd, FENCED_REPORTS):
        return cmd.epoch
    return None


def writer_process(cmd: RunEventBase, run: RunState | None) -> str | None:
    """The process slot whose stream knows the writer's epoch."""
    if isinstance(cmd, RunStarted) and cmd.process is not None:
        return cmd.process
    return run.process if run is not None else None


def fence(cmd: RunEventBase, run: RunState | None, writer: EpochState | None) -> RunFenced | None:
    """The `run.fenced` evidence to keep instead of `cmd`, or None if `cmd` may proceed."""
    if run is None or run.deleted or writer is None or writer.live:
        return None
    if writer.superseded_by is not None:
        why = f"epoch {writer.epoch} of {writer.process} was superseded by epoch {writer.superseded_by}"
    else:
        why = f"epoch {writer.epoch} of {writer.process} recorded a clean stop"
    return RunFenced(
        at=cmd.at,
        run=cmd.run,
        actor=cmd.actor,
        reason=f"{tag_of(cmd)} refused and kept as evidence: {why}",
        epoch=writer.epoch,
        refused=tag_of(cmd),
        why=why,
        superseded_by=writer.superseded_by,
        stopped_at=writer.stopped_at if writer.superseded_by is None else None,
        report=msgspec.to_builtins(cmd),
    )
