"""The command line's shared pieces: the command registry, output, opening a ledger.

Each command module (runs, epochs, views, audit) registers its commands with
`@command`; epochledger/cli/__init__.py builds the parser from the registry.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

import msgspec

if TYPE_CHECKING:  # imported where used: `--help` and the registry load neither (rule W2)
    from epochledger.app import Ledger
    from epochledger.ledger.run import RunState
    from epochledger.reports import RunRow

Handler = Callable[[argparse.Namespace], int | None]
COMMANDS: list[tuple[str, Handler, list[tuple[tuple[str, ...], dict[str, Any]]]]] = []


def instant(text: str | None, where: str) -> datetime | None:
    """An RFC 3339 instant with a time zone, or None; InvalidInput (exit 3) naming the
    flag otherwise (ledger.codec.instant, the one check both skins make)."""
    from epochledger.ledger.codec import instant as checked_instant

    return checked_instant(text, where)


def arg(*flags: str, **kw: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    return flags, kw


class Later:
    """An argument's setting (a default, its choices) that only importing what the
    command uses can tell, e.g. the O3 margin or the registered views' names: made when
    that command's parser is built (build_parser), never for `--help` or another
    command (rule W2)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


JSON = arg("--json", action="store_true", help="print JSON instead of a table")
NO_CATCH_UP = arg(
    "--no-catch-up",
    action="store_true",
    help="read the view as it is, without applying new events first (says how far behind it is)",
)


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
    lone surrogate from a non-UTF-8 argv): shown escaped, never a second error. A
    progress line on the terminal is cleared first, so the line stands alone."""
    clear_progress()
    print(text.encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr)


def out_json(obj: Any, *, order: Literal["deterministic", "sorted"] = "deterministic") -> None:
    """`obj` as indented JSON. order="sorted" also sorts the fields of Structs: the
    bytes of a list of Structs are then those of their `msgspec.to_builtins` dicts."""
    stream = sys.stdout.buffer
    stream.write(msgspec.json.format(msgspec.json.encode(obj, order=order), indent=2))
    stream.write(b"\n")  # apart: a listing's JSON is ~160 MB at 143k runs, not copied once more
    sys.stdout.flush()


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    cells_table([tuple("" if (v := r.get(c)) is None else str(v) for c in columns) for r in rows], columns)


def cells_table(cells: Sequence[tuple[str, ...]], columns: Sequence[str]) -> None:
    """Rows of strings under `columns`, each column as wide as its widest cell."""
    if not cells:
        out("(none)")
        return
    widths = [max(len(c), max(map(len, col))) for c, col in zip(columns, zip(*cells, strict=True), strict=True)]
    line = "  ".join(f"%-{w}s" for w in widths)  # one `%` a row (a cell is an argument, never a format)
    out((line % tuple(columns)).rstrip())
    # One write for the whole listing (of up to 143k runs): docs/benchmarks.md, "The lean listing".
    out("\n".join([(line % row).rstrip() for row in cells]))


@cache
def _helpers() -> Any:
    """The facade's reports module (predicates_of, shown_code), imported on first use
    (it is the library's, which `--help` does not import: rule W2), then a cached call,
    not an import, per run."""
    from epochledger import reports

    return reports


def run_record(s: RunState) -> dict[str, Any]:
    """A run as the CLI shows it: its state, its failure code (shown), every predicate."""
    d: dict[str, Any] = msgspec.to_builtins(s)
    d.pop("last", None)
    d["code_shown"] = _helpers().shown_code(s.status, s.code)
    d["predicates"] = dict(_helpers().predicates_of(s))
    return d


RUNS_COLUMNS = ("run", "status", "code_shown", "workflow", "process", "updated_at", "actor")


def runs_table(found: Sequence[RunRow]) -> None:
    """The `runs` table, with a labels column if any run has labels (rule I2): the
    cells table(run_record(s) ...) would make, built from RunRows in one pass."""
    shown_code = _helpers().shown_code
    cells: list[tuple[str, ...]] = [
        (r.run, r.status, shown_code(r.status, r.code), r.workflow or "", r.process or "", r.updated_at, r.actor or "")
        for r in found
    ]
    columns = list(RUNS_COLUMNS)
    if any(r.labels for r in found):
        cells = [
            (*row, ",".join(f"{k}={v}" for k, v in sorted(r.labels.items())))
            for row, r in zip(cells, found, strict=True)
        ]
        columns.append("labels")
    cells_table(cells, columns)


def program() -> str:
    """This command line as the person can type it again, for commands it prints: bare
    `epochledger` when that is what PATH finds, else the script that ran (after `make
    demo`, `.venv/bin/epochledger`), else `python -m epochledger`."""
    import os
    import shlex
    import shutil

    def shown(path: str) -> str:
        rel = os.path.relpath(path)
        return shlex.quote(path if rel.startswith("..") else rel if os.sep in rel else "./" + rel)

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if os.path.basename(argv0) == "epochledger" and os.path.exists(argv0):
        found = shutil.which("epochledger")
        if found is not None and os.path.samefile(found, argv0):
            return "epochledger"
        return shown(os.path.abspath(argv0))
    return f"{shown(sys.executable)} -m epochledger"


def open_ns(ns: argparse.Namespace) -> Ledger:
    """The ledger a command names, which must exist: no command but `init` and `demo`
    creates a store, so a mistyped path is an error naming it, not an empty ledger."""
    from epochledger.app import open_ledger

    return open_ledger(ns.store, create=False)


def say_lag(lag: int) -> None:
    if lag:
        print(f"epochledger: note: the view is {lag} positions behind the log", file=sys.stderr)


QUIET = arg(
    "-q",
    "--quiet",
    action="store_true",
    help="no progress line on standard error (there is one only when it is a terminal)",
)


class Progress:
    """The one progress line of a long command: on standard error, rewritten in place at
    most every 0.1 s, and only when standard error is a terminal and --quiet was not
    given, so a pipe, a log file or a cron mail never gets it. `clear()` removes it
    before the command says what it did."""

    EVERY_S = 0.1

    def __init__(self, ns: argparse.Namespace | None = None):
        self.on = sys.stderr.isatty() and not getattr(ns, "quiet", False)
        self._last = -1.0
        self._shown = False

    def show(self, text: str, *, now: bool = False) -> None:
        if not self.on:
            return
        t = time.monotonic()
        if not now and t - self._last < self.EVERY_S:
            return
        self._last = t
        # Known as shown before it is written: a Ctrl-C that lands just after the write
        # (Python raises it at the first instruction after the flush returns) must still
        # find the line to clear before main's one line says so.
        self._shown = True
        _LIVE[:] = [self]
        sys.stderr.write("\r\x1b[K" + text)
        sys.stderr.flush()

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._shown = False

    def views(self, view: str, position: int, head: int) -> None:
        """engine.Progress: a view caught up to `position` of `head`."""
        done = min(position, head) / head if head else 1.0
        self.show(f"{view:>10} [{'#' * int(done * 30):<30}] {done:6.1%} {position}/{head}", now=position >= head)

    def lines(self, lines: Iterable[bytes], total: int | None, what: str) -> Iterator[bytes]:
        """`lines` as they are read, counted on the line (with the share of `total`
        bytes, a regular file's size); then that they are being committed."""
        if not self.on:
            yield from lines
            return
        n = read = 0
        for line in lines:
            n += 1
            read += len(line)
            if not n & 1023:
                share = f" ({read / total:.0%} of the file)" if total else ""
                self.show(f"{what}: {n:,} lines read{share}")
            yield line
        self.show(f"{what}: {n:,} lines read; checking and committing them", now=True)


_LIVE: list[Progress] = []  # the progress line on the terminal now, which err() clears first


def clear_progress() -> None:
    for shown in _LIVE:
        shown.clear()
    _LIVE.clear()


def file_size(f: Any) -> int | None:
    """The size of a regular file (for a share read), None for a pipe or a terminal."""
    import os
    import stat

    st = os.fstat(f.fileno())
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def progress(ns: argparse.Namespace | None = None) -> Any:
    """engine.Progress for a rebuild or a catch-up on the terminal, or None."""
    shown = Progress(ns)
    return shown.views if shown.on else None
