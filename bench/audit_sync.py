"""Benchmark: `audit sync` end to end, events/s, with anchors measured in the same run.

    .venv/bin/python bench/audit_sync.py [--events 1000000] [--store /tmp/bench-audit.db]

Builds (once, then reuses) a SQLite ledger of N run events (runs of 4 events:
queued, started, checkpointed, finished/failed) through the store adapter, then times:
  anchor_raw_read   - Store.read_raw over the whole log (SQLite keyset read, no decode)
  anchor_typed_read - Ledger.events over the whole log (read + msgspec typed decode)
  sync_full         - audit sync into a fresh DuckDB file (read + NDJSON + DuckDB load)
  sync_incremental  - audit sync of the last 1% appended afterwards
  sync_nothing      - a sync with nothing new (the fixed cost of a sync)
Prints one JSON object. Figures and the command go into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

import duckdb

from epochledger.app import open_ledger
from ledger.events import RunCheckpointed, RunFailed, RunFinished, RunQueued, RunStarted, Status, run_stream
from ledger.store import Append
from projections import audit

T0 = datetime(2026, 9, 9, tzinfo=UTC)


def build(path: str, events: int) -> None:
    with open_ledger(path) as lg:
        have = lg.store.max_position()
        run = have // 4
        while have < events:
            writes = []
            for _ in range(1000):
                r = f"bench-{run:08d}"
                at = T0 + timedelta(seconds=run)
                last = (RunFailed(at=at + timedelta(seconds=90), run=r, status=Status.FAILED_RESUMABLE,
                                  code="TIMEOUT" if run % 7 else "A_CODE_NOBODY_KNOWS", resumable=True)  # fmt: skip
                        if run % 5 == 0 else RunFinished(at=at + timedelta(seconds=90), run=r, status=Status.FINISHED))  # fmt: skip
                stream = run_stream(r)
                writes.extend(Append(stream, v, e) for v, e in enumerate([
                    RunQueued(at=at, run=r, status=Status.QUEUED, workflow=f"wf-{run % 13}", process="worker-1"),
                    RunStarted(at=at + timedelta(seconds=2), run=r, status=Status.RUNNING, epoch="w1.e1", process="worker-1"),
                    RunCheckpointed(at=at + timedelta(seconds=30), run=r, status=Status.RUNNING, node="extract", ref=f"ckpt/{r}/1"),
                    last,
                ], start=1))  # fmt: skip
                run += 1
            lg.store.append(writes)
            have += 4000


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "bench-audit.db"))
    ns = ap.parse_args()
    build(ns.store, ns.events)
    with open_ledger(ns.store) as lg:
        n = lg.store.max_position()
        cutoff = n - n // 100
        t_raw, _ = timed(lambda: sum(len(b) for b in lg.store.read_raw(0)))
        t_typed, _ = timed(lambda: sum(1 for _ in lg.events()))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.duckdb")

            class Upto:  # the same store, seen up to `cutoff`, for the incremental step
                url = lg.store.url

                def read_raw(self, after: int = 0, upto: int | None = None, batch: int = 10_000):
                    return lg.store.read_raw(after, cutoff, batch)

            t_full, first = timed(lambda: audit.sync(Upto(), path))  # type: ignore[arg-type]
            t_inc, second = timed(lambda: audit.sync(lg.store, path))
            t_nothing, third = timed(lambda: audit.sync(lg.store, path))
            assert first.appended + second.appended == n and third.appended == 0
            size = os.path.getsize(path)
    print(json.dumps({
        "benchmark": "audit_sync",
        "events": n,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "duckdb": duckdb.__version__,
                    "platform": platform.platform()},
        "anchor_raw_read_events_per_s": round(n / t_raw),
        "anchor_typed_read_events_per_s": round(n / t_typed),
        "sync_full": {"events": first.appended, "seconds": round(t_full, 3), "events_per_s": round(first.appended / t_full)},
        "sync_incremental": {"events": second.appended, "seconds": round(t_inc, 3),
                             "events_per_s": round(second.appended / t_inc)},
        "sync_nothing_seconds": round(t_nothing, 3),
        "duckdb_file_bytes_per_event": round(size / n, 1),
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
