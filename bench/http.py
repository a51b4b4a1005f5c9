"""The service's speed (issue H: docs/benchmarks.md, "The service over HTTP"), against a
real `epochledger serve` on loopback, beside in-process anchors measured in the same run
on the same kind of store. Prints one JSON line.

- single: one transition per request (POST /v1/runs/{run}/queue), `--clients` concurrent
  clients on keep-alive connections, against the in-process rate of the same write, one
  transaction each (Ledger.queue). Goal: at least 0.5x.
- paced: requests at `--rate` per second, open loop, from the same clients: p50/p99 latency
  (goal: p99 under 20 ms at 200 requests/s), beside the in-process single writes'
  own p50/p99 (each one commit of the store, its fsync included).
- batch: POST /v1/batch of `--batch` transitions a request, against the in-process group
  commit of the same commands (Ledger.batch()). Goal: at least 0.6x. Each of the two
  starts once the server has settled (`_settle`): its views at the head and its metrics'
  count done, so neither pays for catching up the phase before it (the server's follower
  catches up the anchor's writes too; timed, that was the first round or two of the
  server's batch, docs/benchmarks.md). The server's catch-up of its own batches during
  the timed rounds is its own cost and stays in them. Each round's time is printed
  beside the median (`rounds_ms`, `group_commit_rounds_ms`), so a slow round shows.
- rss: the server's resident memory idle and after the load.
- cpu_ms_per_request (single): the CPU time the server process and the clients spent
  per request of the concurrent run. Both share the machine's cores, so a client that
  costs as much as the server caps the rate whatever the server does.

The clients (`--client`): `lean` (the default), one OS process per client sending raw
HTTP/1.1 on a keep-alive socket (bench/loadgen.py), so the figures are the server's;
`httpx`, the bench's first clients (threads of httpx in this process, under one
interpreter lock), kept so that figures compare with the earlier ones; `both` measures
the concurrent and the paced runs with each, against the same anchors.

    .venv/bin/python -m bench.http sqlite
    .venv/bin/python -m bench.http sqlite --client both
    .venv/bin/python -m bench.http postgresql        # needs the test server
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from typing import Any

import httpx

from bench import loadgen
from bench.common import PG_URL, drop_schemas
from bench.stream import _rss_kb, _serve
from epochledger import open_ledger


def _in_process_single(url: str, n: int) -> tuple[float, list[float]]:
    """The in-process rate of one transaction per write, and each write's latency (the
    store's own commit, fsync included: a floor under any latency over HTTP)."""
    latencies = []
    with open_ledger(url) as ledger:
        t0 = time.perf_counter()
        for i in range(n):
            t1 = time.perf_counter()
            ledger.queue(f"anchor-{i}", workflow="nightly")
            latencies.append(time.perf_counter() - t1)
        return n / (time.perf_counter() - t0), latencies


def _in_process_batch(url: str, size: int, rounds: int) -> tuple[float, list[float]]:
    with open_ledger(url) as ledger:
        took = []
        for r in range(rounds):
            t0 = time.perf_counter()
            with ledger.batch() as b:
                for i in range(size):
                    b.queue(f"anchor-b{r}-{i}", workflow="nightly")
            took.append(time.perf_counter() - t0)
        return size / statistics.median(took), took


