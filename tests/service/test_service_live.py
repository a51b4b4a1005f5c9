"""The live stream (rule H5), metrics, health and readiness (rule H7), and the stream's
order on two servers of one PostgreSQL ledger (rule H6): each against real `epochledger
serve` processes (tests/helpers/server.py), the events appended through the Python API."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from epochledger.app import Ledger, open_ledger
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import RunTickFailed
from tests.helpers import server
from tests.helpers.engine_helpers import corrupt
from tests.helpers.pg_proxy import Proxy


@pytest.fixture
def ledger(sqlite_url: str) -> Iterator[Ledger]:
    with open_ledger(sqlite_url, init=True) as found:
        yield found


def events(ledger: Ledger, after: int = 0) -> list[tuple[int, bytes]]:
    """(position, the line `export` writes) of every event after `after`."""
    import io

    out = io.BytesIO()
    ledger.export_ndjson(out, after)
    lines = out.getvalue().splitlines()
    positions = [r.position for r in ledger.events(after)]
    return list(zip(positions, lines, strict=True))


class SSE:
    """A minimal Server-Sent Events reader over httpx: (id, event, data) per event."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.iter_lines()
        self.comments = 0

    def next(self) -> tuple[int | None, str | None, str]:
        fields: dict[str, str] = {}
        for line in self.lines:
            if line == "":
                if "data" in fields:
                    return (int(fields["id"]) if "id" in fields else None, fields.get("event"), fields["data"])
                continue
            if line.startswith(":"):
                self.comments += 1
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        raise EOFError

    def take(self, n: int) -> list[tuple[int | None, str | None, str]]:
        return [self.next() for _ in range(n)]


@contextmanager
def sse(base: str, params: dict[str, object] | None = None, headers: dict[str, str] | None = None) -> Iterator[SSE]:
    with httpx.stream("GET", f"{base}/v1/stream", params=params, headers=headers, timeout=10) as r:  # type: ignore[arg-type]
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        yield SSE(r)


def fill(ledger: Ledger, runs: int, prefix: str = "r", reason: str | None = None) -> None:
    with ledger.batch() as b:
        for i in range(runs):
            b.queue(f"{prefix}{i}", workflow="w", reason=reason)


