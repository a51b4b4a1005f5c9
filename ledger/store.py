"""The store adapter: the only module that speaks eventsourcing (STYLE.md, Layers).

Writes go through eventsourcing's application recorders (SQLite file, or PostgreSQL
via psycopg 3): each event is a StoredEvent whose originator is the stream id, whose
version is its place in the stream (the optimistic lock, BRIEF L5), whose topic is the
event's stable tag, and whose state is the msgspec encoding. Reads go straight to the
recorder's table with keyset pagination and a typed msgspec decode, because the
library's generic objects cost most of a fleet-wide read (docs/benchmarks.md).

Library and driver exceptions are translated here into ledger.errors and never leak.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import msgspec
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from ledger import codec
from ledger.errors import ConflictError, DecodeError, InvalidInput, StoreError
from ledger.events import AnyEvent, Recorded, tag_of

EVENTS_TABLE = "epochledger_events"
TRACKING_TABLE = "epochledger_tracking"
PARKED_TABLE = "epochledger_parked"
DEFAULT_PATH = "epochledger.db"
READ_BATCH = 10_000
_MAX_POS = (1 << 63) - 1


def check_position(value: object, where: str) -> int:
    """A notification position as the databases hold it: an int from 0 to 2**63-1
    (SQLite's INTEGER, PostgreSQL's BIGINT). Beyond that the drivers raise
    OverflowError or NumericValueOutOfRange; refused here with InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_POS:
        raise InvalidInput(f"a position is an integer from 0 to {_MAX_POS}, got {value!r}", where=where)
    return value


class Append(NamedTuple):
    """One event to append at an exact version of its stream. A batch of these is
    appended in the order given: that order is the log order (BRIEF R1)."""

    stream: str
    version: int
    event: AnyEvent


@contextmanager
def _translated(what: str) -> Iterator[None]:
    try:
        yield
    except (ConflictError, StoreError, DecodeError):
        raise
    except IntegrityError as e:
        raise ConflictError([], str(e)) from None
    except (PersistenceError, sqlite3.Error) as e:
        raise StoreError(f"{what}: {e}") from None
    except Exception as e:  # psycopg errors, pool timeouts
        if type(e).__module__.startswith(("psycopg", "psycopg_pool")):
            raise StoreError(f"{what}: {e}") from None
        raise


class Poison(msgspec.Struct, frozen=True):
    """A stored event that does not decode, in place of its Recorded (BRIEF T4): the
    reader does not stop at it; the consumer (the projection engine) decides what to do."""

    position: int
    stream: str
    version: int
    tag: str | None
    error: str


def _tag_of_raw(state: bytes) -> str | None:
    try:
        tag = msgspec.json.decode(state).get("type")
    except Exception:  # noqa: BLE001 - the payload is already known to be bad
        return None
    return tag if isinstance(tag, str) else None


def _decode(position: int, state: bytes) -> AnyEvent:
    try:
        return codec.decode(state)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise DecodeError(position, _tag_of_raw(state), str(e)) from None


def _decode_rows(rows: Sequence[tuple[int, str, int, bytes]]) -> list[Recorded | Poison]:
    """Typed decode of raw rows; a row that does not decode becomes a Poison in place."""
    decode = codec.decode
    out: list[Recorded | Poison] = []
    append = out.append
    for pos, stream, ver, state in rows:
        try:
            append(Recorded(pos, stream, ver, decode(state)))
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            append(Poison(pos, stream, ver, _tag_of_raw(bytes(state)), str(e)))
    return out


