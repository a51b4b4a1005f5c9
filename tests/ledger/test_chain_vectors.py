"""The hash chain's link function and walk (rule S1) against fixed answers: a change to
the link's layout or its domain would make every existing store's chain, and every
digest already handed out, fail to verify after an upgrade, so the bytes are pinned
here, once from the layout the module's docstring states and once as literal hex."""

from __future__ import annotations

import hashlib
import struct

import pytest

from epochledger.ledger.store.chain import (
    GENESIS,
    ChainReport,
    Digest,
    Failure,
    event_link,
    link,
    link_rows,
    links,
    pack,
    unpack,
    walk,
)

ROWS = [(1, "run-a", 1, "run.queued", b'{"run":"a"}'), (3, "process-w", 1, "process.booted", b"")]
# Computed once from the layout below; never regenerate them to make a test pass.
GOLDEN = [
    "e8896a73d7c3081316ad9ccc64882c92defe7986836e1b9e0f6fadf250fc05ac",
    "f1015c80a2e544b4014504628eee000031a398f5a73cefb1857c692f9f7b2126",
]


def _documented(prev: bytes, position: int, stream: str, version: int, topic: str, state: bytes) -> bytes:
    """sha256(b"epochledger-chain-v1" || prev || position || stream || version || topic
    || state), integers 8-byte big-endian, strings and bytes 4-byte length-prefixed."""

    def sized(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    return hashlib.sha256(
        b"epochledger-chain-v1"
        + prev
        + struct.pack(">q", position)
        + sized(stream.encode())
        + struct.pack(">q", version)
        + sized(topic.encode())
        + sized(state)
    ).digest()


def test_S1_the_link_function_gives_the_known_answers_of_its_documented_layout() -> None:
    """Mutations caught: the domain or any part of the layout changed (v1 -> v2, a
    field reordered, a length prefix dropped) in `event_link` or in the write path's
    `link_rows`, which must give the same links."""
    prev, want = GENESIS, []
    for position, stream, version, topic, state in ROWS:
        prev = _documented(prev, position, stream, version, topic, state)
        want.append((position, prev))
    assert [h.hex() for _, h in want] == GOLDEN
    assert links(GENESIS, ROWS) == want
    assert link(GENESIS, *ROWS[0]).hex() == GOLDEN[0]
    assert link_rows(GENESIS, [r[0] for r in ROWS], [r[1:] for r in ROWS]) == want


def test_S1_a_digest_of_the_empty_ledger_verifies() -> None:
    """A digest taken before the first append names position 0 and GENESIS; the walk of
    the empty log reaches it. Mutation caught: the walk not knowing GENESIS at 0 (the
    digest of an empty ledger then fails as `digest`)."""
    empty = Digest(position=0, hash=GENESIS.hex(), at="2026-09-09T14:00:00+00:00")
    report = walk(iter([]), iter([]), [empty])
    assert (report.failure, report.digests, report.position, report.hash) == (None, [empty], 0, GENESIS.hex())
    later = walk(iter(ROWS), iter(links(GENESIS, ROWS)), [empty])
    assert later.failure is None and later.digests == [empty]


def test_S1_stop_at_tail_still_checks_the_digests_up_to_the_unchained_tail() -> None:
    """The upgrade walks with stop_at_tail: an unchained tail ends the walk, and the
    digests of the chained part are still checked (a rewrite behind the tail must not be
    sealed over). Mutation caught: returning at the unchained tail before the digests."""
    made = links(GENESIS, ROWS[:1])
    good = Digest(position=1, hash=made[0][1].hex(), at="2026-09-09T14:00:00+00:00")
    bad = Digest(position=1, hash="00" * 32, at="2026-09-09T14:00:00+00:00")
    kept = walk(iter(ROWS), iter(made), [good], stop_at_tail=True)
    assert kept.failure is not None and (kept.failure.kind, kept.failure.position) == ("unchained", 3)
    assert kept.digests == [good]
    rewritten = walk(iter(ROWS), iter(made), [bad], stop_at_tail=True)
    assert rewritten.failure is not None and (rewritten.failure.kind, rewritten.failure.position) == ("digest", 1)
    plain = walk(iter(ROWS), iter(made), [good])  # without stop_at_tail the tail is the failure, digests unread
    assert plain.failure is not None and plain.failure.kind == "unchained" and plain.digests == []


# ------------------------------------------------ the walk's reports, as a literal table
LINKS = links(GENESIS, ROWS)
D1 = Digest(position=1, hash=GOLDEN[0], at="t1")
D3 = Digest(position=3, hash=GOLDEN[1], at="t3")
INSERTED = (2, "run-b", 1, "run.queued", b"x")
EDITED = (1, "run-a", 1, "run.queued", b'{"run":"b"}')
WALKS = {
    # name: (events, links, digests) -> (events, links, position, head, digests, failure)
    "whole": ((ROWS, LINKS, [D1, D3]), (2, 2, 3, GOLDEN[1], [D1, D3], None)),
    "two digests of one position": ((ROWS, LINKS, [D1, D1]), (2, 2, 3, GOLDEN[1], [D1, D1], None)),
    "order": (
        (ROWS, LINKS, [D3, D1]),
        (
            0,
            0,
            0,
            GENESIS.hex(),
            [],
            Failure(
                kind="order",
                position=1,
                message=(
                    "the newer digest (position 1, t1) is behind the older one (position 3, t3): the log was truncated or "
                    "rewritten between them"
                ),
            ),
        ),
    ),
    "unchained": (
        (ROWS, LINKS[:1], []),
        (
            1,
            1,
            1,
            GOLDEN[0],
            [],
            Failure(
                kind="unchained",
                position=3,
                stream="process-w",
                version=1,
                message=(
                    "event at position 3 (process-w version 1) has no link in the chain: written around the ledger (a "
                    "forged row), or by a version without the chain (then `epochledger chain --upgrade` seals it)"
                ),
            ),
        ),
    ),
    "inserted": (
        ([ROWS[0], INSERTED, ROWS[1]], LINKS, []),
        (
            1,
            1,
            1,
            GOLDEN[0],
            [],
            Failure(
                kind="inserted",
                position=2,
                stream="run-b",
                version=1,
                message=(
                    "event at position 2 (run-b version 1) has no link in the chain, and chained events follow it: a row "
                    "inserted around the ledger"
                ),
            ),
        ),
    ),
    "removed": (
        (ROWS[:1], LINKS, []),
        (
            1,
            1,
            1,
            GOLDEN[0],
            [],
            Failure(
                kind="removed",
                position=3,
                message=("event at position 3 was removed: its link is in the chain, the event is not"),
            ),
        ),
    ),
    "altered": (
        ([EDITED, ROWS[1]], LINKS, []),
        (
            0,
            0,
            0,
            GENESIS.hex(),
            [],
            Failure(
                kind="altered",
                position=1,
                stream="run-a",
                version=1,
                message=(
                    "event at position 1 (run-a version 1) does not match its link: it was altered, moved or reordered, or "
                    "an event after position 0 was removed"
                ),
            ),
        ),
    ),
    "digest of another hash": (
        (ROWS, LINKS, [Digest(position=1, hash="00" * 32, at="t1")]),
        (
            2,
            2,
            3,
            GOLDEN[1],
            [],
            Failure(
                kind="digest",
                position=1,
                message=(
                    "the digest of t1 (position 1, hash 0000000000000000...) does not match: no chained event there has "
                    "that hash; the log was truncated or rewritten after that digest"
                ),
            ),
        ),
    ),
    "digest past the end": (
        (ROWS, LINKS, [D1, Digest(position=9, hash="00" * 32, at="t9")]),
        (
            2,
            2,
            3,
            GOLDEN[1],
            [D1],
            Failure(
                kind="digest",
                position=9,
                message=(
                    "the digest of t9 (position 9, hash 0000000000000000...) does not match: the log's chain ends before "
                    "it; the log was truncated or rewritten after that digest"
                ),
            ),
        ),
    ),
}


@pytest.mark.parametrize("name", list(WALKS))
def test_S1_each_failure_of_the_walk_names_its_kind_place_and_why(name: str) -> None:
    """Every kind of failure the walk reports (and two good walks), the whole report
    compared: what `epochledger verify` prints is this message, and its position,
    stream and version are where an operator looks. Mutations caught: a field of a
    Failure dropped or swapped, a message cut, the digest order test `<=`, the report's
    counts or head."""
    (events, chained, digests), (n, m, position, head, good, failure) = WALKS[name]
    report = walk(iter(events), iter(chained), digests)
    assert report == ChainReport(
        chained=True, events=n, links=m, position=position, hash=head, digests=good, failure=failure
    )


def test_S1_a_row_as_a_hand_edit_left_it_links_by_its_stored_bytes() -> None:
    """A hand edit can leave TEXT where bytes belong (SQLite's replace()), a lone
    surrogate in it, or a position that is not an integer: the link is computed from
    the UTF-8 bytes (surrogates passed through) and an impossible position links as -1,
    so the walk names the row instead of crashing, and an unedited value still links as
    written. Mutations caught: the encoding or its error handler changed, the integer
    test's bounds moved, -1 changed."""
    assert event_link(GENESIS, (1, "run-a", 1, "run.queued", '{"run":"a"}')).hex() == GOLDEN[0]
    assert event_link(GENESIS, (0, "s", 0, "t", "x")) == link(GENESIS, 0, "s", 0, "t", b"x")
    assert event_link(GENESIS, (1, "s", 1, "t", "\udcff")) == link(GENESIS, 1, "s", 1, "t", b"\xed\xb3\xbf")
    assert event_link(GENESIS, (1, "s", 1, "t", memoryview(b"x"))) == link(GENESIS, 1, "s", 1, "t", b"x")
    assert event_link(GENESIS, (1, "s", 1, "t", 7)) == link(GENESIS, 1, "s", 1, "t", b"7")
    assert event_link(GENESIS, (1, b"s", 1, "t", b"x")) == link(GENESIS, 1, "s", 1, "t", b"x")  # a BLOB stream
    assert event_link(GENESIS, (1, "s", 1, b"t", b"x")) == link(GENESIS, 1, "s", 1, "t", b"x")  # a BLOB topic
    # a typed row (the write path's fast branch) with lone surrogates links as the documented layout
    # says, by the UTF-8 bytes with surrogates passed through, and never raises
    odd = event_link(GENESIS, (1, "s\udcff", 1, "t\udcff", b"x"))
    assert (
        odd
        == hashlib.sha256(
            b"epochledger-chain-v1"
            + GENESIS
            + struct.pack(">qI", 1, 4)
            + b"s\xed\xb3\xbf"
            + struct.pack(">qI", 1, 4)
            + b"t\xed\xb3\xbf"
            + struct.pack(">I", 1)
            + b"x"
        ).digest()
    )
    assert link_rows(GENESIS, [1], [("s\udcff", 1, "t\udcff", b"x")]) == [(1, odd)]  # the write path alike
    for bad in ("1", True, -5, 1 << 63, None):
        assert event_link(GENESIS, (bad, "s", 1, "t", b"x")) == link(GENESIS, -1, "s", 1, "t", b"x"), bad
        assert event_link(GENESIS, (1, "s", bad, "t", b"x")) == link(GENESIS, 1, "s", -1, "t", b"x"), bad


def test_S1_a_chain_row_that_does_not_hold_together_gives_empty_links() -> None:
    """A chain row's packed links cut or padded, or its head not its last entry: its
    entries come back with empty links (the walk then fails at its first event), never
    as good links and never as a crash. Mutations caught: the padding test, the cut of
    the blob, the empty link."""
    made = LINKS
    blob = pack(made)
    assert unpack(3, made[-1][1], blob) == made
    assert unpack(3, made[-1][1], blob + b"\x00\x00\x00") == [(1, b""), (3, b"")]
    assert unpack(3, made[-1][1], blob[:-1]) == [(1, b"")]
    assert unpack(3, made[0][1], blob) == [(1, b""), (3, b"")]
    assert unpack(3, made[-1][1], b"") == [(3, b"")]
    assert unpack("x", made[-1][1], b"") == [(-1, b"")]
