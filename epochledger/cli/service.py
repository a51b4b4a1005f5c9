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
)
def cmd_serve(ns: argparse.Namespace) -> int:
    """Serve the ledger over HTTP: every write and read of the Python API, with the same
    rules, typed errors (RFC 9457 problem documents) and the OpenAPI 3.1 document at
    /openapi/openapi.json (docs/service.md). The store must exist (`epochledger init`).
    SIGTERM stops accepting, lets requests in flight finish within the grace period and
    exits 0.

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
    bounds = {
        name: value
        for name, value in (
            ("max_streams", ns.max_streams),
            ("stream_stall_s", ns.stream_stall),
            ("heartbeat_s", ns.heartbeat),
        )
        if value is not None
    }
    for name, value in bounds.items():
        if not value > 0:
            flag = {"max_streams": "--max-streams", "stream_stall_s": "--stream-stall", "heartbeat_s": "--heartbeat"}
            raise InvalidInput(f"must be more than 0, got {value!r}", where=flag[name])
    config = ServiceConfig(store=ns.store, host=host, port=port, **bounds)
    err(f"epochledger: serving {ns.store or 'the default store'} on http://{ns.listen} (loopback only, no tokens)")
    run(config)
    return 0
