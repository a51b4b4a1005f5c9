"""docs/service.md's plain-HTTP loops hold (rule H2: a scheduler in any language gets the
rules): each `curl` block of the page runs with bash against a real server, and prints
exactly the output the page shows after it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from epochledger import open_ledger
from tests.helpers.server import served

PAGE = Path(__file__).resolve().parents[2] / "docs" / "service.md"
BLOCK = re.compile(r"<!-- curl: (?P<name>[a-z-]+) -->\n```sh\n(?P<script>.*?)```\n```\n(?P<out>.*?)```", re.S)


def blocks() -> list[tuple[str, str, str]]:
    found = [(m["name"], m["script"], m["out"]) for m in BLOCK.finditer(PAGE.read_text())]
    assert {name for name, _, _ in found} >= {"startup", "engine", "tick"}, "docs/service.md lost a seed's loop"
    return found


@pytest.mark.parametrize(("name", "script", "out"), blocks(), ids=[b[0] for b in blocks()])
def test_H2_the_seeds_loops_over_plain_http(name: str, script: str, out: str, tmp_path: Path) -> None:
    for tool in ("curl", "jq"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (make test installs Debian's curl and jq as root)")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    open_ledger(url, init=True).close()
    with served(url) as base:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "BASE": base},
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == out, f"docs/service.md, block {name!r}: the page shows other output"
