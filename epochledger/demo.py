"""`epochledger demo`: a small, believable day of a scheduler, recorded through the
public API with a manual clock, so the same demo always writes the same history.

A day on 2026-09-09: two worker slots and an API process; a few dozen nightly, hourly
and report runs; failures with known and unknown codes; a human-in-the-loop pause and
its answered resume; an operator cancel; and an incident worth looking at
(docs/forensics.md): a redeploy of worker-1 at 14:20 strands a backfill, which the
startup sweep recovers; the old process's late "finished" for it is fenced and kept; a
long healthy nightly runs on the new epoch; at 16:01 worker-2 restarts and its wall
clock steps back 10 minutes before its sweep, which skips the time fallback.
"""

from __future__ import annotations

import os
import random
import shlex
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from epochledger.app import Ledger, open_ledger
from epochledger.ledger import lifecycle
from epochledger.ledger.clock import ManualClock
from epochledger.ledger.codes import show_code
from epochledger.ledger.errors import InvalidInput, StaleEpoch
from epochledger.ledger.store import resolve_url

DEMO_PATH = "epochledger-demo.db"
DAY = datetime(2026, 9, 9, 0, 0, tzinfo=UTC)


def record_day(ledger: Ledger, clock: ManualClock) -> dict[str, str]:
    """Record the day; return the ids of the runs worth a look."""
    notable: dict[str, str] = {}
    rnd = random.Random(20260909)
    api = ledger.boot("api-1", epoch="api-1.e1", host="sched-a", pid=4101, actor="systemd")
    w1 = ledger.boot("worker-1", epoch="worker-1.e1", host="sched-a", pid=4102, actor="systemd")
    w2 = ledger.boot("worker-2", epoch="worker-2.e1", host="sched-b", pid=5120, actor="systemd")
    epochs = {"worker-1": w1.epoch, "worker-2": w2.epoch}
    del api

    n = 0
    for hour in range(0, 24, 1):
        # each hour's runs begin at the top of the hour (runs inside it move the clock)
        clock.advance(max(0.0, (DAY + timedelta(hours=hour, minutes=1) - clock.now()).total_seconds()))
        if hour == 14:
            # A backfill is running on worker-1 when it is redeployed at 14:20: the new
            # epoch supersedes the old one, and its sweep at boot recovers the backfill
            # (rules O2, O5; see `history backfill-redeploy`).
            notable["orphan"] = "backfill-redeploy"
            ledger.queue("backfill-redeploy", workflow="backfill", process="worker-1", actor="api-1")
            ledger.start("backfill-redeploy", epoch=epochs["worker-1"], process="worker-1", actor=epochs["worker-1"])
            clock.advance(max(0.0, (DAY + timedelta(hours=14, minutes=20) - clock.now()).total_seconds()))
            clock.restart()
            booted, _report = ledger.startup("worker-1", epoch="worker-1.e2", host="sched-a", pid=7001, actor="deploy")
            epochs["worker-1"] = booted.epoch
            # The old process had not quite died: a minute later it reports the backfill
            # finished. The report is fenced and kept as evidence, and it binds automation:
            # the backfill is not auto-resumed, an operator decides (rules F1, F2).
            clock.advance(60)
            try:
                ledger.finish("backfill-redeploy", epoch="worker-1.e1", actor="worker-1.e1")
            except StaleEpoch:
                pass
            # A long healthy nightly on the new epoch, checkpointing as it goes: a flat age
            # threshold would kill it at worker-2's sweep at 16:00 (`whatif --policy flat-age:30m`).
            notable["nightly"] = "nightly-long"
            with ledger.batch() as b:
                b.queue("nightly-long", workflow="nightly-etl", process="worker-1", actor="api-1")
                b.start("nightly-long", epoch=epochs["worker-1"], process="worker-1", actor=epochs["worker-1"])
        if hour == 15:
            ledger.checkpoint(
                "nightly-long", "transform", "ckpt/nightly-long/1", epoch=epochs["worker-1"], actor=epochs["worker-1"]
            )
        if hour == 17:
            ledger.finish("nightly-long", epoch=epochs["worker-1"], actor=epochs["worker-1"])
        if hour == 16:
            # worker-2 restarts at 16:01 and NTP steps its wall clock back 10 minutes before
            # its sweep runs; the new process has already started an ad-hoc report (naming no
            # epoch). The sweep reads a clock earlier than its boot instant, so the time
            # fallback takes nothing and process.sweep_skipped says why (rule O3); a clamp of
            # the negative age to zero would have swept the report (`whatif --policy clamp`).
            clock.restart(3)
            w2e2 = ledger.boot("worker-2", epoch="worker-2.e2", host="sched-b", pid=7102, actor="deploy")
            epochs["worker-2"] = w2e2.epoch
            clock.step_wall(-600)
            notable["clock_step"] = "report-adhoc"
            ledger.queue("report-adhoc", workflow="report", process="worker-2", actor="api-1")
            ledger.start("report-adhoc", process="worker-2", actor=epochs["worker-2"])
            clock.advance(20)
            ledger.sweep(w2e2)
        if hour == 17:
            ledger.finish("report-adhoc", actor=epochs["worker-2"])
        for _ in range(2 if hour % 3 else 3):
            n += 1
            workflow = rnd.choice(["nightly-etl", "hourly-sync", "report"])
            slot = rnd.choice(["worker-1", "worker-2"])
            run = f"{workflow}-{n:04d}"
            with ledger.batch() as b:
                b.queue(run, workflow=workflow, process=slot, actor="api-1")
                b.start(run, epoch=epochs[slot], process=slot, actor=epochs[slot])
                b.checkpoint(run, "extract", f"ckpt/{run}/1", actor=epochs[slot])
            clock.advance(rnd.randint(30, 600))
            fate = rnd.random()
            if n == 7:
                notable["paused"] = run
                ledger.pause(
                    run,
                    "waiting_human",
                    interaction=f"approve-{n}",
                    questions=["Ship the report to finance?"],
                    actor=epochs[slot],
                )
                clock.advance(900)
                ledger.resume(
                    run,
                    "operator",
                    answers={"Ship the report to finance?": "yes"},
                    actor="alice",
                    reason="approved in #ops",
                )
                ledger.start(run, epoch=epochs[slot], process=slot, actor=epochs[slot])
                ledger.finish(run, actor=epochs[slot])
            elif n == 12:
                notable["cancelled"] = run
                ledger.cancel(run, actor="bob", reason="duplicate of an earlier run")
            elif fate < 0.12:
                ledger.fail(run, "TIMEOUT", resumable=True, error="step load exceeded 600s", actor=epochs[slot])
            elif fate < 0.18:
                ledger.fail(run, "OOM_KILLED", resumable=True, error="worker killed by the kernel", actor=epochs[slot])
            elif fate < 0.22:
                ledger.fail(
                    run, "FAIL_NODE", resumable=False, error="validation node rejected the input", actor=epochs[slot]
                )
            elif fate < 0.25:
                ledger.fail(run, "", resumable=True, error="exit status 137", actor=epochs[slot])
            elif hour == 23 and fate > 0.6:
                pass  # still running at midnight
            else:
                ledger.checkpoint(run, "load", f"ckpt/{run}/2", actor=epochs[slot])
                ledger.finish(run, actor=epochs[slot])
    return notable


