"""Bulk stream reads for group commit (BRIEF L1, L5): `Batch.prefetch` must decide
exactly as the per-stream reads would, on both stores."""

from __future__ import annotations

import pytest

from ledger.errors import ConflictError, IllegalTransition
from ledger.events import run_stream
from tests.engine_helpers import random_history


def test_L5_read_streams_equals_read_stream_per_stream(ledger) -> None:
    random_history(ledger, 21, runs=12, ops=200)
    streams = [run_stream(f"run-{i:03d}") for i in range(14)]  # two never written
    got = ledger.store.read_streams(streams)
    assert list(got) == streams
    assert got == {s: ledger.store.read_stream(s) for s in streams}


def test_L5_prefetched_batch_decides_like_an_unprefetched_one(ledger) -> None:
    ledger.queue("old")
    with ledger.batch() as b:
        b.prefetch([run_stream("old"), run_stream("new"), run_stream("old")])
        assert b.start("old").status == "running"
        assert b.queue("new").version == 1
        with pytest.raises(IllegalTransition):
            b.queue("old")
    assert [r.event.status for r in ledger.history("old")] == ["queued", "running"]
    # the optimistic lock still holds: another writer moves a prefetched stream
    b = ledger.batch()
    b.prefetch([run_stream("new")])
    ledger.start("new")
    b.cancel("new")
    with pytest.raises(ConflictError):
        b.commit()
    assert ledger.get_run("new").status == "running"
