"""The Airflow 3 adapter against a real Airflow (rule E1; docs/adapters.md, "Airflow").

One Airflow for the module (tests/helpers/airflow_instance.py: API server, scheduler with the
LocalExecutor, DAG processor, triggerer, on SQLite), twelve DAG runs triggered at once, each test
judging one: a success, a failure retried, a task process SIGKILLed under its live
supervisor, a task lost with its supervisor (Airflow's heartbeat detection beside
the adapter's probe), a sensor in reschedule mode (Airflow's own wait, resumed by
Airflow in a new task runner), a deferrable sensor whose trigger runs in the triggerer,
three waits for input (human in the loop: one answered "Approve" and one "Reject" through
the REST API, one left to its response timeout), two sensors in reschedule mode marked
failed and success by hand while they wait, and a task runner that leaves its spool to the
watcher; the last test SIGKILLs the watcher and triggers one more, whose task runner drains its own. Skipped, saying why, when the Airflow venv is missing; with
EPOCHLEDGER_TEST_AIRFLOW=require (CI) that is a failure.

The mapping itself (ids, codes, the failure classes) is tested without Airflow in
tests/adapters/test_airflow_mapping.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from epochledger import open_ledger
from epochledger import spool as spool_mod
from epochledger.adapters.airflow import DAG_RUNS, TaskTry, ledger_id
from epochledger.ledger.events import tag_of
from tests.helpers.airflow_instance import (
    AIRFLOW,
    HEARTBEAT_TIMEOUT_S,
    HITL_TIMEOUT_S,
    POKE_INTERVAL_S,
    PROBE_INTERVAL_S,
    REQUIRE,
    Airflow,
    airflow_time,
    running,
    wait_for,
)

pytestmark = pytest.mark.xdist_group("airflow")  # one Airflow per run, on one worker

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Airflow]:
    if not AIRFLOW.exists():
        message = f"the Airflow venv is missing ({AIRFLOW}): `make test` makes it (make .venv-airflow/.installed)"
        if REQUIRE:
            pytest.fail("EPOCHLEDGER_TEST_AIRFLOW=require but " + message)
        pytest.skip(message)
    home = tmp_path_factory.mktemp("airflow")
    gen = running(home, f"sqlite:///{home / 'ledger.db'}")
    instance = next(gen)
    instance.runs = {
        dag: instance.trigger(dag)
        for dag in (
            "el_ok",
            "el_retry",
            "el_kill",
            "el_lost",
            "el_wait",
            "el_mark_failed",
            "el_mark_success",
            "el_left",
            "el_defer",
            "el_hitl_approve",
            "el_hitl_reject",
            "el_hitl_timeout",
        )
    }
    try:
        yield instance
    finally:
        gen.close()


def _ledger(af: Airflow) -> Any:
    return open_ledger(af.ledger_url, create=False)


def _try(af: Airflow, dag: str, task: str, try_number: int = 1) -> TaskTry:
    return TaskTry(dag_id=dag, run_id=af.runs[dag], task_id=task, try_number=try_number)


def _dag_run(af: Airflow, dag: str) -> str:
    return ledger_id(dag, af.runs[dag])


def _status(af: Airflow, run: str) -> str | None:
    with _ledger(af) as led:
        try:
            return str(led.get_run(run).status)
        except Exception:
            return None


def _epoch(af: Airflow, epoch: str) -> Any:
    with _ledger(af) as led:
        return led.epoch(epoch)


def _tags(led: Any, run: str) -> list[str]:
    return [tag_of(r.event) for r in led.history(run)]


def _ended(af: Airflow, dag: str, timeout: float = 90) -> str:
    return wait_for(
        f"{dag}'s DAG run to end in Airflow",
        lambda: s if (s := af.dag_run_state(dag)) in ("success", "failed") else None,
        timeout,
        every=0.25,
    )


WATCHERS = (f"airflow-watcher@{HOST}", f"probe@{HOST}")  # the watcher's reap, or its probe


def _figures(af: Airflow, name: str, figures: dict[str, Any]) -> None:
    """The measured figures, printed (pytest -s) and kept beside the instance's logs."""
    print(f"\n{name}: {json.dumps(figures)}")
    with (af.home / "figures.json").open("a") as f:
        f.write(json.dumps({name: figures}) + "\n")


