"""The SQLite append's own connection (rule L5): a writer kept waiting past the busy
timeout is told `LockTimeout` (not committed: retry as is), never an unsure commit, and
a database file in another journal mode is switched to WAL before the first write, as
one the ledger made. Real SQLite files and a real second connection holding the lock."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.ledger.errors import ConflictError, LockTimeout, NotCommitted, StoreError
from epochledger.ledger.events import RunStarted, Status
from epochledger.ledger.store import EVENTS_TABLE, Append, open_store
from epochledger.ledger.store import sqlite as sqlite_store
from epochledger.ledger.store.chain import CHAIN_TABLE
from tests.conftest import T0
from tests.helpers.store_contract import queued_append as _queued


def test_L5_a_sqlite_writer_that_waits_past_the_busy_timeout_gets_lock_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the write lock (BEGIN IMMEDIATE) past the busy timeout:
    the append is refused as LockTimeout naming the append, the file's write lock, the
    bound and the streams, and nothing is appended. Mutation caught: "database is
    locked" not recognised (the writer is told its commit is unsure instead)."""
    monkeypatch.setattr(sqlite_store, "SQLITE_BUSY_TIMEOUT", 0.2)  # the 30 s bound, shortened for the test
    path = tmp_path / "ledger.db"
    with open_ledger(f"sqlite:///{path}", clock=ManualClock(T0)) as lg:
        lg.queue("a", workflow="wf")
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(LockTimeout) as refused:
                lg.queue("b", workflow="wf")
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        e = refused.value
        assert (e.what, e.lock, e.seconds) == ("append", f"the write lock of {path}", 0.2)
        assert e.streams == ["run:b"]
        assert lg._store.max_position() == 1
        lg.queue("b", workflow="wf")  # the lock released, the same command lands
        assert lg._store.max_position() == 2


def test_L5_a_database_file_in_another_journal_mode_is_switched_to_wal_on_the_first_write(tmp_path: Path) -> None:
    """A ledger file copied or restored in rollback-journal mode: the first append
    switches it to WAL (readers never block the writer). Mutation caught: the journal
    mode never read, so such a file stays in DELETE mode."""
    path = tmp_path / "ledger.db"
    with open_ledger(f"sqlite:///{path}", clock=ManualClock(T0)) as lg:
        lg.queue("a", workflow="wf")
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    finally:
        raw.close()
    with open_ledger(f"sqlite:///{path}", clock=ManualClock(T0)) as lg:
        lg.queue("b", workflow="wf")
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()


def _started(run: str) -> Append:
    return Append(f"run:{run}", 2, RunStarted(at=T0, run=run, status=Status.RUNNING, process="w"))


def _shapes(statements: list[str]) -> list[str]:
    """Each statement up to its values, in capitals (SQL's words have no case)."""
    return [s.upper().split(" VALUES ")[0] for s in statements]


def test_W1_an_append_is_its_few_statements_and_the_connection_is_set_up_once(tmp_path: Path) -> None:
    """The hot path (docs/benchmarks.md): the first write of a thread's connection
    reads the journal mode (a WAL file is not switched again) and states FULL sync;
    every append is then BEGIN IMMEDIATE, the head (the log's end and the chain's last
    hash in one SELECT, once the chain is known), the rows, their links, COMMIT, with
    no PRAGMA and no read-back of the positions SQLite gave."""
    path = str(tmp_path / "ledger.db")
    store = open_store(path)
    store.append([_queued("a")])
    store.close()
    store = open_store(path)  # a new process's store: its connection not set up yet
    try:
        seen: list[str] = []
        store._reader().set_trace_callback(seen.append)
        events = f"INSERT INTO {EVENTS_TABLE} (ORIGINATOR_ID, ORIGINATOR_VERSION, TOPIC, STATE)"
        links = f'INSERT INTO "{CHAIN_TABLE}" (POSITION, HASH, LINKS)'.upper()
        head = f"SELECT COALESCE(MAX(ROWID), 0), (SELECT HASH FROM {CHAIN_TABLE} ORDER BY POSITION DESC LIMIT 1) FROM {EVENTS_TABLE}"
        assert store.append([_queued("b")]) == [2]
        assert _shapes(seen) == [
            "PRAGMA JOURNAL_MODE",
            "PRAGMA SYNCHRONOUS=FULL",
            "BEGIN IMMEDIATE",
            f"SELECT COALESCE(MAX(ROWID), 0), NULL FROM {EVENTS_TABLE}".upper(),
            events.upper(),
            f"SELECT 1 FROM SQLITE_MASTER WHERE TYPE = 'TABLE' AND NAME = '{CHAIN_TABLE}'".upper(),
            f'SELECT HASH FROM "{CHAIN_TABLE}" ORDER BY POSITION DESC LIMIT 1'.upper(),
            links,
            "COMMIT",
        ]
        seen.clear()
        assert store.append([_queued("c"), _queued("d")]) == [3, 4]
        assert store.append([_queued("e")]) == [5]
        assert _shapes(seen) == [
            "BEGIN IMMEDIATE",
            head.upper(),
            events.upper(),
            events.upper(),
            "SELECT LAST_INSERT_ROWID()",
            links,
            "COMMIT",
            "BEGIN IMMEDIATE",
            head.upper(),
            events.upper(),
            links,
            "COMMIT",
        ]
        assert store.check_chain().failure is None
    finally:
        store.close()


