"""The audit edge: the ledger's whole history as a DuckDB file (rule A1, docs/audit.md).

Everything a caller uses, from one place; the code is in projections/audit/duck.py
(files, connections, the lifecycle predicates table, sync and the reads), the SQL
beside it (schema.sql, views.sql, report_*.sql).
"""

from __future__ import annotations

from projections.audit.duck import (
    CHUNK,
    DEFAULT_FILE,
    PERIODS,
    QUERY_MEMORY_LIMIT,
    QUERY_TIMEOUT_S,
    SCHEMA_VERSION,
    SYNC_WAIT_S,
    AuditStatus,
    ParquetExport,
    Result,
    SyncResult,
    default_path,
    export_parquet,
    query,
    report,
    report_names,
    status,
    sync,
)

__all__ = [
    "CHUNK",
    "DEFAULT_FILE",
    "PERIODS",
    "QUERY_MEMORY_LIMIT",
    "QUERY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "SYNC_WAIT_S",
    "AuditStatus",
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