def test_E1_a_task_that_succeeds_is_one_try_queued_started_finished_under_its_task_runners_epoch(
    airflow: Airflow,
) -> None:
    assert _ended(airflow, "el_ok") == "success"
    ti = airflow.ti("el_ok", "hello")
    assert ti is not None
    t = _try(airflow, "el_ok", "hello")
    with _ledger(airflow) as led:
        wait_for(
            "the dag run's end in the ledger",
            lambda: _status(airflow, _dag_run(airflow, "el_ok")) == "finished" or None,
            10,
        )
        run = led.get_run(t.run)
        assert str(run.status) == "finished"
        assert _tags(led, t.run) == ["run.queued", "run.started", "run.finished"]
        assert run.workflow == "el_ok" and run.parent is None
        assert run.labels["airflow.task_id"] == "hello" and run.labels["airflow.try_number"] == "1"
        # Its owner is the task runner process Airflow ran it in: one slot per process (rule O8),
        # stopped cleanly at before_stopping.
        assert run.process == ledger_id(HOST, "task-runner", str(ti["pid"]))
        epoch = led.epoch(run.epoch)
        assert epoch.pid == ti["pid"] and epoch.stopped_at is not None and epoch.exited_at is None
        dag_run = led.get_run(_dag_run(airflow, "el_ok"))
        assert _tags(led, dag_run.run) == ["run.queued", "run.started", "run.finished"]
        assert dag_run.epoch is None and dag_run.process == DAG_RUNS  # no process owns a DAG run
        # The scheduler is a slot of its own, live while it runs, with its probe.
        schedulers = [e for e in led.epochs() if "/scheduler/" in e.process]
        assert len(schedulers) == 1 and schedulers[0].live


def test_E1_I2_a_failed_try_is_failed_resumable_and_its_retry_a_new_run_linked_to_it(airflow: Airflow) -> None:
    assert _ended(airflow, "el_retry") == "success"
    first, second = _try(airflow, "el_retry", "flaky", 1), _try(airflow, "el_retry", "flaky", 2)
    with _ledger(airflow) as led:
        wait_for(
            "the dag run's end in the ledger",
            lambda: _status(airflow, _dag_run(airflow, "el_retry")) == "finished" or None,
            10,
        )
        one = led.get_run(first.run)
        assert (str(one.status), one.code) == ("failed_resumable", "ENGINE_ERROR")  # up_for_retry
        assert one.cause is not None and one.cause.code == "ValueError" and one.cause.message == "first try fails"
        assert _tags(led, first.run) == ["run.queued", "run.started", "run.failed"]
        two = led.get_run(second.run)
        assert str(two.status) == "finished" and two.parent == first.run
        assert _tags(led, second.run) == ["run.queued", "run.started", "run.finished"]
        assert one.process != two.process  # each try its own task runner, its own slot (O8)
        assert str(led.get_run(_try(airflow, "el_retry", "after").run).status) == "finished"
        assert str(led.get_run(_dag_run(airflow, "el_retry")).status) == "finished"


def _kill_when_running(af: Airflow, dag: str, *, supervisor: bool) -> tuple[int, int, datetime]:
    t = _try(af, dag, "sleeper")
    task_pid, supervisor_pid = wait_for(f"{dag}'s task to start", lambda: af.pids(dag), 90, every=0.1)
    wait_for(f"{dag}'s start in the ledger", lambda: _status(af, t.run) == "running" or None, 90)
    killed = datetime.now(UTC)
    if supervisor:
        os.kill(supervisor_pid, signal.SIGKILL)  # the supervisor first: nobody is left to see the task die
    os.kill(task_pid, signal.SIGKILL)
    return task_pid, supervisor_pid, killed


