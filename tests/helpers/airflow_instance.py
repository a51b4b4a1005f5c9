"""A real Airflow 3 on loopback for the adapter's tests (docs/adapters.md, "Airflow").

Airflow's pins clash with the dev venv's, so it lives in a venv of its own
(`.venv-airflow`, made by `make test`; EPOCHLEDGER_AIRFLOW_VENV names another) and runs
here as subprocesses: `airflow db migrate`, then the API server, the scheduler
(LocalExecutor: each task in a real task runner process under a supervisor), the
DAG processor and the triggerer (a deferred try's trigger runs there), with a fresh AIRFLOW_HOME, the metadata database on SQLite and the
ledger on SQLite beside it. The adapter's plugin is the entry point the extra
installs; the test process reads the ledger with the dev venv's epochledger and
Airflow's metadata database with sqlite3 (read only).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("EPOCHLEDGER_AIRFLOW_VENV", ROOT / ".venv-airflow"))
AIRFLOW = VENV / "bin" / "airflow"
REQUIRE = os.environ.get("EPOCHLEDGER_TEST_AIRFLOW") == "require"

# Airflow's own detection of a task whose heartbeat stopped, set low so a test sees it
# (the defaults are 300 s and 10 s).
HEARTBEAT_TIMEOUT_S = 8
HEARTBEAT_CHECK_S = 1.0
PROBE_INTERVAL_S = 1.0  # the adapter's probe timer in the scheduler ([epochledger] probe_interval)

DAGS = {
    # one task that succeeds
    "el_ok": """
from datetime import datetime
from airflow.sdk import dag, task

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_ok():
    @task
    def hello():
        return 1
    hello()

el_ok()
""",
    # a task whose first try raises, retried once (it succeeds), then a downstream task
    "el_retry": """
from datetime import datetime, timedelta
from airflow.sdk import dag, task, get_current_context

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_retry():
    @task(retries=1, retry_delay=timedelta(seconds=1))
    def flaky():
        if get_current_context()["ti"].try_number == 1:
            raise ValueError("first try fails")
        return 2
    @task
    def after():
        return 3
    flaky() >> after()

el_retry()
""",
    # a task that sleeps after writing its pid and its supervisor's; the test kills them
    "el_kill": """
