"""Docs are part of the feature: the catalogue page names every event the code knows,
and the README's first lines are the two fresh-machine commands."""

from __future__ import annotations

from pathlib import Path

from epochledger.ledger import lifecycle
from epochledger.ledger.events import TAGS

ROOT = Path(__file__).resolve().parents[2]


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
        "docs/cli.md is stale: run `python -m epochledger.cli.reference --write`"
    )
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
    from epochledger.ledger import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.LedgerError)]
    assert len(classes) > 15
    codes = [code for _, code, _ in EXIT_CODES]
    assert len(codes) == len(set(codes)) and set(range(11)) <= set(codes)
    assert exit_code(errors.StaleEpoch("r", None, "run.finished", "e", "why")) == 9
    assert exit_code(errors.CommitUnknown({}, "x")) == 13
    assert exit_code(errors.StreamGap("run:r", 2, 1, 3)) == 8
    assert exit_code(errors.NoSuchStore("u", "gone")) == 3
    assert not any(hasattr(c, "exit_code") for c in classes), "library errors carry no exit codes"


def test_nothing_cites_documents_outside_the_repository() -> None:
    """Code, tests, docs, SQL and golden data cite docs/rules.md ids, never BRIEF or
    STYLE.md (which are not in the repository). Mutation caught: a new "(BRIEF O2)"."""
    import re

    pattern = re.compile(r"\bBRIEF\b|STYLE\.md")
    offending = []
    for path in ROOT.rglob("*"):
        if not path.is_file() or any(
            p in path.parts for p in (".venv", "mutants", ".git", ".hypothesis", "__pycache__")
        ):
            continue
        if path.suffix not in (".py", ".md", ".sql", ".ndjson", ".json", ".toml") and path.name not in (
            "Makefile",
            "run",
        ):
            continue
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if pattern.search(line):
                offending.append(f"{path.relative_to(ROOT)}:{number}")
    assert not offending, offending


RULE_IDS = [  # in the book's order (docs/rules.md)
    *(f"L{i}" for i in range(1, 9)),
    *(f"P{i}" for i in range(1, 5)),
    *(f"O{i}" for i in range(1, 11)),
    "F1",
    "F2",
    *(f"I{i}" for i in range(1, 5)),
    "W1",
    "W2",
    *(f"T{i}" for i in range(1, 8)),
    *(f"R{i}" for i in range(1, 5)),
    "A1",
    "S1",
    "V1",
    "V2",
    "C1",
    "C2",
    "H1",
    "H2",
    "H3",
    "H4",
    "H5",
    "H6",
    "H7",
    "H8",
    "H9",
    "H10",
    "H11",
    "E1",
]


def _rules() -> dict[str, str]:
    import re

    text = (ROOT / "docs" / "rules.md").read_text()
    parts = re.split(r"^### ([A-Z][0-9]+) ", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_docs_rules_defines_every_rule_once() -> None:
    import re

    text = (ROOT / "docs" / "rules.md").read_text()
    assert re.findall(r"^### ([A-Z][0-9]+) ", text, flags=re.M) == RULE_IDS


def test_docs_rules_names_tests_that_exist_and_each_enforced_rule_has_one() -> None:
    """Every test reference in docs/rules.md exists; every rule that is enforced (not
    marked "Not yet built") has a test whose name starts with, or contains, its id."""
    import re

    by_file: dict[str, set[str]] = {}  # tests/<layer>/test_x.py -> the tests it defines
    for f in (ROOT / "tests").rglob("*.py"):
        text = f.read_text()
        found = by_file[f.relative_to(ROOT).as_posix()] = set()
        for m in re.finditer(r"^(class (\w+)|    def (test_\w+)|def (test_\w+))", text, flags=re.M):
            found.add(m.group(3) or m.group(4) or "")
    names = set().union(*by_file.values())
    for rid, body in _rules().items():
        for path, ref in re.findall(r"`(tests/[\w/]+\.py)::(?:\w+::)?(test_\w+)`", body):
            # a contract suite's test runs under the file that collects it (test_store_sqlite.py)
            assert path in by_file and ref in names, f"{rid}: docs/rules.md names {path}::{ref}, which does not exist"
        if "Not yet built." in body:
            continue
        assert any(re.search(rf"(^|_){rid}(_|$)", n) for n in names), f"{rid} is enforced but no test is named after it"


def test_O6_the_operator_guide_states_the_residual_risks() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    section = guide[guide.index("## Residual risks, stated plainly") :]
    for risk in ("A task that dies inside a live process", "Clock skew between hosts", "A suspended host"):
        assert risk in section, risk


def test_readmes_python_example_runs(tmp_path: Path, monkeypatch) -> None:
    """The README's example is code a user pastes: it must run as written."""
    import re

    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README.md", "exec"), {})
    assert (tmp_path / "runs.db").exists()
