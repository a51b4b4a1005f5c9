"""Fleet size: the startup sweep of a boot among 100,000 running runs across 500
slots, and `show RUN` / `runs --status S` over 1,000,000 runs (SQLite).

    python -m bench.fleet [--running 100000] [--slots 500] [--runs 1000000] [--repeat 5]
                          [--skip-sweep] [--skip-reads] [--baseline REV]

- sweep: 500 slots booted once, 100,000 runs started on their slot's epoch (200 a
  slot), all built by bulk appends; the views are caught up once (reported apart).
  Then, `repeat` times, one slot boots a new epoch and `Ledger.sweep` recovers its
  200 orphans (catch-up of the views, the orphan rule over every running run, one
  group commit). Goal < 1 s. Anchor: reading and decoding the runs view alone.
- reads: 1,000,000 runs of 3 events (bench/common.py's history, 1 in 7 ends
  failed_resumable), kept in /tmp and reused; the runs view rebuilt once. Then
  `read_run` (what `show RUN` reads; goal < 100 ms), `read_runs(statuses=[S])` as
  whole RunStates and in the two lean shapes `runs` decodes (RunRow for the table,
  ListedRun for --json), and `runs --status S` end to end, table and --json, into
  /dev/null (goal < 1 s), interleaved, wall and CPU. Anchor: the SQL select of those
  rows, fetched, not decoded (through the status index), and the same select made to
  scan the table. The same two commands in child processes, this tree against the
  base commit's (`--baseline`, default where this branch left main), interleaved.
- both: the sweep's candidate query alone, through the index and by table scan.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import baseline_tree, emit, make_history
from epochledger import ManualClock, open_ledger
from epochledger.ledger import lifecycle
from epochledger.ledger.events import ProcessBooted, RunQueued, RunStarted, Status, process_stream, run_stream
from epochledger.ledger.store import Append, open_store
from epochledger.projections import engine, runs, tables

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
    boots = [
        Append(
            process_stream(f"s{k:03d}"),
            1,
            ProcessBooted(at=T0, process=f"s{k:03d}", epoch=f"s{k:03d}.e1", booted_at=T0 - timedelta(seconds=5)),
        )
        for k in range(slots)
    ]
    store.append(boots)
    t0 = time.perf_counter()
    pending: list[Append] = []
    for i in range(running):
        slot = f"s{i % slots:03d}"
        at = T0 + timedelta(seconds=1 + i // 1000)
        stream = run_stream(f"r{i:06d}")
        pending.append(Append(stream, 1, RunQueued(at=at, run=f"r{i:06d}", status=Status.QUEUED, process=slot)))
        pending.append(
            Append(
                stream, 2, RunStarted(at=at, run=f"r{i:06d}", status=Status.RUNNING, process=slot, epoch=f"{slot}.e1")
            )
        )
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
        anchor, _ = med(lambda: engine.read_view(lg._store, runs, catch_up_first=False), repeat)
        statuses = [str(s) for s in Status if lifecycle.can_be_orphaned(s)]
        sql, params = tables.candidates_query(lg._store, "view_runs", "view_epochs", statuses)

        def candidates(sql: str = sql) -> int:
            with lg._store.transaction(commit=False) as cur:
                cur.execute(sql, params)
                return len(cur.fetchall())

        query, found = med(candidates, repeat)
        scan, found_scanning = med(lambda: candidates(sql.replace(" r LEFT JOIN", " r NOT INDEXED LEFT JOIN")), repeat)
        assert found == found_scanning
    result.update(
        {
            "sweep_median_s": round(statistics.median(times), 3),
            "sweep_all_s": [round(t, 3) for t in times],
            "recovered_per_sweep": recovered,
            "anchor_read_runs_view_s": round(anchor, 3),
            "goal_sweep_s": 1.0,
            "candidates_query_s": round(query, 4),
            "candidates_query_table_scan_s": round(scan, 4),
            "candidates": found,
        }
    )
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


# A child process with the tree to measure first on sys.path: `runs --status S [--json]`
# into /dev/null, timed from the call (process start and imports excluded), a first
# call and a second (warm, as the in-process medians are), wall and CPU.
CHILD = """
import contextlib, json, os, sys, time
from epochledger.cli import main as cli
import epochledger
times = []
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    for _ in range(2):
        t0, c0 = time.perf_counter(), time.process_time()
        assert cli(["--store", *sys.argv[1:]]) == 0
        times.append((time.perf_counter() - t0, time.process_time() - c0))
print(json.dumps([times, epochledger.__file__]))
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(tree: str, url: str, *args: str) -> list[tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, *args], cwd=tree, env=env, capture_output=True, text=True, check=True
    ).stdout
    times, where = json.loads(out.strip().splitlines()[-1])
    assert where.startswith(tree), (where, tree)  # the tree meant, not the installed one
    return [tuple(t) for t in times]


