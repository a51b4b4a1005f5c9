"""Docs are part of the feature: the catalogue page names every event the code knows,
and the README's first lines are the two fresh-machine commands."""

from __future__ import annotations

from pathlib import Path

from ledger import lifecycle
from ledger.events import TAGS

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


def test_docs_cli_reference_is_generated_from_the_help_texts() -> None:
    """docs/cli.md is `--help`, verbatim; and README's exit-code table is EXIT_CODES."""
    from epochledger.cli.reference import readme_with_exit_codes, render_reference

    assert (ROOT / "docs" / "cli.md").read_text() == render_reference(), (
        "docs/cli.md is stale: run `python -m epochledger.cli.reference --write`")
    readme = (ROOT / "README.md").read_text()
    assert readme_with_exit_codes(readme) == readme, "README's exit codes are stale: run the same command"


def test_every_command_has_a_whole_sentence_summary_and_an_example() -> None:
    from epochledger.cli.common import COMMANDS

    for name, handler, _ in COMMANDS:
        doc = handler.__doc__ or ""
        assert "Example:" in doc, f"{name}: --help has no example"
        from epochledger.cli import summary_line

        assert summary_line(doc).endswith("."), f"{name}: summary is not a whole sentence: {summary_line(doc)!r}"


def test_every_library_error_has_an_exit_code_and_the_most_specific_wins() -> None:
    import inspect

    from epochledger.cli import EXIT_CODES, exit_code
    from ledger import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.LedgerError)]
    assert len(classes) > 15
    assert {code for _, code, _ in EXIT_CODES} == set(range(12))
    assert exit_code(errors.StaleEpoch("r", None, "run.finished", "e", "why")) == 9
    assert exit_code(errors.CommitUnknown({}, "x")) == 11
    assert exit_code(errors.StreamGap("run:r", 2, 1, 3)) == 8
    assert exit_code(errors.NoSuchStore("u", "gone")) == 3
    assert not any(hasattr(c, "exit_code") for c in classes), "library errors carry no exit codes"
