"""A TCP proxy between psycopg and the PostgreSQL server, for faults that only a real
network produces: a connection cut just before or just after the server committed, a
server that stops answering, a port that refuses. Test helper; no mocks: the server
really commits (or not), and the client really loses its socket.

It reads the PostgreSQL wire protocol only as far as it needs to find a COMMIT in the
client's stream (a simple Query 'Q' or an extended Parse 'P' whose text is COMMIT, or
ends with one).
Use it with `sslmode=disable` so the stream is readable.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Literal

Cut = Literal["before_commit", "after_commit"]


def _is_commit(kind: bytes, body: bytes) -> bool:
    if kind == b"Q":
        text = body.rstrip(b"\x00")
    elif kind == b"P":  # name\0 query\0 ...
        parts = body.split(b"\x00", 2)
        text = parts[1] if len(parts) > 1 else b""
    else:
        return False
    text = text.strip().rstrip(b";").strip().upper()
    return text == b"COMMIT" or text.endswith(b"; COMMIT")  # the append sends its chain row with it (rule S1)


class _Pair:
    def __init__(self, proxy: Proxy, client: socket.socket):
        self.proxy = proxy
        self.client = client
        self.server = socket.create_connection(proxy.target)
        self.closed = False
        self.commit_seen = threading.Event()
        self.cut: Cut | None = None
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def close(self, reset: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        for s in (self.client, self.server):
            try:
                # shutdown wakes the other relay thread, blocked in recv() on this
                # socket (close alone would not, and the socket would stay open).
                if reset:  # RST, as a crashed peer or a dropped NAT entry
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RD)
                else:
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def _recv_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.client.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _up(self) -> None:
        """Client -> server, message by message."""
        try:
            # Untyped start-up messages: an SSL/GSS request (8 bytes) and the startup packet.
            while True:
                head = self._recv_exact(4)
                body = self._recv_exact(struct.unpack("!i", head)[0] - 4)
                self._send_up(head + body)
                if len(body) == 4 and struct.unpack("!i", body)[0] in (80877103, 80877104):
                    continue  # the server answers one byte; the startup packet follows
                break
            while not self.closed:
                head = self._recv_exact(5)
                body = self._recv_exact(struct.unpack("!i", head[1:])[0] - 4)
                if _is_commit(head[:1], body):
                    cut = self.proxy._take_cut()
                    if cut == "before_commit":
                        self.proxy.cuts_done += 1
                        if self.proxy._then_refuse:
                            self.proxy.refuse()
                        self.close()
                        return
                    self.cut = cut
                    self.commit_seen.set()
                self._send_up(head + body)
        except (EOFError, OSError):
            self.close(reset=False)

    def _send_up(self, data: bytes) -> None:
        while self.proxy.mode == "blackhole" and not self.closed:
            self.proxy._resumed.wait(0.05)
        self.server.sendall(data)

    def _down(self) -> None:
        """Server -> client, bytes as they come."""
        try:
            while not self.closed:
                data = self.server.recv(65536)
                if not data:
                    raise EOFError
                if self.cut == "after_commit" and self.commit_seen.is_set():
                    # The server has answered the COMMIT: it committed. Drop the answer.
                    self.proxy.cuts_done += 1
                    if self.proxy._then_refuse:
                        self.proxy.refuse()  # before the client can reconnect to check
                    self.close()
                    return
                while self.proxy.mode == "blackhole" and not self.closed:
                    self.proxy._resumed.wait(0.05)
                self.client.sendall(data)
        except (EOFError, OSError):
            self.close(reset=False)


class Proxy:
    """`url(schema)` points psycopg at the proxy. Modes: forward (default); blackhole
    (accepts, never answers, relays nothing); refuse (port closed, live connections
    reset). `arm(cut)` cuts the next COMMIT that passes, before or after the server
    ran it."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)):
        self.target = target
        self.mode: Literal["forward", "blackhole", "refuse"] = "forward"
        self._resumed = threading.Event()
        self._resumed.set()
        self._cut: Cut | None = None
        self._lock = threading.Lock()
        self.pairs: list[_Pair] = []
        self.cuts_done = 0
        self._listen()
        self.port = self._listener.getsockname()[1]

    def _listen(self, port: int = 0) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(64)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self.mode == "blackhole":
                self._held = getattr(self, "_held", [])
                self._held.append(client)  # keep it open, never read it
                continue
            try:
                pair = _Pair(self, client)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.pairs.append(pair)

    def url(self, base_url: str) -> str:
        """`base_url` (postgresql://user@127.0.0.1:5432/db?...) re-pointed at the proxy."""
        rest = base_url.split("://", 1)[1]
        user, hostpath = rest.split("@", 1)
        path = hostpath.split("/", 1)[1]
        sep = "&" if "?" in path else "?"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{path}{sep}sslmode=disable&gssencmode=disable"

    _then_refuse = False

    def arm(self, cut: Cut, *, then_refuse: bool = False) -> None:
        """Cut the next COMMIT. then_refuse: and close the port at that moment, so the
        client cannot reconnect to check what happened (until `forward()`)."""
        with self._lock:
            self._cut = cut
            self._then_refuse = then_refuse

    def _take_cut(self) -> Cut | None:
        with self._lock:
            cut, self._cut = self._cut, None
            return cut

    def reset_all(self) -> None:
        with self._lock:
            pairs, self.pairs = self.pairs, []
        for p in pairs:
            p.close()

    def blackhole(self, *, reset: bool = True) -> None:
        """Stop answering: new connections are accepted and never served (a listening
        socket that never answers). Live connections are reset first (the server went
        away), or with reset=False kept and frozen: they relay nothing more."""
        self._resumed.clear()
        self.mode = "blackhole"
        if reset:
            self.reset_all()

    def refuse(self) -> None:
        """Close the port (new connections are refused) and reset live connections."""
        self.mode = "refuse"
        self._close_listener()
        self.reset_all()

    def _close_listener(self) -> None:
        try:  # shutdown wakes the thread blocked in accept(); close alone would not
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()

    def forward(self) -> None:
        if self.mode == "refuse":
            self._listen(self.port)
        self.mode = "forward"
        self._resumed.set()

    def close(self) -> None:
        self._resumed.set()
        self._close_listener()
        self.reset_all()
        for s in getattr(self, "_held", []):
            s.close()
