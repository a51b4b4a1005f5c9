"""The service's bearer tokens as a Decider (rule H4): state -> fold (evolve) -> decide.

Every token's events are on one stream (`tokens`, ledger.events.token_stream): a token
is issued (`token.issued`, with its role, its slot binding and the SHA-256 digest of
the token) and may be revoked (`token.revoked`); a revoked token stays in the state,
refused, so a listing and an audit show it. The token text itself is never an event.

Why SHA-256 and not a slow password hash: a token is 256 random bits
(`secrets.token_urlsafe(32)`, made by the facade), not a password a person chose. A
slow hash (bcrypt, scrypt, argon2) exists to make guessing low-entropy secrets from a
stolen digest expensive; against 2**256 candidates one SHA-256 per guess already puts
that out of reach, and a server checks every request, where a slow hash would cost
milliseconds each. The digest is compared in constant time (`matches`).

Pure: no clock, no random, no I/O (the facade makes the token and stamps the time).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import assert_never

import msgspec

from epochledger.ledger import access
from epochledger.ledger.errors import InvalidInput, TokenNotFound
from epochledger.ledger.events import TokenEvent, TokenIssued, TokenRevoked

PREFIX = "elt"  # a token reads "elt.<id>.<secret>": the id finds its record, the secret proves it


class Token(msgspec.Struct, frozen=True, kw_only=True):
    """One token as `token list` shows it: never the token itself, nor its digest."""

    id: str
    role: str
    name: str | None = None
    slots: list[str] = []
    issued_at: datetime
    issued_by: str | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class TokenRegistry(msgspec.Struct, frozen=True, kw_only=True):
    """Every token ever issued (id -> token), with the digests to check them, as of the
    token stream's `version`."""

    tokens: dict[str, Token] = {}
    digests: dict[str, str] = {}  # id -> SHA-256 hex of the token
    version: int = 0

    def find(self, token: str) -> Token | None:
        """The live token `token` is, or None (`matches`)."""
        return matches(self, token)


def digest(token: str) -> str:
    """The SHA-256 of the token's text, hex: what the store keeps."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_id(token: str) -> str | None:
    """The id a token's text names (`elt.<id>.<secret>`), or None if it is not shaped so."""
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1]


def evolve(state: TokenRegistry | None, e: TokenEvent) -> TokenRegistry:
    state = state if state is not None else TokenRegistry()
    tokens, digests = state.tokens, state.digests
    match e:
        case TokenIssued():
            issued = Token(id=e.token, role=e.role, name=e.name, slots=list(e.slots), issued_at=e.at, issued_by=e.actor)
            tokens = {**tokens, e.token: issued}
            digests = {**digests, e.token: e.digest}
        case TokenRevoked():
            held = tokens.get(e.token)
            if held is not None:
                tokens = {**tokens, e.token: msgspec.structs.replace(held, revoked_at=e.at, revoked_by=e.actor)}
        case _:
            assert_never(e)
    return TokenRegistry(tokens=tokens, digests=digests, version=state.version + 1)


def fold(events: Iterable[TokenEvent], state: TokenRegistry | None = None) -> TokenRegistry | None:
    for e in events:
        state = evolve(state, e)
    return state


def decide(cmd: TokenEvent, state: TokenRegistry | None) -> list[TokenEvent]:
    """- Issue: the role must be one of ledger/access.py's; slots bind writer tokens
      only; an id already issued with the same digest is a retried delivery ([]),
      with another digest a refusal (ids are never reused).
    - Revoke: an unknown id is TokenNotFound; a revoked one appends nothing."""
    cmd = msgspec.structs.replace(cmd, at=cmd.at.astimezone(UTC))
    known = state.tokens.get(cmd.token) if state is not None else None
    match cmd:
        case TokenIssued():
            if cmd.role not in access.ROLES:
                raise InvalidInput(f"{cmd.role!r} is not a role; one of {', '.join(access.ROLES)}", where="role")
            if cmd.slots and cmd.role != "writer":
                raise InvalidInput(f"only a writer token is bound to slots, not a {cmd.role} token", where="slots")
            if known is not None:
                assert state is not None
                if hmac.compare_digest(state.digests[cmd.token], cmd.digest):
                    return []
                raise InvalidInput(f"token id {cmd.token!r} is taken", where="token")
            return [cmd]
        case TokenRevoked():
            if known is None:
                raise TokenNotFound(cmd.token)
            return [] if known.revoked else [cmd]
        case _:
            assert_never(cmd)


def matches(state: TokenRegistry | None, token: str) -> Token | None:
    """The live (unrevoked) token `token` is, or None: looked up by its id, its digest
    compared in constant time (hmac.compare_digest)."""
    if state is None:
        return None
    tid = token_id(token)
    if tid is None:
        return None
    known = state.tokens.get(tid)
    if known is None or known.revoked:
        return None
    return known if hmac.compare_digest(state.digests[tid], digest(token)) else None


class IssuedToken(msgspec.Struct, frozen=True, kw_only=True):
    """A token just issued: `secret` is the bearer token, shown this once and kept
    nowhere (the store holds its digest); `token` is its record."""

    secret: str
    token: Token
