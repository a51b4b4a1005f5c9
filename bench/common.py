"""Shared pieces of the benchmarks: a fast, realistic history generator and timing.

The history goes through the store adapter's append (group commit, the catalogue's own
encoding) with events built from the catalogue's classes, stamped with the status and
code `decide` would give them; it skips `decide` only to be fast (the write path's own
speed is bench/append.py's subject).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from epochledger.ledger.events import RunCheckpointed, RunFailed, RunFinished, RunQueued, RunStarted, Status, run_stream
from epochledger.ledger.store import Append, Store, open_store

T0 = datetime(2026, 9, 9, 0, 0, tzinfo=UTC)
PG_URL = os.environ.get("EPOCHLEDGER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def run_events(i: int, step: int, at: datetime, per_run: int) -> Any:
    run = f"run-{i:07d}"
    last = per_run - 1
    if step == 0:
        return RunQueued(
            at=at,
            run=run,
            status=Status.QUEUED,
            workflow=("nightly", "hourly", "report")[i % 3],
            process=f"worker-{i % 4}",
            actor="api-1",
        )
    if step == 1:
        return RunStarted(
            at=at, run=run, status=Status.RUNNING, epoch=f"worker-{i % 4}.e1", process=f"worker-{i % 4}", actor="worker"
        )
    if step < last:
        return RunCheckpointed(
            at=at, run=run, status=Status.RUNNING, node=f"step-{step}", ref=f"ckpt/{run}/{step}", actor="worker"
        )
    if i % 7 == 0:
        return RunFailed(
            at=at,
            run=run,
            status=Status.FAILED_RESUMABLE,
            code=("TIMEOUT", "")[i % 2],
            resumable=True,
            error="step exceeded its budget",
            actor="worker",
        )
    return RunFinished(at=at, run=run, status=Status.FINISHED, actor="worker")


def make_history(
    store: Store, runs: int, per_run: int = 5, window: int = 1000, log: Callable[[str], None] | None = None
) -> int:
    """`runs` runs of `per_run` events each (queued, started, checkpoints, an end),
    interleaved across a window of concurrent runs; one transaction per step of a
    window (`window` events). Returns the number of events appended."""
    assert per_run >= 3
    n = 0
    at = T0
    for base in range(0, runs, window):
        ids = range(base, min(runs, base + window))
        for step in range(per_run):
            at += timedelta(milliseconds=1)
            appends = [Append(run_stream(f"run-{i:07d}"), step + 1, run_events(i, step, at, per_run)) for i in ids]
            # Each stream's previous version was appended by this loop, to this store:
            # `verified` skips re-reading it (Store.append), half of a build's time.
            store.append(appends, verified={a.stream for a in appends} if step else ())
            n += len(ids)
        if log is not None and (base // window) % 100 == 0:
            log(f"  {n} events")
    return n


def sqlite_file(path: str, runs: int, per_run: int = 5) -> str:
    """A prepared SQLite history, reused across runs of the benchmarks (the generator
    is slower than what is measured). Regenerated if missing."""
    marker = f"{path}.ok"
    if not (os.path.exists(path) and os.path.exists(marker)):
        for suffix in ("", "-wal", "-shm", ".ok"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        store = open_store(path)
        make_history(store, runs, per_run, log=lambda m: print(m, file=sys.stderr))
        store.close()
        with open(marker, "w") as f:
            f.write(f"{runs} {per_run}\n")
    return "sqlite:///" + os.path.abspath(path)


def drop_schemas(schemas: Iterable[str], url: str = PG_URL) -> None:
    """Drop a benchmark's PostgreSQL schemas, with everything in them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pg_schema(name: str, runs: int, per_run: int = 5) -> str:
    import psycopg

    url = f"{PG_URL}?schema={name}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        ok = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema=%s AND table_name='bench_ok'", (name,)
        ).fetchone()[0]
        if ok:
            return url
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    store = open_store(url)
    make_history(store, runs, per_run)
    store.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{name}".bench_ok (x int)')
    return url


def timed(f: Callable[[], Any], repeat: int) -> tuple[float, list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


def baseline_tree(rev: str | None, marker: str) -> str:
    """A `git archive` of `rev` (default: where this branch left main) in /tmp, made once
    and reused: the base commit's code, run in a child process beside the candidate's in
    the same benchmark (`marker`: a file the tree must hold, relative to its root)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if rev is None:
        rev = subprocess.run(
            ["git", "merge-base", "HEAD", "main"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = f"/tmp/epochledger-baseline-{sha}"
    if not os.path.exists(os.path.join(tree, marker)):
        os.makedirs(tree, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=root, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    return tree
