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
from epochledger.ledger import errors
from tests.app.test_ndjson import GOOD, lines


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
    (
        ["correct", "r3", "--to", "failed", "--actor", "a", "--reason", "x", "--json"],
        5,
        "IllegalTransition",
        {"run": "r3", "status": "failed", "attempted": "run.corrected"},
    ),
    (["correct", "r3", "--to", "bogus", "--actor", "a", "--reason", "x", "--json"], 2, "UsageError", {}),
    (["show", "--json"], 2, "UsageError", {}),
    (["replay", "--position", "-1", "--json"], 3, "InvalidInput", {"where": "--position"}),
    (["audit", "query", "DELETE FROM events", "--format", "json"], 3, "InvalidInput", {}),
    (["runs", "--json", "--where", "no_such_predicate"], 2, "UsageError", {}),
]


@pytest.mark.parametrize(("argv", "code", "kind", "fields"), JSON_ERRORS, ids=[" ".join(a) for a, *_ in JSON_ERRORS])
def test_L4_under_json_an_error_is_one_json_object_on_stderr(
    store: str, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, kind: str, fields: dict[str, object]
) -> None:
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
    assert err.startswith("usage: epochledger show") and err.endswith(
        "error: the following arguments are required: run\n"
    )


def test_L4_the_json_fields_are_the_errors_own_attributes() -> None:
    """One encoder for every command: the fields are the LedgerError subclass's
    structured attributes (a kept command or a batch, which are objects, are left out)."""
    gap = errors.StreamGap("run:r", 2, 1, 3)
    assert error_fields(gap) == {"stream": "run:r", "missing": 2, "after": 1, "before": 3}
    stale = errors.StaleEpoch("r", "running", "run.finished", "w.e1", "superseded", evidence=object())
    assert error_fields(stale) == {
        "run": "r",
        "status": "running",
        "attempted": "run.finished",
        "why": "stale epoch 'w.e1': superseded",
        "epoch": "w.e1",
        "kept_at": None,
    }
    unsure = errors.CommitUnknown({"run:a": (1, 2)}, "reset", appends=(object(),))
    assert error_fields(unsure) == {"versions": {"run:a": [1, 2]}, "error": "reset"}
    assert error_fields(errors.InvalidInput("bad \udc80", where="r\udc80")) == {"where": "r\\udc80"}
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.LedgerError)]
    assert all(exit_code(c.__new__(c)) in {code for _, code, _ in EXIT_CODES} for c in classes)


# ---------------------------------------------------------------- Ctrl-C
def _cli(*argv: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "epochledger", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )  # type: ignore[call-overload]


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
    done = subprocess.run(
        [sys.executable, "-m", "epochledger", "--store", store, "verify", "--json"], capture_output=True, check=True
    )
    assert json.loads(done.stdout)["chain"]["links"] in (0, 60_000)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_L4_ctrl_c_stops_follow_with_one_line_and_exit_130(store_url: str) -> None:
    """On both stores: SQLite's polling loop, PostgreSQL's LISTEN thread (which must end
    with it, or the process would not exit). Ctrl-C comes once `follow` says it waits (a
    fixed delay raced the start on a loaded machine)."""
    store = store_url
    assert main(["--store", store, "init"]) == 0
    code, screen, _ = _on_a_terminal(["--store", store, "follow"], interrupt_when=b"(Ctrl-C to stop)")
    assert (code, b"Traceback" in screen) == (INTERRUPTED, False), screen[-400:]
    assert screen.endswith(
        b"\r\x1b[Kepochledger: Interrupted: interrupted (Ctrl-C); a write is all or nothing: an "
        b"interrupted one landed whole or not at all\r\n"
    ), repr(screen[-300:])


# ---------------------------------------------------------------- progress
def _on_a_terminal(
    argv: list[str], *, interrupt_after: float | None = None, interrupt_when: bytes | None = None
) -> tuple[int, bytes, bytes]:
    """Run the command with standard error on a real pseudo-terminal (standard output
    a pipe); returns (exit code, what the terminal got, standard output). Ctrl-C
    (SIGINT) is sent `interrupt_after` seconds in, or once the terminal shows
    `interrupt_when` (what a user waits to see: no guess of how long a loaded machine takes)."""
    import pty
    import select

    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "epochledger", *argv], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL
    )
    os.close(slave)
    screen = b""
    start = time.monotonic()
    try:
        while True:
            due = interrupt_after is not None and time.monotonic() - start > interrupt_after
            if (due or (interrupt_when is not None and interrupt_when in screen)) and child.poll() is None:
                child.send_signal(signal.SIGINT)
                interrupt_after = interrupt_when = None
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not chunk:
                    break
                screen += chunk
            elif child.poll() is not None:
                break
            assert time.monotonic() - start < 120, screen[-400:]
        out, _ = child.communicate(timeout=60)
    finally:
        os.close(master)
    return child.returncode, screen, out