def reads_bench(n: int, repeat: int, baseline: str | None) -> dict[str, Any]:
    from epochledger.cli import main as cli
    from epochledger.reports import ListedRun, RunRow

    url, build = fleet_file(n)
    store = open_store(url)
    t0 = time.perf_counter()
    engine.catch_up(store, runs)
    caught = time.perf_counter() - t0
    key = f"run-{n // 2:07d}"
    show, state = med(lambda: engine.read_run(store, key), repeat)
    assert state[0].run == key
    status = "failed_resumable"
    table = store.quote("view_runs")

    def raw(hint: str = "") -> int:
        with store.transaction(commit=False) as cur:
            cur.execute(f"SELECT k, state FROM {table}{hint} WHERE status=? ORDER BY k", (status,))
            return len(cur.fetchall())

    def command(*args: str) -> float:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            t0 = time.perf_counter()
            assert cli(["--store", url, *args]) == 0
            return time.perf_counter() - t0

    # Interleaved, `repeat` rounds: each read in turn, so the other sessions' load on
    # the shared cores falls on all of them alike. Wall and CPU (process_time).
    reads: dict[str, Any] = {
        "anchor_sql_fetch_matching_rows": raw,
        "the_same_by_table_scan": lambda: raw(" NOT INDEXED"),
        "read_runs_whole_state": lambda: len(engine.read_runs(store, statuses=[status])[0]),
        "read_runs_shape_ListedRun": lambda: len(engine.read_runs(store, statuses=[status], shape=ListedRun)[0]),
        "read_runs_shape_RunRow": lambda: len(engine.read_runs(store, statuses=[status], shape=RunRow)[0]),
        "cli_runs_status_table": lambda: command("runs", "--status", status),
        "cli_runs_status_json": lambda: command("runs", "--status", status, "--json"),
    }
    wall: dict[str, list[float]] = {k: [] for k in reads}
    cpu: dict[str, list[float]] = {k: [] for k in reads}
    counts: dict[str, Any] = {}
    for _ in range(repeat):
        for k, f in reads.items():
            t0, c0 = time.perf_counter(), time.process_time()
            counts[k] = f()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    rows = counts["anchor_sql_fetch_matching_rows"]
    assert rows == counts["read_runs_whole_state"] == counts["read_runs_shape_RunRow"]
    show_cli = statistics.median(command("show", key, "--json") for _ in range(repeat))
    # The same CLI commands in child processes, this tree and the base's, interleaved.
    base = baseline_tree(baseline, "epochledger/cli/runs.py")
    trees = {"candidate": ROOT, "base": base}
    children: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeat):
        for name, tree in trees.items():
            for out, args in (("table", ()), ("json", ("--json",))):
                children.setdefault(f"{name}_{out}", []).append(child(tree, url, "runs", "--status", status, *args)[1])
    store.close()
    return {
        "runs": n,
        "build_s": None if build is None else round(build, 1),
        "catch_up_or_rebuild_s": round(caught, 2),
        "status": status,
        "matching_runs": rows,
        "repeat": repeat,
        "show_read_run_median_ms": round(show * 1000, 2),
        "show_cli_median_ms": round(show_cli * 1000, 1),
        "median_s": {k: round(statistics.median(v), 3) for k, v in wall.items()},
        "median_cpu_s": {k: round(statistics.median(v), 3) for k, v in cpu.items()},
        "baseline": os.path.basename(base).removeprefix("epochledger-baseline-"),
        "children_warm_call_median_s": {k: round(statistics.median(w for w, _ in v), 3) for k, v in children.items()},
        "children_warm_call_median_cpu_s": {
            k: round(statistics.median(c for _, c in v), 3) for k, v in children.items()
        },
        "goal_show_ms": 100,
        "goal_runs_status_s": 1.0,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.fleet")
    p.add_argument("--running", type=int, default=100_000)
    p.add_argument("--slots", type=int, default=500)
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--skip-reads", action="store_true")
    p.add_argument("--skip-sweep", action="store_true")
    p.add_argument(
        "--baseline",
        default=None,
        help="the commit whose `runs --status S` the reads compare with (default: where this branch left main)",
    )
    ns = p.parse_args(argv)
    result: dict[str, Any] = {"bench": "fleet", "load_average_start": [round(x, 1) for x in os.getloadavg()]}
    if not ns.skip_sweep:
        with tempfile.TemporaryDirectory() as tmp:
            result["sweep"] = sweep_bench(os.path.join(tmp, "fleet.db"), ns.running, ns.slots, ns.repeat)
    if not ns.skip_reads:
        result["reads"] = reads_bench(ns.runs, ns.repeat, ns.baseline)
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    emit(result)
    return result


if __name__ == "__main__":
    main()
