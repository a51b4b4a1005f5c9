"""The hash chain over the log (rule S1): what each link covers, and the walk that checks it.

Every event is chained in log order. Its link is

    sha256(b"epochledger-chain-v1" || previous link || position || stream || version || topic || state)

with integers as 8-byte big-endian and strings and bytes prefixed by their 4-byte length,
so no two different events can give the same input. The first event's previous link is
GENESIS (32 zero bytes). A link covers the event's stored bytes and its identity: an
edited payload, a row moved to another stream or version, or two rows swapped change it.
The previous link chains it to everything before, so removing a row breaks the next one.

Links live in their own table, CHAIN_TABLE, written by the store in the transaction
that appends the events (`Store.append`; ledger/store/sqlite.py and postgres.py), under
the writers' lock, so the previous link read there is the last one committed. One row
per append: `position` (its last event's), `hash` (that event's link: the chain's head
after it) and `links`, every (position, link) of the append packed as 8 + 32 bytes
(`pack`). A row per event cost as much again as the hashing (docs/benchmarks.md); a
row per append still names each event's own link. Positions may have gaps (a failed PostgreSQL append burns its ids): a link
follows the previous *chained* event, never `position - 1`.

`walk` checks a log against its links and against digests kept elsewhere; it is pure
(two iterators in, a report out): the store feeds it (Store.check_chain).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from _hashlib import HASH

CHAIN_TABLE = "epochledger_chain"
GENESIS = bytes(32)
_DOMAIN = b"epochledger-chain-v1"

ChainEvent = tuple[int, str, int, str, bytes]  # (position, stream, version, topic, state) as stored


def link(prev: bytes, position: int, stream: str, version: int, topic: str, state: bytes) -> bytes:
    """The link of one event: its bytes and identity, chained to the previous link."""
    return event_link(prev, (position, stream, version, topic, state))


def _bytes(value: object) -> bytes:
    """A stored value as bytes. The drivers give bytes or a memoryview for a BLOB; a hand
    edit can leave TEXT (SQLite's replace() returns TEXT) or another type there."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def _int(value: object) -> int:
    """A stored position or version; a hand edit can leave another type (then -1, which
    no appended event has, so the link cannot match)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63 else -1


_HEAD = struct.Struct(">32sqI").pack  # previous link, position, len(stream)
_MID = struct.Struct(">qI").pack  # version, len(topic)
_LEN = struct.Struct(">I").pack  # len(state)
_DOMAIN_HEAD = struct.Struct(f">{len(_DOMAIN)}s32sqI").pack  # _DOMAIN and _HEAD in one pack (link_rows)
_sha256: Callable[[bytes], HASH] | None = None


def _sha() -> Callable[[bytes], HASH]:
    """hashlib.sha256, imported when the first link is made: a read that links nothing
    (`show RUN`) does not load hashlib and the OpenSSL library under it (rule W2)."""
    global _sha256
    if _sha256 is None:
        import hashlib

        _sha256 = hashlib.sha256
    return _sha256


def event_link(prev: bytes, ev: ChainEvent) -> bytes:
    """`link` of a row as stored. The write path's rows are typed (int, str, int, str,
    bytes); a row read back may hold whatever a hand edit left in its columns."""
    position, stream, version, topic, state = ev
    if (
        type(position) is not int
        or type(version) is not int
        or type(state) is not bytes
        or type(stream) is not str
        or type(topic) is not str
        or not 0 <= position < 1 << 63
        or not 0 <= version < 1 << 63
    ):
        s, t, b = _bytes(stream), _bytes(topic), _bytes(state)
        position, version = _int(position), _int(version)
    else:
        s, t, b = stream.encode("utf-8", "surrogatepass"), topic.encode("utf-8", "surrogatepass"), state
    return _sha()(
        b"".join((_DOMAIN, _HEAD(prev, position, len(s)), s, _MID(version, len(t)), t, _LEN(len(b)), b))
    ).digest()


def link_rows(
    prev: bytes, positions: Sequence[int], rows: Sequence[tuple[str, int, str, bytes]]
) -> list[tuple[int, bytes]]:
    """The write path's `links`: rows (stream, version, topic, state) as the store is
    appending them, typed, at `positions`. The same links as `event_link` gives, in a
    tight loop (this is the chain's whole CPU cost on append: docs/benchmarks.md)."""
    out: list[tuple[int, bytes]] = []
    append = out.append
    join, sha, head, mid, length, domain = b"".join, _sha(), _DOMAIN_HEAD, _MID, _LEN, _DOMAIN
    topics: dict[str, bytes] = {}  # a batch has a few topics: each encoded once
    for position, (stream, version, topic, state) in zip(positions, rows, strict=True):
        s = stream.encode("utf-8", "surrogatepass")
        t = topics.get(topic)
        if t is None:
            t = topics[topic] = topic.encode("utf-8", "surrogatepass")
        prev = sha(
            join((head(domain, prev, position, len(s)), s, mid(version, len(t)), t, length(len(state)), state))
        ).digest()
        append((position, prev))
    return out


def links(prev: bytes, events: Iterable[ChainEvent]) -> list[tuple[int, bytes]]:
    """The (position, link) of each event, in the order given, chained from `prev`."""
    out = []
    for ev in events:
        prev = event_link(prev, ev)
        out.append((ev[0], prev))
    return out


_ENTRY = struct.Struct(">q32s")


def pack(made: Sequence[tuple[int, bytes]]) -> bytes:
    """The `links` column of one chain row."""
    return b"".join(_ENTRY.pack(position, link) for position, link in made)


def unpack(position: object, head: object, packed: object) -> list[tuple[int, bytes]]:
    """The (position, link) entries of one chain row as stored. A row that does not
    hold together (its blob cut or padded, its head not its last entry: a hand edit)
    gives its entries with empty links, so the walk fails at its first event."""
    raw = _bytes(packed)
    entries = [(p, h) for p, h in _ENTRY.iter_unpack(raw[: len(raw) - len(raw) % _ENTRY.size])]
    if len(raw) % _ENTRY.size or not entries or entries[-1] != (position, _bytes(head)):
        return [(p, b"") for p, _ in entries] or [(_int(position), b"")]
    return entries


class Digest(msgspec.Struct, frozen=True, kw_only=True):
    """The chain's head at one moment, to keep somewhere the ledger's writers cannot
    reach (`epochledger digest`): the last chained position, its link (hex), when."""

    position: int
    hash: str
    at: str


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """Where the log stops matching its chain or a digest. `kind`:

    - "altered": the event's bytes or identity changed, it was moved or reordered, or an
      event before it (after the previous chained one) was removed with its link;
    - "removed": the link is there, the event is not;
    - "inserted": the event has no link and linked events follow it: a row written
      around the store (a forged row);
    - "unchained": the same at the log's tail (no link after it): a forged row, or one
      written by a version without the chain (`epochledger chain --upgrade` seals it);
    - "digest": the log does not reach a digest's position with its hash: truncated, or
      rewritten (the chain recomputed) since that digest;
    - "order": a digest given as newer is behind the older one."""

    kind: str
    position: int
    message: str
    stream: str | None = None
    version: int | None = None


class ChainReport(msgspec.Struct, kw_only=True):
    """The result of a walk. `position`/`hash`: the head, the last link checked good."""

    chained: bool  # the store has a chain table
    events: int = 0
    links: int = 0
    position: int = 0
    hash: str = GENESIS.hex()
    digests: list[Digest] = msgspec.field(default_factory=list)  # the digests checked and found good
    failure: Failure | None = None


class Sealed(msgspec.Struct, kw_only=True):
    """What an upgrade did (`Store.upgrade_chain`): whether it made the chain table,
    how many events it linked (positions `first` to `position`), and the head after."""

    created: bool
    sealed: int
    first: int | None = None
    position: int = 0
    hash: str = GENESIS.hex()


def _where(stream: str, version: int) -> str:
    return f"{stream} version {version}"


def walk(
    events: Iterator[ChainEvent],
    chained: Iterator[tuple[int, bytes]],
    digests: Sequence[Digest] = (),
    *,
    stop_at_tail: bool = False,
) -> ChainReport:
    """Check `events` (every stored event, by position) against `chained` (every link,
    by position) and the digests, in order given (older first); stop at the first
    failure. stop_at_tail: an unchained event after the last link ends the walk with
    that failure (the upgrade seals from there)."""
    report = ChainReport(chained=True)
    prev = GENESIS
    at: dict[int, bytes] = {0: GENESIS}  # the links at the digests' positions, as reached
    wanted = {d.position for d in digests}
    for older, newer in zip(digests, digests[1:], strict=False):
        if newer.position < older.position:
            report.failure = Failure(
                kind="order",
                position=newer.position,
                message=(
                    f"the newer digest (position {newer.position}, {newer.at}) is behind the older one (position "
                    f"{older.position}, {older.at}): the log was truncated or rewritten between them"
                ),
            )
            return report
    ev = next(events, None)
    ln = next(chained, None)
    while ev is not None or ln is not None:
        if ln is None or (ev is not None and ev[0] < ln[0]):
            assert ev is not None
            where = f"event at position {ev[0]} ({_where(ev[1], ev[2])}) has no link in the chain"
            if ln is None:  # the tail: no link after it
                report.failure = Failure(
                    kind="unchained",
                    position=ev[0],
                    stream=ev[1],
                    version=ev[2],
                    message=(
                        f"{where}: written around the ledger (a forged row), or by a version without the chain "
                        "(then `epochledger chain --upgrade` seals it)"
                    ),
                )
            else:
                report.failure = Failure(
                    kind="inserted",
                    position=ev[0],
                    stream=ev[1],
                    version=ev[2],
                    message=(f"{where}, and chained events follow it: a row inserted around the ledger"),
                )
            break
        if ev is None or ln[0] < ev[0]:
            report.failure = Failure(
                kind="removed",
                position=ln[0],
                message=(f"event at position {ln[0]} was removed: its link is in the chain, the event is not"),
            )
            break
        position, stream, version = ev[0], ev[1], ev[2]
        expected = event_link(prev, ev)
        if expected != bytes(ln[1]):
            report.failure = Failure(
                kind="altered",
                position=position,
                stream=stream,
                version=version,
                message=(
                    f"event at position {position} ({_where(stream, version)}) does not match its link: it was altered, "
                    f"moved or reordered, or an event after position {report.position} was removed"
                ),
            )
            break
        prev = expected
        report.events += 1
        report.links += 1
        report.position = position
        if position in wanted:
            at[position] = expected
        ev = next(events, None)
        ln = next(chained, None)
    report.hash = prev.hex()
    if report.failure is not None and not (stop_at_tail and report.failure.kind == "unchained"):
        return report
    for d in digests:
        got = at.get(d.position)
        if got is None or got.hex() != d.hash:
            why = (
                "the log's chain ends before it"
                if d.position > report.position
                else "no chained event there has that hash"
            )
            report.failure = Failure(
                kind="digest",
                position=d.position,
                message=(
                    f"the digest of {d.at} (position {d.position}, hash {d.hash[:16]}...) does not match: {why}; the "
                    "log was truncated or rewritten after that digest"
                ),
            )
            return report
        report.digests.append(d)
    return report
