"""Fleet-sized ledgers for the incident picture's tests (rules V1, V2): many runs at
once, appended straight to the store as bench/console.py's fleet is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from epochledger.ledger.events import (
    ProcessBooted,
    RunFailed,
    RunFenced,
    RunFinished,
    RunQueued,
    RunRecovered,
    RunStarted,
    Status,
    process_stream,
    run_stream,
)
from epochledger.ledger.store import Append, open_store


def dense(store_path: str, running: int, slots: int = 3, finished: int = 0) -> tuple[datetime, list[str]]:
    """A fleet of `running` runs started at T (0 h) on `slots` slots and still running,
    `finished` more started a second apart from T and finished 10 minutes later, and,
    in the hour from 1 h, what an incident is made of: three runs that fail, one run
    recovered by a sweep, one fenced report, and a run queued near 1 h 30 (the cursor).
    (T, the runs that matter in that hour)."""
    t = datetime(2026, 9, 9, 10, 0, tzinfo=UTC)
    store = open_store(store_path)
    try:
        store.append(
            [
                Append(process_stream(f"w{k}"), 1, ProcessBooted(at=t, process=f"w{k}", epoch=f"w{k}.e1", booted_at=t))
                for k in range(slots)
            ]
        )
        pending = []
        for i in range(running):
            run, slot = f"live-{i:05d}", f"w{i % slots}"
            pending.append(Append(run_stream(run), 1, RunQueued(at=t, run=run, status=Status.QUEUED, process=slot)))
            pending.append(
                Append(
                    run_stream(run),
                    2,
                    RunStarted(at=t, run=run, status=Status.RUNNING, process=slot, epoch=f"{slot}.e1"),
                )
            )
        for i in range(finished):
            run, slot, at = f"done-{i:05d}", f"w{i % slots}", t + timedelta(seconds=i)
            pending.append(Append(run_stream(run), 1, RunQueued(at=at, run=run, status=Status.QUEUED, process=slot)))
            pending.append(Append(run_stream(run), 2, RunStarted(at=at, run=run, status=Status.RUNNING, process=slot)))
            pending.append(
                Append(run_stream(run), 3, RunFinished(at=at + timedelta(minutes=10), run=run, status=Status.FINISHED))
            )
        store.append(pending)
        hour = t + timedelta(hours=1)
        facts = [
            Append(
                run_stream(f"live-{i:05d}"),
                3,
                RunFailed(
                    at=hour + timedelta(minutes=5 * i),
                    run=f"live-{i:05d}",
                    status=Status.FAILED_RESUMABLE,
                    code="TIMEOUT",
                    resumable=True,
                ),
            )
            for i in range(3)
        ]
        facts.append(
            Append(
                run_stream("live-00003"),
                3,
                RunRecovered(
                    at=hour + timedelta(minutes=20),
                    run="live-00003",
                    status=Status.FAILED_RESUMABLE,
                    code="PROCESS_ORPHANED",
                    rule="O2",
                    reason="its owner was superseded",
                    swept_by="w0.e2",
                    swept_by_process="w0",
                ),
            )
        )
        facts.append(
            Append(
                run_stream("live-00004"),
                3,
                RunFenced(
                    at=hour + timedelta(minutes=40), run="live-00004", epoch="w1.e0", refused="finish", why="superseded"
                ),
            )
        )
        at = hour + timedelta(minutes=29)
        facts.append(Append(run_stream("late"), 1, RunQueued(at=at, run="late", status=Status.QUEUED, process="w2")))
        store.append(facts)
    finally:
        store.close()
    return t, ["late", *(f"live-{i:05d}" for i in range(5))]
