"""The store contract on the SQLite backend (tests/store_contract.py)."""

from __future__ import annotations

from tests.store_contract import StoreContract


class TestSQLiteStore(StoreContract):
    def create_store(self) -> str:
        return f"sqlite:///{self.tmp_path / 'ledger.db'}"


def test_L5_positions_are_read_back_when_the_rowids_reached_the_top(tmp_path) -> None:
    """The append takes its positions as the log's end + 1, 2, ... (SQLite gives a rowid
    table's new rows the largest rowid plus one), and checks that with SQLite's own
    last_insert_rowid(). A forged row at rowid 2**63-1 makes SQLite pick rowids at
    random: the positions are then read back by (stream, version), still exact."""
    import sqlite3

    from ledger.events import RunQueued, Status
    from ledger.store import EVENTS_TABLE, Append, open_store
    from tests.conftest import T0

    path = tmp_path / "top.db"
    store = open_store(f"sqlite:///{path}")
    try:
        def queued(run: str) -> Append:
            return Append(f"run:{run}", 1, RunQueued(at=T0, run=run, status=Status.QUEUED))

        assert store.append([queued("a"), queued("b")]) == [1, 2]
        assert store.append([queued("c")]) == [3]
        raw = sqlite3.connect(path)
        raw.execute(f"INSERT INTO {EVENTS_TABLE} (rowid, originator_id, originator_version, topic, state) "
                    "VALUES (?, 'run:forged', 1, 'run.queued', x'7b7d')", ((1 << 63) - 1,))  # fmt: skip
        raw.commit()
        raw.close()
        for batch in ([queued("d"), queued("e"), queued("f")], [queued("g")]):
            got = store.append(batch)
            stored = {(s, v): p for p, s, v, _ in next(store.read_raw(3))}
            assert got == [stored[(a.stream, 1)] for a in batch]
    finally:
        store.close()
