"""The console at a million runs (issue 23, docs/console.md): the fleet page, a runs page
with a filter and a cursor, one run's page and the incident page, each served by a real
`epochledger serve` over loopback, beside the facade call that page makes, in process on
the same ledger, measured in the same run (the anchor: what the page adds is its
rendering and HTTP). Beside the counts the runs view keeps, what the same counts cost
counted in SQL from the table's status and launch indexes, and listed (every run of the
runs view in the lean RunRow shape, counted in Python). Prints JSON.

    .venv/bin/python -m bench.console [--runs 1000000] [--running 10000] [--slots 50] [--repeat 7]

The fleet ledger (SQLite, built once and kept in the temporary directory beside its
marker file): `runs - running` runs of 3 events (bench/common.py's history: finished, or
failed_resumable for 1 in 7), then `slots` slots booted and `running` runs started on
them; the first slot boots a second epoch (its runs are orphans, rule O2, none swept),
the second slot's sweep gave up (rule O5), 50 running runs have an open tick failure
streak and 5 were dead-lettered (rule T2). Every view is caught up once, when it is built.

The incident ledger: bench/forensics.py's history (four worker slots, runs of 5
events, redeploys with their sweeps), 10,000 events, built in a temporary directory; the
page over its whole window with the cursor in the middle.

Goal: each page's server time (the request's wall time over loopback, keep-alive) under
100 ms at a million runs, the incident page under 1 s for 10,000 events.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx

from bench.common import T0, emit, make_history
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessSweepFailed,
    RunDeadLettered,
    RunQueued,
    RunStarted,
    RunTickFailed,
    Status,
    process_stream,
    run_stream,
)
from epochledger.ledger.store import Append, open_store
from epochledger.projections import engine

STREAKING = 50  # running runs with an open tick failure streak
DEAD = 5  # running runs dead-lettered


def _slot(k: int) -> str:
    return f"slot-{k:03d}"


def _live(i: int) -> str:
    return f"live-{i:06d}"


def console_file(runs: int, running: int, slots: int) -> tuple[str, float | None]:
    """The fleet ledger's SQLite file (module docstring), built once and reused while its
    marker file says it is whole: (path, seconds the build took, None if reused)."""
    path = os.path.join(tempfile.gettempdir(), f"epochledger-console_{runs}_{running}_{slots}.db")
    if os.path.exists(path + ".ok"):
        return path, None
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    t0 = time.perf_counter()
    store = open_store(path)
    make_history(store, runs - running, 3, window=20_000 // 3, log=lambda m: print(m, file=sys.stderr))
    booted = T0 - timedelta(minutes=5)
    store.append(
        [
            Append(
                process_stream(_slot(k)),
                1,
                ProcessBooted(at=booted, process=_slot(k), epoch=f"{_slot(k)}.e1", booted_at=booted),
            )
            for k in range(slots)
        ]
    )
    at = T0 + timedelta(hours=1)
    pending: list[Append] = []
    for i in range(running):
        slot, stream = _slot(i % slots), run_stream(_live(i))
        pending.append(
            Append(stream, 1, RunQueued(at=at, run=_live(i), status=Status.QUEUED, process=slot, workflow="nightly"))
        )
        pending.append(
            Append(stream, 2, RunStarted(at=at, run=_live(i), status=Status.RUNNING, process=slot, epoch=f"{slot}.e1"))
        )
        if len(pending) >= 20_000:
            store.append(pending)
            pending = []
    store.append(pending)
    later = at + timedelta(minutes=30)
    facts: list[Append] = [
        # the first slot restarted: its runs on the first epoch are orphans (rule O2), unswept
        Append(
            process_stream(_slot(0)),
            2,
            ProcessBooted(at=later, process=_slot(0), epoch=f"{_slot(0)}.e2", booted_at=later - timedelta(seconds=3)),
        ),
        # the second slot's sweep gave up (rule O5)
        Append(
            process_stream(_slot(1)),
            2,
            ProcessSweepFailed(
                at=later, process=_slot(1), epoch=f"{_slot(1)}.e1", attempts=3, error="database is locked"
            ),
        ),
    ]
    for j in range(STREAKING + DEAD):
        i = slots * 2 + j  # runs of slots past the first: owned by a live epoch
        slot = _slot(i % slots)
        facts.append(
            Append(
                run_stream(_live(i)),
                3,
                RunTickFailed(
                    at=later - timedelta(minutes=j % 20),
                    run=_live(i),
                    status=Status.RUNNING,
                    tick=f"t{j}",
                    step="poll",
                    error_class="TimeoutError",
                    error="upstream did not answer",
                    epoch=f"{slot}.e1",
                ),
            )
        )
        if j >= STREAKING:
            facts.append(
                Append(
                    run_stream(_live(i)),
                    4,
                    RunDeadLettered(
                        at=later,
                        run=_live(i),
                        status=Status.FAILED,
                        code="TICK_DEADLINE_EXCEEDED",
                        tick=f"t{j}-last",
                        step="poll",
                        error_class="TimeoutError",
                        failing_since=later - timedelta(minutes=j % 20),
                        failures=12,
                        deadline_s=600.0,
                        epoch=f"{slot}.e1",
                    ),
                )
            )
    store.append(facts)
    engine.init_views(store)
    store.close()
    seconds = time.perf_counter() - t0
    with open(path + ".ok", "w") as f:
        f.write(f"{runs} {running} {slots}\n")
    return path, seconds


def incident_file(directory: str, runs: int = 1996, boots: int = 4) -> tuple[str, int, dict[str, str]]:
    """The incident ledger (bench/forensics.py's history: 4 slot boots, `runs` runs of 5
    events, `boots` redeploys with their sweeps: 10,000 events by default) in
    `directory`: (path, events, the page's query: its whole window, the cursor in the
    middle)."""
    from bench.forensics import _history
    from epochledger import open_ledger

    path = os.path.join(directory, "incident.db")
    events = _history(path, runs, boots)
    with open_ledger(path, create=False) as lg:
        first, last = next(iter(lg.events())).event.at, max(r.event.at for r in lg.events())
    stamp = "%Y-%m-%dT%H:%M:%S.%fZ"
    window = {
        "from": first.strftime(stamp),
        "to": (last + timedelta(seconds=1)).strftime(stamp),
        "at": (first + (last - first) / 2).strftime(stamp),
    }
    return path, events, window


def _rounds(reads: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    """Each read once (a warm-up), then `repeat` interleaved rounds of all of them, so
    the other sessions' load on the shared cores falls on each alike: wall seconds."""
    for f in reads.values():
        f()
    wall: dict[str, list[float]] = {k: [] for k in reads}
    for _ in range(repeat):
        for k, f in reads.items():
            t0 = time.perf_counter()
            f()
            wall[k].append(time.perf_counter() - t0)
    return wall


