"""docs/forensics.md is part of the features (rules R4, V1): every command its walk-through
and its sections ask a reader to paste runs, against the demo, and says what the doc
says it says."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from epochledger.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "forensics.md"
SECTIONS = (
    "## What-if (rule R4)",
    "## The incident picture (rule V1)",
    "## Walk-through: the demo's incident, from the page to the SQL",
)


def _commands() -> list[str]:
    text = DOC.read_text()
    out: list[str] = []
    for heading in SECTIONS:
        start = text.index(heading + "\n")
        end = text.find("\n## ", start + len(heading))
        body = text[start : end if end >= 0 else len(text)]
        for block in re.findall(r"```sh\n(.*?)```", body, re.S):
            out += [line.strip() for line in block.splitlines() if line.strip()]
    return out


def test_R4_V1_every_command_of_the_walk_through_runs_against_the_demo(tmp_path, monkeypatch, capsys) -> None:
    commands = _commands()
    assert len(commands) >= 15 and commands[0].startswith("epochledger demo")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EPOCHLEDGER_STORE", raising=False)
    outputs: dict[str, str] = {}
    for line in commands:
        words = shlex.split(line, comments=True)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            monkeypatch.setenv(name, value)
            continue
        assert words[0] == "epochledger", line
        code = main(words[1:])
        out, err = capsys.readouterr()
        assert code == 0, f"{line}: exit {code}: {err}"
        outputs[line] = out
    assert os.path.getsize(tmp_path / "incident.html") > 10_000
    said = "\n".join(outputs.values())
    # what the walk-through says the commands show
    for claim in (
        "killed-live nightly-long",
        "late        backfill-redeploy",
        "killed-live report-adhoc",
        "missed      backfill-redeploy",
        "0 verdicts differ",
        "O2-superseded",
        "stepped back",
        "automation may not resume this run",
    ):
        assert claim in said, claim


def test_V1_the_readme_links_the_incident_picture() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docs/incident-timeline.png" in readme and "docs/forensics.md" in readme
    with open(ROOT / "docs" / "incident-timeline.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("section", SECTIONS)
def test_R4_V1_the_sections_are_there(section) -> None:
    assert section + "\n" in DOC.read_text()
