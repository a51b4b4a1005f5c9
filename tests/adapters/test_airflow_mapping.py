"""The Airflow adapter's mapping and its Recorder, without Airflow (rule E1; docs/adapters.md,
"Airflow"). The hooks' sequence is replayed on a real SQLite ledger as the plugin
(epochledger/adapters/airflow_plugin.py) calls it; the scheduler's watcher runs as the
real process it is. tests/adapters/test_airflow_adapter.py runs the same against a real Airflow.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from epochledger import Ledger, open_ledger
from epochledger import spool as spool_mod
from epochledger.adapters import airflow as adapter
from epochledger.adapters.airflow import DAG_RUNS, Recorder, TaskTry, failure_code, ledger_id
from epochledger.ledger.events import tag_of
from tests.conftest import need_pg
from tests.helpers.pg_proxy import Proxy

HOST = socket.gethostname()


def _t(
    task: str = "t", try_number: int = 1, dag: str = "d", run_id: str = "manual__2024-01-01T00:00:00+00:00"
) -> TaskTry:
    return TaskTry(dag_id=dag, run_id=run_id, task_id=task, try_number=try_number)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def spool(tmp_path: Path) -> str:
    return str(tmp_path / "spool")


_RECS: list[Recorder] = []


@pytest.fixture(autouse=True)
def _recorders() -> Iterator[None]:
    yield
    for rec in _RECS:
        if rec.spool is not None:
            rec.spool.close(1.0)
            rec.spool = None
    _RECS.clear()


def _rec(store: str, spool: str, **kw: Any) -> Recorder:
    """A Recorder as the plugin makes one, through a spool in `spool` (a short hold:
    a refused line is written down in 0.2 s)."""
    rec = Recorder(store, spool=spool, hold=0.2, **kw)
    _RECS.append(rec)
    return rec


def _watcher(store: str, spool: str) -> subprocess.Popen[bytes]:
    """The scheduler's watcher, a real process watching for this test's process (the
    scheduler), probing every 0.2 s."""
    argv = ["watch", "--store", store, "--spool", spool, "--pid", str(os.getpid()), "--host", HOST, "--interval", "0.2"]
    return subprocess.Popen([sys.executable, "-m", "epochledger.adapters.airflow", *argv])


def _read(store: str) -> Ledger:
    """The ledger, once every Recorder's spool is in it."""
    for rec in _RECS:
        assert rec.flush(30), rec.spool.last_error if rec.spool else None
    return open_ledger(store)


def _tags(store: str, run: str) -> list[str]:
    with _read(store) as led:
        return [tag_of(r.event) for r in led.history(run)]


def test_E1_I2_a_try_is_a_run_named_by_its_parts_and_its_retry_names_it_as_parent() -> None:
    first, second = _t(try_number=1), _t(try_number=2)
    assert first.run == "airflow/d/manual__2024-01-01T00:00:00+00:00/t/-1/1"
    assert first.parent is None and second.parent == first.run
    assert first.dag_run == "airflow/d/manual__2024-01-01T00:00:00+00:00"
    assert second.labels["airflow.try_number"] == "2" and second.labels["airflow.dag_run"] == first.dag_run
    # Past the ledger's id bound, a hash; the labels keep the parts whole.
    long = _t(task="x" * 250)
    assert long.run.startswith("airflow/h/") and len(long.run) == len("airflow/h/") + 40
    assert long.labels["airflow.task_id"] == "x" * 250


class AirflowTaskTimeout(Exception):  # Airflow's classes are matched by name, along the MRO
    pass


class AirflowSensorTimeoutLike(AirflowTaskTimeout):
    pass


class AirflowFailException(Exception):
    pass


class HITLTimeoutError(Exception):  # the standard provider's human in the loop: nobody answered in time
    pass


class HITLRejectException(Exception):  # an ApprovalOperator with fail_on_reject, rejected
    pass


