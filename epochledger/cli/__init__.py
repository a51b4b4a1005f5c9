"""The `epochledger` command line (docs/cli.md, generated from the --help texts below).

A skin (rule H1): each command parses, opens the ledger, makes one facade call
(`Ledger`, with its reports from epochledger/reports.py) and renders the typed result
(sqlite-utils' style): no logic here that the library lacks. A command's docstring is
its --help, with an example. Every read command takes --json. The commands live by
area: runs (epochledger/cli/runs.py), epochs and the sweep (epochs.py), the read side
(views.py), the audit (audit.py).

Errors: the library's errors carry structured fields and no exit codes; this module
alone maps them to exit codes (EXIT_CODES, rendered into README.md by a test) and says
them, as one line or, under --json, one JSON object on stderr (say_error, the one
encoder). Only `LedgerError`, a usage error and Ctrl-C are caught; anything else is a
bug and shows its traceback.
"""

from __future__ import annotations

from epochledger.cli import msgspec_first  # noqa: F401 - first: msgspec without typing_extensions (its docstring)

# isort: split
import argparse
import os
import sys
import textwrap
from collections.abc import Iterable
from typing import Any, NoReturn

import msgspec

from epochledger.cli import (
    audit,  # noqa: F401
    epochs,  # noqa: F401
    forensics,  # noqa: F401
    runs,  # noqa: F401 - each module registers its commands, in this order
    service,  # noqa: F401
    views,  # noqa: F401
)
from epochledger.cli.audit import GROUPS
from epochledger.cli.common import COMMANDS, Later, clear_progress, err
from epochledger.ledger.errors import (
    ChainBroken,
    CommitUnknown,
    ConflictError,
    DamagedLog,
    IllegalTransition,
    InvalidInput,
    LedgerError,
    RunNotFound,
    StaleEpoch,
    StoreError,
    ViewMismatch,
)
from epochledger.plain import error_fields, plain

INTERRUPTED = 130  # the shell's code for a command ended by SIGINT (128 + 2)

# The one table of exit codes: the most specific class of an error decides (its MRO is
# walked), so StaleEpoch (an IllegalTransition) exits 9, CommitUnknown (a StoreError) 13.
EXIT_CODES: tuple[tuple[type[LedgerError] | None, int, str], ...] = (
    (None, 0, "success"),
    (LedgerError, 1, "other ledger error"),
    (None, 2, "usage error (bad arguments)"),
    (
        InvalidInput,
        3,
        "invalid input: malformed or oversized field, bad time, unknown type, a rejected import line, "
        "a bad store URL, a store that does not exist (run `epochledger init`), a refused audit "
        "query or one stopped by its time or memory bound, a `--duckdb` that is another DuckDB "
        "database, a file that cannot be read or written, an output file that is the ledger "
        "itself, a report naming an epoch no slot booted, an unknown `whatif --policy` or a bad "
        "argument to one (`BadPolicy`)",
    ),
    (RunNotFound, 4, "run not found (or deleted)"),
    (IllegalTransition, 5, "illegal transition (the message names run, status and attempt)"),
    (ConflictError, 6, "write conflict: another writer appended first; nothing was appended"),
    (
        StoreError,
        7,
        "store error: unreachable or failing database; also a write the database rolled back or never "
        "received (`NotCommitted`, `LockTimeout`: retry it), a refused database privilege "
        "(`PermissionDenied`), an audit file held by another process (past `audit sync --wait`), a full disk "
        "(`DiskFull`: reads too, as SQLite cannot open the file)",
    ),
    (DamagedLog, 8, "the log is damaged: an event does not decode, or a stream has a gap (a removed row)"),
    (
        StaleEpoch,
        9,
        "stale epoch: a report written for an epoch that is no longer live was refused, and kept as "
        "`run.fenced` evidence",
    ),
    (ViewMismatch, 10, "`verify`: a live view differs from its replay from zero (the first difference is named)"),
    (
        None,
        11,
        "`import --on-error skip`: some lines were rejected (each is in the --rejects file with its line "
        "and reason); every other line was imported. `import-dagster --on-error skip`: the same, of Dagster "
        "runs",
    ),
    (
        ChainBroken,
        12,
        "hash chain failure (`verify`, `digest`, `chain`): an event altered, removed, inserted or "
        "reordered, or a log truncated or rewritten after a digest (the first place is named; wins "
        "over 10)",
    ),
    (
        CommitUnknown,
        13,
        "commit outcome unknown (`CommitUnknown`): the connection failed during the commit and "
        "could not be checked; check the named streams (`history RUN`) before running the command "
        "again (docs/operations.md)",
    ),
    (
        None,
        INTERRUPTED,
        "interrupted (Ctrl-C, SIGINT): the command stopped where it was; a write is all or nothing, "
        "so an interrupted one landed whole or not at all, and an output file is never left "
        "half-written (`follow` stops this way)",
    ),
)


