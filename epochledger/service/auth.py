"""Who may do what (rule H4): the guard every route passes.

Every route names its operation (`opt={"op": <facade method name>}`); `guard` decides
from the caller's bearer token and the one role table (ledger/access.py). A route whose
operation the table does not know is refused to everyone (deny by default).

- A ledger with tokens (any was ever issued, revoked ones count): every request but the
  public ones (health, readiness, the OpenAPI document) needs a live token; none, a
  malformed `Authorization` header, an unknown or a revoked token: 401 with
  `WWW-Authenticate: Bearer`. Out of role: 403 naming the operation and the roles that
  may call it.
- A ledger without tokens: `serve` listens on loopback only (serve.py, `open_service`),
  and every loopback caller is admin; a caller from any other address is refused (401),
  so a server that was somehow reached from outside still serves it nothing.

Each request reads the token stream through the facade (`Ledger.token_registry`): the
cached registry, plus the token events after its version (one indexed read; on SQLite
none while the log is unchanged), in a read begun after the request arrived and shared
by every request waiting for one (`Service.token_registry`), so a token revoked by any
server on the store is refused by this one at its next request (rule H6). The token is compared by its
SHA-256 digest in constant time (ledger/tokens.py) and is never logged nor echoed:
no problem document names it or any part of the header.

Handlers that act for a slot call `check_slot` (a boot, an exit, a sweep, a probe, a
tick report naming its slot) or `check_epoch` (a report naming the epoch it is written
for); handlers whose operation holds an operator's act (a resume `by="operator"`, a
cancel whose actor names an operator) call `check_act`; a route that makes several
operations in one request (the group commit) calls `require` for each. All read the
caller the guard stored (`caller`). A response that outlives its request's check (the
live stream) asks `still_allowed` between events.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Request, delete, get, post
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.params import FromPath, JSONBody

from epochledger.ledger import access
from epochledger.ledger.errors import StoreError, UnknownEpoch
from epochledger.ledger.tokens import IssuedToken, Token
from epochledger.service.problems import AccessRefused

if TYPE_CHECKING:
    from epochledger.app import Ledger
    from epochledger.service.app import Service


# RFC 6750's b64token, at most MAX_TOKEN characters: anything else is malformed (401),
# whatever it holds (a second scheme, a comma list, control or non-ASCII characters).
MAX_TOKEN = 512
_BEARER = re.compile(r"Bearer +([A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_STATE_KEY = "epochledger_caller"
# The console's session (rule H10): a cookie holding a token, set by `POST /login`
# (epochledger/console/pages.py), read here as the bearer token's equivalent.
SESSION_COOKIE = "epochledger_session"


def well_formed(token: str) -> bool:
    """Is `token` an RFC 6750 b64token of at most MAX_TOKEN characters?"""
    return len(token) <= MAX_TOKEN and _TOKEN.fullmatch(token) is not None


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """Who is asking: a token's id, name, role and slots; `token` None is a loopback
    caller of a ledger without tokens (admin)."""

    role: str
    token: str | None = None
    name: str | None = None
    slots: tuple[str, ...] = ()

    @property
    def bound(self) -> bool:
        """A writer token bound to slots (access.SLOT_BOUND acts only for those)."""
        return self.role == "writer" and bool(self.slots)


LOCAL = Caller(role=access.ADMIN)


def credentials(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The bearer token the request carries, or None for none; AccessRefused (401) for a
    malformed one. The one place a request's credentials are read: the Authorization
    header, else the console's session cookie (SESSION_COOKIE, rule H10; docs/service.md,
    "Tokens and roles"), nowhere else. A header wins over a cookie."""
    values = connection.headers.getall("authorization", [])
    if not values:
        session = connection.cookies.get(SESSION_COOKIE)
        if session is None:
            return None
        if not well_formed(session):
            raise AccessRefused(401, "malformed session cookie; log in again at /login")
        return session
    if len(values) > 1:
        raise AccessRefused(401, "more than one Authorization header; send one: Authorization: Bearer <token>")
    found = _BEARER.fullmatch(values[0].strip(" "))
    if found is None or not well_formed(found.group(1)):
        raise AccessRefused(401, "malformed Authorization header; expected: Authorization: Bearer <token>")
    return found.group(1)


