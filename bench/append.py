"""Append throughput through the one write path (Ledger.submit / Batch), against raw
sqlite3 in the same run.

    python -m bench.append [--store sqlite|postgresql|both] [--single 1000] [--batches 5]

- single: one transition per transaction (`ledger.queue(...)`, a full read-decide-append
  cycle each); anchor: raw sqlite3 INSERT, one row per transaction, WAL, synchronous
  FULL (the eventsourcing default), same payload size, same disk.
- group: `with ledger.batch() as b:` 1000 transitions (1000 new runs queued) per commit;
  `_prefetch`: the same after `b.prefetch(streams)` (one read per 500 streams).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime

from bench.common import PG_URL, emit
from epochledger import ManualClock, open_ledger

T0 = datetime(2026, 9, 9, tzinfo=UTC)


def raw_sqlite_batch1(path: str, n: int, payload: bytes) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id TEXT, v INT, topic TEXT, state BLOB, PRIMARY KEY (id, v))")
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (?, 1, 'run.queued', ?)", (f"run:r{i}", payload))
        conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    conn.close()
    return n / dt


def ledger_single(url: str, n: int) -> float:
    with open_ledger(url, clock=ManualClock(T0, 1)) as lg:
        t0 = time.perf_counter()
        for i in range(n):
            lg.queue(f"s-{i}", workflow="nightly", process="worker-1", actor="api-1")
        return n / (time.perf_counter() - t0)


def ledger_group(url: str, batches: int, size: int = 1000, prefetch: bool = False) -> float:
    from ledger.events import run_stream

    with open_ledger(url, clock=ManualClock(T0, 1)) as lg:
        times = []
        tag = "p" if prefetch else "g"
        for b in range(batches):
            t0 = time.perf_counter()
            with lg.batch() as batch:
                if prefetch:
                    batch.prefetch([run_stream(f"{tag}{b}-{i}") for i in range(size)])
                for i in range(size):
                    batch.queue(f"{tag}{b}-{i}", workflow="nightly", process="worker-1", actor="api-1")
            times.append(time.perf_counter() - t0)
        return size / statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.append")
    p.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--single", type=int, default=1000)
    p.add_argument("--batches", type=int, default=5)
    ns = p.parse_args(argv)
    result: dict = {"bench": "append", "single_n": ns.single, "group_size": 1000, "group_batches": ns.batches}
    from ledger import codec
    from ledger.events import RunQueued, Status

    payload = codec.encode(RunQueued(at=T0, run="s-0", status=Status.QUEUED, workflow="nightly",
                                     process="worker-1", actor="api-1"))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        if ns.store in ("sqlite", "both"):
            result["sqlite"] = {
                "raw_sqlite3_batch1_events_per_second": round(raw_sqlite_batch1(os.path.join(tmp, "raw.db"), ns.single, payload)),
                "ledger_batch1_events_per_second": round(ledger_single(f"sqlite:///{tmp}/a.db", ns.single)),
                "ledger_group1000_events_per_second": round(ledger_group(f"sqlite:///{tmp}/b.db", ns.batches)),
                "ledger_group1000_prefetch_events_per_second": round(ledger_group(f"sqlite:///{tmp}/b.db", ns.batches, prefetch=True)),
                "goal_group1000": 60_000,
            }
            s = result["sqlite"]
            s["batch1_vs_raw"] = round(s["ledger_batch1_events_per_second"] / s["raw_sqlite3_batch1_events_per_second"], 2)
    if ns.store in ("postgresql", "both"):
        import psycopg

        schema = "bench_append_" + uuid.uuid4().hex[:8]
        url = f"{PG_URL}?schema={schema}"
        try:
            result["postgresql"] = {
                "ledger_batch1_events_per_second": round(ledger_single(url, max(100, ns.single // 4))),
                "ledger_group1000_events_per_second": round(ledger_group(url, ns.batches)),
                "ledger_group1000_prefetch_events_per_second": round(ledger_group(url, ns.batches, prefetch=True)),
                "goal_group1000": 25_000,
            }
        finally:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    emit(result)
    return result


if __name__ == "__main__":
    main()
