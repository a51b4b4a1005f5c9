"""docs/tick.md's scheduler-loop example must run as written (rules T1-T3)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "tick.md"


def test_T1_T2_docs_tick_example_runs(capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "docs_tick_example"})
    out = capsys.readouterr().out
    assert "poison-1 dead-lettered: tick deadline exceeded" in out
    assert "nightly" not in out  # the healthy runs never fail
