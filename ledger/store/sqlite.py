"""The SQLite backend: one file, the embedded default (zero set-up)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from ledger.errors import InvalidInput, LockTimeout, StoreError
from ledger.store.base import (
    _MAX_POS,
    EVENTS_TABLE,
    SQLITE_BUSY_TIMEOUT,
    Store,
    _Duplicate,
    _first_line,
    _Row,
    _Unsure,
    _versions,
    translated,
)

class SQLiteStore(Store):
    kind = "sqlite"

    def __init__(self, path: str, *, create: bool = True):
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self.path = os.path.abspath(path)
        self.url = "sqlite:///" + self.path
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise StoreError(f"cannot open {self.path}: directory {parent} does not exist")
        if not create:
            _require_sqlite_ledger(self.path)
        with translated(f"open {self.path}"):
            datastore = SQLiteDatastore(self.path, originator_id_type="text", lock_timeout=SQLITE_BUSY_TIMEOUT)
            recorder = SQLiteApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
            if create:
                recorder.create_table()
        self.recorder = recorder
        self.datastore = datastore

    @contextmanager
    def _cursor(self) -> Iterator[sqlite3.Cursor]:
        # Reads use a plain connection per thread, in autocommit mode: each read is one
        # SELECT, which SQLite runs on a consistent snapshot (WAL). Going through the
        # library's pool and an explicit BEGIN/ROLLBACK cost ~100 us per read, most of
        # a group commit's time (docs/benchmarks.md).
        cur = self._reader().cursor()
        try:
            yield cur
        finally:
            cur.close()

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=SQLITE_BUSY_TIMEOUT)
            self._local.conn = conn
            self._readers.append(conn)
        return conn

    def close(self) -> None:
        for conn in self._readers:
            conn.close()
        self._readers.clear()
        super().close()

    def local_files(self) -> list[str]:
        return [self.path, *(self.path + suffix for suffix in ("-wal", "-shm", "-journal"))]

    @contextmanager
    def transaction(self, commit: bool = True) -> Iterator[Any]:
        # BEGIN IMMEDIATE for writes: a deferred transaction that reads first cannot
        # upgrade to a write once another writer has committed (SQLITE_BUSY at once,
        # no busy wait), e.g. the swap racing a group commit.
        conn = self._reader()
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE" if commit else "BEGIN")
        try:
            yield cur
        except BaseException:
            conn.rollback()
            raise
        else:
            if commit:
                conn.commit()
            else:
                conn.rollback()
        finally:
            cur.close()

    # ------------------------------------------------------------- append
    def _insert(self, rows: list[_Row]) -> list[int]:
        # The library's SQLite recorder: one transaction, rolled back on any error. It
        # does not retry. A busy database (another writer held the lock past the busy
        # timeout) never began writing: not committed. Any other error is checked like
        # a lost commit (_settle): on a local file the answer is almost always "not
        # committed", but it is read, not assumed.
        stored = [StoredEvent(originator_id=r[0], originator_version=r[1], topic=r[2], state=r[3]) for r in rows]
        try:
            ids = self.recorder.insert_events(stored)
        except IntegrityError:
            raise _Duplicate from None
        except (PersistenceError, sqlite3.Error) as e:
            if "database is locked" in str(e) or "database is busy" in str(e):
                raise LockTimeout("append", f"the write lock of {self.path}", SQLITE_BUSY_TIMEOUT,
                                  streams=list(_versions(rows))) from None
            raise _Unsure(_first_line(e)) from None
        return list(ids or [])

    def _rows_at(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        with self._cursor() as cur:
            return self._rows_at_on(cur, rows)

    def _rows_at_on(self, cur: Any, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        found: dict[tuple[str, int], tuple[int, str, bytes]] = {}
        for i in range(0, len(rows), 400):
            chunk = rows[i:i + 400]
            cur.execute(
                f"SELECT originator_id, originator_version, rowid, topic, state FROM {EVENTS_TABLE} "
                f"WHERE (originator_id, originator_version) IN (VALUES {', '.join(['(?, ?)'] * len(chunk))})",
                [x for r in chunk for x in r[:2]],
            )
            for stream, version, pos, topic, state in cur.fetchall():
                found[(stream, version)] = (pos, topic, state)
        return found

    def _check(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        with self.transaction() as cur:  # BEGIN IMMEDIATE: waits for any writer's transaction to end
            return self._rows_at_on(cur, rows)

    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_version, state FROM {EVENTS_TABLE} "
                "WHERE originator_id=? ORDER BY originator_version",
                (stream,),
            )
            return cur.fetchall()

    def _select_streams(self, streams: Sequence[str]) -> list[tuple[int, str, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_id, originator_version, state FROM {EVENTS_TABLE} "
                f"WHERE originator_id IN ({', '.join('?' * len(streams))}) ORDER BY originator_id, originator_version",
                list(streams),
            )
            return cur.fetchall()

    def _stream_version(self, stream: str) -> int:
        with self._cursor() as cur:
            cur.execute(f"SELECT MAX(originator_version) FROM {EVENTS_TABLE} WHERE originator_id=?", (stream,))
            return cur.fetchone()[0] or 0

    def _select_after(self, after: int, limit: int, upto: int | None = None) -> list[tuple[int, str, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_id, originator_version, state FROM {EVENTS_TABLE} "
                "WHERE rowid>? AND rowid<=? ORDER BY rowid LIMIT ?",
                (after, _MAX_POS if upto is None else upto, limit),
            )
            return cur.fetchall()



def _require_sqlite_ledger(path: str) -> None:
    """For readers that must not create or alter anything (audit): the file must exist
    and hold the events table. Checked on a read-only connection, before the library
    opens the file (it would switch a non-ledger file to WAL)."""
    if not os.path.exists(path):
        raise InvalidInput("no ledger here (give --store or set EPOCHLEDGER_STORE)", where=path)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (EVENTS_TABLE,)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise InvalidInput(f"not a readable SQLite ledger: {e}", where=path) from None
    if not found:
        raise InvalidInput(f"not an epochledger store (no table {EVENTS_TABLE})", where=path)


