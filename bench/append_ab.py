"""The write path against a base commit, by CPU time as well as the wall clock (issue 12,
"The hot path and group commit"): child processes alternating base and this tree, so
the shared machine's swings fall on both alike.

    python -m bench.append_ab [--rounds 6] [--baseline REV] [--store sqlite|postgresql|both]

Each child measures, on a fresh store, with `time.process_time()` (user + system CPU of
the child: a single write's includes its fsync's kernel time) and `time.perf_counter()`:

- single: `queue` of a new run, then `checkpoint` of a run whose state is cached, one
  transaction each (`--single` of each, SQLite only: the per-transaction goal is
  against raw sqlite3);
- group: commits of 1,000 `queue`s of new runs after `prefetch`, and of 1,000
  `checkpoint`s of 1,000 cached runs after `prefetch` (`--batches` of each).

`--dir /dev/shm` puts the SQLite files in memory: no fsync, so a single write's CPU is
the write path's alone, without the disk's kernel time (which swings with the other
sessions' use of the disk). Prints per-event medians over the rounds and the ratio base / this tree (> 1: this
tree is cheaper). `--baseline` defaults to where this branch left main.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid

from bench.common import PG_URL, baseline_tree, drop_schemas, emit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, statistics, sys, tempfile, time, uuid
from datetime import UTC, datetime
import epochledger
from epochledger import ManualClock, open_ledger
from epochledger.ledger.events import run_stream

url, single, batches, where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] or None
T0 = datetime(2026, 9, 9, tzinfo=UTC)
out = {"where": epochledger.__file__}


def timed(f):
    c, w = time.process_time(), time.perf_counter()
    f()
    return time.process_time() - c, time.perf_counter() - w


with tempfile.TemporaryDirectory(dir=where) as tmp:
    url = url.replace("TMP", tmp)
    with open_ledger(url, clock=ManualClock(T0, 1)) as lg:
        tag = uuid.uuid4().hex[:6]
        if single:
            lg.queue(f"warm{tag}")
            lg.start(f"warm{tag}")
            c, w = timed(lambda: [lg.queue(f"q{tag}{i}", workflow="nightly", process="worker-1", actor="api-1")
                                  for i in range(single)])
            out["queue_cpu_us"], out["queue_wall_us"] = c / single * 1e6, w / single * 1e6
            c, w = timed(lambda: [lg.checkpoint(f"warm{tag}", "step", f"ckpt/{i}", actor="worker") for i in range(single)])
            out["checkpoint_cached_cpu_us"], out["checkpoint_cached_wall_us"] = c / single * 1e6, w / single * 1e6
        cpu, wall = [], []
        for b in range(batches):
            def group():
                with lg.batch() as batch:
                    batch.prefetch([run_stream(f"g{tag}{b}-{i}") for i in range(1000)])
                    for i in range(1000):
                        batch.queue(f"g{tag}{b}-{i}", workflow="nightly", process="worker-1", actor="api-1")
            c, w = timed(group)
            cpu.append(c)
            wall.append(w)
        out["group1000_cpu_us"], out["group1000_wall_us"] = statistics.median(cpu) * 1e3, statistics.median(wall) * 1e3
        with lg.batch() as b:
            for i in range(1000):
                b.queue(f"c{tag}-{i}")
                b.start(f"c{tag}-{i}")
        cpu, wall = [], []
        for k in range(batches):
            def cached():
                with lg.batch() as b:
                    b.prefetch([run_stream(f"c{tag}-{i}") for i in range(1000)])
                    for i in range(1000):
                        b.checkpoint(f"c{tag}-{i}", "step", f"ckpt/{k}")
            c, w = timed(cached)
            cpu.append(c)
            wall.append(w)
        out["group1000_cached_cpu_us"] = statistics.median(cpu) * 1e3
        out["group1000_cached_wall_us"] = statistics.median(wall) * 1e3
print(json.dumps(out))
"""


def child(tree: str, url: str, single: int, batches: int, where: str = "") -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(single), str(batches), where],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    where = got.pop("where")
    assert where.startswith(tree), (where, tree)  # the tree meant, not the installed one
    return got


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.append_ab")
    p.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--single", type=int, default=500)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--baseline", default=None, help="the commit to compare with (default: where this branch left main)")
    p.add_argument(
        "--dir",
        default="",
        help="where the SQLite files go (default: the system's temporary directory; "
        "/dev/shm: no fsync, the write path's CPU alone)",
    )
    ns = p.parse_args(argv)
    base = baseline_tree(ns.baseline, "epochledger/app.py")
    trees = {"base": base, "this": ROOT}
    result: dict = {
        "bench": "append_ab",
        "baseline": os.path.basename(base).removeprefix("epochledger-baseline-"),
        "dir": ns.dir or "(temporary directory)",
        "rounds": ns.rounds,
        "single_n": ns.single,
        "batches": ns.batches,
        "load_average_start": [round(x, 1) for x in os.getloadavg()],
    }
    stores = ["sqlite", "postgresql"] if ns.store == "both" else [ns.store]
    schemas: list[str] = []
    try:
        for store in stores:
            got: dict[str, list[dict[str, float]]] = {"base": [], "this": []}
            for r in range(ns.rounds):
                for name in ("base", "this") if r % 2 == 0 else ("this", "base"):
                    if store == "sqlite":
                        url, single = "sqlite:///TMP/ab.db", ns.single
                    else:
                        schemas.append("bench_ab_" + uuid.uuid4().hex[:8])
                        url, single = f"{PG_URL}?schema={schemas[-1]}", 0
                    got[name].append(child(trees[name], url, single, ns.batches, ns.dir if store == "sqlite" else ""))
            section: dict = {}
            for key in got["this"][0]:
                b = statistics.median(x[key] for x in got["base"])
                t = statistics.median(x[key] for x in got["this"])
                section[key] = {"base": round(b, 1), "this": round(t, 1), "base_over_this": round(b / t, 2)}
            for key in ("group1000", "group1000_cached"):
                for kind in ("cpu", "wall"):
                    section[f"{key}_{kind}_events_per_second"] = {
                        name: round(1e6 / section[f"{key}_{kind}_us"][name]) for name in ("base", "this")
                    }
            result[store] = section
    finally:
        drop_schemas(schemas)
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    emit(result)
    return result


if __name__ == "__main__":
    main()
