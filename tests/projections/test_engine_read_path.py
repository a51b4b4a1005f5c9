"""The fast read path (raw keyset SELECT + typed msgspec decode) returns exactly what
the library's own read path returns: select_notifications + decode (rule R2; the
contract behind docs/benchmarks.md's read figures). Run on both stores."""

from __future__ import annotations

import msgspec

from epochledger.ledger import codec
from epochledger.ledger.events import Recorded
from epochledger.ledger.store import Poison
from tests.helpers.engine_helpers import corrupt, random_history


def _library(store, after=0, upto=None, batch=7):
    """The library's path: select_notifications, payloads decoded by the library's
    JSON transcoder (the reference for content); our codec on the same payload gives
    the typed event to compare with."""
    out = []
    for position, stream, version, topic, raw in store.library_read(after, upto, batch):
        out.append((position, stream, version, topic, raw, codec.decode(msgspec.json.encode(raw))))
    return out


def _fast(store, after=0, upto=None, batch=7):
    out = []
    for chunk in store.read_batches(after, upto, batch):
        for rec in chunk:
            assert isinstance(rec, Recorded)
            raw = msgspec.json.decode(codec.encode(rec.event))
            out.append((rec.position, rec.stream, rec.version, raw["type"], raw, rec.event))
    return out


def test_R2_fast_read_path_equals_library_select_notifications(ledger) -> None:
    random_history(ledger, seed=6, runs=8, ops=400)
    head = ledger._store.max_position()
    assert head > 50
    assert _fast(ledger._store) == _library(ledger._store)
    # Windows: strictly after `after`, up to and including `upto`, across batch edges.
    for after, upto in [(0, 1), (3, 17), (head - 5, None), (head, None), (10, 10)]:
        assert _fast(ledger._store, after, upto) == _library(ledger._store, after, upto), (after, upto)
    assert [r.position for r in ledger.events()] == [n[0] for n in _library(ledger._store)]


def test_T4_undecodable_event_is_a_poison_in_place_not_an_abort(ledger, store_url) -> None:
    random_history(ledger, seed=7, runs=5, ops=60)
    head = ledger._store.max_position()
    corrupt(store_url, 5, b'{"type":"run.started","at":"not a time"}')
    got = [rec for chunk in ledger._store.read_batches(0, None, 4) for rec in chunk]
    assert [r.position for r in got] == [n[0] for n in ledger._store.library_read()]
    bad = [r for r in got if isinstance(r, Poison)]
    assert len(bad) == 1 and bad[0].position == 5 and bad[0].tag == "run.started"
    assert got[-1].position == head
