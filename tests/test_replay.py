"""Point-in-time replay (rule R1): the same prefix gives byte-identical state and the
same hash; a position and an instant select the documented prefix."""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.ndjson import export_lines, import_lines
from projections import engine, registry
from replay import canonical_bytes, state_at, state_hash
from tests.conftest import T0
from tests.engine_helpers import canonical, random_history


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.floats(0, 1.2))
def test_R1_replay_of_the_same_prefix_is_byte_identical(seed: int, cut: float) -> None:
    """Twice on one log, and once on a second log holding only that prefix (imported
    from an export): the same bytes and hash. SQLite only (positions are contiguous
    there, so the prefix log has the same positions)."""
    tmp = tempfile.mkdtemp()
    try:
        with open_ledger(f"sqlite:///{tmp}/a.db", clock=ManualClock(T0, 60)) as a:
            random_history(a, seed, runs=5, ops=120)
            position = int(a.store.max_position() * cut)
            one, two = state_at(a.store, position=position), state_at(a.store, position=position)
            assert canonical_bytes(one) == canonical_bytes(two)
            assert state_hash(one) == state_hash(two)
            lines = list(export_lines(a))[:position]
        with open_ledger(f"sqlite:///{tmp}/b.db", clock=ManualClock(T0, 60)) as b:
            import_lines(b, lines)
            prefix_only = state_at(b.store)
        assert canonical_bytes(prefix_only) == canonical_bytes(one)
    finally:
        shutil.rmtree(tmp)


def test_R1_replay_to_the_head_equals_the_live_views(ledger) -> None:
    random_history(ledger, 3, runs=8, ops=200)
    state = state_at(ledger.store)
    for v in registry.VIEWS:
        engine.catch_up(ledger.store, v)
        found, lag = engine.read_view(ledger.store, v, catch_up_first=False)
        assert lag == 0
        assert canonical(found) == canonical(state.views[v.NAME])


def test_R1_instant_selects_the_prefix_before_the_first_later_event(ledger, clock) -> None:
    ledger.queue("a")  # T0
    clock.advance(10)
    ledger.queue("b")  # T0+10
    clock.step_wall(-60)  # the wall clock steps back: stamped earlier, recorded later
    ledger.queue("c")  # T0-50
    at = T0 + timedelta(seconds=5)
    state = state_at(ledger.store, at=at)
    assert state.position == 1 and set(state.views["runs"]) == {"a"}
    assert state_at(ledger.store, at=T0 + timedelta(seconds=10)).position == 3
    assert state_at(ledger.store, at=T0 - timedelta(seconds=1)).position == 0
    # beyond the head: the same state as at the head
    assert state_hash(state_at(ledger.store, position=99)) == state_hash(state_at(ledger.store))


def test_R1_replay_cli_hash_and_json(ledger, store_url, capsys) -> None:
    random_history(ledger, 5, runs=4, ops=80)
    assert main(["--store", store_url, "replay", "--position", "10"]) == 0
    first = capsys.readouterr().out
    assert main(["--store", store_url, "replay", "--position", "10"]) == 0
    assert capsys.readouterr().out == first
    assert f"state hash {state_hash(state_at(ledger.store, position=10))}" in first
    assert main(["--store", store_url, "replay", "--at", "2026-09-09T14:00:30Z", "--json"]) == 0
    data = capsys.readouterr().out.encode()
    assert data.rstrip(b"\n") == canonical_bytes(state_at(ledger.store, at=T0 + timedelta(seconds=30)))
    assert main(["--store", store_url, "replay", "--at", "2026-09-09T14:00:30"]) == 3
    assert main(["--store", store_url, "replay", "--at", "yesterday"]) == 3
