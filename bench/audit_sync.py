"""Benchmark: `audit sync` end to end, events/s, with anchors measured in the same run.

    .venv/bin/python -m bench.audit_sync [--events 1000000] [--store /tmp/bench-audit.db]
                                         [--repeat 3] [--baseline REV]

Builds (once, then reuses) a SQLite ledger of N run events (runs of 4 events:
queued, started, checkpointed, finished/failed) through the store adapter, then, in
`--repeat` interleaved rounds, times:
  anchor_raw_read   - Store.read_raw over the whole log (SQLite keyset read, no decode)
  anchor_typed_read - Ledger.events over the whole log (read + msgspec typed decode)
  sync_full         - audit sync of the first 99% into a fresh DuckDB file (read + chunk
                      files + DuckDB load + commit), in a child process; wall and CPU
                      time (all its threads)
  base_sync_full    - the same with the audit code of commit REV (default: where this
                      branch left main; a `git archive` of it in /tmp), in a child
  runs_query / base_runs_query - `SELECT count(*), count(workflow) FROM runs` on each
                      file (the runs view reads the payload: the cost of its storage)
  sync_incremental  - audit sync of the last 1% appended afterwards
  sync_nothing      - a sync with nothing new (the fixed cost of a sync)
Prints one JSON object: medians, every sample, ratios, the load average. Figures and
the command go into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

import duckdb

from bench.common import baseline_tree
from epochledger.app import open_ledger
from epochledger.ledger.events import RunCheckpointed, RunFailed, RunFinished, RunQueued, RunStarted, Status, run_stream
from epochledger.ledger.store import Append

T0 = datetime(2026, 9, 9, tzinfo=UTC)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL_EVENTS_PER_S = 300_000  # issue 12


def build(path: str, events: int) -> None:
    with open_ledger(path) as lg:
        have = lg._store.max_position()
        run = have // 4
        while have < events:
            writes = []
            for _ in range(1000):
                r = f"bench-{run:08d}"
                at = T0 + timedelta(seconds=run)
                last = (
                    RunFailed(
                        at=at + timedelta(seconds=90),
                        run=r,
                        status=Status.FAILED_RESUMABLE,
                        code="TIMEOUT" if run % 7 else "A_CODE_NOBODY_KNOWS",
                        resumable=True,
                    )
                    if run % 5 == 0
                    else RunFinished(at=at + timedelta(seconds=90), run=r, status=Status.FINISHED)
                )
                stream = run_stream(r)
                writes.extend(
                    Append(stream, v, e)
                    for v, e in enumerate(
                        [
                            RunQueued(
                                at=at, run=r, status=Status.QUEUED, workflow=f"wf-{run % 13}", process="worker-1"
                            ),
                            RunStarted(
                                at=at + timedelta(seconds=2),
                                run=r,
                                status=Status.RUNNING,
                                epoch="w1.e1",
                                process="worker-1",
                            ),
                            RunCheckpointed(
                                at=at + timedelta(seconds=30),
                                run=r,
                                status=Status.RUNNING,
                                node="extract",
                                ref=f"ckpt/{r}/1",
                            ),
                            last,
                        ],
                        start=1,
                    )
                )
                run += 1
            lg._store.append(writes)
            have += 4000


# One sync in a fresh process with the audit code of the tree on PYTHONPATH: up to
# `cutoff` into a new file ("full"), then the rest ("incremental"), then nothing new.
CHILD = """
import json, os, sys, time
from epochledger.ledger.store import open_store
from epochledger.projections import audit
url, path, cutoff = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(url, create=False)

class Upto:  # the same store, seen up to `cutoff` (read_lines: the audit code since f71119b)
    url = store.url
    def read_raw(self, after=0, upto=None, batch=10_000):
        return store.read_raw(after, cutoff if upto is None else min(upto, cutoff), batch)
    def read_lines(self, after=0, upto=None, batch=10_000):
        return store.read_lines(after, cutoff if upto is None else min(upto, cutoff), batch)

