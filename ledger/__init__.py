"""epochledger: an event-sourced ledger of scheduler runs.

    from ledger import open_ledger
    with open_ledger("sqlite:///runs.db") as ledger:
        epoch, swept = ledger.startup("api-1")  # boot() then sweep(): docs/operations.md
        ledger.queue("run-1", workflow="nightly")
        ledger.start("run-1", epoch=epoch.epoch, process="api-1")
        ledger.finish("run-1", epoch=epoch.epoch)
"""

from ledger.clock import Clock, ManualClock, SystemClock
from ledger.errors import (
    CommitUnknown,
    ConflictError,
    DecodeError,
    IllegalTransition,
    ImportRejected,
    InvalidInput,
    LedgerError,
    LockTimeout,
    NotCommitted,
    PermissionDenied,
    RunNotFound,
    StaleEpoch,
    StatementTimeout,
    StoreError,
    SweepFailed,
)
from ledger.events import Status
from ledger.service import Batch, Ledger, open_ledger

__all__ = [
    "Batch", "Clock", "CommitUnknown", "ConflictError", "DecodeError", "IllegalTransition", "ImportRejected",
    "InvalidInput", "Ledger", "LedgerError", "LockTimeout", "ManualClock", "NotCommitted", "PermissionDenied",
    "RunNotFound", "Status", "StaleEpoch", "StatementTimeout", "StoreError", "SweepFailed", "SystemClock",
    "open_ledger",
]
