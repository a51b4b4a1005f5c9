"""A fast start (rule W2): `epochledger --help` and `epochledger show RUN` as whole
processes, beside `python -c pass` measured in the same run.

    python -m bench.startup [--runs 1000000] [--rounds 21] [--importtime]

- The ledger: bench/fleet.py's SQLite file of `runs` runs of 3 events, built once
  (about a minute and a half at 1,000,000 runs) into the temporary directory as
  epochledger-fleet_<runs>x3.db and reused while its `.ok` marker says it is whole
  (`python -m bench.fleet` reuses the same file). One `show RUN` before the rounds
  catches its views up, untimed: the rounds time a start, not a catch-up.
- The rounds: each of the three commands in turn, in a rotating order, `rounds` times,
  each a fresh process timed with time.perf_counter from spawn to exit, its output
  into /dev/null. On a shared machine the load falls on all three alike; quote the
  medians and their ratios to the anchor, never one run.
- `epochledger` is the console script beside this interpreter (what `pip install`
  puts on PATH), or `python -m epochledger` where there is none (the JSON says which).
- --importtime: each command once more under `python -X importtime`, and the
  top-level imports that cost most, cumulative microseconds as Python reports them
  (inflated by the tracing itself; docs/benchmarks.md, "A fast start").

Goals: `--help` at most 3x the anchor, `show RUN` at most 4x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.common import emit
from bench.fleet import fleet_file

GOALS = {"help": 3.0, "show": 4.0}


def entry() -> tuple[list[str], str]:
    """The command that starts `epochledger`, and how it was found."""
    script = os.path.join(os.path.dirname(sys.executable), "epochledger")
    if os.path.exists(script):
        return [sys.executable, script], "console script"  # the script's own interpreter, spelled out
    return [sys.executable, "-m", "epochledger"], "python -m epochledger"


# Children may write and then read bytecode (__pycache__), as an installed package has it:
# a PYTHONDONTWRITEBYTECODE in the caller's environment would time compiling the sources.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, check=True)
    return time.perf_counter() - t0


def importtime(argv: list[str], top: int = 12) -> list[tuple[str, int]]:
    """The top-level imports of `argv` (a Python command) that cost most, cumulative us."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():  # the header, or not a report
            continue
        if parts[2].startswith("   "):  # nested: counted in its importer's cumulative time
            continue
        rows.append((parts[2].strip(), int(parts[1])))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.startup")
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--importtime", action="store_true", help="also each command's costliest top-level imports")
    ns = p.parse_args(argv)
    result: dict[str, Any] = {"bench": "startup", "load_average_start": [round(x, 1) for x in os.getloadavg()]}
    url, build = fleet_file(ns.runs)
    run = f"run-{ns.runs // 2:07d}"
    cli, how = entry()
    commands = {
        "anchor": [sys.executable, "-c", "pass"],
        "help": [*cli, "--help"],
        "show": [*cli, "--store", url, "show", run],
    }
    for k in ("help", "show"):  # the views caught up, the bytecode written: the rounds time a start
        timed(commands[k])
    times: dict[str, list[float]] = {k: [] for k in commands}
    names = list(commands)
    for i in range(ns.rounds):
        for k in names[i % len(names) :] + names[: i % len(names)]:  # rotating order
            times[k].append(timed(commands[k]))
    medians = {k: statistics.median(v) for k, v in times.items()}
    result.update(
        {
            "runs": ns.runs,
            "build_s": None if build is None else round(build, 1),
            "rounds": ns.rounds,
            "epochledger": how,
            "show_run": run,
            "median_ms": {k: round(v * 1000, 1) for k, v in medians.items()},
            "min_ms": {k: round(min(v) * 1000, 1) for k, v in times.items()},
            "ratio_to_anchor": {k: round(medians[k] / medians["anchor"], 2) for k in ("help", "show")},
            "goal_ratio": GOALS,
        }
    )
    if ns.importtime:
        result["importtime_top_cumulative_us"] = {k: importtime(commands[k]) for k in ("help", "show")}
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    emit(result)
    return result


if __name__ == "__main__":
    main()
