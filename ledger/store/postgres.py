"""The PostgreSQL backend: several scheduler replicas sharing one ledger (rules L5, O5;
docs/operations.md, "PostgreSQL: roles, retries and time bounds")."""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import select
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from epochledger.ledger.errors import InvalidInput, LockTimeout, NoSuchStore, NotCommitted, PermissionDenied, StoreError
from epochledger.ledger.store._rows import _MAX_POS, _driver_error, _Duplicate, _first_line, _Row, _Unsure, _versions
from epochledger.ledger.store.base import (
    APPEND_ONLY_TRIGGER,
    EVENTS_TABLE,
    Store,
    translated,
)
from epochledger.ledger.store.chain import CHAIN_TABLE, GENESIS, ChainEvent, Sealed, link_rows, pack
from epochledger.ledger.store.url import WHERE, PostgresURL

if TYPE_CHECKING:  # imported where used: psycopg loads only when a PostgreSQL store opens
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore


# The write path's arrays, dumped to PostgreSQL's binary array format here rather than
# by psycopg's list dumper, which looks a dumper up and packs a header per element in
# Python, for every element of a group commit's INSERT (its share of the client's CPU:
# docs/benchmarks.md, "The hot path, third round").
# Only lists the store builds itself, of exactly one element type and no None: a
# stream or topic (str, sent as UTF-8: registered only on a connection whose client
# encoding is UTF-8, else psycopg's dumper runs), a version (int, 8 bytes), a payload
# (bytes). The server checks what it receives as for any parameter (array_recv; UTF-8
# validity, no NUL in text), so a value it would refuse is refused the same way.
class _Texts(list[str]):
    """A text[] parameter (stream ids, topics)."""


class _Int8s(list[int]):
    """A bigint[] parameter (versions)."""


class _Bytes(list[bytes]):
    """A bytea[] parameter (payloads)."""


_ARRAY_HEAD = struct.Struct(">iiIii").pack  # ndim 1, no nulls, element oid, length, lower bound 1
_EMPTY_HEAD = struct.Struct(">iiI").pack  # ndim 0, no nulls, element oid
_LEN = struct.Struct(">i").pack
TEXT_OID, INT8_OID, BYTEA_OID = 25, 20, 17
ARRAY_OIDS = {TEXT_OID: 1009, INT8_OID: 1016, BYTEA_OID: 1001}


def binary_array(values: Sequence[bytes], oid: int) -> bytes:
    """A one-dimensional array of varlena elements (`values`, already encoded) in
    PostgreSQL's binary format (array_send)."""
    if not values:
        return _EMPTY_HEAD(0, 0, oid)
    return b"".join(
        (
            _ARRAY_HEAD(1, 0, oid, len(values), 1),
            *itertools.chain.from_iterable(zip(map(_LEN, map(len, values)), values, strict=True)),
        )
    )


def binary_int8_array(values: Sequence[int]) -> bytes:
    """A bigint[] in binary: each element's length (8) and its value, big-endian."""
    n = len(values)
    if not n:
        return _EMPTY_HEAD(0, 0, INT8_OID)
    return _ARRAY_HEAD(1, 0, INT8_OID, n, 1) + struct.pack(
        ">" + "iq" * n, *itertools.chain.from_iterable(zip(itertools.repeat(8, n), values, strict=True))
    )


@functools.cache
def _array_dumpers() -> list[tuple[type, type]]:
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class TextsDumper(Dumper):
        format = Format.BINARY
        oid = ARRAY_OIDS[TEXT_OID]

        def dump(self, obj: Any) -> bytes:
            return binary_array([s.encode() for s in obj], TEXT_OID)

    class Int8sDumper(Dumper):
        format = Format.BINARY
        oid = ARRAY_OIDS[INT8_OID]

        def dump(self, obj: Any) -> bytes:
            return binary_int8_array(obj)

    class BytesDumper(Dumper):
        format = Format.BINARY
        oid = ARRAY_OIDS[BYTEA_OID]

        def dump(self, obj: Any) -> bytes:
            return binary_array(obj, BYTEA_OID)

    return [(_Texts, TextsDumper), (_Int8s, Int8sDumper), (_Bytes, BytesDumper)]


