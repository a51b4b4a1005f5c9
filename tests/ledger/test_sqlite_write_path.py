"""The SQLite append's own connection (rule L5): a writer kept waiting past the busy
timeout is told `LockTimeout` (not committed: retry as is), never an unsure commit, and
a database file in another journal mode is switched to WAL before the first write, as
one the ledger made. Real SQLite files and a real second connection holding the lock."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.ledger.errors import LockTimeout
from epochledger.ledger.store import sqlite as sqlite_store
from tests.conftest import T0


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
