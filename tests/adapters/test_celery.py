"""The Celery adapter (rule E1; docs/adapters.md "Celery") with a real worker (`celery
worker --pool prefork -c 2`, the app of tests/helpers/celery_app.py) on a real broker: Redis
at 127.0.0.1:6379 and RabbitMQ at 127.0.0.1:5672 (guest/guest). Each test has a queue
and a node name of its own, so nothing else on the broker is touched.

Gate: without Celery (the extra `epochledger[celery]`) or a broker these tests skip and
say why; with EPOCHLEDGER_TEST_CELERY=require (CI) either is a failure.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from epochledger import open_ledger
from epochledger.adapters.celery import CODES, code_of
from epochledger.app import Ledger
from tests.conftest import need_pg
from tests.helpers.pg_proxy import Proxy

REQUIRE = os.environ.get("EPOCHLEDGER_TEST_CELERY") == "require"
ROOT = Path(__file__).resolve().parents[2]
BROKERS = {
    "redis": ("redis://127.0.0.1:6379/0", ("127.0.0.1", 6379)),
    "amqp": ("amqp://guest:guest@127.0.0.1:5672//", ("127.0.0.1", 5672)),
}

pytestmark = pytest.mark.xdist_group("celery")  # one xdist worker: two Celery workers at once would crowd 2 cores


def _need(what: str, problem: str | None) -> None:
    if problem is None:
        return
    if REQUIRE:
        pytest.fail(f"EPOCHLEDGER_TEST_CELERY=require but {problem}")
    pytest.skip(problem)


def _broker(kind: str) -> str:
    try:
        import celery  # noqa: F401
    except ImportError as e:
        _need("celery", f"Celery is not installed ({e}): pip install -e '.[celery]'")
    url, address = BROKERS[kind]
    try:
        socket.create_connection(address, timeout=1).close()
    except OSError as e:
        _need(kind, f"no {kind} broker at {address[0]}:{address[1]} ({e})")
    return url


def wait_for(what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except Exception:  # a run not recorded yet
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


class Worker:
    """A real `celery worker` process group, on its own queue, recording into `store`."""

    def __init__(self, tmp: Path, broker: str, store: str, queue: str):
        self.tmp, self.broker, self.store, self.queue = tmp, broker, store, queue
        self.node = f"t{uuid.uuid4().hex[:8]}"
        self.spool = str(tmp / "spool")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / "worker.log"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "EPOCHLEDGER_TEST_BROKER": self.broker,
            "EPOCHLEDGER_STORE": self.store,
            "EPOCHLEDGER_SPOOL": self.spool,
            "PYTHONPATH": str(ROOT),
        }

    def start(self, ledger: Ledger | None) -> Worker:
        cmd = [sys.executable, "-m", "celery", "-A", "tests.helpers.celery_app", "worker", "--pool", "prefork", "-c", "2",
               "-n", f"{self.node}@%h", "-Q", self.queue, "--without-gossip", "--without-mingle",
               "--without-heartbeat", "-l", "warning"]  # fmt: skip
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, env=self.env(), cwd=ROOT, stdout=out, stderr=out, start_new_session=True)
        if ledger is not None:
            wait_for(
                f"worker {self.node} up, with 2 pool children booted", lambda: len(self.live_children(ledger)) >= 2
            )
        return self

    def live_children(self, ledger: Ledger) -> list[str]:
        return [
            e.process
            for e, end in ledger.liveness()
            if end is None and e.process.startswith(f"celery:{self.node}@") and ":child:" in e.process
        ]

    def kill_all(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


@pytest.fixture(params=["redis", "amqp"])
def broker(request: pytest.FixtureRequest) -> str:
    return _broker(request.param)


@pytest.fixture
def redis_broker() -> str:
    return _broker("redis")


@pytest.fixture
def celery_env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = open_ledger(store)
    workers: list[Worker] = []
    yield {"tmp": tmp_path, "store": store, "ledger": ledger, "queue": f"q-{uuid.uuid4().hex[:8]}", "workers": workers}
    for w in workers:
        w.stop(signal.SIGKILL)  # a clean stop is the first test's subject; here it would only cost seconds
    capp = sys.modules.get("tests.helpers.celery_app")
    if capp is not None and capp.adapter is not None:
        capp.adapter.disconnect()  # this test's producer stops recording (signals are process-wide)
    ledger.close()


def _worker(env: dict[str, Any], broker: str) -> Worker:
    w = Worker(env["tmp"], broker, env["store"], env["queue"])
    env["workers"].append(w)
    return w.start(env["ledger"])


def _app(env: dict[str, Any], broker: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The test's own producer: the same app module, publishing with the adapter."""
    monkeypatch.setenv("EPOCHLEDGER_TEST_BROKER", broker)
    monkeypatch.setenv("EPOCHLEDGER_STORE", env["store"])
    monkeypatch.setenv("EPOCHLEDGER_SPOOL", str(env["tmp"] / "spool"))
    sys.modules.pop("tests.helpers.celery_app", None)
    import tests.helpers.celery_app as capp

    capp.app.conf.broker_url = broker
    return capp


