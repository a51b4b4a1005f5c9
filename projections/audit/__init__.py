"""The audit edge: the ledger's whole history as a DuckDB file (rule A1, docs/audit.md).

Everything a caller uses, from one place; the code is in projections/audit/duck.py
(files, connections, the lifecycle predicates table, sync and the reads), its result
types in results.py, the SQL beside it (schema.sql, views.sql, report_*.sql).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The result types are light (no DuckDB, no sync machinery): the read facade names them
# in its signatures, so they load with it. The code in duck.py is imported on first use
# of one of its names (PEP 562), so a start that never touches the audit (`show RUN`,
# rule W2) does not pay for it. Not cached here: duck's own attribute is the one object.
from epochledger.projections.audit.results import AuditStatus, Cell, ParquetExport, Result, SyncResult

if TYPE_CHECKING:
    from epochledger.projections.audit.duck import (
        CHUNK,
        DEFAULT_FILE,
        PERIODS,
        QUERY_MEMORY_LIMIT,
        QUERY_TIMEOUT_S,
        SCHEMA_VERSION,
        SYNC_WAIT_S,
        default_path,
        export_parquet,
        query,
        report,
        report_names,
        status,
        sync,
    )


def __getattr__(name: str) -> Any:
    """PEP 562: a name of `__all__` not defined here is duck.py's, imported on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("epochledger.projections.audit.duck"), name)


__all__ = [
    "CHUNK",
    "DEFAULT_FILE",
    "PERIODS",
    "QUERY_MEMORY_LIMIT",
    "QUERY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "SYNC_WAIT_S",
    "AuditStatus",
    "Cell",
    "ParquetExport",
    "Result",
    "SyncResult",
    "default_path",
    "export_parquet",
    "query",
    "report",
    "report_names",
    "status",
    "sync",
]
