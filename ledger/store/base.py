"""The store's contract and what both backends share (rules L1, L3, L5, T4).

A store keeps the log in eventsourcing's application-recorder layout: each event is a
row whose originator is the stream id, whose version is its place in the stream (the
optimistic lock, rule L5), whose topic is the event's stable tag, and whose state is the
msgspec encoding. `Store` implements the store's ports (ledger/store/ports.py: the log,
its hash chain; projections/tables.py: the view tables) over hooks every backend
implements (one module each: ledger/store/sqlite.py, ledger/store/postgres.py), and
the contract suites test it (tests/helpers/store_contract.py, and one per port:
tests/helpers/port_contracts.py); a third backend gets them all by writing one subclass and one
`create_store()`.

Reads go straight to the table with keyset pagination and a typed msgspec decode: the
library's generic objects cost most of a fleet-wide read (docs/benchmarks.md). The
projection engine's SQL lives with the engine (projections/tables.py) and speaks to the
database through the small dialect a store provides here (`transaction`, `quote`, ...).

Library and driver exceptions are translated here into ledger.errors and never leak.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

if TYPE_CHECKING:  # imported where used: a read never loads the library (library_error, rule W2)
    from eventsourcing.persistence import ApplicationRecorder

from epochledger.ledger import codec
from epochledger.ledger.errors import (
    ChainBroken,
    CommitUnknown,
    ConflictError,
    DecodeError,
    InvalidInput,
    LedgerError,
    NotCommitted,
    PermissionDenied,
    StoreError,
    StreamGap,
)
from epochledger.ledger.events import AnyEvent, Recorded, tag_of
from epochledger.ledger.store import chain
from epochledger.ledger.store._rows import (
    _MAX_POS,
    _driver_error,
    _Duplicate,
    _first_line,
    _landed,
    _Row,
    _Unsure,
    _versions,
)
from epochledger.ledger.store.ports import EventLog, HashChain

EVENTS_TABLE = "epochledger_events"
APPEND_ONLY_TRIGGER = "epochledger_append_only"
DEFAULT_PATH = "epochledger.db"
SQLITE_BUSY_TIMEOUT = 30  # seconds a SQLite writer waits for another's lock
READ_BATCH = 10_000
# What Store.log_token gives: opaque to its callers, who only compare two for equality
# (Ledger.read_states, rule W1). SQLite's is (its connection, PRAGMA data_version,
# total_changes); a backend without a cheap one gives None.
LogToken = tuple[object, int, int]


def check_position(value: object, where: str) -> int:
    """A notification position as the databases hold it: an int from 0 to 2**63-1
    (SQLite's INTEGER, PostgreSQL's BIGINT). Beyond that the drivers raise
    OverflowError or NumericValueOutOfRange; refused here with InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_POS:
        raise InvalidInput(f"a position is an integer from 0 to {_MAX_POS}, got {value!r}", where=where)
    return value


class Lines(NamedTuple):
    """One keyset batch of stored rows as tab-separated lines (Store.read_lines)."""

    events: int  # rows in the batch
    last: int  # position of its last row
    data: bytes  # lines_of(the batch's rows)


def lines_of(rows: Sequence[tuple[int, str, int, Any]]) -> bytes:
    """One line a row: position, stream, version, tab-separated, then the state bytes
    as stored (a TEXT state, which a hand edit can leave in SQLite, as its UTF-8), then a
    newline. Nothing is escaped: a state holding a newline or a tab makes the text
    ambiguous, which its reader must check (projections/audit)."""
    parts: list[Any] = []
    add = parts.append
    for position, stream, version, state in rows:  # the hot loop: no call per row but these
        add(b"%d\t%b\t%d\t" % (position, stream.encode(), version))
        add(state.encode() if isinstance(state, str) else state)
        add(b"\n")
    return b"".join(parts)


class Append(NamedTuple):
    """One event to append at an exact version of its stream. A batch of these is
    appended in the order given: that order is the log order (rule R1)."""

    stream: str
    version: int
    event: AnyEvent


def library_error(e: BaseException, name: str) -> bool:
    """Is `e` the library's error `name` (eventsourcing.persistence's IntegrityError,
    PersistenceError)? Asked of the library as loaded: a backend imports it only to
    make its datastore (on a write or `init`, ledger/store/sqlite.py `_library`), so a
    read that never needs it never pays its import (~1x `python -c pass`, rule W2); and
    an error of a library that was never imported cannot have been raised."""
    library = sys.modules.get("eventsourcing.persistence")
    return library is not None and isinstance(e, getattr(library, name))


