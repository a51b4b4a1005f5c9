"""Append throughput through the one write path (Ledger.submit / Batch), against raw
sqlite3 in the same run.

    python -m bench.append [--store sqlite|postgresql|both] [--single 1000] [--batches 5]

- single: one transition per transaction (`ledger.queue(...)`, a full read-decide-append
  cycle each); anchor: raw sqlite3 INSERT, one row per transaction, WAL, synchronous
  FULL (the eventsourcing default), same payload size, same disk.
- group: `with ledger.batch() as b:` 1000 transitions (1000 new runs queued) per commit;
  `_prefetch`: the same after `b.prefetch(streams)` (one read per 5,000 new streams).
- interleaved (`--interleaved N`, rule W1): N rounds, each one raw sqlite3 one-row
  transaction, one `queue` of a new run and one `checkpoint` of a run whose state is
  cached, so the fsync's swings fall on all three alike; per-transaction medians.
  Then group commits of 1000 checkpoints of 1000 cached runs (`group1000_cached`).
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

from bench.common import PG_URL, drop_schemas, emit
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
    from epochledger.ledger.events import run_stream

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


def interleaved(path: str, url: str, n: int, payload: bytes) -> dict:
    """Per-transaction medians, raw sqlite3 and the ledger sampled in turn."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id TEXT, v INT, topic TEXT, state BLOB, PRIMARY KEY (id, v))")
    raw, queue, checkpoint = [], [], []
    with open_ledger(url, clock=ManualClock(T0, 1)) as lg:
        lg.queue("warm")
        lg.start("warm")
        for i in range(n):
            t0 = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t VALUES (?, 1, 'run.queued', ?)", (f"run:r{i}", payload))
            conn.execute("COMMIT")
            raw.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            lg.queue(f"i-{i}", workflow="nightly", process="worker-1", actor="api-1")
            queue.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            lg.checkpoint("warm", "step", f"ckpt/{i}", actor="worker")
            checkpoint.append(time.perf_counter() - t0)
    conn.close()
    med = {k: statistics.median(v) for k, v in (("raw", raw), ("queue", queue), ("checkpoint", checkpoint))}
    return {
        "raw_sqlite3_batch1_median_ms": round(med["raw"] * 1000, 3),
        "ledger_queue_batch1_median_ms": round(med["queue"] * 1000, 3),
        "ledger_checkpoint_cached_batch1_median_ms": round(med["checkpoint"] * 1000, 3),
        "queue_vs_raw": round(med["raw"] / med["queue"], 2),
        "checkpoint_cached_vs_raw": round(med["raw"] / med["checkpoint"], 2),
        "goal_vs_raw": 0.8,
    }


def group_cached(url: str, batches: int, size: int = 1000, prefetch: bool = True) -> float:
    """Events/s of group commits of `size` checkpoints, one per run, every run cached:
    with prefetch, one read per 500 streams (SQLite) of the events after their cached versions."""
    from epochledger.ledger.events import run_stream

    with open_ledger(url, clock=ManualClock(T0, 1)) as lg:
        with lg.batch() as b:
            for i in range(size):
                b.queue(f"c-{i}")
                b.start(f"c-{i}")
        times = []
        for k in range(batches):
            t0 = time.perf_counter()
            with lg.batch() as b:
                if prefetch:
                    b.prefetch([run_stream(f"c-{i}") for i in range(size)])
                for i in range(size):
                    b.checkpoint(f"c-{i}", "step", f"ckpt/{k}")
            times.append(time.perf_counter() - t0)
        return size / statistics.median(times)


def store_only_group(url: str, batches: int, size: int = 1000) -> float:
    """Anchor for group commit: the store adapter alone (encode + the library's insert
    + commit) appending `size` already-decided events per transaction: the ceiling of
    what the write path can reach in this run."""
    from epochledger.ledger.events import RunQueued, Status, run_stream
    from epochledger.ledger.store import Append, open_store

    store = open_store(url)
    times = []
    for b in range(batches):
        rows = [
            Append(
                run_stream(f"s{b}-{i}"),
                1,
                RunQueued(
                    at=T0, run=f"s{b}-{i}", status=Status.QUEUED, workflow="nightly", process="worker-1", actor="api-1"
                ),
            )
            for i in range(size)
        ]
        t0 = time.perf_counter()
        store.append(rows)
        times.append(time.perf_counter() - t0)
    store.close()
    return size / statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.append")
    p.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--single", type=int, default=1000)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--interleaved", type=int, default=300)
    ns = p.parse_args(argv)
    result: dict = {"bench": "append", "single_n": ns.single, "group_size": 1000, "group_batches": ns.batches}
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued, Status

    payload = codec.encode(
        RunQueued(at=T0, run="s-0", status=Status.QUEUED, workflow="nightly", process="worker-1", actor="api-1")
    )
    with tempfile.TemporaryDirectory() as tmp:
        if ns.store in ("sqlite", "both"):
            result["sqlite"] = {
                "raw_sqlite3_batch1_events_per_second": round(
                    raw_sqlite_batch1(os.path.join(tmp, "raw.db"), ns.single, payload)
                ),
                "ledger_batch1_events_per_second": round(ledger_single(f"sqlite:///{tmp}/a.db", ns.single)),
                "ledger_group1000_events_per_second": round(ledger_group(f"sqlite:///{tmp}/b.db", ns.batches)),
                "ledger_group1000_prefetch_events_per_second": round(
                    ledger_group(f"sqlite:///{tmp}/b.db", ns.batches, prefetch=True)
                ),
                "ledger_group1000_cached_prefetch_events_per_second": round(
                    group_cached(f"sqlite:///{tmp}/c.db", ns.batches)
                ),
                "anchor_store_only_group1000_events_per_second": round(
                    store_only_group(f"sqlite:///{tmp}/s.db", ns.batches)
                ),
                "goal_group1000": 80_000,
                "interleaved": interleaved(
                    os.path.join(tmp, "raw2.db"), f"sqlite:///{tmp}/i.db", ns.interleaved, payload
                ),
            }
            s = result["sqlite"]
            s["batch1_vs_raw"] = round(
                s["ledger_batch1_events_per_second"] / s["raw_sqlite3_batch1_events_per_second"], 2
            )
    if ns.store in ("postgresql", "both"):
        schema = "bench_append_" + uuid.uuid4().hex[:8]
        url = f"{PG_URL}?schema={schema}"
        try:
            result["postgresql"] = {
                "ledger_batch1_events_per_second": round(ledger_single(url, max(100, ns.single // 4))),
                "ledger_group1000_events_per_second": round(ledger_group(url, ns.batches)),
                "ledger_group1000_prefetch_events_per_second": round(ledger_group(url, ns.batches, prefetch=True)),
                "ledger_group1000_cached_prefetch_events_per_second": round(group_cached(url, ns.batches)),
                "anchor_store_only_group1000_events_per_second": round(store_only_group(url, ns.batches)),
                "goal_group1000": 30_000,
            }
        finally:
            drop_schemas([schema])
    emit(result)
    return result


if __name__ == "__main__":
    main()
