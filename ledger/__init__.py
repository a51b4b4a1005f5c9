"""epochledger: an event-sourced ledger of scheduler runs.

    from ledger import open_ledger
    with open_ledger("sqlite:///runs.db") as ledger:
        epoch = ledger.boot("api-1")
        ledger.queue("run-1", workflow="nightly")
        ledger.start("run-1", epoch=epoch.epoch, process="api-1")
"""

from ledger.clock import Clock, ManualClock, SystemClock
from ledger.errors import (
    ConflictError,
    DecodeError,
    IllegalTransition,
    ImportRejected,
    InvalidInput,
    LedgerError,
    RunNotFound,
    StoreError,
)
from ledger.events import Status
from ledger.service import Batch, Ledger, open_ledger

__all__ = [
    "Batch", "Clock", "ConflictError", "DecodeError", "IllegalTransition", "ImportRejected",
    "InvalidInput", "Ledger", "LedgerError", "ManualClock", "RunNotFound", "Status",
    "StoreError", "SystemClock", "open_ledger",
]