def test_E1_failure_codes_follow_the_exception_class_and_the_user_can_extend_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert failure_code(AirflowTaskTimeout("late"))[0] == "TIMEOUT"
    assert failure_code(AirflowSensorTimeoutLike("late"))[0] == "TIMEOUT"  # a subclass gets its code
    assert failure_code(AirflowFailException("no"))[0] == "FAIL_NODE"
    assert failure_code(HITLTimeoutError("no answer"))[0] == "TIMEOUT"
    assert failure_code(HITLRejectException('Receive "Reject"'))[0] == "FAIL_NODE"
    code, cause = failure_code(ValueError("bad"))
    assert code == "ENGINE_ERROR" and cause is not None and (cause.code, cause.message) == ("ValueError", "bad")
    assert failure_code("a message") == ("ENGINE_ERROR", None) and failure_code(None) == ("ENGINE_ERROR", None)
    monkeypatch.setitem(adapter.FAILURE_CODES, "ValueError", "USAGE_LIMIT_BLOCKED")
    assert failure_code(ValueError("quota"))[0] == "USAGE_LIMIT_BLOCKED"


def test_E1_a_try_that_fails_then_succeeds_on_retry_is_two_runs_under_two_task_runner_epochs(
    store: str, spool: str
) -> None:
    rec = _rec(store, spool, host="h")
    epoch = rec.component_started("task-runner")
    assert epoch is not None and rec.process == ledger_id("h", "task-runner", str(os.getpid()))
    rec.task_running(_t(try_number=1))
    rec.task_failed(_t(try_number=1), retry=True, error=ValueError("first"))
    rec.component_stopping()
    rec.component_started("task-runner")  # the retry runs in another task runner (here: the same pid again)
    rec.task_running(_t(try_number=2))
    rec.task_succeeded(_t(try_number=2))
    with _read(store) as led:
        one, two = led.get_run(_t(try_number=1).run), led.get_run(_t(try_number=2).run)
        assert (str(one.status), one.code, one.epoch) == ("failed_resumable", "ENGINE_ERROR", epoch)
        assert str(two.status) == "finished" and two.parent == one.run and two.epoch != epoch
    assert _tags(store, _t(try_number=1).run) == ["run.queued", "run.started", "run.failed"]


def test_E1_a_last_try_that_fails_is_failed_and_a_skip_is_finished_with_its_reason(store: str, spool: str) -> None:
    rec = _rec(store, spool, host="h")
    rec.component_started("task-runner")
    rec.task_running(_t("a"))
    rec.task_failed(_t("a"), retry=False, error=AirflowTaskTimeout("execution_timeout"))
    rec.task_running(_t("b"))
    rec.task_skipped(_t("b"))
    with _read(store) as led:
        a, b = led.get_run(_t("a").run), led.get_run(_t("b").run)
        assert (str(a.status), a.code) == ("failed", "TIMEOUT")
        assert (str(b.status), b.reason) == ("finished", "skipped by the task")


@pytest.mark.parametrize("state", sorted(adapter.WAIT_STATES))
def test_E1_O2_a_try_airflow_defers_is_paused_for_the_orchestrator_never_an_orphan_and_resumed_as_its_next_attempt(
    store: str, spool: str, state: str
) -> None:
    """A deferral, a reschedule, a wait for input: the task runner ends with the try
    still Airflow's, pauses it (kind `orchestrator`) and stops; the scheduler's probe
    and sweep then leave it alone (no process owns it while it waits: before the pause
    it was judged an orphan, PROCESS_ORPHANED). The task runner Airflow resumes it in
    resumes and starts it, attempt 2, and finishes it."""
    rec = _rec(store, spool, host=HOST)
    first = rec.component_started("task-runner")
    rec.task_running(_t())
    rec.task_waiting(_t(), state)
    rec.component_stopping()
    with _read(store) as led:
        run = led.get_run(_t().run)
        assert (str(run.status), run.code, run.reason) == ("paused_orchestrator", "", f"airflow: {state}")
        assert first is not None and led.epoch(first).stopped_at is not None
        scheduler = led.boot(ledger_id(HOST, "scheduler", "1"))
        assert adapter.reap(led, spool, host=HOST, epoch=scheduler.epoch) == []
        led.probe(epoch=scheduler.epoch)
        led.sweep(scheduler.epoch)
        assert str(led.get_run(_t().run).status) == "paused_orchestrator"
        assert led.orphaned() == []
    second = rec.component_started("task-runner")
    rec.task_running(_t(), resumed="next_method=execute_complete")
    rec.task_succeeded(_t())
    with _read(store) as led:
        run = led.get_run(_t().run)
        assert (str(run.status), run.attempt, run.epoch) == ("finished", 2, second)
    assert _tags(store, _t().run) == [
        "run.queued",
        "run.started",
        "run.paused",
        "run.resumed",
        "run.started",
        "run.finished",
    ]


