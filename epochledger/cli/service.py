"""The service's commands: `serve`, and `token create|list|revoke` (docs/service.md)."""

from __future__ import annotations

import argparse

from epochledger.cli.common import JSON, arg, cells_table, command, err, open_ns, out, out_json


@command(
    "serve",
    arg(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8750",
        help="address to serve on (default: 127.0.0.1:8750); an address other than loopback needs tokens (rule H4)",
    ),
    arg("--max-streams", type=int, metavar="N", default=None, help="live streams served at once (default: 64)"),
    arg(
        "--stream-stall",
        type=float,
        metavar="SECONDS",
        default=None,
        help="drop a live stream's client that reads nothing this long with events waiting (default: 10)",
    ),
    arg(
        "--heartbeat",
        type=float,
        metavar="SECONDS",
        default=None,
        help="an idle live stream sends a comment this often, for proxies (default: 15)",
    ),
    # The write path's bounds (rule H8): no default here; ServiceConfig's are their one
    # home (epochledger/service/config.py), listed in docs/service.md, "Bounds and shutdown".
    arg("--max-body-bytes", type=int, metavar="N", default=None, help="a larger request body is refused (413)"),
    arg("--max-batch", type=int, metavar="N", default=None, help="commands in one /v1/batch; more are refused (422)"),
    arg(
        "--request-timeout",
        type=float,
        metavar="SECONDS",
        default=None,
        help="a request waiting longer for the ledger is refused (503)",
    ),
    arg(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        default=None,
        help="a keep-alive connection idle this long is closed",
    ),
    arg(
        "--max-connections",
        type=int,
        metavar="N",
        default=None,
        help="open connections and requests; more are refused (503)",
    ),
    arg(
        "--grace",
        type=float,
        metavar="SECONDS",
        default=None,
        help="SIGTERM: requests in flight have this long to finish (0: none)",
    ),
)
def cmd_serve(ns: argparse.Namespace) -> int:
    """Serve the ledger over HTTP: every write and read of the Python API, with the same
    rules, typed errors (RFC 9457 problem documents) and the OpenAPI 3.1 document at
    /openapi/openapi.json (docs/service.md). The store must exist (`epochledger init`).
    Once a token exists (`epochledger token create`) every request needs one; a ledger
    without tokens serves loopback only, every local caller as admin. SIGTERM stops
    accepting, lets requests in flight finish within the grace period and exits 0. The
    bounds' defaults are listed in docs/service.md, "Bounds and shutdown".

    Example: epochledger --store sqlite:///runs.db serve
             epochledger --store postgresql://writer@db/ledger serve --listen 0.0.0.0:9000
    """
    from epochledger.ledger.errors import InvalidInput
    from epochledger.service.config import ServiceConfig
    from epochledger.service.serve import listen_address, open_service, run

    host, port = listen_address(ns.listen)
    bounds = {
        name: value
        for name, value in (
            ("max_streams", ns.max_streams),
            ("stream_stall_s", ns.stream_stall),
            ("heartbeat_s", ns.heartbeat),
            ("max_body_bytes", ns.max_body_bytes),
            ("max_batch", ns.max_batch),
            ("request_timeout_s", ns.request_timeout),
            ("idle_timeout_s", ns.idle_timeout),
            ("max_connections", ns.max_connections),
            ("grace_s", ns.grace),
        )
        if value is not None
    }
    flags = {
        "max_streams": "--max-streams",
        "stream_stall_s": "--stream-stall",
        "heartbeat_s": "--heartbeat",
        "max_body_bytes": "--max-body-bytes",
        "max_batch": "--max-batch",
        "request_timeout_s": "--request-timeout",
        "idle_timeout_s": "--idle-timeout",
        "max_connections": "--max-connections",
        "grace_s": "--grace",
    }
    for name, value in bounds.items():
        if not (value >= 0 if name == "grace_s" else value > 0):
            raise InvalidInput(f"must be more than 0, got {value!r}", where=flags[name])
    config = ServiceConfig(store=ns.store, host=host, port=port, **bounds)
    service = open_service(config)
    tokens = service.tokens_issued
    where = ns.store or "the default store"
    if tokens:
        err(f"epochledger: serving {where} on http://{ns.listen} ({tokens} tokens issued: every request needs one)")
    else:
        err(
            f"epochledger: serving {where} on http://{ns.listen} (loopback only, no tokens: every local caller is admin)"
        )
    run(config, service=service)
    return 0


@command(
    "token create",
    arg("role", help="reader, writer, operator, auditor or admin (docs/service.md, 'Tokens and roles')"),
    arg("--name", default=None, help="what the token is for, e.g. rust-tick or alice (shown by `token list`)"),
    arg(
        "--slot",
        dest="slots",
        action="append",
        default=[],
        metavar="SLOT",
        help="a writer token's process slot, a name or an fnmatch pattern (api-*); repeat for more; none: every slot",
    ),
    arg("--actor", default=None, help="who issues it (kept on the token.issued event)"),
    arg("--reason", default=None, help="why (kept on the token.issued event)"),
    JSON,
)
def cmd_token_create(ns: argparse.Namespace) -> None:
    """Issue a bearer token for the HTTP service and print it, this once: the store keeps
    only its SHA-256 digest, so a lost token is revoked and issued again, never shown
    again. A writer token bound with --slot boots, reports, exits and sweeps only for
    those slots (rule H4).

    Example: epochledger --store sqlite:///runs.db token create writer --name rust-tick --slot 'tick-*'
    """
    with open_ns(ns) as ledger:
        issued = ledger.issue_token(ns.role, name=ns.name, slots=ns.slots, actor=ns.actor, reason=ns.reason)
    if ns.json:
        out_json(issued)
        return
    out(issued.secret)
    t = issued.token
    bound = f", slots {', '.join(t.slots)}" if t.slots else ""
    err(f"token {t.id}: {t.role}{bound}. Keep it now: it is not stored and cannot be shown again.")


@command("token list", JSON)
def cmd_token_list(ns: argparse.Namespace) -> None:
    """List every token ever issued, revoked ones included: id, name, role, slots, who
    issued and revoked it and when. Never a token itself (the store does not hold it).

    Example: epochledger --store sqlite:///runs.db token list
    """
    with open_ns(ns) as ledger:
        found = ledger.tokens()
    if ns.json:
        out_json(found)
        return
    cells_table(
        [
            (
                t.id,
                t.name or "",
                t.role,
                ",".join(t.slots),
                t.issued_at.isoformat(),
                t.revoked_at.isoformat() if t.revoked_at is not None else "",
            )
            for t in found
        ],
        ("id", "name", "role", "slots", "issued_at", "revoked_at"),
    )


@command(
    "token revoke",
    arg("id", help="the token's id, as `token list` shows it"),
    arg("--actor", default=None, help="who revokes it (kept on the token.revoked event)"),
    arg("--reason", default=None, help="why (kept on the token.revoked event)"),
    JSON,
)
def cmd_token_revoke(ns: argparse.Namespace) -> None:
    """Revoke a token: every server on this store refuses it from its next request on
    (rule H4). Revoking a revoked token changes nothing.

    Example: epochledger --store sqlite:///runs.db token revoke 3f9c2a7b1d04e6a8 --reason 'laptop lost'
    """
    with open_ns(ns) as ledger:
        token = ledger.revoke_token(ns.id, actor=ns.actor, reason=ns.reason)
    if ns.json:
        out_json(token)
    else:
        out(f"token {token.id} ({token.role}) revoked at {token.revoked_at.isoformat() if token.revoked_at else '?'}")
