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
DEFAULT_PATH = "epochledger.db"
READ_BATCH = 10_000


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


def _decode(position: int, state: bytes) -> AnyEvent:
    try:
        return codec.decode(state)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        try:
            tag = msgspec.json.decode(state).get("type")
        except Exception:
            tag = None
        raise DecodeError(position, tag, str(e)) from None


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

    def stream_version(self, stream: str) -> int:
        with _translated(f"read {stream}"):
            return self._stream_version(stream)

    def read_all(self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH) -> Iterator[Recorded]:
        """Every event with after < position <= upto, in log order, in keyset batches."""
        while True:
            with _translated("read the log"):
                rows = self._select_after(after, batch)
            if not rows:
                return
            for pos, stream, ver, state in rows:
                if upto is not None and pos > upto:
                    return
                yield Recorded(pos, stream, ver, _decode(pos, state))
            after = rows[-1][0]
            if len(rows) < batch:
                return

    def read_raw(self, after: int = 0, upto: int | None = None,
                 batch: int = READ_BATCH) -> Iterator[list[tuple[int, str, int, bytes]]]:  # fmt: skip
        """The stored rows (position, stream, version, state bytes) with after < position
        <= upto, in log order, one keyset batch per list, NOT decoded. For exports that
        must carry the bytes as stored (docs/audit.md): a typed decode would drop fields
        written by a newer version and refuse a tag this version does not know (BRIEF L3).
        The state may come back as bytes or a buffer (memoryview), per driver."""
        while True:
            with _translated("read the log"):
                rows = self._select_after(after, batch)
            if not rows:
                return
            if upto is not None and rows[-1][0] > upto:
                rows = [r for r in rows if r[0] <= upto]
                if rows:
                    yield rows
                return
            yield rows
            after = rows[-1][0]
            if len(rows) < batch:
                return

    def max_position(self) -> int:
        with _translated("read the log"):
            return self.recorder.max_notification_id() or 0

    def close(self) -> None:
        self.datastore.close()

    # subclass SQL
    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        raise NotImplementedError

    def _stream_version(self, stream: str) -> int:
        raise NotImplementedError

    def _select_after(self, after: int, limit: int) -> list[tuple[int, str, int, bytes]]:
        raise NotImplementedError


class SQLiteStore(Store):
    kind = "sqlite"

    def __init__(self, path: str, *, create: bool = True):
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self.path = os.path.abspath(path)
        self.url = "sqlite:///" + self.path
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
        with self.datastore.transaction(commit=False) as c:
            cur = c.sqlite_cursor
            cur.row_factory = None
            yield cur

    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_version, state FROM {EVENTS_TABLE} "
                "WHERE originator_id=? ORDER BY originator_version",
                (stream,),
            )
            return cur.fetchall()

    def _stream_version(self, stream: str) -> int:
        with self._cursor() as cur:
            cur.execute(f"SELECT MAX(originator_version) FROM {EVENTS_TABLE} WHERE originator_id=?", (stream,))
            return cur.fetchone()[0] or 0

    def _select_after(self, after: int, limit: int) -> list[tuple[int, str, int, bytes]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT rowid, originator_id, originator_version, state FROM {EVENTS_TABLE} "
                "WHERE rowid>? ORDER BY rowid LIMIT ?",
                (after, limit),
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
                connect_timeout=10,
                pool_open_timeout=10,
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

    def _rows(self, statement: Any, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        from psycopg.rows import tuple_row

        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(statement, params, prepare=True)
            return cur.fetchall()

    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_version, state FROM {} "
                      "WHERE originator_id=%s ORDER BY originator_version").format(self._table),
            (stream,),
        )  # type: ignore[return-value]

    def _stream_version(self, stream: str) -> int:
        rows = self._rows(self._sql("SELECT MAX(originator_version) FROM {} WHERE originator_id=%s").format(self._table), (stream,))
        return rows[0][0] or 0

    def _select_after(self, after: int, limit: int) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_id, originator_version, state FROM {} "
                      "WHERE notification_id>%s ORDER BY notification_id LIMIT %s").format(self._table),
            (after, limit),
        )  # type: ignore[return-value]


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
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        return PostgresStore(url, create=create)
    if scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.lower().startswith("sqlite:///") else ""
        if not path:
            raise InvalidInput(f"SQLite URL needs a path: sqlite:///relative.db or sqlite:////abs.db, got {url!r}", where="--store")
        return SQLiteStore(path, create=create)
    if scheme:
        raise InvalidInput(f"unsupported store URL scheme {scheme!r} (use sqlite:/// or postgresql://)", where="--store")
    return SQLiteStore(url, create=create)
