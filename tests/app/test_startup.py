"""A fast start (rule W2): a command imports what it uses. `epochledger --help` and the
command registry load neither the store nor the library, `import epochledger` loads
none of its names, and `show RUN` neither DuckDB, psycopg nor the audit. Checked by
what a fresh interpreter holds in sys.modules, never by a timing (the times are
bench/startup.py's, docs/benchmarks.md, "A fast start")."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import typing_extensions

import epochledger
from epochledger.cli import COMMANDS, UsageError, build_parser, command_of, main, parse_line, plainly_named

# What a start must not import unless the command needs it: the store and its drivers,
# the library (the facade, the write side, the sweep, the tick), the audit and DuckDB.
HEAVY = (
    "duckdb",
    "psycopg",
    "psycopg_pool",
    "eventsourcing",
    "sqlite3",
    "epochledger.ledger.store",
    "epochledger.ledger.codec",
    "epochledger.projections.audit",
    "epochledger.projections.engine",
    "epochledger.app",
    "epochledger.writes",
    "epochledger.cache",
    "epochledger.epochs_lookup",
    "epochledger.sweep",
    "epochledger.tick",
)

PROBE = """
import json, sys
from epochledger.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded(*args: str, code: str = PROBE) -> set[str]:
    """The modules a fresh interpreter holds after `code` (by default: the command line
    `args`, its output to /dev/null)."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def heavy(modules: set[str], names: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in names))


def test_W2_help_and_the_registry_import_neither_the_store_nor_the_library() -> None:
    """Mutation caught: `from epochledger.app import open_ledger` back at the top of
    epochledger/cli/common.py (or runs.py, epochs.py: ORPHAN_MARGIN_S), `from projections
    import tables` in views.py, an eager `epochledger/__init__.py`; `rebuild`'s view
    names or `sweep --margin`'s default read at import (the registry's views, the orphan
    rule) instead of when their command's parser is built (cli.common.Later)."""
    assert (
        heavy(
            loaded("--help"),
            (*HEAVY, "epochledger.projections", "epochledger.ledger.run", "epochledger.ledger.process"),
        )
        == []
    )
    assert heavy(loaded(code="import json, sys, epochledger.cli; print(json.dumps(sorted(sys.modules)))")) == []


def test_W2_a_commands_help_imports_nothing_its_handler_needs() -> None:
    for command in ("show", "sweep", "audit sync", "import", "verify", "whatif"):
        assert heavy(loaded(*command.split(), "--help")) == [], command