def test_E1_a_waiting_try_that_airflow_ends_by_a_mark_or_its_schedulers_failure_is_ended_from_its_wait(
    store: str, spool: str
) -> None:
    """Three tries wait (a reschedule); Airflow ends each without running it again: a
    user marks one failed and one success by hand (the API server's hooks), and the
    scheduler fails the third (its race with a sensor in reschedule mode: the
    executor's word that a poke ended reaches it once the next poke is queued, and
    `handle_failure` calls the failure hook with previous_state running). Each is
    recorded from the wait, as Airflow said it, and nothing is refused. Before, the
    ledger refused the three (a pause was left only by a resume or a cancel), wrote
    them in NAME.rejected, and kept the tries paused_orchestrator."""
    rec = _rec(store, spool, host="h")
    rec.component_started("task-runner")
    tries = {state: _t(state) for state in ("failed", "success", "scheduler")}
    for t in tries.values():
        rec.task_running(t)
        rec.task_waiting(t, "up_for_reschedule")
    rec.component_stopping()
    with _read(store) as led:
        assert {str(led.get_run(t.run).status) for t in tries.values()} == {"paused_orchestrator"}
    api = _rec(store, spool, host="h")  # the API server's process
    api.task_marked(tries["failed"], "failed", note="TaskInstance's state was manually set to `failed`.")
    api.task_marked(tries["success"], "success")
    scheduler = _rec(store, spool, host="h")
    error = "Executor reported that the task instance finished with state success, but its state attribute is queued."
    scheduler.task_failed_by_scheduler(tries["scheduler"], retry=False, error=error)
    with _read(store) as led:
        got = {k: led.get_run(t.run) for k, t in tries.items()}
        assert {k: (str(r.status), r.code, r.actor, r.attempt) for k, r in got.items()} == {
            "failed": ("failed", "CANCELLED", "airflow-api", 1),
            "success": ("finished", "", "airflow-api", 1),
            "scheduler": ("failed", "PROCESS_EXITED", "airflow-scheduler", 1),
        }
        assert got["scheduler"].error == error
    for t in tries.values():
        assert _tags(store, t.run)[2:] in (["run.paused", "run.failed"], ["run.paused", "run.finished"])
    assert [r.spool.rejected for r in (rec, api, scheduler) if r.spool is not None] == [0, 0]
    assert not list(Path(spool).glob("*.rejected"))


def test_E1_O7_the_schedulers_failure_of_a_running_try_is_process_exited_with_no_exit_fact(
    store: str, spool: str
) -> None:
    rec = _rec(store, spool, host="h")
    epoch = rec.component_started("task-runner")
    assert epoch is not None
    rec.task_running(_t())
    _rec(store, spool, host="h").task_failed_by_scheduler(_t(), retry=False, error="heartbeat timed out")
    with _read(store) as led:
        run = led.get_run(_t().run)
        assert (str(run.status), run.code, run.actor) == ("failed", "PROCESS_EXITED", "airflow-scheduler")
        assert led.epoch(epoch).exited_at is None  # Airflow saw no process die: no exit fact (O7)


def test_E1_F1_the_schedulers_failure_of_a_try_the_ledger_ended_already_leaves_its_verdict_and_is_kept_as_evidence(
    store: str, spool: str
) -> None:
    rec = _rec(store, spool, host="h")
    rec.component_started("task-runner")
    rec.task_running(_t())
    rec.task_failed(_t(), retry=False, error=ValueError("x"))
    before = _tags(store, _t().run)
    scheduler = _rec(store, spool, host="h")
    scheduler.task_failed_by_scheduler(_t(), retry=False, error="executor says failed")
    assert _tags(store, _t().run) == [*before, "run.fenced"]  # evidence: no transition
    with _read(store) as led:
        run = led.get_run(_t().run)
        assert (str(run.status), run.code, run.actor) == ("failed", "ENGINE_ERROR", "airflow")
    assert scheduler.spool is not None and scheduler.spool.rejected == 1  # written down, with its reason


def test_E1_a_try_the_scheduler_failed_before_it_ever_ran_is_queued_then_failed(store: str, spool: str) -> None:
    _rec(store, spool, host="h").task_failed_by_scheduler(_t(), retry=True, error="could not start", ran=False)
    assert _tags(store, _t().run) == ["run.queued", "run.failed"]
    with _read(store) as led:
        assert str(led.get_run(_t().run).status) == "failed_resumable"


