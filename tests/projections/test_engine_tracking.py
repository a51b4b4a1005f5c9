"""The engine's tracking under poison (rules T4, R3): which event a parked row is
stamped with, how many reads and evolves an event gets before it is parked, and what a
runner says about the position it reached. A torn read (a row that does not decode once
and does on a second read) is made by answering the engine's one-event re-read with the
stored record, as a read that raced a disk fault heals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from epochledger.app import Ledger
from epochledger.ledger.errors import RunNotFound
from epochledger.ledger.events import Recorded
from epochledger.ledger.store import Poison
from epochledger.projections import engine, runs, tables
from tests.helpers.engine_helpers import corrupt

BAD = b"\x00 no longer decodes"


def _queued(ledger: Ledger, n: int) -> list[Recorded]:
    """n runs queued, a second apart: positions 1 to n, each with its own ledger time."""
    for i in range(1, n + 1):
        ledger.queue(f"r{i}", workflow="wf")
        ledger.clock.advance(1)  # type: ignore[attr-defined]
    records = list(ledger._store.read_all())
    assert [r.position for r in records] == list(range(1, n + 1))
    return records


def _heal_on_reread(ledger: Ledger, monkeypatch: pytest.MonkeyPatch, good: Recorded) -> list[int]:
    """The engine's re-read of `good`'s position (one event, `read_batches(p - 1, p, 1)`)
    answers the stored record; every other read sees the row as stored. Returns the
    positions re-read, in order."""
    read_batches = ledger._store.read_batches
    reread: list[int] = []

    def torn(after: int = 0, upto: int | None = None, batch: int = 500) -> Iterator[list[Recorded | Poison]]:
        if upto is not None and upto - after == 1 and batch == 1:
            reread.append(upto)
            if upto == good.position:
                return iter([[good]])
        return read_batches(after, upto, batch)

    monkeypatch.setattr(ledger._store, "read_batches", torn)
    return reread


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the engine's bookkeeping, not the backend's
def test_T4_a_row_parked_after_a_healed_reread_carries_the_time_of_the_healed_event(
    ledger: Ledger, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of two: [1, 2] where 2 does not decode and heals on its re-read, then
    [3, 4] where 3 stays bad. 3 is parked with the ledger time of the last event before
    it, 2 (healed), not 1: the record kept from the first batch is later than the last
    one the batch decoded. Mutation caught: `_latest` returning the batch's last decoded
    record (1) whatever the record kept."""
    records = _queued(ledger, 4)
    corrupt(store_url, 2, BAD)
    corrupt(store_url, 3, BAD)
    reread = _heal_on_reread(ledger, monkeypatch, records[1])
    stats = engine.rebuild(ledger._store, runs, batch=2)
    assert (stats.events, stats.parked, stats.position) == (4, 1, 4)
    parked = tables.parked(ledger._store, "runs")
    assert [(p[1], p[6]) for p in parked] == [(3, records[1].event.at.isoformat())]
    assert reread == [2, 3, 3]  # 2 healed at its first re-read; 3 read MAX_ATTEMPTS times in all
    state, _ = engine.read_run(ledger._store, "r2", catch_up_first=False)
    assert state is not None and state.run == "r2"
    with pytest.raises(RunNotFound):
        engine.read_run(ledger._store, "r3", catch_up_first=False)
