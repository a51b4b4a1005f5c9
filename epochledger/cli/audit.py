"""The `audit` group: the history in DuckDB (docs/audit.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import msgspec

from epochledger.cli.common import JSON, QUIET, Progress, arg, command, instant, open_ns, out, out_json, table

if TYPE_CHECKING:  # imported where used: the registry and `--help` load neither (rule W2)
    from epochledger.reports import AuditResult

# Grouped commands: a registry name "audit sync" becomes `epochledger audit sync`.
GROUPS: dict[str, str] = {
    "audit": "The history in DuckDB: sync, canned reports, read-only SQL, Parquet (docs/audit.md).",
    "token": "The HTTP service's bearer tokens and their roles: create, list, revoke (docs/service.md).",
}
DUCKDB = arg(
    "--duckdb",
    metavar="FILE",
    default=None,
    help="audit file (default: beside a SQLite store, runs.db -> runs.duckdb; else ./epochledger.duckdb)",
)
# Defaults live in projections/audit/ (QUERY_TIMEOUT_S, QUERY_MEMORY_LIMIT, SYNC_WAIT_S); the
# help repeats them, and tests/projections/test_audit.py checks that it (and docs/audit.md) agree.
TIMEOUT = arg(
    "--timeout",
    metavar="SECONDS",
    type=float,
    default=None,
    help="interrupt the query after this long (default 60; docs/audit.md, Bounds)",
)
MEMORY = arg(
    "--memory-limit",
    metavar="SIZE",
    default=None,
    help="memory DuckDB may use, never spilling to disk (default 1GB; e.g. 512MB, 4GB)",
)


def _duckdb(ns: argparse.Namespace) -> str:
    from epochledger.reports import audit_path

    return audit_path(ns.store, ns.duckdb)


def _print_result(result: AuditResult, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(result.records()), indent=2) + b"\n")
        sys.stdout.flush()
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(result.columns)
        w.writerows(result.rows)
    else:
        table(result.records(), result.columns)


@command(
    "audit sync",
    DUCKDB,
    arg(
        "--wait",
        metavar="SECONDS",
        type=float,
        default=None,
        help="how long to wait for queries holding the file (default 90, longer than their 60 s timeout)",
    ),
    JSON,
    QUIET,
)
def cmd_audit_sync(ns: argparse.Namespace) -> None:
    """Copy the events recorded since the last sync into the DuckDB audit file.

    Incremental: the file keeps the notification position it has reached, updated in
    the same transaction as the rows, so a second sync appends only newer events. The
    ledger store is only read. A DuckDB file that is not an audit file is refused
    (exit 3); while queries hold the file, sync waits up to --wait seconds, then
    fails naming the holder (exit 7).

    Example: epochledger --store runs.db audit sync      # writes runs.duckdb
    """
    path = _duckdb(ns)
    shown = Progress(ns)
    with open_ns(ns) as ledger:
        progress = (
            (lambda n, pos: shown.show(f"audit sync: {n:,} events copied (position {pos})")) if shown.on else None
        )
        result = ledger.audit_sync(path, progress=progress, wait=ns.wait)
    shown.clear()
    if ns.json:
        out_json(result._asdict())
    else:
        out(
            f"appended {result.appended} events to {result.duckdb} (position {result.position}, {result.events} events in all)"
        )


@command("audit status", DUCKDB, JSON)
def cmd_audit_status(ns: argparse.Namespace) -> None:
    """Show how far the audit file has synced, and how far behind the ledger it is.

    Example: epochledger --store runs.db audit status
    """
    with open_ns(ns) as ledger:
        result = ledger.audit_status(_duckdb(ns))
    if ns.json:
        out_json(result)
    else:
        out(
            f"{result.duckdb}: position {result.position} of {result.ledger_position} "
            f"({result.behind} behind), {result.events} events, newest at {result.latest}"
        )


@command(
    "audit report",
    arg("name", help="one of the reports listed above"),
    DUCKDB,
    arg(
        "--as-of",
        metavar="INSTANT",
        default=None,
        help="RFC 3339 instant the report is computed as of (default: the newest synced event)",
    ),
    arg("--period", default="day", help="failure_codes: hour, day, week, month, quarter or year"),
    arg(
        "--label",
        metavar="KEY",
        default=None,
        help="failures_by_label: only this label (its runs without it as one row); default every label",
    ),
    arg("--format", choices=["table", "csv", "json"], default="table"),
    TIMEOUT,
    MEMORY,
    JSON,
)
def cmd_audit_report(ns: argparse.Namespace) -> None:
    """Run a canned audit report over the audit file (run `audit sync` first).

    Reports: failure_codes, failures_by_label, recoveries_per_epoch, time_in_status,
    corrections, dead_letters, fenced_reports, orphaned_while_live (must print
    "(none)"). Each is one SQL file, projections/audit/report_NAME.sql, computed as of
    an explicit instant.

    Example: epochledger audit report failure_codes --period week --as-of 2026-09-10T00:00:00Z
             epochledger audit report failures_by_label --label team
    """
    from epochledger.reports import audit_report

    as_of = instant(ns.as_of, "--as-of")  # the one check of a typed instant, as the service's (ledger.codec)
    result = audit_report(
        ns.store,
        ns.name,
        duckdb=ns.duckdb,
        as_of=as_of,
        period=ns.period,
        label=ns.label,
        timeout=ns.timeout,
        memory_limit=ns.memory_limit,
    )
    _print_result(result, "json" if ns.json else ns.format)


@command(
    "audit query",
    arg("sql", help="one SELECT (or WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)"),
    DUCKDB,
    arg("--format", choices=["table", "csv", "json"], default="table"),
    TIMEOUT,
    MEMORY,
    JSON,
)
def cmd_audit_query(ns: argparse.Namespace) -> None:
    """Run one read-only SQL statement (SELECT, DESCRIBE, ...) on the audit file.

    Writes are refused (exit 3): the statement type is checked, and the file is opened
    read-only with file access disabled and settings locked (docs/audit.md). Bounded:
    interrupted after --timeout seconds, at most --memory-limit of memory, nothing
    spilled to disk (exit 3 when a bound stops it).

    Example: epochledger audit query "SELECT status, count(*) FROM runs GROUP BY ALL" --format csv
    """
    from epochledger.reports import audit_query

    result = audit_query(ns.store, ns.sql, duckdb=ns.duckdb, timeout=ns.timeout, memory_limit=ns.memory_limit)
    _print_result(result, "json" if ns.json else ns.format)


@command("audit export-parquet", arg("dir", help="a new or empty directory"), DUCKDB, JSON)
def cmd_audit_export_parquet(ns: argparse.Namespace) -> None:
    """Write the audit file's events as Parquet files partitioned by event date.

    For histories larger than one machine's memory: DuckDB, Spark and pandas read
    DIR/events/event_date=YYYY-MM-DD/*.parquet (docs/audit.md).

    Example: epochledger audit export-parquet ./audit-parquet
    """
    from epochledger.reports import audit_export_parquet

    result = audit_export_parquet(ns.store, ns.dir, duckdb=ns.duckdb)
    if ns.json:
        out_json(result)
    else:
        out(f"wrote {result.events} events in {result.files} Parquet files under {result.directory}")
