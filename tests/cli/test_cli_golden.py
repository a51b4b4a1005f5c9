"""Golden CLI output: the exact bytes every read command prints with --json, on fixed,
deterministic ledgers, compared byte for byte with tests/golden/cli/*.json.

They pin what a script or a dashboard parses today, so that a refactor of the facade
below the CLI (rule C1) cannot change a field, its
order or its formatting unnoticed. The ledgers:

- ``demo``: the demo day (``epochledger demo``: ManualClock, seeded randomness), with
  its redeploy, fenced report, pause, cancel and clock step;
- ``audit``: tests/golden/audit_history.ndjson (tests/golden/README.md), imported;
- ``orphans``: tests/golden/cli_orphans_streaks.ndjson, imported: a run stranded on a
  superseded epoch (an orphan by rule O2, never swept) and an open tick streak (T3).

Two things a run cannot fix are normalised before the comparison, and only these: the
temporary directory the ledgers live in (audit sync/status/export-parquet print paths)
becomes ``<tmp>``, and a digest's ``at`` (the wall clock at the time it is taken, by
design: rule S1) becomes ``<wall clock>``.

A change of output that is intended is regenerated, and the diff reviewed, with

    .venv/bin/python -m tests.cli.test_cli_golden

which rewrites every file under tests/golden/cli/ from the same cases.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

from epochledger.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CLI_GOLDEN = GOLDEN / "cli"

# (case name, ledger, arguments after --store). Every read command with --json, and the
# filters of `runs`; the case name is the golden file's name.
CASES: list[tuple[str, str, list[str]]] = [
    ("demo-show-paused", "demo", ["show", "hourly-sync-0007", "--json"]),
    ("demo-show-fenced", "demo", ["show", "backfill-redeploy", "--json"]),
    ("demo-show-no-catch-up", "demo", ["show", "nightly-long", "--json", "--no-catch-up"]),
    ("demo-runs", "demo", ["runs", "--json"]),
    ("demo-runs-status", "demo", ["runs", "--status", "failed", "--status", "cancelled", "--json"]),
    ("demo-runs-where", "demo", ["runs", "--where", "can_auto_resume", "--json"]),
    ("demo-runs-code", "demo", ["runs", "--code", "UNKNOWN", "--json"]),
    ("demo-runs-code-where", "demo", ["runs", "--where", "is_terminal_resumable", "--code", "TIMEOUT", "--json"]),
    ("demo-runs-orphaned", "demo", ["runs", "--orphaned", "--json"]),
    ("demo-runs-streaking", "demo", ["runs", "--streaking", "--json"]),
    ("demo-history-paused", "demo", ["history", "hourly-sync-0007", "--json"]),
    ("demo-history-fenced", "demo", ["history", "backfill-redeploy", "--json"]),
    ("demo-history-clock-step", "demo", ["history", "report-adhoc", "--json"]),
    ("demo-epochs", "demo", ["epochs", "--json"]),
    ("demo-epochs-process", "demo", ["epochs", "--process", "worker-1", "--json"]),
    ("demo-epochs-live", "demo", ["epochs", "--live", "--json"]),
    ("demo-tick-health", "demo", ["tick-health", "--json"]),
    ("demo-verify", "demo", ["verify", "--json"]),
    ("demo-chain", "demo", ["chain", "--json"]),
    ("demo-digest", "demo", ["digest"]),
    ("demo-replay-position", "demo", ["replay", "--position", "50", "--json"]),
    ("demo-replay-at", "demo", ["replay", "--at", "2026-09-09T14:20:30Z", "--json"]),
    ("demo-replay-event-time", "demo", ["replay", "--at", "2026-09-09T16:05:00Z", "--by", "event-time", "--json"]),
    ("demo-parked", "demo", ["parked", "--json"]),
    ("demo-whatif-flat-age", "demo", ["whatif", "--policy", "flat-age:30m", "--json"]),
    ("demo-whatif-clamp", "demo", ["whatif", "--policy", "clamp", "--json"]),
    ("demo-whatif-at", "demo", ["whatif", "--policy", "heartbeat:5m", "--at", "2026-09-09T15:00:00Z", "--json"]),
    ("demo-audit-sync", "demo", ["audit", "sync", "--json"]),
    ("demo-audit-status", "demo", ["audit", "status", "--json"]),
    ("demo-audit-report-failure-codes", "demo", ["audit", "report", "failure_codes", "--json"]),
    (
        "demo-audit-query",
        "demo",
        ["audit", "query", "SELECT status, count(*) AS n FROM runs GROUP BY ALL ORDER BY ALL", "--json"],
    ),
    ("demo-audit-export-parquet", "demo", ["audit", "export-parquet", "{tmp}/parquet", "--json"]),
    ("audit-runs-label", "audit", ["runs", "--label", "team=ops", "--json"]),
    ("audit-show-dead-lettered", "audit", ["show", "i", "--json"]),
    ("audit-show-corrected", "audit", ["show", "c", "--json"]),
    ("audit-history-corrected", "audit", ["history", "c", "--json"]),
    ("audit-tick-health", "audit", ["tick-health", "--json"]),
    ("audit-epochs", "audit", ["epochs", "--json"]),
    ("audit-whatif-floor", "audit", ["whatif", "--policy", "floor:30m", "--json"]),
    ("audit-audit-sync", "audit", ["audit", "sync", "--json"]),
    (
        "audit-audit-report-time-in-status",
        "audit",
        ["audit", "report", "time_in_status", "--as-of", "2026-09-10T23:59:59Z", "--json"],
    ),
    (
        "audit-audit-report-by-label",
        "audit",
        ["audit", "report", "failures_by_label", "--label", "team", "--as-of", "2026-09-10T23:59:59Z", "--json"],
    ),
    (
        "audit-audit-report-failure-codes-week",
        "audit",
        ["audit", "report", "failure_codes", "--period", "week", "--as-of", "2026-09-10T23:59:59Z", "--json"],
    ),
    ("orphans-runs-orphaned", "orphans", ["runs", "--orphaned", "--json"]),
    ("orphans-runs-streaking", "orphans", ["runs", "--streaking", "--json"]),
    ("orphans-runs-orphaned-label", "orphans", ["runs", "--orphaned", "--label", "team=data", "--json"]),
    ("orphans-tick-health", "orphans", ["tick-health", "--json"]),
    ("orphans-epochs-live", "orphans", ["epochs", "--live", "--json"]),
    ("orphans-show-stranded", "orphans", ["show", "stranded", "--json"]),
    ("orphans-show-streaking", "orphans", ["show", "flaky", "--json"]),
    ("orphans-whatif-epoch", "orphans", ["whatif", "--policy", "epoch", "--json"]),
]

# The audit cases sync first (a report reads what `audit sync` copied): the order of
# CASES is the order the commands run in, per ledger.
LEDGERS = ("demo", "audit", "orphans")
_DIGEST_AT = re.compile(r'"at":"[^"]*"')


def _run(args: list[str]) -> tuple[int, str]:
    """`main(args)` in this process, its standard output as the bytes a pipe would get
    (out_json writes to sys.stdout.buffer, print to the text layer: both land, in order)."""
    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=True)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
        stdout.flush()
    return code, raw.getvalue().decode("utf-8")


def _make_ledger(name: str, tmp: Path) -> str:
    store = str(tmp / f"{name}.db")
    if name == "demo":
        code, _ = _run(["demo", "--store", store])
    else:
        history = {"audit": "audit_history.ndjson", "orphans": "cli_orphans_streaks.ndjson"}[name]
        assert _run(["--store", store, "init"])[0] == 0
        code, _ = _run(["--store", store, "import", str(GOLDEN / history)])
    assert code == 0, f"could not build the {name} ledger"
    return store


def _normalise(case: str, text: str, tmp: Path) -> str:
    text = text.replace(str(tmp), "<tmp>")
    if case.endswith("-digest"):
        text = _DIGEST_AT.sub('"at":"<wall clock>"', text)
    return text


def render_all(tmp: Path) -> dict[str, str]:
    """Every case's normalised standard output, run in the order of CASES."""
    stores = {name: _make_ledger(name, tmp) for name in LEDGERS}
    outputs: dict[str, str] = {}
    for case, ledger, args in CASES:
        argv = ["--store", stores[ledger], *(a.replace("{tmp}", str(tmp)) for a in args)]
        code, out = _run(argv)
        assert code == 0, f"{case}: exit {code}"
        outputs[case] = _normalise(case, out, tmp)
    return outputs


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render_all(tmp_path_factory.mktemp("golden-cli"))