def test_E1_a_dag_run_is_a_run_of_the_nominal_slot_and_its_unrun_tries_are_recorded_at_its_end(
    store: str, spool: str
) -> None:
    rec = _rec(store, spool, host="h")
    rec.component_started("task-runner")
    rec.dag_run_running("d", "r1")
    rec.task_running(_t("up", run_id="r1"))
    rec.task_failed(_t("up", run_id="r1"), retry=False, error=ValueError("x"))
    not_run = {_t("down", 0, run_id="r1"): "upstream_failed", _t("branch", 0, run_id="r1"): "skipped"}
    rec.dag_run_ended("d", "r1", success=False, msg="task_failure", not_run=not_run)
    rec.dag_run_ended("d", "r1", success=False, msg="task_failure", not_run=not_run)  # said twice: nothing new
    with _read(store) as led:
        dag_run = led.get_run(ledger_id("d", "r1"))
        assert (str(dag_run.status), dag_run.code, dag_run.process, dag_run.epoch) == (
            "failed",
            "ENGINE_ERROR",
            DAG_RUNS,
            None,
        )
        down = led.get_run(_t("down", 0, run_id="r1").run)
        assert (str(down.status), down.code) == ("failed", "JOIN_FAILED")
        assert str(led.get_run(_t("branch", 0, run_id="r1").run).status) == "cancelled"
        assert led.unjudged() == []  # a running DAG run names a slot: never a run no slot names (O9)
    assert _tags(store, ledger_id("d", "r1")) == ["run.queued", "run.started", "run.failed"]
    for msg, code in (("all_tasks_deadlocked", "JOIN_FAILED"), ("timed_out", "TIMEOUT")):
        rec.dag_run_running("d", msg)
        rec.dag_run_ended("d", msg, success=False, msg=msg)
        with _read(store) as led:
            assert led.get_run(ledger_id("d", msg)).code == code


def test_E1_a_write_the_ledger_refuses_is_written_down_with_its_reason_and_never_raised_into_airflow(
    store: str, spool: str, caplog: pytest.LogCaptureFixture
) -> None:
    rec = _rec(store, spool, host="h")
    with caplog.at_level(logging.WARNING, logger="epochledger.spool"):
        rec.task_succeeded(_t())  # never started: the ledger refuses it, after the hold
        with _read(store) as led:
            assert led.runs() == []
    assert rec.spool is not None and rec.spool.rejected == 1
    rejected = Path(rec.spool.rejected_path).read_text()
    assert _t().run in rejected and "run.finished" in rejected
    assert any("refused for good" in r.getMessage() for r in caplog.records)


def test_E1_a_recorder_reached_in_a_forked_child_opens_its_own_spool_and_has_booted_nothing(
    store: str, spool: str
) -> None:
    rec = _rec(store, spool, host="h")
    parent_epoch = rec.component_started("task-runner")
    assert parent_epoch is not None and rec.flush(30)
    parent_spool = rec.spool
    forked_at = datetime.now(UTC)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what Airflow's executor and supervisor forks see
        os.close(read)
        ok = rec.epoch is None and rec.spool is None
        child = rec.component_started("task-runner")
        ok = ok and child is not None and rec.process == ledger_id("h", "task-runner", str(os.getpid()))
        ok = ok and rec.spool is not parent_spool and rec.flush(30)
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    assert rec.epoch == parent_epoch and rec.spool is parent_spool
    with _read(store) as led:
        [child] = [e for e in led.epochs() if e.process == ledger_id("h", "task-runner", str(pid))]
        # Its boot instant is the child's start, not the start of the process that made the
        # Recorder (this test's, seconds earlier): the clock measures uptime from its own
        # process's start (rule O1), so the child makes its own.
        assert child.booted_at >= forked_at - timedelta(seconds=0.5), (child.booted_at, forked_at)


