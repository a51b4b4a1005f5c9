"""A real `epochledger serve` process on loopback, for the service's tests (rule H1:
tested as users run it, over HTTP, never in-process only).

    with served(url) as base:            # the store at `url` must exist (init)
        httpx.post(f"{base}/v1/runs/r1/queue", json={...})

The server is a child process on a free port; leaving the block sends SIGTERM and waits
for its exit (rule H8: it exits 0), and a server that died is reported with its stderr.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A running server: its base URL and its process."""

    def __init__(self, base: str, process: subprocess.Popen[bytes]) -> None:
        self.base = base
        self.process = process

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then its exit code (rule H8)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


def start(
    store: str, *, args: Sequence[str] = (), env: dict[str, str] | None = None, ready_timeout: float = 30
) -> Served:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "epochledger", "--store", store, "serve", "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_timeout
    while True:
        if process.poll() is not None:
            out, errs = process.communicate()
            raise AssertionError(f"serve exited {process.returncode}: {errs.decode(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Served(base, process)
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"serve did not listen on {base} within {ready_timeout}s") from None
            time.sleep(0.05)


@contextmanager
def served(store: str, *, args: Sequence[str] = (), env: dict[str, str] | None = None) -> Iterator[str]:
    server = start(store, args=args, env=env)
    try:
        yield server.base
    finally:
        if server.process.poll() is None:
            server.stop()
        else:
            server.process.wait()