def _get(client: httpx.Client, path: str) -> Callable[[], int]:
    def get() -> int:
        r = client.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        return len(r.content)

    return get


def pages(path: str, runs: int, repeat: int) -> dict[str, Any]:
    """The four pages over HTTP beside their facade calls in process (module docstring)."""
    from bench.stream import _serve
    from epochledger import open_ledger
    from epochledger.reports import RUNNING_PREDICATE, encode_cursor

    def grouped(store: Any) -> list[Any]:
        with store.transaction(commit=False) as cur:
            table = store.quote("view_runs")
            cur.execute(f"SELECT status, COUNT(*) FROM {table} WHERE deleted = 0 GROUP BY status")
            by_status = cur.fetchall()
            cur.execute(
                f"SELECT process, COUNT(*) FROM {table} WHERE deleted = 0 AND {RUNNING_PREDICATE} = 1 GROUP BY process"
            )
            return [by_status, cur.fetchall()]

    status = "failed_resumable"
    middle = f"run-{(runs // 2) // 7 * 7:07d}"  # a failed_resumable run (1 in 7) in the middle of the keys
    cursor = encode_cursor(middle)
    show = f"run-{runs // 2 + 1:07d}"
    slot = _slot(3)
    with tempfile.TemporaryDirectory() as tmp, open_ledger(path, create=False) as lg:
        ipath, events, window = incident_file(tmp)
        listing = f"/runs?{urlencode({'status': status, 'after': cursor})}"
        running = f"/runs?{urlencode({'predicate': 'counts_against_launch_limit', 'process': slot})}"
        incident = f"/incident?{urlencode(window)}"
        with open_ledger(ipath, create=False) as il:
            at = {k: datetime.fromisoformat(v) for k, v in window.items()}
            in_process: dict[str, Callable[[], Any]] = {
                "fleet": lg.fleet,
                "fleet_counts_kept": lambda: engine.read_fleet_counts(lg._store),
                # what the same counts cost counted from the table's index in SQL, and, before
                # that, by listing every run
                "counts_group_by_in_sql": lambda: grouped(lg._store),
                "counts_by_listing_every_run": lambda: len(lg.list_runs(shape="row").runs),
                "runs_status_after_cursor": lambda: lg.list_runs(
                    statuses=[status], shape="listed", after=cursor, limit=100
                ),
                "runs_of_a_slot_running": lambda: lg.list_runs(
                    predicates=["counts_against_launch_limit"], processes=[slot], shape="listed", limit=100
                ),
                "run": lambda: (lg.run_view(show), lg.history_of(show)),
                "incident": lambda: il.timeline_page(start=at["from"], end=at["to"], cursor=at["at"], assets="/"),
            }
            facade = _rounds(in_process, repeat)
        served: dict[str, Any] = {}
        sizes: dict[str, int] = {}
        for ledger_path, wanted in (
            (
                path,
                {
                    "fleet": "/",
                    "runs_status_after_cursor": listing,
                    "runs_of_a_slot_running": running,
                    "run": f"/runs/{show}",
                },
            ),
            (ipath, {"incident": incident}),
        ):
            proc, base = _serve(f"sqlite:///{ledger_path}")
            try:
                with httpx.Client(base_url=base, timeout=120) as client:
                    gets = {k: _get(client, v) for k, v in wanted.items()}
                    sizes.update({k: f() for k, f in gets.items()})
                    served.update(_rounds(gets, repeat))
            finally:
                proc.terminate()
                proc.wait(30)
        fleet = lg.fleet()
    med = {k: round(statistics.median(v) * 1000, 1) for k, v in served.items()}
    anchors = {k: round(statistics.median(v) * 1000, 1) for k, v in facade.items()}
    return {
        "runs": runs,
        "incident_events": events,
        "repeat": repeat,
        "pages": {
            k: {"path": v}
            for k, v in (
                ("fleet", "/"),
                ("runs_status_after_cursor", listing),
                ("runs_of_a_slot_running", running),
                ("run", f"/runs/{show}"),
                ("incident", incident),
            )
        },
        "page_median_ms": med,
        "facade_median_ms": anchors,
        "ratio_page_to_facade": {k: round(med[k] / anchors[k], 2) for k in med if anchors.get(k)},
        "page_bytes": sizes,
        "fleet": {
            "by_status": fleet.by_status,
            "slots_running": len(fleet.running_by_slot),
            "orphans": len(fleet.orphans),
            "streaking": len(fleet.streaking),
            "dead_letters": fleet.tick_health.dead_letters,
            "sweeps_failed": len(fleet.sweep_failed),
        },
        "goal_page_ms": GOAL_MS,
        "goal_incident_ms": GOAL_INCIDENT_MS,
        "goal_met": {k: v < (GOAL_INCIDENT_MS if k == "incident" else GOAL_MS) for k, v in med.items()},
    }


