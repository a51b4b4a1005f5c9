"""`import-dagster --follow` (rule I4) against real Dagster: how soon a SIGKILLed run
worker is an orphan in the ledger, beside Dagster's own run monitoring, and what a
quiet round costs. Prints one JSON object.

    .venv/bin/python -m bench.dagster_follow [--kills 5] [--interval 1] [--finished 100] [--rounds 30]

- A temporary DAGSTER_HOME (SQLite storage, run monitoring enabled, polled every
  second) and a SQLite ledger. `--finished` runs of tests/helpers/dagster_jobs.py's ok_job are
  executed first, so a round has a history to skip.
- Kills: `--kills` times, a run worker of hold_job (forked, held inside its op, as the
  tests run it: Dagster's `execute_job`, so no code server watches it) is started
  while an `epochledger import-dagster --local-workers --follow --interval S` process
  runs; once the ledger shows the run running, the worker is SIGKILLed. Timed from the
  kill (the ledger polled every 10 ms): the worker's exit fact recorded by the probe,
  and the run recovered (failed_resumable, PROCESS_ORPHANED). Beside it, Dagster's
  own run monitoring (`monitor_started_run`, the daemon's check of a STARTED run,
  called here once a second for 10 s after each kill): whether Dagster's run status
  left STARTED.
- Quiet rounds: in this process, `follow_dagster` on the same instance and ledger with
  one run worker held running, `--rounds` rounds at a 0.05 s interval, first with the
  default overlap (the records updated within it are listed, and skipped unread),
  then with none (an instance quiet for longer than the overlap lists nothing); the
  median wall and CPU time of a quiet round (nothing changed in Dagster), and of its
  probe alone, beside a plain `import_dagster` of the same instance (a cron round's
  import, without its process start).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from epochledger import open_ledger
from epochledger.import_dagster import OVERLAP_S
from epochledger.ledger.errors import RunNotFound


def _instance(home: Path) -> Any:
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))


QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _hold(home: str) -> None:
    from dagster import execute_job, reconstructable

    from tests.helpers import dagster_jobs

    with _instance(Path(home)) as instance:
        execute_job(reconstructable(dagster_jobs.hold_job), instance=instance, raise_on_error=False, run_config=QUIET)
    os._exit(0)


def _held(home: Path, marks: Path) -> Any:
    p = multiprocessing.get_context("fork").Process(target=_hold, args=(str(home),))
    p.start()
    deadline = time.monotonic() + 120
    while not (marks / f"holding.{p.pid}").exists():
        if time.monotonic() > deadline or not p.is_alive():
            raise RuntimeError("the run worker never reached its op")
        time.sleep(0.01)
    return p


def _run_of(instance: Any, pid: int) -> str:
    """The newest run, which the worker `pid` started (its PIPELINE_START's pid checked)."""
    from dagster import DagsterEventType

    [record] = instance.get_run_records(limit=1)
    rid = record.dagster_run.run_id
    for rec in instance.get_records_for_run(rid, of_type=DagsterEventType.PIPELINE_START).records:
        if rec.event_log_entry.dagster_event.pid == pid:
            return str(rid)
    raise RuntimeError(f"the newest run {rid} was not started by pid {pid}")


def kills(home: Path, marks: Path, url: str, n: int, interval: float) -> dict[str, Any]:
    from dagster._daemon.monitoring.run_monitoring import monitor_started_run

    follower = subprocess.Popen(
        [
            *(sys.executable, "-m", "epochledger", "--store", url, "import-dagster", "--instance", str(home)),
            *("--local-workers", "--follow", "--interval", str(interval), "--json"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    exit_fact, recovered, dagster_left_started = [], [], []
    log = logging.getLogger("run_monitoring")
    try:
        with open_ledger(url) as ledger, _instance(home) as instance:
            for _ in range(n):
                worker = _held(home, marks)
                run = "dagster:" + _run_of(instance, worker.pid)
                while True:
                    with contextlib.suppress(RunNotFound):  # not imported yet
                        if str(ledger.get_run(run).status) == "running":
                            break
                    time.sleep(0.01)
                os.kill(worker.pid, signal.SIGKILL)
                t0 = time.monotonic()
                worker.join(10)
                seen = None
                while True:
                    slot = ledger.process(run)
                    if seen is None and slot is not None and slot.current is not None and slot.current.exited_by:
                        seen = time.monotonic() - t0
                    if str(ledger.get_run(run).status) == "failed_resumable":
                        recovered.append(round(time.monotonic() - t0, 3))
                        exit_fact.append(round(seen if seen is not None else recovered[-1], 3))
                        break
                    if time.monotonic() - t0 > 60:
                        raise RuntimeError("not recovered within 60 s")
                    time.sleep(0.01)
                # Dagster's run monitoring of the same run, once a second for 10 s.
                record = instance.get_run_record_by_id(run.removeprefix("dagster:"))
                left = None
                for i in range(10):
                    monitor_started_run(instance, None, record, log)  # type: ignore[arg-type]
                    status = instance.get_run_by_id(record.dagster_run.run_id).status.value
                    if status != "STARTED":
                        left = i + 1
                        break
                    time.sleep(1)
                dagster_left_started.append(left)
            health = bool(instance.run_launcher.supports_check_run_worker_health)
    finally:
        follower.send_signal(signal.SIGTERM)
        follower.wait(60)
    return {
        "interval_s": interval,
        "kills": n,
        "exit_fact_s": exit_fact,
        "recovered_s": recovered,
        "recovered_median_s": statistics.median(recovered),
        "recovered_max_s": max(recovered),
        "dagster_run_monitoring_left_started_after_s": dagster_left_started,  # None: still STARTED after 10 s
        "dagster_launcher_checks_worker_health": health,
    }


def quiet_rounds(home: Path, marks: Path, url: str, rounds: int) -> dict[str, Any]:
    """Quiet rounds with the default overlap (every record, all updated within it, is
    listed and skipped unread), then with none (an instance quiet for longer than the
    overlap lists nothing)."""
    return {f"overlap_{int(overlap)}s": _quiet(home, marks, url, rounds, overlap) for overlap in (OVERLAP_S, 0.0)}


def _quiet(home: Path, marks: Path, url: str, rounds: int, overlap: float) -> dict[str, Any]:
    from epochledger.import_dagster import FollowRound, follow_dagster, import_dagster

    worker = _held(home, marks)
    try:
        with open_ledger(url) as ledger:
            import_dagster(ledger, str(home), local_workers=True)  # caught up: what follows is quiet
            walls: list[float] = []
            cpus: list[float] = []
            probes: list[float] = []
            listed: list[int] = []
            stop = threading.Event()
            cpu = [time.process_time()]

            def on_round(r: FollowRound) -> None:
                now = time.process_time()
                if r.round > 2:  # past the first (full) round and the one after it
                    if not r.quiet or r.imported.read:
                        raise RuntimeError(f"round {r.round} was not quiet: {r}")
                    walls.append(r.seconds)
                    cpus.append(now - cpu[0])
                    listed.append(r.imported.runs)
                cpu[0] = now
                if r.round >= rounds + 2:
                    stop.set()

            follow_dagster(
                ledger, str(home), stop=stop, interval=0.05, local_workers=True, on_round=on_round, overlap=overlap
            )
            for _ in range(rounds):
                t0 = time.perf_counter()
                ledger.probe(sweep=False)
                probes.append(time.perf_counter() - t0)
            plain: list[float] = []
            for _ in range(5):
                t0 = time.perf_counter()
                import_dagster(ledger, str(home), local_workers=True)
                plain.append(time.perf_counter() - t0)
            with _instance(home) as instance:
                runs = len(instance.get_run_ids())
    finally:
        (marks / "release").touch()
        worker.join(30)
        (marks / "release").unlink()
    ms = 1000.0
    return {
        "dagster_runs": runs,
        "running": 1,
        "rounds": len(walls),
        "records_listed_median": statistics.median(listed),
        "quiet_round_wall_ms_median": round(statistics.median(walls) * ms, 2),
        "quiet_round_wall_ms_max": round(max(walls) * ms, 2),
        "quiet_round_cpu_ms_median": round(statistics.median(cpus) * ms, 2),  # the round and its 0.05 s wait
        "probe_alone_ms_median": round(statistics.median(probes) * ms, 2),
        "plain_import_round_ms_median": round(statistics.median(plain) * ms, 2),  # in-process, Dagster imported
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.dagster_follow")
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--finished", type=int, default=100)
    p.add_argument("--rounds", type=int, default=30)
    ns = p.parse_args(argv)
    from dagster import execute_job, reconstructable

    from tests.helpers import dagster_jobs

    root = Path(tempfile.mkdtemp(prefix="bench-dagster-follow-"))
    home, marks = root / "dagster_home", root / "marks"
    home.mkdir()
    marks.mkdir()
    os.environ["EPOCHLEDGER_DAGSTER_MARKS"] = str(marks)
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\nrun_monitoring:\n  enabled: true\n  poll_interval_seconds: 1\n"
    )
    t0 = time.monotonic()
    with _instance(home) as instance:
        for _ in range(ns.finished):
            execute_job(reconstructable(dagster_jobs.ok_job), instance=instance, run_config=QUIET)
    built = time.monotonic() - t0
    url = f"sqlite:///{root / 'ledger.db'}"
    with open_ledger(url):
        pass
    result: dict[str, Any] = {
        "bench": "dagster_follow",
        "finished_runs_built_s": round(built, 1),
        "load_average": os.getloadavg(),
        "quiet": quiet_rounds(home, marks, url, ns.rounds),
        "kills": kills(home, marks, url, ns.kills, ns.interval),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
