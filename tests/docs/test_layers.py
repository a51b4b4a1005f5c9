"""The layers hold (docs/architecture.md): the import-linter contracts in pyproject.toml,
run here so that the suite fails on a folder-level circle or an upward import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("epochledger", "ledger", "projections", "replay")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_are_kept() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0 and "0 broken" in done.stdout, done.stdout + done.stderr


def test_the_contracts_catch_an_upward_import(tmp_path: Path) -> None:
    """Guards the guard: a read-side module importing the application breaks them."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "projections" / "probe.py").write_text("from epochledger.app import Ledger\n")
    done = _lint(tmp_path)
    assert done.returncode != 0 and "BROKEN" in done.stdout and "projections.probe" in done.stdout, done.stdout


def test_I3_only_the_dagster_importer_may_import_dagster(tmp_path: Path) -> None:
    """Guards the guard: Dagster is an optional extra, so a core module importing it
    breaks the contract (the core must work without `epochledger[dagster]`)."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "epochledger" / "probe_dagster.py").write_text("import dagster\n")
    done = _lint(tmp_path)
    assert done.returncode != 0 and "epochledger.probe_dagster -> dagster" in done.stdout, done.stdout


def test_O5_the_sweep_never_imports_the_application(tmp_path: Path) -> None:
    """Guards the guard: the sweep takes a SweepTarget (epochledger/sweep.py), so a
    back-import of the Ledger, even one only for the type checker, is a circle
    app <-> sweep and breaks the contract."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    sweep = tmp_path / "epochledger" / "sweep.py"
    sweep.write_text(sweep.read_text() + "\nif TYPE_CHECKING:\n    from epochledger.app import Ledger\n")
    done = _lint(tmp_path)
    assert done.returncode != 0 and "epochledger.sweep -> epochledger.app" in done.stdout, done.stdout


@pytest.mark.parametrize("module", ["probe", "retire"])
def test_O7_O8_the_probe_and_retirement_never_import_the_application(tmp_path: Path, module: str) -> None:
    """Guards the guard: the probe takes a ProbeTarget and retirement a RetireTarget
    (epochledger/probe.py, epochledger/retire.py), so a back-import of the Ledger, even
    one only for the type checker, is a circle app <-> probe or app <-> retire and
    breaks the contract."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    source = tmp_path / "epochledger" / f"{module}.py"
    source.write_text(
        source.read_text()
        + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from epochledger.app import Ledger\n"
    )
    done = _lint(tmp_path)
    assert done.returncode != 0 and f"epochledger.{module} -> epochledger.app" in done.stdout, done.stdout


def test_O5_the_sweep_never_imports_the_facades_pieces(tmp_path: Path) -> None:
    """Guards the guard: the write path, the state cache and the epoch lookup moved
    out of epochledger/app.py (the facade by job), and the sweep may import them no
    more than the facade, so the contract names each. The state cache imports nothing
    of the facade, so only that name catches it (the write path and the epoch lookup
    name the Ledger for the type checker: a back-import of either is also a chain to
    epochledger.app)."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    sweep = tmp_path / "epochledger" / "sweep.py"
    sweep.write_text(sweep.read_text() + "\nif TYPE_CHECKING:\n    from epochledger.cache import StateCache\n")
    done = _lint(tmp_path)
    assert done.returncode != 0 and "epochledger.sweep -> epochledger.cache" in done.stdout, done.stdout


def test_H1_the_cli_never_reaches_past_the_facade(tmp_path: Path) -> None:
    """Guards the guard: a CLI command is parse, one facade call, render (rule H1), so a
    command importing the projection engine (as `rebuild` did, to time its own rebuild
    and catch-up) or the store breaks the contract."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    views = tmp_path / "epochledger" / "cli" / "views.py"
    views.write_text(views.read_text() + "\nfrom projections import engine\nfrom ledger.store import Store\n")
    done = _lint(tmp_path)
    assert done.returncode != 0 and "epochledger.cli.views -> projections.engine" in done.stdout, done.stdout
    assert "epochledger.cli.views -> ledger._store" in done.stdout, done.stdout
