"""Ledger errors as RFC 9457 problem documents (rule H2): one table, one encoder.

The most specific class of an error decides (its MRO is walked, as the command line's
EXIT_CODES does), so StaleEpoch (an IllegalTransition) has its own type and status. A
document is `application/problem+json`:

    {"type": "urn:epochledger:problem:illegal-transition", "title": "illegal transition",
     "status": 409, "detail": "<the error's message>", "error": "IllegalTransition",
     "fields": {"run": ..., "status": ..., "attempted": ...}}

`fields` are the error's own structured fields, as `epochledger --json` prints them
(epochledger/plain.py). A `type` is a URN: stable, and never a link that could go dead.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec

from epochledger.ledger import errors as e
from epochledger.plain import error_fields, plain

MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_S = 1  # a store that is down: try again after this many seconds

# (class, HTTP status, type slug, title): every class of ledger/errors.py (a test checks).
TABLE: tuple[tuple[type[e.LedgerError], int, str, str], ...] = (
    (e.LedgerError, 500, "ledger-error", "ledger error"),
    (e.InvalidInput, 422, "invalid-input", "invalid input"),
    (e.NoSuchStore, 503, "no-such-store", "the store does not exist (no file, table or schema): nothing was created"),
    (e.BadPolicy, 422, "bad-policy", "unknown what-if policy or a bad argument to one"),
    (e.ImportRejected, 422, "import-rejected", "an import line was rejected; nothing was appended"),
    (e.ForeignRunRejected, 422, "foreign-run-rejected", "a foreign run was refused"),
    (e.UnknownEpoch, 422, "unknown-epoch", "no slot booted this epoch"),
    (e.UnknownSlot, 422, "unknown-slot", "no such process slot"),
    (e.EpochNotLive, 422, "epoch-not-live", "the epoch is not live"),
    (e.QueryRefused, 422, "query-refused", "audit query refused"),
    (e.QueryInterrupted, 422, "query-interrupted", "audit query stopped by its time or memory bound"),
    (e.RunNotFound, 404, "run-not-found", "run not found"),
    (e.TokenNotFound, 404, "token-not-found", "no such token"),
    (e.IllegalTransition, 409, "illegal-transition", "illegal transition"),
    (e.StaleEpoch, 409, "stale-epoch", "stale epoch: the report was refused and kept as run.fenced evidence"),
    (e.ConflictError, 409, "conflict", "write conflict: another writer appended first; nothing was appended"),
    (e.RoleHeld, 409, "role-held", "the role is held by another holder"),
    (e.StoreError, 503, "store-unavailable", "store unavailable"),
    (e.ReadOnlyStore, 503, "read-only-store", "the store is read-only"),
    (e.DiskFull, 507, "disk-full", "the store's disk is full"),
    (e.NotCommitted, 503, "not-committed", "the write was not committed; nothing was appended: retry it"),
    (e.LockTimeout, 503, "lock-timeout", "the write waited too long for the writer lock; nothing was appended"),
    (e.StatementTimeout, 503, "statement-timeout", "the store stopped the statement; nothing was appended"),
    (e.CommitUnknown, 503, "commit-unknown", "commit outcome unknown: check the named streams before retrying"),
    (e.PermissionDenied, 503, "store-permission-denied", "the store refused a privilege"),
    (e.SweepFailed, 503, "sweep-failed", "the sweep gave up"),
    (e.DamagedLog, 500, "damaged-log", "the log is damaged"),
    (e.DecodeError, 500, "undecodable-event", "an event does not decode"),
    (e.StreamGap, 500, "stream-gap", "a stream has a gap"),
    (e.DamagedRuns, 500, "damaged-runs", "runs with damaged streams"),
    (e.ViewMismatch, 500, "view-mismatch", "a live view differs from its replay from zero"),
    (e.ChainBroken, 500, "chain-broken", "hash chain failure"),
)
_BY_CLASS = {cls: (status, slug, title) for cls, status, slug, title in TABLE}
# A retry helps only where the store was away and nothing was written (rule H3):
# an unknown commit is checked first, never retried blind.
_RETRY = (e.StoreError,)
_NO_RETRY = (e.CommitUnknown, e.DiskFull, e.PermissionDenied, e.ReadOnlyStore)


def type_uri(slug: str) -> str:
    return f"urn:epochledger:problem:{slug}"


def classify(error: e.LedgerError) -> tuple[int, str, str]:
    """(status, type slug, title) of a ledger error: its most specific class in TABLE."""
    for cls in type(error).__mro__:
        if cls in _BY_CLASS:
            return _BY_CLASS[cls]
    raise AssertionError("unreachable: LedgerError is in TABLE")  # pragma: no cover


def document(status: int, slug: str, title: str, detail: str, **extra: Any) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {"type": type_uri(slug), "title": title, "status": status, "detail": plain(detail)}
    retry = extra.pop("retry_after", None)
    body.update(extra)
    headers = {"Retry-After": str(retry)} if retry is not None else {}
    return Response(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def ledger_error(request: Request[Any, Any, Any], error: e.LedgerError) -> Response[dict[str, Any]]:
    status, slug, title = classify(error)
    if isinstance(error, e.NoSuchStore):
        # Its message and fields name the server's store URL, which may hold a password:
        # a client is told that the store is missing, never where it is.
        return document(status, slug, title, title, error=type(error).__name__, fields={})
    extra: dict[str, Any] = {"error": type(error).__name__, "fields": error_fields(error)}
    if isinstance(error, _RETRY) and not isinstance(error, _NO_RETRY):
        extra["retry_after"] = RETRY_AFTER_S
    return document(status, slug, title, str(error), **extra)


class AccessRefused(Exception):
    """A caller the guard refused (rule H4, epochledger/service/auth.py): 401 without a
    valid token (with `WWW-Authenticate: Bearer`), 403 out of role or out of its slots.
    `fields` name the operation, the caller's role, the roles that may, the slot; never
    the token, nor any part of the Authorization header."""

    SLUGS = {401: ("unauthorized", "a bearer token is required"), 403: ("forbidden", "not allowed for this token")}
    # A form's own refusal (rule H10), not the guard's: a type of its own, so a client (and
    # the H4 matrix) tells "reload the form" from "this token may not".
    CSRF = ("csrf-refused", "the form's CSRF token is missing or stale")

    def __init__(self, status: int, detail: str, *, kind: tuple[str, str] | None = None, **fields: Any):
        self.status = status
        self.detail = detail
        self.kind = kind
        self.fields = fields
        super().__init__(detail)


def access_refused(request: Request[Any, Any, Any], error: AccessRefused) -> Response[dict[str, Any]]:
    slug, title = error.kind or AccessRefused.SLUGS[error.status]
    response = document(error.status, slug, title, error.detail, error="AccessRefused", fields=error.fields)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="epochledger"'
    return response


def validation_error(request: Request[Any, Any, Any], error: ValidationException) -> Response[dict[str, Any]]:
    """A body or parameter Litestar's msgspec decoding refused: 422, naming where."""
    where = [plain(x) for x in (error.extra if isinstance(error.extra, list) else [])]
    return document(422, "invalid-input", "invalid input", error.detail, error="InvalidInput", fields={"errors": where})


