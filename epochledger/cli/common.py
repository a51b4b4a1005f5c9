"""The command line's shared pieces: the command registry, output, opening a ledger.

Each command module (runs, epochs, views, audit) registers its commands with
`@command`; epochledger/cli/__init__.py builds the parser from the registry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from epochledger.app import Ledger, open_ledger
from ledger import lifecycle
from ledger.codes import show_code
from ledger.run import RunState

Handler = Callable[[argparse.Namespace], int | None]
COMMANDS: list[tuple[str, Handler, list[tuple[tuple[str, ...], dict[str, Any]]]]] = []


def arg(*flags: str, **kw: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    return flags, kw


JSON = arg("--json", action="store_true", help="print JSON instead of a table")
NO_CATCH_UP = arg("--no-catch-up", action="store_true",
                  help="read the view as it is, without applying new events first (says how far behind it is)")


def command(name: str, *args: tuple[tuple[str, ...], dict[str, Any]]) -> Callable[[Handler], Handler]:
    def register(f: Handler) -> Handler:
        COMMANDS.append((name, f, list(args)))
        return f

    return register


# ------------------------------------------------------------------ output
def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    """A line on standard error. It may echo an argument that is not valid Unicode (a
    lone surrogate from a non-UTF-8 argv): shown escaped, never a second error."""
    print(text.encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr)


def out_json(obj: Any) -> None:
    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(obj, order="deterministic"), indent=2) + b"\n")
    sys.stdout.flush()


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    if not rows:
        out("(none)")
        return
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    out("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        out("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def run_record(s: RunState) -> dict[str, Any]:
    """A run as the CLI shows it: its state, its failure code (shown), every predicate."""
    d: dict[str, Any] = msgspec.to_builtins(s)
    d.pop("last", None)
    d["code_shown"] = show_code(s.code) if lifecycle.is_failure(s.status) else ""
    d["predicates"] = lifecycle.predicates(s.status, s.code, fenced_end=s.fenced_end is not None)
    return d


def open_ns(ns: argparse.Namespace) -> Ledger:
    """The ledger a command names, which must exist: no command but `init` and `demo`
    creates a store, so a mistyped path is an error naming it, not an empty ledger."""
    return open_ledger(ns.store, create=False)


def say_lag(lag: int) -> None:
    if lag:
        print(f"epochledger: note: the view is {lag} positions behind the log", file=sys.stderr)


def progress() -> Any:
    if not sys.stderr.isatty():
        return None

    def show(view: str, position: int, head: int) -> None:
        done = min(position, head) / head if head else 1.0
        bar = "#" * int(done * 30)
        sys.stderr.write(f"\r{view:>10} [{bar:<30}] {done:6.1%} {position}/{head}")
        sys.stderr.flush()

    return show
