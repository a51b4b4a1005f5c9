"""The adapters' cost per task (rule E1; docs/benchmarks.md, "The adapters' cost per
task"): `tasks` tiny tasks, each through the adapter's hooks the way its orchestrator
calls them, beside the same tasks without the adapter, in the same run (the anchor).

    python -m bench.adapter_cost [--adapter celery|airflow|prefect] [--tasks 2000] [--rounds 5] [--fsync batch|always]

- celery: `add` through Celery's own tracer (the code a pool child runs for each task:
  task_prerun, the task, task_success, task_postrun), in one process that is a pool
  child as far as the adapter knows (its slot booted, its spool's writer thread
  running). No broker: Celery's tracer is called the way the prefork pool calls it
  (`app.tasks[name].apply`, which runs the same tracer in the calling process), so the
  broker's round trip, the same with and without, is out.
- airflow: each task is one try in a task runner of its own, as Airflow runs it: a
  process forked for the try (its own pid, so its own slot and spool), making the
  Recorder calls the plugin makes for it, one per hook (`on_starting`: the runner's
  boot and its spool opened; `on_task_instance_running`; the task; `..._success`;
  `before_stopping`: the runner's stop, then its spool drained and closed, bounded by
  2 s, or, while a watcher holds the directory's watch, left to its reap, which the
  bench then does, untimed, as the watcher's next round would), once with no watcher and
  once with one. Airflow's hook dispatch and the plugin's reads of Airflow's objects are
  not in it (no Airflow in this venv); neither is the fork and the task runner's
  execution API calls, the same with and without, nor the imports (done before the fork).
- prefect: a real flow run of `add` on Prefect's ephemeral API (a server process
  started for the run), with the adapter's hooks (`on_running`, `on_completion`) and
  without, in one process (its spool opened once, as in a flow process or a runner);
  and, beside the flow runs' wall time, the time Prefect's engine spends in the
  flow's hooks (`hooks_ms_per_task`, see `prefect_round`), and within it the adapter's
  own hook functions, their wall time and their thread's CPU time. The anchor's flow
  has hooks of the same names that do nothing: Prefect's cost of running a flow's
  hooks at all is in the anchor too.

Two figures a task, each the median over rounds that alternate the two modes:
- hot: the tasks' wall time while the writer thread imports behind them (what a task
  waits for: the hooks' appends, and the writer's share of the interpreter). For
  Airflow, up to the try's outcome in its spool, before the runner's stop;
- drained: until the ledger holds every transition (`Spool.flush`): the whole cost,
  the store's writes included, as if nothing overlapped them. For Airflow, up to the
  end of `before_stopping` with no watcher on the host, which waits for the runner's
  spool to drain: a task runner's exit waits for its store's commit;
- watched exit (Airflow): up to the end of `before_stopping` while the scheduler's
  watcher holds the spool directory's watch: the runner's spool flushed to disk and
  left to the watcher's reap (the lines land behind it, untimed).
Goal: at most 2 ms added per task (hot).
"""

from __future__ import annotations

import argparse
import contextlib
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


