"""Point-in-time replay (rule R1): the same prefix gives byte-identical state and the
same hash; a position and an instant select the documented prefix."""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.ledger.events import Status
from epochledger.ndjson import export_lines, import_lines
from epochledger.projections import engine, registry
from epochledger.replay import canonical_bytes, state_at, state_hash
from tests.conftest import T0
from tests.helpers.engine_helpers import canonical, random_history


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
            position = int(a._store.max_position() * cut)
            one, two = state_at(a._store, position=position), state_at(a._store, position=position)
            assert canonical_bytes(one) == canonical_bytes(two)
            assert state_hash(one) == state_hash(two)
            lines = list(export_lines(a))[:position]
        with open_ledger(f"sqlite:///{tmp}/b.db", clock=ManualClock(T0, 60)) as b:
            import_lines(b, lines)
            prefix_only = state_at(b._store)
        assert canonical_bytes(prefix_only) == canonical_bytes(one)
    finally:
        shutil.rmtree(tmp)


def test_R1_replay_to_the_head_equals_the_live_views(ledger) -> None:
    random_history(ledger, 3, runs=8, ops=200)
    state = state_at(ledger._store)
    for v in registry.VIEWS:
        engine.catch_up(ledger._store, v)
        found, lag = engine.read_view(ledger._store, v, catch_up_first=False)
        assert lag == 0
        assert canonical(found) == canonical(state.views[v.NAME])


def test_R1_instant_selects_the_prefix_before_the_first_later_event(ledger, clock) -> None:
    ledger.queue("a")  # T0
    clock.advance(10)
    ledger.queue("b")  # T0+10
    clock.step_wall(-60)  # the wall clock steps back: stamped earlier, recorded later
    ledger.queue("c")  # T0-50
    at = T0 + timedelta(seconds=5)
    state = state_at(ledger._store, at=at)
    assert state.position == 1 and set(state.views["runs"]) == {"a"}
    assert state_at(ledger._store, at=T0 + timedelta(seconds=10)).position == 3
    assert state_at(ledger._store, at=T0 - timedelta(seconds=1)).position == 0
    # beyond the head: the same state as at the head
    assert state_hash(state_at(ledger._store, position=99)) == state_hash(state_at(ledger._store))


def test_R1_replay_cli_hash_and_json(ledger, store_url, capsys) -> None:
    random_history(ledger, 5, runs=4, ops=80)
    assert main(["--store", store_url, "replay", "--position", "10"]) == 0
    first = capsys.readouterr().out
    assert main(["--store", store_url, "replay", "--position", "10"]) == 0
    assert capsys.readouterr().out == first
    assert f"state hash {state_hash(state_at(ledger._store, position=10))}" in first
    assert main(["--store", store_url, "replay", "--at", "2026-09-09T14:00:30Z", "--json"]) == 0
    data = capsys.readouterr().out.encode()
    expected = state_at(ledger._store, at=T0 + timedelta(seconds=30))
    assert (
        data.rstrip(b"\n")
        == b'{"state":' + canonical_bytes(expected) + b',"state_hash":"' + state_hash(expected).encode() + b'"}'
    )


def test_R1_replay_json_carries_the_hash_the_text_prints(ledger, store_url, capsys) -> None:
    """`replay --json` says the same state hash as the text, and it is the SHA-256 of the
    `state` member's bytes exactly as printed."""
    import hashlib
    import json

    random_history(ledger, 7, runs=3, ops=40)
    assert main(["--store", store_url, "replay", "--position", "12"]) == 0
    text = capsys.readouterr().out
    assert main(["--store", store_url, "replay", "--position", "12", "--json"]) == 0
    raw = capsys.readouterr().out.encode().rstrip(b"\n")
    doc = json.loads(raw)
    assert f"state hash {doc['state_hash']}" in text
    inner = raw[len(b'{"state":') : raw.rindex(b',"state_hash":')]
    assert hashlib.sha256(inner).hexdigest() == doc["state_hash"] and doc["state"]["position"] <= 12
    assert main(["--store", store_url, "replay", "--at", "2026-09-09T14:00:30"]) == 3
    assert main(["--store", store_url, "replay", "--at", "yesterday"]) == 3


def test_I1_R1_replay_by_event_time_includes_a_history_imported_late(ledger, clock, store_url, capsys) -> None:
    """A run recorded now with an hour-old history (an importer catching up): replay
    --at follows log order and leaves it out with everything after the first
    later-stamped event; --by event-time takes every stream up to its own first event
    stamped after the instant. Each stream stays a prefix of itself: a run whose start
    was stamped before its queue (a clock that stepped back) is left out whole, never
    folded as a start without a queue. Mutation caught: filtering events by time
    without ending the stream (x would be folded from its start alone, and parked)."""
    from epochledger.ndjson import import_lines

    ledger.queue("a")  # T0, position 1
    clock.advance(10)
    ledger.start("a")  # T0+10
    clock.advance(30)
    ledger.queue("b")  # T0+40: after the instant asked about
    old = [
        {"type": "run.queued", "at": "2026-09-09T13:00:00Z", "run": "old"},
        {"type": "run.started", "at": "2026-09-09T13:01:00Z", "run": "old"},
        {"type": "run.failed", "at": "2026-09-09T13:05:00Z", "run": "old", "code": "OOM", "resumable": False},
    ]
    import_lines(ledger, [json.dumps(r) for r in old])
    clock.advance(10)
    ledger.queue("x")  # T0+50
    clock.step_wall(-30)
    ledger.start("x")  # T0+20, recorded after T0+50
    at = T0 + timedelta(seconds=30)
    by_log = state_at(ledger._store, at=at)
    assert set(by_log.views["runs"]) == {"a"} and by_log.position == 2
    by_time = state_at(ledger._store, at=at, by="event-time")
    runs = by_time.views["runs"]
    assert set(runs) == {"a", "old"} and runs["old"].status is Status.FAILED and runs["a"].status is Status.RUNNING
    assert by_time.parked == {v: [] for v in by_time.parked}
    assert canonical_bytes(by_time) == canonical_bytes(state_at(ledger._store, at=at, by="event-time"))
    early = state_at(ledger._store, at=T0 - timedelta(seconds=1), by="event-time").views["runs"]
    assert set(early) == {"old"}
    assert main(["--store", store_url, "replay", "--at", "2026-09-09T14:00:30Z", "--by", "event-time"]) == 0
    assert f"state hash {state_hash(by_time)}" in capsys.readouterr().out
    assert main(["--store", store_url, "replay", "--by", "event-time"]) == 3
    assert "event-time needs an instant" in capsys.readouterr().err
