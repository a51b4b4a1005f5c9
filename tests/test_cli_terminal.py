"""What a person meets at the command line (rule L4: a typed error naming what and
where, a documented exit code, never a traceback): errors as one JSON object under
--json, Ctrl-C as one line and exit 130, progress on a terminal only, the demo's
next commands."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from epochledger.cli import EXIT_CODES, INTERRUPTED, error_fields, exit_code, main
from ledger import errors
from tests.test_ndjson import GOOD, lines


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "l.db")
    assert main(["--store", path, "init"]) == 0
    history = tmp_path / "history.ndjson"
    history.write_bytes(b"".join(lines(GOOD)))
    assert main(["--store", path, "import", str(history)]) == 0
    return path


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # a usage error, as argparse's own
        assert isinstance(e.code, int)
        return e.code


# (argv, exit code, error type, fields it must carry)
JSON_ERRORS = [
    (["show", "nope", "--json"], 4, "RunNotFound", {"run": "nope", "deleted": False}),
    (["--store", "mysql://x", "runs", "--json"], 3, "InvalidInput", {"where": "store URL"}),
    (["show", "r2", "--json"], 4, "RunNotFound", {"run": "r2", "deleted": True}),
    (["correct", "r3", "--to", "failed", "--actor", "a", "--reason", "x", "--json"], 5, "IllegalTransition",
     {"run": "r3", "status": "failed", "attempted": "run.corrected"}),
    (["correct", "r3", "--to", "bogus", "--actor", "a", "--reason", "x", "--json"], 2, "UsageError", {}),
    (["show", "--json"], 2, "UsageError", {}),
    (["replay", "--position", "-1", "--json"], 3, "InvalidInput", {"where": "--position"}),
    (["audit", "query", "DELETE FROM events", "--format", "json"], 3, "InvalidInput", {}),
    (["runs", "--json", "--where", "no_such_predicate"], 2, "UsageError", {}),
]


@pytest.mark.parametrize(("argv", "code", "kind", "fields"), JSON_ERRORS, ids=[" ".join(a) for a, *_ in JSON_ERRORS])
def test_L4_under_json_an_error_is_one_json_object_on_stderr(store: str, capsys: pytest.CaptureFixture[str],
                                                             argv: list[str], code: int, kind: str,
                                                             fields: dict[str, object]) -> None:  # fmt: skip
    """Repro (before the fix): with --json an error was a line of text on stderr, so
    `jq` read nothing and exited 0. Now: one JSON object, its type, message, exit code
    and the fields the error carries; nothing on stdout."""
    if "--store" not in argv:
        argv = ["--store", store, *argv]
    assert _main(argv) == code
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("\n") and err.count("\n") == 1, err
    record = json.loads(err)
    assert record["error"] == kind and record["exit_code"] == code and record["message"], record
    assert fields.items() <= record["fields"].items(), record


def test_L4_without_json_errors_stay_one_line_of_text(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", store, "show", "nope"]) == 4
    assert capsys.readouterr().err == "epochledger: RunNotFound: run 'nope' not found\n"
    assert _main(["--store", store, "show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: epochledger show") and err.endswith("error: the following arguments are required: run\n")


def test_L4_the_json_fields_are_the_errors_own_attributes() -> None:
    """One encoder for every command: the fields are the LedgerError subclass's
    structured attributes (a kept command or a batch, which are objects, are left out)."""
    gap = errors.StreamGap("run:r", 2, 1, 3)
    assert error_fields(gap) == {"stream": "run:r", "missing": 2, "after": 1, "before": 3}
    stale = errors.StaleEpoch("r", "running", "run.finished", "w.e1", "superseded", evidence=object())
    assert error_fields(stale) == {"run": "r", "status": "running", "attempted": "run.finished",
                                   "why": "stale epoch 'w.e1': superseded", "epoch": "w.e1", "kept_at": None}  # fmt: skip
    unsure = errors.CommitUnknown({"run:a": (1, 2)}, "reset", appends=(object(),))
    assert error_fields(unsure) == {"versions": {"run:a": [1, 2]}, "error": "reset"}
    assert error_fields(errors.InvalidInput("bad \udc80", where="r\udc80")) == {"where": "r\\udc80"}
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.LedgerError)]
    assert all(exit_code(c.__new__(c)) in {code for _, code, _ in EXIT_CODES} for c in classes)


# ---------------------------------------------------------------- Ctrl-C
def _cli(*argv: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "epochledger", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]  # fmt: skip


def _history(path: Path, runs: int) -> Path:
    with open(path, "w") as f:
        for i in range(runs):
            f.write(json.dumps({"type": "run.queued", "at": "2026-09-09T14:00:00Z", "run": f"r{i}"}) + "\n")
    return path


def _interrupt(child: subprocess.Popen[bytes], after: float) -> tuple[int, str]:
    time.sleep(after)
    assert child.poll() is None, "the command ended before it could be interrupted"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    return child.returncode, err.decode()


def test_L4_ctrl_c_during_a_long_import_is_one_line_exit_130_and_nothing_half_written(tmp_path: Path) -> None:
    """Repro (before the fix): SIGINT printed a Python traceback (exit 1), and 130 was
    in no table. Now one line, exit 130; the import's one transaction landed whole or
    not at all, and the ledger verifies."""
    store = str(tmp_path / "l.db")
    assert main(["--store", store, "init"]) == 0
    history = _history(tmp_path / "big.ndjson", 60_000)
    code, err = _interrupt(_cli("--store", store, "import", str(history)), after=1.5)
    assert (code, err.count("\n"), "Traceback" in err) == (INTERRUPTED, 1, False), err
    assert err.startswith("epochledger: Interrupted: interrupted (Ctrl-C)")
    done = subprocess.run([sys.executable, "-m", "epochledger", "--store", store, "verify", "--json"],
                          capture_output=True, check=True)  # fmt: skip
    assert json.loads(done.stdout)["chain"]["links"] in (0, 60_000)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_L4_ctrl_c_stops_follow_with_one_line_and_exit_130(tmp_path: Path) -> None:
    store = str(tmp_path / "l.db")
    assert main(["--store", store, "init"]) == 0
    code, err = _interrupt(_cli("--store", store, "follow"), after=1.5)
    assert (code, err.count("\n"), "Traceback" in err) == (INTERRUPTED, 1, False), err