def airflow_round(tasks: int, adapter: bool, fsync: str) -> dict[str, float]:
    """One task runner per task, as Airflow runs a try (see the module's docstring): each
    try in a process of its own, forked from this one (as Airflow's supervisor forks a
    task runner), so its own pid, its own slot (rule O8) and its own spool, whose writer
    opens the store in that process; its times come back through a pipe. `tasks` tries
    with no watcher on the spool directory (each exit drains its spool), then `tasks`
    tries while a watcher holds the directory's watch (the bench holds it itself, as the
    scheduler's watcher does): each exit leaves its spool, the process ends, and the
    bench reaps the directory (untimed), as the watcher's next round would."""
    import os
    import socket
    import struct

    from epochledger import open_ledger
    from epochledger import spool as spool_mod
    from epochledger.adapters import airflow

    def add(x: int, y: int) -> int:
        return x + y

    tmp = tempfile.mkdtemp(prefix="epochledger-adapter-cost-")
    store = f"sqlite:///{tmp}/ledger.db"
    open_ledger(store).close()

    def one(rec: airflow.Recorder | None, t: airflow.TaskTry, i: int) -> tuple[float, ...]:
        """A task runner's life in a child process: its boot, up to the outcome, up to the
        end of its stop, in seconds of wall time, then the CPU time of its main thread up to
        the outcome (the adapter's own work, without the waits of a loaded host: another
        process's turn on the CPU, the writer thread's). The child never returns into the
        bench."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                t0, c0 = time.perf_counter(), time.thread_time()
                if rec is not None:
                    rec.component_started("task-runner")
                booted = time.perf_counter()
                if rec is not None:
                    rec.task_running(t)
                add(i, i)
                if rec is not None:
                    rec.task_succeeded(t)
                t1, c1 = time.perf_counter(), time.thread_time()
                if rec is not None:
                    rec.component_stopping()
                t2 = time.perf_counter()
                os.write(write, struct.pack("dddd", booted - t0, t1 - t0, t2 - t0, c1 - c0))
            finally:
                os._exit(0)  # the task runner's end: a left writer dies with it
        os.close(write)
        with os.fdopen(read, "rb") as f:
            got = f.read()
        os.waitpid(pid, 0)
        assert len(got) == 32, "a try's process ended without its times"
        return struct.unpack("dddd", got)

    def tries(spool: str, prefix: str, *, watched: bool) -> tuple[float, float, float, float]:
        rec = airflow.Recorder(store, spool=spool, fsync=fsync) if adapter else None  # type: ignore[arg-type]
        boot = hot = ended = cpu = 0.0
        for i in range(tasks + 1):  # the first is the warm-up: the store's first open
            a, b, c, d = one(rec, airflow.TaskTry(dag_id="bench", run_id="r", task_id=f"{prefix}-{i}"), i)
            if i:
                boot, hot, ended, cpu = boot + a, hot + b, ended + c, cpu + d
            if watched and adapter:
                with open_ledger(store) as led:  # untimed: the watcher's round after the runner's end
                    airflow.reap(led, spool, host=socket.gethostname(), epoch=None)
        return boot, hot, ended, cpu

    def finished() -> int:
        with open_ledger(store) as ledger:
            return sum(1 for r in ledger.runs() if r.status.value == "finished")

    boot, hot, drained, cpu = tries(f"{tmp}/spool", "add", watched=False)
    watch = spool_mod.watch(f"{tmp}/spool-watched")
    try:
        _, _, left, _ = tries(f"{tmp}/spool-watched", "left", watched=True)
        if adapter:
            assert not [f for f in os.listdir(f"{tmp}/spool") if f.endswith(".spool")]  # every runner drained
            assert not [f for f in os.listdir(f"{tmp}/spool-watched") if f.endswith(".spool")]  # every one reaped
            assert finished() == 2 * (tasks + 1)  # what the runners left landed
    finally:
        assert watch is not None
        os.close(watch)
    return {
        "boot_ms_per_task": round(boot / tasks * 1000, 4),
        "hot_ms_per_task": round(hot / tasks * 1000, 4),
        "hot_cpu_ms_per_task": round(cpu / tasks * 1000, 4),
        "drained_ms_per_task": round(drained / tasks * 1000, 4),
        "watched_exit_ms_per_task": round(left / tasks * 1000, 4),
    }


def prefect_round(tasks: int, adapter: bool, fsync: str) -> dict[str, float]:
    """Real flow runs on the ephemeral API that `main` started (PREFECT_API_URL). A flow
    run's wall time there is hundreds of milliseconds of API calls, whose noise under
    load is far above the goal: so the time Prefect's engine spends calling the flow's
    state hooks (`FlowRunEngine.call_hooks`, Prefect's logging of each hook included)
    is timed too, in both modes: `hooks_ms_per_task`, the adapter's whole share of a
    flow run on its path (without the adapter, the call runs hooks of the same names
    that do nothing, so Prefect's handling of a hook is in the anchor); and, within it,
    the hook functions themselves (`adapter_hooks_ms_per_task`: the adapter's, or the
    empty ones)."""
    from prefect import flow
    from prefect.flow_engine import FlowRunEngine

    from epochledger import open_ledger
    from epochledger.adapters.prefect import install

    in_hooks = [0.0]
    call_hooks = FlowRunEngine.call_hooks

    def timed(self: Any, state: Any = None) -> None:
        t = time.perf_counter()
        try:
            call_hooks(self, state)
        finally:
            in_hooks[0] += time.perf_counter() - t

    FlowRunEngine.call_hooks = timed  # type: ignore[method-assign]

    tmp = tempfile.mkdtemp(prefix="epochledger-adapter-cost-")
    store = f"sqlite:///{tmp}/ledger.db"
    open_ledger(store).close()
    found = install(store=store, spool=f"{tmp}/spool", fsync=fsync) if adapter else None  # type: ignore[arg-type]
    in_ours = [0.0]  # the adapter's own hook functions, inside Prefect's call_hooks
    ours_cpu = [0.0]  # and the CPU time of their own thread meanwhile (the rest of their wall time: waits)

    def ours(hook: Any) -> Any:
        def timed_hook(*args: Any) -> None:
            t, c = time.perf_counter(), time.thread_time()
            try:
                hook(*args)
            finally:
                in_ours[0] += time.perf_counter() - t
                ours_cpu[0] += time.thread_time() - c

        timed_hook.__name__ = hook.__name__
        return timed_hook

    if found is not None:
        hooks = {k: [ours(h) for h in v] for k, v in found.hooks().items()}
    else:
        # The anchor has hooks too, of the same names, that do nothing: Prefect's own
        # handling of a flow's state hooks (its log lines, its bookkeeping) is then in both
        # modes, and "added" is the adapter's alone.
        def empty(*_: Any) -> None:
            return None

        hooks = {k: [ours(empty)] for k in HOOKS}

    @flow(name="add", persist_result=False, **hooks)
    def add(x: int, y: int) -> int:
        return x + y

    add(0, 0)  # warm: the flow's first run, the spool opened and its first write done
    if found is not None:
        assert found.flush(30)
    in_hooks[0] = in_ours[0] = ours_cpu[0] = 0.0
    t0 = time.perf_counter()
    try:
        for i in range(tasks):
            add(i, i)
    finally:
        FlowRunEngine.call_hooks = call_hooks  # type: ignore[method-assign]
    hot = time.perf_counter() - t0
    out = {
        "hot_ms_per_task": round(hot / tasks * 1000, 4),
        "hooks_ms_per_task": round(in_hooks[0] / tasks * 1000, 4),
        "adapter_hooks_ms_per_task": round(in_ours[0] / tasks * 1000, 4),
        "adapter_hooks_cpu_ms_per_task": round(ours_cpu[0] / tasks * 1000, 4),
    }
    if found is not None:
        t1 = time.perf_counter()
        assert found.flush(600)
        out["drained_ms_per_task"] = round((time.perf_counter() - t0) / tasks * 1000, 4)
        out["hooks_drained_ms_per_task"] = round((in_hooks[0] + time.perf_counter() - t1) / tasks * 1000, 4)
        ledger = open_ledger(store)
        assert sum(1 for r in ledger.runs() if r.status.value == "finished") == tasks + 1
        ledger.close()
        found.close()
    else:
        out["drained_ms_per_task"] = out["hot_ms_per_task"]
        out["hooks_drained_ms_per_task"] = out["hooks_ms_per_task"]
    return out


class _PrefectServer:
    """Prefect's ephemeral API for the run: a temporary PREFECT_HOME, loopback only."""

    def __enter__(self) -> _PrefectServer:
        import os

        self.home = tempfile.mkdtemp(prefix="prefect-home-")
        os.environ.update(
            PREFECT_HOME=self.home,
            PREFECT_SERVER_ALLOW_EPHEMERAL_MODE="true",
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="240",
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            PREFECT_LOGGING_TO_API_ENABLED="false",
            DO_NOT_TRACK="1",
        )
        from prefect.server.api.server import SubprocessASGIServer

        self.server = SubprocessASGIServer()
        self.server.start(timeout=240)
        os.environ["PREFECT_API_URL"] = self.server.api_url
        return self

    def __exit__(self, *_: object) -> None:
        import shutil

        self.server.stop()
        shutil.rmtree(self.home, ignore_errors=True)


HOOKS = ("on_running", "on_completion", "on_failure", "on_crashed", "on_cancellation")  # PrefectAdapter.hooks()
ROUNDS = {"celery": one_round, "airflow": airflow_round, "prefect": prefect_round}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.adapter_cost")
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--fsync", choices=["batch", "always"], default="batch")
    p.add_argument("--adapter", choices=list(ROUNDS), default="celery")
    ns = p.parse_args(argv)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with _PrefectServer() if ns.adapter == "prefect" else contextlib.nullcontext():
        for r in range(ns.rounds):
            for adapter in (False, True) if r % 2 == 0 else (True, False):
                results[adapter].append(ROUNDS[ns.adapter](ns.tasks, adapter, ns.fsync))

    def med(adapter: bool, key: str) -> float:
        return round(statistics.median(x[key] for x in results[adapter]), 4)

    added = round(med(True, "hot_ms_per_task") - med(False, "hot_ms_per_task"), 4)
    out: dict[str, Any] = {
        "bench": "adapter_cost",
        "adapter": ns.adapter,
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
    if ns.adapter == "airflow":
        out["with_boot_ms_per_task"] = med(True, "boot_ms_per_task")
        out["without_hot_cpu_ms_per_task"] = med(False, "hot_cpu_ms_per_task")
        out["with_hot_cpu_ms_per_task"] = med(True, "hot_cpu_ms_per_task")
        out["with_watched_exit_ms_per_task"] = med(True, "watched_exit_ms_per_task")
        out["added_watched_exit_ms_per_task"] = round(
            med(True, "watched_exit_ms_per_task") - med(False, "hot_ms_per_task"), 4
        )
    if ns.adapter == "prefect":
        out["without_hooks_ms_per_task"] = med(False, "hooks_ms_per_task")
        out["with_hooks_ms_per_task"] = med(True, "hooks_ms_per_task")
        out["added_hooks_ms_per_task"] = round(med(True, "hooks_ms_per_task") - med(False, "hooks_ms_per_task"), 4)
        out["without_adapter_hooks_ms_per_task"] = med(False, "adapter_hooks_ms_per_task")  # the empty hooks
        out["with_adapter_hooks_ms_per_task"] = med(True, "adapter_hooks_ms_per_task")
        out["with_adapter_hooks_cpu_ms_per_task"] = med(True, "adapter_hooks_cpu_ms_per_task")
        out["added_hooks_drained_ms_per_task"] = round(
            med(True, "hooks_drained_ms_per_task") - med(False, "hooks_ms_per_task"), 4
        )
    emit(out)


if __name__ == "__main__":
    main()