@contextmanager
def translated(what: str, store: Any = None) -> Iterator[None]:
    """Library and driver errors become ledger.errors types here. `store` (when given)
    supplies the bounds a timeout message names."""
    try:
        yield
    except LedgerError:
        raise
    except Exception as e:  # in this order: the library's, SQLite's, psycopg's; else not ours
        if library_error(e, "IntegrityError"):
            raise ConflictError([], str(e)) from None
        if library_error(e, "PersistenceError") or isinstance(e, sqlite3.Error):
            if "permission denied" in str(e):
                raise PermissionDenied(what, getattr(store, "role", None), _first_line(e)) from None
            raise StoreError(f"{what}: {e}") from None
        if type(e).__module__.startswith(("psycopg", "psycopg_pool")):  # psycopg errors, pool timeouts
            raise _driver_error(e, what, store) from None
        raise


class Poison(msgspec.Struct, frozen=True):
    """A stored event that does not decode, in place of its Recorded (rule T4): the
    reader does not stop at it; the consumer (the projection engine) decides what to do."""

    position: int
    stream: str
    version: int
    tag: str | None
    error: str


def _tag_of_raw(state: bytes | str) -> str | None:  # str: a hand edit left TEXT (SQLite)
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
            raw: object = state  # bytes or a buffer per driver; TEXT if a hand edit left it (SQLite)
            append(Poison(pos, stream, ver, _tag_of_raw(raw if isinstance(raw, str) else bytes(state)), str(e)))
    return out


def _contiguous(stream: str, records: list[Recorded | Poison], after: int = 0) -> list[Recorded | Poison]:
    for expected, rec in enumerate(records, start=after + 1):
        if rec.version != expected:
            i = expected - after - 2
            previous = records[i].position if i >= 0 else None
            raise StreamGap(stream, expected, previous, rec.position)
    return records