def tags(ledger: Ledger, run: str) -> list[str]:
    return [getattr(r, "event", None).__struct_config__.tag for r in ledger.history(run)]  # type: ignore[union-attr]


def test_E1_success_failure_and_retry_are_recorded_once_in_order(broker, celery_env, monkeypatch) -> None:
    env = celery_env
    ledger: Ledger = env["ledger"]
    capp = _app(env, broker, monkeypatch)
    worker = _worker(env, broker)
    q = env["queue"]
    ok = capp.add.apply_async((2, 3), queue=q).id
    bad = capp.boom.apply_async(queue=q).id
    retried = capp.flaky.apply_async(queue=q).id
    wait_for(
        "all three ended",
        lambda: all(ledger.get_run(r).status.value in ("finished", "failed") for r in (ok, bad, retried)),
    )
    run = ledger.get_run(ok)
    assert (run.status.value, run.attempt, run.workflow) == ("finished", 1, "tests.helpers.celery_app.add")
    assert run.process is not None and run.process.startswith("celery:") and ":child:" in run.process
    # The publisher's queue line and the worker's are one line: queued once (rule E1).
    assert tags(ledger, ok) == ["run.queued", "run.started", "run.finished"]
    failed = ledger.get_run(bad)
    assert (failed.status.value, failed.code) == ("failed", "VALUE_ERROR")
    assert "bad input" in (failed.error or "")
    flaky = ledger.get_run(retried)
    assert (flaky.status.value, flaky.attempt) == ("finished", 3)
    assert tags(ledger, retried) == (
        ["run.queued", "run.started"] + ["run.failed", "run.resumed", "run.started"] * 2 + ["run.finished"]
    )
    assert [e.event.code for e in ledger.history(retried) if e.event.__struct_config__.tag == "run.failed"] == [  # type: ignore[union-attr]
        "RETRY",
        "RETRY",
    ]
    assert not list((env["tmp"] / "spool").glob("*.rejected"))
    # A clean stop (SIGTERM: Celery's warm shutdown) stops every epoch of the worker:
    # none is left live, none exited (worker_shutdown, worker_process_shutdown).
    worker.stop()
    mine = [(e, end) for e, end in ledger.liveness() if e.process.startswith(f"celery:{worker.node}@")]
    assert len(mine) >= 3 and all(end is not None for _, end in mine)
    assert all(e.stopped_at is not None and e.exited_at is None for e, _ in mine), mine


def test_E1_revoke_is_a_cancel(redis_broker, celery_env, monkeypatch) -> None:
    env = celery_env
    ledger: Ledger = env["ledger"]
    capp = _app(env, redis_broker, monkeypatch)
    _worker(env, redis_broker)
    run = capp.sleepy.apply_async((30,), queue=env["queue"]).id
    wait_for("running", lambda: ledger.get_run(run).status.value == "running")
    capp.app.control.revoke(run, terminate=True)
    wait_for("cancelled", lambda: ledger.get_run(run).status.value == "cancelled")
    assert "terminated=True" in (ledger.get_run(run).reason or "")


def _child_pid(ledger: Ledger, run: str) -> int:
    process = ledger.get_run(run).process
    assert process is not None
    return int(process.rsplit(":", 1)[1])


def test_E1_O7_a_sigkilled_pool_child_is_recovered_with_its_exit_fact_within_a_second(
    redis_broker, celery_env, monkeypatch
) -> None:
    env = celery_env
    ledger: Ledger = env["ledger"]
    capp = _app(env, redis_broker, monkeypatch)
    _worker(env, redis_broker)
    run = capp.sleepy.apply_async((30,), queue=env["queue"]).id
    wait_for("running", lambda: ledger.get_run(run).status.value == "running")
    state = ledger.get_run(run)
    pid = _child_pid(ledger, run)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_for("recovered", lambda: ledger.get_run(run).status.value == "failed_resumable", timeout=5)
    took = time.monotonic() - killed
    recovered = ledger.get_run(run)
    assert recovered.code == "PROCESS_ORPHANED"
    epoch = ledger.epoch(state.epoch)  # type: ignore[arg-type]
    assert epoch.exited_by is not None and epoch.exited_by.startswith("celery-main@")
    print(f"pool child SIGKILL -> run recovered with its exit fact in {took:.3f} s")
    assert took < 1.0, f"recovered {took:.3f} s after the kill"


