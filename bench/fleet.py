"""Fleet size: the startup sweep of a boot among 100,000 running runs across 500
slots, and `show RUN` / `runs --status S` over 1,000,000 runs (SQLite).

    python -m bench.fleet [--running 100000] [--slots 500] [--runs 1000000] [--repeat 5]

- sweep: 500 slots booted once, 100,000 runs started on their slot's epoch (200 a
  slot), all built by bulk appends; the views are caught up once (reported apart).
  Then, `repeat` times, one slot boots a new epoch and `Ledger.sweep` recovers its
  200 orphans (catch-up of the views, the orphan rule over every running run, one
  group commit). Goal < 1 s. Anchor: reading and decoding the runs view alone.
- reads: 1,000,000 runs of 3 events (bench/common.py's history, 1 in 7 ends
  failed_resumable), kept in /tmp and reused; the runs view rebuilt once. Then
  `read_run` (what `show RUN` reads; goal < 100 ms) and `read_runs(statuses=[S])`
  (what `runs --status S` reads; goal < 1 s), and the CLI commands end to end with
  --json into /dev/null. Anchor: the SQL select of those rows, fetched, not decoded
  (through the status index), and the same select made to scan the table.
- both: the sweep's candidate query alone, through the index and by table scan.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import emit, make_history
from epochledger import ManualClock, open_ledger
from ledger import lifecycle
from ledger.events import ProcessBooted, RunQueued, RunStarted, Status, process_stream, run_stream
from ledger.store import Append, open_store
from projections import engine, runs, tables

T0 = datetime(2026, 9, 9, tzinfo=UTC)


def med(f: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def sweep_bench(path: str, running: int, slots: int, repeat: int) -> dict[str, Any]:
    url = f"sqlite:///{path}"
    store = open_store(url)
    boots = [Append(process_stream(f"s{k:03d}"), 1, ProcessBooted(at=T0, process=f"s{k:03d}", epoch=f"s{k:03d}.e1",
                                                                  booted_at=T0 - timedelta(seconds=5)))
             for k in range(slots)]  # fmt: skip
    store.append(boots)
    t0 = time.perf_counter()
    pending: list[Append] = []
    for i in range(running):
        slot = f"s{i % slots:03d}"
        at = T0 + timedelta(seconds=1 + i // 1000)
        stream = run_stream(f"r{i:06d}")
        pending.append(Append(stream, 1, RunQueued(at=at, run=f"r{i:06d}", status=Status.QUEUED, process=slot)))
        pending.append(Append(stream, 2, RunStarted(at=at, run=f"r{i:06d}", status=Status.RUNNING, process=slot,
                                                    epoch=f"{slot}.e1")))  # fmt: skip
        if len(pending) >= 20_000:
            store.append(pending)
            pending = []
    if pending:
        store.append(pending)
    build = time.perf_counter() - t0
    store.close()
    clock = ManualClock(T0 + timedelta(hours=1), uptime=3)
    result: dict[str, Any] = {"running_runs": running, "slots": slots, "build_s": round(build, 2)}
    with open_ledger(url, clock=clock) as lg:
        t0 = time.perf_counter()
        lg.orphan_view()  # the views caught up once, as a live fleet's are
        result["first_catch_up_s"] = round(time.perf_counter() - t0, 2)
        times, recovered = [], []
        for k in range(repeat):
            clock.advance(60)
            epoch = lg.boot(f"s{k:03d}", epoch=f"s{k:03d}.e2")
            t0 = time.perf_counter()
            report = lg.sweep(epoch)
            times.append(time.perf_counter() - t0)
            recovered.append(len(report.recovered))
        anchor, _ = med(lambda: engine.read_view(lg.store, runs, catch_up_first=False), repeat)
        statuses = [str(s) for s in Status if lifecycle.can_be_orphaned(s)]
        sql, params = tables.candidates_query(lg.store, "view_runs", "view_epochs", statuses)

        def candidates(sql: str = sql) -> int:
            with lg.store.transaction(commit=False) as cur:
                cur.execute(sql, params)
                return len(cur.fetchall())

        query, found = med(candidates, repeat)
        scan, found_scanning = med(lambda: candidates(sql.replace(" r LEFT JOIN", " r NOT INDEXED LEFT JOIN")), repeat)
        assert found == found_scanning
    result.update({
        "sweep_median_s": round(statistics.median(times), 3), "sweep_all_s": [round(t, 3) for t in times],
        "recovered_per_sweep": recovered, "anchor_read_runs_view_s": round(anchor, 3), "goal_sweep_s": 1.0,
        "candidates_query_s": round(query, 4), "candidates_query_table_scan_s": round(scan, 4), "candidates": found,
    })  # fmt: skip
    return result


def fleet_file(n: int) -> tuple[str, float | None]:
    """The SQLite file of `n` runs of 3 events, built once (20,000 events a group
    commit, ~50k events/s on an idle machine) and reused while its marker file says it
    is whole; (url, seconds the build took, None if reused)."""
    path = f"/tmp/epochledger-fleet_{n}x3.db"
    if os.path.exists(path + ".ok"):
        return "sqlite:///" + path, None
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    t0 = time.perf_counter()
    built = open_store(path)
    make_history(built, n, 3, window=20_000 // 3, log=lambda m: print(m, file=sys.stderr))
    built.close()
    seconds = time.perf_counter() - t0
    with open(path + ".ok", "w") as f:
        f.write(f"{n} 3\n")
    return "sqlite:///" + path, seconds


def reads_bench(n: int, repeat: int) -> dict[str, Any]:
    from epochledger.cli import main as cli

    url, build = fleet_file(n)
    store = open_store(url)
    t0 = time.perf_counter()
    engine.catch_up(store, runs)
    caught = time.perf_counter() - t0
    key = f"run-{n // 2:07d}"
    show, state = med(lambda: engine.read_run(store, key), repeat)
    assert state[0].run == key
    status = "failed_resumable"
    listing, found = med(lambda: engine.read_runs(store, statuses=[status]), repeat)
    table = store.quote("view_runs")

    def raw(hint: str = "") -> int:
        with store.transaction(commit=False) as cur:
            cur.execute(f"SELECT k, state FROM {table}{hint} WHERE status=? ORDER BY k", (status,))
            return len(cur.fetchall())

    anchor, rows = med(raw, repeat)
    scan, _ = med(lambda: raw(" NOT INDEXED"), repeat)
    assert rows == len(found[0])

    def command(*args: str) -> float:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            t0 = time.perf_counter()
            assert cli(["--store", url, *args]) == 0
            return time.perf_counter() - t0

    show_cli = statistics.median(command("show", key, "--json") for _ in range(repeat))
    runs_cli = statistics.median(command("runs", "--status", status, "--json") for _ in range(repeat))
    store.close()
    return {
        "runs": n, "build_s": None if build is None else round(build, 1), "catch_up_or_rebuild_s": round(caught, 2), "status": status, "matching_runs": rows,
        "show_read_run_median_ms": round(show * 1000, 2), "show_cli_median_ms": round(show_cli * 1000, 1),
        "runs_status_read_runs_median_s": round(listing, 3), "runs_status_cli_median_s": round(runs_cli, 3),
        "anchor_sql_fetch_matching_rows_s": round(anchor, 3), "the_same_by_table_scan_s": round(scan, 3),
        "goal_show_ms": 100, "goal_runs_status_s": 1.0,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.fleet")
    p.add_argument("--running", type=int, default=100_000)
    p.add_argument("--slots", type=int, default=500)
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--skip-reads", action="store_true")
    ns = p.parse_args(argv)
    result: dict[str, Any] = {"bench": "fleet", "load_average_start": [round(x, 1) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        result["sweep"] = sweep_bench(os.path.join(tmp, "fleet.db"), ns.running, ns.slots, ns.repeat)
    if not ns.skip_reads:
        result["reads"] = reads_bench(ns.runs, ns.repeat)
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    emit(result)
    return result


if __name__ == "__main__":
    main()
