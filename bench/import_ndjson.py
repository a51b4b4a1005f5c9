"""NDJSON import throughput (rule I1), against the write path alone in the same run.

    python -m bench.import_ndjson [--runs 4000] [--store sqlite|postgresql|both]

A history of `runs` runs of 5 events (bench/common.py's generator, plus the boots its
starts name), as `epochledger export` writes it, imported into a fresh ledger:
- anchor: the same typed events submitted to one `Batch` after `prefetch` and committed
  (the one write path, without parsing, identity or time checks);
- strict: `import_events` (parse, identity index, time check, decide, one commit);
- tolerant: the same with on_error="skip" (nothing is rejected: the cost of the mode);
- again: the same file imported a second time: every line a duplicate, nothing appended.
"""

from __future__ import annotations

import argparse
import time
import uuid
from datetime import timedelta

from bench.common import PG_URL, T0, drop_schemas, emit, run_events
from epochledger import ManualClock, open_ledger
from epochledger.ledger import codec
from epochledger.ledger.events import ProcessBooted, run_stream
from epochledger.ndjson import import_events


def history(runs: int, per_run: int = 5) -> list[object]:
    events: list[object] = [
        ProcessBooted(at=T0, process=f"worker-{w}", epoch=f"worker-{w}.e1", booted_at=T0) for w in range(4)
    ]
    at = T0
    for base in range(0, runs, 1000):
        ids = range(base, min(runs, base + 1000))
        for step in range(per_run):
            at += timedelta(milliseconds=1)
            events.extend(run_events(i, step, at, per_run) for i in ids)
    return events


_SCHEMAS: list[str] = []  # PostgreSQL schemas this run made, dropped at its end


def _url(store: str, tmp: str) -> str:
    if store == "sqlite":
        return f"sqlite:///{tmp}/{uuid.uuid4().hex}.db"
    _SCHEMAS.append(f"bench_import_{uuid.uuid4().hex[:12]}")
    return f"{PG_URL}?schema={_SCHEMAS[-1]}"


def _drop_schemas() -> None:
    if not _SCHEMAS:
        return
    drop_schemas(_SCHEMAS)
    _SCHEMAS.clear()


def measure(store: str, runs: int, tmp: str) -> dict[str, float]:
    events = history(runs)
    lines = [codec.encode(e) + b"\n" for e in events]
    streams = [run_stream(getattr(e, "run", "")) for e in events if hasattr(e, "run")]
    out: dict[str, float] = {"events": len(events)}
    with open_ledger(_url(store, tmp), clock=ManualClock(T0, 1)) as lg:
        t0 = time.perf_counter()
        b = lg.batch()
        b.prefetch(streams)
        for e in events:
            b.submit(e)  # type: ignore[call-overload]
        b.commit()
        out["anchor_batch_events_per_second"] = round(len(events) / (time.perf_counter() - t0))
    for mode in ("stop", "skip"):
        with open_ledger(_url(store, tmp), clock=ManualClock(T0, 1)) as lg:
            t0 = time.perf_counter()
            result = import_events(lg, lines, on_error=mode)  # type: ignore[arg-type]
            assert result.appended == len(events) and not result.rejected
            out[f"import_{'strict' if mode == 'stop' else 'tolerant'}_events_per_second"] = round(
                len(events) / (time.perf_counter() - t0)
            )
            if mode == "stop":
                t0 = time.perf_counter()
                again = import_events(lg, lines)
                assert again.appended == 0 and again.duplicates == len(events)
                out["import_again_lines_per_second"] = round(len(events) / (time.perf_counter() - t0))
    out["strict_vs_anchor"] = round(out["import_strict_events_per_second"] / out["anchor_batch_events_per_second"], 2)
    return out


def main(argv: list[str] | None = None) -> None:
    import tempfile

    p = argparse.ArgumentParser(prog="python -m bench.import_ndjson")
    p.add_argument("--runs", type=int, default=4000)
    p.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="sqlite")
    ns = p.parse_args(argv)
    stores = ["sqlite", "postgresql"] if ns.store == "both" else [ns.store]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            emit({"bench": "import_ndjson", "runs": ns.runs, **{s: measure(s, ns.runs, tmp) for s in stores}})
        finally:
            _drop_schemas()


if __name__ == "__main__":
    main()