def test_L5_an_append_that_sqlite_fails_is_checked_and_told_not_committed(tmp_path: Path) -> None:
    """SQLite refuses the append's transaction for another reason than the lock (here
    the database may not grow: max_page_count): the store reads whether the batch landed
    and, finding it absent, says NotCommitted (safe to retry) with SQLite's own words,
    never LockTimeout or CommitUnknown."""
    store = open_store(str(tmp_path / "ledger.db"))
    try:
        store.append([_queued("a")])
        conn = store._writer()
        conn.execute(f"PRAGMA max_page_count={conn.execute('PRAGMA page_count').fetchone()[0]}")
        with pytest.raises(NotCommitted) as refused:
            for i in range(1000):
                store.append([_queued(f"x{i}")])
        assert type(refused.value) is NotCommitted
        e = refused.value
        failed = e.streams[0]
        assert e.streams == [failed] and failed.startswith("run:x")
        assert str(e) == (
            "append: the connection failed during the commit (database or disk is full) and the batch is not in "
            "the log; nothing was written (rolled back), safe to retry"
        )
        assert store.stream_version(failed) == 0
    finally:
        store.close()


def test_L5_a_batch_over_many_streams_checks_and_finds_each_of_them(tmp_path: Path) -> None:
    """More streams than one statement's lookup takes (400 pairs a chunk): the check
    that each stream has reached the version before the batch's finds every one, and a
    resent batch (resend=True) is found whole, row by row, and appends nothing; each in
    as few statements as the chunks (not one a stream)."""
    store = open_store(str(tmp_path / "ledger.db"))
    try:
        runs = [f"r{i}" for i in range(801)]
        assert store.append([_queued(r) for r in runs]) == list(range(1, 802))
        started = [_started(r) for r in runs]
        seen: list[str] = []
        store._reader().set_trace_callback(seen.append)
        assert store.append(started) == list(range(802, 1603))
        assert store.append(started, resend=True) == list(range(802, 1603))
        store._reader().set_trace_callback(None)
        lookups = [s.upper().split(" WHERE ")[0] for s in seen if s.upper().startswith("SELECT ORIGINATOR_ID")]
        check = f"SELECT ORIGINATOR_ID, ORIGINATOR_VERSION FROM {EVENTS_TABLE}".upper()
        reread = f"SELECT ORIGINATOR_ID, ORIGINATOR_VERSION, ROWID, TOPIC, STATE FROM {EVENTS_TABLE}".upper()
        assert lookups == [check] * 3 + [check] * 3 + [reread] * 3  # 801 pairs: 400, 400 and 1 a statement
        assert store.append([_started("r0"), _started("r1")], resend=True) == [802, 803]
        assert store.append([_queued("r0", 3), _queued("r1", 3)]) == [1603, 1604]  # two streams checked at once
        with pytest.raises(ConflictError) as refused:  # two streams, one of them never queued
            store.append([_queued("r5", 3), _started("nobody")])
        assert refused.value.streams == ["run:nobody"]
        assert store.max_position() == 1604
    finally:
        store.close()


def test_W1_the_token_after_an_append_is_the_logs_next_token_only_if_nothing_else_was_written(
    tmp_path: Path,
) -> None:
    """token_after_append(t): the log's token right after this thread's last append, if
    `t` was taken on this connection with nothing written through it since; else None
    (then the caller reads again: rule W1 trades a read for a proof, never a guess)."""
    store = open_store(str(tmp_path / "ledger.db"))
    try:
        store.append([_queued("a"), _queued("a2"), _queued("a3")])
        before = store.log_token()
        assert before is not None and store.log_token() == before
        assert before[1] != before[2]  # the data_version and the change count are told apart below
        store.append([_queued("b")])
        after = store.token_after_append(before)
        assert after is not None and after == store.log_token() and after != before
        assert (after[0], after[1]) == (before[0], before[1]) and after[2] > before[2]
        assert store.token_after_append(None) is None
        store.append([_queued("c")])
        store.append([_queued("d")])  # something written through this connection since `before`
        assert store.token_after_append(before) is None
        other: list[object] = []

        def another_thread() -> None:  # a thread that never appended: no token after its append
            token = store.log_token()
            other.extend([token, store.token_after_append(token)])

        thread = threading.Thread(target=another_thread)
        thread.start()
        thread.join()
        assert other[0] is not None and other[1] is None
        assert store.token_after_append(other[0]) is None  # type: ignore[arg-type]  # another connection's
        store.append([_queued("e")])
        with pytest.raises(ConflictError):
            store.append([_queued("e")])  # refused: it did not land in one transaction
        assert store.token_after_append(store.log_token()) is None
    finally:
        store.close()


def test_W1_a_token_that_cannot_be_read_is_a_store_error_saying_so(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "ledger.db"))
    store.append([_queued("a")])
    store._reader().close()  # the connection gone under the store (a closed handle, a dropped file)
    try:
        with pytest.raises(StoreError) as failed:
            store.log_token()
        assert str(failed.value) == "read the log's token: Cannot operate on a closed database."
    finally:
        store.close()