def run_demo(
    store: str | None, *, force: bool = False, out: Callable[[str], None] = print, program: str = "epochledger"
) -> None:
    """Record the day into a fresh SQLite file, then print what it holds and the exact
    commands that explore it: `program` (the command as this person can run it) with
    `--store` naming the demo's file, which is not the default store, so they run as
    printed (after `make demo`, a bare `epochledger runs` found no ./epochledger.db)."""
    url = store or DEMO_PATH
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else url
    if "://" in path:
        raise InvalidInput("the demo writes a fresh SQLite file; give a file path", where="--store")
    if os.path.exists(path):
        if not force and store is not None:
            raise InvalidInput("file exists; pass --force to replace it", where=path)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
    clock = ManualClock(DAY, uptime=12.0)
    with open_ledger(path, clock=clock) as ledger:
        notable = record_day(ledger, clock)
        runs = ledger.runs()
        events = ledger.store.max_position()
    by_status = Counter(str(r.status) for r in runs)
    out(f"recorded {events} events for {len(runs)} runs into {os.path.abspath(path)}")
    out("runs by status: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    codes = Counter(show_code(r.code) for r in runs if lifecycle.is_failure(r.status))
    out("failure codes: " + ", ".join(f"{k} {v}" for k, v in sorted(codes.items())))
    out("")
    out("explore what it recorded (each command runs as printed, from this directory):")
    same = resolve_url(None) == resolve_url(path)
    cmd = program + ("" if same else f" --store {shlex.quote(path)}")
    out(f"  {cmd} runs")
    out(f"  {cmd} show {notable['paused']} --json")
    out(f"  {cmd} history {notable['paused']}")
    out(f"  {cmd} history {notable['orphan']}    # recovered by worker-1's sweep at its redeploy")
    out(f"  {cmd} epochs")
    out("")
    out("the incident, in pictures and what-ifs (docs/forensics.md):")
    out(f"  {cmd} timeline --at 2026-09-09T14:20:00Z -o incident.html")
    out(
        f"  {cmd} whatif --policy flat-age:30m    # would have killed {notable['nightly']}, found {notable['orphan']} late"
    )
    out(f"  {cmd} whatif --policy clamp           # would have swept {notable['clock_step']} after the clock step")
    if not same:
        out("")
        out(
            f"(the default store is {resolve_url(None)}; `export EPOCHLEDGER_STORE={shlex.quote(path)}` makes the demo's the default)"
        )