def _http_single(base: str, clients: int, per_client: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()
    tag = uuid.uuid4().hex[:6]

    def work(c: int) -> None:
        mine = []
        with httpx.Client(base_url=base, timeout=30) as http:
            for i in range(per_client):
                t0 = time.perf_counter()
                r = http.post(f"/v1/runs/h{tag}-{c}-{i}/queue", json={"workflow": "nightly"})
                mine.append(time.perf_counter() - t0)
                assert r.status_code == 200, r.text
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return clients * per_client / (time.perf_counter() - t0), latencies


def _http_paced(base: str, clients: int, rate: float, seconds: float) -> list[float]:
    """Open loop: request k is due at k/rate; a client sends its share when due."""
    latencies: list[float] = []
    lock = threading.Lock()
    tag = uuid.uuid4().hex[:6]
    total = int(rate * seconds)
    start = time.perf_counter() + 0.2

    def work(c: int) -> None:
        mine = []
        with httpx.Client(base_url=base, timeout=30) as http:
            for k in range(c, total, clients):
                due = start + k / rate
                pause = due - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                t0 = time.perf_counter()
                r = http.post(f"/v1/runs/p{tag}-{k}/queue", json={})
                mine.append(time.perf_counter() - max(t0, due))
                assert r.status_code == 200, r.text
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def _http_batch(base: str, size: int, rounds: int) -> tuple[float, list[float]]:
    took = []
    with httpx.Client(base_url=base, timeout=120) as http:
        for r in range(rounds):
            body = {"commands": [{"op": "queue", "run": f"hb{r}-{uuid.uuid4().hex[:6]}-{i}"} for i in range(size)]}
            t0 = time.perf_counter()
            answer = http.post("/v1/batch", json=body)
            took.append(time.perf_counter() - t0)
            assert answer.status_code == 200, answer.text
    return size / statistics.median(took), took


def _settle(url: str, base: str, seconds: float = 120.0) -> None:
    """Wait until the server has caught up with the log: every view at the head (read
    from the store, as /readyz does) and then one scrape of /metrics, which counts the
    log first, after any count the follower has under way (stream.Live.count)."""
    deadline = time.monotonic() + seconds
    with open_ledger(url) as ledger:
        while any(v.lag for v in ledger.view_lags()):
            if time.monotonic() > deadline:
                raise SystemExit(f"the server's views still lag the log after {seconds:g} s: {ledger.view_lags()}")
            time.sleep(0.05)
    httpx.get(f"{base}/metrics", timeout=seconds).raise_for_status()


def _cpu_s(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _clients_run(
    kind: str, base: str, server_pid: int, clients: int, single: int, rate: float, seconds: float
) -> dict[str, Any]:
    """The concurrent and the paced runs with one kind of client: their figures."""
    per_client = single // clients
    sent = clients * per_client
    server_cpu = _cpu_s(server_pid)
    if kind == "lean":
        load = loadgen.closed(base, clients, per_client)
        rate_per_s, single_lat, client_cpu = sent / load.wall_s, load.latencies, load.cpu_s
    else:
        client_cpu = time.process_time()
        rate_per_s, single_lat = _http_single(base, clients, per_client)
        client_cpu = time.process_time() - client_cpu
    server_cpu = _cpu_s(server_pid) - server_cpu
    paced = (
        loadgen.paced(base, clients, rate, seconds).latencies
        if kind == "lean"
        else _http_paced(base, clients, rate, seconds)
    )
    return {
        "single": {
            "requests_per_s": round(rate_per_s, 1),
            "p50_ms": round(_pct(single_lat, 0.5) * 1000, 2),
            "p99_ms": round(_pct(single_lat, 0.99) * 1000, 2),
            "cpu_ms_per_request": {
                "server": round(server_cpu / sent * 1000, 3),
                "clients": round(client_cpu / sent * 1000, 3),
            },
        },
        "paced": {
            "requests": len(paced),
            "p50_ms": round(_pct(paced, 0.5) * 1000, 2),
            "p99_ms": round(_pct(paced, 0.99) * 1000, 2),
        },
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.http")
    p.add_argument("store", choices=["sqlite", "postgresql"])
    p.add_argument("--client", choices=["lean", "httpx", "both"], default="lean", help="the load's clients")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--single", type=int, default=1600, help="requests in the concurrent run (all clients)")
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=5)
    ns = p.parse_args(argv)
    kinds = ["lean", "httpx"] if ns.client == "both" else [ns.client]
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if ns.store == "sqlite" else f"{PG_URL}?schema={schema}"
    open_ledger(url, init=True).close()
    proc, base = _serve(url)
    try:
        idle_kb = _rss_kb(proc.pid)
        anchor_single, anchor_lat = _in_process_single(url, ns.single // 2)
        by_client = {
            kind: _clients_run(kind, base, proc.pid, ns.clients, ns.single, ns.rate, ns.seconds) for kind in kinds
        }
        _settle(url, base)
        anchor_batch, anchor_took = _in_process_batch(url, ns.batch, ns.rounds)
        _settle(url, base)
        batch_rate, batch_took = _http_batch(base, ns.batch, ns.rounds)
        loaded_kb = _rss_kb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
        if ns.store == "postgresql":
            drop_schemas([schema])
    for figures in by_client.values():
        figures["single"]["ratio"] = round(figures["single"]["requests_per_s"] / anchor_single, 2)
    print(
        json.dumps(
            {
                "bench": "http",
                "store": ns.store,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "clients": ns.clients,
                "anchor": {
                    "in_process_per_s": round(anchor_single, 1),
                    "in_process_p50_ms": round(_pct(anchor_lat, 0.5) * 1000, 2),
                    "in_process_p99_ms": round(_pct(anchor_lat, 0.99) * 1000, 2),
                    "group_commit_per_s": round(anchor_batch, 1),
                    "group_commit_rounds_ms": [round(t * 1000, 1) for t in anchor_took],
                },
                "rate_per_s": ns.rate,
                **by_client,
                "batch": {
                    "size": ns.batch,
                    "transitions_per_s": round(batch_rate, 1),
                    "ratio": round(batch_rate / anchor_batch, 2),
                    "rounds_ms": [round(t * 1000, 1) for t in batch_took],
                },
                "rss_mb": {"idle": round(idle_kb / 1024, 1), "loaded": round(loaded_kb / 1024, 1)},
            }
        )
    )


if __name__ == "__main__":
    main()
