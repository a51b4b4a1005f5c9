"""Flat write cost as history grows (rule W1), on SQLite and PostgreSQL, in one run.

    python -m bench.growth [--store sqlite|postgresql|both] [--samples 40]
                           [--lengths 10,1000,10000,100000] [--epochs 10,1000,10000,20000]

- append: one checkpoint per transaction (`Ledger.checkpoint`) on a run whose stream
  already holds L events, L in `--lengths`; ratio of each median to the median at the
  first length (goal <= 1.3).
- queue+start: `queue(run)` then `start(run, epoch=E)` (two transactions), E the live
  epoch of a slot that has booted N epochs, N in `--epochs`; ratio as above.
- boot: `Ledger.boot(slot)` on a slot that has booted N epochs; ratio as above.

The histories are built by bulk group commits through the store adapter (10,000 events
per transaction: a run of queued, started, then checkpoints; a slot of boot + clean
stop per epoch). Each size gets its own ledger, opened cold; its first write (which
folds the whole stream once and fills the cache) is reported apart as `first_write_s`.
Then the sizes are measured round-robin, one sample of each per round, so machine noise
falls on all of them alike. Wall-clock and CPU (process) medians: each transaction's
fsync (SQLite) or round trips (PostgreSQL) dominate the wall time; the CPU time is what
the fold and the decide cost. Anchors: raw sqlite3, one row per transaction, WAL,
synchronous FULL (the store's setting), same payload, same disk; and the library's own
snapshotting application (`library_snapshotting`): an eventsourcing `Application` with
`snapshotting_intervals = {LongRun: 100}` on the same store kind, whose aggregate has the
same L events and one snapshot at its end; each sample gets the aggregate (the latest
snapshot plus the events after it), triggers one event and saves it, taking a snapshot
every 100 events as the library does.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from bench.common import PG_URL, drop_schemas, emit
from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessStopped,
    RunCheckpointed,
    RunQueued,
    RunStarted,
    Status,
    process_stream,
    run_stream,
)
from epochledger.ledger.store import Append, Store

T0 = datetime(2026, 9, 9, tzinfo=UTC)
CHUNK = 10_000


def build_run(store: Store, run: str, length: int) -> None:
    """A run of `length` events: queued, started, then checkpoints (bulk appends)."""
    stream = run_stream(run)
    pending: list[Append] = []
    for v in range(1, length + 1):
        at = T0 + timedelta(milliseconds=v)
        if v == 1:
            e: Any = RunQueued(at=at, run=run, status=Status.QUEUED, workflow="nightly", process="worker-1")
        elif v == 2:
            e = RunStarted(at=at, run=run, status=Status.RUNNING, process="worker-1")
        else:
            e = RunCheckpointed(at=at, run=run, status=Status.RUNNING, node=f"n{v % 17}", ref=f"ckpt/{v}")
        pending.append(Append(stream, v, e))
        if len(pending) == CHUNK:
            store.append(pending)
            pending = []
    if pending:
        store.append(pending)


def build_slot(store: Store, slot: str, epochs: int) -> None:
    """A slot that booted `epochs` epochs, each but the last stopped cleanly."""
    stream = process_stream(slot)
    pending: list[Append] = []
    version = 0
    for i in range(epochs):
        at = T0 + timedelta(seconds=i)
        events: list[Any] = [ProcessBooted(at=at, process=slot, epoch=f"{slot}.e{i}", booted_at=at, host="h", pid=1)]
        if i < epochs - 1:
            events.append(ProcessStopped(at=at + timedelta(milliseconds=500), process=slot, epoch=f"{slot}.e{i}"))
        for e in events:
            version += 1
            pending.append(Append(stream, version, e))
        if len(pending) >= CHUNK:
            store.append(pending)
            pending = []
    if pending:
        store.append(pending)


class LongRun(Aggregate):
    """The library's own model of a long run: one event per checkpoint."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.checkpoints = 0
        self.ref = ""

    @event("Checkpointed")
    def checkpoint(self, node: str, ref: str) -> None:
        self.checkpoints += 1
        self.ref = ref


class Snapshotting(Application[UUID]):
    snapshotting_intervals = {LongRun: 100}


