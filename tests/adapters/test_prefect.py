"""The Prefect adapter (rule E1; docs/adapters.md "Prefect") with real Prefect flow runs
on Prefect's own ephemeral API: one server per test module (a temporary PREFECT_HOME,
its SQLite database migrated at start, loopback only, no network), started by a module
fixture with the startup timeout raised. The module took 53 s at -n 0 on a loaded
2-core machine (105 s at a higher load), most of it the server's start and Prefect's
import in each flow process.

Gate: without Prefect (the extra `epochledger[prefect]`) these tests skip and say why;
with EPOCHLEDGER_TEST_PREFECT=require (CI) that is a failure.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from epochledger import open_ledger
from epochledger.adapters.prefect import CODES, code_of, install
from epochledger.ledger.events import RunFailed

REQUIRE = os.environ.get("EPOCHLEDGER_TEST_PREFECT") == "require"
ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 240  # Prefect's ephemeral server: migrations, then the API (73.6 s seen under load)

pytestmark = pytest.mark.xdist_group("prefect")  # one server, one xdist worker


def wait_for(what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except Exception:  # not recorded yet
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def prefect_api() -> Iterator[str]:
    """Prefect's ephemeral API server, for this module: its URL (PREFECT_API_URL is set
    for this process and the flow processes it starts)."""
    home = tempfile.mkdtemp(prefix="prefect-home-")
    env = {
        "PREFECT_HOME": home,
        "PREFECT_SERVER_ALLOW_EPHEMERAL_MODE": "true",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(STARTUP_S),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_TO_API_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    saved = {k: os.environ.get(k) for k in [*env, "PREFECT_API_URL"]}
    os.environ.update(env)
    try:
        try:
            from prefect.server.api.server import SubprocessASGIServer
        except ImportError as e:
            if REQUIRE:
                pytest.fail(f"EPOCHLEDGER_TEST_PREFECT=require but Prefect is not installed ({e})")
            pytest.skip(f"Prefect is not installed ({e}): pip install -e '.[prefect]'")
        server = SubprocessASGIServer()
        server.start(timeout=STARTUP_S)
        os.environ["PREFECT_API_URL"] = server.api_url
        try:
            yield server.api_url
        finally:
            server.stop()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(home, ignore_errors=True)


def test_E1_failure_codes_come_from_the_exception_class_and_the_table_is_extensible() -> None:
    class QuotaExceeded(Exception):
        pass

    assert code_of(ValueError("x")) == "VALUE_ERROR"
    assert code_of(TimeoutError()) == "TIMEOUT"
    assert code_of(QuotaExceeded(), {**CODES, "QuotaExceeded": "QUOTA"}) == "QUOTA"
    assert install(store="sqlite:///unused.db", spool="s", codes={"QuotaExceeded": "QUOTA"}).codes["QuotaExceeded"] == (
        "QUOTA"
    )


def test_E1_the_hooks_pickle_as_their_settings_so_a_runners_flow_process_gets_an_adapter_of_its_own(
    tmp_path: Path,
) -> None:
    """Prefect's runner (`flow.serve()`, a worker) cloudpickles the flow, hooks and all,
    into the process that runs it: a live spool (a lock, a thread) cannot travel."""
    adapter = install(store=f"sqlite:///{tmp_path / 'ledger.db'}", spool=str(tmp_path / "spool"), codes={"E": "X"})
    adapter.flush(0)
    spool = adapter._here()
    try:
        hook = pickle.loads(pickle.dumps(adapter.on_running))
        other = hook.__self__
        assert other is not adapter and other.spool is None
        assert (other.store, other.spool_dir, other.codes, other.fsync) == (
            adapter.store,
            adapter.spool_dir,
            adapter.codes,
            adapter.fsync,
        )
    finally:
        spool.close(2)
        adapter.spool = None


def test_E1_a_flow_run_is_a_run_and_its_process_an_epoch_of_its_own_slot(prefect_api: str, tmp_path: Path) -> None:
    from prefect import flow

    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    adapter = install(store=store, spool=str(tmp_path / "spool"))

    @flow(name="nightly-export", **adapter.hooks())
    def nightly(n: int) -> int:
        return n + 1

    state = nightly(1, return_state=True)
    assert state.is_completed()
    assert adapter.flush(10)
    ledger = open_ledger(store)
    [run] = [r for r in ledger.runs() if r.run.startswith("prefect:")]
    assert (run.status.value, run.attempt, run.workflow) == ("finished", 1, "nightly-export")
    assert run.process is not None and run.process == "prefect:flow-run:" + run.run.removeprefix("prefect:")
    epoch = ledger.epoch(run.epoch)
    assert epoch.pid == os.getpid() and epoch.stopped_at is not None and epoch.exited_at is None
    adapter.close()


def test_E1_a_failure_with_retries_is_one_run_whose_attempts_count_and_whose_code_is_the_exceptions(
    prefect_api: str, tmp_path: Path
) -> None:
    from prefect import flow

    class QuotaExceeded(Exception):
        pass

    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    adapter = install(store=store, spool=str(tmp_path / "spool"), codes={"QuotaExceeded": "QUOTA"})
    tries: list[int] = []

    @flow(retries=2, retry_delay_seconds=0, **adapter.hooks())
    def flaky() -> None:
        tries.append(1)
        raise QuotaExceeded(f"try {len(tries)}")

    state = flaky(return_state=True)
    assert state.is_failed() and len(tries) == 3
    assert adapter.flush(10)
    ledger = open_ledger(store)
    [run] = [r for r in ledger.runs() if r.run.startswith("prefect:")]
    assert (run.status.value, run.attempt, run.code) == ("failed", 3, "QUOTA")
    assert "try 3" in (run.error or "")
    events = [h.event for h in ledger.history_of(run.run)]
    retries = [e for e in events if isinstance(e, RunFailed) and e.resumable]
    assert [e.code for e in retries] == ["RETRY", "RETRY"], events
    adapter.close()


CRASHING_FLOW = textwrap.dedent(
    """
    import sys, time
    from prefect import flow
    from epochledger.adapters.prefect import install

    adapter = install(store=sys.argv[1], spool=sys.argv[2])

    @flow(name="killed", **adapter.hooks())
    def killed() -> None:
        adapter.flush(10)
        print("running", flush=True)
        time.sleep(120)

    killed()
    """
)


@contextmanager
def running_flow(tmp_path: Path, store: str, spool: str) -> Iterator[subprocess.Popen[str]]:
    """CRASHING_FLOW in a process of its own, once its run is recorded `running`; killed
    and reaped at the end if the test left it alive."""
    script = tmp_path / "crash_flow.py"
    script.write_text(CRASHING_FLOW)
    proc = subprocess.Popen(
        [sys.executable, str(script), store, spool],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # bounded: the flow prints once it is recorded, or the process ends
        assert line.strip() == "running", line
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_E1_a_sigkilled_flow_process_becomes_an_exit_fact_and_its_run_is_recovered(
    prefect_api: str, tmp_path: Path
) -> None:
    store, spool = f"sqlite:///{tmp_path / 'ledger.db'}", str(tmp_path / "spool")
    with running_flow(tmp_path, store, spool) as proc:
        ledger = open_ledger(store)
        [run] = [r for r in ledger.runs() if r.run.startswith("prefect:")]
        assert run.status.value == "running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    adapter = install(store=store, spool=spool)
    report = adapter.recover()
    assert report is not None
    ledger = open_ledger(store)
    recovered = ledger.get_run(run.run)
    assert recovered.status.value == "failed_resumable", recovered
    epoch = ledger.epoch(run.epoch)
    assert epoch.pid == proc.pid and epoch.exited_at is not None
    assert (epoch.exited_by or "").startswith("probe@")


def test_E1_a_flow_run_prefect_reports_crashed_is_failed_process_exited_and_its_epoch_stops(
    prefect_api: str, tmp_path: Path
) -> None:
    """A crash the way Prefect itself reports one: the flow process gets SIGTERM (its
    host shutting down, a container stopped, no runner asking for a cancel); Prefect's
    engine turns the signal into its TerminationSignal, sets the flow run Crashed and
    runs `on_crashed` in the flow's own process, then kills it with the signal again
    (no exit handler runs). The ledger, with no `recover()`: `failed`, PROCESS_EXITED,
    Prefect's message as the error, and the process's epoch stopped by the hook, not
    left for the probe. Before the hook flushed its spool, the crash stayed there until
    the next flow process on the host."""
    import asyncio
    import uuid

    from prefect.client.orchestration import get_client

    store, spool = f"sqlite:///{tmp_path / 'ledger.db'}", str(tmp_path / "spool")
    with running_flow(tmp_path, store, spool) as proc:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    ledger = open_ledger(store)
    [run] = [r for r in ledger.runs() if r.run.startswith("prefect:")]

    async def state_of(flow_run_id: str) -> Any:
        async with get_client() as client:
            return (await client.read_flow_run(uuid.UUID(flow_run_id))).state

    state = asyncio.run(state_of(run.run.removeprefix("prefect:")))
    assert state is not None and state.is_crashed(), state  # Prefect's own word: Crashed
    assert (run.status.value, run.code, run.attempt) == ("failed", "PROCESS_EXITED", 1), run
    assert run.error == "TerminationSignal: Execution was aborted by a termination signal.", run.error
    epoch = ledger.epoch(run.epoch)
    assert epoch.pid == proc.pid and epoch.stopped_at is not None and epoch.exited_at is None
    assert proc.returncode == -signal.SIGTERM  # Prefect re-sent the signal: no exit handler ran


CANCELLED_FLOW = """
import time
from prefect import flow
from epochledger.adapters.prefect import install

