"""The Celery adapter's cost per task (rule E1; docs/benchmarks.md, "The Celery adapter's
cost per task"): `tasks` tiny tasks (`add`) run through Celery's own tracer (the code a
pool child runs for each task: task_prerun, the task, task_success, task_postrun), in
one process that is a pool child as far as the adapter knows (its slot booted, its
spool's writer thread running, SQLite store), beside the same tasks without the
adapter, in the same run.

    python -m bench.adapter_cost [--tasks 2000] [--rounds 5] [--fsync batch|always]

Two figures a task, each the median over rounds that alternate the two modes:
- hot: the tasks' wall time while the writer thread imports behind them (what a task
  waits for: the handlers' appends, and the writer's share of the interpreter);
- drained: until the ledger holds every transition (`Spool.flush`): the whole cost,
  the store's writes included, as if nothing overlapped them.
Goal: at most 2 ms added per task (hot). No broker: Celery's tracer is called the way
the prefork pool calls it (`app.tasks[name].apply`, which runs the same tracer in the
calling process), so the broker's round trip, the same with and without, is out.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from bench.common import emit

GOAL_MS = 2.0


def one_round(tasks: int, adapter: bool, fsync: str) -> dict[str, float]:
    from celery import Celery

    from epochledger import open_ledger
    from epochledger.adapters.celery import CeleryAdapter

    app = Celery("adapter_cost", broker="memory://", set_as_current=False)

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    tmp = tempfile.mkdtemp(prefix="epochledger-adapter-cost-")
    store = f"sqlite:///{tmp}/ledger.db"
    open_ledger(store).close()  # the store exists, as a deployment's does
    found: CeleryAdapter | None = None
    if adapter:
        found = CeleryAdapter(store, f"{tmp}/spool", fsync=fsync).connect()  # type: ignore[arg-type]
        found.node = "bench@host"
        found.on_child_init()
        assert found.spool is not None and found.spool.flush(30)
    add.apply((0, 0))  # warm: the tracer built, the first write done
    if found is not None:
        assert found.spool is not None and found.spool.flush(30)
    t0 = time.perf_counter()
    for i in range(tasks):
        add.apply((i, i))
    hot = time.perf_counter() - t0
    out = {"hot_ms_per_task": round(hot / tasks * 1000, 4)}
    if found is not None:
        assert found.spool is not None
        assert found.spool.flush(600)
        drained = time.perf_counter() - t0
        out["drained_ms_per_task"] = round(drained / tasks * 1000, 4)
        ledger = open_ledger(store)
        assert sum(1 for r in ledger.runs() if r.status.value == "finished") == tasks + 1
        ledger.close()
        found.disconnect()
    else:
        out["drained_ms_per_task"] = out["hot_ms_per_task"]
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.adapter_cost")
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--fsync", choices=["batch", "always"], default="batch")
    ns = p.parse_args(argv)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for r in range(ns.rounds):
        for adapter in (False, True) if r % 2 == 0 else (True, False):
            results[adapter].append(one_round(ns.tasks, adapter, ns.fsync))

    def med(adapter: bool, key: str) -> float:
        return round(statistics.median(x[key] for x in results[adapter]), 4)

    added = round(med(True, "hot_ms_per_task") - med(False, "hot_ms_per_task"), 4)
    out: dict[str, Any] = {
        "bench": "adapter_cost",
        "store": "sqlite",
        "fsync": ns.fsync,
        "tasks": ns.tasks,
        "rounds": ns.rounds,
        "without_ms_per_task": med(False, "hot_ms_per_task"),
        "with_hot_ms_per_task": med(True, "hot_ms_per_task"),
        "with_drained_ms_per_task": med(True, "drained_ms_per_task"),
        "added_hot_ms_per_task": added,
        "added_drained_ms_per_task": round(med(True, "drained_ms_per_task") - med(False, "hot_ms_per_task"), 4),
        "goal_ms": GOAL_MS,
        "raw": {"without": results[False], "with": results[True]},
    }
    emit(out)


if __name__ == "__main__":
    main()
