"""The public face (docs/architecture.md): everything a user imports comes from
`epochledger`, typed, and the wheel installs the four layers and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import epochledger
from epochledger import EpochState, SweepReport

ROOT = Path(__file__).resolve().parents[2]

USER_SCRIPT = """
from datetime import UTC, datetime
from typing import assert_type

from epochledger import EpochState, ManualClock, RunState, SweepReport, TickDriver, is_terminal, open_ledger

with open_ledger("sqlite:///user.db", clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC))) as ledger:
    epoch, report = ledger.startup("worker-1")
    assert_type(epoch, EpochState)
    assert_type(report, SweepReport)
    assert_type(ledger.boot("worker-2"), EpochState)
    assert_type(ledger.queue("r1", workflow="nightly"), RunState)
    started = ledger.start("r1", epoch=epoch)
    assert_type(started, RunState)
    assert_type(is_terminal(started.status) or is_terminal("finished"), bool)
    assert_type(ledger.sweep(epoch.epoch), SweepReport)
    driver = TickDriver(ledger, [("advance", lambda run: None)], epoch=epoch)
    ledger.stop(epoch)
"""


def test_the_public_names_are_importable_from_epochledger() -> None:
    for name in epochledger.__all__:
        assert hasattr(epochledger, name), name
    for name in (
        "open_ledger",
        "Ledger",
        "Batch",
        "TickDriver",
        "Status",
        "is_terminal",
        "can_auto_resume",
        "ManualClock",
        "SystemClock",
        "LedgerError",
        "ConflictError",
        "StaleEpoch",
    ):
        assert name in epochledger.__all__, name


def test_a_users_code_type_checks_strictly_against_the_installed_package(tmp_path: Path) -> None:
    """The API's returns are typed (boot/startup give the epoch's state and the sweep
    report; sweep takes the state or the id): `assert_type` fails under mypy if a
    return is Any. Mutation caught: `startup()` or `sweep()` annotated Any again."""
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    # MYPYPATH: mypy cannot follow the import hook of an editable install (PEP 660); a
    # wheel install needs none. The wheel test below checks that py.typed ships.
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stderr


def test_sweep_takes_the_epochs_state_or_its_id(tmp_path: Path) -> None:
    """Repro (before the fix): `sweep(boot.epoch)` failed with a bare AttributeError."""
    with epochledger.open_ledger(str(tmp_path / "l.db")) as ledger:
        booted = ledger.boot("worker-1")
        assert isinstance(booted, EpochState)
        for epoch in (booted, booted.epoch):
            report = ledger.sweep(epoch)
            assert isinstance(report, SweepReport) and (report.process, report.epoch) == ("worker-1", booted.epoch)


def test_the_wheel_installs_the_four_layers_and_nothing_else(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted({n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}) == [
        "epochledger",
        "ledger",
        "projections",
        "replay",
    ]
    assert {f"{p}/py.typed" for p in ("epochledger", "ledger", "projections", "replay")} <= set(names)
    assert "projections/audit/views.sql" in names