adapter = install(store={store!r}, spool={spool!r})


@flow(name="cancelled", **adapter.hooks())
def cancelled() -> None:
    adapter.flush(10)
    time.sleep(120)
"""


def test_E1_a_flow_run_cancelled_through_prefects_runner_is_a_cancel(
    prefect_api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled the way Prefect cancels: `Cancelling` set through the API, the runner
    that started the flow process stops it and runs the flow's `on_cancellation` hooks."""
    import asyncio
    import importlib

    from prefect.client.orchestration import get_client
    from prefect.runner import Runner
    from prefect.states import Cancelling

    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    source = tmp_path / "cancelled_flow.py"
    source.write_text(CANCELLED_FLOW.format(store=store, spool=str(tmp_path / "spool")))
    monkeypatch.chdir(tmp_path)  # the runner's entrypoint is the flow's file, relative to here
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cancelled_flow", raising=False)
    module = importlib.import_module("cancelled_flow")
    ledger = open_ledger(store)

    async def scenario() -> Any:
        runner = Runner(query_seconds=1)
        deployment = await runner.aadd_flow(module.cancelled, name="cancelled")
        async with get_client() as client:
            flow_run = await client.create_flow_run_from_deployment(deployment)
            serving = asyncio.create_task(runner.start())
            try:
                run = f"prefect:{flow_run.id}"
                for _ in range(1200):  # 120 s: the flow process imports Prefect first
                    await asyncio.sleep(0.1)
                    if any(r.run == run and r.status.value == "running" for r in ledger.runs()):
                        break
                else:
                    raise AssertionError("the flow run never ran")
                await client.set_flow_run_state(flow_run.id, Cancelling(), force=True)
                for _ in range(600):
                    await asyncio.sleep(0.1)
                    if ledger.get_run(run).status.value == "cancelled":
                        return ledger.get_run(run)
                raise AssertionError("not cancelled in the ledger within 60 s")
            finally:
                serving.cancel()

    run = asyncio.run(scenario())
    assert run.status.value == "cancelled" and "cancelled" in (run.reason or "")
    module.adapter.close()
