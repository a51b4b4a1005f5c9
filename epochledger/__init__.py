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
    from epochledger.passes import CrossRunPass
    from epochledger.probe import ProbeReport
    from epochledger.sweep import SweepReport
    from epochledger.tick import TickDriver, TickReport
    from ledger.clock import Clock, ManualClock, SystemClock
    from ledger.errors import (
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
    from ledger.events import Status
    from ledger.host import FakeHost, Host, SystemHost
    from ledger.lifecycle import (
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
    from ledger.process import EpochState, ProcessState
    from ledger.role import RoleState
    from ledger.run import RunState

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
    "Clock": "ledger.clock",
    "ManualClock": "ledger.clock",
    "SystemClock": "ledger.clock",
    "CommitUnknown": "ledger.errors",
    "ConflictError": "ledger.errors",
    "DamagedLog": "ledger.errors",
    "DamagedRuns": "ledger.errors",
    "DecodeError": "ledger.errors",
    "EpochNotLive": "ledger.errors",
    "ForeignRunRejected": "ledger.errors",
    "IllegalTransition": "ledger.errors",
    "ImportRejected": "ledger.errors",
    "InvalidInput": "ledger.errors",
    "LedgerError": "ledger.errors",
    "LockTimeout": "ledger.errors",
    "NotCommitted": "ledger.errors",
    "PermissionDenied": "ledger.errors",
    "QueryInterrupted": "ledger.errors",
    "QueryRefused": "ledger.errors",
    "RoleHeld": "ledger.errors",
    "RunNotFound": "ledger.errors",
    "StaleEpoch": "ledger.errors",
    "StatementTimeout": "ledger.errors",
    "StoreError": "ledger.errors",
    "StreamGap": "ledger.errors",
    "SweepFailed": "ledger.errors",
    "UnknownEpoch": "ledger.errors",
    "UnknownSlot": "ledger.errors",
    "ViewMismatch": "ledger.errors",
    "Status": "ledger.events",
    "FakeHost": "ledger.host",
    "Host": "ledger.host",
    "SystemHost": "ledger.host",
    "can_auto_resume": "ledger.lifecycle",
    "can_operator_resume": "ledger.lifecycle",
    "counts_against_launch_limit": "ledger.lifecycle",
    "is_active": "ledger.lifecycle",
    "is_final_failure": "ledger.lifecycle",
    "is_final_success": "ledger.lifecycle",
    "is_paused": "ledger.lifecycle",
    "is_queued": "ledger.lifecycle",
    "is_terminal": "ledger.lifecycle",
    "is_terminal_resumable": "ledger.lifecycle",
    "requires_resume_answers": "ledger.lifecycle",
    "EpochState": "ledger.process",
    "ProcessState": "ledger.process",
    "RoleState": "ledger.role",
    "RunState": "ledger.run",
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
