"""What the service's token check (rule H4) costs a request. Prints one JSON line: the
median time of `Ledger.authenticate` (the guard's store work: the token registry
brought up to date, then one digest compared in constant time) on a ledger with 100
tokens, when nothing was appended since the previous check (`idle`) and when a write
landed between two checks (`busy`: the usual case on a ledger being written), and, as
the anchor in the same run and store, one transition (`checkpoint`) written in
process.

    .venv/bin/python -m bench.token_check sqlite 500
    .venv/bin/python -m bench.token_check postgresql 500   # needs the test server
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid

from bench.common import drop_schemas
from epochledger import open_ledger

PG = os.environ.get("EPOCHLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def main(kind: str, n: int) -> dict[str, object]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if kind == "sqlite" else f"{PG}?schema={schema}"
    times: dict[str, list[float]] = {"idle": [], "busy": [], "anchor_checkpoint": []}
    try:
        with open_ledger(url, create=True) as lg:
            secrets = [lg.issue_token("writer", name=f"t{i}").secret for i in range(100)]
            lg.queue("r")
            lg.start("r")
            secret = secrets[50]
            assert lg.authenticate(secret) is not None
            for i in range(n):
                t0 = time.perf_counter()
                lg.authenticate(secret)
                times["idle"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                lg.checkpoint("r", "n", f"ref-{i}")
                times["anchor_checkpoint"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                lg.authenticate(secret)
                times["busy"].append(time.perf_counter() - t0)
    finally:
        if kind != "sqlite":
            drop_schemas([schema], PG)
    res: dict[str, object] = {"bench": "token_check", "store": kind, "checks": n, "tokens": 100}
    for key, ts in times.items():
        res[f"{key}_us_median"] = round(statistics.median(ts) * 1e6, 1)
    return res


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    print(json.dumps(main(kind, n)))
