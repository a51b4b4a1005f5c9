"""The hash chain's link function and walk (rule S1) against fixed answers: a change to
the link's layout or its domain would make every existing store's chain, and every
digest already handed out, fail to verify after an upgrade, so the bytes are pinned
here, once from the layout the module's docstring states and once as literal hex."""

from __future__ import annotations

import hashlib
import struct

from ledger.store.chain import GENESIS, Digest, link, link_rows, links, walk

ROWS = [(1, "run-a", 1, "run.queued", b'{"run":"a"}'), (3, "process-w", 1, "process.booted", b"")]
# Computed once from the layout below; never regenerate them to make a test pass.
GOLDEN = ["e8896a73d7c3081316ad9ccc64882c92defe7986836e1b9e0f6fadf250fc05ac",
          "f1015c80a2e544b4014504628eee000031a398f5a73cefb1857c692f9f7b2126"]  # fmt: skip


def _documented(prev: bytes, position: int, stream: str, version: int, topic: str, state: bytes) -> bytes:
    """sha256(b"epochledger-chain-v1" || prev || position || stream || version || topic
    || state), integers 8-byte big-endian, strings and bytes 4-byte length-prefixed."""

    def sized(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    return hashlib.sha256(b"epochledger-chain-v1" + prev + struct.pack(">q", position) + sized(stream.encode())
                          + struct.pack(">q", version) + sized(topic.encode()) + sized(state)).digest()  # fmt: skip


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