def _ledger_gone(af: Airflow, t: TaskTry, timeout: float) -> tuple[Any, Any]:
    def recovered() -> tuple[Any, Any] | None:
        with _ledger(af) as led:
            run = led.get_run(t.run)
            if str(run.status) == "running":
                return None
            return run, led.epoch(run.epoch)

    return wait_for(f"{t.run} to leave running in the ledger", recovered, timeout, every=0.05)


def test_E1_O7_a_sigkilled_task_process_gets_its_exit_from_the_watcher_and_its_try_is_recovered(
    airflow: Airflow,
) -> None:
    t = _try(airflow, "el_kill", "sleeper")
    task_pid, _, killed = _kill_when_running(airflow, "el_kill", supervisor=False)
    run, epoch = _ledger_gone(airflow, t, timeout=PROBE_INTERVAL_S * 5 + 10)
    # The watcher saw the task runner gone (its spool's lock came free; the probe, if it
    # was first, its pid): the exit is a fact (O7), its try an orphan the sweep
    # recovered (O2, O5), and nothing else was said of it.
    assert epoch.pid == task_pid and epoch.exited_by in WATCHERS and epoch.exited_at is not None
    assert (str(run.status), run.code) == ("failed_resumable", "PROCESS_ORPHANED")
    assert _status(airflow, t.run) == "failed_resumable"
    assert _ended(airflow, "el_kill") == "failed"
    ti = airflow.ti("el_kill", "sleeper")
    assert ti is not None and ti["state"] == "failed"
    with _ledger(airflow) as led:
        wait_for(
            "the dag run's end in the ledger",
            lambda: _status(airflow, _dag_run(airflow, "el_kill")) == "failed" or None,
            10,
        )
        assert _tags(led, t.run) == ["run.queued", "run.started", "run.recovered"]
        downstream = led.get_run(_try(airflow, "el_kill", "downstream", 0).run)  # never ran: upstream_failed
        assert (str(downstream.status), downstream.code) == ("failed", "JOIN_FAILED")
        dag_run = led.get_run(_dag_run(airflow, "el_kill"))
        assert (str(dag_run.status), dag_run.code) == ("failed", "ENGINE_ERROR")
    _figures(
        airflow,
        "task process SIGKILLed, supervisor alive",
        {
            "airflow_s": (airflow_time(ti["end_date"]) - killed).total_seconds(),  # type: ignore[operator]
            "ledger_exit_s": (epoch.exited_at - killed).total_seconds(),
            "ledger_recovered_s": (run.updated_at - killed).total_seconds(),
            "probe_interval_s": PROBE_INTERVAL_S,
        },
    )


def test_E1_O7_a_task_lost_with_its_supervisor_is_seen_by_the_watcher_before_airflows_heartbeat_timeout(
    airflow: Airflow,
) -> None:
    t = _try(airflow, "el_lost", "sleeper")
    task_pid, _, killed = _kill_when_running(airflow, "el_lost", supervisor=True)
    run, epoch = _ledger_gone(airflow, t, timeout=PROBE_INTERVAL_S * 5 + 10)
    assert epoch.pid == task_pid and epoch.exited_by in WATCHERS
    assert (str(run.status), run.code) == ("failed_resumable", "PROCESS_ORPHANED")
    # Airflow notices when the heartbeat times out; its failure (the scheduler's
    # handle_failure) finds the try ended already: it moves nothing, and is kept as
    # evidence (run.fenced, rule F1) if it came.
    ti = wait_for(
        "Airflow to fail the lost task",
        lambda: r if (r := airflow.ti("el_lost", "sleeper")) is not None and r["state"] != "running" else None,
        HEARTBEAT_TIMEOUT_S * 4 + 30,
        every=0.1,
    )
    assert ti["state"] == "failed"
    assert _ended(airflow, "el_lost") == "failed"
    with _ledger(airflow) as led:
        wait_for(
            "the dag run's end in the ledger",
            lambda: _status(airflow, _dag_run(airflow, "el_lost")) == "failed" or None,
            10,
        )
        tags = _tags(led, t.run)
        assert tags[:3] == ["run.queued", "run.started", "run.recovered"] and tags[3:] in ([], ["run.fenced"]), tags
        assert (str(led.get_run(t.run).status), led.get_run(t.run).code) == ("failed_resumable", "PROCESS_ORPHANED")
    _figures(
        airflow,
        "task process and supervisor SIGKILLed",
        {
            "airflow_s": (airflow_time(ti["end_date"]) - killed).total_seconds(),  # type: ignore[operator]
            "ledger_exit_s": (epoch.exited_at - killed).total_seconds(),
            "ledger_recovered_s": (run.updated_at - killed).total_seconds(),
            "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
            "probe_interval_s": PROBE_INTERVAL_S,
            "airflow_started_s": airflow.started_s,
        },
    )


