"""What the startup sweep costs at boot (docs/operations.md, "The sweep"). Prints one
JSON line. Anchors measured in the same run, same store: the fold alone (reading and
folding the log into the orphans view), and the same recoveries appended one
transaction each through `Ledger.submit` instead of one group commit.

    .venv/bin/python -m bench.sweep sqlite 5000
    .venv/bin/python -m bench.sweep postgresql 5000   # needs the test server
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime

from bench.common import drop_schemas
from epochledger import ManualClock, open_ledger
from epochledger.projections import orphans
from epochledger.sweep import _recovery

PG = os.environ.get("EPOCHLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _fleet(url: str, n: int):
    """n running runs of worker-1's epoch e1, then worker-1 reboots as e2."""
    clock = ManualClock(datetime(2026, 9, 9, 2, tzinfo=UTC), uptime=5)
    lg = open_ledger(url, clock=clock)
    lg.boot("worker-1", epoch="e1")
    with lg.batch() as b:
        for i in range(n):
            b.queue(f"r{i:05d}", process="worker-1")
            b.start(f"r{i:05d}", epoch="e1", process="worker-1")
    clock.restart(60)
    return lg, lg.boot("worker-1", epoch="e2")


def main(kind: str, n: int, repeats: int = 3) -> dict:
    res: dict = {"store": kind, "orphans": n}
    sweep_s, fold_s, anchor_s, schemas = [], [], [], []
    for _ in range(repeats):
        for what in ("sweep", "anchor"):
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            schemas.append(schema)
            url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if kind == "sqlite" else f"{PG}?schema={schema}"
            lg, epoch = _fleet(url, n)
            with lg:
                if what == "sweep":
                    t0 = time.perf_counter()
                    report = lg.sweep(epoch)
                    sweep_s.append(time.perf_counter() - t0)
                    assert len(report.recovered) == n
                else:
                    t0 = time.perf_counter()
                    view = orphans.fold(lg.events())
                    me = view.epoch("worker-1", "e2")
                    found = orphans.verdicts(view, me)
                    fold_s.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    for v in found:
                        lg.submit(_recovery(v, lg.clock.now(), "worker-1", "e2"))
                    anchor_s.append(time.perf_counter() - t0)
                res["events_in_log_after"] = lg._store.max_position()
    if kind != "sqlite":
        drop_schemas(schemas, PG)
    res["sweep_group_commit_s"] = round(statistics.median(sweep_s), 4)
    res["anchor_fold_and_verdicts_only_s"] = round(statistics.median(fold_s), 4)
    res["anchor_per_run_appends_only_s"] = round(statistics.median(anchor_s), 4)
    return res


if __name__ == "__main__":
    print(
        json.dumps(
            main(sys.argv[1] if len(sys.argv) > 1 else "sqlite", int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
        )
    )
