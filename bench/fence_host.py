"""What the host-reboot check (rule O7) costs a fenced report. Prints one JSON line:
the median time of `checkpoint(..., epoch=e)` by an epoch that recorded a host boot id
(the fence reads its host's boots: Ledger.host_state, one read of the log's tail) and,
as the anchor in the same run and store, the same report by an epoch that recorded
none (no host to read).

    .venv/bin/python -m bench.fence_host sqlite 300
    .venv/bin/python -m bench.fence_host postgresql 300   # needs the test server
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime

from bench.common import drop_schemas
from epochledger import ManualClock, open_ledger
from epochledger.ledger.host import FakeHost

PG = os.environ.get("EPOCHLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def main(kind: str, n: int) -> dict[str, object]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if kind == "sqlite" else f"{PG}?schema={schema}"
    clock = ManualClock(datetime(2026, 9, 9, 14, tzinfo=UTC), uptime=60.0)
    times: dict[str, list[float]] = {"host_boot": [], "anchor_no_host_boot": []}
    try:
        _measure(url, clock, n, times)
    finally:
        if kind != "sqlite":
            drop_schemas([schema], PG)
    res: dict[str, object] = {"bench": "fence_host", "store": kind, "reports": n}
    for key, ts in times.items():
        res[f"{key}_ms_median"] = round(statistics.median(ts) * 1e3, 3)
    return res


def _measure(url: str, clock: ManualClock, n: int, times: dict[str, list[float]]) -> None:
    with open_ledger(url, clock=clock, host=FakeHost(name="bench-host", boot_id="boot-1")) as lg:
        with_boot = lg.boot("with", pid=4242)
        without = lg.boot("without", host="elsewhere")  # another host: no host boot id recorded
        for run, w in (("r-with", with_boot), ("r-without", without)):
            lg.queue(run)
            lg.start(run, epoch=w)
        for i in range(n):  # interleaved, so both see the same store and the same noise
            for key, run, w in (("host_boot", "r-with", with_boot), ("anchor_no_host_boot", "r-without", without)):
                t0 = time.perf_counter()
                lg.checkpoint(run, "n", f"ref-{i}", epoch=w)
                times[key].append(time.perf_counter() - t0)


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    print(json.dumps(main(kind, n)))