def library_series(env_for: Callable[[int], dict[str, str]], lengths: list[int]) -> list[Series]:
    """One snapshotting application per length, its aggregate holding L events (saved in
    chunks of CHUNK; a snapshot at every 100th version and one at its end), measured like the ledger's
    checkpoint: one event per transaction."""
    series = []
    for length in lengths:
        app = Snapshotting(env=env_for(length))
        agg = LongRun(run="long")  # its creation is event 1
        for v in range(2, length + 1):
            agg.checkpoint(node=f"n{v % 17}", ref=f"ckpt/{v}")
            if v % CHUNK == 0:
                app.save(agg)
        app.save(agg)  # the library snapshots each 100th version as it saves
        if length % 100:
            app.take_snapshot(agg.id)  # and one at the end, so a get reads no events

        def op(i: int, app: Snapshotting = app, agg_id: UUID = agg.id) -> None:
            got = app.repository.get(agg_id)
            got.checkpoint(node="step", ref=f"bench/{i}")
            app.save(got)

        series.append(Series(length, None, op))
    return series


def raw_sqlite_batch1(path: str, n: int, payload: bytes) -> float:
    """Seconds per one-row transaction, raw sqlite3, WAL, synchronous FULL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id TEXT, v INT, topic TEXT, state BLOB, PRIMARY KEY (id, v))")
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (?, ?, 'run.checkpointed', ?)", ("run:raw", i + 1, payload))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t0)
    conn.close()
    return statistics.median(times)


class Series:
    """One measured operation at one size: its ledger and its samples."""

    def __init__(self, size: int, ledger: Ledger | None, op: Callable[[int], None]):
        self.size, self.ledger, self.op = size, ledger, op
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.first_write_s = 0.0

    def sample(self, i: int) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.op(i)
        self.cpu.append(time.process_time() - c)
        self.wall.append(time.perf_counter() - w)


def measure_together(groups: dict[str, list[Series]], samples: int) -> dict[str, dict[str, Any]]:
    """Each group's series sampled round-robin with every other group's, so an anchor
    and the figures it anchors see the same machine noise; each group's ratios are to
    its own smallest size."""
    every = [s for group in groups.values() for s in group]
    for s in every:  # the cold first write: one fold of the whole stream, then cached
        w = time.perf_counter()
        s.op(-1)
        s.first_write_s = time.perf_counter() - w
    for i in range(samples):
        for s in every:
            s.sample(i)
    return {name: _summary(group) for name, group in groups.items()}


def _summary(series: list[Series]) -> dict[str, Any]:
    base_wall = statistics.median(series[0].wall)
    base_cpu = statistics.median(series[0].cpu)
    out: dict[str, Any] = {}
    for s in series:
        wall, cpu = statistics.median(s.wall), statistics.median(s.cpu)
        out[str(s.size)] = {
            "median_ms": round(wall * 1000, 3),
            "cpu_median_ms": round(cpu * 1000, 3),
            "ratio_to_smallest": round(wall / base_wall, 2),
            "cpu_ratio_to_smallest": round(cpu / base_cpu, 2) if base_cpu > 0 else None,
            "first_write_s": round(s.first_write_s, 4),
        }
    worst = max(v["ratio_to_smallest"] for v in out.values())
    out["worst_ratio"] = worst
    out["goal_ratio_at_most"] = 1.3
    return out


def measure(series: list[Series], samples: int) -> dict[str, Any]:
    return measure_together({"only": series}, samples)["only"]


def open_sized(url: str) -> Ledger:
    return open_ledger(url, clock=ManualClock(T0 + timedelta(days=30), uptime=5))


def run_store(
    kind: str,
    urls: Callable[[str], str],
    lengths: list[int],
    epochs: list[int],
    samples: int,
    library_env: Callable[[int], dict[str, str]],
) -> dict[str, Any]:
    ledgers: list[Ledger] = []
    result: dict[str, Any] = {}
    try:
        # append: a checkpoint on a run of L events
        t0 = time.perf_counter()
        series = []
        for length in lengths:
            lg = open_sized(urls(f"run{length}"))
            ledgers.append(lg)
            build_run(lg._store, "long", length)

            def checkpoint(i: int, lg: Ledger = lg) -> None:
                lg.checkpoint("long", "step", f"bench/{i}")

            series.append(Series(length, lg, checkpoint))
        result["build_runs_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        library = library_series(library_env, lengths)
        result["build_library_s"] = round(time.perf_counter() - t0, 2)
        together = measure_together({"append": series, "library_snapshotting": library}, samples)
        result.update(together)
        result["append_vs_library_snapshotting"] = {
            str(n): round(
                together["append"][str(n)]["median_ms"] / together["library_snapshotting"][str(n)]["median_ms"], 2
            )
            for n in lengths
        }
        for lg in ledgers:
            lg.close()
        ledgers.clear()

        # queue+start naming the live epoch, and boot, on a slot of N epochs
        t0 = time.perf_counter()
        starts, boots = [], []
        for n in epochs:
            lg = open_sized(urls(f"slot{n}"))
            ledgers.append(lg)
            build_slot(lg._store, "worker-1", n)
            build_slot(lg._store, "boot-1", n)
            live = lg.boot("worker-1", epoch="worker-1.live", host="h", pid=2)

            def queue_start(i: int, lg: Ledger = lg, live: Any = live) -> None:
                run = f"q{i}"
                lg.queue(run, process="worker-1")
                lg.start(run, epoch=live)

            def boot(i: int, lg: Ledger = lg) -> None:
                lg.boot("boot-1", epoch=f"boot-1.b{i}", host="h", pid=3)

            starts.append(Series(n, lg, queue_start))
            boots.append(Series(n, lg, boot))
        result["build_slots_s"] = round(time.perf_counter() - t0, 2)
        result["queue_start"] = measure(starts, samples)
        result["boot"] = measure(boots, samples)
    finally:
        for lg in ledgers:
            lg.close()
    result["store"] = kind
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.growth")
    p.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--lengths", default="10,1000,10000,100000")
    p.add_argument("--epochs", default="10,1000,10000,20000")
    ns = p.parse_args(argv)
    lengths = [int(x) for x in ns.lengths.split(",")]
    epochs = [int(x) for x in ns.epochs.split(",")]
    result: dict[str, Any] = {"bench": "growth", "samples": ns.samples, "lengths": lengths, "epochs": epochs}
    from epochledger.ledger import codec

    payload = codec.encode(RunCheckpointed(at=T0, run="long", status=Status.RUNNING, node="step", ref="bench/1"))
    with tempfile.TemporaryDirectory() as tmp:
        result["anchor_raw_sqlite3_batch1_ms"] = round(
            raw_sqlite_batch1(os.path.join(tmp, "raw.db"), 200, payload) * 1000, 3
        )
        if ns.store in ("sqlite", "both"):
            result["sqlite"] = run_store(
                "sqlite",
                lambda name: f"sqlite:///{tmp}/{name}.db",
                lengths,
                epochs,
                ns.samples,
                lambda n: {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": f"{tmp}/library{n}.db"},
            )
    if ns.store in ("postgresql", "both"):
        import psycopg

        prefix = "bench_growth_" + uuid.uuid4().hex[:6]
        made: list[str] = []

        def pg(name: str) -> str:
            made.append(f"{prefix}_{name}")
            return f"{PG_URL}?schema={prefix}_{name}"

        def library_pg(n: int) -> dict[str, str]:
            schema = f"{prefix}_library{n}"
            made.append(schema)
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            url = urlsplit(PG_URL)
            return {
                "PERSISTENCE_MODULE": "eventsourcing.postgres",
                "POSTGRES_DBNAME": url.path.lstrip("/"),
                "POSTGRES_HOST": url.hostname or "127.0.0.1",
                "POSTGRES_PORT": str(url.port or 5432),
                "POSTGRES_USER": url.username or "postgres",
                "POSTGRES_PASSWORD": url.password or "x",
                "POSTGRES_SCHEMA": schema,
            }

        try:
            result["postgresql"] = run_store("postgresql", pg, lengths, epochs, ns.samples, library_pg)
        finally:
            drop_schemas(made)
    emit(result)
    return result


if __name__ == "__main__":
    main()