@pytest.mark.parametrize("case", [c for c, _, _ in CASES])
def test_C1_cli_json_output_is_byte_identical_to_its_golden_file(rendered: dict[str, str], case: str) -> None:
    expected = (CLI_GOLDEN / f"{case}.json").read_bytes()
    assert rendered[case].encode() == expected, (
        f"{case}: output changed; if intended, regenerate (see the module docstring)"
    )


def test_C1_every_golden_file_is_a_case() -> None:
    """A golden file no case writes would be checked by nothing."""
    assert sorted(p.stem for p in CLI_GOLDEN.glob("*.json")) == sorted(c for c, _, _ in CASES)


def test_C1_the_golden_ledgers_are_deterministic(tmp_path: Path) -> None:
    """Two builds of the demo ledger print the same bytes: the goldens cannot be flaky."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _make_ledger("demo", tmp_path / "a"), _make_ledger("demo", tmp_path / "b")
    for args in (["runs", "--json"], ["chain", "--json"], ["epochs", "--json"]):
        assert _run(["--store", first, *args])[1] == _run(["--store", second, *args])[1]


def regenerate() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outputs = render_all(Path(tmp))
    CLI_GOLDEN.mkdir(exist_ok=True)
    for stale in CLI_GOLDEN.glob("*.json"):
        stale.unlink()
    for case, text in outputs.items():
        (CLI_GOLDEN / f"{case}.json").write_bytes(text.encode())
    print(f"wrote {len(outputs)} files to {CLI_GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    regenerate()
