"""The server process (rule H8): uvicorn over the application, bounded, stopped cleanly.

SIGTERM (and SIGINT) stop accepting connections; requests in flight have the grace
period to finish, then the process exits 0. A write is one transaction, so a request cut
short by the grace period landed whole or not at all (rule H8: nothing half-applied).
"""

from __future__ import annotations

import ipaddress
import math
import signal
import socket
from types import FrameType
from typing import TYPE_CHECKING

from epochledger.ledger.errors import InvalidInput
from epochledger.service.config import ServiceConfig

if TYPE_CHECKING:
    from litestar import Litestar

    from epochledger.service.app import Service


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def listen_address(text: str) -> tuple[str, int]:
    """HOST:PORT (or [V6]:PORT) as `--listen` takes it; InvalidInput naming it otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise InvalidInput(f"expected HOST:PORT, e.g. 127.0.0.1:8750: {text!r}", where="--listen")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(f"the port must be 1-65535: {port!r}", where="--listen")
    return host, int(port)


def open_service(config: ServiceConfig) -> Service:
    """The server's ledger, opened for `config` and held to the loopback rule (rule H4):
    a ledger without tokens is served on loopback only, so an address other than
    loopback is refused (InvalidInput naming --listen) until a token exists."""
    from epochledger.service.app import Service

    service = Service(config)
    if not service.tokens_issued and not is_loopback(config.host):
        service.close()
        raise InvalidInput(
            f"{config.host} is not a loopback address: a ledger without tokens serves loopback only; "
            "create one with `epochledger token create ROLE` (rule H4)",
            where="--listen",
        )
    return service


def run(config: ServiceConfig, *, service: Service | None = None, app: Litestar | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then drain and return. `service`: the ledger the
    caller opened already (`serve` opens it with `open_service`); `app`: an application built
    already (a test's, with routes of its own)."""
    import uvicorn

    from epochledger.service.app import create_app

    served = app if app is not None else create_app(config, service=service)
    live = served.state["live"]

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM:  # a stop asked for: drained, then exit 0 (rule H8), not the signal raised again
                self._captured_signals.remove(sig)
            live.drain()  # live streams end now, with their final event (rule H5)

    server = Server(
        uvicorn.Config(
            served,
            host=config.host,
            port=config.port,
            lifespan="on",
            log_level="warning",
            access_log=False,  # a request line may carry a token in a query; nothing of it is logged (rule H4)
            limit_concurrency=config.max_connections,
            timeout_keep_alive=math.ceil(config.idle_timeout_s),  # uvicorn takes whole seconds
            timeout_graceful_shutdown=math.ceil(config.grace_s),
            server_header=False,
        )
    )
    server.run()