def metric(base: str, name: str, labels: str = "", text: str | None = None) -> float | None:
    """One sample of a scrape of `base` (or of the scrape `text`), None when absent."""
    if text is None:
        text = httpx.get(f"{base}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + (("{" + labels + "}") if labels else " ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_for(check, timeout: float = 10.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------ H5 the stream
def test_H5_resume_with_last_event_id_gives_each_event_once_in_order(ledger: Ledger, sqlite_url: str) -> None:
    fill(ledger, 5)
    with server.served(sqlite_url) as base:
        with sse(base, {"after": 0}) as s:
            first = s.take(3)
        ledger.start("r0")
        fill(ledger, 3, prefix="s")
        with sse(base, {"after": 0}, {"Last-Event-ID": str(first[-1][0])}) as s:
            rest = s.take(5 + 1 + 3 - 3)
    got = [(i, d.encode()) for i, _, d in first + rest]
    assert got == events(ledger)  # each once, in log order, the export's bytes
    assert all(e is None for _, e, _ in first + rest)


def test_H5_stream_wakes_for_new_events_and_starts_at_the_head(ledger: Ledger, sqlite_url: str) -> None:
    fill(ledger, 2)
    with server.served(sqlite_url, args=["--heartbeat", "0.2"]) as base, sse(base) as s:
        t0 = time.monotonic()
        ledger.queue("late")
        position, _, data = s.next()
        assert time.monotonic() - t0 < 2
        assert position == ledger.head() and json.loads(data)["run"] == "late"  # nothing from before the head
        ledger.queue("later")
        assert json.loads(s.next()[2])["run"] == "later"
        time.sleep(0.5)
        ledger.queue("last")
        assert json.loads(s.next()[2])["run"] == "last"
        assert s.comments >= 1  # heartbeats while idle
        # A filter that passes nothing on a log that moves still sends its heartbeats.
        stop = threading.Event()

        def busy() -> None:
            with open_ledger(sqlite_url) as w:
                i = 0
                while not stop.wait(0.02):
                    w.queue(f"busy{i}")
                    i += 1

        writer = threading.Thread(target=busy)
        with sse(base, {"run": "nobody"}) as quiet:
            writer.start()
            try:
                beats = 0
                for line in quiet.lines:
                    assert not line.startswith(("id:", "data:")), line
                    beats += line == ": heartbeat"
                    if beats == 3:
                        break
            finally:
                stop.set()
                writer.join(10)
        assert ledger.head() > position + 10  # the log moved meanwhile


def test_H5_filters_by_run_slot_and_type(ledger: Ledger, sqlite_url: str) -> None:
    booted = ledger.boot("api-1")
    fill(ledger, 3)
    ledger.start("r1", epoch=booted)
    ledger.boot("api-2")
    ledger.finish("r1", epoch=booted)
    everything = {p: json.loads(d) for p, d in events(ledger)}
    cases = [
        ({"run": "r1"}, lambda e: e.get("run") == "r1"),
        ({"run": ["r0", "r2"]}, lambda e: e.get("run") in ("r0", "r2")),
        ({"slot": "api-1"}, lambda e: e.get("process") == "api-1" and e["type"].startswith("process.")),
        ({"type": "run.queued"}, lambda e: e["type"] == "run.queued"),
        ({"type": ["run.started", "process.booted"]}, lambda e: e["type"] in ("run.started", "process.booted")),
        ({"run": "r1", "type": "run.finished"}, lambda e: e.get("run") == "r1" and e["type"] == "run.finished"),
    ]
    with server.served(sqlite_url) as base:
        for params, keep in cases:
            want = [p for p, e in everything.items() if keep(e)]
            with sse(base, {"after": 0, **params}) as s:
                got = [s.next()[0] for _ in want]
            assert got == want, params
        for params, where in [
            ({"type": "run.nosuch"}, "type"),
            ({"run": "bad run id with spaces"}, "run"),
            ({"after": "x"}, "after"),
            ({"after": -1}, "after"),
        ]:
            r = httpx.get(f"{base}/v1/stream", params=params, timeout=5)
            assert r.status_code == 422, (params, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert where in r.text
        r = httpx.get(f"{base}/v1/stream", headers={"Last-Event-ID": "nope"}, timeout=5)
        assert r.status_code == 422 and "last_event_id" in r.text and "header" in r.text


def dechunk(response: bytes) -> bytes:
    """The body of a raw chunked HTTP/1.1 response, which must be complete."""
    head, _, rest = response.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower(), head
    body = b""
    while True:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return body
        body, rest = body + rest[:n], rest[n + 2 :]


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))  # type: ignore[union-attr]


def _raw_stream(port: int) -> socket.socket:
    """A client that asks for the whole log and reads nothing: a tiny receive buffer."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /v1/stream?after=0 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    return s


def test_H5_slow_client_is_dropped_with_a_final_event_and_memory_stays_bounded(ledger: Ledger, sqlite_url: str) -> None:
    # 2,500 events of ~8 kB (20 MB): more than the socket buffers (4 MB at most here) and
    # the queue hold, and more than twice what the server may grow by for both streams.
    fill(ledger, 2500, prefix="b", reason="x" * 8000)
    log_kb = sum(len(line) for _, line in events(ledger)) // 1024
    served = server.start(sqlite_url, args=["--max-streams", "2", "--stream-stall", "1"])
    try:
        base, pid = served.base, served.process.pid
        port = int(base.rsplit(":", 1)[1])
        wait_for(lambda: httpx.get(f"{base}/readyz", timeout=5).json().get("max_lag") == 0, 20, "views caught up")
        before = _rss_kb(pid)
        never = _raw_stream(port)  # never reads at all
        later = _raw_stream(port)  # reads once the server has dropped it
        wait_for(lambda: metric(base, "epochledger_streams_dropped_total", 'reason="slow-reader"') == 2, 20, "drops")
        grown = _rss_kb(pid) - before
        # Buffered, the two streams would hold the log twice; bounded, less than once (the rest
        # is the threads and connections that read it, not the events).
        assert grown < log_kb, f"the server grew by {grown} kB for two streams of a {log_kb} kB log"
        later.settimeout(10)
        data = b""
        while chunk := later.recv(1 << 16):  # to the end: the server closes the connection (Connection: close)
            data += chunk
        text = dechunk(data).decode()
        ids = [int(i) for i in re.findall(r"^id: (\d+)$", text, re.M)]
        assert ids == list(range(1, len(ids) + 1)) and 0 < len(ids) < ledger.head()  # in order, never all of it
        final = text.rstrip().rsplit("\n\n", 1)[1]
        assert final.startswith("event: dropped\ndata: ")
        end = json.loads(final.split("data: ", 1)[1])
        assert end["reason"] == "slow-reader" and end["resume_after"] == ids[-1]  # resume after what it got
        # The slot of the client that never reads is freed too, and a new stream is served.
        wait_for(lambda: metric(base, "epochledger_streams_open") == 0, 10, "both slots freed")
        with sse(base, {"after": end["resume_after"]}) as s:
            assert s.next()[0] == end["resume_after"] + 1
        never.close()
        later.close()
    finally:
        served.stop()


def test_H5_streams_past_max_streams_get_503_with_retry_after(ledger: Ledger, sqlite_url: str) -> None:
    with server.served(sqlite_url, args=["--max-streams", "1"]) as base:
        with sse(base, {"after": 0}):
            r = httpx.get(f"{base}/v1/stream", timeout=5)
            assert r.status_code == 503
            assert r.headers["retry-after"] == "1"
            assert r.json()["type"] == "urn:epochledger:problem:too-many-streams"
        wait_for(lambda: metric(base, "epochledger_streams_open") == 0, 5, "the slot freed")
        with sse(base, {"after": 0}):
            pass


# ------------------------------------------------------------------- H7 metrics
def test_H7_metrics_after_writes_a_sweep_and_a_tick_failure(ledger: Ledger, sqlite_url: str) -> None:
    with server.served(sqlite_url) as base:
        assert httpx.get(f"{base}/healthz", timeout=5).json() == {"status": "alive"}
        old = ledger.boot("api-1")
        fill(ledger, 2)
        ledger.start("r0", epoch=old)
        ledger.start("r1", epoch=old)
        new, report = ledger.startup("api-1")  # supersedes `old`: its two runs are orphans (O2)
        assert len(report.recovered) == 2
        ledger.queue("t0")
        ledger.start("t0", epoch=new)
        ledger.submit(
            RunTickFailed(at=ledger.clock.now(), run="t0", tick="t1", step="poll", error_class="E", epoch=new.epoch)
        )
        head = ledger.head()
        wait_for(lambda: metric(base, "epochledger_view_position", 'view="tick_health"') == head, 10, "the follower")
        scrape = httpx.get(f"{base}/metrics", timeout=5).text
        assert metric(base, "epochledger_events_total", 'type="run.queued"', scrape) == 3
        assert metric(base, "epochledger_events_total", 'type="process.booted"', scrape) == 2
        assert metric(base, "epochledger_orphans_recovered_total", 'rule="O2-superseded"', scrape) == 2
        assert metric(base, "epochledger_log_head_position", "", scrape) == head
        assert metric(base, "epochledger_view_lag_positions", 'view="runs"', scrape) == 0
        assert metric(base, "epochledger_tick_streaks_open", "", scrape) == 1
        assert metric(base, "epochledger_fenced_reports_total", "", scrape) == 0
        assert metric(base, "epochledger_store_up", "", scrape) == 1
        assert metric(base, "epochledger_chain_verify_ok", "", scrape) is None  # never a false 0 before any verify
        assert (
            metric(base, "epochledger_http_requests_total", 'method="GET",route="/healthz",status="200"', scrape) == 1
        )
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 200 and ready.json()["head"] == head
        exposed = set(re.findall(r"^(epochledger_[a-z_]+)", scrape, re.M))
        assert alert_metrics() - exposed == set()  # every metric an alert reads is one the server exposes


def test_H7_readyz_is_503_while_the_store_is_away_and_healthz_stays_up(pg_url: str) -> None:
    open_ledger(pg_url, init=True).close()
    proxy = Proxy()
    try:
        url = proxy.url(pg_url) + "&connect_timeout=2"
        with server.served(url) as base:
            wait_for(lambda: httpx.get(f"{base}/readyz", timeout=10).status_code == 200, 15, "ready")
            proxy.refuse()
            r = httpx.get(f"{base}/readyz", timeout=15)
            assert r.status_code == 503, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.headers["retry-after"] == "1"
            assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200  # alive: no store access
            assert metric(base, "epochledger_store_up") == 0
            proxy.forward()
            wait_for(lambda: httpx.get(f"{base}/readyz", timeout=10).status_code == 200, 15, "ready again")
    finally:
        proxy.close()


# ------------------------------------------------------- H6 one order, two servers
def test_H6_two_servers_on_one_postgresql_stream_the_same_order(pg_url: str) -> None:
    open_ledger(pg_url, init=True).close()
    a, b = server.start(pg_url), server.start(pg_url)
    try:
        got: dict[str, list[tuple[int | None, str]]] = {}
        n = 60
        opened = threading.Barrier(3, timeout=20)

        def read(name: str, base: str) -> None:
            with sse(base, {"after": 0}) as s:
                opened.wait()
                got[name] = [(i, d) for i, _, d in s.take(n)]

        readers = [threading.Thread(target=read, args=(k, s.base)) for k, s in (("a", a), ("b", b))]
        for t in readers:
            t.start()
        opened.wait()

        def write(prefix: str) -> None:  # two writers, interleaving their commits
            with open_ledger(pg_url) as w:
                for i in range(n // 2):
                    w.queue(f"{prefix}{i}")

        writers = [threading.Thread(target=write, args=(p,)) for p in ("x", "y")]
        for t in writers:
            t.start()
        for t in writers + readers:
            t.join(30)
        assert len(got["a"]) == n and got["a"] == got["b"]
        with open_ledger(pg_url) as reader:
            assert [(p, d.decode()) for p, d in events(reader)] == got["a"]
    finally:
        a.stop()
        b.stop()


# ------------------------------------------------------------------- H7 alerts
DOCS = Path(__file__).resolve().parents[2] / "docs"


def alert_metrics() -> set[str]:
    """The epochledger metrics docs/alerts.yml reads (a counter by its exposed name)."""
    return set(re.findall(r"\bepochledger_[a-z_]+", (DOCS / "alerts.yml").read_text()))


def need_promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("EPOCHLEDGER_TEST_PROMTOOL") == "require":
            pytest.fail("EPOCHLEDGER_TEST_PROMTOOL=require but promtool is not installed (Debian: prometheus)")
        pytest.skip("promtool is not installed (Debian's prometheus package; make test installs it as root)")
    return found


@pytest.mark.parametrize("check", ["check", "test"])
def test_H7_alerting_rules_pass_promtool(check: str) -> None:
    promtool = need_promtool()
    target = DOCS / ("alerts.yml" if check == "check" else "alerts.test.yml")
    done = subprocess.run([promtool, check, "rules", str(target)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_H5_a_stopping_server_ends_its_streams_with_a_final_event(ledger: Ledger, sqlite_url: str) -> None:
    fill(ledger, 3)
    served = server.start(sqlite_url)
    try:
        with sse(served.base, {"after": 0}) as s:
            got = s.take(3)
            t0 = time.monotonic()
            served.process.send_signal(signal.SIGTERM)
            _, event, data = s.next()
            assert event == "dropped"
            end = json.loads(data)
            assert end["reason"] == "server-stopping" and end["resume_after"] == got[-1][0]
            with pytest.raises(EOFError):
                s.next()
        served.process.wait(timeout=8)  # the grace period (10 s) waited for no stream
        assert time.monotonic() - t0 < 8
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


# ------------------------------------------------- H5 the facade's part, both stores
def test_H5_log_page_reads_what_export_writes_and_filters(store_url: str) -> None:
    with open_ledger(store_url, init=True) as lg:
        booted = lg.boot("api-1")
        fill(lg, 3)
        lg.start("r1", epoch=booted)
        exported = events(lg)
        page = lg.log_page(0, 100)
        assert [(e.position, e.data) for e in page.entries] == exported and page.upto == exported[-1][0]
        assert all(e.decoded for e in page.entries)
        two = lg.log_page(0, 2)
        assert [e.position for e in two.entries] == [p for p, _ in exported[:2]] and two.upto == exported[1][0]
        assert [e.type for e in lg.log_page(0, 100, runs=["r1"]).entries] == ["run.queued", "run.started"]
        assert [e.type for e in lg.log_page(0, 100, slots=["api-1"]).entries] == ["process.booted"]
        assert len(lg.log_page(0, 100, types=["run.queued"]).entries) == 3
        # Filtered out, a page still moves on: `upto` is the last position read.
        none = lg.log_page(0, 100, runs=["nobody"])
        assert none.entries == [] and none.upto == exported[-1][0]
        assert lg.log_page(exported[-1][0], 100) == type(page)(entries=[], upto=exported[-1][0])
        for kwargs, where in [({"types": ["run.nosuch"]}, "type"), ({"runs": ["a b"]}, "run")]:
            with pytest.raises(InvalidInput) as refused:
                lg.log_page(0, 10, **kwargs)  # type: ignore[arg-type]
            assert refused.value.where == where
        with pytest.raises(InvalidInput):
            lg.log_page(-1, 10)
        with pytest.raises(InvalidInput):
            lg.log_page(0, 0)


def test_H5_heads_yield_each_new_head_once_until_stopped(store_url: str) -> None:
    with open_ledger(store_url, init=True) as lg:
        fill(lg, 1)
        stop = threading.Event()
        seen: list[int] = []
        follower = threading.Thread(target=lambda: seen.extend(lg.heads(stop=stop, poll=0.01)))
        follower.start()
        wait_for(lambda: seen == [lg.head()], 10, "the first head")
        for i in range(3):
            lg.queue(f"h{i}")
            wait_for(lambda: seen[-1] == lg.head(), 10, "the new head")
        stop.set()
        follower.join(10)
        assert not follower.is_alive()
        assert seen == sorted(set(seen)) and seen[-1] == lg.head() and len(seen) >= 2


def test_H5_an_undecodable_event_is_streamed_in_its_place_and_the_stream_goes_on(
    ledger: Ledger, sqlite_url: str
) -> None:
    fill(ledger, 3)
    corrupt(sqlite_url, 2, b'{"type":"run.nosuch","at":"2026-01-01T00:00:00Z","run":"r1"}')
    page = ledger.log_page(0, 10)
    assert [(e.position, e.decoded) for e in page.entries] == [(1, True), (2, False), (3, True)]
    with server.served(sqlite_url) as base, sse(base, {"after": 0}) as s:
        got = s.take(3)
    assert [(i, e) for i, e, _ in got] == [(1, None), (2, "undecodable"), (3, None)]
    poison = json.loads(got[1][2])
    assert poison["position"] == 2 and poison["tag"] == "run.nosuch" and poison["stream"] == "run:r1"
    assert got[2][2].encode() == page.entries[2].data


def test_H7_the_verify_route_sets_the_verify_gauges(ledger: Ledger, sqlite_url: str) -> None:
    """The chain's last verify outcome is what the verify route last found."""
    fill(ledger, 3)
    with server.served(sqlite_url) as base:
        assert metric(base, "epochledger_chain_verify_ok") is None
        assert httpx.get(f"{base}/v1/verify", timeout=30).status_code == 200
        assert metric(base, "epochledger_chain_verify_ok") == 1
        corrupt(sqlite_url, 2, b'{"type":"run.queued","at":"2026-01-01T00:00:00Z","run":"forged"}')
        assert httpx.get(f"{base}/v1/verify", timeout=30).status_code == 200  # a broken chain is a report
        assert metric(base, "epochledger_chain_verify_ok") == 0
        assert (metric(base, "epochledger_chain_verify_timestamp_seconds") or 0) > time.time() - 60


def test_H7_write_latency_requests_and_conflicts_are_counted_per_process(ledger: Ledger, sqlite_url: str) -> None:
    """The hooks every route passes (in process: the write routes are other rules'), on
    a write that lands and one that loses a race."""
    from litestar import Litestar, post
    from litestar.datastructures import State
    from litestar.params import FromPath, FromQuery
    from litestar.testing import TestClient

    from epochledger.ledger.errors import ConflictError
    from epochledger.service import metrics, problems
    from epochledger.service.app import Service
    from epochledger.service.config import ServiceConfig

    @post("/v1/runs/{run:str}/queue", opt={"op": "queue"}, status_code=201)
    async def queue(run: FromPath[str], lost: FromQuery[bool] = False) -> dict[str, str]:
        if lost:
            raise ConflictError([f"run:{run}"])
        return {"run": run}

    service = Service(ServiceConfig(store=sqlite_url))
    app = Litestar(
        route_handlers=[queue, *metrics.ROUTES],
        middleware=[metrics.middleware],
        after_exception=[metrics.after_exception],
        exception_handlers=problems.HANDLERS,
        state=State({"service": service, "metrics": metrics.Metrics(service)}),
    )
    with TestClient(app) as client:
        assert client.post("/v1/runs/a/queue").status_code == 201
        assert client.post("/v1/runs/b/queue", params={"lost": True}).status_code == 409
        scrape = client.get("/metrics").text
    service.close()
    route = 'method="POST",route="/v1/runs/{run}/queue"'  # the route's template, never the run id
    assert metric("", "epochledger_http_requests_total", route + ',status="201"', scrape) == 1
    assert metric("", "epochledger_http_requests_total", route + ',status="409"', scrape) == 1
    assert metric("", "epochledger_conflicts_total", "", scrape) == 1
    assert metric("", "epochledger_append_latency_seconds_count", 'op="queue"', scrape) == 2