def test_I1_a_long_import_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """Repro (before the fix): an import of 180k events showed nothing for 21 s. Now a
    progress line on the terminal (lines read, the share of the file, then committing),
    cleared before the result; none with --quiet, none when stderr is not a terminal."""
    history = _history(tmp_path / "big.ndjson", 20_000)
    store = str(tmp_path / "l.db")
    assert main(["--store", store, "init"]) == 0
    code, screen, out = _on_a_terminal(["--store", store, "import", str(history)])
    assert code == 0 and b"imported 20000 events" in out, (out, screen[-400:])
    assert b"import: 1,024 lines read (" in screen and b"% of the file)" in screen, screen[:400]
    assert b"20,000 lines read; checking and committing them" in screen and screen.endswith(b"\r\x1b[K"), screen[-200:]
    store2 = str(tmp_path / "quiet.db")
    assert main(["--store", store2, "init"]) == 0
    code, screen, out = _on_a_terminal(["--store", store2, "import", str(history), "--quiet"])
    assert (code, screen) == (0, b"") and b"imported 20000 events" in out
    piped = subprocess.run(
        [sys.executable, "-m", "epochledger", "--store", str(tmp_path / "piped.db"), "init"],
        capture_output=True,
        check=True,
    )
    piped = subprocess.run(
        [sys.executable, "-m", "epochledger", "--store", str(tmp_path / "piped.db"), "import", str(history)],
        capture_output=True,
        check=True,
    )
    assert piped.stderr == b"" and b"imported 20000 events" in piped.stdout


def test_R3_follow_shows_where_it_is_on_a_terminal(tmp_path: Path) -> None:
    """Repro (before the fix): `follow` printed nothing until an event came. Now the
    terminal shows the catch-up and then where the views are, waiting; the batches it
    applied are on standard output; Ctrl-C ends it with one line, exit 130."""
    store = str(tmp_path / "l.db")
    assert main(["--store", store, "init"]) == 0
    assert main(["--store", store, "import", str(_history(tmp_path / "h.ndjson", 3_000))]) == 0
    code, screen, out = _on_a_terminal(["--store", store, "follow"], interrupt_when=b"waiting for events")
    assert code == INTERRUPTED and b"Traceback" not in screen, screen[-400:]
    assert b"following sqlite:///" in screen and b"the log at position 3000" in screen, screen[:400]
    assert b"views at position 3000, waiting for events (Ctrl-C to stop)" in screen, screen[-400:]
    assert b"runs +3000 -> 3000" in out, out
    assert screen.endswith(
        b"\r\x1b[Kepochledger: Interrupted: interrupted (Ctrl-C); a write is all or nothing: an "
        b"interrupted one landed whole or not at all\r\n"
    ), screen[-300:]


# ---------------------------------------------------------------- the demo
def test_L4_the_demo_ends_with_commands_that_run_as_printed(tmp_path: Path) -> None:
    """Repro (before the fix): after `make demo` the next commands failed (NoSuchStore:
    the demo writes epochledger-demo.db, the default store is epochledger.db; and the
    `epochledger` printed is not on PATH outside the venv). Every command the demo
    prints runs, as printed, from where the demo ran, with PATH not naming the venv."""
    script = Path(sys.executable).parent / "epochledger"
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (not installed with pip)")
    env = {k: v for k, v in os.environ.items() if k != "EPOCHLEDGER_STORE"} | {"PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(script), "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    commands = [line.split("    #")[0].strip() for line in done.stdout.splitlines() if line.startswith("  ")]
    assert len(commands) == 8 and all("--store epochledger-demo.db" in c for c in commands), done.stdout
    for command in commands:
        ran = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert ran.returncode == 0 and ran.stdout, (command, ran.returncode, ran.stderr)
    assert "export EPOCHLEDGER_STORE=epochledger-demo.db" in done.stdout
