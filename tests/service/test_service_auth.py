"""Who may do what over HTTP (rule H4), against real server processes: every served
route with every role, a writer bound to another slot, the operator's acts, 401 and
403 as problem documents, tokens never echoed nor logged, `serve`'s loopback rule, and
a token revoked on one server refused at once by another on the same PostgreSQL store
(rule H6).

The matrix enumerates the application's own route handlers (the service's, and the
few of tests/helpers/auth_app.py that stand in for routes acting for a slot or an epoch), never
a hand list: a route added later is in it the day it is served.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from epochledger.app import Ledger, open_ledger
from epochledger.ledger import access
from epochledger.service.app import create_app
from epochledger.service.config import ServiceConfig
from tests.helpers import auth_app
from tests.helpers.server import free_port, served

ROLES = list(access.ROLES)
OTHER_SLOT = "other-1"
OWN_SLOT = "mine-1"


def _routes(app: Any) -> list[tuple[str, str, str | None]]:
    """(method, path, op) of every route handler the application serves, Litestar's own
    automatic OPTIONS answers apart (they declare nothing and the guard refuses them)."""
    found = []
    for route in app.routes:
        for handler in route.route_handlers:
            methods = sorted(getattr(handler, "http_methods", ()) or ())
            if methods == ["OPTIONS"] and "op" not in handler.opt:
                continue
            for method in methods:
                found.append((method, route.path, handler.opt.get("op")))
    return sorted(set(found), key=lambda r: (r[1], r[0]))


def _concrete(path: str) -> str:
    """A request path for a route path: every parameter given a harmless value."""
    return re.sub(r"\{[^}:]+(:[^}]+)?\}", "matrix-x", path)


def _call(client: httpx.Client, method: str, path: str, headers: dict[str, str]) -> tuple[httpx.Response, str]:
    """One request of the matrix and the text it answered. A stream admitted (rule H5)
    never ends by itself: its status and headers, and its first frame, are its answer,
    and the connection is closed then (the server ends the stream on the disconnect)."""
    body = {} if method != "GET" else None
    with client.stream(method, path, headers=headers, json=body) as r:
        if r.status_code == 200 and r.headers.get("content-type", "").startswith("text/event-stream"):
            return r, next(r.iter_text())
        r.read()
        return r, r.text


class Tokens:
    def __init__(self, url: str):
        with open_ledger(url, create=True) as lg:
            self.by_role = {role: lg.issue_token(role, name=f"test-{role}").secret for role in ROLES}
            bound = lg.issue_token("writer", name="bound", slots=["mine-*"])
            self.bound = bound.secret
            revoked = lg.issue_token("admin", name="revoked")
            lg.revoke_token(revoked.token.id)
            self.revoked = revoked.secret
            self.all = [*self.by_role.values(), self.bound, self.revoked]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def tokens(sqlite_url: str) -> Tokens:
    return Tokens(sqlite_url)


@pytest.fixture
def server(sqlite_url: str, tokens: Tokens) -> Iterator[auth_app.Served]:
    """A server of its own, for a test that stops it to read what it logged."""
    with auth_app.served(sqlite_url) as s:
        yield s


@pytest.fixture(scope="module")
def shared_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('auth') / 'ledger.db'}"


@pytest.fixture(scope="module")
def shared_tokens(shared_url: str) -> Tokens:
    return Tokens(shared_url)


@pytest.fixture(scope="module")
def shared(shared_url: str, shared_tokens: Tokens) -> Iterator[auth_app.Served]:
    """One server for the tests that only talk to it (each on runs and slots of its own)."""
    with auth_app.served(shared_url) as s:
        yield s


def _secrets_absent(text: str, tokens: Tokens) -> None:
    for secret in tokens.all:
        assert secret not in text
        assert secret.split(".")[2] not in text


def test_H4_every_served_route_declares_an_operation_of_the_table(sqlite_url: str) -> None:
    """The service's own routes (create_app): each declares `opt={"op": ...}` and the
    operation is one the access table knows, so none is refused by accident, nor served
    to a role by accident."""
    with open_ledger(sqlite_url, create=True):
        pass
    app = create_app(ServiceConfig(store=sqlite_url))
    try:
        routes = _routes(app)
        assert routes, "the application serves no route"
        missing = [(m, p, op) for m, p, op in routes if op not in access.OPERATIONS]
        assert not missing, f"routes whose op is not in ledger/access.py: {missing}"
        assert {"token_create", "token_list", "token_revoke", "openapi"} <= {op for _, _, op in routes}
    finally:
        app.state.service.close()


def test_H4_the_matrix_every_route_with_every_role_and_none(sqlite_url: str, tokens: Tokens, server: Any) -> None:
    """Every route x (no token, each role, a revoked token): a route whose operation the
    role may call is never refused (401/403), any other is 403 naming the operation and
    the roles that may; without a token 401; an operation outside the table, or none,
    is refused to every role, admin included."""
    app = auth_app.app_for(sqlite_url)
    try:
        routes = _routes(app)
    finally:
        app.state.service.close()
    assert ("GET", "/test/undeclared", "not_in_the_table") in routes
    callers: list[tuple[str | None, dict[str, str]]] = [(None, {})]
    callers += [(role, bearer(secret)) for role, secret in tokens.by_role.items()]
    callers.append(("revoked", bearer(tokens.revoked)))
    seen = 0
    with httpx.Client(base_url=server.base, timeout=10) as client:
        for method, path, op in routes:
            for role, headers in callers:
                r, text = _call(client, method, _concrete(path), headers)
                seen += 1
                where = f"{method} {path} (op {op}) as {role}: {r.status_code} {text[:300]}"
                assert r.status_code < 500, where
                _secrets_absent(text, tokens)
                if op not in access.OPERATIONS:
                    assert r.status_code == 403, where
                    assert r.json()["type"] == "urn:epochledger:problem:forbidden", where
                elif op in access.PUBLIC:  # the guard refuses no one; a form may refuse its own post (H10)
                    assert r.status_code not in (401, 403) or r.json()["type"].endswith(":csrf-refused"), where
                elif role is None or role == "revoked":
                    assert r.status_code == 401, where
                    assert r.headers["www-authenticate"].startswith("Bearer"), where
                    assert r.headers["content-type"] == "application/problem+json", where
                elif op in access.ROLES[role]:  # the table itself, not the guard's reading of it
                    assert r.status_code not in (401, 403), where
                else:
                    assert r.status_code == 403, where
                    doc = r.json()
                    assert doc["type"] == "urn:epochledger:problem:forbidden", where
                    assert doc["fields"]["op"] == op and doc["fields"]["role"] == role, where
                    assert doc["fields"]["needed"] == [k for k, ops in access.ROLES.items() if op in ops], where
                    assert op in doc["detail"], where
    assert seen == len(routes) * len(callers)
    server.stop()  # its exit status is rule H8's (tests of serve's shutdown)
    _, errs = server.process.communicate()
    _secrets_absent(errs.decode(errors="replace"), tokens)


def test_H4_a_writer_bound_to_slots_acts_only_for_them(shared: Any, shared_tokens: Tokens) -> None:
    """A writer bound to `mine-*` boots, starts and finishes for its slots; for another
    slot, or an epoch of another slot, 403 naming the slot, and nothing appended. An
    unbound writer may act for any slot."""
    writer, bound = bearer(shared_tokens.by_role["writer"]), bearer(shared_tokens.bound)
    with httpx.Client(base_url=shared.base, timeout=10) as c:
        refused = c.post(f"/test/slots/{OTHER_SLOT}/boot", headers=bound, json={"epoch": "e-other"})
        assert refused.status_code == 403, refused.text
        assert refused.json()["fields"]["slot"] == OTHER_SLOT and OTHER_SLOT in refused.json()["detail"]
        assert c.post(f"/test/slots/{OTHER_SLOT}/boot", headers=writer, json={"epoch": "e-other"}).status_code == 201
        assert c.post(f"/test/slots/{OWN_SLOT}/boot", headers=bound, json={"epoch": "e-mine"}).status_code == 201
        # A report for an epoch of another slot (it exists: the unbound writer booted it), and for none.
        for epoch in ("e-other", "e-nobody-booted"):
            r = c.post("/test/runs/r-other/start", headers=bound, json={"epoch": epoch})
            assert r.status_code == 403, r.text
            assert r.json()["fields"]["epoch" if epoch == "e-nobody-booted" else "slot"] in (epoch, OTHER_SLOT)
        assert c.get("/test/runs/r-other", headers=writer).status_code == 404  # nothing was appended
        assert c.post("/test/runs/r-mine/start", headers=bound, json={"epoch": "e-mine"}).status_code == 201
        r = c.post("/test/runs/r-mine/finish", headers=bound, json={"epoch": "e-mine"})
        assert (r.status_code, r.json()["status"]) == (201, "finished")


def test_H4_an_operators_resume_and_cancel_need_the_operator_role(
    shared: Any, shared_tokens: Tokens, shared_url: str
) -> None:
    """A writer resumes with by=auto and cancels as itself; a resume by="operator" or a
    cancel whose actor names an operator is the operator's act: 403 for the writer,
    allowed for the operator (and admin)."""
    with open_ledger(shared_url) as lg:
        for run in ("r1", "r2", "r3"):
            lg.queue(run)
            lg.start(run)
            lg.pause(run, "operator")
    writer, operator = bearer(shared_tokens.by_role["writer"]), bearer(shared_tokens.by_role["operator"])
    with httpx.Client(base_url=shared.base, timeout=10) as c:
        r = c.post("/test/runs/r1/resume", headers=writer, json={"by": "operator"})
        assert r.status_code == 403 and r.json()["fields"]["op"] == "resume.operator", r.text
        assert r.json()["fields"]["needed"] == ["operator", "admin"]
        assert c.post("/test/runs/r1/resume", headers=operator, json={"by": "operator"}).status_code == 201
        for actor in ("operator", "operator:alice"):
            r = c.post("/test/runs/r2/cancel", headers=writer, json={"actor": actor})
            assert r.status_code == 403 and r.json()["fields"]["op"] == "cancel.operator", r.text
        assert c.post("/test/runs/r2/cancel", headers=writer, json={"actor": "scheduler"}).status_code == 201
        assert c.post("/test/runs/r3/cancel", headers=operator, json={"actor": "operator:bob"}).status_code == 201
        assert (
            c.post("/test/runs/r3/resume", headers=bearer(shared_tokens.by_role["reader"]), json={}).status_code == 403
        )


def test_H4_a_revocation_ends_a_response_that_outlives_its_check(
    shared: Any, shared_tokens: Tokens, shared_url: str
) -> None:
    """A streaming response checked at its start asks `still_allowed` as it goes: the
    token revoked meanwhile (by another process, on the same store), it ends."""
    with open_ledger(shared_url) as lg:
        made = lg.issue_token("reader", name="watcher")
    with httpx.Client(base_url=shared.base, timeout=10) as c:
        with c.stream("GET", "/test/stream?lines=250", headers=bearer(made.secret)) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert next(lines) == "ok"
            with open_ledger(shared_url) as lg:
                lg.revoke_token(made.token.id)
            t0 = time.monotonic()
            rest = list(lines)
        assert rest[-1] == "refused" and len(rest) < 100, rest[-3:]
        assert time.monotonic() - t0 < 3
        with c.stream("GET", "/test/stream", headers=bearer(shared_tokens.by_role["reader"])) as other:
            assert other.status_code == 200 and next(other.iter_lines()) == "ok"  # the other tokens still stream


MALFORMED = [
    b"Bearer",
    b"Bearer ",
    b"bearer",
    b"Basic dXNlcjpwYXNz",
    b"Token abc",
    b"Bearer a b",
    b"Bearer a,Bearer b",
    b"Bearer \xff\xfe",
    b"Bearer elt.x.y\x00",
    b"Bearer " + b"a" * 600,
    b"Bearer elt..",
    b"Bearer elt.unknown.secret",
    b"Bearer ../../etc/passwd",
]


def _raw(base: str, request: bytes) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"content-length" not in b"".join(chunks).lower():
                break
        return b"".join(chunks)


def test_H4_malformed_and_injected_authorization_headers_are_401_problems_never_500(
    server: Any, tokens: Tokens
) -> None:
    """Each malformed header (other schemes, no token, spaces, commas, non-ASCII and NUL
    bytes, an oversized token, path tricks), two Authorization headers, and a CR/LF
    header injection: a 401 problem document (or the HTTP parser's 400 for bytes no
    HTTP/1.1 header may hold), never a 500, never an echo of what was sent."""
    for value in MALFORMED:
        reply = _raw(
            server.base,
            b"GET /v1/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: " + value + b"\r\nConnection: close\r\n\r\n",
        )
        head = reply.split(b"\r\n", 1)[0]
        assert head.startswith((b"HTTP/1.1 401", b"HTTP/1.1 400")), (value, reply[:400])
        if head.startswith(b"HTTP/1.1 401"):
            assert b"application/problem+json" in reply and b"www-authenticate: Bearer" in reply.lower().replace(
                b"www-authenticate: bearer", b"www-authenticate: Bearer"
            )
            if len(value) > 12:
                assert value[7:] not in reply.split(b"\r\n\r\n", 1)[1], value
    admin = tokens.by_role["admin"].encode()
    two = _raw(
        server.base,
        b"GET /v1/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + admin
        + b"\r\nAuthorization: Bearer "
        + admin
        + b"\r\nConnection: close\r\n\r\n",
    )
    assert two.startswith(b"HTTP/1.1 401"), two[:300]
    assert admin not in two
    injected = _raw(
        server.base,
        b"GET /v1/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x\rX-Admin: 1\r\nConnection: close\r\n\r\n",
    )
    assert injected.startswith((b"HTTP/1.1 400", b"HTTP/1.1 401")), injected[:300]
    with httpx.Client(base_url=server.base, timeout=10) as c:
        ok = c.get("/v1/tokens", headers={"Authorization": f"bearer   {tokens.by_role['admin']}"})
        assert ok.status_code == 200  # the scheme is case-insensitive (RFC 9110); the token is not
        assert all("secret" not in t and "digest" not in t for t in ok.json())
        assert c.get("/v1/tokens", headers=bearer(tokens.by_role["admin"].upper())).status_code == 401
    server.stop()  # its exit status is rule H8's (tests of serve's shutdown)
    out, errs = server.process.communicate()
    _secrets_absent((out + errs).decode(errors="replace"), tokens)
    assert b"Traceback" not in errs, errs.decode(errors="replace")[-2000:]


def test_H4_token_admin_over_http_is_the_admins_and_the_secret_is_shown_once(
    shared: Any, shared_tokens: Tokens
) -> None:
    """An admin issues a token (its secret in that response only), lists tokens (no
    secret, no digest), revokes it: refused at once. Bad input is a 422 naming the field."""
    admin = bearer(shared_tokens.by_role["admin"])
    with httpx.Client(base_url=shared.base, timeout=10) as c:
        made = c.post("/v1/tokens", headers=admin, json={"role": "reader", "name": "dash"})
        assert made.status_code == 201, made.text
        secret, tid = made.json()["secret"], made.json()["token"]["id"]
        assert c.get("/v1/tokens", headers=bearer(secret)).status_code == 403  # a reader administers nothing
        listed = c.get("/v1/tokens", headers=admin)
        assert secret not in listed.text and tid in listed.text
        assert c.delete(f"/v1/tokens/{tid}", headers=admin).json()["revoked_at"] is not None
        assert c.get("/v1/tokens", headers=bearer(secret)).status_code == 401
        bad = c.post("/v1/tokens", headers=admin, json={"role": "root"})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "role", bad.text
        bad = c.post("/v1/tokens", headers=admin, json={"role": "reader", "slots": ["a"]})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "slots", bad.text
        gone = c.delete("/v1/tokens/nope", headers=admin)
        assert gone.status_code == 404 and gone.json()["type"] == "urn:epochledger:problem:token-not-found"


def _serve(store: str, listen: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "epochledger", "--store", store, "serve", "--listen", listen],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_H4_a_ledger_without_tokens_serves_loopback_only_and_says_so(sqlite_url: str) -> None:
    """No tokens: `serve` on a non-loopback address is refused (exit 3, naming --listen);
    on loopback it says so at start and every local caller is admin. Once a token
    exists, a non-loopback --listen is served, and a request needs a token."""
    with open_ledger(sqlite_url, create=True):
        pass
    refused = _serve(sqlite_url, f"0.0.0.0:{free_port()}")
    _, errs = refused.communicate(timeout=60)
    assert refused.returncode == 3 and b"--listen" in errs and b"loopback" in errs, errs
    with served(sqlite_url) as base:
        with httpx.Client(base_url=base, timeout=10) as c:
            assert c.get("/v1/tokens").status_code == 200  # the local caller is admin
            made = c.post("/v1/tokens", json={"role": "admin"}).json()["secret"]
            # The token landed: from this request on, every request needs one.
            assert c.get("/v1/tokens").status_code == 401
            assert c.get("/v1/tokens", headers=bearer(made)).status_code == 200
    port = free_port()
    wide = _serve(sqlite_url, f"0.0.0.0:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/v1/tokens", timeout=2)
                break
            except httpx.TransportError:
                assert wide.poll() is None and time.monotonic() < deadline, wide.stderr.read() if wide.stderr else ""
                time.sleep(0.05)
        assert r.status_code == 401
    finally:
        wide.terminate()
        _, errs = wide.communicate(timeout=30)
    assert b"1 tokens issued: every request needs one" in errs, errs


def _outside_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent by a UDP connect
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_H4_without_tokens_a_caller_from_another_address_is_refused(sqlite_url: str) -> None:
    """Defence in depth: a server of a ledger without tokens that is reached from another
    address all the same (served on every address by other means than `serve`) takes
    only its loopback callers as admin; any other is refused (401)."""
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no address but loopback")
    with open_ledger(sqlite_url, create=True):
        pass
    with auth_app.served(sqlite_url, host="0.0.0.0") as s:
        port = s.base.rsplit(":", 1)[1]
        with httpx.Client(timeout=10) as c:
            assert c.get(f"http://127.0.0.1:{port}/v1/tokens").status_code == 200
            far = c.get(f"http://{outside}:{port}/v1/tokens")
            assert far.status_code == 401 and "loopback callers only" in far.json()["detail"], far.text
            assert c.get(f"http://{outside}:{port}/openapi/openapi.json").status_code == 200


def test_H4_H6_a_token_revoked_on_one_server_is_refused_by_another_at_once(pg_url: str) -> None:
    """Two servers on one PostgreSQL store: a token that both accept, revoked through
    the first, is refused by the second on its very next request (each request reads the
    token stream after the registry's cached version: no wait, no stale cache)."""
    with open_ledger(pg_url, create=True) as lg:
        admin = lg.issue_token("admin", name="root").secret
        victim = lg.issue_token("reader", name="victim")
    with served(pg_url) as one, served(pg_url) as two:
        with httpx.Client(timeout=10) as c:
            for base in (one, two):
                assert c.get(f"{base}/v1/tokens", headers=bearer(admin)).status_code == 200
                assert c.get(f"{base}/openapi/openapi.json", headers=bearer(victim.secret)).status_code == 200
            # Warm both servers' caches with the victim accepted: a route the reader may not call is 403, not 401.
            for base in (one, two):
                assert c.get(f"{base}/v1/tokens", headers=bearer(victim.secret)).status_code == 403
            assert c.delete(f"{one}/v1/tokens/{victim.token.id}", headers=bearer(admin)).status_code == 200
            refused = c.get(f"{two}/v1/tokens", headers=bearer(victim.secret))
            assert refused.status_code == 401, refused.text
            assert c.get(f"{two}/v1/tokens", headers=bearer(admin)).status_code == 200
            # And a token issued on the second is accepted by the first at once.
            made = c.post(f"{two}/v1/tokens", headers=bearer(admin), json={"role": "admin"}).json()["secret"]
            assert c.get(f"{one}/v1/tokens", headers=bearer(made)).status_code == 200


def test_H4_the_cli_manages_tokens_and_prints_a_secret_once(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`token create` prints the token once (stdout) and says it is not stored; `token
    list` shows id, name, role, slots, never a secret; `token revoke` revokes it."""
    from epochledger.cli import main

    with open_ledger(sqlite_url, create=True):
        pass
    assert main(["--store", sqlite_url, "token", "create", "writer", "--name", "tick", "--slot", "tick-*"]) == 0
    got = capsys.readouterr()
    secret = got.out.strip()
    assert re.fullmatch(r"elt\.[0-9a-f]{16}\.[A-Za-z0-9_-]{43}", secret), got.out
    assert "cannot be shown again" in got.err
    assert main(["--store", sqlite_url, "token", "list"]) == 0
    listed = capsys.readouterr().out
    tid = secret.split(".")[1]
    assert tid in listed and "tick-*" in listed and "writer" in listed and secret.split(".")[2] not in listed
    assert main(["--store", sqlite_url, "token", "revoke", tid, "--reason", "rotated"]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["--store", sqlite_url, "token", "create", "writer", "--slot", "a b"]) == 3
    with open_ledger(sqlite_url) as lg:
        assert lg.authenticate(secret) is None
        assert [t.revoked for t in lg.tokens()] == [True]


def _ledger(url: str) -> Ledger:
    return open_ledger(url)