# The library's errors name what was wrong in its own words (an InvalidInput's `where`:
# a parameter, a field, a file); where that is one of a command's options, the CLI shows
# the option instead, as the user typed it.
FLAGS: dict[str, str] = {
    "audit file": "--duckdb",
    "memory_limit": "--memory-limit",
    "timeout": "--timeout",
    "wait": "--wait",
    "period": "--period",
    "as_of": "--as-of",
    "label": "--label",
    "directory": "export-parquet",
    "policy": "--policy",
}


def shown(error: LedgerError) -> str:
    """The error as the CLI prints it: its message, with a `where` that names one of
    the options (FLAGS) shown as that option."""
    if isinstance(error, InvalidInput) and error.where in FLAGS:
        return f"{FLAGS[error.where]}: {error.message}"
    return str(error)


def exit_code(error: LedgerError) -> int:
    """The documented exit code of a library error (EXIT_CODES)."""
    codes = {cls: code for cls, code, _ in EXIT_CODES if cls is not None}
    for cls in type(error).__mro__:
        if cls in codes:
            return codes[cls]
    return 1


def render_exit_codes() -> str:
    """The README's exit-code table (tests/docs/test_docs.py checks it is current)."""
    lines = ["| code | meaning |", "|---|---|"]
    lines += [f"| {code} | {meaning} |" for _, code, meaning in EXIT_CODES]
    return "\n".join(lines) + "\n"


def summary_line(doc: str) -> str:
    """A command's one-line help: the first sentence of its docstring, whole."""
    first = " ".join(textwrap.dedent(doc).strip().split("\n\n")[0].split())
    end = first.find(". ")
    return first if end < 0 else first[: end + 1]


class UsageError(Exception):
    """A command line argparse refused (exit 2), raised by Parser.error so that main says
    it, under --json as well, instead of argparse printing and exiting on its own."""

    def __init__(self, usage: str, prog: str, message: str):
        self.usage = usage
        self.prog = prog
        self.message = message
        super().__init__(message)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(self.format_usage(), self.prog, message)


def columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` reads it for argparse: $COLUMNS
    if a positive number, else the width of the terminal on standard output, else 80.
    Read here because argparse makes a formatter for every argument it adds, and its
    own lookup imports shutil (and with it zlib, bz2 and lzma) into every start (rule W2)."""
    try:
        found = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        found = 0
    out = sys.__stdout__
    if found <= 0 and out is not None:
        try:
            found = os.get_terminal_size(out.fileno()).columns
        except (AttributeError, ValueError, OSError):
            found = 0
    return found if found > 0 else 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, at the width `columns()` reads (argparse's own, less 2)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, columns() - 2 if width is None else width)


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """A command's help: its docstring as written (argparse's RawDescriptionHelpFormatter)."""


def say_error(kind: str, message: str, code: int, fields: dict[str, Any], *, as_json: bool) -> None:
    """The one way the command line says an error: `epochledger: KIND: MESSAGE`, or with
    --json one JSON object on one line of stderr, {"error", "message", "exit_code",
    "fields"}, so that `jq` reads it (docs/cli.md)."""
    if as_json:
        clear_progress()
        record = {"error": kind, "message": plain(message), "exit_code": code, "fields": fields}
        sys.stderr.write(msgspec.json.encode(record).decode("utf-8") + "\n")
        sys.stderr.flush()
    else:
        err(f"epochledger: {kind}: {message}")


# Every command in a parser of its own. `only` (the command a line names, parse_line)
# is the one whose arguments and help are built; the others get their name and summary
# alone, so a start builds one command's ~5 arguments, not the ~130 of all of them
# (rule W2). None: all of them (the reference, docs/cli.md); "": none. `alone`: the
# others are left out, not even named, so a start builds 2 or 3 parsers, not 35 (each
# with argparse's gettext lookups): for a line whose words before the command are
# --store's alone (plainly_named), where no other command can change argparse's reading.
def build_parser(only: str | None = None, *, alone: bool = False) -> argparse.ArgumentParser:
    common = Parser(add_help=False, formatter_class=HelpFormatter)
    common.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        help="store URL: sqlite:///file.db, a path, or postgresql://user@host:port/db "
        "(default: $EPOCHLEDGER_STORE, then ./epochledger.db)",
    )
    parser = Parser(
        prog="epochledger",
        description="An event-sourced ledger of scheduler runs: record every lifecycle transition, derive the "
        "rest, replay, audit and verify it.",
        epilog="Exit codes: "
        + ", ".join(f"{code} {meaning.split(':')[0].split(' (')[0]}" for _, code, meaning in EXIT_CODES)
        + ". Full table: README.md. With --json (or --format json) an error is one JSON object on one line of "
        'stderr: {"error": TYPE, "message": TEXT, "exit_code": N, "fields": {the error\'s own fields}}.',
        parents=[common],
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, Any] = {}
    areas = [
        "epochledger.cli.runs",
        "epochledger.cli.epochs",
        "epochledger.cli.views",
        "epochledger.cli.forensics",
        "epochledger.cli.audit",
        "epochledger.cli.service",
    ]
    for name, handler, args in sorted(
        COMMANDS, key=lambda c: areas.index(c[1].__module__)
    ):  # by area, then as registered
        if alone and name != only:
            continue
        doc = textwrap.dedent(handler.__doc__ or "")
        where, registered = sub, name
        if " " in name:  # a grouped command, e.g. "audit sync"
            group, name = name.split(" ", 1)
            if group not in groups:
                gp = sub.add_parser(
                    group,
                    help=GROUPS.get(group),
                    description=GROUPS.get(group),
                    parents=[common],
                    formatter_class=HelpFormatter,
                )
                groups[group] = gp.add_subparsers(dest=group + "_command", metavar="ACTION", required=True)
            where = groups[group]
        if only is not None and registered != only:
            p = where.add_parser(
                name, help=summary_line(doc) if doc else None, add_help=False, formatter_class=HelpFormatter
            )
            p.set_defaults(handler=handler)
            continue
        p = where.add_parser(
            name,
            help=summary_line(doc) if doc else None,
            description=doc,
            formatter_class=RawDescriptionHelpFormatter,
            parents=[common],
        )
        for flags, kw in args:
            p.add_argument(*flags, **{k: v.make() if isinstance(v, Later) else v for k, v in kw.items()})
        p.set_defaults(handler=handler)
    return parser


def command_of(args: list[str]) -> str | None:
    """The command a command line seems to name ("show", "audit sync"): its first word
    that is not an option or --store's value, with the group's action after it; None
    if there is none. A guess, which parse_line checks against argparse's own reading."""
    names = {name for name, _, _ in COMMANDS}
    words = iter(args)
    for word in words:
        if word == "--store":
            next(words, None)
        elif not word.startswith("-"):
            if word in GROUPS:
                action = next((w for w in words if not w.startswith("-")), None)
                return f"{word} {action}" if f"{word} {action}" in names else None
            return word if word in names else None
    return None


def plainly_named(args: list[str]) -> bool:
    """Whether the words before the command of `args` are `--store VALUE` or
    `--store=VALUE` alone, and a group's action follows its group at once: argparse then
    reads those words with the top-level parser's --store, whatever commands it has (no
    -h, no abbreviation of an option, nothing that another command's name could be
    taken for), and the rest with the command's own parser."""
    words = iter(args)
    for word in words:
        if word == "--store":
            if next(words, "-").startswith("-"):
                return False
        elif not word.startswith("--store="):
            if word in GROUPS:
                return not next(words, "-").startswith("-")
            return not word.startswith("-")
    return False


def parse_line(args: list[str]) -> argparse.Namespace:
    """argparse's reading of `args`, with the arguments of the command it names alone
    built (build_parser(only=...); with no other command at all where the line names it
    plainly, plainly_named): the same namespace, help and usage errors as the whole
    parser's. A guess that argparse does not confirm, or a line it refuses, is read
    again by the whole parser, whose answer (or error) is the one given."""
    guess = command_of(args)
    try:  # no command named (`--help`): no command's arguments are built
        ns = build_parser(only=guess or "", alone=guess is not None and plainly_named(args)).parse_args(args)
    except UsageError:
        pass
    else:
        group = f"{ns.command}_command"
        if (f"{ns.command} {getattr(ns, group)}" if hasattr(ns, group) else ns.command) == guess:
            return ns
    return build_parser().parse_args(args)


def main(argv: Iterable[str] | None = None) -> int:
    args = list(argv) if argv is not None else sys.argv[1:]
    as_json = "--json" in args  # before parsing: a usage error under --json is JSON too
    try:
        try:
            ns = parse_line(args)
        except UsageError as e:
            if as_json:
                say_error("UsageError", f"{e.prog}: {e.message}", 2, {"usage": " ".join(e.usage.split())}, as_json=True)
            else:  # argparse's own words
                sys.stderr.write(e.usage)
                err(f"{e.prog}: error: {e.message}")
            raise SystemExit(2) from None  # as argparse's own exit: callers of main() see usage errors as before
        ns.store = getattr(ns, "store", None)
        as_json = bool(getattr(ns, "json", False)) or getattr(ns, "format", None) == "json"
        try:
            return ns.handler(ns) or 0
        except LedgerError as e:
            say_error(type(e).__name__, shown(e), exit_code(e), error_fields(e), as_json=as_json)
            return exit_code(e)
        except BrokenPipeError:
            return 0
    except KeyboardInterrupt:
        say_error(
            "Interrupted",
            "interrupted (Ctrl-C); a write is all or nothing: an interrupted one landed whole or not at all",
            INTERRUPTED,
            {"signal": "SIGINT"},
            as_json=as_json,
        )
        return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
