"""Rebuild of the views vs the library's own read path and vs the code before, same
database, same run.

    python -m bench.rebuild [--store sqlite|postgresql] [--runs 40000] [--per-run 5] [--repeat 3]
                            [--baseline REV]

Measured, interleaved, `repeat` times each (medians reported):
- library: eventsourcing's select_notifications (10,000 per call) + its JSONTranscoder
  decode of every payload, no fold;
- library_bare: select_notifications alone (10,000 per call), no decode: the
  library's bare read of the same file (issue 12's anchor);
- fast_read: the store adapter's keyset read + typed msgspec decode, no fold;
- rebuild_runs: `projections.engine.rebuild` of the runs view: read, decode, fold, and
  write every run's row into the shadow table, then the swap;
- rebuild_all: every registered view rebuilt (`engine.rebuild_all`: one pass);
- base_rebuild_runs / base_rebuild_all: the same two with the code of commit REV
  (default: the merge base of HEAD and `main`; a `git archive` of it in /tmp), where "all" is one rebuild per view
  in turn, as `epochledger rebuild` did there. The anchor "today's rebuild".

Each rebuild is timed inside a child process (imports excluded), the current tree's
and REV's alike, so both start equally cold. Rates are log events per second (for
"all": the log's events, each folded into every view).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from bench.common import baseline_tree, emit, pg_schema, sqlite_file
from epochledger.ledger.store import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in a child with the tree to measure first on sys.path; works with the code
# before rebuild_all existed (one engine.rebuild per view, as its CLI did).
CHILD = """
import json, sys, time
from epochledger.ledger.store import open_store
from epochledger.projections import engine, runs
from epochledger.projections.registry import VIEWS
store = open_store(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
if sys.argv[2] == "runs":
    n = engine.rebuild(store, runs).events
elif hasattr(engine, "rebuild_all"):
    n = sum(s.events for s in engine.rebuild_all(store, VIEWS))
else:
    n = sum(engine.rebuild(store, v).events for v in VIEWS)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
store.close()
print(json.dumps([seconds, n, engine.__file__, cpu]))
"""


def child(tree: str, url: str, what: str) -> tuple[float, int, float]:
    """(wall seconds, events, CPU seconds of the child: user + system, which the other
    sessions' load on the shared cores moves far less than the wall clock)."""
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, what], cwd=tree, env=env, capture_output=True, text=True, check=True
    ).stdout
    seconds, n, where, cpu = json.loads(out.strip().splitlines()[-1])
    assert where.startswith(tree), (where, tree)  # the tree meant, not the installed one
    return seconds, n, cpu


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.rebuild")
    p.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--runs", type=int, default=40_000)
    p.add_argument("--per-run", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--baseline", default=None, help="the commit whose rebuild is the anchor (default: where this branch left main)"
    )
    ns = p.parse_args(argv)
    name = f"bench_{ns.runs}x{ns.per_run}"
    url = (
        sqlite_file(f"/tmp/epochledger-{name}.db", ns.runs, ns.per_run)
        if ns.store == "sqlite"
        else pg_schema(name, ns.runs, ns.per_run)
    )
    store = open_store(url)
    events = store.max_position() if ns.store == "sqlite" else sum(len(c) for c in store.read_raw())
    base = baseline_tree(ns.baseline, "projections/engine.py")
    load_start = [round(x, 1) for x in os.getloadavg()]

    def library() -> int:
        n = 0
        for _ in store.library_read():
            n += 1
        return n

    def library_bare() -> int:
        n, after = 0, 0
        while True:
            got = store.recorder.select_notifications(after, 10_000, inclusive_of_start=False)
            if not got:
                return n
            n += len(got)
            after = got[-1].id

    def fast_read() -> int:
        return sum(len(c) for c in store.read_batches())

    in_process = {"library": library, "library_bare": library_bare, "fast_read": fast_read}
    children = {
        "rebuild_runs": (ROOT, "runs"),
        "base_rebuild_runs": (base, "runs"),
        "rebuild_all": (ROOT, "all"),
        "base_rebuild_all": (base, "all"),
    }
    times: dict[str, list[float]] = {k: [] for k in (*in_process, *children)}
    cpu: dict[str, list[float]] = {k: [] for k in children}
    views = 0
    for _ in range(ns.repeat):
        for key, f in in_process.items():
            t0 = time.perf_counter()
            n = f()
            times[key].append(time.perf_counter() - t0)
            assert n == events, (key, n, events)
        for key, (tree, what) in children.items():
            seconds, n, used = child(tree, url, what)
            times[key].append(seconds)
            cpu[key].append(used)
            if what == "all":
                views = n // events
                assert n == views * events, (key, n, events)
            else:
                assert n == events, (key, n, events)
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: events / v for k, v in med.items()}
    result = {
        "bench": "rebuild",
        "store": ns.store,
        "events": events,
        "runs": ns.runs,
        "views": views,
        "repeat": ns.repeat,
        "baseline": os.path.basename(base).removeprefix("epochledger-baseline-"),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "seconds_median": {k: round(v, 3) for k, v in med.items()},
        "seconds_all": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "events_per_second": {k: round(v) for k, v in rate.items()},
        "cpu_seconds_median": {k: round(statistics.median(v), 3) for k, v in cpu.items()},
        "cpu_rebuild_runs_vs_base": round(
            statistics.median(cpu["base_rebuild_runs"]) / statistics.median(cpu["rebuild_runs"]), 2
        ),
        "cpu_rebuild_all_vs_base": round(
            statistics.median(cpu["base_rebuild_all"]) / statistics.median(cpu["rebuild_all"]), 2
        ),
        "load_average_start": load_start,
        "rebuild_runs_vs_base": round(rate["rebuild_runs"] / rate["base_rebuild_runs"], 2),
        "rebuild_all_vs_base": round(rate["rebuild_all"] / rate["base_rebuild_all"], 2),
        "rebuild_runs_vs_library_bare": round(rate["rebuild_runs"] / rate["library_bare"], 2),
        "rebuild_all_vs_library_bare": round(rate["rebuild_all"] / rate["library_bare"], 2),
        "rebuild_runs_vs_library": round(rate["rebuild_runs"] / rate["library"], 2),
        "fast_read_vs_library": round(rate["fast_read"] / rate["library"], 2),
        "goal": {"rebuild_vs_base": 2.0, "rebuild_vs_library_bare": 1.5},
        "python": platform.python_version(),
    }
    store.close()
    emit(result)
    return result


if __name__ == "__main__":
    main()
