"""epochledger: an event-sourced ledger of scheduler runs.

Everything a user imports comes from here, typed (the package ships `py.typed`):

    from epochledger import open_ledger
    with open_ledger("sqlite:///runs.db") as ledger:
        epoch, swept = ledger.startup("api-1")   # boot() then sweep(): docs/operations.md
        ledger.queue("run-1", workflow="nightly")
        ledger.start("run-1", epoch=epoch)      # the epoch's state or its id
        ledger.finish("run-1", epoch=epoch)

`python -m epochledger` is the command line (docs/cli.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy and readers; at run time each name is imported when first used (__getattr__)
    from epochledger.app import Batch, Ledger, open_ledger
    from epochledger.ledger.clock import Clock, ManualClock, SystemClock
    from epochledger.ledger.errors import (
        CommitUnknown,
        ConflictError,
        DamagedLog,
        DamagedRuns,
        DecodeError,
        EpochNotLive,
        ForeignRunRejected,
        IllegalTransition,
        ImportRejected,
        InvalidInput,
        LedgerError,
        LockTimeout,
        NotCommitted,
        PermissionDenied,
        QueryInterrupted,
        QueryRefused,
        RoleHeld,
        RunNotFound,
        StaleEpoch,
        StatementTimeout,
        StoreError,
        StreamGap,
        SweepFailed,
        UnknownEpoch,
        UnknownSlot,
        ViewMismatch,
    )
    from epochledger.ledger.events import Status
    from epochledger.ledger.host import FakeHost, Host, SystemHost
    from epochledger.ledger.lifecycle import (
        can_auto_resume,
        can_operator_resume,
        counts_against_launch_limit,
        is_active,
        is_final_failure,
        is_final_success,
        is_paused,
        is_queued,
        is_terminal,
        is_terminal_resumable,
        requires_resume_answers,
    )
    from epochledger.ledger.process import EpochState, ProcessState
    from epochledger.ledger.role import RoleState
    from epochledger.ledger.run import RunState
    from epochledger.passes import CrossRunPass
    from epochledger.probe import ProbeReport
    from epochledger.sweep import SweepReport
    from epochledger.tick import TickDriver, TickReport

# Where each public name lives. Importing `epochledger` (as `python -m epochledger` and the
# `epochledger` script do, before the command line) imports none of them: a command then
# loads only what it uses, and `--help` neither the store nor the library (rule W2).
_HOMES: dict[str, str] = {
    "Batch": "epochledger.app",
    "Ledger": "epochledger.app",
    "open_ledger": "epochledger.app",
    "CrossRunPass": "epochledger.passes",
    "ProbeReport": "epochledger.probe",
    "SweepReport": "epochledger.sweep",
    "TickDriver": "epochledger.tick",
    "TickReport": "epochledger.tick",
    "Clock": "epochledger.ledger.clock",
    "ManualClock": "epochledger.ledger.clock",
    "SystemClock": "epochledger.ledger.clock",
    "CommitUnknown": "epochledger.ledger.errors",
    "ConflictError": "epochledger.ledger.errors",
    "DamagedLog": "epochledger.ledger.errors",
    "DamagedRuns": "epochledger.ledger.errors",
    "DecodeError": "epochledger.ledger.errors",
    "EpochNotLive": "epochledger.ledger.errors",
    "ForeignRunRejected": "epochledger.ledger.errors",
    "IllegalTransition": "epochledger.ledger.errors",
    "ImportRejected": "epochledger.ledger.errors",
    "InvalidInput": "epochledger.ledger.errors",
    "LedgerError": "epochledger.ledger.errors",
    "LockTimeout": "epochledger.ledger.errors",
    "NotCommitted": "epochledger.ledger.errors",
    "PermissionDenied": "epochledger.ledger.errors",
    "QueryInterrupted": "epochledger.ledger.errors",
    "QueryRefused": "epochledger.ledger.errors",
    "RoleHeld": "epochledger.ledger.errors",
    "RunNotFound": "epochledger.ledger.errors",
    "StaleEpoch": "epochledger.ledger.errors",
    "StatementTimeout": "epochledger.ledger.errors",
    "StoreError": "epochledger.ledger.errors",
    "StreamGap": "epochledger.ledger.errors",
    "SweepFailed": "epochledger.ledger.errors",
    "UnknownEpoch": "epochledger.ledger.errors",
    "UnknownSlot": "epochledger.ledger.errors",
    "ViewMismatch": "epochledger.ledger.errors",
    "Status": "epochledger.ledger.events",
    "FakeHost": "epochledger.ledger.host",
    "Host": "epochledger.ledger.host",
    "SystemHost": "epochledger.ledger.host",
    "can_auto_resume": "epochledger.ledger.lifecycle",
    "can_operator_resume": "epochledger.ledger.lifecycle",
    "counts_against_launch_limit": "epochledger.ledger.lifecycle",
    "is_active": "epochledger.ledger.lifecycle",
    "is_final_failure": "epochledger.ledger.lifecycle",
    "is_final_success": "epochledger.ledger.lifecycle",
    "is_paused": "epochledger.ledger.lifecycle",
    "is_queued": "epochledger.ledger.lifecycle",
    "is_terminal": "epochledger.ledger.lifecycle",
    "is_terminal_resumable": "epochledger.ledger.lifecycle",
    "requires_resume_answers": "epochledger.ledger.lifecycle",
    "EpochState": "epochledger.ledger.process",
    "ProcessState": "epochledger.ledger.process",
    "RoleState": "epochledger.ledger.role",
    "RunState": "epochledger.ledger.run",
}


def __getattr__(name: str) -> Any:
    """PEP 562: a public name is imported from its home on first use, then kept."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Batch",
    "CrossRunPass",
    "Clock",
    "CommitUnknown",
    "ConflictError",
    "DamagedLog",
    "DamagedRuns",
    "DecodeError",
    "EpochNotLive",
    "EpochState",
    "FakeHost",
    "ForeignRunRejected",
    "Host",
    "IllegalTransition",
    "ImportRejected",
    "InvalidInput",
    "Ledger",
    "LedgerError",
    "LockTimeout",
    "ManualClock",
    "NotCommitted",
    "PermissionDenied",
    "ProbeReport",
    "ProcessState",
    "QueryInterrupted",
    "QueryRefused",
    "RoleHeld",
    "RoleState",
    "RunNotFound",
    "RunState",
    "StaleEpoch",
    "StatementTimeout",
    "Status",
    "StoreError",
    "StreamGap",
    "SweepFailed",
    "SweepReport",
    "SystemClock",
    "SystemHost",
    "TickDriver",
    "TickReport",
    "UnknownEpoch",
    "UnknownSlot",
    "ViewMismatch",
    "can_auto_resume",
    "can_operator_resume",
    "counts_against_launch_limit",
    "is_active",
    "is_final_failure",
    "is_final_success",
    "is_paused",
    "is_queued",
    "is_terminal",
    "is_terminal_resumable",
    "open_ledger",
    "requires_resume_answers",
]