out = {"where": audit.__file__}
t, c = time.perf_counter(), time.process_time(); r = audit.sync(Upto(), path)
out["full"] = [time.perf_counter() - t, r.appended, time.process_time() - c]
out["bytes"] = os.path.getsize(path)
t = time.perf_counter(); q = audit.query(path, "SELECT count(*), count(workflow) FROM runs")
out["runs_query"] = [time.perf_counter() - t, q.rows[0][0]]
t = time.perf_counter(); r = audit.sync(store, path); out["incremental"] = [time.perf_counter() - t, r.appended]
t = time.perf_counter(); r = audit.sync(store, path); out["nothing"] = [time.perf_counter() - t, r.appended]
print(json.dumps(out))
"""


def child(tree: str, url: str, cutoff: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": tree}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, url, os.path.join(tmp, "bench.duckdb"), str(cutoff)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["where"].startswith(tree), (result["where"], tree)  # the tree meant, not the installed one
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "bench-audit.db"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--baseline",
        default=None,
        help="the commit whose audit sync is the anchor (default: where this branch left main)",
    )
    ns = ap.parse_args()
    build(ns.store, ns.events)
    base = baseline_tree(ns.baseline, "projections/audit/__init__.py")
    times: dict[str, list[float]] = {
        k: []
        for k in (
            "anchor_raw_read",
            "anchor_typed_read",
            "sync_full",
            "base_sync_full",
            "runs_query",
            "base_runs_query",
            "sync_incremental",
            "sync_nothing",
            "sync_full_cpu",
            "base_sync_full_cpu",
        )
    }
    load = []
    with open_ledger(ns.store) as lg:
        n = lg._store.max_position()
        cutoff = n - n // 100
        url = lg._store.url
        sizes = {}
        for i in range(ns.repeat):
            load.append(os.getloadavg()[0])
            t = time.perf_counter()
            assert sum(len(b) for b in lg._store.read_raw(0)) == n
            times["anchor_raw_read"].append(time.perf_counter() - t)
            t = time.perf_counter()
            assert sum(1 for _ in lg.events()) == n
            times["anchor_typed_read"].append(time.perf_counter() - t)
            order = [("", ROOT), ("base_", base)] if i % 2 == 0 else [("base_", base), ("", ROOT)]
            for prefix, tree in order:
                r = child(tree, url, cutoff)
                assert r["full"][1] == cutoff and r["runs_query"][1] == -(-cutoff // 4), r  # 4 events a run
                assert r["full"][1] + r["incremental"][1] == n and r["nothing"][1] == 0, r
                times[prefix + "sync_full"].append(r["full"][0])
                times[prefix + "sync_full_cpu"].append(r["full"][2])  # all the process's threads
                times[prefix + "runs_query"].append(r["runs_query"][0])
                sizes[prefix] = r["bytes"]
                if not prefix:
                    times["sync_incremental"].append(r["incremental"][0])
                    times["sync_nothing"].append(r["nothing"][0])
        load.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    per_s = {
        "anchor_raw_read": n / med["anchor_raw_read"],
        "anchor_typed_read": n / med["anchor_typed_read"],
        "sync_full": cutoff / med["sync_full"],
        "base_sync_full": cutoff / med["base_sync_full"],
        "sync_incremental": (n - cutoff) / med["sync_incremental"],
    }
    print(
        json.dumps(
            {
                "benchmark": "audit_sync",
                "events": n,
                "repeat": ns.repeat,
                "baseline": os.path.basename(base).removeprefix("epochledger-baseline-"),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": sys.version.split()[0],
                    "duckdb": duckdb.__version__,
                    "platform": platform.platform(),
                },
                "load_average_1min": [round(x, 1) for x in load],
                "events_per_s_median": {k: round(v) for k, v in per_s.items()},
                "seconds_median": {k: round(v, 3) for k, v in med.items()},
                "seconds_all": {k: [round(x, 3) for x in v] for k, v in times.items()},
                "sync_full_vs_base": round(per_s["sync_full"] / per_s["base_sync_full"], 2),
                "sync_full_vs_raw_read": round(per_s["sync_full"] / per_s["anchor_raw_read"], 2),
                "sync_full_vs_typed_read": round(per_s["sync_full"] / per_s["anchor_typed_read"], 2),
                "runs_query_vs_base": round(med["runs_query"] / med["base_runs_query"], 2),
                # CPU time of the sync process (every thread) per event: the work done, which a
                # loaded machine inflates less than the wall time
                "sync_full_cpu_us_per_event": round(med["sync_full_cpu"] / cutoff * 1e6, 2),
                "base_sync_full_cpu_us_per_event": round(med["base_sync_full_cpu"] / cutoff * 1e6, 2),
                "sync_full_vs_goal": round(per_s["sync_full"] / GOAL_EVENTS_PER_S, 2),
                "duckdb_file_bytes_per_event": round(sizes[""] / cutoff, 1),
                "base_duckdb_file_bytes_per_event": round(sizes["base_"] / cutoff, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