class PostgresStore(Store):
    """PostgreSQL through psycopg 3 connections of the store's own, in the library's
    table layout (eventsourcing's select_notifications and subscription read what this
    writes; tests/ledger/test_pg_store.py). The library is kept for creating the events
    table, and for `library_read`, the reference read path.

    Why not the library's recorder for the ledger's paths (docs/operations.md,
    "PostgreSQL: roles, retries and time bounds"): its insert_events, select_* and
    max_notification_id retry 10 times behind a pool timeout each (a dead server took
    82 s a call), its retry re-inserts a batch whose commit it did not see (and reports
    a conflict with its own rows), its pipelined insert hangs on a batch of ~55k events
    (psycopg's pipeline stops flushing a message larger than the socket takes:
    psycopg/psycopg#685), and its EXCLUSIVE table lock needs UPDATE/DELETE/TRUNCATE
    rights, so no append-only writer role could exist.

    One connection per thread (reads in autocommit, transactions on it), each with
    connect_timeout, lock_timeout, statement_timeout and idle_in_transaction_session_timeout
    from the URL (defaults below). A call makes one attempt: retrying is the caller's
    policy (the startup sweep's is the documented one).
    """

    kind = "postgresql"
    streams_per_read = 5000  # two arrays a query (Store.streams_per_read)
    whole_streams_per_read = 5000
    CONNECT_TIMEOUT = 5  # seconds; libpq's minimum is 2. Per address the host name resolves to.
    LOCK_TIMEOUT = 10.0
    STATEMENT_TIMEOUT = 60.0
    IDLE_IN_TRANSACTION_TIMEOUT = 60.0
    CHUNK = 5000  # rows per INSERT: any batch size works; each statement stays small
    _OWN_PARAMS = ("schema", "connect_timeout", "lock_timeout", "statement_timeout", "idle_in_transaction_timeout")

    def __init__(self, url: PostgresURL, *, create: bool = True, init: bool = False):
        try:
            import psycopg  # noqa: F401
            from psycopg.sql import SQL, Identifier
        except ImportError as e:  # pragma: no cover - depends on the install
            raise StoreError(
                f"PostgreSQL support is not installed ({e}): pip install 'epochledger[postgres]'"
            ) from None
        self.url = url.url
        self._parse(url)
        self._local = threading.local()
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        self._library_parts: tuple[PostgresDatastore, PostgresApplicationRecorder] | None = None
        self._sql, self._ident = SQL, Identifier
        self._table = SQL("{}.{}").format(Identifier(self.schema), Identifier(EVENTS_TABLE))
        self._events = self.quote(EVENTS_TABLE)
        # The writers' lock: every append takes it before its first row gets an id and
        # holds it to the commit, so ids are handed out in commit order and a reader
        # tailing the log never passes a gap that fills later. An advisory lock needs no
        # privilege on the table (the library's EXCLUSIVE table lock needs UPDATE,
        # DELETE or TRUNCATE). Its key is derived from schema and table: one ledger,
        # one lock, visible in pg_locks (docs/operations.md).
        self.writer_lock_key = int.from_bytes(
            hashlib.blake2b(f"epochledger:{self.schema}.{EVENTS_TABLE}".encode(), digest_size=8).digest(),
            "big",
            signed=True,
        )
        self.writer_lock = f"the writers' lock of {self._events} (pg_advisory_xact_lock({self.writer_lock_key}))"
        self._insert_sql = (
            f"INSERT INTO {self._events} (originator_id, originator_version, topic, state) "
            "SELECT s, v, t, b FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::bytea[]) "
            "WITH ORDINALITY AS u(s, v, t, b, n) ORDER BY n RETURNING notification_id"
        )  # ORDER BY n: ids are drawn in the batch's order, which is the log order. %b: the
        # arrays go in binary (psycopg dumps a text array in Python, escaping each element
        # with a regex: 2.4x the time of the whole binary INSERT of 1,000 rows here).
        # The transaction's start, in one round trip (no parameters: one simple query):
        # the writers' lock, and the NOTIFY delivered at commit that wakes `follow` and
        # the library's subscription (its channel is the table's name).
        self._begin_sql = (
            f"BEGIN; SELECT pg_advisory_xact_lock({self.writer_lock_key}), pg_notify('{EVENTS_TABLE}', '')"
        )
        # The chain's head (rule S1), read by the INSERT itself: its snapshot is taken
        # after the writers' lock was granted, so it sees the last committed link.
        self._insert_chained_sql = self._insert_sql + (
            f", (SELECT hash FROM {self.quote(CHAIN_TABLE)} ORDER BY position DESC LIMIT 1)"
        )
        self.chain_upgrade: Sealed | None = None
        exists = self._exists()
        if not exists and not create:
            raise NoSuchStore(self.url, f"there is no epochledger store in schema {self.schema!r} of {self._where}")
        if init or not exists:
            self.initialize()

    # ------------------------------------------------------------- settings
    def _parse(self, url: PostgresURL) -> None:
        query = url.query
        self.schema, self.dbname, self.host, self.port, self.role = url.schema, url.dbname, url.host, url.port, url.role

        def seconds(name: str, default: float, least: float) -> float:
            raw = query.get(name)
            if raw is None:
                return default
            try:
                value = float(raw)
            except ValueError:
                value = float("nan")
            if not math.isfinite(value) or value < least or value > 86_400:
                raise InvalidInput(
                    f"{name} must be a number of seconds in [{least:g}, 86400], got {raw!r}", where=WHERE
                )
            return value

        self.connect_timeout = int(seconds("connect_timeout", self.CONNECT_TIMEOUT, 2))
        self.lock_timeout = seconds("lock_timeout", self.LOCK_TIMEOUT, 0.001)
        self.statement_timeout = seconds("statement_timeout", self.STATEMENT_TIMEOUT, 0.001)
        self.idle_timeout = seconds("idle_in_transaction_timeout", self.IDLE_IN_TRANSACTION_TIMEOUT, 0.001)
        self._where = f"{self.host}:{self.port}/{self.dbname}"
        self._conninfo: dict[str, Any] = {
            **{k: v for k, v in query.items() if k not in self._OWN_PARAMS},  # sslmode, application_name, ...
            "dbname": self.dbname,
            "host": self.host,
            "port": self.port,
            "user": self.role,
            "connect_timeout": self.connect_timeout,
            # A peer that vanished without a FIN (a lost host, a dropped route): a sent
            # query unacknowledged this long fails instead of hanging for the kernel's
            # ~15 minutes of retransmissions. Keepalives find it on an idle connection.
            "tcp_user_timeout": self.connect_timeout * 1000,
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 5,
            "keepalives_count": 3,
        }
        if url.password:
            self._conninfo["password"] = url.password

    privilege_hint = (
        "docs/operations.md, PostgreSQL roles: the owner runs `epochledger init`; a writer appends "
        "and keeps views; a read-only role reads views with --no-catch-up"
    )

    # ---------------------------------------------------------- connections
    def _connect(self) -> Any:
        import psycopg

        try:
            conn = psycopg.connect(**self._conninfo, autocommit=True, prepare_threshold=None)
        except psycopg.ProgrammingError as e:  # a bad option in the URL's query
            raise InvalidInput(f"{_first_line(e)} in {self.url!r}", where=WHERE) from None
        except psycopg.Error as e:
            raise StoreError(
                f"connect to {self._where} (connect_timeout={self.connect_timeout} s): {_first_line(e)}"
            ) from None
        try:
            ms = [f"{int(t * 1000)}ms" for t in (self.lock_timeout, self.statement_timeout, self.idle_timeout)]
            conn.execute(
                "SELECT set_config('lock_timeout', %s, false), set_config('statement_timeout', %s, false), "
                "set_config('idle_in_transaction_session_timeout', %s, false)",
                ms,
            )
        except psycopg.Error as e:
            conn.close()
            raise _driver_error(e, f"connect to {self._where}", self) from None
        if conn.info.encoding == "utf-8":  # the write path's arrays, dumped by the store (_array_dumpers)
            for cls, dumper in _array_dumpers():
                conn.adapters.register_dumper(cls, dumper)
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _conn(self) -> Any:
        """This thread's connection, replaced if the server closed it since its last use
        (a restart, pg_terminate_backend): found without a round trip, so a dead cached
        connection does not fail the first call after the server came back."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and not _usable(conn):
            self._drop(conn)
            conn = None
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _drop(self, conn: Any) -> None:
        with self._conns_lock:
            if conn in self._conns:
                self._conns.remove(conn)
        try:
            conn.close()
        except Exception:  # noqa: BLE001, S110 - closing a broken connection: nothing to report
            pass
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    def _rollback(self, conn: Any) -> None:
        try:
            if not conn.closed and not conn.broken:
                conn.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - the connection is gone; the server rolls back
            self._drop(conn)

    def _exists(self) -> bool:
        with translated(f"open {self._where} schema {self.schema}", self):
            rows = self._rows("SELECT to_regclass(%s) IS NOT NULL", (f'"{self.schema}"."{EVENTS_TABLE}"',))
        return bool(rows[0][0])

    def _library(self) -> tuple[PostgresDatastore, PostgresApplicationRecorder]:
        """The library's datastore and recorder, made on first use: table creation and
        the reference read path only."""
        if self._library_parts is None:
            from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

            with translated(f"connect to {self._where}", self):
                datastore = PostgresDatastore(
                    dbname=self.dbname,
                    host=self.host,
                    port=self.port,
                    user=self.role,
                    password=self._conninfo.get("password") or "unused",  # required even under trust auth
                    schema=self.schema,
                    originator_id_type="text",
                    pool_size=1,
                    max_overflow=2,
                    connect_timeout=self.connect_timeout,
                )
                recorder = PostgresApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
            self._library_parts = (datastore, recorder)
        return self._library_parts

    def close(self) -> None:
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except Exception:  # noqa: BLE001, S110 - closing at exit: nothing to report
                pass
        if self._library_parts is not None:
            self._library_parts[0].close()
            self._library_parts = None

    # ------------------------------------------------------- the owner's DDL
    def initialize(self) -> None:
        """Create or upgrade the store: schema, events table (the library's layout), the
        append-only trigger, the tracking and parked tables. The owner's job
        (`epochledger init`), idempotent; writers and readers never run DDL on a store
        that exists. Serialized between processes by an advisory lock."""
        what = f"create the store in schema {self.schema}"
        conn = self._conn()
        with translated(what, self):
            conn.execute("SELECT pg_advisory_lock(6006)")  # session-wide: the library creates on its own connections
            try:
                self._initialize(conn, what)
            finally:
                if not conn.broken:
                    conn.execute("SELECT pg_advisory_unlock(6006)")

    def _initialize(self, conn: Any, what: str) -> None:
        ident, sql = self._ident, self._sql
        schema_exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone()
        if not schema_exists:
            if not conn.execute("SELECT has_database_privilege(current_database(), 'CREATE')").fetchone()[0]:
                raise PermissionDenied(
                    what,
                    self.role,
                    f"schema {self.schema!r} does not exist and this role may not create it",
                    "create it as its owner (docs/operations.md, PostgreSQL roles)",
                )
            conn.execute(sql("CREATE SCHEMA IF NOT EXISTS {}").format(ident(self.schema)))
        elif (
            not self._exists_now(conn)
            and not conn.execute("SELECT has_schema_privilege(%s, 'CREATE')", (self.schema,)).fetchone()[0]
        ):
            raise PermissionDenied(
                what,
                self.role,
                f"there is no epochledger store in schema {self.schema!r} and this role may not create one",
                "the owner runs `epochledger init` first (docs/operations.md, PostgreSQL roles)",
            )
        self._library()[1].create_table()
        with self.transaction() as cur:
            # The database refuses UPDATE, DELETE and TRUNCATE of events for everyone,
            # owner included, unless a migration disables this trigger in its own
            # transaction (docs/operations.md). Writers also lack those privileges.
            cur.raw.execute(f"""CREATE OR REPLACE FUNCTION "{self.schema}".epochledger_append_only() RETURNS trigger
                LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION
                'epochledger: % on %.% refused: the event log is append-only', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
                USING ERRCODE = 'insufficient_privilege',
                HINT = 'a migration disables trigger {APPEND_ONLY_TRIGGER} in its own transaction (docs/operations.md)';
                END $$""")
            cur.execute(
                "SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(?) AND tgname = ?",
                (self._events, APPEND_ONLY_TRIGGER),
            )
            if cur.fetchone() is None:
                cur.execute(
                    f"CREATE TRIGGER {APPEND_ONLY_TRIGGER} BEFORE UPDATE OR DELETE OR TRUNCATE ON {self._events} "
                    f'FOR EACH STATEMENT EXECUTE FUNCTION "{self.schema}".epochledger_append_only()'
                )
        # The hash chain (rule S1): made, and every event already in the log linked, in
        # one transaction under the writers' lock. Only where the table is missing: init
        # never walks a chained log (`epochledger chain --upgrade` does).
        self.chain_upgrade = self.upgrade_chain(only_if_missing=True)

    def _lock_writers(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (self.writer_lock_key,))

    def _chain_table_exists(self, cur: Any) -> bool:
        cur.execute("SELECT to_regclass(?) IS NOT NULL", (self.quote(CHAIN_TABLE),))
        return bool(cur.fetchone()[0])

    def _create_chain_table(self, cur: Any) -> None:
        chain = self.quote(CHAIN_TABLE)
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {chain} (position bigint PRIMARY KEY, hash bytea NOT NULL, "
            "links bytea NOT NULL)"
        )
        cur.execute(
            f"CREATE TRIGGER {APPEND_ONLY_TRIGGER} BEFORE UPDATE OR DELETE OR TRUNCATE ON {chain} "
            f'FOR EACH STATEMENT EXECUTE FUNCTION "{self.schema}".epochledger_append_only()'
        )

    def _exists_now(self, conn: Any) -> bool:
        return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self._events,)).fetchone()[0])

    def table_exists(self, table: str) -> bool:
        with translated(f"look for table {table}", self):
            return bool(self._rows("SELECT to_regclass(%s) IS NOT NULL", (self.quote(table),))[0][0])

    # --------------------------------------------------------------- append
    def _insert(self, rows: list[_Row]) -> list[int]:
        try:
            conn = self._conn()
        except StoreError as e:
            raise NotCommitted("append", str(e), streams=list(_versions(rows))) from None
        import psycopg

        phase = "lock"
        ids: list[int] = []
        try:
            conn.execute(self._begin_sql)
            phase = "insert"
            chained = self._chained  # the chain table is known to exist: its head comes back with the ids
            head: list[bytes | None] = []
            for i in range(0, len(rows), self.CHUNK):
                chunk = rows[i : i + self.CHUNK]
                ids_of, versions, topics, states = zip(*chunk, strict=True)
                cur = conn.execute(
                    self._insert_chained_sql if chained and not i else self._insert_sql,
                    [_Texts(ids_of), _Int8s(versions), _Texts(topics), _Bytes(states)],
                )
                got = cur.fetchall()
                ids.extend(r[0] for r in got)
                head = head or [got[0][1] if chained else None]
            ids.sort()
            # The chain's links (rule S1), in this transaction, under the writers' lock:
            # sent with the COMMIT, in one round trip (the links are ints and hex: no
            # parameter is needed, so the two statements go as one simple query).
            commit = "COMMIT"
            if chained:
                made = link_rows(head[0] if head[0] is not None else GENESIS, ids, rows)
                commit = (
                    f"INSERT INTO {self.quote(CHAIN_TABLE)} (position, hash, links) VALUES ({made[-1][0]}, "
                    f"'\\x{made[-1][1].hex()}'::bytea, '\\x{pack(made).hex()}'::bytea); COMMIT"
                )
            else:
                self._link_rows(_QmarkCursor(conn.cursor()), ids, rows)  # a store from before the chain?
            phase = "commit"
            conn.execute(commit)
        except psycopg.errors.UniqueViolation:
            self._rollback(conn)
            raise _Duplicate from None
        except psycopg.Error as e:
            if phase == "commit" and (conn.closed or conn.broken or isinstance(e, psycopg.OperationalError)):
                # COMMIT was sent and no answer came back: the server may have committed.
                self._drop(conn)
                raise _Unsure(_first_line(e)) from None
            # Before COMMIT was sent nothing can commit: a connection lost here ends the
            # transaction on the server as a rollback.
            self._rollback(conn)
            streams = list(_versions(rows))  # the batch's streams, named by the error (found only on failure)
            if phase == "lock" and getattr(e, "sqlstate", None) == "55P03":
                raise LockTimeout("append", self.writer_lock, self.lock_timeout, streams=streams) from None
            error = _driver_error(e, "append", self)
            if isinstance(error, NotCommitted):
                error.streams = streams
            elif not isinstance(error, PermissionDenied):
                error = NotCommitted("append", _first_line(e), streams=streams)
            raise error from None
        except BaseException:
            self._drop(conn)  # interrupted (Ctrl-C): the connection's state is unknown
            raise
        return ids

    def _existing(self, pairs: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
        found: set[tuple[str, int]] = set()
        for i in range(0, len(pairs), self.CHUNK):
            chunk = pairs[i : i + self.CHUNK]
            got = self._rows(
                self._sql(
                    "SELECT e.originator_id, e.originator_version FROM {} e JOIN unnest(%b::text[], %b::bigint[]) "
                    "AS w(s, v) ON e.originator_id = w.s AND e.originator_version = w.v"
                ).format(self._table),
                (_Texts(p[0] for p in chunk), _Int8s(p[1] for p in chunk)),
                prepare=True,
            )
            found.update((stream, version) for stream, version in got)
        return found

    def _rows_at(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        found: dict[tuple[str, int], tuple[int, str, bytes]] = {}
        for i in range(0, len(rows), self.CHUNK):
            chunk = rows[i : i + self.CHUNK]
            got = self._rows(
                f"SELECT e.originator_id, e.originator_version, e.notification_id, e.topic, e.state FROM {self._events} e "
                "JOIN unnest(%b::text[], %b::bigint[]) AS w(s, v) ON e.originator_id = w.s AND e.originator_version = w.v",
                (_Texts(r[0] for r in chunk), _Int8s(r[1] for r in chunk)),
            )
            for stream, version, pos, topic, state in got:
                found[(stream, version)] = (pos, topic, state)
        return found

    def _check(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        # The failed transaction held the writers' lock from before its first row to
        # its end (COMMIT is only sent after every statement before it answered). Once
        # this transaction holds the lock, that one is over: committed or rolled back.
        with self.transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(?)", (self.writer_lock_key,))
            return self._rows_at(rows)

    # ---------------------------------------------------------------- reads
    def max_position(self) -> int:
        with translated("read the log", self):
            return int(self._rows(f"SELECT COALESCE(MAX(notification_id), 0) FROM {self._events}", ())[0][0])

    def wake_ups(self, after: int, stop: threading.Event) -> Iterator[int]:
        """The log's head each time it may have moved, until `stop` is set: once as soon
        as it listens, whatever the head (so what was appended before LISTEN is caught
        up), then after every NOTIFY from an append (on the library's channel, so its
        subscription and this one wake alike) when the head is past `after` and past
        the last head yielded, and on a heartbeat every ~5 s of silence (which also
        finds a dead connection). Raises StoreError when the connection fails;
        `projections.engine.follow` reconnects."""
        conn = self._connect()  # its own: LISTEN holds it
        try:
            with translated("listen for appends", self):
                conn.execute(f'LISTEN "{EVENTS_TABLE}"')
                last = None
                silent = 0
                while not stop.is_set():
                    if silent == 0:
                        head = int(
                            conn.execute(f"SELECT COALESCE(MAX(notification_id), 0) FROM {self._events}").fetchone()[0]
                        )
                        if last is None or head > max(last, after):
                            last = head
                            yield head
                    notified = any(True for _ in conn.notifies(timeout=0.5, stop_after=1))
                    silent = 0 if notified or silent >= 10 else silent + 1
        finally:
            self._drop(conn)

    blob_type = "BYTEA"

    def quote(self, table: str) -> str:
        return f'"{self.schema}"."{table}"'

    def is_missing_table(self, e: Exception) -> bool:
        return getattr(e, "sqlstate", None) == "42P01"

    def lock_for_read(self, cur: Any, table: str) -> None:
        # LOCK takes no snapshot; the SELECT after it does (view_rows).
        cur.execute(f"LOCK TABLE {self.quote(table)} IN ACCESS SHARE MODE")

    def upsert_many(
        self, cur: Any, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]], upsert: str
    ) -> None:
        if len(rows) < 200:
            cur.executemany(upsert, rows)
            return
        # Many rows: COPY into a scratch table, then one INSERT .. ON CONFLICT (5x the
        # pipelined executemany here; docs/benchmarks.md).
        raw = cur.raw
        raw.execute(f'CREATE TEMP TABLE "_upsert_{table}" (LIKE {self.quote(table)}) ON COMMIT DROP')
        with raw.copy(f'COPY "_upsert_{table}" ({", ".join(names)}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
        raw.execute(
            f'INSERT INTO {self.quote(table)} ({", ".join(names)}) SELECT {", ".join(names)} FROM "_upsert_{table}" '
            "ON CONFLICT (k) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in names[1:])
        )

    for_update = " FOR UPDATE"

    def ddl_lock(self, cur: Any) -> None:
        # Two CREATE TABLE IF NOT EXISTS racing on PostgreSQL collide in pg_type.
        cur.execute("SELECT pg_advisory_xact_lock(6006)")

    def drop_view_table(self, cur: Any, table: str) -> None:
        cur.execute(f"DROP TABLE IF EXISTS {self.quote(table)}")

    def after_rename(self, cur: Any, old: str, new: str) -> None:
        # PostgreSQL keeps the primary key index's old name; the next rebuild would
        # collide with it.
        cur.execute(f'ALTER INDEX IF EXISTS "{self.schema}"."{old}_pkey" RENAME TO "{new}_pkey"')

    @contextmanager
    def transaction(self, commit: bool = True, *, durable: bool = True) -> Iterator[Any]:
        """A transaction on this thread's connection. Read-only ones are repeatable
        read: every statement in them sees one snapshot (view_rows relies on it).
        durable=False (a view's commit, rule R3): its COMMIT does not wait for the WAL
        flush (synchronous_commit off for this transaction alone, sent with its BEGIN);
        the next commit that waits for its own flush covers it."""
        from psycopg.rows import tuple_row

        conn = self._conn()
        try:
            if not commit:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            elif durable:
                conn.execute("BEGIN")
            else:
                conn.execute("BEGIN; SET LOCAL synchronous_commit TO OFF")
            yield _QmarkCursor(conn.cursor(row_factory=tuple_row))
            conn.execute("COMMIT" if commit else "ROLLBACK")
        except BaseException:
            self._rollback(conn)
            raise

    def _rows(self, statement: Any, params: Sequence[Any], *, prepare: bool = False) -> list[tuple[Any, ...]]:
        """One statement in autocommit on this thread's connection. Binary results:
        bytea payloads arrive as bytes, no hex to decode."""
        from psycopg.rows import tuple_row

        with self._conn().cursor(row_factory=tuple_row, binary=True) as cur:
            cur.execute(statement, params, prepare=prepare)
            rows: list[tuple[Any, ...]] = cur.fetchall()
            return rows

    def _select_stream(self, stream: str, after: int = 0) -> list[tuple[int, int, bytes]]:
        return self._rows(
            self._sql(
                "SELECT notification_id, originator_version, state FROM {} "
                "WHERE originator_id=%s AND originator_version>%s ORDER BY originator_version"
            ).format(self._table),
            (stream, after),
            prepare=True,
        )

    def _select_streams(self, streams: Sequence[str], after: Sequence[int]) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql(
                "SELECT e.notification_id, e.originator_id, e.originator_version, e.state "
                "FROM unnest(%b::text[], %b::bigint[]) AS w(s, v) JOIN {} e "
                "ON e.originator_id = w.s AND e.originator_version > w.v "
                "ORDER BY e.originator_id, e.originator_version"
            ).format(self._table),
            (_Texts(streams), _Int8s(after)),
            prepare=True,
        )

    def _stream_version(self, stream: str) -> int:
        rows = self._rows(
            self._sql("SELECT MAX(originator_version) FROM {} WHERE originator_id=%s").format(self._table),
            (stream,),
            prepare=True,
        )
        return rows[0][0] or 0

    def _select_after(self, after: int, limit: int, upto: int | None = None) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql(
                "SELECT notification_id, originator_id, originator_version, state FROM {} "
                "WHERE notification_id>%s AND notification_id<=%s ORDER BY notification_id LIMIT %s"
            ).format(self._table),
            (after, _MAX_POS if upto is None else upto, limit),
            prepare=True,
        )

    def _select_chain_events(self, after: int, limit: int) -> list[ChainEvent]:
        return self._rows(
            self._sql(
                "SELECT notification_id, originator_id, originator_version, topic, state FROM {} "
                "WHERE notification_id>%s ORDER BY notification_id LIMIT %s"
            ).format(self._table),
            (after, limit),
            prepare=True,
        )

    def _select_links(self, after: int, limit: int) -> list[tuple[int, bytes, bytes]]:
        return self._rows(
            f"SELECT position, hash, links FROM {self.quote(CHAIN_TABLE)} WHERE position>%s ORDER BY position LIMIT %s",
            (after, limit),
            prepare=True,
        )


def _usable(conn: Any) -> bool:
    """Is this connection still open? One inside a transaction is in use by an enclosing
    call on this thread (e.g. _check reads inside its transaction): yes. An idle one:
    read what the server sent while it was idle (nothing, normally); an EOF or an error
    there means the server closed it."""
    from psycopg.pq import ConnStatus, TransactionStatus

    if conn.closed or conn.broken:
        return False
    if conn.info.transaction_status != TransactionStatus.IDLE:
        return bool(conn.info.transaction_status != TransactionStatus.UNKNOWN)
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
        if readable:
            conn.pgconn.consume_input()
    except Exception:  # noqa: BLE001 - any failure here means: reconnect
        return False
    return bool(conn.pgconn.status == ConnStatus.OK)


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
        return list(self._cur.fetchall())

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)
