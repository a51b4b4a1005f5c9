"""The live stream's delay (rule H5; docs/benchmarks.md, "The live stream"): from a
commit returning to its event arriving at a client of /v1/stream, at a steady append
rate, against a real `epochledger serve` on loopback. Prints one JSON line.

The writer commits through the Python API at `--rate` events/s (a group commit of
`--batch` events every batch/rate seconds) and notes, per position, when its commit
returned; a reader process holds one stream open and notes when each event arrived.
The delay is arrival - commit return, both on the machine's monotonic clock. The
anchor, measured in the same run: the commits' own latency (the writer's side), and the
server's idle RSS beside its RSS under this load.

    .venv/bin/python -m bench.stream sqlite --rate 1000 --seconds 10
    .venv/bin/python -m bench.stream postgresql --rate 1000 --seconds 10   # needs the test server
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from multiprocessing.connection import Connection

import httpx

from bench.common import PG_URL, drop_schemas
from epochledger import open_ledger


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        found = re.search(r"VmRSS:\s+(\d+)", f.read())
    return int(found.group(1)) if found else 0


def _serve(url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "epochledger", "--store", url, "serve", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit(f"serve did not start on {base}")
        time.sleep(0.1)


def _read(base: str, total: int, out: Connection) -> None:
    """Hold one stream open; send back when each of `total` events arrived."""
    arrived: dict[int, float] = {}
    with httpx.stream("GET", f"{base}/v1/stream", timeout=60) as r:
        out.send("ready")
        for line in r.iter_lines():
            if line.startswith("id: "):
                arrived[int(line[4:])] = time.monotonic()
                if len(arrived) >= total:
                    break
    out.send(arrived)


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main(kind: str, rate: int, seconds: float, batch: int) -> dict[str, object]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if kind == "sqlite" else f"{PG_URL}?schema={schema}"
    res: dict[str, object] = {"bench": "stream", "store": kind, "rate": rate, "seconds": seconds, "batch": batch}
    open_ledger(url, init=True).close()
    proc, base = _serve(url)
    try:
        time.sleep(1.0)
        res["idle_rss_kb"] = _rss_kb(proc.pid)
        committed: dict[int, float] = {}
        commit_s: list[float] = []
        total = int(rate * seconds)
        # The reader is a process of its own, so the writer's work does not delay its
        # clock readings (one interpreter lock); CLOCK_MONOTONIC is the machine's.
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        reader = ctx.Process(target=_read, args=(base, total, child), daemon=True)
        reader.start()
        assert parent.poll(60) and parent.recv() == "ready"
        time.sleep(0.5)  # the stream is past its first page: it waits at the head
        peak_rss = 0
        with open_ledger(url) as lg:
            gap = batch / rate
            start = time.monotonic()
            for k in range(total // batch):
                due = start + k * gap
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                t0 = time.monotonic()
                with lg.batch() as b:
                    for i in range(batch):
                        b.queue(f"r{k}-{i}", workflow="bench")
                t1 = time.monotonic()
                commit_s.append(t1 - t0)
                for rec in b.recorded:
                    committed[rec.position] = t1
                if k % 50 == 0:
                    peak_rss = max(peak_rss, _rss_kb(proc.pid))
            res["achieved_rate"] = round(total / (time.monotonic() - start))
        arrived: dict[int, float] = parent.recv() if parent.poll(60) else {}
        reader.join(30)
        delays = [(arrived[p] - t) * 1000 for p, t in committed.items() if p in arrived]
        res["events"] = len(committed)
        res["delivered"] = len(delays)
        res["delay_ms"] = {
            "p50": round(statistics.median(delays), 2),
            "p99": round(_pct(delays, 99), 2),
            "max": round(max(delays), 2),
        }
        res["anchor_commit_ms"] = {
            "p50": round(statistics.median(commit_s) * 1000, 2),
            "p99": round(_pct(commit_s, 99) * 1000, 2),
        }
        res["load_rss_kb"] = max(peak_rss, _rss_kb(proc.pid))
        res["goal_p99_ms"] = 100
    finally:
        proc.terminate()
        proc.wait(30)
        if kind == "postgresql":
            drop_schemas([schema])
    return res


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.stream")
    p.add_argument("store", choices=["sqlite", "postgresql"])
    p.add_argument("--rate", type=int, default=1000, help="events per second appended")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=10, help="events a commit")
    ns = p.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    print(json.dumps(main(ns.store, ns.rate, ns.seconds, ns.batch)))