def test_E1_O2_a_rescheduled_sensor_waits_paused_for_airflow_never_an_orphan_and_is_resumed_in_a_new_task_runner(
    airflow: Airflow,
) -> None:
    """A sensor in reschedule mode: its poke finds no file, its task runner ends with
    the try up_for_reschedule and exits, and Airflow runs the next poke in a new task
    runner, the same try. The ledger pauses the try for the orchestrator: while Airflow
    holds it the watcher's reaps, probes and sweeps (every second) leave it alone, and
    the next poke's task runner resumes and starts it, the next attempt. Before the
    pause kind, the sweep recovered the try as PROCESS_ORPHANED and the later start
    was refused."""
    t = _try(airflow, "el_wait", "waits")
    wait_for(
        "the sensor's try to wait in the ledger", lambda: _status(airflow, t.run) == "paused_orchestrator" or None, 180
    )
    with _ledger(airflow) as led:
        paused = led.get_run(t.run)
        assert paused.reason == "airflow: up_for_reschedule" and paused.code == ""
        # its task runner is gone, cleanly (its stop left to the watcher's next reap, at the latest)
        stopped = wait_for("the poke's task runner's stop", lambda: _epoch(airflow, paused.epoch).stopped_at, 10)
        assert stopped is not None and _epoch(airflow, paused.epoch).exited_at is None
    # Airflow holds the try meanwhile (up_for_reschedule, then scheduled and queued for the
    # next poke), its try number unchanged: a reschedule is not a retry.
    seen = wait_for("the try's row", lambda: airflow.ti("el_wait", "waits"), 10)
    assert seen["try_number"] == 1, seen
    time.sleep(PROBE_INTERVAL_S * 3)  # the watcher's rounds (reap, probe, sweep) pass over it
    assert _status(airflow, t.run) != "failed_resumable"
    (airflow.home / "pids" / "el_wait.go").write_text("go")
    ended = _ended(airflow, "el_wait", timeout=180)
    assert ended == "success", f"el_wait's DAG run ended {ended}: " + airflow.why("el_wait", "waits")
    with _ledger(airflow) as led:
        wait_for("the try's end in the ledger", lambda: _status(airflow, t.run) == "finished" or None, 30)
        events = [r.event for r in led.history(t.run)]
        tags = [tag_of(e) for e in events]
        assert "run.recovered" not in tags and "run.fenced" not in tags, tags
        rejected = [f.read_text() for f in (airflow.home / "epochledger-spool").glob("*.rejected")]
        assert not [r for r in rejected if t.run in r], rejected  # no start of the try refused
        assert tags[:2] == ["run.queued", "run.started"] and tags[-1] == "run.finished", tags
        cycles = tags[2:-1]
        assert cycles and cycles == ["run.paused", "run.resumed", "run.started"] * (len(cycles) // 3), tags
        run = led.get_run(t.run)
        starts = [e for e in events if tag_of(e) == "run.started"]
        assert run.attempt == len(starts) >= 2
        assert len({e.epoch for e in starts}) == len(starts)  # each poke its own task runner (O8)
        for e in events:
            if tag_of(e) == "run.resumed":
                assert e.by == "orchestrator" and (e.reason or "").startswith("airflow: resumed, reschedule ")
        # Only one try: Airflow's reschedule is not a retry, so no second run (rule I2).
        assert led.get_run(t.run).labels["airflow.try_number"] == "1"
        assert _status(airflow, _try(airflow, "el_wait", "waits", 2).run) is None
        gaps = [
            (b.at - a.at).total_seconds()
            for a, b in zip(events, events[1:], strict=False)
            if (tag_of(a), tag_of(b)) == ("run.paused", "run.resumed")
        ]
        # Each wait outlasted several of the watcher's rounds (every PROBE_INTERVAL_S): the
        # sweep passed over the paused try, whose task runner had stopped, and left it.
        assert gaps and min(gaps) >= PROBE_INTERVAL_S * 2, gaps
        _figures(airflow, "sensor rescheduled", {"waits_s": gaps, "attempts": run.attempt, "first_seen": seen["state"]})


def test_E1_O2_a_deferred_sensor_waits_paused_for_airflow_while_the_triggerer_runs_its_trigger_then_resumes(
    airflow: Airflow,
) -> None:
    """A deferrable sensor (FileSensor, deferrable=True) finds no file and defers: its task
    runner ends with the try deferred, and the trigger runs in Airflow's triggerer, a real
    `airflow triggerer` process. The ledger pauses the try for the orchestrator (reason
    `airflow: deferred`) before the task runner's clean stop; the watcher's rounds pass
    over it while it waits. The test makes the file, the trigger fires, and Airflow
    resumes the try in a new task runner at `execute_complete`: the ledger records the
    orchestrator's resume (`next_method=execute_complete`) and a start under the new
    runner's epoch, the try's second attempt, then its finish. The triggerer has no slot
    (no try runs under it)."""
    t = _try(airflow, "el_defer", "defers")
    wait_for(
        "the deferred try to wait in the ledger", lambda: _status(airflow, t.run) == "paused_orchestrator" or None, 180
    )
    with _ledger(airflow) as led:
        paused = led.get_run(t.run)
        assert paused.reason == "airflow: deferred" and paused.code == "", paused
        stopped = wait_for("the deferring task runner's stop", lambda: _epoch(airflow, paused.epoch).stopped_at, 10)
        assert stopped is not None and _epoch(airflow, paused.epoch).exited_at is None
    # Airflow holds the try in the triggerer's hands: deferred, with a trigger and the method it resumes in.
    row = wait_for(
        "the try deferred in Airflow, with its trigger",
        lambda: r if (r := airflow.ti("el_defer", "defers")) and r["state"] == "deferred" and r["trigger_id"] else None,
        30,
    )
    assert row["next_method"] == "execute_complete" and row["try_number"] == 1, row
    time.sleep(PROBE_INTERVAL_S * 3)  # the watcher's rounds (reap, probe, sweep) pass over it
    assert _status(airflow, t.run) == "paused_orchestrator"
    (airflow.home / "pids" / "el_defer.go").write_text("go")
    ended = _ended(airflow, "el_defer", timeout=180)
    assert ended == "success", f"el_defer's DAG run ended {ended}: " + airflow.why("el_defer", "defers")
    with _ledger(airflow) as led:
        wait_for("the try's end in the ledger", lambda: _status(airflow, t.run) == "finished" or None, 30)
        events = [r.event for r in led.history(t.run)]
        tags = [tag_of(e) for e in events]
        assert tags == ["run.queued", "run.started", "run.paused", "run.resumed", "run.started", "run.finished"], tags
        resumed = events[3]
        assert resumed.by == "orchestrator" and resumed.reason == "airflow: resumed, next_method=execute_complete"
        first, second = events[1], events[4]
        assert first.epoch == paused.epoch and second.epoch != first.epoch  # a new task runner (O8)
        assert led.get_run(t.run).attempt == 2
        assert led.get_run(t.run).labels["airflow.try_number"] == "1"  # a deferral is not a retry (I2)
        assert led.epoch(second.epoch).stopped_at is not None
        assert not [e for e in led.epochs() if "triggerer" in e.process], "the triggerer has no slot"
        waited = (events[3].at - events[2].at).total_seconds()
    rejected = [f.read_text() for f in (airflow.home / "epochledger-spool").glob("*.rejected")]
    assert not [r for r in rejected if t.run in r], rejected
    _figures(airflow, "sensor deferred", {"waited_s": waited})


def _resumed_once(af: Airflow, t: TaskTry, paused_epoch: str | None = None) -> tuple[list[Any], list[str]]:
    """The try's events once its DAG run is over: queued, started, paused, resumed by the
    orchestrator at execute_complete, started again under a new task runner's epoch (the
    second attempt of try 1), then its outcome; nothing fenced, recovered or refused."""
    with _ledger(af) as led:
        events = [r.event for r in led.history(t.run)]
        tags = [tag_of(e) for e in events]
        assert tags[:5] == ["run.queued", "run.started", "run.paused", "run.resumed", "run.started"], tags
        assert len(tags) == 6 and tags[5] in ("run.finished", "run.failed"), tags
        paused, resumed, first, second = events[2], events[3], events[1], events[4]
        assert (paused.kind, paused.reason) == ("orchestrator", "airflow: awaiting_input"), paused
        assert resumed.by == "orchestrator" and resumed.reason == "airflow: resumed, next_method=execute_complete"
        assert paused.epoch == first.epoch and second.epoch != first.epoch  # a new task runner (O8)
        assert paused_epoch is None or first.epoch == paused_epoch
        run = led.get_run(t.run)
        assert run.attempt == 2 and run.labels["airflow.try_number"] == "1"  # an answer is no retry (I2)
        assert led.epoch(first.epoch).stopped_at is not None and led.epoch(first.epoch).exited_at is None
        assert led.epoch(second.epoch).stopped_at is not None
    rejected = [f.read_text() for f in (af.home / "epochledger-spool").glob("*.rejected")]
    assert not [r for r in rejected if t.run in r], rejected
    return events, tags


@pytest.mark.parametrize(
    ("answer", "ended", "status", "code"),
    [("Approve", "success", "finished", ""), ("Reject", "failed", "failed", "FAIL_NODE")],
)
def test_E1_O2_a_try_awaiting_input_waits_paused_for_airflow_until_a_users_answer_resumes_it(
    airflow: Airflow, answer: str, ended: str, status: str, code: str
) -> None:
    """Human in the loop: the standard provider's ApprovalOperator writes its request and
    raises TaskAwaitingInput; its task runner ends with the try awaiting_input (no trigger,
    no triggerer: Airflow 3.3 parks it) and exits. The ledger pauses the try for the
    orchestrator (reason `airflow: awaiting_input`) before that runner's clean stop, and the
    watcher's rounds pass over it while it waits. A user answers through Airflow's REST API
    (the try's hitlDetails), Airflow schedules the try again with its next_method, and a new
    task runner resumes it at execute_complete: the orchestrator's resume and a start, the
    try's second attempt, then its outcome: "Approve" finishes it; "Reject" (fail_on_reject)
    fails it with HITLRejectException, a rejection the workflow's author made a deliberate
    fail: FAIL_NODE, not an engine error."""
    dag = f"el_hitl_{answer.lower()}"
    t = _try(airflow, dag, "asks")
    wait_for(
        "the try to wait for input in the ledger", lambda: _status(airflow, t.run) == "paused_orchestrator" or None, 180
    )
    with _ledger(airflow) as led:
        paused = led.get_run(t.run)
        assert (paused.reason, paused.code) == ("airflow: awaiting_input", ""), paused
        stopped = wait_for("the asking task runner's stop", lambda: _epoch(airflow, paused.epoch).stopped_at, 10)
        assert stopped is not None and _epoch(airflow, paused.epoch).exited_at is None
    # Airflow holds the try awaiting input: no trigger, the method it resumes in, the same try number.
    row = wait_for(
        "the try awaiting input in Airflow",
        lambda: r if (r := airflow.ti(dag, "asks")) and r["state"] == "awaiting_input" else None,
        30,
    )
    assert row["trigger_id"] is None and row["next_method"] == "execute_complete" and row["try_number"] == 1, row
    time.sleep(PROBE_INTERVAL_S * 3)  # the watcher's rounds (reap, probe, sweep) pass over it
    assert _status(airflow, t.run) == "paused_orchestrator"
    said = airflow.answer(dag, "asks", [answer])
    assert said["chosen_options"] == [answer], said
    got = _ended(airflow, dag, timeout=180)
    assert got == ended, f"{dag}'s DAG run ended {got}: " + airflow.why(dag, "asks")
    wait_for(f"the try's end in the ledger ({status})", lambda: _status(airflow, t.run) == status or None, 30)
    events, tags = _resumed_once(airflow, t, paused.epoch)
    assert tags[-1] == ("run.finished" if status == "finished" else "run.failed"), tags
    with _ledger(airflow) as led:
        run = led.get_run(t.run)
        assert (str(run.status), run.code) == (status, code)
        if status == "failed":
            assert run.cause is not None and run.cause.code == "HITLRejectException", run.cause
    waited = (events[3].at - events[2].at).total_seconds()
    assert waited >= PROBE_INTERVAL_S * 3, waited
    _figures(airflow, f"awaiting input, answered {answer}", {"waited_s": waited})


def test_E1_O2_a_try_awaiting_input_nobody_answers_is_resumed_by_airflows_timeout_and_fails_as_a_timeout(
    airflow: Airflow,
) -> None:
    """An HITLOperator with a response_timeout and no defaults, left unanswered: its try
    waits paused for the orchestrator until the scheduler's awaiting-input sweep finds its
    deadline past and resumes it with a timeout event; the new task runner's execute_complete
    raises HITLTimeoutError. The ledger: the resume and a start, then `failed` TIMEOUT (the
    wait's time budget ran out), not an engine error."""
    t = _try(airflow, "el_hitl_timeout", "asks")
    got = _ended(airflow, "el_hitl_timeout", timeout=HITL_TIMEOUT_S + 180)
    assert got == "failed", f"el_hitl_timeout's DAG run ended {got}: " + airflow.why("el_hitl_timeout", "asks")
    wait_for("the try's failure in the ledger", lambda: _status(airflow, t.run) == "failed" or None, 30)
    events, tags = _resumed_once(airflow, t)
    assert tags[-1] == "run.failed", tags
    with _ledger(airflow) as led:
        run = led.get_run(t.run)
        assert run.code == "TIMEOUT" and run.cause is not None and run.cause.code == "HITLTimeoutError", run
    waited = (events[3].at - events[2].at).total_seconds()
    # It waited its response_timeout out (counted from the request, a little before the pause),
    # over many of the watcher's rounds, and was never an orphan meanwhile.
    assert waited >= HITL_TIMEOUT_S / 2, waited
    _figures(airflow, "awaiting input, timed out", {"waited_s": waited, "response_timeout_s": HITL_TIMEOUT_S})


@pytest.mark.parametrize(("state", "status", "code"), [("failed", "failed", "CANCELLED"), ("success", "finished", "")])
def test_E1_a_waiting_sensor_marked_by_hand_is_ended_from_its_wait_as_the_user_marked_it(
    airflow: Airflow, state: str, status: str, code: str
) -> None:
    """A sensor in reschedule mode waits between two pokes (its try up_for_reschedule,
    paused for the orchestrator in the ledger) and a user marks it failed or success by
    hand through Airflow's REST API: Airflow ends the try without running it again, and
    the ledger records that end from the wait, by the API server's hook (actor
    `airflow-api`; a failure by hand is an operator's decision, CANCELLED), with no line
    refused. Before, the ledger refused the mark (a pause was left only by a resume or a
    cancel), wrote it in NAME.rejected, and kept the try paused_orchestrator."""
    dag = f"el_mark_{state}"
    t = _try(airflow, dag, "waits")

    def between_two_pokes() -> bool | None:
        # Paused in the ledger less than half a poke interval ago, and Airflow holds the try
        # (up_for_reschedule): its next poke is over 15 s away, the mark lands before it.
        with _ledger(airflow) as led:
            try:
                run = led.get_run(t.run)
            except Exception:
                return None
        fresh = (datetime.now(UTC) - run.updated_at).total_seconds() < POKE_INTERVAL_S / 2
        row = airflow.ti(dag, "waits")
        held = row is not None and row["state"] == "up_for_reschedule"
        return True if str(run.status) == "paused_orchestrator" and fresh and held else None

    wait_for("the sensor's try to wait, in the ledger and in Airflow", between_two_pokes, 180, every=0.2)
    airflow.mark(dag, "waits", state)
    wait_for(f"the mark in the ledger ({status})", lambda: _status(airflow, t.run) == status or None, 60)
    with _ledger(airflow) as led:
        run = led.get_run(t.run)
        assert (str(run.status), run.code, run.actor) == (status, code, "airflow-api")
        tags = _tags(led, t.run)
        assert tags[-2:] == ["run.paused", "run.failed" if state == "failed" else "run.finished"], tags
        assert "run.fenced" not in tags and "run.recovered" not in tags, tags
        assert run.attempt == tags.count("run.started")  # no start the orchestrator never made
    rejected = [f.read_text() for f in (airflow.home / "epochledger-spool").glob("*.rejected")]
    assert not [r for r in rejected if t.run in r], rejected
    assert airflow.ti(dag, "waits")["state"] == state  # type: ignore[index]
    assert _ended(airflow, dag, timeout=60) == state


def test_E1_a_task_runner_leaves_its_spool_to_the_watcher_and_drains_it_itself_once_the_watcher_is_sigkilled(
    airflow: Airflow,
) -> None:
    """While the scheduler's watcher holds the spool directory's watch, a task runner's
    stop does not wait for the store: it leaves its last lines on disk to the watcher's
    next reap, which lands them (its try finished, its epoch stopped cleanly). The
    watcher SIGKILLed, the kernel drops the watch, and the next task runner drains its
    own spool before it exits: nobody reaps any more, so its try can only be in the
    ledger by its own drain. Last in the module: the watcher's probe is gone after it."""
    spool = str(airflow.home / "epochledger-spool")
    assert spool_mod.watched(spool)
    ended = _ended(airflow, "el_left")
    assert ended == "success", f"el_left's DAG run ended {ended}: " + airflow.why("el_left", "hello")
    left = _try(airflow, "el_left", "hello")
    wait_for("el_left's try in the ledger", lambda: _status(airflow, left.run) == "finished" or None, 30)
    log = airflow.task_log("el_left", "hello")
    assert "left to the watcher's reap" in log, log
    with _ledger(airflow) as led:
        epoch = led.epoch(led.get_run(left.run).epoch)
        assert epoch.stopped_at is not None and epoch.exited_at is None  # a clean stop, reaped: no exit fact
    pid = airflow.watcher_pid()
    assert pid is not None, "the scheduler's watcher is not running"
    os.kill(pid, signal.SIGKILL)
    wait_for("the watch to come free", lambda: (not spool_mod.watched(spool)) or None, 10)
    airflow.runs["el_drained"] = airflow.trigger("el_drained")
    ended = _ended(airflow, "el_drained", timeout=180)
    assert ended == "success", f"el_drained's DAG run ended {ended}: " + airflow.why("el_drained", "hello")
    drained = _try(airflow, "el_drained", "hello")
    wait_for("el_drained's try in the ledger", lambda: _status(airflow, drained.run) == "finished" or None, 30)
    log = airflow.task_log("el_drained", "hello")
    assert "left to the watcher's reap" not in log and "not drained" not in log, log
    ti = airflow.ti("el_drained", "hello")
    assert ti is not None
    runner = f"airflow.{HOST}.{ti['pid']}"
    assert not [f for f in os.listdir(spool) if f.startswith(runner + ".")], os.listdir(spool)  # closed, drained