def test_E1_acks_late_redelivery_after_a_kill_is_a_new_attempt_never_a_second_concurrent_run(
    broker, celery_env, monkeypatch
) -> None:
    env = celery_env
    ledger: Ledger = env["ledger"]
    capp = _app(env, broker, monkeypatch)
    _worker(env, broker)
    marker = str(env["tmp"] / "once")
    run = capp.once_slow.apply_async((marker,), queue=env["queue"]).id
    wait_for("running", lambda: ledger.get_run(run).status.value == "running" and os.path.exists(marker))
    os.kill(_child_pid(ledger, run), signal.SIGKILL)
    killed = time.monotonic()
    wait_for("finished by the redelivery", lambda: ledger.get_run(run).status.value == "finished", timeout=20)
    print(
        f"acks_late: SIGKILL -> the redelivered attempt finished in the ledger {time.monotonic() - killed:.2f} s later"
    )
    assert ledger.get_run(run).attempt == 2
    assert tags(ledger, run) == [
        "run.queued",
        "run.started",
        "run.recovered",
        "run.resumed",
        "run.started",
        "run.finished",
    ]


def test_E1_O5_a_sigkilled_whole_worker_is_recovered_by_its_restart(redis_broker, celery_env, monkeypatch) -> None:
    env = celery_env
    ledger: Ledger = env["ledger"]
    capp = _app(env, redis_broker, monkeypatch)
    worker = _worker(env, redis_broker)
    runs = [capp.sleepy.apply_async((30,), queue=env["queue"]).id for _ in range(2)]
    wait_for("both running", lambda: all(ledger.get_run(r).status.value == "running" for r in runs))
    worker.kill_all()  # the main process and both children
    assert all(ledger.get_run(r).status.value == "running" for r in runs)
    started = time.monotonic()
    worker.start(ledger)
    wait_for("both recovered", lambda: all(ledger.get_run(r).status.value == "failed_resumable" for r in runs))
    print(f"whole worker SIGKILL -> both runs recovered {time.monotonic() - started:.2f} s after the restart began")
    for r in runs:
        state = ledger.get_run(r)
        assert state.code == "PROCESS_ORPHANED"
        assert state.epoch is not None
        assert ledger.epoch(state.epoch).exited_at is not None  # the restart's startup saw its pid gone (O7)


def test_E1_failure_codes_come_from_the_exception_class_and_the_user_extends_them() -> None:
    class QuotaExceeded(RuntimeError):
        pass

    class TimeLimitExceeded(Exception):  # Celery's, by name: the first class of the MRO in the table wins
        pass

    assert code_of(ValueError("x")) == "VALUE_ERROR"
    assert code_of(QuotaExceeded()) == "QUOTA_EXCEEDED"
    assert code_of(TimeLimitExceeded()) == "TIMEOUT"
    assert code_of(QuotaExceeded(), {**CODES, "RuntimeError": "ENGINE_ERROR"}) == "ENGINE_ERROR"
    assert code_of(QuotaExceeded(), {**CODES, "QuotaExceeded": "USAGE_LIMIT_BLOCKED"}) == "USAGE_LIMIT_BLOCKED"


def test_E1_a_worker_started_while_its_store_is_away_records_every_transition_once_when_it_is_back(
    redis_broker, tmp_path, pg_url, monkeypatch
) -> None:
    need_pg()
    proxy = Proxy()
    proxy.refuse()  # PostgreSQL is away before the worker starts
    store = proxy.url(pg_url) + "&connect_timeout=2"
    env = {"tmp": tmp_path, "store": store, "queue": f"q-{uuid.uuid4().hex[:8]}", "workers": []}
    capp = _app(env, redis_broker, monkeypatch)
    worker = Worker(tmp_path, redis_broker, store, env["queue"]).start(None)
    try:
        q = env["queue"]
        ok = [capp.add.apply_async((i, i), queue=q).id for i in range(5)]
        bad = capp.boom.apply_async(queue=q).id
        retried = capp.flaky.apply_async(queue=q).id
        time.sleep(2)  # the tasks run meanwhile: Celery never waits on the ledger
        proxy.forward()
        ledger = open_ledger(pg_url)
        wait_for(
            "every task recorded",
            lambda: all(ledger.get_run(r).status.value in ("finished", "failed") for r in [*ok, bad, retried]),
            timeout=30,
        )
        for r in ok:
            assert tags(ledger, r) == ["run.queued", "run.started", "run.finished"]
        assert (ledger.get_run(bad).status.value, ledger.get_run(bad).code) == ("failed", "VALUE_ERROR")
        rejected = [p.read_text() for p in (tmp_path / "spool").glob("*.rejected")]
        assert ledger.get_run(retried).attempt == 3, (tags(ledger, retried), rejected)
        assert not rejected
        assert len(worker.live_children(ledger)) == 2
        assert any(
            e.process == f"celery:{worker.node}@{socket.gethostname()}:main"
            for e, end in ledger.liveness()
            if end is None
        )
    finally:
        worker.stop(signal.SIGKILL)
        if capp.adapter is not None:
            capp.adapter.disconnect()
        proxy.close()
