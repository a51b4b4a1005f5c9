"""An audit result's values are typed (rule A1, docs/audit.md "Values"): each is a Cell,
a JSON scalar, a list of them or an object of them, whatever DuckDB type a query
selects; the JSON of a result is the JSON its DuckDB values made before they were typed
(the CLI's `--format json` bytes), but for a value nested deeper, given as its JSON text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest

from epochledger.app import Ledger
from epochledger.projections import audit
from epochledger.projections.audit.results import Result, cell
from epochledger.reports import AuditTable

# One column of each kind of DuckDB value: (SQL, the Cell it gives).
KINDS: list[tuple[str, Any]] = [
    ("42::BIGINT", 42),
    ("sum(7)", 7),  # HUGEINT
    ("'x'", "x"),
    ("2.5::DOUBLE", 2.5),
    ("2.5::FLOAT", 2.5),
    ("true", True),
    ("NULL", None),
    ("NULL::TIMESTAMPTZ", None),
    ("TIMESTAMPTZ '2026-09-10 11:03:00+00'", "2026-09-10T11:03:00Z"),
    ("TIMESTAMPTZ '2026-09-10 11:03:00.000250+00'", "2026-09-10T11:03:00.000250Z"),
    ("TIMESTAMP '2026-09-10 11:03:00'", "2026-09-10T11:03:00"),
    ("DATE '2026-09-10'", "2026-09-10"),
    ("TIME '11:03:00'", "11:03:00"),
    ("INTERVAL 90 SECOND", "PT90S"),
    ("1.50::DECIMAL(4,2)", "1.50"),
    ("'6c6f6f6b-0000-4000-8000-000000000001'::UUID", "6c6f6f6b-0000-4000-8000-000000000001"),
    ("'ab'::BLOB", "YWI="),
    ("['w1.e1', 'w1.e2']", ["w1.e1", "w1.e2"]),
    ("[TIMESTAMPTZ '2026-09-10 11:03:00+00']", ["2026-09-10T11:03:00Z"]),
    ("{'k': 1, 'at': DATE '2026-09-10'}", {"k": 1, "at": "2026-09-10"}),
    ("map([1, 2], ['a', 'b'])", {"1": "a", "2": "b"}),
    ("[[1, 2], [3]]", "[[1,2],[3]]"),  # nested deeper: its JSON text
    ("{'runs': ['a', 'b']}", '{"runs":["a","b"]}'),
]


def _raw(sql: str) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    con = duckdb.connect()
    try:
        rel = con.execute(sql)
        return [d[0] for d in rel.description], [str(d[1]) for d in rel.description], rel.fetchall()
    finally:
        con.close()


def test_A1_every_duckdb_value_is_a_cell_that_json_writes_as_before() -> None:
    sql = "SELECT " + ", ".join(f"{expr} AS c{i}" for i, (expr, _) in enumerate(KINDS))
    columns, types, rows = _raw(sql)
    result = Result.of(columns, types, rows)
    assert list(result.rows[0]) == [want for _, want in KINDS]
    # The JSON a result makes is the JSON of DuckDB's own values (what `audit query
    # --format json` printed before its values were typed), but for those nested deeper.
    deeper = {i for i, (_, want) in enumerate(KINDS) if isinstance(want, str) and want[:1] in "[{"}
    before = [{c: v for i, (c, v) in enumerate(zip(columns, rows[0], strict=True)) if i not in deeper}]
    after = [{c: v for i, (c, v) in enumerate(result.records()[0].items()) if i not in deeper}]
    assert msgspec.json.encode(after) == msgspec.json.encode(before, enc_hook=str)
    # The type says so: the table decodes as its own type, value for value.
    table = AuditTable(columns=result.columns, rows=[list(r) for r in result.rows])
    assert msgspec.json.decode(msgspec.json.encode(table), type=AuditTable) == table


def test_A1_a_scalar_column_is_kept_as_fetched_and_a_row_of_nulls_stays_null() -> None:
    columns, types, rows = _raw("SELECT * FROM (VALUES (1, 'a', NULL::DATE), (2, NULL, DATE '2026-09-10')) t(n, s, d)")
    result = Result.of(columns, types, rows)
    assert result.rows == [(1, "a", None), (2, None, "2026-09-10")]


@pytest.mark.parametrize(("value", "want"), [(float("nan"), "nan"), (float("inf"), "inf"), ([], []), ({}, {})])
def test_A1_cells_of_edge_values(value: object, want: object) -> None:
    got = cell(value)
    assert (str(got) if isinstance(got, float) else got) == want


def test_A1_report_rows_are_cells_and_the_console_table_type_holds_them(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """A canned report's instants are RFC 3339 text (the `period` of failure_codes),
    and the facade's AuditTable of it round-trips through its JSON."""
    from epochledger.demo import record_day

    record_day(sqlite_ledger, sqlite_ledger.clock)  # type: ignore[arg-type]
    path = str(tmp_path / "runs.duckdb")
    audit.sync(sqlite_ledger._store, path)
    result = audit.report(path, "failure_codes")
    assert result.rows, "the demo's day has failures"
    assert all(isinstance(r["period"], str) and r["period"].endswith("T00:00:00Z") for r in result.records())
    table = AuditTable.of(result)
    assert msgspec.json.decode(msgspec.json.encode(table), type=AuditTable) == table