import os, time
from datetime import datetime
from airflow.sdk import dag, task

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_kill():
    @task
    def sleeper():
        path = os.path.join(os.environ["EL_PIDS"], "el_kill")
        with open(path + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {os.getppid()}")
        os.replace(path + ".tmp", path)
        time.sleep(90)
    @task
    def downstream():
        return 1
    sleeper() >> downstream()

el_kill()
""",
}
DAGS["el_lost"] = DAGS["el_kill"].replace("el_kill", "el_lost")
# one task each: the first runs while the scheduler's watcher watches the spool directory,
# the second after the test SIGKILLed the watcher
DAGS["el_left"] = DAGS["el_ok"].replace("el_ok", "el_left")
DAGS["el_drained"] = DAGS["el_ok"].replace("el_ok", "el_drained")
# A sensor in reschedule mode: each poke that finds no file ends its task runner with the
# try up_for_reschedule, and Airflow runs the next poke in a new task runner; the test
# makes the file once the ledger shows the try waiting.
# Its poke interval must outlast the time Airflow takes to hear that a poke's task runner
# ended: Airflow 3.3.2's scheduler fails a rescheduled try (no retry) when the executor's
# success of one poke reaches it after the next poke is scheduled or queued (same try, same
# executor key: "reported that the task instance ... finished with state success, but the
# task instance's state attribute is queued": `process_executor_events` in Airflow's
# airflow/jobs/scheduler_job_runner.py guards only a deferral's resume). That took
# 0.5 to 6.0 s here at a load average of 9 to 13, which a 6 s interval did not always cover
# (CI failed so); 2 s failed the first poke. 30 s covers the 25 s execution API stalls seen
# under load, at the price of up to 30 s more for the test's last poke.
POKE_INTERVAL_S = 30
DAGS["el_wait"] = f"""
import os
from datetime import datetime
from airflow.sdk import dag, task

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_wait():
    @task.sensor(poke_interval={POKE_INTERVAL_S}, timeout=600, mode="reschedule")
    def waits() -> bool:
        return os.path.exists(os.path.join(os.environ["EL_PIDS"], "el_wait.go"))
    waits()

el_wait()
"""
# Two more such sensors, whose file never comes: a user marks each try failed or success
# by hand (Airflow's REST API) while Airflow holds it between two pokes.
for _state in ("failed", "success"):
    DAGS[f"el_mark_{_state}"] = DAGS["el_wait"].replace("el_wait", f"el_mark_{_state}")
# A deferrable sensor (the standard provider's FileSensor, deferrable=True): its first
# execute finds no file and defers to a FileTrigger, its task runner ends with the try
# deferred, and Airflow's triggerer (a process of the instance) polls for the file; once
# the test makes it, the trigger fires and Airflow resumes the try in a new task runner
# at `execute_complete`. Its connection (`el_fs`, the pids directory) is in the env.
DAGS["el_defer"] = """
from datetime import datetime
from airflow.sdk import dag
from airflow.providers.standard.sensors.filesystem import FileSensor

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_defer():
    FileSensor(task_id="defers", fs_conn_id="el_fs", filepath="el_defer.go", poke_interval=1, timeout=600, deferrable=True)

el_defer()
"""
# Human in the loop, as Airflow 3.3.2's standard provider makes it: an ApprovalOperator's execute
# writes its request (the try's Human-in-the-loop detail) and raises TaskAwaitingInput, so its task
# runner ends with the try awaiting_input, with no trigger and no triggerer; a user's answer through
# the REST API (the PATCH of the try's hitlDetails) makes it scheduled again with its next_method,
# and a new task runner resumes it at execute_complete. With fail_on_reject, "Reject" fails the try
# (HITLRejectException); the test answers one DAG run's try "Approve" and the other's "Reject".
for _answer in ("approve", "reject"):
    DAGS[f"el_hitl_{_answer}"] = f"""
from datetime import datetime
from airflow.sdk import dag
from airflow.providers.standard.operators.hitl import ApprovalOperator

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_hitl_{_answer}():
    ApprovalOperator(task_id="asks", subject="Go on?", fail_on_reject=True)

el_hitl_{_answer}()
"""
# One that nobody answers: past its response_timeout the scheduler's sweep (every
# [scheduler] trigger_timeout_check_interval, 15 s by default) resumes it with a timeout event, which its
# execute_complete raises as HITLTimeoutError (no defaults to fall back on).
HITL_TIMEOUT_S = 20
DAGS["el_hitl_timeout"] = f"""
from datetime import datetime, timedelta
from airflow.sdk import dag
from airflow.providers.standard.operators.hitl import HITLOperator

@dag(schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def el_hitl_timeout():
    HITLOperator(task_id="asks", subject="Which?", options=["one", "two"], response_timeout=timedelta(seconds={HITL_TIMEOUT_S}))

el_hitl_timeout()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float, every: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


@dataclass
class Airflow:
    home: Path
    port: int
    ledger_url: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)  # DAG id -> the run_id the test triggered
    started_s: float = 0.0  # db migrate to every DAG parsed

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "EPOCHLEDGER_STORE"))}
        env.update(
            AIRFLOW_HOME=str(self.home),
            AIRFLOW__CORE__DAGS_FOLDER=str(self.home / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="8",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{self.home / 'airflow.db'}",
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__PORT=str(self.port),
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{self.port}/execution/",
            AIRFLOW__API_AUTH__JWT_SECRET="epochledger-test-secret-" + "x" * 48,
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
            # A loaded machine answers the first execution API calls in 30 to 40 s (measured: one
            # PATCH /run took 42 s at load 10 on 2 cores); the default 5 s timeout then fails the task.
            AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT="60",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT=str(HEARTBEAT_TIMEOUT_S),
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL=str(HEARTBEAT_CHECK_S),
            **({"AIRFLOW__EPOCHLEDGER__STORE": self.ledger_url} if self.ledger_url else {}),
            AIRFLOW__EPOCHLEDGER__PROBE_INTERVAL=str(PROBE_INTERVAL_S),
            EL_PIDS=str(self.home / "pids"),
            AIRFLOW_CONN_EL_FS=json.dumps({"conn_type": "fs", "extra": {"path": str(self.home / "pids")}}),
            PATH=f"{VENV / 'bin'}:{os.environ.get('PATH', '')}",
        )
        return env

    def start(self) -> None:
        t0 = time.monotonic()
        (self.home / "dags").mkdir(parents=True)
        (self.home / "pids").mkdir()
        for name, source in DAGS.items():
            (self.home / "dags" / f"{name}.py").write_text(source)
        subprocess.run(
            [str(AIRFLOW), "db", "migrate"],
            env=self.env,
            check=True,
            stdout=(self.home / "migrate.log").open("wb"),
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        for name, cmd in (
            ("api", "api-server"),
            ("scheduler", "scheduler"),
            ("dag-processor", "dag-processor"),
            ("triggerer", "triggerer"),  # runs deferred tries' triggers (el_defer)
        ):
            self.procs[name] = subprocess.Popen(
                [str(AIRFLOW), cmd],
                env=self.env,
                stdout=(self.home / f"{name}.log").open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the teardown ends it whole
            )
        wait_for("the API server", lambda: self._get("/api/v2/monitor/health"), 120, every=0.5)
        wait_for("the DAGs parsed", lambda: self._parsed(), 120, every=0.5)
        self.started_s = time.monotonic() - t0

    def _parsed(self) -> bool | None:
        found = self.api("GET", "/api/v2/dags")
        return True if found is not None and found.get("total_entries") == len(DAGS) else None

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what is left of its group (executor workers, tasks)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

    # ------------------------------------------------------------- the API
    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return bytes(r.read())
        except (urllib.error.URLError, OSError):
            return None

    _token: str | None = None

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        if self._token is None:
            got = self._get("/auth/token")  # all admins: a token without credentials
            if got is None:
                return None
            self._token = json.loads(got)["access_token"]
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, OSError):
            return None

    def mark(self, dag_id: str, task_id: str, state: str) -> None:
        """A user's mark of the try by hand (the API's PATCH of a task instance's state)."""
        run_id = urllib.parse.quote(self.runs[dag_id], safe="")
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"
        found = self.api("PATCH", path, {"new_state": state})
        assert found is not None, f"could not mark {dag_id}.{task_id} {state}"

    def answer(self, dag_id: str, task_id: str, options: list[str]) -> dict[str, Any]:
        """A user's answer to a try that waits for input (the API's PATCH of the try's
        Human-in-the-loop detail): what Airflow recorded of it."""
        run_id = urllib.parse.quote(self.runs[dag_id], safe="")
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        found = self.api("PATCH", path, {"chosen_options": options})
        assert found is not None, f"could not answer {dag_id}.{task_id} {options}"
        return dict(found)

    def trigger(self, dag_id: str) -> str:
        found = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None})
        assert found is not None, f"could not trigger {dag_id}"
        return str(found["dag_run_id"])

    # ------------------------------------------------- the metadata database
    def ti(self, dag_id: str, task_id: str) -> dict[str, Any] | None:
        """The task instance's row (state, try_number, pid, start_date, end_date, and a
        deferred try's trigger_id and next_method), read only."""
        db = sqlite3.connect(f"file:{self.home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
        try:
            db.row_factory = sqlite3.Row
            row = db.execute(
                "select state, try_number, pid, start_date, end_date, trigger_id, next_method from task_instance"
                " where dag_id=? and task_id=?",
                (dag_id, task_id),
            ).fetchone()
        except sqlite3.OperationalError:
            return None  # locked by a writer this instant
        finally:
            db.close()
        return None if row is None else dict(row)

    def dag_run_state(self, dag_id: str) -> str | None:
        db = sqlite3.connect(f"file:{self.home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
        try:
            row = db.execute("select state from dag_run where dag_id=?", (dag_id,)).fetchone()
        except sqlite3.OperationalError:
            return None
        finally:
            db.close()
        return None if row is None else str(row[0])

    def pids(self, dag_id: str) -> tuple[int, int] | None:
        """(the task process, its supervisor), as the task wrote them."""
        path = self.home / "pids" / dag_id
        if not path.exists():
            return None
        task, supervisor = path.read_text().split()
        return int(task), int(supervisor)

    def log_text(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text(errors="replace")

    def watcher_pid(self) -> int | None:
        """The scheduler's watcher (`python -m epochledger.adapters.airflow watch`, a child
        of the scheduler), found by its command line naming this instance's spool."""
        spool = str(self.home / "epochledger-spool")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"epochledger.adapters.airflow" in argv and b"watch" in argv and spool.encode() in argv:
                return int(entry.name)
        return None

    def task_log(self, dag_id: str, task_id: str, try_number: int = 1) -> str:
        """The try's Airflow task log (every task runner of the try writes to it), one line
        an entry: time, level, event."""
        path = (
            self.home
            / "logs"
            / f"dag_id={dag_id}"
            / f"run_id={self.runs[dag_id]}"
            / f"task_id={task_id}"
            / f"attempt={try_number}.log"
        )
        if not path.exists():
            return f"(no task log at {path.relative_to(self.home)})"
        lines = []
        for raw in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                lines.append(raw)
                continue
            lines.append(f"{entry.get('timestamp', '')} {entry.get('level', '')} {entry.get('event', '')}")
        return "\n".join(lines)

    def scheduler_said(self, dag_id: str) -> str:
        """The scheduler's warnings and errors that name the DAG (where it fails a try that
        its task log cannot show: a heartbeat timeout, a state its executor reported)."""
        words = [
            line
            for line in self.log_text("scheduler").splitlines()
            if dag_id in line and ("[warning" in line or "[error" in line)
        ]
        return "\n".join(words) or "(none)"

    def why(self, dag_id: str, task_id: str, try_number: int = 1) -> str:
        """What to print when a try did not end as a test expected: its row, its task log and
        the scheduler's words about its DAG."""
        return (
            f"{dag_id}.{task_id} try {try_number}: {self.ti(dag_id, task_id)}\n"
            f"--- its task log ---\n{self.task_log(dag_id, task_id, try_number)}\n"
            f"--- the scheduler's warnings and errors about {dag_id} ---\n{self.scheduler_said(dag_id)}"
        )


def airflow_time(value: str | None) -> datetime | None:
    """A timestamp as Airflow's SQLite rows hold it (UTC, no offset)."""
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def running(home: Path, ledger_url: str) -> Iterator[Airflow]:
    instance = Airflow(home=home, port=_free_port(), ledger_url=ledger_url)
    try:
        instance.start()
        yield instance
    finally:
        instance.stop()
