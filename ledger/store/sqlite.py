"""The SQLite backend: one file, the embedded default (zero set-up)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from epochledger.ledger.errors import DiskFull, InvalidInput, LockTimeout, NoSuchStore, ReadOnlyStore, StoreError
from epochledger.ledger.store._rows import _MAX_POS, _Duplicate, _first_line, _Row, _Unsure, _versions
from epochledger.ledger.store.base import (
    EVENTS_TABLE,
    SQLITE_BUSY_TIMEOUT,
    Lines,
    LogToken,
    Store,
    translated,
)
from epochledger.ledger.store.chain import CHAIN_TABLE, GENESIS, ChainEvent, Sealed, link_rows

if TYPE_CHECKING:  # imported where used (_library): a read never loads the library (rule W2)
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore


class SQLiteStore(Store):
    """One SQLite file in eventsourcing's application-recorder layout (the library
    creates the table and is the reference read path, `library_read`), written and read
    on plain per-thread connections of the store's own (WAL, synchronous=FULL, as the
    library's): an append is one transaction of a few statements (`_transact`).

    Opening never changes a file that exists: a file that is not an epochledger store
    (another program's SQLite database, or no database at all) is refused before the
    library touches it (the library would switch it to WAL and add its tables), and a
    file this process may not write (0444, a read-only mount, a backup copy) is opened
    read-only: read and exported, never written (ReadOnlyStore). A missing file is
    created only with create=True."""

    kind = "sqlite"
    whole_streams_per_read = 5000  # one JSON parameter a query (_select_whole_streams)

    def __init__(self, path: str, *, create: bool = True, init: bool = False):
        self.path = os.path.abspath(path)
        self.url = "sqlite:///" + self.path
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._library_parts: tuple[SQLiteDatastore, SQLiteApplicationRecorder] | None = None
        # This process's writers (appends and the views' transactions) take turns here,
        # not in SQLite's busy wait. Reentrant: a write begun inside another on one thread
        # is SQLite's error ("within a transaction"), as before, never a deadlock.
        self._write_lock = threading.RLock()
        self._insert_sql = (
            f"INSERT INTO {EVENTS_TABLE} (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)"
        )
        self._head_sql = f"SELECT COALESCE(MAX(rowid), 0), NULL FROM {EVENTS_TABLE}"
        self._head_chained_sql = (
            f"SELECT COALESCE(MAX(rowid), 0), (SELECT hash FROM {CHAIN_TABLE} "
            f"ORDER BY position DESC LIMIT 1) FROM {EVENTS_TABLE}"
        )
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise NoSuchStore(self.url, f"directory {parent} does not exist")
        exists = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        self.read_only = not (_writable(parent) and (not exists or _writable(self.path)))
        if exists:
            _require_sqlite_ledger(self.path, immutable=self._immutable())  # a foreign file is refused untouched
        elif not create:
            raise NoSuchStore(
                self.url, f"there is no file {self.path}" if not os.path.exists(self.path) else f"{self.path} is empty"
            )
        if not exists:
            if self.read_only:
                raise NoSuchStore(self.url, f"directory {parent} is not writable, so no ledger can be created there")
            with translated(f"create {self.path}"):
                self._library()[1].create_table()
            with translated(f"create {self.path}"), self.transaction() as cur:
                self._create_chain_table(cur)
        self.chain_upgrade: Sealed | None = self.upgrade_chain(only_if_missing=True) if init and exists else None

    def _immutable(self) -> bool:
        """Read a read-only file as immutable when nothing waits in a -wal file beside
        it: SQLite then takes no lock and leaves no -shm behind, so the directory is left
        exactly as it was. With a -wal to read, SQLite needs its -shm (and makes it where
        it can)."""
        wal = self.path + "-wal"
        return self.read_only and not (os.path.exists(wal) and os.path.getsize(wal) > 0)

    def _library(self) -> tuple[SQLiteDatastore, SQLiteApplicationRecorder]:
        """The library's datastore and recorder, made on first use (creating the table,
        the reference read path): opening the file through them changes it (WAL),
        which a read-only store must never do."""
        if self._library_parts is None:
            if self.read_only:
                raise ReadOnlyStore(self.url, "write")
            from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

            with translated(f"open {self.path}"):
                datastore = SQLiteDatastore(self.path, originator_id_type="text", lock_timeout=SQLITE_BUSY_TIMEOUT)
                recorder = SQLiteApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
            self._library_parts = (datastore, recorder)
        return self._library_parts

    def max_position(self) -> int:
        with translated("read the log"), self._cursor() as cur:
            cur.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {EVENTS_TABLE}")
            return int(cur.fetchone()[0])

    @contextmanager
    def _cursor(self) -> Iterator[sqlite3.Cursor]:
        # Reads use a plain connection per thread, in autocommit mode: each read is one
        # SELECT, which SQLite runs on a consistent snapshot (WAL). Going through the
        # library's pool and an explicit BEGIN/ROLLBACK cost most of a group commit's
        # time (docs/benchmarks.md, "The hot path and group commit").
        cur = self._reader().cursor()
        try:
            yield cur
        finally:
            cur.close()

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.read_only:
                conn = _read_only_connection(self.path, immutable=self._immutable())
            else:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=SQLITE_BUSY_TIMEOUT
                )
            self._local.conn = conn
            self._readers.append(conn)
        return conn

    def close(self) -> None:
        for conn in self._readers:
            conn.close()
        self._readers.clear()
        if self._library_parts is not None:
            self._library_parts[0].close()
            self._library_parts = None

    def local_files(self) -> list[str]:
        return [self.path, *(self.path + suffix for suffix in ("-wal", "-shm", "-journal"))]

    @contextmanager
    def transaction(self, commit: bool = True, *, durable: bool = True) -> Iterator[Any]:
        # BEGIN IMMEDIATE for writes: a deferred transaction that reads first cannot
        # upgrade to a write once another writer has committed (SQLITE_BUSY at once,
        # no busy wait), e.g. the swap racing a group commit.
        # A write takes this process's writers' lock first, as an append does: a view's
        # catch-up (the server's follower) and an append then queue here, each for the
        # other's commit alone. In SQLite's busy handler an append that met a catch-up
        # slept in steps (1, 2, 5, 10, 15, 20, 25 ms...) past the lock's release: the
        # service's tail (docs/benchmarks.md, "The service over HTTP"). Other processes'
        # writers still meet in SQLite's lock. A read takes no lock.
        # durable=False (a view's commit, rule R3): synchronous=NORMAL for this one
        # transaction, so its COMMIT returns without an fsync while it holds the writers'
        # lock; WAL keeps it atomic, and the next commit that syncs the WAL (any append,
        # synchronous=FULL) or a checkpoint puts it on disk. The connection is FULL
        # again after it, whatever happened, so an append on this thread syncs as ever.
        if commit and self.read_only:
            raise ReadOnlyStore(self.url, "write")
        with self._write_lock if commit else nullcontext():
            lazy = commit and not durable
            conn = self._writer() if lazy else self._reader()  # NORMAL is atomic in WAL mode: made sure of first
            if lazy:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
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
            finally:
                if lazy:
                    conn.execute("PRAGMA synchronous=FULL")

    # ------------------------------------------------------------- append
    def _insert(self, rows: list[_Row]) -> list[int]:
        # One transaction on this thread's own connection (WAL, synchronous=FULL, as
        # the library's), rolled back on any error, never retried. A busy database
        # (another writer held the lock past the busy timeout) never began writing:
        # not committed. Any other error is checked like a lost commit (_settle): on a
        # local file the answer is almost always "not committed", but it is read, not
        # assumed. Only the driver's errors come here: the append runs on the store's
        # own connection, never the library's (so no PersistenceError), and SQLite
        # words a busy timeout (SQLITE_BUSY) "database is locked" alone.
        if self.read_only:
            raise ReadOnlyStore(self.url, "write")
        try:
            conn = self._writer()
            with self._write_lock:
                return self._transact(conn, rows)
        except sqlite3.IntegrityError:
            raise _Duplicate from None
        except sqlite3.Error as e:
            if "database is locked" in str(e):
                raise LockTimeout(
                    "append", f"the write lock of {self.path}", SQLITE_BUSY_TIMEOUT, streams=list(_versions(rows))
                ) from None
            raise _Unsure(_first_line(e)) from None

    def _transact(self, conn: sqlite3.Connection, rows: list[_Row]) -> list[int]:
        """The append's transaction: BEGIN IMMEDIATE (the write lock, so the log's end
        and the chain's head read first are still the end and the head at COMMIT), the
        rows in one executemany, their links (rule S1), COMMIT.

        Why not the library's recorder (it did this until issue 12): its insert_events
        runs one execute per row, through its pool's locks and context managers, about
        half of a group commit's time on the store (docs/benchmarks.md, "The hot
        path"). The statements and their order are the library's otherwise: its table,
        its INSERT; the uniqueness of (originator_id, originator_version) is still the
        optimistic check (rule L5).

        Positions: a rowid table without AUTOINCREMENT gives each new row the largest
        rowid plus one while that is below 2**63-1 (SQLite's documented algorithm), so
        under the write lock n rows inserted after the log's end `last` are last+1 ..
        last+n; SQLite's own last_insert_rowid() must say last+n, else (a file whose
        rowids reached the top: SQLite then picks them at random) the positions are
        read back by (stream, version)."""
        cur = conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            chained = self._chained
            cur.execute(self._head_chained_sql if chained else self._head_sql)
            last, prev = cur.fetchone()
            before = conn.total_changes  # under the write lock: what this connection had written
            n = len(rows)
            got: Any
            if n == 1:
                cur.execute(self._insert_sql, rows[0])
                got = cur.lastrowid
            else:
                cur.executemany(self._insert_sql, rows)
                cur.execute("SELECT last_insert_rowid()")
                got = cur.fetchone()[0]
            if got == last + n:
                ids = list(range(last + 1, got + 1))
            else:  # a log at the top of the rowid range (a forged row there)
                at = self._rows_at_on(cur, rows)
                ids = [at[(r[0], r[1])][0] for r in rows]
            if chained:
                self._insert_links(cur, link_rows(bytes(prev) if prev is not None else GENESIS, ids, rows))
            else:
                self._link_rows(cur, ids, rows)  # looks for the chain table (a store from before rule S1?)
            cur.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        finally:
            cur.close()
        self._appended_between((conn, before, conn.total_changes))  # token_after_append
        return ids

    def token_after_append(self, token: LogToken | None) -> LogToken | None:
        """(connection, the data_version of `token`, total_changes after the append) if
        `token` is this connection's and nothing was written through it between the
        token and the append's transaction. Its data_version is not read again (a
        PRAGMA under the write lock made every append dearer: docs/benchmarks.md, "The
        hot path, second round"): if another connection committed at any moment since
        `token` was taken, during the append included, every later log_token differs
        from this one, so it proves nothing it should not."""
        last = getattr(self._local, "last_append", None)
        if last is None or token is None:
            return None
        conn, before, after = last
        if token[0] is not conn or token[2] != before:
            return None
        return (conn, token[1], after)

    def log_token(self) -> LogToken | None:
        """(connection, data_version, total_changes) of this thread's connection. SQLite
        changes a connection's data_version whenever another connection (of any
        process) commits, and never for the connection's own commits: those are
        counted by its total_changes (every row it inserted, updated or deleted, the
        ledger's appends and anything else written through it). Equal tokens: nothing
        was written between them. One PRAGMA, cheaper than the read of a stream it saves
        (docs/benchmarks.md, "The hot path, second round")."""
        if self.read_only:
            return None
        conn = self._reader()
        try:  # not `translated`: its context manager costs half as much as the PRAGMA
            return (conn, conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        except sqlite3.Error as e:
            raise StoreError(f"read the log's token: {e}") from None

    def _writer(self) -> sqlite3.Connection:
        """This thread's connection, for writing: in WAL mode, as the library's pool
        made sure on its first connection (a file copied in another journal mode is
        switched once, the first time this process writes it)."""
        conn = self._reader()
        if not getattr(self._local, "wal", False):
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            # Stated, not left to the build's default: a commit returns only once it is
            # on disk (an fsync per commit), so an acknowledged append survives a crash.
            conn.execute("PRAGMA synchronous=FULL")
            self._local.wal = True
        return conn

    def _existing(self, pairs: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
        found: set[tuple[str, int]] = set()
        with self._cursor() as cur:
            for i in range(0, len(pairs), 400):
                chunk = pairs[i : i + 400]
                if len(chunk) == 1:  # the hot path (one transition): a plain point lookup
                    cur.execute(
                        f"SELECT originator_id, originator_version FROM {EVENTS_TABLE} "
                        "WHERE originator_id=? AND originator_version=?",
                        chunk[0],
                    )
                else:
                    cur.execute(
                        f"SELECT originator_id, originator_version FROM {EVENTS_TABLE} "
                        f"WHERE (originator_id, originator_version) IN (VALUES {', '.join(['(?, ?)'] * len(chunk))})",
                        [x for pair in chunk for x in pair],
                    )
                found.update(cur.fetchall())
        return found

    def _rows_at(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        with self._cursor() as cur:
            return self._rows_at_on(cur, rows)

    def _rows_at_on(self, cur: Any, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        found: dict[tuple[str, int], tuple[int, str, bytes]] = {}
        for i in range(0, len(rows), 400):
            chunk = rows[i : i + 400]
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

    def _select_stream(self, stream: str, after: int = 0) -> list[tuple[int, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_version, state FROM {EVENTS_TABLE} "
                "WHERE originator_id=? AND originator_version>? ORDER BY originator_version",
                (stream, after),
            )
            return cur.fetchall()

    def _select_streams(self, streams: Sequence[str], after: Sequence[int]) -> list[tuple[int, str, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"WITH w(s, v) AS (VALUES {', '.join(['(?, ?)'] * len(streams))}) "
                f"SELECT e.rowid, e.originator_id, e.originator_version, e.state FROM w JOIN {EVENTS_TABLE} e "
                "ON e.originator_id = w.s AND e.originator_version > w.v ORDER BY e.originator_id, e.originator_version",
                [x for pair in zip(streams, after, strict=True) for x in pair],
            )
            return cur.fetchall()

    def _select_whole_streams(self, streams: Sequence[str]) -> list[tuple[int, str, int, bytes]]:
        """The streams' ids as one JSON array (json_each): one statement, one parameter,
        whatever their number, against two parameters a stream in a VALUES list (cheaper
        per stream: docs/benchmarks.md, "The hot path, third round"). Only ids that are
        printable text: a JSON string holds any str, but what SQLite's JSON makes of a
        NUL or a lone surrogate is not the bound text's; those keep the VALUES list,
        which binds them as they are."""
        if not all(map(str.isprintable, streams)):
            return super()._select_whole_streams(streams)
        import json  # here: a read of one run never encodes a list of streams (rule W2)

        with self._cursor() as cur:
            cur.execute(
                f"SELECT e.rowid, e.originator_id, e.originator_version, e.state FROM json_each(?) w "
                f"JOIN {EVENTS_TABLE} e ON e.originator_id = w.value AND e.originator_version > 0 ORDER BY e.originator_id, e.originator_version",
                (json.dumps(list(streams), ensure_ascii=False, separators=(",", ":")),),
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

    # The batch's lines built by SQLite (group_concat of the rows' `||`, which keeps a
    # NUL or any other byte of a blob), one row and one bytes object per batch instead
    # of a tuple per event (docs/benchmarks.md). A batch holding a state that is not a
    # blob (a hand edit can leave TEXT) is built by lines_of from read_raw's rows
    # instead, so the bytes are lines_of's (tests/helpers/store_contract.py). A stream or
    # version of another storage class than the store writes (text, integer), which
    # only a hand edit can leave and lines_of cannot format, comes out as SQLite
    # renders it. group_concat takes the rows in the subquery's order (a LIMIT subquery
    # runs as a coroutine in rowid order; the laws check the bytes); the audit copy
    # would not depend on it anyway, each line carries its position.
    _LINES_SQL = (
        "SELECT count(*), max(p), sum(typeof(b) = 'blob'), "
        "CAST(group_concat(p || char(9) || s || char(9) || v || char(9) || b || char(10), '') AS BLOB) "
        f"FROM (SELECT rowid AS p, originator_id AS s, originator_version AS v, state AS b FROM {EVENTS_TABLE} "
        "WHERE rowid>? AND rowid<=? ORDER BY rowid LIMIT ?)"
    )

    def _select_lines_after(self, after: int, limit: int, upto: int | None = None) -> Lines:
        with self._cursor() as cur:
            try:
                cur.execute(self._LINES_SQL, (after, _MAX_POS if upto is None else upto, limit))
                count, last, plain, data = cur.fetchone()
            except sqlite3.DataError:  # the batch's text beyond SQLite's string limit (1 GB by default)
                count, plain = -1, None
        if count and plain != count:
            return super()._select_lines_after(after, limit, upto)
        return Lines(count, last or after, data or b"")

    def _select_chain_events(self, after: int, limit: int) -> list[ChainEvent]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {EVENTS_TABLE} "
                "WHERE rowid>? ORDER BY rowid LIMIT ?",
                (after, limit),
            )
            return cur.fetchall()

    def _select_links(self, after: int, limit: int) -> list[tuple[int, bytes, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT position, hash, links FROM {CHAIN_TABLE} WHERE position>? ORDER BY position LIMIT ?",
                (after, limit),
            )
            return cur.fetchall()


def _writable(path: str) -> bool:
    """May this process write `path`, by its mode bits, its mount and its permissions?
    The mode bits decide even for root (who may write anything): a file or directory
    made read-only on purpose (a backup copy, chmod 0444) is treated as read-only."""
    try:
        if not os.stat(path).st_mode & 0o222:
            return False
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return False
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _read_only_connection(path: str, *, immutable: bool = False) -> sqlite3.Connection:
    """A connection that cannot write. `immutable`: the file cannot change while it is
    read (a backup copy, a read-only mount), so SQLite takes no lock and makes no -shm
    or -wal file beside it: the directory is left exactly as it was. A plain read-only
    open of a WAL database would create them. The path is percent-encoded in the URI:
    as it was, a `#` or `?` in a file's name began the URI's fragment or query and `%41`
    was read as `A`, so a ledger named runs#1.db was checked by opening (and making) an
    empty `runs` beside it, and refused."""
    query = "mode=ro&immutable=1" if immutable else "mode=ro"
    return sqlite3.connect(f"file:{quote(path)}?{query}", uri=True, isolation_level=None, check_same_thread=False)


def _require_sqlite_ledger(path: str, *, immutable: bool = False) -> None:
    """The file must be an SQLite database that holds the events table. Checked on a
    read-only connection, before the library opens the file (it would switch a
    non-ledger file to WAL and add its tables)."""
    try:
        conn = _read_only_connection(path, immutable=immutable)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (EVENTS_TABLE,)
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise _open_error(path, e) from None
    if not found:
        raise InvalidInput(f"not an epochledger store (no table {EVENTS_TABLE})", where=path)


# SQLite's primary result codes of a failing disk, not of a file's content: SQLITE_IOERR
# (any of its extended codes) and SQLITE_FULL.
_DISK_CODES = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL)
_FULL_BELOW = 64 * 1024  # a reader's -shm alone is 32 KiB: with less free, the I/O error is the full disk


def _open_error(path: str, e: sqlite3.Error) -> StoreError | InvalidInput:
    """Why a file could not be opened as a ledger. A failing disk is a store error (exit
    7), naming a full disk as such: on a full disk a WAL database cannot even be read
    (its reader makes -shm and -wal beside it), which SQLite reports as "disk I/O error".
    Anything else (not a database, a directory, ...) is the file's fault (exit 3)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _DISK_CODES:
        directory = os.path.dirname(path)
        try:
            st = os.statvfs(directory)
            free = st.f_bavail * st.f_frsize
        except OSError:
            free = -1
        if 0 <= free < _FULL_BELOW or code & 0xFF == sqlite3.SQLITE_FULL:
            return DiskFull(f"open {path}", path, directory, max(free, 0), str(e))
        return StoreError(f"open {path}: {e} (the disk or file system failed; nothing was written)")
    return InvalidInput(f"not a readable SQLite ledger: {e}", where=path)