def catch_up_cost(repeat: int, runs: int = 20_000, more: int = 2_000) -> dict[str, Any]:
    """What keeping the counts costs the write side: a live catch-up of the runs view
    over `more` new runs of 3 events, with its counts kept and, interleaved, with them
    not (the runner's counts unset), on a SQLite ledger of `runs` runs in a temporary
    directory. The counts table is made anew after each round without, so the next
    round with them starts from the table's own counts."""
    from bench.forensics import _runs
    from epochledger.projections import runs as runs_view
    from epochledger.projections import tables

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(os.path.join(tmp, "catch_up.db"))
        make_history(store, runs, 3)
        engine.catch_up(store, runs_view)
        wall: dict[str, list[float]] = {"with_counts": [], "without": []}
        base = runs
        for _ in range(repeat):
            for name in wall:
                _runs(store, base, more, per_run=3)
                base += more
                runner = engine.Runner(store, runs_view)
                if name == "without":
                    runner.counts = None
                runner.load()
                t0 = time.perf_counter()
                runner.run()
                wall[name].append(time.perf_counter() - t0)
                if name == "without":  # the counts the round skipped, made from the table
                    with store.transaction() as cur:
                        tables.keep_counts(store, cur, "view_runs", runs_view.COUNTS)
        store.close()
    med = {k: round(statistics.median(v) * 1000, 1) for k, v in wall.items()}
    return {
        "events_per_round": more * 3,
        "catch_up_median_ms": med,
        "ratio_with_to_without": round(med["with_counts"] / med["without"], 2),
    }


GOAL_MS = 100  # a page's median server time at a million runs
GOAL_INCIDENT_MS = 1000  # the incident page of 10,000 events


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.console")
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--running", type=int, default=10_000)
    p.add_argument("--slots", type=int, default=50)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--build-only", action="store_true")
    ns = p.parse_args(argv)
    result: dict[str, Any] = {"bench": "console", "load_average_start": [round(x, 1) for x in os.getloadavg()]}
    path, build = console_file(ns.runs, ns.running, ns.slots)
    result["build_s"] = None if build is None else round(build, 1)
    if not ns.build_only:
        result.update(pages(path, ns.runs, ns.repeat))
        result["catch_up_cost"] = catch_up_cost(ns.repeat)
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    emit(result)
    return result


if __name__ == "__main__":
    main()
