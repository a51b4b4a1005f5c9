"""Rebuild of the runs view vs the library's own read path, same database, same run.

    python -m bench.rebuild [--store sqlite|postgresql] [--runs 40000] [--per-run 5] [--repeat 3]

Measured, interleaved, `repeat` times each (medians reported):
- library: eventsourcing's select_notifications (10,000 per call) + its JSONTranscoder
  decode of every payload, no fold (the anchor; generous to the library);
- library_bare: select_notifications alone (10,000 per call), no decode: the
  library's bare read of the same file (issue 12's anchor);
- fast_read: the store adapter's keyset read + typed msgspec decode, no fold;
- rebuild: `projections.engine.rebuild` of the runs view: read, decode, fold, and write
  every run's row into the shadow table, then the swap.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from bench.common import emit, pg_schema, sqlite_file
from ledger.store import open_store
from projections import engine, runs


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.rebuild")
    p.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--runs", type=int, default=40_000)
    p.add_argument("--per-run", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    ns = p.parse_args(argv)
    name = f"bench_{ns.runs}x{ns.per_run}"
    url = sqlite_file(f"/tmp/epochledger-{name}.db", ns.runs, ns.per_run) if ns.store == "sqlite" else pg_schema(name, ns.runs, ns.per_run)
    store = open_store(url)
    events = store.max_position() if ns.store == "sqlite" else sum(len(c) for c in store.read_raw())

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

    def rebuild() -> int:
        return engine.rebuild(store, runs).events

    times: dict[str, list[float]] = {"library": [], "library_bare": [], "fast_read": [], "rebuild": []}
    for _ in range(ns.repeat):
        for key, f in (("library", library), ("library_bare", library_bare), ("fast_read", fast_read), ("rebuild", rebuild)):
            t0 = time.perf_counter()
            n = f()
            times[key].append(time.perf_counter() - t0)
            assert n == events, (key, n, events)
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: events / v for k, v in med.items()}
    result = {
        "bench": "rebuild",
        "store": ns.store,
        "events": events,
        "runs": ns.runs,
        "repeat": ns.repeat,
        "seconds_median": {k: round(v, 3) for k, v in med.items()},
        "seconds_all": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "events_per_second": {k: round(v) for k, v in rate.items()},
        "rebuild_vs_library": round(rate["rebuild"] / rate["library"], 2),
        "fast_read_vs_library": round(rate["fast_read"] / rate["library"], 2),
        "rebuild_vs_library_bare": round(rate["rebuild"] / rate["library_bare"], 2),
        "goal": {"rebuild_events_per_second": 500_000, "rebuild_vs_library": 6.0},
        "python": platform.python_version(),
    }
    store.close()
    emit(result)
    return result


if __name__ == "__main__":
    main()
