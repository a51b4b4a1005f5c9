"""The Airflow plugin (docs/adapters.md, "Airflow"): Airflow's listener hooks, each read
into the plain values of epochledger/adapters/airflow.py and handed to its `Recorder`.
The only module of the project that imports Airflow (the import-linter contract in
pyproject.toml); installed by the `airflow` extra, which registers it as the
`airflow.plugins` entry point, so every Airflow process that loads plugins (the
scheduler, each task runner, the API server) loads it.

Inert until configured: `[epochledger] store` in airflow.cfg, or
`AIRFLOW__EPOCHLEDGER__STORE`, names the ledger (a store URL); `[epochledger]
probe_interval` (seconds, default 5; 0: no probe) is the scheduler's probe timer;
`[epochledger] spool` the host's spool directory (default `$AIRFLOW_HOME/epochledger-spool`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from airflow.listeners import hookimpl as airflow_hookimpl
from airflow.plugins_manager import AirflowPlugin

from epochledger.adapters.airflow import NOT_RUN_STATES, WAIT_STATES, Component, Recorder, TaskTry, log

F = TypeVar("F", bound=Callable[..., None])


def hookimpl(f: F) -> F:
    """Airflow's hookimpl marker (pluggy's), typed: it marks the function and returns it."""
    return cast(F, airflow_hookimpl(f))


_recorder: Recorder | None = None
_configured = False


def recorder() -> Recorder | None:
    """The process's Recorder, made on first use from Airflow's configuration."""
    global _recorder, _configured
    if not _configured:
        _configured = True
        from airflow.configuration import conf

        store = conf.get("epochledger", "store", fallback=None)
        if store:
            interval = conf.getfloat("epochledger", "probe_interval", fallback=5.0)
            spool = conf.get("epochledger", "spool", fallback=None) or os.path.join(
                os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "epochledger-spool"
            )
            _recorder = Recorder(store, spool=spool, probe_interval=interval)
    return _recorder


def task_try(ti: Any) -> TaskTry:
    """A task instance (the task runner's RuntimeTaskInstance or the scheduler's model)."""
    map_index = getattr(ti, "map_index", -1)
    return TaskTry(
        dag_id=str(ti.dag_id),
        run_id=str(ti.run_id),
        task_id=str(ti.task_id),
        map_index=-1 if map_index is None else int(map_index),
        try_number=int(ti.try_number or 0),
    )


def _state(ti: Any) -> str:
    state = getattr(ti, "state", None)
    return str(getattr(state, "value", state))


def _resumed(ti: Any) -> str | None:
    """How Airflow resumes a try that waited on it, or None for a first start: the
    execution API's run context names the method a deferral (or a wait for input)
    resumes in (`next_method`), and counts a try's reschedules (`task_reschedule_count`,
    of this try's task instance id: a retry is a new id)."""
    context = getattr(ti, "_ti_context_from_server", None)
    if context is None:
        return None
    if method := getattr(context, "next_method", None):
        return f"next_method={method}"
    if (count := int(getattr(context, "task_reschedule_count", 0) or 0)) > 0:
        return f"reschedule {count}"
    return None


def _in_task_runner(ti: Any) -> bool:
    # The task runner hands its RuntimeTaskInstance; the scheduler and the API server the
    # ORM model (airflow.models.taskinstance.TaskInstance).
    return type(ti).__name__ == "RuntimeTaskInstance"


def _component(component: Any) -> Component | None:
    if type(component).__name__ == "TaskRunnerMarker":
        return "task-runner"
    if getattr(component, "job_type", None) == "SchedulerJob":
        return "scheduler"
    return None  # the triggerer, the DAG processor: nothing runs under them


def _when_scheduler(job: Any, rec: Recorder, *, wait: float = 60.0) -> None:
    """A Job calls on_starting from its constructor, before its runner names its kind
    (`job.job_type`, set on the next line of BaseJobRunner.__init__): wait for the name,
    then start the scheduler's slot. The triggerer and the DAG processor start nothing."""
    deadline = time.monotonic() + wait
    while getattr(job, "job_type", None) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if _component(job) == "scheduler":
        rec.component_started("scheduler")


class Listener:
    # The try this task runner runs (its RuntimeTaskInstance, from on_task_instance_running):
    # at before_stopping its state says whether Airflow will resume it (WAIT_STATES), for
    # which Airflow calls no state hook.
    _running: Any = None

    @hookimpl
    def on_starting(self, component: Any) -> None:
        if (rec := recorder()) is None:
            return
        if _component(component) == "task-runner":
            rec.component_started("task-runner")
        elif hasattr(component, "job_type"):
            threading.Thread(
                target=_when_scheduler, args=(component, rec), name="epochledger-start", daemon=True
            ).start()

    @hookimpl
    def before_stopping(self, component: Any) -> None:
        rec = recorder()
        if rec is None or (kind := _component(component)) is None:
            return
        ti, self._running = self._running, None
        if kind == "task-runner" and ti is not None and (state := _state(ti)) in WAIT_STATES:
            rec.task_waiting(task_try(ti), state)
        rec.component_stopping()

    @hookimpl
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        if (rec := recorder()) is not None:
            if _in_task_runner(task_instance):
                self._running = task_instance
            rec.task_running(task_try(task_instance), resumed=_resumed(task_instance))

    # The task runner hands its RuntimeTaskInstance; the API server (a user's mark, with
    # previous_state None) and the scheduler (handle_failure) hand the ORM model.
    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        if (rec := recorder()) is None:
            return
        if _in_task_runner(task_instance):
            rec.task_succeeded(task_try(task_instance))
        else:
            rec.task_marked(task_try(task_instance), "success")

    @hookimpl
    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        if (rec := recorder()) is None:
            return
        if _in_task_runner(task_instance):
            rec.task_skipped(task_try(task_instance))
        else:
            rec.task_marked(task_try(task_instance), "skipped")

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        if (rec := recorder()) is None:
            return
        t, retry = task_try(task_instance), _state(task_instance) == "up_for_retry"
        if _in_task_runner(task_instance):
            rec.task_failed(t, retry=retry, error=error)
        elif previous_state is None:
            rec.task_marked(t, "failed", note=None if error is None else str(error))
        else:
            ran = str(getattr(previous_state, "value", previous_state)) == "running"
            rec.task_failed_by_scheduler(t, retry=retry, error=error, ran=ran)

    @hookimpl
    def on_dag_run_running(self, dag_run: Any, msg: str) -> None:
        if (rec := recorder()) is not None:
            rec.dag_run_running(str(dag_run.dag_id), str(dag_run.run_id))

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        self._ended(dag_run, msg, success=True)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        self._ended(dag_run, msg, success=False)

    def _ended(self, dag_run: Any, msg: str, *, success: bool) -> None:
        if (rec := recorder()) is None:
            return
        try:
            # The relationship, loaded in the scheduler's own session (no second connection).
            not_run = {task_try(ti): s for ti in dag_run.task_instances if (s := _state(ti)) in NOT_RUN_STATES}
        except Exception:  # noqa: BLE001 - a DAG run's end is still recorded if its tries cannot be read
            log.warning("epochledger: the tries of %s/%s could not be read", dag_run.dag_id, dag_run.run_id)
            not_run = {}
        rec.dag_run_ended(str(dag_run.dag_id), str(dag_run.run_id), success=success, msg=msg, not_run=not_run)


class EpochledgerPlugin(AirflowPlugin):  # type: ignore[misc]  # Airflow is untyped here (its extra is not installed for mypy)
    name = "epochledger"
    listeners = [Listener()]
