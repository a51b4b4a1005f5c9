"""The incidents of docs/rules.md as recorded histories, for what-if (rule R4) and the
timeline (rule V1): each function records one incident through the public API with a
manual clock; `python -m tests.helpers.incident_histories` writes them to tests/golden/*.ndjson
(tests/replay/test_whatif.py checks the files are what these functions record).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.ndjson import export_lines

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden")


def nightly_88(ledger: Ledger, clock: ManualClock) -> None:
    """A healthy nightly on worker-1, 88 minutes in and checkpointing, when worker-2 is
    redeployed at 14:29:19; worker-2's sweep recovers its own 1-minute-old orphan. The
    nightly finishes at 14:40."""
    ledger.boot("worker-1", epoch="w1.e1", host="sched-a", pid=101, actor="systemd")
    ledger.boot("worker-2", epoch="w2.e1", host="sched-b", pid=201, actor="systemd")
    clock.advance(60)  # 13:01:19
    ledger.queue("nightly", workflow="nightly-etl", process="worker-1", actor="api-1")
    ledger.start("nightly", epoch="w1.e1", process="worker-1", actor="w1.e1")
    for i, node in enumerate(["extract", "transform", "load", "publish"]):
        clock.advance(20 * 60)  # 13:21:19, 13:41:19, 14:01:19, 14:21:19
        ledger.checkpoint("nightly", node, f"ckpt/nightly/{i + 1}", epoch="w1.e1", actor="w1.e1")
    clock.advance(6 * 60)  # 14:27:19
    ledger.queue("young", workflow="hourly-sync", process="worker-2", actor="api-1")
    ledger.start("young", epoch="w2.e1", process="worker-2", actor="w2.e1")
    clock.advance(120)  # 14:29:19
    clock.restart(2)
    ledger.startup("worker-2", epoch="w2.e2", host="sched-b", pid=202, actor="deploy")
    clock.advance(10 * 60)  # 14:39:19
    ledger.finish("nightly", epoch="w1.e1", actor="w1.e1")


def redeploy_0220(ledger: Ledger, clock: ManualClock) -> None:
    """Runs started at 02:00 on worker-1 (one naming its epoch, one not), a redeploy at
    02:20 whose sweep recovers both; at 03:00 api-1 restarts and sweeps; the history ends
    at 03:30."""
    ledger.boot("worker-1", epoch="w1.e1", host="sched-a", pid=101, actor="systemd")
    ledger.boot("api-1", epoch="api.e1", host="sched-a", pid=100, actor="systemd")
    clock.advance(3600 - 5)  # 02:00:00
    ledger.queue("owned-0200", workflow="nightly-etl", process="worker-1", actor="api-1")
    ledger.start("owned-0200", epoch="w1.e1", process="worker-1", actor="w1.e1")
    ledger.queue("unowned-0200", workflow="report", process="worker-1", actor="api-1")
    ledger.start("unowned-0200", process="worker-1", actor="w1.e1")
    clock.advance(20 * 60)  # 02:20:00
    clock.restart(1)
    ledger.startup("worker-1", epoch="w1.e2", host="sched-a", pid=102, actor="deploy")
    clock.advance(40 * 60)  # 03:00:00
    clock.restart(1)
    ledger.startup("api-1", epoch="api.e2", host="sched-a", pid=103, actor="deploy")
    clock.advance(30 * 60)  # 03:30:00
    ledger.queue("later", workflow="report", process="worker-1", actor="api-1")


def clock_step(ledger: Ledger, clock: ManualClock) -> None:
    """worker-1 is redeployed at 10:10; NTP then steps the wall clock back an hour; the
    new process starts a run (naming no epoch) before its sweep runs, so the sweep reads
    a clock earlier than its own boot instant: it recovers the old epoch's run (O2) and
    skips the time fallback. The live run finishes at 09:40 (stepped-back time)."""
    ledger.boot("worker-1", epoch="w1.e1", host="sched-a", pid=101, actor="systemd")
    ledger.queue("owned", workflow="nightly-etl", process="worker-1", actor="api-1")
    ledger.start("owned", epoch="w1.e1", process="worker-1", actor="w1.e1")
    clock.advance(600)  # 10:10:00
    clock.restart(0)
    booted = ledger.boot("worker-1", epoch="w1.e2", host="sched-a", pid=102, actor="deploy")
    clock.step_wall(-3600)  # 09:10:00
    ledger.queue("after-step", workflow="report", process="worker-1", actor="api-1")
    ledger.start("after-step", process="worker-1", actor="w1.e2")
    clock.advance(30)
    ledger.sweep(booted)
    clock.advance(30 * 60)  # 09:40:30
    ledger.checkpoint("after-step", "load", "ckpt/after-step/1", actor="w1.e2")
    ledger.finish("after-step", actor="w1.e2")


INCIDENTS: dict[str, tuple[Callable[[Ledger, ManualClock], None], datetime]] = {
    "whatif_nightly_88": (nightly_88, datetime(2026, 9, 9, 13, 0, 19, tzinfo=UTC)),
    "whatif_redeploy_0220": (redeploy_0220, datetime(2026, 9, 9, 1, 0, 5, tzinfo=UTC)),
    "whatif_clock_step": (clock_step, datetime(2026, 9, 9, 10, 0, 0, tzinfo=UTC)),
}


def record(name: str) -> bytes:
    """The incident's history as NDJSON, recorded afresh."""
    fn, start = INCIDENTS[name]
    clock = ManualClock(start, uptime=10.0)
    with tempfile.TemporaryDirectory() as d, open_ledger(os.path.join(d, "l.db"), clock=clock) as ledger:
        fn(ledger, clock)
        return b"".join(export_lines(ledger))


def path(name: str) -> str:
    return os.path.join(GOLDEN, name + ".ndjson")


if __name__ == "__main__":
    for name in INCIDENTS:
        with open(path(name), "wb") as f:
            f.write(record(name))
        print("wrote", path(name), file=sys.stderr)
