"""Run every benchmark: `python -m bench [--size small|full]` (JSON on stdout).

small: a smoke run in seconds (toy sizes, not figures to quote).
full: the sizes docs/benchmarks.md quotes (several minutes; the 5M-event history is
generated once into /tmp and reused)."""

from __future__ import annotations

import argparse

from bench import append, memory, rebuild

SIZES = {
    "small": {
        "rebuild": ["--runs", "2000", "--repeat", "1"],
        "append": ["--single", "100", "--batches", "1"],
        "memory": ["--sizes", "2000x5"],
    },
    "full": {
        "rebuild": ["--runs", "40000", "--repeat", "3"],
        "append": ["--single", "1000", "--batches", "5"],
        "memory": ["--sizes", "1000000x5,200000x5,200000x25"],
    },
}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--size", choices=list(SIZES), default="full")
    ns = p.parse_args()
    args = SIZES[ns.size]
    rebuild.main(args["rebuild"])
    rebuild.main([*args["rebuild"], "--store", "postgresql"])
    append.main(args["append"])
    memory.main(args["memory"])


if __name__ == "__main__":
    main()
