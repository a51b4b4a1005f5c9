"""The audit's result types (rule A1, docs/audit.md), in a module of their own: the read
facade names them in its reports' signatures (epochledger/reports.py, resolved with
typing.get_type_hints for the HTTP service), and a start that never touches the audit
(`show RUN`, rule W2) must not pay for importing projections/audit/duck.py to name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias

import msgspec

__all__ = ["AuditStatus", "Cell", "ParquetExport", "Result", "Scalar", "SyncResult", "cell"]

# An audit value as data (docs/audit.md, "Values"): a JSON scalar, a list of them, or an
# object of them. DuckDB's other values are what JSON made of them: an instant, a date, a
# duration, a decimal, a UUID as text (RFC 3339, ISO 8601, digits), bytes as base64, a
# map's keys as text; a list or an object that holds lists or objects as its JSON text.
Scalar: TypeAlias = str | int | float | bool | None
Cell: TypeAlias = Scalar | list[Scalar] | dict[str, Scalar]


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
    """A report's or a query's result: its columns and its rows, each a tuple of Cells
    in columns' order (`of`)."""

    columns: list[str]
    rows: list[tuple[Cell, ...]]

    def records(self) -> list[dict[str, Cell]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    @classmethod
    def of(cls, columns: list[str], types: Sequence[str], rows: list[tuple[Any, ...]]) -> Result:
        """The result of DuckDB's `rows` under `columns` of DuckDB `types`: a column of a
        scalar type is kept as fetched; each value of any other column becomes a Cell."""
        typed = [i for i, t in enumerate(types) if t not in _SCALAR_TYPES]
        if typed and rows:
            rows = [_typed_row(r, typed) for r in rows]
        return cls(columns, rows)


# DuckDB's types whose Python values are already Scalars (str, int, float, bool, or None).
_SCALAR_TYPES = frozenset(
    {
        *("VARCHAR", "BOOLEAN", "DOUBLE", "FLOAT", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"),
        *("UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", '"NULL"', "NULL"),
    }
)


def _typed_row(row: tuple[Any, ...], typed: list[int]) -> tuple[Cell, ...]:
    cells = list(row)
    for i in typed:
        cells[i] = cell(cells[i])
    return tuple(cells)


def cell(value: object) -> Cell:
    """One DuckDB value as a Cell: as msgspec would write it in JSON (to_builtins), kept
    if that is a Scalar, a list of Scalars or an object of them, else its JSON text."""
    built = msgspec.to_builtins(value, str_keys=True, enc_hook=str)
    if _is_scalar(built):
        return built  # type: ignore[no-any-return]  # _is_scalar checked it
    if isinstance(built, list) and all(_is_scalar(v) for v in built):
        return built
    if isinstance(built, dict) and all(_is_scalar(v) for v in built.values()):
        return built
    return msgspec.json.encode(built).decode()


def _is_scalar(value: object) -> bool:
    return value is None or type(value) in (str, int, float, bool)
