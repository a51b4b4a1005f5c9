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


def test_the_writers_connection_syncs_every_commit_in_wal_mode(tmp_path) -> None:
    """Nothing acknowledged is lost: the append's own connection (not the library's
    pool since issue 12) states WAL and synchronous=FULL itself rather than trusting
    the SQLite build's default. Mutation caught: the PRAGMA dropped on a build whose
    default is NORMAL (simulated here by a connection set to OFF before the first write)."""
    from epochledger import open_ledger

    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        lg.store._reader().execute("PRAGMA synchronous=OFF")  # what another build's default could be
        lg.queue("r1")
        conn = lg.store._writer()
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        lg.close()
