"""Peak RSS of a rebuild of the runs view, in a fresh process per measurement.

    python -m bench.memory [--sizes 1000000x5,200000x5,200000x25]

Each size is RUNSxEVENTS_PER_RUN; its SQLite history is generated once (group commit
through the store adapter) and kept in /tmp. The child process opens the store,
rebuilds the runs view and reports ru_maxrss. Goal: <= 600 MB at 1M runs / 5M events,
growing with runs, not with events (compare 200000x5 with 200000x25).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from bench.common import emit, sqlite_file
from epochledger.projections import tables


def child(url: str) -> None:
    from epochledger.ledger.store import open_store
    from epochledger.projections import engine, runs

    store = open_store(url)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    stats = engine.rebuild(store, runs)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = tables.view_rows(store, "runs", "view_runs", [], where=[("k", "run-0000000")])[1]
    assert rows, "runs view is empty"
    print(
        json.dumps(
            {
                "events": stats.events,
                "seconds": round(seconds, 2),
                "events_per_second": round(stats.events / seconds),
                "peak_rss_mb": round(peak / 1024, 1),
                "rss_before_rebuild_mb": round(baseline / 1024, 1),
            }
        )
    )


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.memory")
    p.add_argument("--sizes", default="1000000x5,200000x5,200000x25")
    p.add_argument("--child")
    ns = p.parse_args(argv)
    if ns.child:
        child(ns.child)
        return {}
    results = []
    for size in ns.sizes.split(","):
        runs, per_run = (int(x) for x in size.split("x"))
        t0 = time.perf_counter()
        url = sqlite_file(f"/tmp/epochledger-bench_{runs}x{per_run}.db", runs, per_run)
        generated = time.perf_counter() - t0
        out = subprocess.run(
            [sys.executable, "-m", "bench.memory", "--child", url], check=True, capture_output=True, text=True
        ).stdout
        results.append(
            {"runs": runs, "events_per_run": per_run, "prepare_seconds": round(generated, 1), **json.loads(out)}
        )
    result = {"bench": "memory", "goal_peak_rss_mb": 600, "results": results}
    emit(result)
    return result


if __name__ == "__main__":
    main()
