"""Docs are part of the feature: the catalogue page names every event the code knows,
and the README's first lines are the two fresh-machine commands."""

from __future__ import annotations

from pathlib import Path

from ledger.events import TAGS
from ledger import lifecycle

ROOT = Path(__file__).resolve().parent.parent


def test_every_event_tag_is_in_the_catalogue_doc() -> None:
    doc = (ROOT / "docs" / "events.md").read_text()
    missing = [tag for tag in TAGS if f"`{tag}`" not in doc]
    assert not missing, f"docs/events.md lacks {missing}"


def test_every_run_event_has_a_transition_entry() -> None:
    assert {t for t in TAGS if t.startswith("run.")} == set(lifecycle.TRANSITIONS)


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().splitlines()[:6]
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
