"""A tiny Dagster job module for tests/app/test_import_dagster.py: real jobs, run by real
Dagster on a temporary instance (rule I3). In-process executor: one run worker
process per run, no step subprocesses, so a run costs milliseconds, not seconds.

Behaviour is steered by files in the directory named by $EPOCHLEDGER_DAGSTER_MARKS,
so a test can make a run fail once, or hold a run inside its op until it is killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from dagster import Failure, RetryPolicy, in_process_executor, job, op


def _marks() -> Path:
    return Path(os.environ["EPOCHLEDGER_DAGSTER_MARKS"])


@op
def hello() -> int:
    return 1


@op
def broken(x: int) -> int:
    raise Failure(description="broken on purpose")


@op(retry_policy=RetryPolicy(max_retries=2))
def flaky_once(x: int) -> int:
    """Fails its first attempt, succeeds its retry (STEP_UP_FOR_RETRY, STEP_RESTARTED)."""
    mark = _marks() / "flaky_once.failed"
    if not mark.exists():
        mark.touch()
        raise Exception("first attempt fails")
    return x


@op
def needs_fix(x: int) -> int:
    """Fails until the test writes the `fixed` mark: a run to re-execute from failure."""
    if not (_marks() / "fixed").exists():
        raise Exception("not fixed yet")
    return x


@op
def hold(x: int) -> int:
    """Says it is running (the `holding.<pid>` mark), then waits for `release` (at most
    60 s): a run worker to cancel, to SIGKILL, or to race with a force-cancel."""
    (_marks() / f"holding.{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while not (_marks() / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return x


@job(executor_def=in_process_executor, tags={"team": "data", "owner": "ana"})
def ok_job() -> None:
    hello()


@job(executor_def=in_process_executor)
def fail_job() -> None:
    broken(hello())


@job(executor_def=in_process_executor)
def retry_job() -> None:
    flaky_once(hello())


@job(executor_def=in_process_executor)
def fix_job() -> None:
    needs_fix(hello())


@job(executor_def=in_process_executor)
def hold_job() -> None:
    hold(hello())
