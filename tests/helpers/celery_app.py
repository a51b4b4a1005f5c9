"""A Celery app with the adapter installed, for tests/adapters/test_celery.py and
bench/adapter_cost.py: the worker runs `celery -A tests.helpers.celery_app worker`. Its
broker, store and spool come from the environment the test gives the worker."""

from __future__ import annotations

import os
import time

from celery import Celery

from epochledger.adapters.celery import install

app = Celery("celery_app", broker=os.environ.get("EPOCHLEDGER_TEST_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_redirect_stdouts=False,
)
adapter = None
if os.environ.get("EPOCHLEDGER_TEST_ADAPTER", "1") == "1":
    adapter = install(app, store=os.environ.get("EPOCHLEDGER_STORE"), spool=os.environ.get("EPOCHLEDGER_SPOOL"))


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def touch(path: str) -> None:
    with open(path, "w"):
        pass


@app.task
def boom() -> None:
    raise ValueError("bad input")


@app.task(bind=True, max_retries=3)
def flaky(self) -> int:  # type: ignore[no-untyped-def]
    if self.request.retries < 2:
        raise self.retry(exc=RuntimeError(f"attempt {self.request.retries}"), countdown=0.1)
    return int(self.request.retries)


@app.task
def sleepy(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@app.task(acks_late=True, reject_on_worker_lost=True)
def once_slow(marker: str) -> str:
    """The first delivery sleeps (to be killed); a redelivery finds the marker and ends."""
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    return marker
