"""The store contract on the SQLite backend (tests/helpers/store_contract.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.store_contract import StoreContract


class TestSQLiteStore(StoreContract):
    def create_store(self) -> str:
        return f"sqlite:///{self.tmp_path / 'ledger.db'}"


def test_L5_positions_are_read_back_when_the_rowids_reached_the_top(tmp_path) -> None:
    """The append takes its positions as the log's end + 1, 2, ... (SQLite gives a rowid
    table's new rows the largest rowid plus one), and checks that with SQLite's own
    last_insert_rowid(). A forged row at rowid 2**63-1 makes SQLite pick rowids at
    random: the positions are then read back by (stream, version), still exact."""
    import sqlite3

    from epochledger.ledger.events import RunQueued, Status
    from epochledger.ledger.store import EVENTS_TABLE, Append, open_store
    from tests.conftest import T0

    path = tmp_path / "top.db"
    store = open_store(f"sqlite:///{path}")
    try:

        def queued(run: str) -> Append:
            return Append(f"run:{run}", 1, RunQueued(at=T0, run=run, status=Status.QUEUED))

        assert store.append([queued("a"), queued("b")]) == [1, 2]
        assert store.append([queued("c")]) == [3]
        raw = sqlite3.connect(path)
        raw.execute(
            f"INSERT INTO {EVENTS_TABLE} (rowid, originator_id, originator_version, topic, state) "
            "VALUES (?, 'run:forged', 1, 'run.queued', x'7b7d')",
            ((1 << 63) - 1,),
        )
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
        lg._store._reader().execute("PRAGMA synchronous=OFF")  # what another build's default could be
        lg.queue("r1")
        conn = lg._store._writer()
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        lg.close()


_stream = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
_state = st.binary(max_size=40) | st.sampled_from([b"\x00", b"\t", b"\n", b"\r\n", b'{"type":"run.queued"}', b"\xff"])
_text_state = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(_stream, st.integers(1, 2**62), _state | _text_state),
        min_size=1,
        max_size=30,
        unique_by=lambda r: (r[0], r[1]),
    ),
    after=st.integers(0, 35),
    upto=st.none() | st.integers(0, 35),
    batch=st.integers(1, 12),
)
def test_A1_read_lines_built_by_sqlite_are_lines_of_the_rows_read_raw_gives(
    tmp_path_factory, rows, after, upto, batch
) -> None:
    """Law: SQLite's own lines (group_concat of `||`) are lines_of(read_raw's rows) byte
    for byte, batch for batch, for any stream text and any state bytes (NULs, tabs,
    newlines, bytes that are not UTF-8) and a TEXT state a hand edit left (read_raw
    gives it as str; lines_of takes its UTF-8). Mutation caught (applied, seen failing):
    printf's %s in place of `||`, which ends a value at its first NUL."""
    import sqlite3

    from epochledger.ledger.store import EVENTS_TABLE, Lines, lines_of, open_store

    path = tmp_path_factory.mktemp("lines") / "l.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as raw:
        raw.executemany(
            f"INSERT INTO {EVENTS_TABLE} (originator_id, originator_version, topic, state) VALUES (?, ?, 't', ?)", rows
        )
    raw.close()
    store = open_store(f"sqlite:///{path}", create=False)
    try:
        got = list(store.read_lines(after, upto, batch))
        assert got == [Lines(len(r), r[-1][0], lines_of(r)) for r in store.read_raw(after, upto, batch)]
    finally:
        store.close()


def test_A1_read_lines_beyond_sqlites_string_limit_are_built_from_the_rows(tmp_path) -> None:
    """A batch whose text SQLite cannot hold (its length limit, 1 GB by default) is
    built by lines_of from the rows instead: the same bytes, no error."""
    import sqlite3

    from epochledger import open_ledger
    from epochledger.ledger.clock import ManualClock
    from epochledger.ledger.store import Lines, lines_of, open_store
    from tests.conftest import T0
    from tests.helpers.engine_helpers import bulk_history

    path = tmp_path / "l.db"
    with open_ledger(f"sqlite:///{path}", clock=ManualClock(T0, uptime=5.0)) as lg:
        bulk_history(lg, 20)
    store = open_store(f"sqlite:///{path}", create=False)
    try:
        store._reader().setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 2000)  # type: ignore[attr-defined]
        with pytest.raises(sqlite3.DataError):
            store._reader().execute(store._LINES_SQL, (0, 1 << 62, 100)).fetchone()  # type: ignore[attr-defined]
        got = list(store.read_lines(batch=50))
        assert got == [Lines(len(r), r[-1][0], lines_of(r)) for r in store.read_raw(batch=50)]
        assert sum(x.events for x in got) == 80
    finally:
        store.close()
