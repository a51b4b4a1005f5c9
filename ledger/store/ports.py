"""The write model's store ports, one per job, as eventsourcing's persistence.py splits
its recorders by role: the log (`EventLog`: append, reads, the W1 token) and its hash
chain (`HashChain`, rule S1). `Store` (ledger/store/base.py) implements both over a
few backend hooks, and each backend (sqlite.py, postgres.py) is a Store. The read
side's needs of a store are its own port, declared where they are used
(projections/tables.py, `ViewTables`). Each port has its contract suite, run on both
backends (tests/helpers/port_contracts.py).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from epochledger.ledger.events import Recorded
from epochledger.ledger.store import chain

if TYPE_CHECKING:  # base.py imports this module: its types are named, not imported, at run time
    from epochledger.ledger.store.base import Append, Lines, LogToken, Poison


class EventLog(ABC):
    """One ledger's append-only log of events, in streams, in one global order (rules
    L1, L5, W1). Positions are the log's order (gaps are allowed: PostgreSQL burns ids
    of failed appends); versions number each stream's events from 1."""

    @abstractmethod
    def append(self, appends: Sequence[Append], *, resend: bool = False, verified: Collection[str] = ()) -> list[int]:
        """Append every event in one transaction, in the order given, all or nothing,
        each at the exact version it names (the optimistic lock, rule L5); return their
        positions. ConflictError names the streams another writer moved; nothing of a
        refused batch is stored."""

    @abstractmethod
    def read_stream(self, stream: str, after: int = 0) -> list[Recorded | Poison]:
        """The stream's events after version `after`, in version order, contiguous
        (a gap is a StreamGap); an event that does not decode is a Poison in its place."""

    @abstractmethod
    def read_streams(
        self, streams: Sequence[str], after: Mapping[str, int] | None = None
    ) -> dict[str, list[Recorded | Poison]]:
        """read_stream for several streams at once, each after its own version."""

    @abstractmethod
    def stream_version(self, stream: str) -> int:
        """The stream's last version (0: no such stream)."""

    @abstractmethod
    def read_all(self, after: int = 0, upto: int | None = None, batch: int = 10_000) -> Iterator[Recorded]:
        """Every event after position `after` (up to `upto`), in log order, read in
        keyset batches; an event that does not decode raises DecodeError."""

    @abstractmethod
    def read_batches(
        self, after: int = 0, upto: int | None = None, batch: int = 10_000
    ) -> Iterator[list[Recorded | Poison]]:
        """read_all in its batches, an undecodable event as a Poison in place (rule T4)."""

    @abstractmethod
    def read_raw(
        self, after: int = 0, upto: int | None = None, batch: int = 10_000
    ) -> Iterator[list[tuple[int, str, int, bytes]]]:
        """The rows themselves, undecoded: (position, stream, version, stored bytes)."""

    @abstractmethod
    def read_lines(self, after: int = 0, upto: int | None = None, batch: int = 10_000) -> Iterator[Lines]:
        """read_raw's batches as tab-separated lines (`lines_of` their rows), for the audit."""

    @abstractmethod
    def max_position(self) -> int:
        """The position of the last event in the log (0: empty)."""

    @abstractmethod
    def log_token(self) -> LogToken | None:
        """An opaque fact about the log as this thread sees it now, or None: two equal
        tokens on one thread prove nothing was appended between them (rule W1)."""

    @abstractmethod
    def token_after_append(self, token: LogToken | None) -> LogToken | None:
        """The token just after this thread's last append, if `token` was the log's
        token before it and the append landed in one transaction; else None."""

    @abstractmethod
    def wake_ups(self, after: int, stop: threading.Event) -> Iterator[int]:
        """The log's head each time it moves past `after`, until `stop` is set (a
        subscription: LISTEN/NOTIFY on PostgreSQL); NotImplementedError where the
        backend has none, and the caller polls."""

    @abstractmethod
    def close(self) -> None:
        """Close every connection this store opened."""


class HashChain(ABC):
    """The log's hash chain (rule S1): every event linked, in log order, by the append
    that stores it; the log checked against it; a store made before it sealed."""

    @abstractmethod
    def has_chain(self) -> bool:
        """Does the store keep a chain (a store made before rule S1 has none until sealed)?"""

    @abstractmethod
    def check_chain(
        self, digests: Sequence[chain.Digest] = (), *, stop_at_tail: bool = False, snapshot: bool = True
    ) -> chain.ChainReport:
        """Walk the log against its chain (and the digests, older first): the first
        event altered, removed, inserted or reordered is the report's failure."""

    @abstractmethod
    def upgrade_chain(self, *, only_if_missing: bool = False) -> chain.Sealed:
        """Link every event past the chain's end, in one transaction under the writers'
        lock, after checking the chain before them (a broken chain: ChainBroken, nothing
        sealed); says how many it sealed."""
