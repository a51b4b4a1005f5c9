"""Safe retries over HTTP (rule H3): the `Idempotency-Key` header.

The first outcome of a write sent with a key (its status and body) is kept as
`idempotency.kept` on the key's own stream (ledger/idempotency.py: the Decider, its
window and its refusal of a reused key), so every server on one store answers a retry
with it. A write that is one group commit (a run's write, a boot, a slot's stop or
exit, the batch) keeps its outcome in the same transaction: both land or neither (the
server's group commit joins several requests' writes, each with its own kept outcome), and
two servers racing with one key conflict on the key's stream, the loser answering with
the winner's outcome. A write the facade makes in transactions of its own (startup,
sweep, probe, a tick report) keeps its outcome after it: a crash in between leaves the write
without its kept outcome, and a retry is decided again (docs/service.md, "Safe retries").
A refused request keeps nothing (nothing is appended from it): its retry is decided again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Request, Response

from epochledger.ledger import idempotency
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import ConflictError
from epochledger.ledger.events import IdempotencyKept, Name, idempotency_stream

if TYPE_CHECKING:
    from epochledger.app import Batch, Ledger
    from epochledger.service.app import Service

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotency-Replayed"  # "true" on an answer that is a kept outcome


def fingerprint(request: Request[Any, Any, Any], body: msgspec.Struct) -> str:
    """A digest of the operation, the path and the decoded body: the request a key names."""
    op = request.route_handler.opt.get("op", "")
    digest = hashlib.sha256()
    for part in (op.encode(), request.url.path.encode(), msgspec.json.encode(body)):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def replay(found: idempotency.KeptOutcome) -> Response[Any]:
    """The kept outcome again; its body says that this request appended nothing and that
    its effect was already recorded."""
    body = msgspec.json.decode(found.body)
    if isinstance(body, dict) and "recorded" in body:
        body = {**body, "recorded": False, "already": True}
    return Response(body, status_code=found.status, headers={REPLAYED_HEADER: "true"})


def _key(key: str) -> str:
    checked: str = check_value(key, Name, KEY_HEADER)
    return checked


def _kept(ledger: Ledger, key: str, fp: str, result: msgspec.Struct) -> IdempotencyKept:
    return IdempotencyKept(
        at=ledger.clock.now(), key=key, fingerprint=fp, status=200, body=msgspec.json.encode(result).decode()
    )


async def written(
    service: Service,
    request: Request[Any, Any, Any],
    key: str | None,
    body: msgspec.Struct,
    apply: Callable[[Batch], Callable[[bool], msgspec.Struct]],
    *,
    attempts: int = 1,
) -> Response[Any]:
    """One group commit: `apply` submits the write to the batch and says how to encode
    its outcome given whether it appended anything; with a key, the outcome is kept in
    the same commit (or the kept one answered). The server's writer thread commits it
    with the other writes waiting beside it (`Service.write`), each its own outcome. A
    lost race (ConflictError) is answered 409, except with a key (decided again once: a
    server racing with the same key kept its outcome first) or where deciding again is
    the answer (`attempts`: a boot, which is always legal; a role's grant, which the
    re-read refuses by name, rule T7)."""
    stream = None
    fp = ""
    if key is not None:
        key = _key(key)
        fp = fingerprint(request, body)
        stream = idempotency_stream(key)
        attempts = max(attempts, 2)
    ledger = service.ledger

    def work(b: Batch) -> Response[Any]:
        before = b.pending  # the writes decided before this one in the same batch
        if stream is not None:
            found = idempotency.check(b.state(stream), fp, ledger.clock.now())
            if found is not None:
                return replay(found)
        encode = apply(b)
        result = encode(b.pending > before)
        if key is not None:
            b.submit(_kept(ledger, key, fp, result))
        return Response(result)

    return await service.write(work, attempts=attempts)


def kept(
    ledger: Ledger,
    request: Request[Any, Any, Any],
    key: str | None,
    body: msgspec.Struct,
    call: Callable[[], msgspec.Struct],
) -> Response[Any]:
    """A write the facade commits itself: the kept outcome is answered, or the write is
    made and its outcome kept after it."""
    if key is None:
        return Response(call())
    key = _key(key)
    fp = fingerprint(request, body)
    stream = idempotency_stream(key)
    found = idempotency.check(ledger.read_state(stream), fp, ledger.clock.now())
    if found is not None:
        return replay(found)
    result = call()
    try:
        with ledger.batch() as b:
            b.submit(_kept(ledger, key, fp, result))
    except ConflictError:
        found = idempotency.check(ledger.read_state(stream), fp, ledger.clock.now())
        if found is not None:
            return replay(found)  # a racing server kept its outcome first
        raise
    return Response(result)
