"""The server process (rule H8): uvicorn over the application, bounded, stopped cleanly.

SIGTERM (and SIGINT) stop accepting connections; requests in flight have the grace
period to finish, then the process exits 0. A write is one transaction, so a request cut
short by the grace period landed whole or not at all (rule H8: nothing half-applied).
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import socket
from collections.abc import Iterator

from epochledger.service.config import ServiceConfig
from ledger.errors import InvalidInput


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


def run(config: ServiceConfig) -> None:
    """Serve until SIGTERM or SIGINT, then drain and return."""
    import uvicorn

    from epochledger.service.app import create_app

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises the signal once it has drained, so the process would die
            # of SIGTERM (exit -15); a drained server's stop is the clean exit of rule H8.
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

    app = create_app(config)
    server = Server(
        uvicorn.Config(
            app,
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