class Store:
    """Common logic over one recorder. Subclasses give the SQL of the raw read path."""

    url: str
    kind: str

    def __init__(self, recorder: Any, datastore: Any):
        self.recorder = recorder
        self.datastore = datastore

    # ------------------------------------------------------------- writes
    def append(self, appends: Sequence[Append]) -> list[int]:
        """Append every event in one transaction, in the order given, all or nothing;
        returns their positions. Each event names the exact version it takes in its
        stream (the optimistic lock): if another writer took it first, raises
        ConflictError naming the streams that moved, and nothing is appended."""
        stored = [
            StoredEvent(originator_id=a.stream, originator_version=a.version, topic=tag_of(a.event), state=codec.encode(a.event))
            for a in appends
        ]
        if not stored:
            return []
        try:
            with _translated("append"):
                ids = self.recorder.insert_events(stored)
        except ConflictError:
            expected: dict[str, int] = {}
            for a in appends:
                expected.setdefault(a.stream, a.version - 1)
            moved = [stream for stream, v in expected.items() if self.stream_version(stream) != v]
            raise ConflictError(moved or list(expected)) from None
        return list(ids or [])

    # -------------------------------------------------------------- reads
    def read_stream(self, stream: str) -> list[Recorded]:
        with _translated(f"read {stream}"):
            rows = self._select_stream(stream)
        return [Recorded(pos, stream, ver, _decode(pos, state)) for pos, ver, state in rows]

    def read_streams(self, streams: Sequence[str]) -> dict[str, list[Recorded]]:
        """Several streams in one query per 500 (group commit's prefetch): each stream's
        events in version order; a stream with no events maps to []."""
        found: dict[str, list[Recorded]] = {s: [] for s in streams}
        wanted = list(found)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            with _translated("read streams"):
                rows = self._select_streams(chunk)
            for pos, stream, ver, state in rows:
                found[stream].append(Recorded(pos, stream, ver, _decode(pos, state)))
        return found

    def stream_version(self, stream: str) -> int:
        with _translated(f"read {stream}"):
            return self._stream_version(stream)

    def read_all(self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH) -> Iterator[Recorded]:
        """Every event with after < position <= upto, in log order, in keyset batches.
        Raises DecodeError at the first event that does not decode."""
        for chunk in self.read_batches(after, upto, batch):
            for rec in chunk:
                if isinstance(rec, Poison):
                    raise DecodeError(rec.position, rec.tag, rec.error)
                yield rec

    def read_batches(self, after: int = 0, upto: int | None = None,
                     batch: int = READ_BATCH) -> Iterator[list[Recorded | Poison]]:  # fmt: skip
        """The log after `after` (up to `upto`) as lists of decoded records, one list per
        keyset batch. An undecodable event is a Poison in its place, never an abort
        (BRIEF T4). Equal to the library's select_notifications + decode
        (tests/test_engine_read_path.py)."""
        for rows in self.read_raw(after, upto, batch):
            yield _decode_rows(rows)

    def read_raw(self, after: int = 0, upto: int | None = None,
                 batch: int = READ_BATCH) -> Iterator[list[tuple[int, str, int, bytes]]]:  # fmt: skip
        """The stored rows (position, stream, version, state bytes) with after < position
        <= upto, in log order, one keyset batch per list, NOT decoded. For exports that
        must carry the bytes as stored (docs/audit.md): a typed decode would drop fields
        written by a newer version and refuse a tag this version does not know (BRIEF L3).
        Also the raw side of the read-path benchmarks (docs/benchmarks.md). The state may
        come back as bytes or a buffer (memoryview), per driver. Positions are refused
        (InvalidInput) unless ints from 0 to 2**63-1, the databases' own range."""
        check_position(after, "after")
        if upto is not None:
            check_position(upto, "upto")
        while True:
            with _translated("read the log"):
                rows = self._select_after(after, batch, upto)
            if not rows:
                return
            yield rows
            after = rows[-1][0]
            if len(rows) < batch:
                return

    def library_read(self, after: int = 0, upto: int | None = None,
                     batch: int = READ_BATCH) -> Iterator[tuple[int, str, int, str, Any]]:  # fmt: skip
        """The library's own read path, the reference the fast path is checked and
        benchmarked against: select_notifications, then each payload decoded by the
        library's JSONTranscoder. Yields (position, stream, version, topic, decoded
        payload); no library type leaves the adapter."""
        from eventsourcing.persistence import JSONTranscoder

        decode = JSONTranscoder().decode
        while True:
            with _translated("read the log"):
                got = self.recorder.select_notifications(after, batch, stop=upto, inclusive_of_start=False)
            if not got:
                return
            for n in got:
                yield n.id, n.originator_id, n.originator_version, n.topic, decode(n.state)
            after = got[-1].id
            if len(got) < batch:
                return

    def wake_ups(self, after: int, stop: threading.Event) -> Iterator[int]:
        """Positions of new events as they are recorded, until `stop` is set: the
        library's subscription (LISTEN/NOTIFY on PostgreSQL). None on SQLite, which
        the library cannot subscribe to: poll instead."""
        raise NotImplementedError(f"{self.kind} has no subscription; poll")

    def max_position(self) -> int:
        with _translated("read the log"):
            return self.recorder.max_notification_id() or 0

    def local_files(self) -> list[str]:
        """The files on this machine that hold the ledger (none for a server): what
        a command writing an output file must never overwrite (ledger/files.py)."""
        return []

    def close(self) -> None:
        self.datastore.close()

    # ------------------------------------------- projections: views, tracking, parked
    # The projection engine (projections/engine.py) keeps its SQL here, so that the
    # adapter stays the one module that knows the database. A view is one table
    # `view_<name>(k TEXT PRIMARY KEY, <columns>, state BLOB)`; its tracking position
    # lives in TRACKING_TABLE and is written in the same transaction as its rows, with
    # a compare-and-set on the old position, so a batch is applied exactly once (R3).

    _projection_tables = False

    def ensure_projection_tables(self) -> None:
        if self._projection_tables:
            return
        with _translated("create projection tables"), self._tx() as cur:
            self._ddl_lock(cur)
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self._q(TRACKING_TABLE)} "
                        "(view TEXT PRIMARY KEY, version BIGINT NOT NULL, position BIGINT NOT NULL)")  # fmt: skip
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self._q(PARKED_TABLE)} "
                        "(view TEXT NOT NULL, position BIGINT NOT NULL, stream TEXT NOT NULL, tag TEXT, "
                        "error TEXT NOT NULL, attempts BIGINT NOT NULL, parked_at TEXT, "
                        "PRIMARY KEY (view, position))")  # fmt: skip
        self._projection_tables = True

    def create_view_table(self, table: str, columns: Sequence[tuple[str, str]]) -> None:
        cols = "".join(f", {c} {self._types[t]}" for c, t in columns)
        with _translated(f"create {table}"), self._tx() as cur:
            self._ddl_lock(cur)
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self._q(table)} "
                        f"(k TEXT PRIMARY KEY{cols}, state {self._blob_type} NOT NULL)")  # fmt: skip

    def drop_view_table(self, table: str) -> None:
        with _translated(f"drop {table}"), self._tx() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self._q(table)}")

    def tracking(self, view: str) -> tuple[int, int] | None:
        """(version, position) of a view, None if it was never materialized."""
        self.ensure_projection_tables()
        with _translated("read tracking"), self._tx(commit=False) as cur:
            cur.execute(f"SELECT version, position FROM {self._q(TRACKING_TABLE)} WHERE view=?", (view,))
            row = cur.fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def reset_view(self, view: str, table: str, columns: Sequence[tuple[str, str]], version: int) -> None:
        """Empty `table` (created if absent) and set the view's tracking to position 0,
        in one transaction, dropping the view's parked events."""
        cols = "".join(f", {c} {self._types[t]}" for c, t in columns)
        with _translated(f"reset {view}"), self._tx() as cur:
            self._ddl_lock(cur)
            # tracking row before table, as commit_view and swap_view take them
            cur.execute(f"SELECT position FROM {self._q(TRACKING_TABLE)} WHERE view=?{self._for_update}", (view,))
            cur.execute(f"DROP TABLE IF EXISTS {self._q(table)}")
            cur.execute(f"CREATE TABLE {self._q(table)} (k TEXT PRIMARY KEY{cols}, state {self._blob_type} NOT NULL)")
            cur.execute(f"DELETE FROM {self._q(TRACKING_TABLE)} WHERE view=?", (view,))
            cur.execute(f"INSERT INTO {self._q(TRACKING_TABLE)} (view, version, position) VALUES (?, ?, 0)", (view, version))
            cur.execute(f"DELETE FROM {self._q(PARKED_TABLE)} WHERE view=?", (view,))

    def commit_view(self, view: str, expected: int, position: int, table: str, columns: Sequence[str],
                    upserts: Sequence[tuple[Any, ...]], deletes: Sequence[str],
                    parked: Sequence[tuple[Any, ...]] = ()) -> None:  # fmt: skip
        """One transaction: move the view's tracking from `expected` to `position`, upsert
        and delete its rows, record parked events. Raises ConflictError if the tracking
        position is not `expected` (another runner applied these events): nothing is
        written, so no event is ever applied twice (BRIEF R3)."""
        names = ("k", *columns, "state")
        upsert = (f"INSERT INTO {self._q(table)} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
                  f"ON CONFLICT (k) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in names[1:]))  # fmt: skip
        with _translated(f"write view {view}"), self._tx() as cur:
            cur.execute(f"UPDATE {self._q(TRACKING_TABLE)} SET position=? WHERE view=? AND position=?",
                        (position, view, expected))  # fmt: skip
            if cur.rowcount != 1:
                raise ConflictError([view], f"tracking position is no longer {expected}")
            if deletes:
                cur.executemany(f"DELETE FROM {self._q(table)} WHERE k=?", [(k,) for k in deletes])
            if upserts:
                self._upsert_many(cur, table, names, upserts, upsert)
            if parked:
                cur.executemany(
                    f"INSERT INTO {self._q(PARKED_TABLE)} (view, position, stream, tag, error, attempts, parked_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (view, position) DO UPDATE SET "
                    "tag=excluded.tag, error=excluded.error, attempts=excluded.attempts, parked_at=excluded.parked_at",
                    parked,
                )

    def load_states(self, table: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The state column of the rows with these keys (absent keys are left out)."""
        found: dict[str, bytes] = {}
        with _translated(f"read {table}"), self._tx(commit=False) as cur:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                cur.execute(f"SELECT k, state FROM {self._q(table)} WHERE k IN ({', '.join('?' * len(chunk))})", chunk)
                found.update((k, bytes(v)) for k, v in cur.fetchall())
        return found

    def view_rows(self, view: str, table: str, columns: Sequence[str],
                  where: Sequence[tuple[str, Any]] = ()) -> tuple[tuple[int, int] | None, list[tuple[Any, ...]]]:  # fmt: skip
        """(tracking, rows sorted by key) read in one transaction, so the rows are exactly
        the view as of its tracking position. `where`: (column, value) equalities."""
        self.ensure_projection_tables()
        cond = (" WHERE " + " AND ".join(f"{c}=?" for c, _ in where)) if where else ""
        with _translated(f"read {table}"), self._tx(commit=False) as cur:
            cur.execute(f"SELECT version, position FROM {self._q(TRACKING_TABLE)} WHERE view=?", (view,))
            row = cur.fetchone()
            if row is None:
                return None, []
            cur.execute(f"SELECT k, {''.join(c + ', ' for c in columns)}state FROM {self._q(table)}{cond} ORDER BY k",
                        [v for _, v in where])  # fmt: skip
            rows = [(*r[:-1], bytes(r[-1])) for r in cur.fetchall()]
        return (int(row[0]), int(row[1])), rows

    def swap_view(self, view: str, shadow_view: str, live: str, shadow: str) -> tuple[int, int]:
        """Replace the live table by the rebuilt one, and the live tracking and parked
        rows by the rebuild's, in one transaction: readers see the old view or the new
        one, never a half-built one. Returns the new (version, position)."""
        with _translated(f"swap {view}"), self._tx() as cur:
            self._ddl_lock(cur)
            # Lock order: the shadow's tracking row first, then its table, the same order
            # commit_view takes them in; the other order deadlocks on PostgreSQL against a
            # second runner committing a batch of the same rebuild.
            cur.execute(f"SELECT version, position FROM {self._q(TRACKING_TABLE)} WHERE view=?{self._for_update}",
                        (shadow_view,))  # fmt: skip
            row = cur.fetchone()
            if row is None:
                raise StoreError(f"no rebuild of {view} to swap in")
            cur.execute(f"DROP TABLE IF EXISTS {self._q(live)}")
            cur.execute(f"ALTER TABLE {self._q(shadow)} RENAME TO {live}")
            self._after_rename(cur, shadow, live)
            cur.execute(f"DELETE FROM {self._q(TRACKING_TABLE)} WHERE view=? OR view=?", (view, shadow_view))
            cur.execute(f"INSERT INTO {self._q(TRACKING_TABLE)} (view, version, position) VALUES (?, ?, ?)",
                        (view, row[0], row[1]))  # fmt: skip
            cur.execute(f"DELETE FROM {self._q(PARKED_TABLE)} WHERE view=?", (view,))
            cur.execute(f"UPDATE {self._q(PARKED_TABLE)} SET view=? WHERE view=?", (view, shadow_view))
        return int(row[0]), int(row[1])

    def parked(self, view: str | None = None) -> list[tuple[Any, ...]]:
        """(view, position, stream, tag, error, attempts, parked_at), by view and position."""
        self.ensure_projection_tables()
        cond = " WHERE view=?" if view is not None else ""
        with _translated("read parked events"), self._tx(commit=False) as cur:
            cur.execute(f"SELECT view, position, stream, tag, error, attempts, parked_at FROM {self._q(PARKED_TABLE)}"
                        f"{cond} ORDER BY view, position", (view,) if view is not None else ())  # fmt: skip
            return [tuple(r) for r in cur.fetchall()]

    # dialect hooks
    _for_update = ""  # SQLite: one writer at a time already
    _blob_type = "BLOB"
    _types = {"text": "TEXT", "int": "BIGINT"}

    def _q(self, table: str) -> str:
        return f'"{table}"'

    def _after_rename(self, cur: Any, old: str, new: str) -> None:
        pass

    def _ddl_lock(self, cur: Any) -> None:
        """Serialize schema changes of the projection tables between processes."""

    def _upsert_many(self, cur: Any, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]],
                     upsert: str) -> None:  # fmt: skip
        cur.executemany(upsert, rows)

    @contextmanager
    def _tx(self, commit: bool = True) -> Iterator[Any]:
        raise NotImplementedError
        yield

    # subclass SQL
    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        raise NotImplementedError

    def _stream_version(self, stream: str) -> int:
        raise NotImplementedError

    def _select_streams(self, streams: Sequence[str]) -> list[tuple[int, str, int, bytes]]:
        raise NotImplementedError

    def _select_after(self, after: int, limit: int, upto: int | None = None) -> list[tuple[int, str, int, bytes]]:
        raise NotImplementedError


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
        with _translated(f"open {self.path}"):
            datastore = SQLiteDatastore(self.path, originator_id_type="text", lock_timeout=30)
            recorder = SQLiteApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
            if create:
                recorder.create_table()
        super().__init__(recorder, datastore)

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
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
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
    def _tx(self, commit: bool = True) -> Iterator[Any]:
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


class PostgresStore(Store):
    kind = "postgresql"

    def __init__(self, url: str, *, create: bool = True):
        try:
            from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
            from psycopg.sql import SQL, Identifier
        except ImportError as e:  # pragma: no cover - depends on the install
            raise StoreError(f"PostgreSQL support is not installed ({e}): pip install 'epochledger[postgres]'") from None
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        self.schema = query.get("schema", ["public"])[0]
        dbname = unquote(parts.path.lstrip("/")) or "postgres"
        self.url = url
        self._local = threading.local()
        self._readers: list[Any] = []
        self._connect_args = {
            "dbname": dbname, "host": parts.hostname or "localhost", "port": parts.port or 5432,
            "user": unquote(parts.username or "postgres"), "password": unquote(parts.password or "") or "unused",
            "connect_timeout": 10,
        }  # fmt: skip
        self._sql, self._ident = SQL, Identifier
        with _translated(f"connect to {parts.hostname or 'localhost'}:{parts.port or 5432}/{dbname}"):
            datastore = PostgresDatastore(
                dbname=dbname,
                host=parts.hostname or "localhost",
                port=parts.port or 5432,
                user=unquote(parts.username or "postgres"),
                # eventsourcing requires a password even under trust auth.
                password=unquote(parts.password or "") or "unused",
                schema=self.schema,
                originator_id_type="text",
                pool_size=1,
                max_overflow=4,
                # No pool_open_timeout: with it, eventsourcing calls pool.open(wait=True)
                # on every connection, and two threads waiting at once trip an assert
                # inside psycopg_pool. connect_timeout still bounds a dead server.
                connect_timeout=10,
            )
            if not create:
                with datastore.transaction(commit=False) as cur:
                    cur.execute("SELECT to_regclass(%s)", (f'"{self.schema}"."{EVENTS_TABLE}"',))
                    found = cur.fetchone()
                if not found or next(iter(found.values() if isinstance(found, dict) else found)) is None:
                    datastore.close()
                    raise InvalidInput(f"no epochledger store in schema {self.schema!r}", where=url)
            else:
                with datastore.transaction(commit=True) as cur:
                    cur.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(self.schema)))
            recorder = PostgresApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
            if create:
                try:
                    recorder.create_table()
                except PersistenceError:
                    recorder.create_table()  # lost a CREATE race with another replica; now it exists
        super().__init__(recorder, datastore)
        self._table = SQL("{}.{}").format(Identifier(self.schema), Identifier(EVENTS_TABLE))

    _blob_type = "BYTEA"

    def _q(self, table: str) -> str:
        return f'"{self.schema}"."{table}"'

    def _upsert_many(self, cur: Any, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]],
                     upsert: str) -> None:  # fmt: skip
        if len(rows) < 200:
            cur.executemany(upsert, rows)
            return
        # Many rows: COPY into a scratch table, then one INSERT .. ON CONFLICT (5x the
        # pipelined executemany here; docs/benchmarks.md).
        raw = cur.raw
        raw.execute(f'CREATE TEMP TABLE "_upsert_{table}" (LIKE {self._q(table)}) ON COMMIT DROP')
        with raw.copy(f'COPY "_upsert_{table}" ({", ".join(names)}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
        raw.execute(f'INSERT INTO {self._q(table)} ({", ".join(names)}) SELECT {", ".join(names)} FROM "_upsert_{table}" '
                    "ON CONFLICT (k) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in names[1:]))  # fmt: skip

    def wake_ups(self, after: int, stop: threading.Event) -> Iterator[int]:
        # The subscription holds connections for as long as it lives (LISTEN, and its
        # pull thread): it gets a datastore, and so a pool, of its own.
        waker = PostgresStore(self.url)
        done = threading.Event()
        try:
            with _translated("subscribe"), waker.recorder.subscribe(gt=after) as subscription:

                def stopper() -> None:  # the subscription blocks; stop it from outside
                    while not done.is_set() and not stop.wait(0.1):
                        pass
                    subscription.stop()

                threading.Thread(target=stopper, daemon=True).start()
                for notification in subscription:
                    if stop.is_set():
                        return
                    yield notification.id
        finally:
            done.set()
            waker.close()

    _for_update = " FOR UPDATE"

    def _ddl_lock(self, cur: Any) -> None:
        # Two CREATE TABLE IF NOT EXISTS racing on PostgreSQL collide in pg_type.
        cur.execute("SELECT pg_advisory_xact_lock(6006)")

    def _after_rename(self, cur: Any, old: str, new: str) -> None:
        # PostgreSQL keeps the primary key index's old name; the next rebuild would
        # collide with it.
        cur.execute(f'ALTER INDEX IF EXISTS "{self.schema}"."{old}_pkey" RENAME TO "{new}_pkey"')

    @contextmanager
    def _tx(self, commit: bool = True) -> Iterator[Any]:
        from psycopg.rows import tuple_row

        with self.datastore.get_connection() as conn, conn.transaction(force_rollback=not commit):
            yield _QmarkCursor(conn.cursor(row_factory=tuple_row))

    def _rows(self, statement: Any, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        from psycopg.rows import tuple_row

        # One autocommit connection per thread for reads (each read is one statement):
        # the library's pool check-out costs ~0.5 ms a read, most of a group commit's
        # time. Binary results: bytea payloads arrive as bytes, no hex to decode.
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            import psycopg

            conn = psycopg.connect(**self._connect_args, autocommit=True, prepare_threshold=0)
            self._local.conn = conn
            self._readers.append(conn)
        with conn.cursor(row_factory=tuple_row, binary=True) as cur:
            cur.execute(statement, params, prepare=True)
            return cur.fetchall()

    def close(self) -> None:
        for conn in self._readers:
            conn.close()
        self._readers.clear()
        super().close()

    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_version, state FROM {} "
                      "WHERE originator_id=%s ORDER BY originator_version").format(self._table),
            (stream,),
        )  # type: ignore[return-value]

    def _select_streams(self, streams: Sequence[str]) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_id, originator_version, state FROM {} "
                      "WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version").format(self._table),
            (list(streams),),
        )  # type: ignore[return-value]

    def _stream_version(self, stream: str) -> int:
        rows = self._rows(self._sql("SELECT MAX(originator_version) FROM {} WHERE originator_id=%s").format(self._table), (stream,))
        return rows[0][0] or 0

    def _select_after(self, after: int, limit: int, upto: int | None = None) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_id, originator_version, state FROM {} "
                      "WHERE notification_id>%s AND notification_id<=%s ORDER BY notification_id LIMIT %s").format(self._table),
            (after, _MAX_POS if upto is None else upto, limit),
        )  # type: ignore[return-value]


class _QmarkCursor:
    """A psycopg cursor that takes the qmark placeholders the shared SQL above uses."""

    def __init__(self, cur: Any):
        self._cur = cur
        self.raw = cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._cur.execute(sql.replace("?", "%s"), params)

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        self._cur.executemany(sql.replace("?", "%s"), params)

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


def resolve_url(url: str | None) -> str:
    return url or os.environ.get("EPOCHLEDGER_STORE") or DEFAULT_PATH


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


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """`sqlite:///relative.db`, `sqlite:////absolute.db` (SQLAlchemy's convention), a bare
    file path, or `postgresql://user@host:port/db[?schema=name]`. With create=False the
    store must already exist, and opening it writes nothing (no file, schema or table
    is created): for readers such as `audit sync`."""
    url = resolve_url(url)
    if not isinstance(url, str) or "\x00" in url:
        raise InvalidInput(f"a store URL is a string without NUL characters, got {url!r}", where="--store")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        try:
            urlsplit(url).port  # noqa: B018 - parsing it is the check: "h:abc" raises ValueError
        except ValueError as e:
            raise InvalidInput(f"not a valid PostgreSQL URL ({e}): postgresql://user@host:port/db", where="--store") from None
        return PostgresStore(url, create=create)
    if scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.lower().startswith("sqlite:///") else ""
        if not path:
            raise InvalidInput(f"SQLite URL needs a path: sqlite:///relative.db or sqlite:////abs.db, got {url!r}", where="--store")
        return SQLiteStore(path, create=create)
    if scheme:
        raise InvalidInput(f"unsupported store URL scheme {scheme!r} (use sqlite:/// or postgresql://)", where="--store")
    return SQLiteStore(url, create=create)
