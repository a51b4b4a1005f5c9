"""What `whatif` (rule R4) and `timeline` (rule V1) cost on a long history. Prints one
JSON line. Anchor measured in the same run, on the same store: `replay` of the whole log
(every view folded, `replay.state_at`), the read-and-fold both commands start from.

    .venv/bin/python -m bench.forensics --runs 20000 --boots 20

The history: `runs` runs of 5 events (bench/common.py), four worker slots, then `boots`
redeploys spread over the log, each with its startup sweep (so each is a decision point
that judges every run of the fleet).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta

from bench.common import T0, run_events
from epochledger import ManualClock, open_ledger
from epochledger.ledger.events import run_stream
from epochledger.ledger.store import Append
from epochledger.replay import state_at, timeline, whatif


def _history(path: str, runs: int, boots: int) -> int:
    clock = ManualClock(T0 - timedelta(hours=1), uptime=5)
    with open_ledger(path, clock=clock) as lg:
        for w in range(4):
            lg.boot(f"worker-{w}", epoch=f"worker-{w}.e1")
        step = max(1, runs // max(boots, 1))
        done = 0
        for k in range(boots):
            _runs(lg._store, done, step)
            done += step
            clock.restart(1)
            lg.startup(f"worker-{k % 4}", epoch=f"worker-{k % 4}.e{k + 2}")
        if done < runs:
            _runs(lg._store, done, runs - done)
        return lg._store.max_position()


def _runs(store, base: int, count: int, per_run: int = 5, window: int = 1000) -> None:
    """bench/common.py's runs, with ids from `base` on (common.make_history starts at 0)."""
    at = T0 + timedelta(seconds=base)
    for start in range(base, base + count, window):
        ids = range(start, min(base + count, start + window))
        for step in range(per_run):
            at += timedelta(milliseconds=1)
            store.append([Append(run_stream(f"run-{i:07d}"), step + 1, run_events(i, step, at, per_run)) for i in ids])


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) if repeat < 3 else statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="bench/forensics.py")
    p.add_argument("--runs", type=int, default=20000)
    p.add_argument("--boots", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    ns = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.db")
        events = _history(path, ns.runs, ns.boots)
        with open_ledger(path, create=False) as lg:
            anchor = _best(lambda: state_at(lg._store), ns.repeat)
            result = {}
            for policy in ("epoch", "flat-age:30m", "heartbeat:10m"):
                result[policy] = round(_best(lambda policy=policy: whatif.whatif(lg._store, policy), ns.repeat), 3)
            sweeps = whatif.whatif(lg._store, "epoch").sweeps
            page_s = _best(lambda: timeline.page(lg._store), ns.repeat)
            page_bytes = len(timeline.page(lg._store).encode())
    out = {
        "benchmark": "forensics",
        "runs": ns.runs,
        "events": events,
        "sweeps": sweeps,
        "anchor_replay_s": round(anchor, 3),
        "whatif_s": result,
        "timeline_s": round(page_s, 3),
        "timeline_bytes": page_bytes,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