def _is_loopback(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    client = connection.client
    if client is None:
        return False
    try:
        return ipaddress.ip_address(client.host).is_loopback
    except ValueError:
        return False


async def _identify(connection: ASGIConnection[Any, Any, Any, Any], op: str) -> Caller:
    secret = credentials(connection)
    service: Service = connection.app.state.service
    try:
        registry = await service.token_registry()  # read by the writer thread, once for every waiting check
    except StoreError:
        if op not in access.WHEN_STORE_AWAY:
            raise
        registry = service.last_registry  # the store is away: the last registry read decides
    found = registry.find(secret) if secret is not None else None
    if found is not None:
        return Caller(role=found.role, token=found.id, name=found.name, slots=tuple(found.slots))
    if secret is not None:
        raise AccessRefused(401, "unknown or revoked token")
    if registry.tokens:
        raise AccessRefused(401, "this ledger has tokens: every request needs one (Authorization: Bearer <token>)")
    if not _is_loopback(connection):
        raise AccessRefused(401, "a ledger without tokens serves loopback callers only (rule H4)")
    return LOCAL


async def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Refuse a caller whose role does not allow the route's operation (401, 403).
    The token check reads the store on the server's writer thread, never on the event
    loop: the ledger is shared in turn (Service.use), and a long request holding it must
    never stall the loop. One read serves every check waiting while it begins
    (`Service.token_registry`)."""
    op = handler.opt.get("op")
    if not isinstance(op, str) or op not in access.OPERATIONS:
        raise AccessRefused(
            403,
            f"the route declares no operation the access table knows ({op!r}): refused to every caller",
            op=op if isinstance(op, str) else None,
        )
    if op in access.PUBLIC:
        return
    who = await _identify(connection, op)
    connection.state[_STATE_KEY] = who
    if not access.allows(who.role, op):
        _refuse(who, op)


def caller(connection: ASGIConnection[Any, Any, Any, Any]) -> Caller:
    """The caller the guard let through for this request."""
    found = connection.state.get(_STATE_KEY)
    if not isinstance(found, Caller):  # a route that no guard passed: nothing is allowed
        raise AccessRefused(403, "no caller was identified for this request")
    return found


def _refuse(who: Caller, op: str, **fields: Any) -> None:
    needed = access.needed(op)
    raise AccessRefused(
        403,
        f"operation {op!r} needs the role {' or '.join(needed) or '(none)'}; this token is a {who.role} token",
        op=op,
        role=who.role,
        needed=needed,
        token=who.token,
        **fields,
    )


def still_allowed(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether the caller the guard let through would still be let through now: its
    token is not revoked (and, for a loopback caller of a ledger without tokens, the
    ledger still has none). For a response that outlives its request's check (the live
    stream, rule H5): it asks between events and ends when this turns False, so a
    revocation cuts an open stream too. Reads the store: call it off the event loop."""
    who = caller(connection)
    service: Service = connection.app.state.service
    with service.use() as ledger:
        registry = ledger.token_registry()
    if who.token is None:
        return not registry.tokens
    found = registry.tokens.get(who.token)
    return found is not None and not found.revoked


def require(connection: ASGIConnection[Any, Any, Any, Any], op: str) -> None:
    """Refuse `op` to a caller whose role may not call it (403): for a route that makes
    several operations in one request, e.g. each command of a group commit (`batch`),
    which must not let a writer slip in an operator's act."""
    who = caller(connection)
    if not access.allows(who.role, op):
        _refuse(who, op)


def check_act(
    connection: ASGIConnection[Any, Any, Any, Any], op: str, *, by: str | None = None, actor: str | None = None
) -> None:
    """Refuse an operator's act (access.act: a resume by the operator, a cancel whose
    actor names one) to a caller whose role may call `op` but not make that act (403)."""
    require(connection, access.act(op, by=by, actor=actor))


def check_slot(connection: ASGIConnection[Any, Any, Any, Any], slot: str) -> None:
    """Refuse a writer token bound to other slots acting for `slot` (403)."""
    who = caller(connection)
    if who.bound and not access.slot_allowed(who.slots, slot):
        raise AccessRefused(
            403,
            f"this token writes for slots {', '.join(who.slots)} only, not for slot {slot!r}",
            slot=slot,
            slots=list(who.slots),
            role=who.role,
            token=who.token,
        )


def check_epoch(connection: ASGIConnection[Any, Any, Any, Any], ledger: Ledger, epoch: str) -> None:
    """Refuse a writer token bound to other slots acting for `epoch` (its slot's, 403).
    An epoch no slot booted is none of the token's slots: refused alike, so a bound
    token learns nothing of other slots' epochs."""
    who = caller(connection)
    if not who.bound:
        return
    try:
        slot = ledger.epoch(epoch).process
    except UnknownEpoch:
        raise AccessRefused(
            403,
            f"epoch {epoch!r} is not an epoch of this token's slots ({', '.join(who.slots)})",
            epoch=epoch,
            slots=list(who.slots),
            role=who.role,
            token=who.token,
        ) from None
    check_slot(connection, slot)


# ---------------------------------------------------------------- token admin over HTTP
class TokenRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A token to issue: `role` (ledger/access.py), what it is for, a writer's slots."""

    role: str
    name: str | None = None
    slots: list[str] = []
    reason: str | None = None


def _actor(who: Caller) -> str | None:
    return None if who.token is None else f"token:{who.token}"


@post("/v1/tokens", opt={"op": "token_create"}, status_code=201, sync_to_thread=True)
def create_token(request: Request[Any, Any, Any], data: JSONBody[TokenRequest]) -> IssuedToken:
    """Issue a token (admin). Its `secret` is in this response only: the store keeps
    its SHA-256 digest."""
    service: Service = request.app.state.service
    with service.use() as ledger:
        return ledger.issue_token(
            data.role, name=data.name, slots=data.slots, actor=_actor(caller(request)), reason=data.reason
        )


@get("/v1/tokens", opt={"op": "token_list"}, sync_to_thread=True)
def list_tokens(request: Request[Any, Any, Any]) -> list[Token]:
    """Every token ever issued, revoked ones included (admin); never a secret or digest."""
    service: Service = request.app.state.service
    with service.use() as ledger:
        return ledger.tokens()


@delete("/v1/tokens/{token:str}", opt={"op": "token_revoke"}, status_code=200, sync_to_thread=True)
def revoke_token(request: Request[Any, Any, Any], token: FromPath[str]) -> Token:
    """Revoke a token by its id (admin): refused by every server on the store from its
    next request on."""
    service: Service = request.app.state.service
    with service.use() as ledger:
        return ledger.revoke_token(token, actor=_actor(caller(request)))


ROUTES: list[Any] = [create_token, list_tokens, revoke_token]
