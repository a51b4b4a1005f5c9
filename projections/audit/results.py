"""The audit's result types (rule A1, docs/audit.md), in a module of their own: the read
facade names them in its reports' signatures (epochledger/reports.py, resolved with
typing.get_type_hints for the HTTP service), and a start that never touches the audit
(`show RUN`, rule W2) must not pay for importing projections/audit/duck.py to name them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import msgspec

__all__ = ["AuditStatus", "ParquetExport", "Result", "SyncResult"]


class SyncResult(NamedTuple):
    duckdb: str
    appended: int
    position: int  # the sync position after this sync
    events: int  # rows in the events table


# The fields of these two are in alphabetical order: their JSON is the bytes of the
# dicts they replaced (tests/cli/test_cli_golden.py, rule C1).
class AuditStatus(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How far the audit file has synced; given the ledger's store, how far behind it."""

    behind: int | None = None  # positions, not events, on PostgreSQL (gaps); None: no store given
    duckdb: str  # the audit file, absolute
    events: int  # rows in the events table
    latest: datetime | None  # the newest synced event's time
    ledger_position: int | None = None  # None: no store given
    position: int  # the sync position
    store: str  # the store the file mirrors


class ParquetExport(msgspec.Struct, frozen=True, kw_only=True):
    """What export_parquet wrote."""

    directory: str  # absolute
    events: int
    files: int  # Parquet files under it


class Result(NamedTuple):
    columns: list[str]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]
