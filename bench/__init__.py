"""Benchmarks: `python -m bench` (all), or one of `python -m bench.rebuild`,
`bench.append`, `bench.memory`. Each prints JSON; every goal has its anchor measured
in the same run. Results and the exact commands: docs/benchmarks.md. Never run by the
test suite."""
