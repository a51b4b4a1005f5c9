"""What the tick driver's group commit buys (docs/tick.md, "How the tick's events are
written"). Prints one JSON line; the anchor (the same tick events appended one
transaction each, through `Ledger.submit`) is measured in the same run, same store,
and so is a healthy tick without step deadlines (rule T5), the anchor of their cost.

    .venv/bin/python -m bench.tick_commit sqlite 1000
    .venv/bin/python -m bench.tick_commit postgresql 1000   # needs the test server
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
from epochledger.ledger.events import RunTickFailed
from epochledger.tick import TickDriver

PG = os.environ.get("EPOCHLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def median_of(n: int, f) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 4)


def main(kind: str, n: int) -> dict:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if kind == "sqlite" else f"{PG}?schema={schema}"
    clock = ManualClock(datetime(2026, 9, 9, 14, tzinfo=UTC))
    res: dict = {"store": kind, "active_runs": n}
    try:
        with open_ledger(url, clock=clock) as lg:
            epoch = lg.boot("scheduler")  # a tick is bound to its epoch (rule F1)
            with lg.batch() as b:
                for i in range(n):
                    b.queue(f"r{i:05d}", process="scheduler")
                    b.start(f"r{i:05d}", epoch=epoch)

            def boom(s):
                raise ValueError("x")

            healthy = TickDriver(lg, {"advance": lambda s: None}, epoch=epoch)
            failing = TickDriver(lg, {"advance": boom}, epoch=epoch, tick_failure_deadline=10**9)
            res["healthy_tick_s"] = median_of(5, healthy.tick)
            # The anchor of the step deadline's cost (rule T5): the same healthy tick with
            # its steps run in the caller's thread, no hand-off to the worker.
            inline = TickDriver(lg, {"advance": lambda s: None}, epoch=epoch, step_deadline=None)
            res["healthy_tick_no_step_deadline_s"] = median_of(5, inline.tick)
            res["step_deadline_cost_per_step_us"] = round(
                (res["healthy_tick_s"] - res["healthy_tick_no_step_deadline_s"]) / n * 1e6, 1
            )

            def fail_tick() -> None:
                clock.advance(1)
                assert failing.tick().appended == n

            res["all_failing_tick_group_commit_s"] = median_of(3, fail_tick)
            k = [0]

            def per_run() -> None:
                k[0] += 1
                for s in states:
                    lg.submit(
                        RunTickFailed(
                            at=clock.now(),
                            run=s.run,
                            tick=f"x{k[0]}",
                            step="advance",
                            error_class="ValueError",
                            error="x",
                        )
                    )

            states = lg.runs()
            res["anchor_per_run_appends_only_s"] = median_of(3, per_run)
            res["listing_only_s"] = median_of(3, lg.runs)
            res["events_in_log"] = lg._store.max_position()
    finally:
        if kind != "sqlite":
            drop_schemas([schema], PG)
    return res


if __name__ == "__main__":
    print(
        json.dumps(
            main(sys.argv[1] if len(sys.argv) > 1 else "sqlite", int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
        )
    )
