"""The CLI reference (docs/cli.md) and README's exit-code table, generated from the
parser's own --help texts and the EXIT_CODES table, so the docs cannot drift from the
code (tests/docs/test_docs.py checks both).

    python -m epochledger.cli.reference --write    # regenerate docs/cli.md and README's table
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
from contextlib import redirect_stdout

from epochledger.cli import build_parser, render_exit_codes

README_BLOCK = re.compile(r"(<!-- BEGIN EXIT CODES[^>]*-->\n).*?(<!-- END EXIT CODES -->)", re.S)


def _help(parser: argparse.ArgumentParser) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        parser.print_help()
    return buf.getvalue().rstrip() + "\n"


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # argparse keeps its subcommands here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def render_reference() -> str:
    """docs/cli.md: the top-level help, then every command's (grouped ones nested)."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: fix it for stable output
    parser = build_parser()
    parts = [
        "# CLI reference\n",
        "Generated from `epochledger --help` and each command's `--help` by "
        "`python -m epochledger.cli.reference --write`; `tests/docs/test_docs.py` fails when it is stale.\n",
        "```\n" + _help(parser) + "```\n",
        "## Exit codes\n",
        render_exit_codes(),
    ]
    for name, sub in _subparsers(parser):
        parts.append(f"## `epochledger {name}`\n")
        parts.append("```\n" + _help(sub) + "```\n")
        for action_name, action in _subparsers(sub):
            parts.append(f"### `epochledger {name} {action_name}`\n")
            parts.append("```\n" + _help(action) + "```\n")
    return "\n".join(parts)


def readme_with_exit_codes(readme: str) -> str:
    """README.md with its generated exit-code block replaced by the current table."""
    new, n = README_BLOCK.subn(lambda m: m.group(1) + render_exit_codes() + m.group(2), readme)
    if n != 1:
        raise SystemExit("README.md: expected one <!-- BEGIN EXIT CODES --> block")
    return new


def write(root: str = ".") -> None:
    with open(os.path.join(root, "docs", "cli.md"), "w", encoding="utf-8") as f:
        f.write(render_reference())
    path = os.path.join(root, "README.md")
    with open(path, encoding="utf-8") as f:
        readme = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(readme_with_exit_codes(readme))


if __name__ == "__main__":  # pragma: no cover
    if "--write" in sys.argv:
        write()
    else:
        sys.stdout.write(render_reference())