def test_E1_O7_the_schedulers_watcher_starts_its_slot_probes_the_host_and_records_its_stop(
    store: str, spool: str
) -> None:
    """The watcher, a real process whose parent is this test (the scheduler it watches):
    a task runner SIGKILLed without a word gets its exit from the watcher's probe, its
    try is recovered, and SIGTERM (the scheduler's before_stopping) stops the slot."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = _rec(store, spool)
        with _read(store) as led:
            epoch = led.boot(ledger_id(HOST, "task-runner", str(victim.pid)), pid=victim.pid)
        rec.epoch, rec.process = epoch.epoch, epoch.process
        rec.task_running(_t())
        assert rec.flush(30)
        watcher = _watcher(store, spool)
        slot = ledger_id(HOST, "scheduler", str(os.getpid()))
        with _read(store) as led:
            deadline = time.monotonic() + 30
            while led.process(slot) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert led.process(slot) is not None, "the watcher never booted the scheduler's slot"
            victim.kill()
            victim.wait()
            while str(led.get_run(_t().run).status) == "running" and time.monotonic() < deadline:
                time.sleep(0.05)
            run = led.get_run(_t().run)
            assert (str(run.status), run.code) == ("failed_resumable", "PROCESS_ORPHANED")
            assert led.epoch(epoch.epoch).exited_by == f"probe@{HOST}"
            watcher.send_signal(signal.SIGTERM)
            assert watcher.wait(timeout=20) == 0
            scheduler = [e for e in led.epochs(retired=True) if e.process == slot]
            assert len(scheduler) == 1 and scheduler[0].stopped_at is not None
    finally:
        victim.kill()
        victim.wait()


def test_E1_L2_a_users_mark_by_hand_is_recorded_as_the_operators_and_a_second_word_appends_nothing(
    store: str, spool: str
) -> None:
    rec = _rec(store, spool, host="h")
    rec.component_started("task-runner")
    for task in ("a", "b"):
        rec.task_running(_t(task))
    # The tries are in the ledger before a user can mark them (each spool has its own
    # writer: under load the runner's first open of the store outlasted the short hold,
    # and the marks were refused as marks of runs never seen).
    assert rec.flush(30), rec.spool.last_error if rec.spool else None
    api = _rec(store, spool, host="h")  # the API server's process: no epoch of its own
    api.task_marked(_t("a"), "failed", note="TaskInstance's state was manually set to `failed`.")
    api.task_marked(_t("b"), "success")
    assert api.flush(30), api.spool.last_error if api.spool else None
    rec.task_failed(_t("a"), retry=False, error=AirflowTaskTerminatedLike("killed"))  # the task runner, after
    api.task_marked(_t("never"), "success")  # a try the ledger never saw: nothing to move
    with _read(store) as led:
        a, b = led.get_run(_t("a").run), led.get_run(_t("b").run)
        assert (str(a.status), a.code, a.actor) == ("failed", "CANCELLED", "airflow-api")
        assert (str(b.status), b.actor) == ("finished", "airflow-api")
        assert [r.run for r in led.runs()] == [_t("a").run, _t("b").run]
    rec.dag_run_running("d", "m")
    api.dag_run_ended("d", "m", success=False, msg="Dag Run's state was manually set to `failed`.")
    with _read(store) as led:
        assert led.get_run(ledger_id("d", "m")).code == "CANCELLED"


class AirflowTaskTerminatedLike(Exception):
    pass


def test_E1_postgres_taken_away_during_a_burst_of_task_transitions_records_each_once_in_order(
    pg_url: str, tmp_path: Path
) -> None:
    """The store goes away (the port closed, live connections reset), comes back with
    its first commit's answer cut (CommitUnknown), then stops answering for a while,
    during a burst of 40 tries in one task runner: no hook waits on it, and when it is
    back every transition is in once, in the order Airflow made them."""
    need_pg()
    proxy = Proxy()
    try:
        rec = _rec(proxy.url(pg_url) + "&connect_timeout=2", str(tmp_path / "spool"), host="h")
        epoch = rec.component_started("task-runner")
        tries = [_t(f"t{i}") for i in range(40)]
        slowest = 0.0
        for i, t in enumerate(tries):
            if i == 8:
                proxy.refuse()
            elif i == 24:
                proxy.arm("after_commit")
                proxy.forward()
            elif i == 30:
                proxy.blackhole()
            elif i == 36:
                proxy.forward()
            for hook in (rec.task_running, rec.task_succeeded if i % 3 else _failing(rec)):
                began = time.perf_counter()
                hook(t)
                slowest = max(slowest, time.perf_counter() - began)
            time.sleep(0.03)
        assert rec.flush(60), rec.spool.last_error if rec.spool else None
        assert rec.spool is not None and rec.spool.failures > 0  # the outage was seen, and waited out
        assert rec.spool.rejected == 0
    finally:
        proxy.close()
    with open_ledger(pg_url) as led:
        starts = []
        for i, t in enumerate(tries):
            history = led.history(t.run)
            end = "run.finished" if i % 3 else "run.failed"
            assert [tag_of(r.event) for r in history] == ["run.queued", "run.started", end]  # type: ignore[union-attr]
            assert led.get_run(t.run).epoch == epoch
            starts.append(history[1].position)
        assert starts == sorted(starts)  # in the order Airflow made them
        boots = [e for e in led.epochs() if e.epoch == epoch]
        assert len(boots) == 1
    assert slowest < 0.05, f"a hook waited {slowest * 1000:.1f} ms"


def _failing(rec: Recorder) -> Callable[[TaskTry], None]:
    return lambda t: rec.task_failed(t, retry=False, error=ValueError("no"))


def test_E1_O7_a_dead_task_runners_spool_is_imported_its_exit_recorded_and_its_running_try_recovered(
    store: str, spool: str
) -> None:
    """A task runner whose store never answered (its writer is stuck opening it) finishes
    one try, starts another and is SIGKILLed: its lines are only in its spool. The
    watcher's reap imports them, records the exit (its spool's lock came free) and
    sweeps: the finished try stays finished, the running one is recovered. A second
    reap finds nothing."""
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from epochledger.adapters.airflow import Recorder, TaskTry
        rec = Recorder({store!r}, spool={spool!r}, host={HOST!r}, opener=lambda s: time.sleep(3600))
        rec.component_started("task-runner")
        for task in ("done", "busy"):
            rec.task_running(TaskTry(dag_id="d", run_id="r", task_id=task))
        rec.task_succeeded(TaskTry(dag_id="d", run_id="r", task_id="done"))
        print(rec.epoch, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, check=False)
    epoch = out.stdout.decode().strip()
    assert out.returncode == -signal.SIGKILL and epoch, out.stderr.decode()
    with open_ledger(store) as led:
        assert led.runs() == []  # nothing reached the store
        scheduler = led.boot(ledger_id(HOST, "scheduler", str(os.getpid())))
        dead = adapter.reap(led, spool, host=HOST, epoch=scheduler.epoch)
        assert [(d.owner.epoch, d.owner.stopped) for d in dead] == [(epoch, False)]
        done = led.get_run(TaskTry(dag_id="d", run_id="r", task_id="done").run)
        busy = led.get_run(TaskTry(dag_id="d", run_id="r", task_id="busy").run)
        assert str(done.status) == "finished"
        assert (str(busy.status), busy.code) == ("failed_resumable", "PROCESS_ORPHANED")
        assert led.epoch(epoch).exited_by == f"airflow-watcher@{HOST}"
        assert adapter.reap(led, spool, host=HOST, epoch=scheduler.epoch) == []
    assert [f for f in os.listdir(spool) if not f.endswith(".rejected")] == []


def _runner(store: str, spool: str, *, stuck: bool) -> float:
    """A task runner's life in a process of its own (the plugin's calls: its start, one try
    that succeeds, its stop), its store never answering if `stuck` (its writer hangs in
    the open). Returns how long its stop took (before_stopping's share of its exit)."""
    script = textwrap.dedent(
        f"""
        import time
        from epochledger.adapters.airflow import Recorder, TaskTry
        opener = (lambda s: time.sleep(3600)) if {stuck!r} else None
        rec = Recorder({store!r}, spool={spool!r}, host={HOST!r}, **({{"opener": opener}} if opener else {{}}))
        t = TaskTry(dag_id="d", run_id="r", task_id="t")
        rec.component_started("task-runner")
        rec.task_running(t)
        rec.task_succeeded(t)
        t0 = time.monotonic()
        rec.component_stopping()
        print(time.monotonic() - t0, flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr.decode()
    return float(out.stdout.decode().split()[-1])


def _files(spool: str) -> list[str]:
    return sorted(f for f in os.listdir(spool) if f != spool_mod.WATCHING and not f.endswith(".rejected"))


def test_E1_a_task_runners_exit_leaves_its_spool_to_a_watching_reaper_and_drains_it_itself_without_one(
    store: str, spool: str
) -> None:
    """While a reaper holds the directory's watch, a task runner's stop does not wait for
    the store: with a store that never answers it returns at once (it waited CLOSE_S
    before), its lines on disk in its spool, and the reap after its exit lands them: the
    try finished, the epoch stopped cleanly (no exit fact). Without the watch the stop
    drains the spool itself: every line is in the store when the process exits, and its
    files are gone. Mutation caught: leaving without the watch (the second half finds
    nothing in the store), or waiting with it (the first half's stop takes CLOSE_S)."""
    t = TaskTry(dag_id="d", run_id="r", task_id="t")
    open_ledger(store).close()
    watch = spool_mod.watch(spool)
    assert watch is not None and spool_mod.watched(spool)
    try:
        took = _runner(store, spool, stuck=True)
        assert took < adapter.CLOSE_S / 4, took
        assert [f for f in _files(spool) if f.endswith(".spool")], "its lines were not left in its spool"
        with open_ledger(store) as led:
            assert led.runs() == []  # nothing reached the store: the reap's to land
            scheduler = led.boot(ledger_id(HOST, "scheduler", str(os.getpid())))
            [dead] = adapter.reap(led, spool, host=HOST, epoch=scheduler.epoch)
            assert dead.owner.stopped and dead.lines == 6  # boot, queued, started, finished, stopping, stopped
            run = led.get_run(t.run)
            assert str(run.status) == "finished"
            epoch = led.epoch(run.epoch)
            assert epoch.stopped_at is not None and epoch.exited_at is None
        assert _files(spool) == []
    finally:
        os.close(watch)
    assert not spool_mod.watched(spool)
    store2 = store.replace("ledger.db", "ledger2.db")
    open_ledger(store2).close()
    _runner(store2, spool, stuck=False)
    assert _files(spool) == []  # drained and closed before the exit: nothing left to reap
    with open_ledger(store2) as led:
        run = led.get_run(t.run)
        assert str(run.status) == "finished" and led.epoch(run.epoch).stopped_at is not None


def test_E1_a_watcher_sigkilled_lets_its_watch_go_and_task_runners_drain_their_own_spools(
    store: str, spool: str
) -> None:
    """The scheduler's watcher holds the spool directory's watch from its first round;
    SIGKILLed, the kernel drops it, and the next task runner's exit drains its own
    spool into the store (nobody would reap it)."""
    open_ledger(store).close()
    watcher = _watcher(store, spool)
    try:
        deadline = time.monotonic() + 60
        while not spool_mod.watched(spool) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert spool_mod.watched(spool), "the watcher never took the watch"
    finally:
        watcher.kill()
        watcher.wait()
    assert not spool_mod.watched(spool)
    _runner(store, spool, stuck=False)
    assert [f for f in _files(spool) if f.startswith("airflow.")] == []
    with open_ledger(store) as led:
        run = led.get_run(TaskTry(dag_id="d", run_id="r", task_id="t").run)
        assert str(run.status) == "finished"


def test_E1_O7_the_watchers_probe_leaves_a_spooled_epoch_to_the_reap_so_a_left_stop_lands_before_any_exit(
    store: str, spool: str
) -> None:
    """A task runner left its spool to the watcher (its boot had landed, its try and its
    stop had not) and exited after the round's reap: the watcher's probe finds its pid
    gone, but the epoch owns a spool in the directory, so the probe leaves it to the next
    reap, which lands the try and the clean stop. Mutation caught: the plain
    `Ledger.probe` (what the watcher ran before; seen with a real Airflow): the exit is
    recorded first, and the try's start and its finish are fenced as a stale epoch's."""
    t = TaskTry(dag_id="d", run_id="r", task_id="t")
    open_ledger(store).close()
    watch = spool_mod.watch(spool)
    try:
        _runner(store, spool, stuck=True)
    finally:
        assert watch is not None
        os.close(watch)
    [name] = [f[: -len(".spool")] for f in os.listdir(spool) if f.endswith(".spool")]
    with open(os.path.join(spool, name + ".spool"), "rb") as f:
        boot = f.readline()
    with open_ledger(store) as led:
        led.import_ndjson([boot])  # what the runner's writer landed before it exited
        [(epoch, ended)] = led.liveness()
        assert ended is None
        scheduler = led.boot(ledger_id(HOST, "scheduler", str(os.getpid())))
        adapter.probe(led, spool, epoch=scheduler.epoch)
        assert led.epoch(epoch.epoch).exited_at is None  # the reap's to judge
        adapter.reap(led, spool, host=HOST, epoch=scheduler.epoch)
        run = led.get_run(t.run)
        assert str(run.status) == "finished", _tags(store, t.run)
        state = led.epoch(epoch.epoch)
        assert state.stopped_at is not None and state.exited_at is None
