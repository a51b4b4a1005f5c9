"""The store adapter: the only module that speaks eventsourcing (STYLE.md, Layers).

Events are stored in eventsourcing's application-recorder layout: each event is a row
whose originator is the stream id, whose version is its place in the stream (the
optimistic lock, BRIEF L5), whose topic is the event's stable tag, and whose state is
the msgspec encoding. SQLite writes go through the library's recorder; PostgreSQL
writes through the store's own psycopg connections (PostgresStore says why), into the
library's table. Reads go straight to the table with keyset pagination and a typed
msgspec decode, because the library's generic objects cost most of a fleet-wide read
(docs/benchmarks.md).

Library and driver exceptions are translated here into ledger.errors and never leak.
"""

from __future__ import annotations

import hashlib
import math
import os
import select
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import msgspec
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from ledger import codec
from ledger.errors import (
    CommitUnknown,
    ConflictError,
    DecodeError,
    InvalidInput,
    LedgerError,
    LockTimeout,
    NotCommitted,
    PermissionDenied,
    StatementTimeout,
    StoreError,
    StreamGap,
)
from ledger.events import AnyEvent, Recorded, tag_of

EVENTS_TABLE = "epochledger_events"
TRACKING_TABLE = "epochledger_tracking"
PARKED_TABLE = "epochledger_parked"
APPEND_ONLY_TRIGGER = "epochledger_append_only"
DEFAULT_PATH = "epochledger.db"
SQLITE_BUSY_TIMEOUT = 30  # seconds a SQLite writer waits for another's lock
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
def _translated(what: str, store: Any = None) -> Iterator[None]:
    """Library and driver errors become ledger.errors types here. `store` (when given)
    supplies the bounds a timeout message names."""
    try:
        yield
    except LedgerError:
        raise
    except IntegrityError as e:
        raise ConflictError([], str(e)) from None
    except (PersistenceError, sqlite3.Error) as e:
        if "permission denied" in str(e):
            raise PermissionDenied(what, getattr(store, "role", None), _first_line(e)) from None
        raise StoreError(f"{what}: {e}") from None
    except Exception as e:  # psycopg errors, pool timeouts
        if type(e).__module__.startswith(("psycopg", "psycopg_pool")):
            raise _driver_error(e, what, store) from None
        raise


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _driver_error(e: Exception, what: str, store: Any = None) -> LedgerError:
    """A psycopg error as a ledger error, by SQLSTATE: a lock or statement timeout and
    a refused privilege are typed (they say what to do); the rest is a StoreError."""
    state = getattr(e, "sqlstate", None)
    if state == "55P03":  # lock_not_available: lock_timeout expired
        context = getattr(getattr(e, "diag", None), "context", None)
        lock = context.strip().splitlines()[0] if context else "a lock this statement needed"
        return LockTimeout(what, lock, getattr(store, "lock_timeout", None))
    if state == "57014" and "statement timeout" in str(e):
        return StatementTimeout(what, getattr(store, "statement_timeout", None))
    if state == "42501":  # insufficient_privilege
        return PermissionDenied(what, getattr(store, "role", None), _first_line(e), getattr(store, "privilege_hint", ""))
    if state in ("40P01", "40001"):  # deadlock, serialization failure: the transaction rolled back
        return NotCommitted(what, _first_line(e))
    return StoreError(f"{what}: {_first_line(e)}")


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


def _contiguous(stream: str, records: list[Recorded | Poison]) -> list[Recorded | Poison]:
    for expected, rec in enumerate(records, start=1):
        if rec.version != expected:
            after = records[expected - 2].position if expected > 1 else None
            raise StreamGap(stream, expected, after, rec.position)
    return records


_Row = tuple[str, int, str, bytes]  # (stream, version, topic, encoded state): one event as stored


class _NoTable(Exception):
    """The view's table does not exist (never built)."""


class _Duplicate(Exception):
    """A row of the batch is already at its (stream, version); the batch rolled back."""


class _Unsure(Exception):
    """The connection failed while the database was committing the batch."""

    def __init__(self, error: str):
        self.error = error