def http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[dict[str, Any]]:
    """Litestar's own refusals (404 route, 405, 413, 401, 403, ...) in the same shape."""
    slug = {
        400: "bad-request",
        401: "unauthorized",
        403: "forbidden",
        404: "not-found",
        405: "method-not-allowed",
        413: "too-large",
    }
    status = error.status_code
    return document(
        status,
        slug.get(status, f"http-{status}"),
        error.detail if status < 500 else "server error",
        error.detail,
        **({"retry_after": RETRY_AFTER_S} if status == 503 else {}),
    )


HANDLERS: dict[int | type[Exception], Any] = {
    e.LedgerError: ledger_error,
    AccessRefused: access_refused,
    ValidationException: validation_error,
    HTTPException: http_error,
}


class Problem(msgspec.Struct, kw_only=True):
    """An RFC 9457 problem document as this service sends it (the OpenAPI document's
    schema of every error answer)."""

    type: str
    title: str
    status: int
    detail: str
    error: str | None = None  # the ledger error's class, e.g. "IllegalTransition"
    fields: dict[str, Any] | None = None  # the error's own fields, as `epochledger --json` prints them


# What any route may answer besides its success (the document says so for every route,
# so a client or schemathesis knows the shape of each error).
_ANSWERS = {
    400: "malformed request (a body that is not JSON)",
    401: "no token, or an unknown or revoked one (rule H4)",
    403: "the token's role or slots do not allow this (rule H4)",
    404: "no such run, epoch or route",
    409: "illegal transition, stale epoch, lost race or a held role",
    413: "the body is larger than the bound (rule H8)",
    422: "invalid input: the field or parameter is named",
    500: "the log is damaged (an event does not decode, a stream has a gap, a chain break)",
    503: "the store is unreachable or the write was not committed (Retry-After), or its outcome is unknown",
    507: "the store's disk is full",
}
RESPONSES: dict[int, ResponseSpec] = {
    status: ResponseSpec(data_container=Problem, description=text, media_type=MEDIA_TYPE, generate_examples=False)
    for status, text in _ANSWERS.items()
}


def document_routes(handlers: list[Any]) -> None:
    """Give every route the problem answers (RESPONSES) beside its own, before the
    application is built (Litestar documents them from `responses`)."""
    for handler in handlers:
        if isinstance(handler, HTTPRouteHandler):
            handler.responses = {**RESPONSES, **(handler.responses or {})}