def test_W2_import_epochledger_loads_none_of_its_names_until_one_is_used() -> None:
    """Each public name is imported from its home on first use (PEP 562), and is that
    home's own object; an unknown name is an AttributeError, as on any module."""
    code = "import json, sys, epochledger; print(json.dumps(sorted(sys.modules)))"
    assert heavy(loaded(code=code), (*HEAVY, "ledger", "projections")) == []
    code = "import json, sys; from epochledger import Status; print(json.dumps(sorted(sys.modules)))"
    assert heavy(loaded(code=code)) == []  # a name of the vocabulary does not bring the library
    for name in epochledger.__all__:
        home = importlib.import_module(epochledger._HOMES[name])
        assert getattr(epochledger, name) is getattr(home, name), name
    assert sorted(epochledger._HOMES) == sorted(epochledger.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        epochledger.no_such_name  # noqa: B018 - the attribute access is the test


def test_W2_show_reads_a_run_without_the_audit_or_another_backend(tmp_path: Path) -> None:
    """`show RUN` on SQLite: the store, the facade and the views it reads; never DuckDB,
    the audit's code, psycopg, the library (eventsourcing: a read goes straight to the
    table), the tick, the forensics a report runs (the incident page, what-if's policy
    lookup), or the catalogue's event decoder when no event is read. Mutations caught:
    the library imported at the top of ledger/store/base.py or sqlite.py again; the
    decoder built when ledger/codec.py is imported; `from epochledger.replay.timeline import page`,
    `from epochledger.files import atomic_write` or `from epochledger import tick` back
    at the top of epochledger/reports.py; `from importlib import metadata` at the top of
    replay/whatif.py; projections/audit/__init__.py importing duck.py eagerly; the
    sweep, the probe, retire, the host port, secrets or the token decider back
    at the top of epochledger/app.py, the pass, idempotency and token deciders at the
    top of epochledger/writes.py, `import logging` at the top of epochledger/sweep.py,
    `import base64` at the top of epochledger/reports.py; a command's parser with
    argparse's own formatter (its width lookup imports shutil)."""
    store = str(tmp_path / "l.db")
    assert main(["--store", store, "init"]) == 0
    with epochledger.open_ledger(store) as ledger:
        ledger.queue("r1", workflow="nightly")
    assert main(["--store", store, "show", "r1"]) == 0  # the views caught up: the next show reads no event
    modules = loaded("--store", store, "show", "r1", "--json")
    assert (
        "epochledger.ledger.store.sqlite" in modules and "epochledger.projections.engine" in modules
    )  # it did read the run
    # The facade's module names the audit's result types, so projections.audit and its
    # results module load with it; the audit's code (duck.py) and DuckDB only where used.
    assert "epochledger.projections.audit.results" in modules
    unused = (
        "duckdb",
        "psycopg",
        "psycopg_pool",
        "epochledger.ledger.store.postgres",
        "eventsourcing",
        "epochledger.projections.audit.duck",
    )
    unused += (
        "epochledger.tick",
        "epochledger.passes",
        "epochledger.files",
        "epochledger.replay.timeline",
        "importlib.metadata",
    )
    # What the facade's own module imported and a read never uses: the probe and slot
    # retirement (and the sweep's logging), the host port (socket), the role, pass,
    # idempotency and token deciders (hmac), secrets, and the listing's cursor (base64).
    unused += (
        "epochledger.probe",
        "epochledger.retire",
        "logging",
        "epochledger.ledger.host",
        "socket",
        "epochledger.ledger.passes",
        "epochledger.ledger.idempotency",
        "epochledger.ledger.tokens",
        "epochledger.ledger.access",
        "hmac",
        "secrets",
        "random",
        "base64",
        "inspect",  # typing_extensions' and dataclasses' (the views' specs are Structs, the orphans view a class)
        "dataclasses",
        "hashlib",  # the chain's links and a state's hash, made where used: a read links nothing
        "typing_extensions",  # msgspec's, which the command line imports without it (cli/msgspec_first.py)
        "shutil",  # argparse's terminal width, read by the CLI's formatter instead (cli.columns)
        "bz2",
        "lzma",
    )
    assert heavy(modules, unused) == []
    code = PROBE.replace(
        "print(", "from epochledger.ledger import codec; print(json.dumps('decode' in vars(codec)));print("
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--store", store, "show", "r1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-2] == "false"  # the catalogue's decoder was never built


class _Shape(typing.TypedDict):
    a: typing.Annotated[int, "x"]
    b: typing.NotRequired[list[_Shape]]


class _Extended(typing_extensions.TypedDict):
    a: typing.Annotated[int, "x"]
    b: typing_extensions.NotRequired[str | None]
    c: typing.Required[int]


def test_W2_the_command_lines_msgspec_is_msgspec_with_typing_extensions() -> None:
    """The command line imports msgspec without typing_extensions (cli/msgspec_first.py):
    msgspec then takes get_type_hints, Required and NotRequired from typing, which on
    Python 3.11 and later is what typing_extensions hands it (checked here, where the
    tests import typing_extensions as usual); typing_extensions stays importable after.
    Mutations caught: msgspec_first.py imported after msgspec, or leaving
    typing_extensions unimportable."""
    assert (typing_extensions.Required, typing_extensions.NotRequired) == (typing.Required, typing.NotRequired)
    for tp in (_Shape, _Extended):
        ours = typing_extensions.get_type_hints(tp, include_extras=True)
        assert ours == typing.get_type_hints(tp, include_extras=True), tp
    code = (
        "import json, sys, typing; from epochledger.cli import main; import msgspec._utils as u; "
        "seen = 'typing_extensions' in sys.modules; import typing_extensions; "
        "print(json.dumps([seen, u._get_type_hints is typing.get_type_hints, u.Required is typing.Required, "
        "u.NotRequired is typing.NotRequired]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == [False, True, True, True]


def test_W2_a_parser_of_one_command_reads_its_line_as_the_whole_parser_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """main builds the arguments of the command the line names alone (parse_line,
    build_parser(only=...)), and no other command where the words before it are
    --store's alone (plainly_named, build_parser(alone=True)): that command's help and
    parse, the top-level and a group's help and a refused line are the whole parser's.
    Mutations caught: a command's arguments left out of its own parser; a guess of the
    command taken without argparse's check; a line with -h (or an option argparse
    abbreviates) before its command read by a parser that lacks the other commands."""
    whole = build_parser()

    def choices(parser: Any, dest: str) -> Any:
        return {a.dest: a for a in parser._actions if getattr(a, "choices", None)}[dest].choices

    assert build_parser(only="show").format_help() == build_parser(only="").format_help() == whole.format_help()
    for name, _, _ in COMMANDS:
        group, _, action = name.partition(" ")
        one = choices(build_parser(only=name), "command")
        if action:
            assert (
                choices(one[group], group + "_command")[action].format_help()
                == choices(choices(whole, "command")[group], group + "_command")[action].format_help()
            ), name
        else:
            assert one[name].format_help() == choices(whole, "command")[name].format_help(), name
        alone = choices(build_parser(only=name, alone=True), "command")
        assert list(alone) == [group], name  # no other command, not even its name
        if action:
            assert list(choices(alone[group], group + "_command")) == [action], name
            assert (
                choices(alone[group], group + "_command")[action].format_help()
                == choices(choices(whole, "command")[group], group + "_command")[action].format_help()
            ), name
        else:
            assert alone[name].format_help() == choices(whole, "command")[name].format_help(), name
    # `--sto runs demo`: argparse reads --sto as --store (an abbreviation) and runs as its
    # value; the guess (runs) is wrong, and argparse's own reading (demo) must win.
    lines = [
        ["show", "r1"],
        ["--store", "show", "runs"],
        ["--store=x", "audit", "sync", "--json"],
        ["runs", "--json"],
        ["--store", "audit", "runs", "--status", "queued"],
        ["sweep", "--process", "w", "--margin", "2.5"],
        ["--sto", "runs", "demo"],
        ["--store", "x", "show", "r1", "--store", "y"],
        ["--store", "audit", "audit", "sync"],
        ["audit", "--store", "x", "sync"],
    ]
    for line in lines:
        assert vars(parse_line(line)) == vars(whole.parse_args(line)), line
    plain = (
        ["show", "r1"],
        ["--store", "x", "show", "r1"],
        ["--store=x", "audit", "sync"],
        ["--store", "show", "runs"],
    )
    assert all(plainly_named(line) for line in plain)
    for line in (
        ["-h", "show"],
        ["--sto", "x", "show"],
        ["audit", "--help", "sync"],
        ["--store"],
        ["--store", "-h"],
        [],
    ):
        assert not plainly_named(line), line
    for line in (
        ["--help", "show", "r1"],
        ["-h", "audit", "sync"],
        ["--he", "show", "r1"],
        ["audit", "-h", "sync"],
        ["show", "--help"],
        ["--store", "x", "audit", "sync", "--help"],
    ):
        with pytest.raises(SystemExit):
            parse_line(line)
        mine = capsys.readouterr()
        with pytest.raises(SystemExit):
            whole.parse_args(line)
        assert mine == capsys.readouterr(), line
    assert (command_of(["--store", "show", "runs"]), command_of(["audit", "sync"]), command_of(["bogus"])) == (
        "runs",
        "audit sync",
        None,
    )
    for bad in (
        ["show"],
        ["show", "r1", "--bogus"],
        ["bogus"],
        [],
        ["audit"],
        ["audit", "bogus"],
        ["--store"],
        ["runs", "--status", "nope"],
        ["show", "runs", "x"],
        ["--store", "--store", "show", "r1"],
        ["--store", "x", "show"],
        ["--store", "x", "audit", "bogus"],
    ):
        with pytest.raises(UsageError) as mine:
            parse_line(bad)
        with pytest.raises(UsageError) as theirs:
            whole.parse_args(bad)
        assert (mine.value.usage, mine.value.message) == (theirs.value.usage, theirs.value.message), bad
