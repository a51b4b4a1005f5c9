"""`import-dagster --follow` (rules I3, I4) against a live Dagster instance: real run
workers (tests/helpers/dagster_jobs.py, forked from this process as in tests/app/test_import_dagster.py)
and a real `epochledger import-dagster --follow` process.

- a run worker SIGKILLed mid-run, which Dagster never notices (no code server watches
  it), is an orphan in the ledger, and its run recovered, within a few seconds while the
  follower runs; quiet rounds after it append nothing; SIGTERM stops the follower after
  its round, exit 0; SIGINT exits 130;
- in-process: a quiet round lists only the records in the overlap and reads none of
  them; a run Dagster changes is read at the next round, only its new events; the
  ledger's PostgreSQL taken away for two rounds ends only those rounds, and the run's
  end that Dagster wrote meanwhile is recorded once the store is back.

Gate: as tests/app/test_import_dagster.py (EPOCHLEDGER_TEST_DAGSTER=require fails without Dagster).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from epochledger import open_ledger
from epochledger.import_dagster import SETTLE_S
from epochledger.ledger.errors import InvalidInput
from tests.app.test_import_dagster import QUIET, _instance, _need_dagster

pytestmark = pytest.mark.xdist_group("dagster")
INTERVAL = 0.5  # the follower's --interval in these tests
ORPHAN_WITHIN_S = 5.0  # a SIGKILLed worker is an orphan within this of the kill (its run recovered SETTLE_S later)


class Home:
    def __init__(self, path: Path):
        self.path = path
        self.marks = path / "marks"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    _need_dagster()
    h = Home(tmp_path / "dagster_home")
    h.marks.mkdir(parents=True)
    (h.path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("EPOCHLEDGER_DAGSTER_MARKS", str(h.marks))
    return h


def _run_ok(home: Home, **tags: str) -> str:
    from dagster import execute_job, reconstructable

    from tests.helpers import dagster_jobs

    with _instance(home.path) as instance:
        return str(
            execute_job(reconstructable(dagster_jobs.ok_job), instance=instance, run_config=QUIET, tags=tags).run_id
        )


def _hold(home: str) -> None:
    """A run worker in a process of its own, held inside its op (forked: no second import of Dagster)."""
    from dagster import execute_job, reconstructable

    from tests.helpers import dagster_jobs

    with _instance(Path(home)) as instance:
        execute_job(reconstructable(dagster_jobs.hold_job), instance=instance, raise_on_error=False, run_config=QUIET)
    os._exit(0)


@pytest.fixture
def worker(home: Home) -> Iterator[Any]:
    """A forked run worker inside its op (its `holding.<pid>` mark written); killed at teardown."""
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=_hold, args=(str(home.path),))
    p.start()
    deadline = time.monotonic() + 60
    while not (home.marks / f"holding.{p.pid}").exists():
        assert time.monotonic() < deadline and p.is_alive(), "the run worker never reached its op"
        time.sleep(0.01)
    yield p
    if p.is_alive():
        p.kill()
    p.join(10)


def _follower(url: str, home: Home, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "epochledger", "--store", url, "import-dagster", "--instance", str(home.path)),
            *("--follow", "--interval", str(INTERVAL), "--json", *extra),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _lines(proc: subprocess.Popen[bytes]) -> Iterator[dict[str, Any]]:
    assert proc.stdout is not None
    for raw in proc.stdout:
        yield json.loads(raw)


def _wait(what: str, check: Any, timeout: float) -> float:
    """Poll `check()` until it is true; the time it took."""
    t0 = time.monotonic()
    while not check():
        assert time.monotonic() - t0 < timeout, f"not within {timeout} s: {what}"
        time.sleep(0.02)
    return time.monotonic() - t0


def test_I4_a_sigkilled_worker_is_an_orphan_within_seconds_while_the_follower_runs(
    home: Home, worker: Any, sqlite_url: str, children: list[subprocess.Popen[bytes]]
) -> None:
    """The worker of a running run is SIGKILLed; Dagster never notices (no code server
    watches a worker under execute_job: the run stays STARTED). The follower's probe
    finds the pid gone and records the exit, and its sweep recovers the run, within
    ORPHAN_WITHIN_S of the kill. Then quiet rounds append nothing, and SIGTERM stops the
    follower after its round (exit 0). Mutations caught: no probe in the loop (the run
    stays running), no sweep after an exit (the run stays an unrecovered orphan), a
    quiet round that re-imports (appends)."""
    with open_ledger(sqlite_url):
        pass
    follower = _follower(sqlite_url, home, "--local-workers")
    children.append(follower)
    lines = _lines(follower)
    first = next(lines)
    assert first["round"] == 1 and first["since"] is None and first["imported"]["read"] == 1
    with _instance(home.path) as instance:
        [run_id] = instance.get_run_ids()
    run = "dagster:" + run_id
    with open_ledger(sqlite_url) as ledger:
        assert ledger.get_run(run).status == "running"
        slot = ledger.process(run)
        assert slot is not None and slot.current is not None and slot.current.pid == worker.pid
        assert slot.current.pid_start is not None  # seen alive: the probe can tell it from a reused pid
        os.kill(worker.pid, signal.SIGKILL)
        killed = time.monotonic()
        worker.join(10)

        def exited() -> bool:
            slot = ledger.process(run)
            return slot is not None and slot.current is not None and slot.current.exited_by is not None

        _wait("the killed worker's exit recorded", exited, ORPHAN_WITHIN_S)
        print(f"SIGKILL to the exit fact: {time.monotonic() - killed:.2f} s")
        # An orphan from that round on (O2-exited), until the sweep's settle is over.
        assert [(r.run, v.rule) for r, v in ledger.orphans()] == [(run, "O2-exited")]
        slot = ledger.process(run)
        assert slot is not None and slot.current is not None
        assert slot.current.exited_by is not None and slot.current.exited_by.startswith("probe@")
        assert "not running" in (slot.current.exit_evidence or "")

        def recovered() -> bool:
            return str(ledger.get_run(run).status) == "failed_resumable"

        _wait("the killed worker's run recovered", recovered, ORPHAN_WITHIN_S + SETTLE_S)
        print(f"SIGKILL to recovered: {time.monotonic() - killed:.2f} s")
        assert ledger.get_run(run).code == "PROCESS_ORPHANED"
        with _instance(home.path) as instance:
            assert instance.get_run_by_id(run_id).status.value == "STARTED"  # type: ignore[union-attr]
        # The round that recorded the exit said so, without a sweep; a later one swept.
        said = next(r for r in lines if r["probe"] and r["probe"]["exited"])
        assert said["swept"] is None
        swept = next(r for r in lines if r["swept"])
        assert [v["run"] for v in swept["swept"]["sweep"]["recovered"]] == [run]
        head = ledger._store.max_position()
        time.sleep(4 * INTERVAL)
        assert ledger._store.max_position() == head
    follower.send_signal(signal.SIGTERM)
    assert follower.wait(30) == 0, follower.stderr.read() if follower.stderr else ""
    assert list(lines) == []  # quiet rounds print nothing


def test_I4_ctrl_c_stops_the_follower_with_130(
    home: Home, sqlite_url: str, children: list[subprocess.Popen[bytes]]
) -> None:
    """SIGINT (Ctrl-C) ends the follow as every command ends on it: exit 130, one line
    on standard error. The first round is always printed, even when it found nothing
    (here: an instance with no runs). Mutation caught: the interrupt swallowed (exit 0)
    or a traceback."""
    with _instance(home.path):  # an instance with no runs yet
        pass
    with open_ledger(sqlite_url):
        pass
    follower = _follower(sqlite_url, home)
    children.append(follower)
    first = next(_lines(follower))
    assert (first["round"], first["imported"]["runs"], first["probe"]) == (1, 0, None)  # no --local-workers
    follower.send_signal(signal.SIGINT)
    assert follower.wait(30) == 130
    errs = follower.stderr.read().decode() if follower.stderr else ""
    assert "Traceback" not in errs and errs.strip()


def test_I4_a_quiet_round_reads_nothing_and_a_changed_run_is_read_at_the_next(
    home: Home, worker: Any, tmp_path: Path
) -> None:
    """In-process rounds on one follower: the first imports both runs; a quiet round
    lists only the records in the overlap and reads none (each was imported unchanged
    by this follower); a run Dagster then changes (its worker released: SUCCESS) is read
    at the next round, only its new events. With no overlap, a quiet round lists
    nothing at all. Mutations caught: the watermark ignored (every round lists and
    reads every run), a record stamp not remembered (the running run read every round)."""
    from epochledger.import_dagster import FollowRound, follow_dagster

    ok = _run_ok(home)
    rounds: list[FollowRound] = []
    stop = threading.Event()
    released = False

    def on_round(r: FollowRound) -> None:
        nonlocal released
        rounds.append(r)
        if r.round == 3:
            (home.marks / "release").touch()
            worker.join(30)
            released = True
        if r.round == 6:
            stop.set()

    with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        n = follow_dagster(
            ledger, str(home.path), stop=stop, interval=0.05, local_workers=True, on_round=on_round, overlap=0.0
        )
        assert n == 6 and released
        first, quiet, _, changed = rounds[0], rounds[1], rounds[2], rounds[3]
        assert (first.imported.runs, first.imported.read) == (2, 2) and first.since is None
        assert (quiet.imported.runs, quiet.imported.read, quiet.imported.appended) == (0, 0, 0)
        assert quiet.since is not None and quiet.quiet
        assert changed.imported.runs == changed.imported.read == 1  # only the run that changed
        assert (
            changed.imported.events >= 1 and changed.imported.appended > 0
        )  # its PIPELINE_SUCCESS (and engine events)
        assert all(r.quiet and r.imported.runs == 0 for r in rounds[4:])
        held = [r.run for r in changed.imported.by_run]
        assert held != ["dagster:" + ok] and ledger.get_run(held[0]).status == "finished"

        # With the default overlap, a quiet round lists the recent records, reads none.
        stop2 = threading.Event()
        again: list[FollowRound] = []

        def two(r: FollowRound) -> None:
            again.append(r)
            if r.round == 2:
                stop2.set()

        head = ledger._store.max_position()
        follow_dagster(ledger, str(home.path), stop=stop2, interval=0.05, local_workers=True, on_round=two)
        assert (again[1].imported.runs, again[1].imported.read, again[1].imported.appended) == (2, 0, 0)
        assert ledger._store.max_position() == head


def test_I4_the_interval_is_bounded(home: Home, tmp_path: Path) -> None:
    """A zero or huge interval is refused, naming it, before anything is read."""
    from epochledger.import_dagster import follow_dagster

    with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        for bad in (0.0, 1e9):
            with pytest.raises(InvalidInput) as e:
                follow_dagster(ledger, str(home.path), stop=threading.Event(), interval=bad)
            assert e.value.where == "interval"
        assert ledger._store.max_position() == 0


def test_I4_a_store_outage_ends_only_its_rounds_and_nothing_is_skipped(home: Home, worker: Any, pg_url: str) -> None:
    """The ledger's PostgreSQL goes away (a proxy refuses the port and resets every
    connection, tests/helpers/pg_proxy.py) after the first round; meanwhile the held run ends
    in Dagster. The rounds during the outage each end with the store error, and the
    follower goes on; once the store is back, the next round records the run's end,
    once. Mutations caught: a store error that ends the follow, the watermark moved
    past a round that failed (the run's end never read), an error round that
    remembers the records it listed (the same)."""
    from epochledger.import_dagster import FollowRound, follow_dagster
    from epochledger.ledger.events import RunFinished
    from tests.helpers.pg_proxy import Proxy

    with open_ledger(pg_url):
        pass  # the store exists before the proxy stands in front of it
    proxy = Proxy()
    rounds: list[FollowRound] = []
    stop = threading.Event()

    def on_round(r: FollowRound) -> None:
        rounds.append(r)
        if r.round == 1:
            proxy.refuse()
            (home.marks / "release").touch()  # the run ends in Dagster during the outage
            worker.join(30)
        elif r.round == 3:
            proxy.forward()
        elif r.round == 4:
            stop.set()

    try:
        with open_ledger(proxy.url(pg_url)) as ledger:
            follow_dagster(ledger, str(home.path), stop=stop, interval=0.05, on_round=on_round, overlap=0.0)
    finally:
        proxy.close()
    assert rounds[0].error is None and rounds[0].imported.read == 1
    assert [r.error is not None for r in rounds[1:3]] == [True, True], [r.error for r in rounds]
    assert rounds[3].error is None and rounds[3].imported.read == 1 and rounds[3].imported.appended > 0
    [held] = [r.run for r in rounds[0].imported.by_run]
    with open_ledger(pg_url) as ledger:
        assert ledger.get_run(held).status == "finished"
        assert sum(isinstance(r.event, RunFinished) for r in ledger.history(held)) == 1


def test_I4_dagsters_own_report_of_a_death_wins_over_the_probes_sweep(home: Home, worker: Any, tmp_path: Path) -> None:
    """The worker is SIGKILLed; the probe records its exit at the next round, but the
    sweep waits SETTLE_S. Meanwhile Dagster reports the death as its code server does
    (an engine event with the crash explanation, then a failure from outside the
    worker: Dagster's own calls, as in tests/app/test_import_dagster.py). The next round
    imports that failure: the run is failed, PROCESS_EXITED, Dagster's verdict, and the
    sweep, when due, has nothing to recover. Mutation caught: the sweep at once after
    the exit (the run failed_resumable, PROCESS_ORPHANED, and Dagster's failure refused)."""
    from dagster._utils import get_run_crash_explanation

    from epochledger.import_dagster import FollowRound, follow_dagster
    from epochledger.ledger.events import RunRecovered

    rounds: list[FollowRound] = []
    stop = threading.Event()
    with _instance(home.path) as instance:
        [run_id] = instance.get_run_ids()

        def on_round(r: FollowRound) -> None:
            rounds.append(r)
            if r.round == 1:
                os.kill(worker.pid, signal.SIGKILL)
                worker.join(10)
            elif r.probe is not None and r.probe.exited:
                dagster_run = instance.get_run_by_id(run_id)
                instance.report_engine_event(
                    get_run_crash_explanation(prefix=f"Run execution process for {run_id}", exit_code=-9),
                    dagster_run,
                )
                instance.report_run_failed(dagster_run)
            if r.swept is not None and r.round > 1:
                stop.set()
            assert r.round < 400, "no sweep came"

        with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
            follow_dagster(ledger, str(home.path), stop=stop, interval=0.05, local_workers=True, on_round=on_round)
            run = "dagster:" + run_id
            state = ledger.get_run(run)
            assert (state.status, state.code) == ("failed", "PROCESS_EXITED")
            assert state.error is not None and "terminated by signal 9" in state.error
            slot = ledger.process(run)
            assert slot is not None and slot.current is not None
            assert slot.current.exited_by is not None and slot.current.exited_by.startswith("probe@")
            assert not any(isinstance(r.event, RunRecovered) for r in ledger.history(run))
    [exit_round] = [r for r in rounds if r.probe is not None and r.probe.exited]
    assert exit_round.swept is None
    last = rounds[-1]
    assert last.swept is not None and last.swept.sweep is None  # no orphan left: nothing to sweep
    assert not any(r.imported.refused for r in rounds)
