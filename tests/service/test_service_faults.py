"""The service under races, faults and its bounds, against real `serve` processes (rules
H3, H6, H8): two servers on one store racing, a store that goes away, a commit whose
outcome is lost, oversized bodies, idle and surplus connections, and SIGTERM."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from epochledger import open_ledger
from epochledger.ledger.events import tag_of
from tests.conftest import PG_BASE, need_pg
from tests.helpers.server import served, start

BOOTED = "2026-12-01T10:00:00Z"


def post(base: str, path: str, body: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body if body is not None else {}, timeout=60, **kw)


def boot(base: str, process: str, epoch: str) -> None:
    got = post(base, f"/v1/processes/{process}/boot", {"booted_at": BOOTED, "host": "h1", "pid": 7, "epoch": epoch})
    assert got.status_code == 200, got.text


Call = tuple[str, str, dict[str, Any], dict[str, str]]  # base, path, body, headers


def together(*calls: Call) -> list[httpx.Response]:
    """Each request in a thread of its own, released at once."""
    gate = threading.Barrier(len(calls))
    out: list[httpx.Response | None] = [None] * len(calls)

    def run(i: int) -> None:
        gate.wait()
        base, path, body, headers = calls[i]
        out[i] = post(base, path, body, headers=headers)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None for r in out)
    return [r for r in out if r is not None]


def kind(r: httpx.Response) -> str:
    if r.status_code == 200:
        return "landed" if r.json()["recorded"] else "already"
    return str(r.json()["type"]).rsplit(":", 1)[1]


RUNS = 6


def test_H6_two_servers_on_one_store_racing_one_transition_land_it_once(store_url: str) -> None:
    """SQLite (two processes on one file: WAL, one writer at a time, the version check)
    and PostgreSQL alike: one start lands; the other is the typed 409 (a conflict when
    both decided on the same version, an illegal transition when it decided after).
    Identical finishes: one lands, the other is already recorded or a conflict."""
    open_ledger(store_url, init=True).close()
    with served(store_url) as a, served(store_url) as b:
        boot(a, "wa", "ea")
        boot(b, "wb", "eb")
        for i in range(RUNS):
            assert post(a, f"/v1/runs/r{i}/queue").status_code == 200
        seen: dict[str, int] = {}
        for i in range(RUNS):
            got = together(
                (a, f"/v1/runs/r{i}/start", {"epoch": "ea"}, {}),
                (b, f"/v1/runs/r{i}/start", {"epoch": "eb"}, {}),
            )
            kinds = sorted(kind(r) for r in got)
            assert kinds.count("landed") == 1, kinds
            lost = next(k for k in kinds if k != "landed")
            assert lost in ("conflict", "illegal-transition"), kinds
            seen[lost] = seen.get(lost, 0) + 1
        with open_ledger(store_url, create=False) as ledger:
            owner = {f"r{i}": ledger.get_run(f"r{i}").epoch for i in range(RUNS)}
            for i in range(RUNS):
                assert [tag_of(r.event) for r in ledger.history(f"r{i}")].count("run.started") == 1
        for i in range(RUNS):
            epoch = owner[f"r{i}"]
            got = together(
                (a, f"/v1/runs/r{i}/finish", {"epoch": epoch}, {}),
                (b, f"/v1/runs/r{i}/finish", {"epoch": epoch}, {}),
            )
            kinds = sorted(kind(r) for r in got)
            assert kinds.count("landed") == 1 and kinds[0] in ("already", "conflict"), kinds
        with open_ledger(store_url, create=False) as ledger:
            for i in range(RUNS):
                assert [tag_of(r.event) for r in ledger.history(f"r{i}")].count("run.finished") == 1
    print(f"losers of {RUNS} raced starts: {seen}")


def test_H3_H6_one_idempotency_key_raced_on_two_servers_is_one_boot(store_url: str) -> None:
    open_ledger(store_url, init=True).close()
    body = {"booted_at": BOOTED, "host": "h1", "pid": 11}
    with served(store_url) as a, served(store_url) as b:
        for n in range(3):
            key = {"Idempotency-Key": f"boot-{n}"}
            got = together(
                (a, f"/v1/processes/w{n}/boot", body, key),
                (b, f"/v1/processes/w{n}/boot", body, key),
            )
            assert [r.status_code for r in got] == [200, 200], [r.text for r in got]
            assert got[0].json()["epoch"] == got[1].json()["epoch"]
            assert sorted(r.json()["recorded"] for r in got) == [False, True]
    with open_ledger(store_url, create=False) as ledger:
        for n in range(3):
            process = ledger.process(f"w{n}")
            assert process is not None and len(process) == 1  # one boot per key, never two


def _proxied() -> tuple[Any, str]:
    need_pg()
    import uuid

    import psycopg

    from tests.helpers.pg_proxy import Proxy

    schema = "t_" + uuid.uuid4().hex[:16]
    url = f"{PG_BASE}?schema={schema}"
    open_ledger(url, init=True).close()
    proxy = Proxy()

    def drop() -> None:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    proxy.drop = drop  # type: ignore[attr-defined] # the test's cleanup rides on the proxy
    return proxy, proxy.url(url)


def test_H2_H3_a_store_that_goes_away_is_503_with_retry_after_and_a_lost_commit_is_unknown(
    children: list[Any],
) -> None:
    proxy, url = _proxied()
    try:
        server = start(url)
        children.append(server.process)
        base = server.base
        boot(base, "w1", "e1")
        assert post(base, "/v1/runs/r1/queue").status_code == 200
        # The store refuses connections: 503, Retry-After, and nothing appended.
        proxy.refuse()
        down = post(base, "/v1/runs/r1/start", {"epoch": "e1"})
        assert down.status_code == 503, down.text
        assert down.headers["retry-after"] == "1"
        assert down.json()["type"] in (
            "urn:epochledger:problem:store-unavailable",
            "urn:epochledger:problem:not-committed",
        )
        proxy.forward()
        with open_ledger(url, create=False) as ledger:
            assert ledger.get_run("r1").status == "queued"
        # The connection is cut after the server committed and the check cannot reach it:
        # the outcome is unknown, said so, and never "nothing appended".
        proxy.arm("after_commit", then_refuse=True)
        # (A queue: a write that reads no view, so the cut COMMIT is the append's own.)
        lost = post(base, "/v1/runs/r2/queue", {"workflow": "nightly"})
        assert lost.status_code == 503, lost.text
        doc = lost.json()
        assert doc["type"] == "urn:epochledger:problem:commit-unknown", doc
        assert doc["type"] == "urn:epochledger:problem:commit-unknown"
        assert "unknown" in doc["title"] and "nothing was appended" not in doc["title"]
        assert "retry-after" not in lost.headers  # check first, never retried blind
        assert doc["fields"]["versions"] == {"run:r2": [1, 1]}
        proxy.forward()
        with open_ledger(url, create=False) as ledger:
            assert ledger.get_run("r2").status == "queued"  # it had landed
        again = post(base, "/v1/runs/r2/queue", {"workflow": "nightly"})
        assert (again.status_code, again.json()["already"]) == (200, True)
        assert server.stop() == 0
    finally:
        proxy.close()
        proxy.drop()  # type: ignore[attr-defined]


def test_H8_bodies_idle_and_surplus_connections_are_bounded(sqlite_url: str) -> None:
    open_ledger(sqlite_url, init=True).close()
    args = ["--max-body-bytes", "2000", "--idle-timeout", "1", "--max-connections", "3"]
    with served(sqlite_url, args=args) as base:
        big = post(base, "/v1/runs/r1/queue", {"reason": "x" * 3000})
        assert big.status_code == 413, big.text
        assert big.headers["content-type"].startswith("application/problem+json")
        assert post(base, "/v1/runs/r1/queue").status_code == 200
        host, port = base.removeprefix("http://").split(":")
        # An idle keep-alive connection is closed by the server after --idle-timeout.
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/openapi/openapi.json")
        assert conn.getresponse().read()
        assert conn.sock is not None
        started = time.monotonic()
        assert conn.sock.recv(1) == b""  # the server closed it
        assert 0.5 < time.monotonic() - started < 5
        conn.close()
        # More connections than --max-connections: the surplus is refused with 503.
        held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(3)]
        try:
            time.sleep(0.2)
            surplus = httpx.get(f"{base}/openapi/openapi.json", timeout=10)
            assert surplus.status_code == 503
        finally:
            for s in held:
                s.close()


def test_H8_sigterm_lets_an_in_flight_batch_finish_and_exits_0(sqlite_url: str) -> None:
    """The batch's request is in flight when SIGTERM comes (its headers are in, half its
    body is not yet sent): the server stops accepting, takes the rest of the body,
    commits the whole batch, answers 200 and exits 0."""
    import json
    import signal

    open_ledger(sqlite_url, init=True).close()
    server = start(sqlite_url, args=["--grace", "30"])
    try:
        commands = [{"op": "queue", "run": f"b{i}", "workflow": "nightly"} for i in range(2_000)]
        body = json.dumps({"commands": commands}).encode()
        host, port = server.base.removeprefix("http://").split(":")
        head = (
            f"POST /v1/batch HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection((host, int(port)), timeout=60) as conn:
            conn.sendall(head + body[: len(body) // 2])
            time.sleep(0.5)  # the server has read the request line: the request is in flight
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            with pytest.raises(httpx.ConnectError):  # it stopped accepting
                httpx.get(f"{server.base}/openapi/openapi.json", timeout=5)
            conn.sendall(body[len(body) // 2 :])
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 200 OK", answer[:300]
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["appended"] == 2_000
        assert server.process.wait(60) == 0
    finally:
        if server.process.poll() is None:
            server.process.kill()
    with open_ledger(sqlite_url, create=False) as ledger:
        assert len(ledger.runs()) == 2_000  # all of it, never half


def _send_batch(base: str, commands: list[dict[str, Any]], done_at: list[float]) -> None:
    post(base, "/v1/batch", {"commands": commands})
    done_at.append(time.monotonic())


def test_H8_a_request_waiting_past_the_request_timeout_is_503_and_began_nothing(sqlite_url: str) -> None:
    """A batch of the most commands a batch may hold (--max-batch 40,000 here: over a
    second on a quiet machine, where the default 10,000 took 0.3 s once the server's
    group commit and HTTP parser made it faster) holds the server's ledger; a request
    sent meanwhile waits past --request-timeout and is refused. Late requests go one after
    another while the batch is under way (a fixed delay raced the batch's upload on a
    loaded machine: the late request landed before the batch took the ledger), until one
    is refused; up to three batches."""
    open_ledger(sqlite_url, init=True).close()
    refused: str | None = None
    with served(sqlite_url, args=["--request-timeout", "0.3", "--max-batch", "40000"]) as base:
        for attempt in range(3):
            commands = [{"op": "queue", "run": f"b{attempt}-{i}"} for i in range(40_000)]
            done_at: list[float] = []
            sender = threading.Thread(target=_send_batch, args=(base, commands, done_at))
            sender.start()
            n = 0
            while sender.is_alive() and refused is None:
                n += 1
                waited = post(base, f"/v1/runs/late{attempt}-{n}/queue")
                if waited.status_code == 503 and not done_at:  # refused while the batch held the ledger
                    refused = f"late{attempt}-{n}"
            sender.join(60)
            if refused is not None:
                break
        else:
            pytest.fail("in three batches no late request was refused while the batch held the ledger")
        assert waited.json()["type"] == "urn:epochledger:problem:lock-timeout"
        assert waited.headers["retry-after"] == "1"
    with open_ledger(sqlite_url, create=False) as ledger:
        assert refused not in {r.run for r in ledger.runs()}  # it began nothing