def _landed(rows: Sequence[_Row], found: dict[tuple[str, int], tuple[int, str, bytes]]) -> list[int] | None:
    """The positions of `rows` if every one is stored with exactly these bytes, else None."""
    ids = []
    for stream, version, topic, state in rows:
        got = found.get((stream, version))
        if got is None or got[1] != topic or bytes(got[2]) != state:
            return None
        ids.append(got[0])
    return ids


def _versions(rows: Sequence[_Row]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for stream, version, _, _ in rows:
        first, last = out.get(stream, (version, version))
        out[stream] = (min(first, version), max(last, version))
    return out


class Store:
    """Common logic over one recorder. Subclasses give the SQL of the raw read path."""

    url: str
    kind: str

    def __init__(self, recorder: Any, datastore: Any):
        self.recorder = recorder
        self.datastore = datastore

    # ------------------------------------------------------------- writes
    def append(self, appends: Sequence[Append], *, resend: bool = False) -> list[int]:
        """Append every event in one transaction, in the order given, all or nothing, and
        return their positions. Each event names the exact version it takes in its
        stream (the optimistic lock). The outcomes (docs/operations.md, "PostgreSQL:
        roles, retries and time bounds"):

        - appended: the positions. Also when the connection failed during the commit and
          the store then found every row of the batch stored with its bytes;
        - not appended: ConflictError if another writer took one of the versions first,
          naming the streams that moved; NotCommitted (LockTimeout, StatementTimeout)
          when the database rolled the batch back or never got it. Retrying is safe;
        - unknown: CommitUnknown, when the connection failed during the commit and the
          check failed too. Check, or send the same batch again with resend=True
          (Batch.commit() again does): if every row is already stored with exactly its
          bytes, that appends nothing and returns their positions.

        Without resend, a batch whose rows are already stored is a conflict even when
        the bytes are the same: two writers that decided the same event at the same
        instant still get one success and one ConflictError (L5).
        """
        rows = [(a.stream, a.version, tag_of(a.event), codec.encode(a.event)) for a in appends]
        if not rows:
            return []
        try:
            return self._insert(rows)
        except _Duplicate:
            pass  # rolled back; below: is it our own batch, landed before?
        except _Unsure as unsure:
            return self._settle(appends, rows, unsure.error)
        if resend:
            with _translated("append: compare with the stored rows", self):
                landed = _landed(rows, self._rows_at(rows))
            if landed is not None:
                return landed  # the same batch had landed: nothing appended now
        expected: dict[str, int] = {}
        for a in appends:
            expected.setdefault(a.stream, a.version - 1)
        moved = [stream for stream, v in expected.items() if self.stream_version(stream) != v]
        raise ConflictError(moved or list(expected)) from None

    def _settle(self, appends: Sequence[Append], rows: list[_Row], error: str) -> list[int]:
        """The connection failed while the database was committing: wait until no writer
        holds the writers' lock (so the failed transaction is over, committed or rolled
        back), then read the batch's (stream, version) rows. Every row there with our
        bytes: it was committed. Otherwise it was not: had it committed, those rows
        would be ours, and rows are never changed. No answer: CommitUnknown."""
        try:
            with _translated("append: check the outcome", self):
                found = self._check(rows)
        except LedgerError as e:
            raise CommitUnknown(_versions(rows), f"{error}; checking failed: {e}", tuple(appends)) from None
        landed = _landed(rows, found)
        if landed is not None:
            return landed
        raise NotCommitted("append", f"the connection failed during the commit ({error}) and the batch is not in "
                           "the log", streams=list(_versions(rows)))  # fmt: skip

    # backend hooks for append
    def _insert(self, rows: list[_Row]) -> list[int]:
        """One transaction; raise _Duplicate on a uniqueness conflict (after rollback),
        _Unsure if the commit's outcome is unknown, NotCommitted (or a subclass) if the
        transaction certainly did not commit."""
        raise NotImplementedError

    def _rows_at(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        """The stored (position, topic, state) at each (stream, version) of `rows`."""
        raise NotImplementedError

    def _check(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        """_rows_at, read once no writer holds the writers' lock."""
        raise NotImplementedError

    # -------------------------------------------------------------- reads
    def read_stream(self, stream: str) -> list[Recorded | Poison]:
        """One stream's events in version order. An event that does not decode is a
        Poison in its place (rule T4: the caller decides, the write side skips it as the
        views park it). Raises StreamGap if the versions are not 1, 2, 3, ...: a removed
        row would otherwise surface later as a misleading write conflict."""
        with _translated(f"read {stream}"):
            rows = self._select_stream(stream)
        return _contiguous(stream, _decode_rows([(pos, stream, ver, state) for pos, ver, state in rows]))

    def read_streams(self, streams: Sequence[str]) -> dict[str, list[Recorded | Poison]]:
        """Several streams in one query per 500 (group commit's prefetch): each stream's
        events in version order, as read_stream gives them; a stream with no events
        maps to []."""
        found: dict[str, list[Recorded | Poison]] = {s: [] for s in streams}
        wanted = list(found)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            with _translated("read streams"):
                rows = self._select_streams(chunk)
            for rec in _decode_rows(rows):
                found[rec.stream].append(rec)
        for stream, records in found.items():
            _contiguous(stream, records)
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
        a command writing an output file must never overwrite (epochledger/files.py)."""
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
        with _translated("create projection tables", self), self._tx() as cur:
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
        with _translated(f"create {table}", self), self._tx() as cur:
            self._ddl_lock(cur)
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self._q(table)} "
                        f"(k TEXT PRIMARY KEY{cols}, state {self._blob_type} NOT NULL)")  # fmt: skip

    def drop_view_table(self, table: str) -> None:
        with _translated(f"drop {table}", self), self._tx() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self._q(table)}")

    def tracking(self, view: str) -> tuple[int, int] | None:
        """(version, position) of a view, None if it was never materialized."""
        self.ensure_projection_tables()
        with _translated("read tracking", self), self._tx(commit=False) as cur:
            cur.execute(f"SELECT version, position FROM {self._q(TRACKING_TABLE)} WHERE view=?", (view,))
            row = cur.fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def reset_view(self, view: str, table: str, columns: Sequence[tuple[str, str]], version: int) -> None:
        """Empty `table` (created if absent) and set the view's tracking to position 0,
        in one transaction, dropping the view's parked events."""
        cols = "".join(f", {c} {self._types[t]}" for c, t in columns)
        with _translated(f"reset {view}", self), self._tx() as cur:
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
        with _translated(f"write view {view}", self), self._tx() as cur:
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
        with _translated(f"read {table}", self), self._tx(commit=False) as cur:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                cur.execute(f"SELECT k, state FROM {self._q(table)} WHERE k IN ({', '.join('?' * len(chunk))})", chunk)
                found.update((k, bytes(v)) for k, v in cur.fetchall())
        return found

    def view_rows(self, view: str, table: str, columns: Sequence[str],
                  where: Sequence[tuple[str, Any]] = ()) -> tuple[tuple[int, int] | None, list[tuple[Any, ...]]]:  # fmt: skip
        """(tracking, rows sorted by key) read in one snapshot, so the rows are exactly
        the view as of its tracking position. `where`: (column, value) equalities.

        On PostgreSQL the transaction first locks the table (ACCESS SHARE: it waits out
        a swap in progress, and then names the swapped-in table), and only then takes
        its snapshot (repeatable read), at the first SELECT. A SELECT first would take
        the snapshot before its lock, and a swap committing during the wait would pair
        the old view's tracking with the new table's rows (tests/test_pg_locks.py)."""
        self.ensure_projection_tables()
        cond = (" WHERE " + " AND ".join(f"{c}=?" for c, _ in where)) if where else ""
        try:
            with _translated(f"read {table}", self), self._tx(commit=False) as cur:
                try:
                    self._lock_for_read(cur, table)
                    cur.execute(f"SELECT k, {''.join(c + ', ' for c in columns)}state FROM {self._q(table)}{cond} "
                                "ORDER BY k", [v for _, v in where])  # fmt: skip
                except Exception as e:
                    if self._is_missing_table(e):
                        raise _NoTable from None
                    raise
                rows = [(*r[:-1], bytes(r[-1])) for r in cur.fetchall()]
                cur.execute(f"SELECT version, position FROM {self._q(TRACKING_TABLE)} WHERE view=?", (view,))
                row = cur.fetchone()
        except _NoTable:
            # Never built (the table and its tracking row are created together).
            if self.tracking(view) is not None:
                raise StoreError(f"read {table}: view {view} has a tracking row but no table {table}") from None
            return None, []
        if row is None:
            return None, []
        return (int(row[0]), int(row[1])), rows

    def swap_view(self, view: str, shadow_view: str, live: str, shadow: str) -> tuple[int, int]:
        """Replace the live table by the rebuilt one, and the live tracking and parked
        rows by the rebuild's, in one transaction: readers see the old view or the new
        one, never a half-built one. Returns the new (version, position)."""
        with _translated(f"swap {view}", self), self._tx() as cur:
            self._ddl_lock(cur)
            # Lock order, one for every transaction on views: the tracking rows it will
            # touch, all of them, sorted by key, then the tables. commit_view locks its
            # tracking row (its UPDATE) before it writes its table; the swap below drops
            # the live table and rewrites the live tracking row. Locking only the shadow's
            # row first (the last fix) still let the swap take the live table and then
            # wait for the live row that a catch-up held while waiting for the table:
            # a deadlock (tests/test_pg_locks.py).
            cur.execute(f"SELECT view FROM {self._q(TRACKING_TABLE)} WHERE view IN (?, ?) ORDER BY view"
                        f"{self._for_update}", tuple(sorted((view, shadow_view))))  # fmt: skip
            cur.execute(f"SELECT version, position FROM {self._q(TRACKING_TABLE)} WHERE view=?", (shadow_view,))
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
        with _translated("read parked events", self), self._tx(commit=False) as cur:
            cur.execute(f"SELECT view, position, stream, tag, error, attempts, parked_at FROM {self._q(PARKED_TABLE)}"
                        f"{cond} ORDER BY view, position", (view,) if view is not None else ())  # fmt: skip
            return [tuple(r) for r in cur.fetchall()]

    # dialect hooks
    def _lock_for_read(self, cur: Any, table: str) -> None:
        """SQLite: the first SELECT takes the read snapshot; nothing to lock."""

    def _is_missing_table(self, e: Exception) -> bool:
        return isinstance(e, sqlite3.OperationalError) and "no such table" in str(e)

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
            datastore = SQLiteDatastore(self.path, originator_id_type="text", lock_timeout=SQLITE_BUSY_TIMEOUT)
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
        with self._tx() as cur:  # BEGIN IMMEDIATE: waits for any writer's transaction to end
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


class PostgresStore(Store):
    """PostgreSQL through psycopg 3 connections of the store's own, in the library's
    table layout (eventsourcing's select_notifications and subscription read what this
    writes; tests/test_pg_store.py). The library is kept for creating the events
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
    CONNECT_TIMEOUT = 5  # seconds; libpq's minimum is 2. Per address the host name resolves to.
    LOCK_TIMEOUT = 10.0
    STATEMENT_TIMEOUT = 60.0
    IDLE_IN_TRANSACTION_TIMEOUT = 60.0
    CHUNK = 5000  # rows per INSERT: any batch size works; each statement stays small
    _OWN_PARAMS = ("schema", "connect_timeout", "lock_timeout", "statement_timeout", "idle_in_transaction_timeout")

    def __init__(self, url: str, *, create: bool = True, init: bool = False):
        try:
            import psycopg  # noqa: F401
            from psycopg.sql import SQL, Identifier
        except ImportError as e:  # pragma: no cover - depends on the install
            raise StoreError(f"PostgreSQL support is not installed ({e}): pip install 'epochledger[postgres]'") from None
        self.url = url
        self._parse(url)
        self._local = threading.local()
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        self._library_parts: tuple[Any, Any] | None = None
        self._sql, self._ident = SQL, Identifier
        self._table = SQL("{}.{}").format(Identifier(self.schema), Identifier(EVENTS_TABLE))
        self._events = self._q(EVENTS_TABLE)
        # The writers' lock: every append takes it before its first row gets an id and
        # holds it to the commit, so ids are handed out in commit order and a reader
        # tailing the log never passes a gap that fills later. An advisory lock needs no
        # privilege on the table (the library's EXCLUSIVE table lock needs UPDATE,
        # DELETE or TRUNCATE). Its key is derived from schema and table: one ledger,
        # one lock, visible in pg_locks (docs/operations.md).
        self.writer_lock_key = int.from_bytes(
            hashlib.blake2b(f"epochledger:{self.schema}.{EVENTS_TABLE}".encode(), digest_size=8).digest(), "big",
            signed=True)  # fmt: skip
        self.writer_lock = f"the writers' lock of {self._events} (pg_advisory_xact_lock({self.writer_lock_key}))"
        self._insert_sql = (
            f"INSERT INTO {self._events} (originator_id, originator_version, topic, state) "
            "SELECT s, v, t, b FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::bytea[]) "
            "WITH ORDINALITY AS u(s, v, t, b, n) ORDER BY n RETURNING notification_id"
        )  # ORDER BY n: ids are drawn in the batch's order, which is the log order
        exists = self._exists()
        if not exists and not create:
            raise InvalidInput(f"no epochledger store in schema {self.schema!r}", where=url)
        if init or not exists:
            self.initialize()

    # ------------------------------------------------------------- settings
    def _parse(self, url: str) -> None:
        parts = urlsplit(url)
        try:
            port = parts.port or 5432
        except ValueError:
            raise InvalidInput(f"bad port in {url!r}", where="--store") from None
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.schema = query.get("schema") or "public"
        self.dbname = unquote(parts.path.lstrip("/")) or "postgres"
        self.host = parts.hostname or "localhost"
        self.port = port
        self.role = unquote(parts.username or "") or os.environ.get("PGUSER") or "postgres"

        def seconds(name: str, default: float, least: float) -> float:
            raw = query.get(name)
            if raw is None:
                return default
            try:
                value = float(raw)
            except ValueError:
                value = float("nan")
            if not math.isfinite(value) or value < least or value > 86_400:
                raise InvalidInput(f"{name} must be a number of seconds in [{least:g}, 86400], got {raw!r}",
                                   where="--store")  # fmt: skip
            return value

        self.connect_timeout = int(seconds("connect_timeout", self.CONNECT_TIMEOUT, 2))
        self.lock_timeout = seconds("lock_timeout", self.LOCK_TIMEOUT, 0.001)
        self.statement_timeout = seconds("statement_timeout", self.STATEMENT_TIMEOUT, 0.001)
        self.idle_timeout = seconds("idle_in_transaction_timeout", self.IDLE_IN_TRANSACTION_TIMEOUT, 0.001)
        self._where = f"{self.host}:{self.port}/{self.dbname}"
        self._conninfo: dict[str, Any] = {
            **{k: v for k, v in query.items() if k not in self._OWN_PARAMS},  # sslmode, application_name, ...
            "dbname": self.dbname, "host": self.host, "port": port, "user": self.role,
            "connect_timeout": self.connect_timeout,
            # A peer that vanished without a FIN (a lost host, a dropped route): a sent
            # query unacknowledged this long fails instead of hanging for the kernel's
            # ~15 minutes of retransmissions. Keepalives find it on an idle connection.
            "tcp_user_timeout": self.connect_timeout * 1000,
            "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 5, "keepalives_count": 3,
        }  # fmt: skip
        if parts.password:
            self._conninfo["password"] = unquote(parts.password)

    privilege_hint = ("docs/operations.md, PostgreSQL roles: the owner runs `epochledger init`; a writer appends "
                      "and keeps views; a read-only role reads views with --no-catch-up")  # fmt: skip

    # ---------------------------------------------------------- connections
    def _connect(self) -> Any:
        import psycopg

        try:
            conn = psycopg.connect(**self._conninfo, autocommit=True, prepare_threshold=None)
        except psycopg.ProgrammingError as e:  # a bad option in the URL's query
            raise InvalidInput(f"{_first_line(e)} in {self.url!r}", where="--store") from None
        except psycopg.Error as e:
            raise StoreError(f"connect to {self._where} (connect_timeout={self.connect_timeout} s): {_first_line(e)}") from None
        try:
            ms = [f"{int(t * 1000)}ms" for t in (self.lock_timeout, self.statement_timeout, self.idle_timeout)]
            conn.execute("SELECT set_config('lock_timeout', %s, false), set_config('statement_timeout', %s, false), "
                         "set_config('idle_in_transaction_session_timeout', %s, false)", ms)  # fmt: skip
        except psycopg.Error as e:
            conn.close()
            raise _driver_error(e, f"connect to {self._where}", self) from None
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
        except Exception:  # noqa: BLE001 - closing a broken connection
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
        with _translated(f"open {self._where} schema {self.schema}", self):
            rows = self._rows("SELECT to_regclass(%s) IS NOT NULL", (f'"{self.schema}"."{EVENTS_TABLE}"',))
        return bool(rows[0][0])

    def _library(self) -> tuple[Any, Any]:
        """The library's datastore and recorder, made on first use: table creation and
        the reference read path only."""
        if self._library_parts is None:
            from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

            with _translated(f"connect to {self._where}", self):
                datastore = PostgresDatastore(
                    dbname=self.dbname, host=self.host, port=self.port, user=self.role,
                    password=self._conninfo.get("password") or "unused",  # required even under trust auth
                    schema=self.schema, originator_id_type="text", pool_size=1, max_overflow=2,
                    connect_timeout=self.connect_timeout,
                )  # fmt: skip
                recorder = PostgresApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
            self._library_parts = (datastore, recorder)
        return self._library_parts

    @property
    def recorder(self) -> Any:  # type: ignore[override]
        return self._library()[1]

    @property
    def datastore(self) -> Any:  # type: ignore[override]
        return self._library()[0]

    def close(self) -> None:
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
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
        with _translated(what, self):
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
                raise PermissionDenied(what, self.role, f"schema {self.schema!r} does not exist and this role may not "
                                       "create it", "create it as its owner (docs/operations.md, PostgreSQL roles)")
            conn.execute(sql("CREATE SCHEMA IF NOT EXISTS {}").format(ident(self.schema)))
        elif not self._exists_now(conn) and not conn.execute(
                "SELECT has_schema_privilege(%s, 'CREATE')", (self.schema,)).fetchone()[0]:  # fmt: skip
            raise PermissionDenied(what, self.role, f"there is no epochledger store in schema {self.schema!r} and this "
                                   "role may not create one", "the owner runs `epochledger init` first "
                                   "(docs/operations.md, PostgreSQL roles)")  # fmt: skip
        self._library()[1].create_table()
        with self._tx() as cur:
            # The database refuses UPDATE, DELETE and TRUNCATE of events for everyone,
            # owner included, unless a migration disables this trigger in its own
            # transaction (docs/operations.md). Writers also lack those privileges.
            cur.raw.execute(f"""CREATE OR REPLACE FUNCTION "{self.schema}".epochledger_append_only() RETURNS trigger
                LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION
                'epochledger: % on %.% refused: the event log is append-only', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
                USING ERRCODE = 'insufficient_privilege',
                HINT = 'a migration disables trigger {APPEND_ONLY_TRIGGER} in its own transaction (docs/operations.md)';
                END $$""")  # fmt: skip
            cur.execute("SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(?) AND tgname = ?",
                        (self._events, APPEND_ONLY_TRIGGER))  # fmt: skip
            if cur.fetchone() is None:
                cur.execute(f"CREATE TRIGGER {APPEND_ONLY_TRIGGER} BEFORE UPDATE OR DELETE OR TRUNCATE ON {self._events} "
                            f'FOR EACH STATEMENT EXECUTE FUNCTION "{self.schema}".epochledger_append_only()')  # fmt: skip
        self._projection_tables = False
        Store.ensure_projection_tables(self)

    def _exists_now(self, conn: Any) -> bool:
        return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self._events,)).fetchone()[0])

    def ensure_projection_tables(self) -> None:
        # No DDL when they exist: a writer or a read-only role opens a store it may not
        # alter. Created here only for a store made before they were part of `init`.
        if self._projection_tables:
            return
        with _translated("read the projection tables", self):
            rows = self._rows("SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                              (self._q(TRACKING_TABLE), self._q(PARKED_TABLE)))  # fmt: skip
        if rows[0][0]:
            self._projection_tables = True
            return
        super().ensure_projection_tables()

    # --------------------------------------------------------------- append
    def _insert(self, rows: list[_Row]) -> list[int]:
        streams = list(_versions(rows))
        try:
            conn = self._conn()
        except StoreError as e:
            raise NotCommitted("append", str(e), streams=streams) from None
        import psycopg

        phase = "begin"
        ids: list[int] = []
        try:
            conn.execute("BEGIN")
            phase = "lock"
            # The NOTIFY is delivered at commit: it wakes `follow` and the library's
            # subscription (its channel is the table's name).
            conn.execute("SELECT pg_advisory_xact_lock(%s), pg_notify(%s, '')", (self.writer_lock_key, EVENTS_TABLE))
            phase = "insert"
            for i in range(0, len(rows), self.CHUNK):
                chunk = rows[i:i + self.CHUNK]
                cur = conn.execute(self._insert_sql, ([r[0] for r in chunk], [r[1] for r in chunk],
                                                      [r[2] for r in chunk], [r[3] for r in chunk]))  # fmt: skip
                ids.extend(r[0] for r in cur.fetchall())
            phase = "commit"
            conn.execute("COMMIT")
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
        return sorted(ids)

    def _rows_at(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        found: dict[tuple[str, int], tuple[int, str, bytes]] = {}
        for i in range(0, len(rows), self.CHUNK):
            chunk = rows[i:i + self.CHUNK]
            got = self._rows(
                f"SELECT e.originator_id, e.originator_version, e.notification_id, e.topic, e.state FROM {self._events} e "
                "JOIN unnest(%s::text[], %s::bigint[]) AS w(s, v) ON e.originator_id = w.s AND e.originator_version = w.v",
                ([r[0] for r in chunk], [r[1] for r in chunk]))  # fmt: skip
            for stream, version, pos, topic, state in got:
                found[(stream, version)] = (pos, topic, state)
        return found

    def _check(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        # The failed transaction held the writers' lock from before its first row to
        # its end (COMMIT is only sent after every statement before it answered). Once
        # this transaction holds the lock, that one is over: committed or rolled back.
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(?)", (self.writer_lock_key,))
            return self._rows_at(rows)

    # ---------------------------------------------------------------- reads
    def max_position(self) -> int:
        with _translated("read the log", self):
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
            with _translated("listen for appends", self):
                conn.execute(f'LISTEN "{EVENTS_TABLE}"')
                last = None
                silent = 0
                while not stop.is_set():
                    if silent == 0:
                        head = int(conn.execute(f"SELECT COALESCE(MAX(notification_id), 0) FROM {self._events}")
                                   .fetchone()[0])  # fmt: skip
                        if last is None or head > max(last, after):
                            last = head
                            yield head
                    notified = any(True for _ in conn.notifies(timeout=0.5, stop_after=1))
                    silent = 0 if notified or silent >= 10 else silent + 1
        finally:
            self._drop(conn)

    _blob_type = "BYTEA"

    def _q(self, table: str) -> str:
        return f'"{self.schema}"."{table}"'

    def _is_missing_table(self, e: Exception) -> bool:
        return getattr(e, "sqlstate", None) == "42P01"

    def _lock_for_read(self, cur: Any, table: str) -> None:
        # LOCK takes no snapshot; the SELECT after it does (view_rows).
        cur.execute(f"LOCK TABLE {self._q(table)} IN ACCESS SHARE MODE")

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
        """A transaction on this thread's connection. Read-only ones are repeatable
        read: every statement in them sees one snapshot (view_rows relies on it)."""
        from psycopg.rows import tuple_row

        conn = self._conn()
        try:
            conn.execute("BEGIN" if commit else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
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
            return cur.fetchall()

    def _select_stream(self, stream: str) -> list[tuple[int, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_version, state FROM {} "
                      "WHERE originator_id=%s ORDER BY originator_version").format(self._table),
            (stream,), prepare=True,
        )  # type: ignore[return-value]

    def _select_streams(self, streams: Sequence[str]) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_id, originator_version, state FROM {} "
                      "WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version").format(self._table),
            (list(streams),), prepare=True,
        )  # type: ignore[return-value]

    def _stream_version(self, stream: str) -> int:
        rows = self._rows(self._sql("SELECT MAX(originator_version) FROM {} WHERE originator_id=%s").format(self._table),
                          (stream,), prepare=True)  # fmt: skip
        return rows[0][0] or 0

    def _select_after(self, after: int, limit: int, upto: int | None = None) -> list[tuple[int, str, int, bytes]]:
        return self._rows(
            self._sql("SELECT notification_id, originator_id, originator_version, state FROM {} "
                      "WHERE notification_id>%s AND notification_id<=%s ORDER BY notification_id LIMIT %s").format(self._table),
            (after, _MAX_POS if upto is None else upto, limit), prepare=True,
        )  # type: ignore[return-value]


def _usable(conn: Any) -> bool:
    """Is this connection still open? One inside a transaction is in use by an enclosing
    call on this thread (e.g. _check reads inside its transaction): yes. An idle one:
    read what the server sent while it was idle (nothing, normally); an EOF or an error
    there means the server closed it."""
    from psycopg.pq import ConnStatus, TransactionStatus

    if conn.closed or conn.broken:
        return False
    if conn.info.transaction_status != TransactionStatus.IDLE:
        return conn.info.transaction_status != TransactionStatus.UNKNOWN
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


def open_store(url: str | None = None, *, create: bool = True, init: bool = False) -> Store:
    """`sqlite:///relative.db`, `sqlite:////absolute.db` (SQLAlchemy's convention), a bare
    file path, or `postgresql://user@host:port/db[?schema=name&connect_timeout=S&
    lock_timeout=S&statement_timeout=S&...]` (other query parameters go to libpq, e.g.
    sslmode, application_name). A store that exists is opened without any DDL, so a
    writer or read-only role can open it. A store that does not exist is created
    (create=True) or refused (create=False: opening writes nothing, for readers such as
    `audit sync`). init=True runs the owner's idempotent create-or-upgrade even when
    the store exists (`epochledger init`; on PostgreSQL it adds what an older store
    lacks, e.g. the append-only trigger)."""
    url = resolve_url(url)
    if not isinstance(url, str) or "\x00" in url:
        raise InvalidInput(f"a store URL is a string without NUL characters, got {url!r}", where="--store")
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"a store URL must be valid UTF-8 text, got {url!r}", where="--store") from None
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        try:
            urlsplit(url).port  # noqa: B018 - parsing it is the check: "h:abc" raises ValueError
        except ValueError as e:
            raise InvalidInput(f"not a valid PostgreSQL URL ({e}): postgresql://user@host:port/db", where="--store") from None
        return PostgresStore(url, create=create, init=init)
    if scheme == "sqlite":
        path = url[len("sqlite:///"):] if url.lower().startswith("sqlite:///") else ""
        if not path:
            raise InvalidInput(f"SQLite URL needs a path: sqlite:///relative.db or sqlite:////abs.db, got {url!r}", where="--store")
        return SQLiteStore(path, create=create)
    if scheme:
        raise InvalidInput(f"unsupported store URL scheme {scheme!r} (use sqlite:/// or postgresql://)", where="--store")
    return SQLiteStore(url, create=create)
