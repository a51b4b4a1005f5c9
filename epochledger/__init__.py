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

__all__ = [
    "Batch",
    "Clock",
    "CommitUnknown",
    "ConflictError",
    "CrossRunPass",
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
