"""Benchmark: "latest status per run" over 10M events in the audit file (rule A1).

    .venv/bin/python bench/audit_latest_status.py [--events 10000000] [--runs 2000000]

Generates the events directly in DuckDB (the schema of projections/audit/schema.sql,
5 events per run, with a JSON payload like the ones sync writes) in a file-backed
database, then times, best of 3 after one warm-up:
  anchor_scan       - SELECT count(DISTINCT status) FROM events (one full column scan)
  latest_status     - SELECT run, arg_max(status, position) ... GROUP BY run, counted
  status_histogram  - the same, grouped into a count per status (what a dashboard asks)
  runs_view         - SELECT status, count(*) FROM runs GROUP BY status (the full view,
                      with every column and the lifecycle predicates join)
Prints one JSON object. The goal: latest_status under 1 s on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import duckdb

from epochledger.projections.audit import duck


def best(con: duckdb.DuckDBPyConnection, sql: str, runs: int = 3) -> tuple[float, object]:
    con.execute(sql).fetchall()  # warm-up
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = con.execute(sql).fetchall()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=2_000_000)
    ns = ap.parse_args()
    per_run = ns.events // ns.runs
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "latest.duckdb")
        con = duck._connect_rw(path)
        duck._ensure_schema(con, "bench://generated")
        t = time.perf_counter()
        # Statuses are generated from lifecycle's Status enum, never written here.
        from epochledger.ledger.events import Status

        statuses = [s.value for s in Status]
        con.execute(
            f"""
            INSERT INTO events
            SELECT
                i AS position,
                'run:r' || (i // {per_run}) AS stream,
                i % {per_run} + 1 AS version,
                'run.x' AS type,
                TIMESTAMPTZ '2026-09-09 00:00:00+00' + to_seconds(i) AS occurred_at,
                'r' || (i // {per_run}) AS run,
                'worker-' || (i % 7) AS process,
                NULL AS epoch,
                (?::VARCHAR[])[1 + (hash(i) % {len(statuses)})::INTEGER] AS status,
                CASE WHEN hash(i) % 9 = 0 THEN 'TIMEOUT' ELSE '' END AS code,
                NULL AS actor,
                NULL AS reason,
                '{{"type":"run.x","at":"2026-09-09T00:00:00Z","run":"r' || (i // {per_run}) || '"}}' AS payload
            FROM range({ns.events}) t(i)
            """,
            [statuses],
        )
        con.execute("CHECKPOINT")
        duck._create_predicates(con)
        duck._add_predicates(con, -1)
        generate = time.perf_counter() - t
        con.close()
        con = duckdb.connect(path, read_only=True)
        con.execute("SET TimeZone = 'UTC'")
        t_count, _ = best(con, "SELECT count(DISTINCT status) FROM events")
        t_latest, latest = best(
            con, "SELECT count(*) FROM (SELECT run, arg_max(status, position) AS status FROM events GROUP BY run)"
        )
        t_hist, _ = best(
            con,
            "SELECT status, count(*) FROM (SELECT run, arg_max(status, position) AS status "
            "FROM events GROUP BY run) GROUP BY status",
        )
        t_view, _ = best(con, "SELECT status, count(*) FROM runs GROUP BY status")
        size = os.path.getsize(path)
        con.close()
    print(
        json.dumps(
            {
                "benchmark": "audit_latest_status",
                "events": ns.events,
                "runs": latest[0][0],  # type: ignore[index]
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": sys.version.split()[0],
                    "duckdb": duckdb.__version__,
                    "platform": platform.platform(),
                },
                "generate_seconds": round(generate, 2),
                "file_bytes": size,
                "anchor_scan_seconds": round(t_count, 3),
                "latest_status_seconds": round(t_latest, 3),
                "status_histogram_seconds": round(t_hist, 3),
                "runs_view_seconds": round(t_view, 3),
                "goal_latest_status_under_1s": t_latest < 1.0,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
