"""An Idempotency-Key's kept outcome as a Decider (rule H3): state -> fold -> decide.

A client that times out and retries a write sends the same `Idempotency-Key`; the
service keeps the first outcome (status and body) on the key's own stream
(`idempotency:<key>`), appended in the same transaction as the write it answers where
the write is one group commit, so the write and its kept outcome land together or not
at all, and every server on one store sees it. Two servers racing with one key: both
append version 1 of the key's stream, one commit lands, the other conflicts and reads
the kept outcome. An outcome is kept for `WINDOW`; after it, the key is free again.
Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import msgspec

from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import IdempotencyEvent, IdempotencyKept

# Long enough to cover a client's retry policy (minutes to hours of backoff), short
# enough that a key's stream is not a promise forever: docs/service.md, "Safe retries".
WINDOW = timedelta(hours=24)


class KeptOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome kept under `key`: the request's fingerprint, its status and body,
    when it was kept, as of the stream's `version`."""

    key: str
    fingerprint: str
    status: int
    body: str
    at: datetime
    version: int = 0


def evolve(state: KeptOutcome | None, e: IdempotencyEvent) -> KeptOutcome:
    version = state.version + 1 if state is not None else 1
    return KeptOutcome(key=e.key, fingerprint=e.fingerprint, status=e.status, body=e.body, at=e.at, version=version)


def fold(events: Iterable[IdempotencyEvent], state: KeptOutcome | None = None) -> KeptOutcome | None:
    for e in events:
        state = evolve(state, e)
    return state


def live(state: KeptOutcome | None, now: datetime) -> KeptOutcome | None:
    """The kept outcome a request at `now` is answered with: None once `WINDOW` is over."""
    if state is None or now - state.at > WINDOW:
        return None
    return state


def check(state: KeptOutcome | None, fingerprint: str, now: datetime) -> KeptOutcome | None:
    """The live outcome for a request with this fingerprint; the same key with another
    request is refused (InvalidInput, 422: the key names one request, never two)."""
    found = live(state, now)
    if found is not None and found.fingerprint != fingerprint:
        raise InvalidInput(
            f"Idempotency-Key {found.key!r} was first used at {found.at.isoformat()} for another request "
            f"(a different operation, path or body); a key names one request",
            where="Idempotency-Key",
        )
    return found


def decide(cmd: IdempotencyKept, state: KeptOutcome | None) -> list[IdempotencyEvent]:
    """The first outcome under a key lands; the same request again appends nothing;
    another request under a live key is refused. After `WINDOW` the key is free."""
    cmd = msgspec.structs.replace(cmd, at=cmd.at.astimezone(UTC))
    if check(state, cmd.fingerprint, cmd.at) is not None:
        return []
    return [cmd]
