"""The append cost of the hash chain (rule S1), against the unchained path in the same run.

    python -m bench.chain [--store sqlite|postgresql|both] [--rounds 5] [--single 300]

Each figure is measured twice, on two fresh stores, alternating round by round
(A, B, A, B, ...) so that a noisy neighbour hits both alike; medians are reported:

- chained: the store as shipped (every append writes its links in its transaction);
- unchained (the anchor): the same store with the append's chain hook
  (`Store._link_rows`) replaced by a no-op: the code path before the chain.

Workloads: `group1000`, `with ledger.batch()` of 1000 new runs per commit (the whole
write path: decide, encode, append); `store1000`, `Store.append` of 1000 pre-encoded
events in one transaction (the store alone, where the chain's share is largest);
`single`, one `ledger.queue(...)` per transaction. Then the chained store's whole log
is checked against its chain once (`check_chain`, what `verify` and `digest` do first).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench.common import PG_URL, drop_schemas, emit
from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.ledger.events import RunQueued, Status, run_stream
from epochledger.ledger.store import Append

T0 = datetime(2026, 9, 9, tzinfo=UTC)


def _unchain(lg: Ledger) -> None:
    lg._store._link_rows = lambda cur, positions, rows: None  # type: ignore[method-assign]
    lg._store._chained = False  # PostgreSQL: no head read with the INSERT, no chain row sent with the COMMIT


Timing = tuple[float, float]  # (events/s by the wall clock, events/s of this process's CPU time)


def _timed(n: int, body: Callable[[], object]) -> Timing:
    w0, c0 = time.perf_counter(), time.process_time()
    body()
    return n / (time.perf_counter() - w0), n / max(time.process_time() - c0, 1e-9)


def group1000(lg: Ledger, tag: str) -> Timing:
    def body() -> None:
        with lg.batch() as b:
            for i in range(1000):
                b.queue(f"{tag}-{i}", workflow="nightly", process="worker-1", actor="api-1")

    return _timed(1000, body)


def store1000(lg: Ledger, tag: str) -> Timing:
    events = [
        Append(
            run_stream(f"{tag}-{i}"),
            1,
            RunQueued(
                at=T0, run=f"{tag}-{i}", status=Status.QUEUED, workflow="nightly", process="worker-1", actor="api-1"
            ),
        )
        for i in range(1000)
    ]
    return _timed(1000, lambda: lg._store.append(events))


def single(n: int) -> Callable[[Ledger, str], Timing]:
    def run(lg: Ledger, tag: str) -> Timing:
        def body() -> None:
            for i in range(n):
                lg.queue(f"{tag}-{i}", workflow="nightly", process="worker-1", actor="api-1")

        return _timed(n, body)

    return run


def compare(chained: Ledger, unchained: Ledger, work: Callable[[Ledger, str], Timing], rounds: int) -> dict[str, Any]:
    """Medians of `rounds` runs each, alternating which goes first. The wall clock is
    the figure that matters; the process's CPU time (this client: the hashing, and on
    SQLite the database too) is less disturbed by a busy machine."""
    a: list[Timing] = []
    b: list[Timing] = []
    for r in range(rounds):
        for lg, into, tag in (
            ((chained, a, "c"), (unchained, b, "u")) if r % 2 == 0 else ((unchained, b, "u"), (chained, a, "c"))
        ):
            into.append(work(lg, f"{tag}{r}-{uuid.uuid4().hex[:6]}"))
    ca, ub = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
    cpu_a, cpu_b = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
    return {
        "chained_events_per_second": round(ca),
        "unchained_events_per_second": round(ub),
        "cost_percent": round((ub / ca - 1) * 100, 1),
        "chained_cpu_events_per_second": round(cpu_a),
        "unchained_cpu_events_per_second": round(cpu_b),
        "cpu_cost_percent": round((cpu_b / cpu_a - 1) * 100, 1),
        "chain_cpu_us_per_event": round((1 / cpu_a - 1 / cpu_b) * 1e6, 2),
    }


def backend(url_a: str, url_b: str, rounds: int, n_single: int) -> dict[str, Any]:
    with open_ledger(url_a, clock=ManualClock(T0, 1)) as chained, open_ledger(url_b, clock=ManualClock(T0, 1)) as plain:
        _unchain(plain)
        out: dict[str, Any] = {
            "group1000": compare(chained, plain, group1000, rounds),
            "store1000": compare(chained, plain, store1000, rounds),
            "single": compare(chained, plain, single(n_single), rounds),
        }
        t0 = time.perf_counter()
        report = chained._store.check_chain()
        walked = time.perf_counter() - t0
        assert report.failure is None and report.links > 0
        out["chained_store_verifies"] = report.failure is None
        out["check_chain"] = {"events": report.events, "events_per_second": round(report.events / walked)}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.chain")
    p.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--single", type=int, default=300, help="appends per round of the one-per-transaction case")
    ns = p.parse_args(argv)
    result: dict[str, Any] = {"bench": "chain", "rounds": ns.rounds, "single_n": ns.single, "goal_cost_percent": 5}
    with tempfile.TemporaryDirectory() as tmp:
        if ns.store in ("sqlite", "both"):
            result["sqlite"] = backend(f"sqlite:///{tmp}/a.db", f"sqlite:///{tmp}/b.db", ns.rounds, ns.single)
    if ns.store in ("postgresql", "both"):
        schemas = ["bench_chain_" + uuid.uuid4().hex[:8] for _ in range(2)]
        try:
            urls = [f"{PG_URL}?schema={s}" for s in schemas]
            result["postgresql"] = backend(urls[0], urls[1], ns.rounds, ns.single // 3)
        finally:
            drop_schemas(schemas)
    emit(result)
    return result


if __name__ == "__main__":
    main()
