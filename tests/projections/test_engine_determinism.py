"""No fold, projection runner or replay reads the clock, randomness, uuids or the
environment (rules R1, O4): checked on the AST of the
read-side modules this engine added. The engine is timed from outside (CLI, bench)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = [
    "projections/engine.py",
    "projections/runs.py",
    "projections/failures.py",
    "projections/registry.py",
    "projections/decisions.py",
    "replay/pointintime.py",
    "replay/__init__.py",
    "replay/whatif.py",
    "replay/timeline.py",
]
FORBIDDEN_MODULES = {"time", "random", "uuid", "secrets"}
FORBIDDEN_ATTRS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("os", "environ"),
    ("os", "getenv"),
    ("os", "urandom"),
}


def violations(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in FORBIDDEN_ATTRS:
                found.append(f"{node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", MODULES)
def test_R1_read_side_reads_no_clock_randomness_or_environment(path: str) -> None:
    assert violations((ROOT / path).read_text()) == []


def test_R1_the_check_can_fail() -> None:
    got = violations("import time\nfrom datetime import datetime\nx = datetime.now()\ny = os.environ")
    assert sorted(got) == ["datetime.now", "import time", "os.environ"]