class Store(EventLog, HashChain, ABC):
    """One ledger's log, on one backend: its two ports (ledger/store/ports.py, the log
    and its hash chain) as common code over a few backend hooks (`_insert`,
    `_select_*`, ...); the dialect (`transaction`, `quote`, ...) is what the projection
    engine's SQL needs to know about the database (projections/tables.py, ViewTables)."""

    url: str  # the store's URL, canonical (an absolute path for SQLite)
    kind: str  # "sqlite" | "postgresql"
    projection_tables_ready = False  # set by projections.tables.ensure
    read_only = False  # opened for reading only: writes raise ReadOnlyStore
    _local: threading.local  # per-thread state of a backend (its connection, ...)
    # Streams per query of `read_streams`. SQLite binds two parameters a stream (500:
    # under the 999 of older builds); PostgreSQL two arrays, whatever their length, and
    # each query has a fixed cost of its own, so fewer, longer queries are cheaper there
    # (docs/benchmarks.md, "The hot path, second round").
    streams_per_read = 500
    whole_streams_per_read = 500  # the same, for streams read from their start (_select_whole_streams)

    @abstractmethod
    def _library(self) -> tuple[object, ApplicationRecorder]:
        """The library's (datastore, application recorder), made on first use."""

    @property
    def recorder(self) -> ApplicationRecorder:
        """The library's application recorder, made on first use: table creation and the
        reference read path (`library_read`). The one library type the adapter hands
        out, typed as the library's own ABC, for the tests and benchmarks that compare
        against the reference; the ledger's code never takes it."""
        return self._library()[1]

    @property
    def datastore(self) -> object:
        """The library's datastore behind `recorder` (each backend's own class: the
        library gives them no common base)."""
        return self._library()[0]

    # ------------------------------------------------------------- writes
    def append(self, appends: Sequence[Append], *, resend: bool = False, verified: Collection[str] = ()) -> list[int]:
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

        A version beyond a stream's end is refused too (`_check_predecessors`), except
        for the streams in `verified`: those whose version before their first appended
        one the caller has read from this store (the write path reads every stream it
        decides on; rows are never removed, so that row is still there).
        """
        rows = [(a.stream, a.version, tag_of(a.event), codec.encode(a.event)) for a in appends]
        self._appended_between(None)
        if not rows:
            return []
        self._check_predecessors(rows, verified)
        try:
            return self._insert(rows)
        except _Duplicate:
            pass  # rolled back; below: is it our own batch, landed before?
        except _Unsure as unsure:
            return self._settle(appends, rows, unsure.error)
        if resend:
            with translated("append: compare with the stored rows", self):
                landed = _landed(rows, self._rows_at(rows))
            if landed is not None:
                return landed  # the same batch had landed: nothing appended now
        expected: dict[str, int] = {}
        for a in appends:
            expected.setdefault(a.stream, a.version - 1)
        moved = [stream for stream, v in expected.items() if self.stream_version(stream) != v]
        raise ConflictError(moved or list(expected)) from None

    # --------------------------------------------- what this process last saw (W1)
    def log_token(self) -> LogToken | None:
        """An opaque fact about the log as this thread's connection sees it now, or None
        when the backend has no cheap one: two equal tokens, taken on one thread, prove
        that nothing was appended to the log between them, by any writer (another
        process, another connection of this process, or this very connection). A write
        whose cached state was the stream's latest at a token equal to the current one
        need not read the stream (Ledger.read_states). SQLite has one (`PRAGMA
        data_version` and the connection's own change count); PostgreSQL has none
        cheaper than the read it would save, so its writes keep reading."""
        return None

    def token_after_append(self, token: LogToken | None) -> LogToken | None:
        """The token the log has just after this thread's last `append`, if `token` was
        the log's token before that append and the append landed in one transaction
        (else None): equal to a later log_token only if nothing but that append was
        written between `token` and then. With it, what was fresh at `token` stays
        fresh, and the append's streams are fresh too (StateCache.committed). None if
        the backend has no tokens."""
        return None

    def _appended_between(self, last: Any) -> None:
        """What the backend's token_after_append needs of the append that just landed
        (None: the last append did not land in one transaction of this thread)."""
        self._local.last_append = last

    def _check_predecessors(self, rows: Sequence[_Row], verified: Collection[str] = ()) -> None:
        """The optimistic check, both ways (rule L5, W1): the unique (stream, version)
        key refuses a version already taken; this refuses one beyond the stream's end.
        A writer that decided from a state claiming a version the stream never reached
        (a forged or foreign cache, a tampered view) would otherwise leave a gap. Read
        before the transaction, and still exact: rows are never removed, so a version
        present now is present at the commit."""
        first: dict[str, int] = {}
        for stream, version, _, _ in rows:
            first.setdefault(stream, version)
        wanted = [(stream, version - 1) for stream, version in first.items() if version > 1 and stream not in verified]
        if not wanted:
            return
        with translated("append: check each stream's version", self):
            found = self._existing(wanted)
        missing = [stream for stream, version in wanted if (stream, version) not in found]
        if missing:
            raise ConflictError(missing, "the batch expects versions these streams have not reached")

    def _settle(self, appends: Sequence[Append], rows: list[_Row], error: str) -> list[int]:
        """The connection failed while the database was committing: wait until no writer
        holds the writers' lock (so the failed transaction is over, committed or rolled
        back), then read the batch's (stream, version) rows. Every row there with our
        bytes: it was committed. Otherwise it was not: had it committed, those rows
        would be ours, and rows are never changed. No answer: CommitUnknown."""
        try:
            with translated("append: check the outcome", self):
                found = self._check(rows)
        except LedgerError as e:
            raise CommitUnknown(_versions(rows), f"{error}; checking failed: {e}", tuple(appends)) from None
        landed = _landed(rows, found)
        if landed is not None:
            return landed
        raise NotCommitted(
            "append",
            f"the connection failed during the commit ({error}) and the batch is not in the log",
            streams=list(_versions(rows)),
        )

    # backend hooks for append
    @abstractmethod
    def _insert(self, rows: list[_Row]) -> list[int]:
        """One transaction; raise _Duplicate on a uniqueness conflict (after rollback),
        _Unsure if the commit's outcome is unknown, NotCommitted (or a subclass) if the
        transaction certainly did not commit."""

    @abstractmethod
    def _existing(self, pairs: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
        """Which of these (stream, version) pairs are stored."""

    @abstractmethod
    def _rows_at(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        """The stored (position, topic, state) at each (stream, version) of `rows`."""

    @abstractmethod
    def _check(self, rows: Sequence[_Row]) -> dict[tuple[str, int], tuple[int, str, bytes]]:
        """_rows_at, read once no writer holds the writers' lock."""

    # ------------------------------------------------------ the hash chain
    # Rule S1 (ledger/store/chain.py). A backend's append writes the links of its rows
    # in the same transaction, under the writers' lock (`_link_rows`, from `_insert`).
    # A store made before the chain has no chain table: its appends are not linked
    # until `upgrade_chain` (`epochledger init`, `epochledger chain --upgrade`).
    _chained: bool | None = None  # does the chain table exist? None: not looked yet; True is kept
    chain_upgrade: chain.Sealed | None = None  # what opening with init=True sealed

    def _link_rows(self, cur: Any, positions: Sequence[int], rows: Sequence[Any]) -> None:
        """The append's hook, inside its transaction, after its rows got their positions
        and while it holds the writers' lock: append their links after the last one.
        `rows`: _Rows, or the library's StoredEvents, in the batch's order.
        (bench/chain.py's unchained anchor replaces this method with a no-op: the code
        path before the chain.)"""
        if not self._chained and not self._chain_table_exists(cur):
            return  # a store from before the chain: `upgrade_chain` seals these later
        self._chained = True
        if rows and not isinstance(rows[0], tuple):
            rows = [(r.originator_id, r.originator_version, r.topic, r.state) for r in rows]
        cur.execute(f"SELECT hash FROM {self.quote(chain.CHAIN_TABLE)} ORDER BY position DESC LIMIT 1")
        last = cur.fetchone()
        self._insert_links(cur, chain.link_rows(bytes(last[0]) if last else chain.GENESIS, positions, rows))

    def _insert_links(self, cur: Any, made: list[tuple[int, bytes]]) -> None:
        cur.execute(
            f"INSERT INTO {self.quote(chain.CHAIN_TABLE)} (position, hash, links) VALUES (?, ?, ?)",
            (made[-1][0], made[-1][1], chain.pack(made)),
        )

    def has_chain(self) -> bool:
        """Does the store have its chain table (a store made before rule S1 has not)?"""
        if not self._chained:
            self._chained = self.table_exists(chain.CHAIN_TABLE) or None
        return bool(self._chained)

    def check_chain(
        self, digests: Sequence[chain.Digest] = (), *, stop_at_tail: bool = False, snapshot: bool = True
    ) -> chain.ChainReport:
        """Walk the whole log against its chain and the digests (older first): the
        report names the first failure (rule S1). Reads only, on one snapshot (a read
        transaction; snapshot=False: the caller's transaction), so appends committing
        meanwhile cannot show as a link without its event or an event without its link."""
        if not self.has_chain():
            report = chain.ChainReport(chained=False)
            first = next(self._keyset(self._select_chain_events), None)
            if first is not None or digests:
                report.failure = chain.Failure(
                    kind="unchained",
                    position=first[0] if first else 0,
                    stream=first[1] if first else None,
                    version=first[2] if first else None,
                    message=f"the store has no hash chain (no table {chain.CHAIN_TABLE}: it was made before "
                    "rule S1): `epochledger chain --upgrade` seals its events",
                )
            return report
        if not snapshot:
            return chain.walk(
                self._keyset(self._select_chain_events), self._links(), digests, stop_at_tail=stop_at_tail
            )
        with translated("read the log", self), self.transaction(commit=False):
            return chain.walk(
                self._keyset(self._select_chain_events), self._links(), digests, stop_at_tail=stop_at_tail
            )

    def upgrade_chain(self, *, only_if_missing: bool = False) -> chain.Sealed:
        """Create the chain table if the store lacks it and link every event past the
        chain's end, in one transaction under the writers' lock, after checking the
        chain before them (ChainBroken if it fails there: nothing is sealed over a
        tampered log). only_if_missing: do nothing on a store that has the table
        (`init`'s upgrade: it never walks a chained log)."""
        with translated("upgrade the hash chain", self), self.transaction() as cur:
            self._lock_writers(cur)
            created = not self._chain_table_exists(cur)
            if not created and only_if_missing:
                return chain.Sealed(created=False, sealed=0)
            if created:
                self._create_chain_table(cur)
            self._chained = True
            report = self.check_chain(stop_at_tail=True, snapshot=False)  # this transaction's own
            failure = report.failure
            if failure is not None and failure.kind != "unchained":
                raise ChainBroken(
                    failure.kind,
                    failure.position,
                    failure.message + "; nothing was sealed",
                    stream=failure.stream,
                    version=failure.version,
                )
            sealed = chain.Sealed(created=created, sealed=0, position=report.position, hash=report.hash)
            if failure is None:
                return sealed
            prev = bytes.fromhex(report.hash)
            sealed.first = failure.position
            for rows in self._batches(self._select_chain_events, failure.position - 1):
                made = chain.links(prev, rows)
                self._insert_links(cur, made)
                prev = made[-1][1]
                sealed.sealed += len(made)
                sealed.position = made[-1][0]
            sealed.hash = prev.hex()
            return sealed

    def _links(self) -> Iterator[tuple[int, bytes]]:
        for rows in self._batches(self._select_links, 0, 1000):
            for position, head, packed in rows:
                yield from chain.unpack(position, head, packed)

    def _keyset(self, select: Any, after: int = 0) -> Iterator[Any]:
        for rows in self._batches(select, after):
            yield from rows

    def _batches(self, select: Any, after: int = 0, batch: int = READ_BATCH) -> Iterator[Any]:
        """The one keyset loop: `select(after, batch)` until a batch comes back short. A
        batch is a list of rows whose first column is the position, or Lines."""
        while True:
            with translated("read the log", self):
                got = select(after, batch)
            n, last = (got.events, got.last) if isinstance(got, Lines) else (len(got), got[-1][0] if got else after)
            if n:
                yield got
            if n < batch:
                return
            after = last

    def _lock_writers(self, cur: Any) -> None:
        """Take the writers' lock in this transaction. SQLite: BEGIN IMMEDIATE has."""
        return None

    def _chain_table_exists(self, cur: Any) -> bool:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (chain.CHAIN_TABLE,))
        return cur.fetchone() is not None

    def _create_chain_table(self, cur: Any) -> None:
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {self.quote(chain.CHAIN_TABLE)} "
            f"(position INTEGER PRIMARY KEY, hash {self.blob_type} NOT NULL, links {self.blob_type} NOT NULL)"
        )

    @abstractmethod
    def _select_chain_events(self, after: int, limit: int) -> list[chain.ChainEvent]:
        """(position, stream, version, topic, state) after `after`, at most `limit`: what a link covers."""

    @abstractmethod
    def _select_links(self, after: int, limit: int) -> list[tuple[int, bytes, bytes]]:
        """(position, hash, links) of the chain's rows after `after`, at most `limit`."""

    # -------------------------------------------------------------- reads
    def read_stream(self, stream: str, after: int = 0) -> list[Recorded | Poison]:
        """One stream's events in version order, those after version `after` (all by
        default): a writer holding the stream's state at `after` reads only what came
        since, through the (stream, version) key, so the cost is the events after it,
        not the stream's length (rule W1). An event that does not decode is a Poison in
        its place (rule T4: the caller decides, the write side skips it as the views
        park it). Raises StreamGap if the versions are not after+1, after+2, ...: a
        removed row would otherwise surface later as a misleading write conflict."""
        with translated(f"read {stream}"):
            rows = self._select_stream(stream, after)
        return _contiguous(stream, _decode_rows([(pos, stream, ver, state) for pos, ver, state in rows]), after)

    def read_streams(
        self, streams: Sequence[str], after: Mapping[str, int] | None = None
    ) -> dict[str, list[Recorded | Poison]]:
        """Several streams in one query per `streams_per_read` (group commit's
        prefetch): each stream's events in version order, as read_stream gives them,
        after its version in `after` (0 if absent); a stream with no events (after
        it) maps to []."""
        found: dict[str, list[Recorded | Poison]] = {s: [] for s in streams}
        since = after or {}
        # Streams read from their start (a group commit's new runs) and streams read
        # after a version (cached ones) go in queries of their own: a backend may read
        # the first kind by one list of ids (SQLite: one JSON parameter, any number).
        whole = [s for s in found if not since.get(s)]
        rest = [s for s in found if since.get(s)] if len(whole) < len(found) else []
        step = self.streams_per_read
        for i in range(0, len(whole), self.whole_streams_per_read):
            with translated("read streams"):
                rows = self._select_whole_streams(whole[i : i + self.whole_streams_per_read])
            for rec in _decode_rows(rows):
                found[rec.stream].append(rec)
        for i in range(0, len(rest), step):
            chunk = rest[i : i + step]
            with translated("read streams"):
                rows = self._select_streams(chunk, [since[s] for s in chunk])
            for rec in _decode_rows(rows):
                found[rec.stream].append(rec)
        for stream, records in found.items():
            if records:  # an empty read has no gap to find
                _contiguous(stream, records, since.get(stream, 0))
        return found

    def stream_version(self, stream: str) -> int:
        with translated(f"read {stream}"):
            return self._stream_version(stream)

    def read_all(self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH) -> Iterator[Recorded]:
        """Every event with after < position <= upto, in log order, in keyset batches.
        Raises DecodeError at the first event that does not decode."""
        for chunk in self.read_batches(after, upto, batch):
            for rec in chunk:
                if isinstance(rec, Poison):
                    raise DecodeError(rec.position, rec.tag, rec.error)
                yield rec

    def read_batches(
        self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH
    ) -> Iterator[list[Recorded | Poison]]:
        """The log after `after` (up to `upto`) as lists of decoded records, one list per
        keyset batch. An undecodable event is a Poison in its place, never an abort
        (rule T4). Equal to the library's select_notifications + decode
        (tests/projections/test_engine_read_path.py)."""
        for rows in self.read_raw(after, upto, batch):
            yield _decode_rows(rows)

    def read_raw(
        self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH
    ) -> Iterator[list[tuple[int, str, int, bytes]]]:
        """The stored rows (position, stream, version, state bytes) with after < position
        <= upto, in log order, one keyset batch per list, NOT decoded. For exports that
        must carry the bytes as stored (docs/audit.md): a typed decode would drop fields
        written by a newer version and refuse a tag this version does not know (rule L3).
        Also the raw side of the read-path benchmarks (docs/benchmarks.md). The state may
        come back as bytes or a buffer (memoryview), per driver. Positions are refused
        (InvalidInput) unless ints from 0 to 2**63-1, the databases' own range."""
        check_position(after, "after")
        if upto is not None:
            check_position(upto, "upto")
        return self._batches(lambda a, n: self._select_after(a, n, upto), after, batch)

    def read_lines(self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH) -> Iterator[Lines]:
        """read_raw's batches as text: each batch is `lines_of` its rows, byte for byte
        (tests/helpers/store_contract.py), with its row count and last position. For the audit
        copy, which hands DuckDB the lines as they are: a backend may build them in SQL,
        with no Python object per row (SQLite does: what it saves over read_raw and the
        formatting is in docs/benchmarks.md, "Audit: `audit sync`, end to end").
        Positions as read_raw."""
        check_position(after, "after")
        if upto is not None:
            check_position(upto, "upto")
        return self._batches(lambda a, n: self._select_lines_after(a, n, upto), after, batch)

    def library_read(
        self, after: int = 0, upto: int | None = None, batch: int = READ_BATCH
    ) -> Iterator[tuple[int, str, int, str, Any]]:
        """The library's own read path, the reference the fast path is checked and
        benchmarked against: select_notifications, then each payload decoded by the
        library's JSONTranscoder. Yields (position, stream, version, topic, decoded
        payload); no library type leaves the adapter."""
        from eventsourcing.persistence import JSONTranscoder

        decode = JSONTranscoder().decode
        while True:
            with translated("read the log"):
                got = self.recorder.select_notifications(after, batch, stop=upto, inclusive_of_start=False)
            if not got:
                return
            for n in got:
                yield n.id, str(n.originator_id), n.originator_version, n.topic, decode(n.state)  # text ids
            after = got[-1].id
            if len(got) < batch:
                return

    def wake_ups(self, after: int, stop: threading.Event) -> Iterator[int]:
        """Positions of new events as they are recorded, until `stop` is set: the
        library's subscription (LISTEN/NOTIFY on PostgreSQL). None on SQLite, which
        the library cannot subscribe to: poll instead."""
        raise NotImplementedError(f"{self.kind} has no subscription; poll")

    @abstractmethod
    def max_position(self) -> int:
        """The position of the log's last event, 0 for an empty log."""

    def local_files(self) -> list[str]:
        """The files on this machine that hold the ledger (none for a server): what
        a command writing an output file must never overwrite (epochledger/files.py)."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Close every connection this store opened."""

    # ----------------------------------------------------------- the dialect
    # What projections/tables.py needs to know about the database to keep the views'
    # tables, tracking and parked rows. SQLite's answers are the defaults.

    for_update = ""  # the row-lock suffix of a SELECT; SQLite: one writer at a time already
    blob_type = "BLOB"
    column_types = {"text": "TEXT", "int": "BIGINT"}

    @contextmanager
    @abstractmethod
    def transaction(self, commit: bool = True, *, durable: bool = True) -> Iterator[Any]:
        """A transaction on this thread's connection, yielding a cursor that takes qmark
        (`?`) placeholders. commit=False: a read-only transaction on one snapshot.
        durable=False: a write whose COMMIT need not wait for the disk (a view's commit,
        rule R3: a crash can only take it back to an earlier position, caught up again);
        it stays atomic, and the next durable commit puts it on disk too."""
        yield

    def quote(self, table: str) -> str:
        """The table's name as SQL (schema-qualified on PostgreSQL)."""
        return f'"{table}"'

    def table_exists(self, table: str) -> bool:
        """Does this table exist? A read: no DDL, no lock."""
        with translated(f"look for table {table}", self), self.transaction(commit=False) as cur:
            cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
            return cur.fetchone() is not None

    def lock_for_read(self, cur: Any, table: str) -> None:
        """Before a read of `table` that must see one snapshot with its tracking row.
        SQLite: the first SELECT takes the read snapshot; nothing to lock."""
        return None

    def is_missing_table(self, e: Exception) -> bool:
        """Is this driver error "no such table"?"""
        return isinstance(e, sqlite3.OperationalError) and "no such table" in str(e)

    def after_rename(self, cur: Any, old: str, new: str) -> None:
        """After `ALTER TABLE old RENAME TO new`: what else the rename must carry."""
        return None

    def ddl_lock(self, cur: Any) -> None:
        """Serialize schema changes of the projection tables between processes. SQLite:
        one writer at a time already."""
        return None

    def drop_view_table(self, cur: Any, table: str) -> None:
        """`DROP TABLE IF EXISTS` of a view's table (a rebuild's swap, a shadow's reset).
        SQLite: with secure_delete FAST for the drop alone (then as it was). This build's
        default, ON, zeroes every freed page: the old table's whole size written to the
        WAL and checkpointed, on every rebuild (docs/benchmarks.md, "Rebuild": the
        swap's DROP). FAST still clears what it can without more I/O; the freed pages
        keep rows of a view, which the log in the same file holds anyway (nothing is
        ever deleted from the log)."""
        was = cur.execute("PRAGMA secure_delete").fetchone()[0]
        cur.execute("PRAGMA secure_delete=FAST")
        try:
            cur.execute(f"DROP TABLE IF EXISTS {self.quote(table)}")
        finally:
            cur.execute(f"PRAGMA secure_delete={int(was)}")

    def upsert_many(
        self, cur: Any, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]], upsert: str
    ) -> None:
        """Run `upsert` (an INSERT .. ON CONFLICT with qmarks) for every row."""
        cur.executemany(upsert, rows)

    # ------------------------------------------------------- backend SQL
    @abstractmethod
    def _select_stream(self, stream: str, after: int = 0) -> list[tuple[int, int, bytes]]:
        """(position, version, state) of one stream after version `after`, in version
        order, through the (stream, version) key."""

    @abstractmethod
    def _stream_version(self, stream: str) -> int:
        """The stream's last version, 0 if it has none."""

    def _select_whole_streams(self, streams: Sequence[str]) -> list[tuple[int, str, int, bytes]]:
        """_select_streams of streams read from their start (after version 0)."""
        return self._select_streams(streams, [0] * len(streams))

    @abstractmethod
    def _select_streams(self, streams: Sequence[str], after: Sequence[int]) -> list[tuple[int, str, int, bytes]]:
        """(position, stream, version, state) of several streams, each after its version
        in `after` (same order), by stream and version."""

    @abstractmethod
    def _select_after(self, after: int, limit: int, upto: int | None = None) -> list[tuple[int, str, int, bytes]]:
        """(position, stream, version, state) after `after`, up to `upto`, at most `limit`."""

    def _select_lines_after(self, after: int, limit: int, upto: int | None = None) -> Lines:
        """_select_after's rows as Lines; a backend may build the text in SQL instead."""
        rows = self._select_after(after, limit, upto)
        return Lines(len(rows), rows[-1][0] if rows else after, lines_of(rows))
