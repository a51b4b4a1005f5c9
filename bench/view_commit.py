"""What a catch-up of the views holds the process's writers for (rule R3; docs/benchmarks.md,
"The service over HTTP", fourth round). Prints one JSON line.

Each round appends `--events` run.queued events in one group commit, then catches every
registered view up (engine.catch_up_all, what the server's follower runs every 0.5 s on
SQLite), taking turns between the two ways a view's commit can end: not waited onto
the disk (the code's, `durable=False`) and, as the anchor in the same run on the same
store, every view's commit waited onto it (each write transaction made durable, as
before). Per catch-up: its wall time, its CPU time, how many write transactions it
made, and how long they held the writers' lock (SQLite: the process's lock an append
takes, ledger/store/sqlite.py; PostgreSQL: the time inside its transactions). Medians.

    .venv/bin/python -m bench.view_commit sqlite --rounds 21
    .venv/bin/python -m bench.view_commit postgresql --rounds 21   # needs the test server
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import PG_URL, drop_schemas
from epochledger import open_ledger
from epochledger.projections import engine


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.view_commit")
    p.add_argument("store", choices=["sqlite", "postgresql"])
    p.add_argument("--rounds", type=int, default=21, help="catch-ups of each kind, taking turns")
    p.add_argument("--events", type=int, default=1000, help="events appended before each catch-up")
    ns = p.parse_args(argv)
    if ns.rounds < 1 or not 1 <= ns.events <= 100_000:
        p.error("--rounds at least 1, --events from 1 to 100,000")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if ns.store == "sqlite" else f"{PG_URL}?schema={schema}"
    open_ledger(url, init=True).close()
    figures: dict[str, dict[str, list[float]]] = {
        kind: {"wall_ms": [], "cpu_ms": [], "held_ms": [], "commits": []} for kind in ("lazy", "durable")
    }
    try:
        with open_ledger(url) as ledger:
            store = ledger._store
            real = store.transaction
            held: list[float] = []
            forced = [False]

            @contextmanager
            def timed(commit: bool = True, *, durable: bool = True) -> Iterator[Any]:
                # The anchor makes every write durable. Each write is timed whole, its
                # COMMIT included: one thread, so the lock is never waited for here.
                t0 = time.perf_counter()
                try:
                    with real(commit, durable=durable or forced[0]) as cur:
                        yield cur
                finally:
                    if commit:
                        held.append(time.perf_counter() - t0)

            store.transaction = timed  # type: ignore[method-assign]
            engine.catch_up_all(store)
            for r in range(2 * ns.rounds):
                kind = "durable" if r % 2 else "lazy"
                with ledger.batch() as b:
                    for i in range(ns.events):
                        b.queue(f"v{r}-{i}", workflow="nightly")
                forced[0] = kind == "durable"
                held.clear()
                c0, t0 = time.thread_time(), time.perf_counter()
                engine.catch_up_all(store)
                f = figures[kind]
                f["wall_ms"].append((time.perf_counter() - t0) * 1000)
                f["cpu_ms"].append((time.thread_time() - c0) * 1000)
                f["held_ms"].append(sum(held) * 1000)
                f["commits"].append(len(held))
    finally:
        if ns.store == "postgresql":
            drop_schemas([schema])
    med = {kind: {k: round(statistics.median(v), 2) for k, v in f.items()} for kind, f in figures.items()}
    print(
        json.dumps(
            {
                "bench": "view_commit",
                "store": ns.store,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "events_per_catch_up": ns.events,
                "rounds": ns.rounds,
                "anchor_durable": med["durable"],
                "lazy": med["lazy"],
                "ratio_held": round(med["lazy"]["held_ms"] / med["durable"]["held_ms"], 2),
                "ratio_wall": round(med["lazy"]["wall_ms"] / med["durable"]["wall_ms"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
