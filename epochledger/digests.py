"""Digests of the hash chain (rule S1): the chain's head written to a file kept where
the ledger's writers cannot reach, and read back by `verify --digest`.

A digest is `{"position": P, "hash": HEX, "at": RFC3339}`: the last chained position,
its link, and when it was taken (the ledger's clock). It is taken only from a log that
checks against its chain (a digest of a tampered log would vouch for it), and written
atomically (epochledger/files.py): a failed write leaves the previous digest.
"""

from __future__ import annotations

import msgspec

from epochledger.app import Ledger
from epochledger.files import atomic_write
from epochledger.ledger.errors import ChainBroken, InvalidInput
from epochledger.ledger.store.chain import Digest

MAX_DIGEST_BYTES = 4096


def take_digest(ledger: Ledger) -> Digest:
    """The chain's head now, after checking the whole log against the chain
    (ChainBroken, nothing written, if it fails)."""
    report = ledger.store.check_chain()
    if report.failure is not None:
        f = report.failure
        raise ChainBroken(f.kind, f.position, f.message + "; no digest taken", stream=f.stream, version=f.version)
    return Digest(position=report.position, hash=report.hash, at=ledger.clock.now().isoformat())


def encode_digest(digest: Digest) -> bytes:
    return msgspec.json.encode(digest) + b"\n"


def write_digest(ledger: Ledger, path: str) -> Digest:
    """Take a digest and write it to `path` atomically; never over the ledger's files."""
    digest = take_digest(ledger)
    with atomic_write(path, protected=ledger.store.local_files()) as f:
        f.write(encode_digest(digest))
    return digest


def read_digest(path: str) -> Digest:
    """A digest file as `epochledger digest` wrote it; InvalidInput naming the file
    and what is wrong with it otherwise."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_DIGEST_BYTES + 1)
    except (OSError, ValueError) as e:
        raise InvalidInput(f"cannot read the digest: {getattr(e, 'strerror', None) or e}", where=path) from None
    return parse_digest(raw, path)


def parse_digest(raw: bytes, where: str) -> Digest:
    """A digest's bytes as `epochledger digest` wrote them (a file's, a query
    parameter's); InvalidInput naming `where` and what is wrong otherwise."""
    if len(raw) > MAX_DIGEST_BYTES:
        raise InvalidInput(f"not a digest: larger than {MAX_DIGEST_BYTES} bytes", where=where)
    try:
        digest = msgspec.json.decode(raw, type=Digest)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise InvalidInput(f"not a digest ({{position, hash, at}}): {e}", where=where) from None
    if digest.position < 0 or len(digest.hash) != 64 or any(c not in "0123456789abcdef" for c in digest.hash):
        raise InvalidInput("not a digest: position must be >= 0 and hash 64 lowercase hex digits", where=where)
    return digest
