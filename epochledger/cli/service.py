"""The service's commands: `serve` (docs/service.md)."""

from __future__ import annotations

import argparse

from epochledger.cli.common import arg, command, err


@command(
    "serve",
    arg(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8750",
        help="address to serve on (default: 127.0.0.1:8750); an address other than loopback needs tokens (rule H4)",
    ),
    # The bounds (rule H8): no default here; ServiceConfig's are their one home
    # (epochledger/service/config.py), listed in docs/service.md, "Bounds and shutdown".
    arg("--max-body-bytes", type=int, help="a larger request body is refused (413)"),
    arg("--max-batch", type=int, help="commands in one /v1/batch; more are refused (422)"),
    arg(
        "--request-timeout",
        type=float,
        metavar="SECONDS",
        help="a request waiting longer for the ledger is refused (503)",
    ),
    arg("--idle-timeout", type=float, metavar="SECONDS", help="a keep-alive connection idle this long is closed"),
    arg("--max-connections", type=int, help="open connections and requests; more are refused (503)"),
    arg("--grace", type=float, metavar="SECONDS", help="SIGTERM: requests in flight have this long to finish"),
)
def cmd_serve(ns: argparse.Namespace) -> int:
    """Serve the ledger over HTTP: every write and read of the Python API, with the same
    rules, typed errors (RFC 9457 problem documents) and the OpenAPI 3.1 document at
    /openapi/openapi.json (docs/service.md). The store must exist (`epochledger init`).
    SIGTERM stops accepting, lets requests in flight finish within the grace period and
    exits 0. The bounds' defaults are listed in docs/service.md, "Bounds and shutdown".

    Example: epochledger --store sqlite:///runs.db serve
             epochledger --store postgresql://writer@db/ledger serve --listen 127.0.0.1:9000
    """
    from epochledger.service.config import ServiceConfig
    from epochledger.service.serve import is_loopback, listen_address, run
    from ledger.errors import InvalidInput

    host, port = listen_address(ns.listen)
    if not is_loopback(host):
        raise InvalidInput(
            f"{host} is not a loopback address: a ledger without tokens serves loopback only (rule H4)",
            where="--listen",
        )
    given = {
        "max_body_bytes": ns.max_body_bytes,
        "max_batch": ns.max_batch,
        "request_timeout_s": ns.request_timeout,
        "idle_timeout_s": ns.idle_timeout,
        "max_connections": ns.max_connections,
        "grace_s": ns.grace,
    }
    config = ServiceConfig.checked(
        store=ns.store, host=host, port=port, **{k: v for k, v in given.items() if v is not None}
    )
    err(f"epochledger: serving {ns.store or 'the default store'} on http://{ns.listen} (loopback only, no tokens)")
    run(config)
    return 0
