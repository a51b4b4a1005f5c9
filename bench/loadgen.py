"""A lean HTTP/1.1 load generator for bench.http: raw sockets, keep-alive, one OS
process per client.

Why not httpx: its client cost more CPU per request than the server it measured (0.65
against 0.59 ms, docs/benchmarks.md, "The service over HTTP"), and its eight clients
shared one process's interpreter lock, so the bench measured its own clients as much as
the server. Here each client is a process of its own that sends hand-written request
bytes and reads only what it must of the answer: the status line and Content-Length
(the service answers every write with a Content-Length body, never chunked).

Two loads, each bounded in requests and in time (a client that is not done by its
deadline stops and says so; the bench then fails, never waits without end):

- closed loop (`closed`): each client sends its next request when the last answer came;
- open loop (`paced`): request k is due at start + k/rate, client k mod N sends it, and
  its latency runs from that due time, not from the send: a server that stalls makes
  the late requests' latency long, rather than sending fewer of them (coordinated
  omission is not hidden).

Loopback only: a generator meant to saturate a server never points at another host.
"""

from __future__ import annotations

import ipaddress
import multiprocessing
import socket
import time
import uuid
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlsplit

MAX_CLIENTS = 64
MAX_REQUESTS = 1_000_000
MAX_SECONDS = 600.0
BODY = b'{"workflow":"nightly"}'


def _loopback(base: str) -> tuple[str, int]:
    """(host, port) of `base`, refused unless it is a loopback address."""
    parts = urlsplit(base)
    host, port = parts.hostname or "", parts.port
    if parts.scheme != "http" or port is None or not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the load generator sends to a loopback http://IP:PORT only, not {base!r}")
    return host, port


def _request(host: str, port: int, path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY


class _Conn:
    """One keep-alive connection: send a request, read one answer's status."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def call(self, request: bytes) -> int:
        self.sock.sendall(request)
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._more()
        head, self.buf = self.buf[:end], self.buf[end + 4 :]
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = next(
            (int(v) for k, _, v in (h.partition(b":") for h in lines[1:]) if k.lower() == b"content-length"), -1
        )
        if length < 0:
            raise RuntimeError(f"an answer without Content-Length: {head!r}")
        while len(self.buf) < length:
            self._more()
        self.buf = self.buf[length:]
        return status

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def _client(
    host: str, port: int, paths: list[str], due: list[float] | None, start: Any, deadline: float, out: Connection
) -> None:
    """One client process: connect, wait for the others (`start`, a barrier), send
    `paths` in turn (each when `due`, if paced), send back (latencies, CPU seconds,
    first send, last answer, error or None)."""
    latencies: list[float] = []
    error = None
    conn = None
    try:
        conn = _Conn(host, port, timeout=max(1.0, deadline - time.monotonic()))
        start.wait()
        cpu0, t_first = time.process_time(), time.monotonic()
        for i, path in enumerate(paths):
            now = time.monotonic()
            if now > deadline:
                error = f"deadline passed after {i} of {len(paths)} requests"
                break
            if due is not None and due[i] > now:
                time.sleep(due[i] - now)
            t0 = time.monotonic()
            status = conn.call(_request(host, port, path))
            # Open loop: from the due time (a send made late by a slow answer counts its wait).
            latencies.append(time.monotonic() - (max(t0, due[i]) if due is not None else t0))
            if status != 200:
                error = f"{path}: HTTP {status}"
                break
        t_last = time.monotonic()
        out.send((latencies, time.process_time() - cpu0, t_first, t_last, error))
    except Exception as e:  # told to the parent, which fails the bench with it
        out.send(([], 0.0, 0.0, 0.0, f"{type(e).__name__}: {e}"))
    finally:
        if conn is not None:
            conn.close()
        out.close()


class Load:
    """What a load measured: every request's latency (seconds), the clients' CPU
    seconds in all, and the wall time from the first send to the last answer."""

    def __init__(self, latencies: list[float], cpu_s: float, wall_s: float) -> None:
        self.latencies = latencies
        self.cpu_s = cpu_s
        self.wall_s = wall_s


def _run(base: str, per_client: list[list[str]], due: list[list[float]] | None, seconds: float) -> Load:
    host, port = _loopback(base)
    n = len(per_client)
    if not 1 <= n <= MAX_CLIENTS or sum(map(len, per_client)) > MAX_REQUESTS or not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"at most {MAX_CLIENTS} clients, {MAX_REQUESTS} requests and {MAX_SECONDS:g} s")
    ctx = multiprocessing.get_context("fork")  # the bench's own code, already imported: no re-import per client
    start = ctx.Barrier(n, timeout=30)  # a client that never connects fails the others too
    deadline = time.monotonic() + seconds
    procs, pipes = [], []
    for c in range(n):
        mine, theirs = ctx.Pipe(duplex=False)
        p = ctx.Process(
            target=_client,
            args=(host, port, per_client[c], due[c] if due else None, start, deadline, theirs),
            daemon=True,
        )
        p.start()
        theirs.close()
        procs.append(p)
        pipes.append(mine)
    results = []
    try:
        for pipe in pipes:
            if not pipe.poll(max(0.0, deadline - time.monotonic()) + 5):
                raise RuntimeError("a client sent nothing by its deadline")
            results.append(pipe.recv())
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    errors = [r[4] for r in results if r[4]]
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} clients failed: {errors[0]}")
    latencies = [x for r in results for x in r[0]]
    return Load(latencies, sum(r[1] for r in results), max(r[3] for r in results) - min(r[2] for r in results))


def closed(base: str, clients: int, per_client: int, seconds: float = 120.0) -> Load:
    """`clients` processes, each sending `per_client` writes back to back on one
    keep-alive connection, all starting together."""
    tag = uuid.uuid4().hex[:6]
    paths = [[f"/v1/runs/l{tag}-{c}-{i}/queue" for i in range(per_client)] for c in range(clients)]
    return _run(base, paths, None, seconds)


def paced(base: str, clients: int, rate: float, seconds: float) -> Load:
    """Open loop: `rate` writes a second for `seconds`, request k due at k/rate after a
    start shortly ahead (the processes are running by then), client k mod `clients`
    sending it."""
    tag = uuid.uuid4().hex[:6]
    total = int(rate * seconds)
    start = time.monotonic() + 0.5 + 0.05 * clients  # past the forks and the connects
    paths = [[f"/v1/runs/q{tag}-{k}/queue" for k in range(c, total, clients)] for c in range(clients)]
    due = [[start + k / rate for k in range(c, total, clients)] for c in range(clients)]
    return _run(base, paths, due, seconds + 60)
