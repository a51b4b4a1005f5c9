"""Kill a real rebuild / catch-up process with SIGKILL at a random event and resume:
the result equals a clean replay, nothing doubled (rule R3). The failures view
counts transitions, so an event applied twice would show as a wrong count."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from epochledger.projections import engine, registry, runs, tables
from epochledger.replay import verify as verify_mod
from tests.helpers.engine_helpers import bulk_history

# The child applies the log in small batches and sleeps a little between them, so the
# kill lands mid-way; the sleep is in the child's progress callback, not in the engine.
CHILD = """
import sys, time
from epochledger.ledger.store import open_store
from epochledger.projections import engine, registry
store = open_store(sys.argv[1])
def slow(view, position, head):
    time.sleep(0.002)
op = getattr(engine, sys.argv[2])
for v in registry.VIEWS:
    op(store, v, progress=slow, batch=37, cache_limit=50)
print("done", flush=True)
"""


def _tracked(store, key: str) -> int:
    if key == "all":  # catch-up: the views go one after the other
        return sum(_tracked(store, v.NAME) for v in registry.VIEWS)
    t = tables.tracking(store, key)
    return 0 if t is None else t[1]


def _kill_mid_way(url: str, op: str, key: str, store, threshold: int) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, op], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while _tracked(store, key) < threshold:
            assert child.poll() is None, child.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "child made no progress"
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _assert_equals_clean_replay(store) -> None:
    for v in registry.VIEWS:
        columns = [c for c, _ in engine.column_spec(v)]
        tracking, rows = tables.view_rows(store, v.NAME, engine.table_of(v.NAME), columns)
        assert tracking == (v.VERSION, store.max_position())
        assert sorted(rows) == verify_mod.replay_rows(store, v, store.max_position())[0], v.NAME
        assert verify_mod.verify_view(store, v).difference is None


@pytest.mark.parametrize("op", ["rebuild", "catch_up"])
def test_R3_sigkill_mid_way_then_resume_equals_clean_replay(ledger, store_url, op: str) -> None:
    bulk_history(ledger, 1200)  # ~5,000 events
    store = ledger._store
    head = store.max_position()
    if op == "catch_up":
        for v in registry.VIEWS:
            engine.catch_up(store, v, upto=head // 10)  # a live view that lags
        key = "all"
    else:
        key = runs.NAME + engine.SHADOW
    views = len(registry.VIEWS) if op == "catch_up" else 1
    threshold = random.Random().randrange(head // 5, head * 3 // 4) * views
    _kill_mid_way(store_url, op, key, store, threshold)
    if op == "rebuild":
        # killed mid-rebuild: readers still have no half-built view, and the partial
        # rebuild resumes where it stopped rather than from zero
        assert tables.tracking(store, runs.NAME) is None
        reached = _tracked(store, key)
        assert threshold <= reached < head
        left = sum(len(chunk) for chunk in store.read_batches(reached))  # ids have gaps on PostgreSQL
        stats = engine.rebuild(store, runs)
        assert stats.events == left
        for v in registry.VIEWS:
            if v.NAME != runs.NAME:
                engine.rebuild(store, v)
    else:
        assert threshold <= _tracked(store, key) < head * views
        for v in registry.VIEWS:
            engine.catch_up(store, v)
    _assert_equals_clean_replay(store)
    counts = {
        r[0]: r[3] for r in tables.view_rows(store, "failures", "view_failures", ["status", "code", "transitions"])[1]
    }
    assert counts == {"failed_resumable TIMEOUT": 120, "failed_resumable ": 120}


def test_R3_sigkill_mid_rebuild_leaves_the_live_view_and_its_index(ledger, store_url) -> None:
    """A rebuild killed mid-way over a live view: the live table, its rows, its
    tracking and its status index are as they were (the index is only made at the
    swap, on the table swapped in); the resumed rebuild swaps in a table that has it."""
    from tests.helpers.engine_helpers import view_indexes

    bulk_history(ledger, 1200)
    store = ledger._store
    for v in registry.VIEWS:
        engine.catch_up(store, v)
    columns = [c for c, _ in engine.column_spec(runs)]
    before = tables.view_rows(store, runs.NAME, "view_runs", columns)
    indexes = view_indexes(store, "view_runs")
    assert indexes == {f"view_runs__{name}": cols for name, cols in runs.INDEXES.items()}
    head = store.max_position()
    _kill_mid_way(
        store_url, "rebuild", runs.NAME + engine.SHADOW, store, random.Random().randrange(head // 5, head * 3 // 4)
    )
    assert tables.view_rows(store, runs.NAME, "view_runs", columns) == before
    assert view_indexes(store, "view_runs") == indexes
    assert view_indexes(store, "view_runs__rebuild") == {}
    assert 0 < _tracked(store, runs.NAME + engine.SHADOW) < head
    assert engine.rebuild(store, runs).rebuilt
    assert view_indexes(store, "view_runs") == indexes
    _assert_equals_clean_replay(store)
