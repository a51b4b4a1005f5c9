"""Shared fixtures: a manual clock, and one ledger per backend (rule L5: a behaviour
only one backend has is a bug in the other).

PostgreSQL tests run against a real server, each in a schema of its own so parallel
runs cannot collide. With EPOCHLEDGER_TEST_POSTGRES=require (CI) a missing server is
a failure; otherwise those tests skip and say why.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Batch, Ledger
from epochledger.ledger.errors import ConflictError

PG_BASE = os.environ.get("EPOCHLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
T0 = datetime(2026, 9, 9, 14, 0, 0, tzinfo=UTC)

_pg_problem: str | None | bool = False  # False = not probed yet


def _probe_pg() -> str | None:
    global _pg_problem
    if _pg_problem is False:
        try:
            import psycopg

            with psycopg.connect(PG_BASE, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_problem = None
        except Exception as e:
            _pg_problem = f"PostgreSQL at {PG_BASE} unavailable: {type(e).__name__}: {e}"
    return _pg_problem  # type: ignore[return-value]


def need_pg() -> None:
    problem = _probe_pg()
    if problem:
        if os.environ.get("EPOCHLEDGER_TEST_POSTGRES") == "require":
            pytest.fail(f"EPOCHLEDGER_TEST_POSTGRES=require but {problem}")
        pytest.skip(problem)


def new_pg_store(cleanups: list[Callable[[], Any]]) -> str:
    """The URL of a new, empty PostgreSQL store in a schema of its own; its drop is
    appended to `cleanups` (the contract suites' create_store, and the `pg_url` fixture)."""
    need_pg()
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:16]

    def drop() -> None:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    cleanups.append(drop)
    return f"{PG_BASE}?schema={schema}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL store URL in a fresh schema, dropped afterwards."""
    cleanups: list[Callable[[], Any]] = []
    yield new_pg_store(cleanups)
    for undo in cleanups:
        undo()


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The OS processes a test starts: each killed if still running, and reaped, at teardown."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request) -> str:
    """Every store contract test runs once per backend."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0, uptime=60.0)


@pytest.fixture
def ledger(store_url: str, clock: ManualClock) -> Iterator[Ledger]:
    with open_ledger(store_url, clock=clock) as lg:
        yield lg


@pytest.fixture
def sqlite_ledger(sqlite_url: str, clock: ManualClock) -> Iterator[Ledger]:
    with open_ledger(sqlite_url, clock=clock) as lg:
        yield lg


@contextmanager
def read_only_backup(live: Path, directory: Path) -> Iterator[Path]:
    """A backup copy of the SQLite ledger `live` as on a read-only mount: a 0444 file in
    the 0555 `directory` (made here); the directory's mode is given back at the end."""
    directory.mkdir()
    copy = directory / live.name
    with sqlite3.connect(live) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    copy.chmod(0o444)
    directory.chmod(0o555)
    try:
        yield copy
    finally:
        directory.chmod(0o755)


def race(target: Callable[..., None], store_url: str, *, timeout: float = 60) -> list[object]:
    """Two spawned OS processes run `target(store_url, worker, barrier, results)`
    (workers 1 and 2, a barrier for both, a queue each puts its outcome on) against one
    store; their outcomes, once both exited cleanly (rule L5's races)."""
    ctx = mp.get_context("spawn")
    go, results = ctx.Barrier(2, timeout=60), ctx.Queue()
    procs = [ctx.Process(target=target, args=(store_url, w, go, results)) for w in (1, 2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return outcomes


def losing_batch(stream: str) -> type[Batch]:
    """A Batch that loses its race on `stream`: another writer took the version first,
    so nothing it holds is appended (rule L5)."""

    class Losing(Batch):
        def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
            if exc_type is None:
                raise ConflictError([stream])
            super().__exit__(exc_type, exc, tb)

    return Losing


@contextmanager
def small_disk(directory: Path, size: str = "2m") -> Iterator[Path]:
    """A real tmpfs of `size` mounted at `directory` (made here), unmounted at the end.
    Mounting needs root (CAP_SYS_ADMIN): elsewhere the test skips and says so. Fill it
    with fill_disk to make the disk full for real (ENOSPC from the kernel)."""
    import subprocess

    directory.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {done.stderr.strip() or done.returncode}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill_disk(directory: Path) -> Path:
    """Write zeros into `directory` until its file system says ENOSPC; the filler file
    is returned (remove it to free the space)."""
    filler = directory / "filler"
    block = b"\0" * 4096
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError:
            pass
    assert os.statvfs(directory).f_bavail == 0
    return filler
