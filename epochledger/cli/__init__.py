"""The `epochledger` command line.

Each command parses, opens the ledger, calls one library function and prints
(sqlite-utils' style): no logic here that the library lacks. A command's docstring is
its --help. Every read command takes --json. Errors: the root `LedgerError` alone is
caught and mapped to its documented exit code (README.md); anything else is a bug and
shows its traceback.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from projections import tables
from ledger.codes import show_code
from ledger.errors import LedgerError
from ledger.events import Status
from ledger.run import RunState
from epochledger.app import ORPHAN_MARGIN_S, Ledger, open_ledger
from ledger import lifecycle

Handler = Callable[[argparse.Namespace], int | None]
_COMMANDS: list[tuple[str, Handler, list[tuple[tuple[str, ...], dict[str, Any]]]]] = []


def arg(*flags: str, **kw: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    return flags, kw


JSON = arg("--json", action="store_true", help="print JSON instead of a table")
NO_CATCH_UP = arg("--no-catch-up", action="store_true",
                  help="read the view as it is, without applying new events first (says how far behind it is)")


def command(name: str, *args: tuple[tuple[str, ...], dict[str, Any]]) -> Callable[[Handler], Handler]:
    def register(f: Handler) -> Handler:
        _COMMANDS.append((name, f, list(args)))
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
    d = msgspec.to_builtins(s)
    d.pop("last", None)
    d["code_shown"] = show_code(s.code) if lifecycle.is_failure(s.status) else ""
    d["predicates"] = lifecycle.predicates(s.status, s.code, fenced_end=s.fenced_end is not None)
    return d


def _open(ns: argparse.Namespace) -> Ledger:
    return open_ledger(ns.store)


# ---------------------------------------------------------------- commands
@command("init")
def cmd_init(ns: argparse.Namespace) -> None:
    """Create the ledger's tables, or upgrade them (idempotent), and print where the
    ledger is. On PostgreSQL this is the owner's job: writers and readers open an
    existing store without DDL (docs/operations.md, PostgreSQL roles).

    Example: epochledger --store sqlite:///runs.db init
    """
    with open_ledger(ns.store, init=True) as ledger:
        out(f"ledger ready at {ledger.url} ({ledger.store.max_position()} events)")


@command("import", arg("file", help="NDJSON file, or - for standard input"))
def cmd_import(ns: argparse.Namespace) -> None:
    """Import an NDJSON history: one event per line, {"type": TAG, "at": RFC3339, ...}.

    Every line goes through the same rules as the API, stamped with its own "at". Any
    bad line rejects the whole file (exit 3, the line number and the reason), and
    nothing is appended.

    Example: epochledger import history.ndjson
    """
    from epochledger.ndjson import import_lines, read_lines

    with _open(ns) as ledger:
        if ns.file == "-":
            n = import_lines(ledger, read_lines(sys.stdin.buffer))
        else:
            try:
                f = open(ns.file, "rb")
            except (OSError, ValueError) as e:  # ValueError: a NUL in the name
                from ledger.errors import InvalidInput

                raise InvalidInput(f"cannot read: {getattr(e, 'strerror', None) or e}", where=ns.file) from None
            with f:
                n = import_lines(ledger, read_lines(f))
        out(f"imported {n} events from {ns.file}")


@command("export", arg("--after", type=int, default=0, help="only events after this position"),
         arg("-o", "--output", default="-", help="file to write (default: standard output)"))  # fmt: skip
def cmd_export(ns: argparse.Namespace) -> None:
    """Export the log as NDJSON, in log order; `import` of it into an empty ledger
    reproduces it byte for byte.

    -o FILE is written atomically (a temporary file beside it, renamed over it when
    complete): a failed or interrupted export leaves FILE as it was. A FILE that is the
    ledger itself (or its -wal/-shm/-journal) is refused (exit 3), nothing written.

    Example: epochledger export -o history.ndjson
    """
    from epochledger.ndjson import export_file, export_to

    with _open(ns) as ledger:
        if ns.output == "-":
            export_to(ledger, sys.stdout.buffer, ns.after)
            sys.stdout.flush()
        else:
            n = export_file(ledger, ns.output, ns.after)
            err(f"exported {n} events to {ns.output}")


@command("show", arg("run"), JSON, NO_CATCH_UP)
def cmd_show(ns: argparse.Namespace) -> None:
    """Show one run's current state, its failure code and every lifecycle predicate.

    Reads the runs view, caught up first (see --no-catch-up).

    Example: epochledger show nightly-0042 --json
    """
    from projections.engine import read_run

    with _open(ns) as ledger:
        state, lag = read_run(ledger.store, ns.run, catch_up_first=not ns.no_catch_up)
        rec = run_record(state)
        rec["tick_health"] = _tick.run_tick_health(ledger, ns.run, catch_up_first=not ns.no_catch_up)  # docs/tick.md
    _say_lag(lag)
    if ns.json:
        out_json(rec)
        return
    preds = rec.pop("predicates")
    rec.pop("code", None)
    health = rec.pop("tick_health")
    rec.pop("tick_streak", None)
    end = rec.pop("fenced_end", None)
    for k, v in rec.items():
        if v is not None and v != "" and not (k == "fenced" and v == 0):
            out(f"{k:>12}: {v}")
    if end is not None:
        out(f"{'fenced end':>12}: stale epoch {end['epoch']} reported {end['refused']} ({end['reported']}) at "
            f"{end['at']}, kept as evidence: automation may not resume this run; an operator decides (rule F2)")  # fmt: skip
    out(f"{'predicates':>12}: " + ", ".join(k for k, v in preds.items() if v))
    _show_tick_health(health)


@command(
    "runs",
    arg("--status", choices=[s.value for s in Status], action="append", help="only runs in this status (repeatable)"),
    arg("--where", choices=list(lifecycle.PREDICATES), action="append", help="only runs for which this predicate holds (repeatable)"),
    arg("--code", action="append", help="only runs with this failure code (UNKNOWN for the empty code)"),
    arg("--streaking", action="store_true", help="only runs with an open tick failure streak, with its age (docs/tick.md)"),
    arg("--orphaned", action="store_true", help="only running runs whose owner is gone (BRIEF O2/O3), with the verdict"),
    JSON,
    NO_CATCH_UP,
)
def cmd_runs(ns: argparse.Namespace) -> None:
    """List runs, optionally filtered by status, predicate and failure code.

    Reads the runs view, caught up first (see --no-catch-up).

    --orphaned lists the running runs the ledger's events say are orphans, each with
    its rule and evidence; it only reads (recovering them is the sweep's job;
    docs/operations.md).

    Example: epochledger runs --where can_auto_resume --code TIMEOUT
             epochledger runs --streaking   (runs whose tick keeps failing; docs/tick.md)
             epochledger runs --orphaned --json
    """

    def keep(s: RunState) -> bool:
        if ns.status and s.status not in ns.status:
            return False
        if ns.where and not all(lifecycle.PREDICATES[p](s.status, s.code) for p in ns.where):
            return False
        if ns.code and not (lifecycle.is_failure(s.status) and show_code(s.code) in ns.code):
            return False
        return True

    if ns.orphaned:
        return _runs_orphaned(ns, keep)
    from projections.engine import read_runs

    with _open(ns) as ledger:
        found, lag = read_runs(ledger.store, keep, catch_up_first=not ns.no_catch_up)
        rows = [run_record(s) for s in found]
        if ns.streaking:
            rows = _streaking(rows, _tick.tick_health(ledger, catch_up_first=not ns.no_catch_up))
    _say_lag(lag)
    if ns.json:
        out_json(rows)
        return
    if ns.streaking:
        cols = ["since", "age_s", "failures", "step", "error_class", "error"]
        table([{"run": r["run"], "status": r["status"], **{c: r["streak"][c] for c in cols}} for r in rows], ["run", "status", *cols])
        return
    table(rows, ["run", "status", "code_shown", "workflow", "process", "updated_at", "actor"])


# ------------------------------------------------ issue 4: epochs, orphans, sweep
def _runs_orphaned(ns: argparse.Namespace, keep: Callable[[RunState], bool]) -> None:
    with _open(ns) as ledger:
        found = ledger.orphans()
    rows = []
    for state, verdict in found:
        if not keep(state):
            continue
        rec = run_record(state)
        rec["orphan"] = msgspec.to_builtins(verdict)
        rec["rule"], rec["why"] = verdict.rule, verdict.explain()
        rows.append(rec)
    if ns.json:
        out_json(rows)
        return
    table(rows, ["run", "status", "process", "epoch", "started_at", "rule", "why"])


@command("epochs", arg("--process", help="only this process slot"), JSON)
def cmd_epochs(ns: argparse.Namespace) -> None:
    """List process slots and their boot epochs, live or not (BRIEF O1, O2).

    An epoch is live until a later boot of its slot supersedes it or it records a
    clean stop; the running runs of an epoch that is not live are orphans.

    Example: epochledger epochs --process worker-1
    """
    with _open(ns) as ledger:
        epochs = ledger.epochs()
    rows = [{**msgspec.to_builtins(e), "live": e.live} for e in epochs if ns.process in (None, e.process)]
    if ns.json:
        out_json(rows)
        return
    table(rows, ["process", "epoch", "live", "booted_at", "host", "pid", "superseded_by", "stopped_at",
                 "sweep_skipped", "sweep_failed_at"])  # fmt: skip


@command(
    "sweep",
    arg("--process", required=True, help="the process slot to recover"),
    arg("--epoch", help="id of the epoch to boot (default: a fresh one)"),
    arg("--margin", type=float, default=ORPHAN_MARGIN_S, help="O3 fallback margin in seconds (default 1, no floor)"),
    arg("--actor", default="operator", help="who is recovering (recorded on the boot)"),
    arg("--dry-run", action="store_true", help="only show what would be recovered; write nothing"),
    JSON,
)
def cmd_sweep(ns: argparse.Namespace) -> None:
    """Boot a new epoch of a process slot and sweep with it: for an operator recovering
    by hand a slot whose process is gone.

    CAUTION: the new epoch supersedes the slot's current epoch, so every run it owns is
    recovered as an orphan. Use it only for a slot whose process is dead; a live
    scheduler recovers its own orphans at start (docs/operations.md).

    Example: epochledger sweep --process worker-1 --dry-run   (what would be recovered)
             epochledger sweep --process worker-1
    """
    if ns.dry_run:
        from epochledger.sweep import preview

        with _open(ns) as ledger:
            report = preview(ledger, ns.process, margin=ns.margin)
        if ns.json:
            out_json({"booted": None, "report": report})
            return
        out(f"dry run: booting a new epoch of {report.process} now would recover {len(report.recovered)} orphan(s)")
        for v in report.recovered:
            out(f"  {v.run}: {v.rule}: {v.explain()}")
        return
    with _open(ns) as ledger:
        epoch, report = ledger.startup(ns.process, epoch=ns.epoch, actor=ns.actor, margin=ns.margin)
    if ns.json:
        out_json({"booted": epoch, "report": report})
        return
    out(f"booted {report.process} epoch {report.epoch}; sweep {report.outcome}: recovered {len(report.recovered)} orphan(s)")
    if report.fallback_skipped:
        out(f"O3 fallback skipped: {report.fallback_skipped}")
    for v in report.recovered:
        out(f"  {v.run}: {v.rule}: {v.explain()}")


@command("history", arg("run"), JSON)
def cmd_history(ns: argparse.Namespace) -> None:
    """Every event of one run, in order, with who made each transition and why.

    Example: epochledger history nightly-0042
    """
    from ledger.store import Poison

    with _open(ns) as ledger:
        history = ledger.history(ns.run)
    rows: list[dict[str, Any]] = []
    previous = None
    for r in history:
        if isinstance(r, Poison):  # shown in its place, never a reason to hide the rest (rule T4)
            rows.append({"position": r.position, "version": r.version, "type": r.tag, "undecodable": r.error})
            continue
        d = {"position": r.position, "version": r.version, "from_status": previous, **msgspec.to_builtins(r.event)}
        previous = d["status"]
        rows.append(d)
    if ns.json:
        out_json(rows)
        return
    for d in rows:
        if "undecodable" in d:
            d["type"] = f"UNDECODABLE {d['type'] or '(unknown type)'}"
            d["reason"] = d.pop("undecodable")
            continue
        if lifecycle.is_failure(Status(d["status"])):
            d["code"] = show_code(d.get("code", ""))
        if d["type"] == "run.corrected":  # corrections stand out in every history
            d["type"] = f"CORRECTION {d['from_status']} -> {d['status']}"
        if d["type"] == "run.fenced":  # so do late reports of stale epochs (rules F1, F2)
            d["type"] = f"FENCED {d['refused']}" + (f" -> {d['reported']}" if d.get("reported") else "")
            d["actor"] = d.get("actor") or d["epoch"]
        if d.get("cause"):
            d["reason"] = "; ".join(filter(None, [d.get("reason"), "caused by " + describe_cause(d["cause"])]))
    table(rows, ["position", "at", "type", "status", "code", "actor", "reason"])


def describe_cause(cause: dict[str, Any]) -> str:
    """`OOM_KILLED: cgroup limit <- ...` for a nested cause chain."""
    parts = []
    while cause:
        parts.append(": ".join(filter(None, [show_code(cause.get("code", "")), cause.get("message")])))
        cause = cause.get("cause")  # type: ignore[assignment]
    return " caused by ".join(parts)


@command(
    "correct",
    arg("run"),
    arg("--to", required=True, choices=[s.value for s in Status if lifecycle.is_correction_target(s)], help="the corrected status"),
    arg("--code", default="", help="the corrected failure code (for a failure status; empty = UNKNOWN)"),
    arg("--error", help="the corrected error text"),
    arg("--actor", required=True, help="who makes the correction"),
    arg("--reason", required=True, help="why: shown in every history and counted in audit"),
    JSON,
)
def cmd_correct(ns: argparse.Namespace) -> None:
    """Correct the verdict of a failed or finished run: the only way out of a final
    status. Needs an actor and a reason; shows as a CORRECTION in `history`.

    Example: epochledger correct nightly-0042 --to failed --code BAD_OUTPUT --actor alice --reason "empty export"
    """
    with _open(ns) as ledger:
        state = ledger.correct(ns.run, Status(ns.to), code=ns.code, error=ns.error, actor=ns.actor, reason=ns.reason)
    if ns.json:
        out_json(run_record(state))
    else:
        out(f"{ns.run}: corrected to {state.status}" + (f" ({show_code(state.code)})" if lifecycle.is_failure(state.status) else ""))


@command("demo", arg("--force", action="store_true", help="replace an existing demo file"))
def cmd_demo(ns: argparse.Namespace) -> None:
    """Record a small, believable scheduler day into a fresh SQLite file and print it.

    Writes ./epochledger-demo.db unless --store names another SQLite file.

    Example: epochledger demo && epochledger --store epochledger-demo.db runs
    """
    from epochledger.demo import run_demo

    run_demo(ns.store, force=ns.force, out=out)


# ------------------------------------------------------- tick health (docs/tick.md)
from epochledger import tick as _tick  # noqa: E402
from projections import tick_health as _tick_health  # noqa: E402


def _streaking(rows: list[dict[str, Any]], view: Any) -> list[dict[str, Any]]:
    """Keep the runs with an open streak, oldest streak first, with its age in ledger time."""
    by_run = {row["run"]: row for row in rows}
    return [{**by_run[st["run"]], "streak": st} for st in _tick_health.open_streaks(view) if st["run"] in by_run]


def _show_tick_health(health: dict[str, Any]) -> None:
    s = health["streak"]
    if s is not None:
        out(f"{'tick streak':>12}: open since {s['since']} ({s['failures']} failed ticks, age {s['age_s']:.0f}s "
            f"in ledger time); last: step {s['step']} {s['error_class']}: {s['error']}")  # fmt: skip
    for d in health["dead_letters"]:
        cleanup = f"; cleanup failed: {d['cleanup_error']}" if d.get("cleanup_error") else ""
        out(f"{'dead-letter':>12}: {d['at']} tick {d['tick']} step {d['step']} {d['error_class']}: {d['error']} "
            f"({d['failures']} failures since {d['failing_since']}, bound {d['deadline_s']:.0f}s){cleanup}")  # fmt: skip


@command("tick-health", JSON)
def cmd_tick_health(ns: argparse.Namespace) -> None:
    """Fleet tick health: open failure streaks (age in ledger time, last error) and
    dead-letters by step and by error class (docs/tick.md).

    Example: epochledger tick-health --json
    """
    with _open(ns) as ledger:
        summary = _tick_health.summary(_tick.tick_health(ledger))
    if ns.json:
        out_json(summary)
        return
    now = summary["now"]
    out(f"ledger time: {msgspec.to_builtins(now) if now is not None else '(empty log)'}")
    out(f"open streaks: {len(summary['open_streaks'])}")
    table(summary["open_streaks"], ["run", "since", "age_s", "failures", "step", "error_class", "error"])
    out(f"dead-letters: {summary['dead_letters']}")
    for key in ("dead_letters_by_step", "dead_letters_by_error_class"):
        for name, n in summary[key].items():
            out(f"  {key.removeprefix('dead_letters_')} {name}: {n}")


# ----------------------------------------------------- projections and replay
# (issue 6: the read side; docs/projections.md)
def _say_lag(lag: int) -> None:
    if lag:
        print(f"epochledger: note: the view is {lag} positions behind the log", file=sys.stderr)


def _progress() -> Any:
    if not sys.stderr.isatty():
        return None

    def show(view: str, position: int, head: int) -> None:
        done = min(position, head) / head if head else 1.0
        bar = "#" * int(done * 30)
        sys.stderr.write(f"\r{view:>10} [{bar:<30}] {done:6.1%} {position}/{head}")
        sys.stderr.flush()

    return show


def _view_names() -> list[str]:
    from projections.registry import VIEWS

    return [v.NAME for v in VIEWS]


@command("rebuild", arg("view", nargs="?", choices=_view_names(), help="one view (default: all)"), JSON)
def cmd_rebuild(ns: argparse.Namespace) -> None:
    """Rebuild views from position zero beside the live ones, then swap them in.

    Readers see the old view until the swap. A rebuild that is killed resumes where it
    stopped. Parked events are retried. Prints events, seconds and events/s per view.

    Example: epochledger rebuild runs
    """
    import time

    from projections import engine, registry

    views = [registry.by_name(ns.view)] if ns.view else list(registry.VIEWS)
    progress = _progress()
    results = []
    with _open(ns) as ledger:
        for v in views:
            t0 = time.perf_counter()
            st = engine.rebuild(ledger.store, v, progress=progress)
            more = engine.catch_up(ledger.store, v)  # events appended during the rebuild
            seconds = time.perf_counter() - t0
            if progress is not None:
                sys.stderr.write("\n")
            rate = round((st.events + more.events) / seconds) if seconds > 0 else 0
            results.append({"view": v.NAME, "events": st.events + more.events, "parked": st.parked + more.parked,
                            "position": more.position, "seconds": round(seconds, 3), "events_per_second": rate})  # fmt: skip
    if ns.json:
        out_json(results)
        return
    for r in results:
        out(f"rebuilt {r['view']}: {r['events']} events in {r['seconds']:.2f} s ({r['events_per_second']:,} events/s), "
            f"{r['parked']} parked, at position {r['position']}")


@command("verify", JSON)
def cmd_verify(ns: argparse.Namespace) -> None:
    """Replay the log from zero in memory and compare every live view with it, row by
    row, up to the view's own position. Names the first difference (exit 10). A view
    that was never built is reported as such (nothing to compare).

    Example: epochledger verify
    """
    from ledger.errors import ViewMismatch
    from replay import verify as verify_mod

    with _open(ns) as ledger:
        results = verify_mod.verify(ledger.store)
    if ns.json:
        out_json(results)
    else:
        for r in results:
            verdict = "ok" if r.difference is None else "DIFFERS: " + r.difference.message
            if not r.built:
                verdict = f"not built yet, nothing to compare (epochledger rebuild {r.view})"
            out(f"{r.view}: {verdict} (position {r.position}, {r.rows} rows, {r.parked} parked)")
    bad = [r for r in results if r.difference is not None]
    if bad:
        raise ViewMismatch(bad[0].view, bad[0].difference.message)  # type: ignore[union-attr]


@command("replay", arg("--at", help="an instant with a time zone, e.g. 2026-09-09T14:29:19Z"),
         arg("--position", type=int, help="a notification position"), JSON)  # fmt: skip
def cmd_replay(ns: argparse.Namespace) -> None:
    """The fleet's state as of a log position or an instant, and its state hash.

    The same prefix of the log always gives byte-identical state and the same hash.
    --at stops before the first event stamped after the instant. --json prints the
    whole state (every view), canonically encoded.

    Example: epochledger replay --at 2026-09-09T14:29:19Z
    """
    from datetime import datetime

    from ledger.errors import InvalidInput
    from replay import canonical_bytes, state_at, state_hash

    at = None
    if ns.at is not None:
        try:
            at = datetime.fromisoformat(ns.at)
        except ValueError:
            raise InvalidInput(f"not an RFC 3339 instant: {ns.at!r}", where="--at") from None
    with _open(ns) as ledger:
        state = state_at(ledger.store, position=ns.position, at=at)
    if ns.json:
        sys.stdout.buffer.write(canonical_bytes(state) + b"\n")
        sys.stdout.flush()
        return
    out(f"position {state.position}" + (f" (at {state.at.isoformat()})" if state.at else "")
        + f", {state.events} events, state hash {state_hash(state)}")  # fmt: skip
    runs = [s for s in state.views.get("runs", {}).values() if not s.deleted]
    by_status: dict[str, int] = {}
    for r in runs:
        by_status[str(r.status)] = by_status.get(str(r.status), 0) + 1
    out(f"runs: {len(runs)}" + "".join(f", {k} {v}" for k, v in sorted(by_status.items())))
    parked = sorted({p for ps in state.parked.values() for p in ps})
    if parked:
        out(f"unapplied (parked) events at positions: {', '.join(map(str, parked))}")


@command("parked", arg("view", nargs="?", help="only this view"), JSON)
def cmd_parked(ns: argparse.Namespace) -> None:
    """List events a view could not process (undecodable, or its fold raised), parked
    after bounded retries (BRIEF T4). `rebuild` retries them.

    Example: epochledger parked --json
    """
    from projections import registry

    if ns.view:
        registry.by_name(ns.view)
    with _open(ns) as ledger:
        tables.ensure(ledger.store)
        rows = [dict(zip(("view", "position", "stream", "tag", "error", "attempts", "parked_at"), r, strict=True))
                for r in tables.parked(ledger.store, ns.view)]  # fmt: skip
    if ns.json:
        out_json(rows)
        return
    table(rows, ["view", "position", "stream", "tag", "attempts", "parked_at", "error"])


@command("follow", arg("--poll", type=float, default=0.2, help="seconds between polls on SQLite (> 0, default 0.2)"))
def cmd_follow(ns: argparse.Namespace) -> None:
    """Keep every view caught up with the log until interrupted (Ctrl-C): polling on
    SQLite, the library's LISTEN/NOTIFY subscription on PostgreSQL.

    Example: epochledger follow
    """
    import threading

    from projections import engine

    stop = threading.Event()

    def report(stats: list[Any]) -> None:
        out(", ".join(f"{s.view} +{s.events} -> {s.position}" for s in stats if s.events))

    with _open(ns) as ledger:
        try:
            engine.follow(ledger.store, stop=stop, poll=ns.poll, on_batch=report)
        except KeyboardInterrupt:
            stop.set()


# ------------------------------------------------------ audit (issue 7, A1)
# Grouped commands: a registry name "audit sync" becomes `epochledger audit sync`.
GROUPS: dict[str, str] = {"audit": "The history in DuckDB: sync, canned reports, read-only SQL, Parquet (docs/audit.md)."}
DUCKDB = arg("--duckdb", metavar="FILE", default=None,
             help="audit file (default: beside a SQLite store, runs.db -> runs.duckdb; else ./epochledger.duckdb)")  # fmt: skip
# Defaults live in projections/audit/ (QUERY_TIMEOUT_S, QUERY_MEMORY_LIMIT, SYNC_WAIT_S); the
# help repeats them, and tests/test_audit.py checks that it (and docs/audit.md) agree.
TIMEOUT = arg("--timeout", metavar="SECONDS", type=float, default=None,
              help="interrupt the query after this long (default 60; docs/audit.md, Bounds)")  # fmt: skip
MEMORY = arg("--memory-limit", metavar="SIZE", default=None,
             help="memory DuckDB may use, never spilling to disk (default 1GB; e.g. 512MB, 4GB)")  # fmt: skip


def _given(ns: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The flags the user gave; the library's defaults apply to the rest."""
    return {n: getattr(ns, n) for n in names if getattr(ns, n) is not None}


def _duckdb(ns: argparse.Namespace) -> str:
    from projections.audit import default_path

    return ns.duckdb or default_path(ns.store)


def _print_result(result: Any, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(result.records(), enc_hook=str), indent=2) + b"\n")
        sys.stdout.flush()
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(result.columns)
        w.writerows(result.rows)
    else:
        table(result.records(), result.columns)


@command("audit sync", DUCKDB, arg("--wait", metavar="SECONDS", type=float, default=None,
         help="how long to wait for queries holding the file (default 90, longer than their 60 s timeout)"), JSON)  # fmt: skip
def cmd_audit_sync(ns: argparse.Namespace) -> None:
    """Copy the events recorded since the last sync into the DuckDB audit file.

    Incremental: the file keeps the notification position it has reached, updated in
    the same transaction as the rows, so a second sync appends only newer events. The
    ledger store is only read. A DuckDB file that is not an audit file is refused
    (exit 3); while queries hold the file, sync waits up to --wait seconds, then
    fails naming the holder (exit 7).

    Example: epochledger --store runs.db audit sync      # writes runs.duckdb
    """
    from projections.audit import sync

    path = _duckdb(ns)
    with _open_existing(ns) as ledger:
        tty = sys.stderr.isatty()
        progress = (lambda n, pos: print(f"\r{n} events (position {pos})", end="", file=sys.stderr)) if tty else None
        result = sync(ledger.store, path, progress=progress, **_given(ns, "wait"))
        if tty and result.appended:
            print(file=sys.stderr)
    if ns.json:
        out_json(result._asdict())
    else:
        out(f"appended {result.appended} events to {result.duckdb} (position {result.position}, {result.events} events in all)")


@command("audit status", DUCKDB, JSON)
def cmd_audit_status(ns: argparse.Namespace) -> None:
    """Show how far the audit file has synced, and how far behind the ledger it is.

    Example: epochledger --store runs.db audit status
    """
    from projections.audit import status

    with _open_existing(ns) as ledger:
        result = status(_duckdb(ns), ledger.store)
    if ns.json:
        out_json(result)
    else:
        out(f"{result['duckdb']}: position {result['position']} of {result['ledger_position']} "
            f"({result['behind']} behind), {result['events']} events, newest at {result['latest']}")  # fmt: skip


@command("audit report", arg("name", help="one of the reports listed above"), DUCKDB,
         arg("--as-of", metavar="INSTANT", default=None,
             help="RFC 3339 instant the report is computed as of (default: the newest synced event)"),
         arg("--period", default="day", help="failure_codes: hour, day, week, month, quarter or year"),
         arg("--format", choices=["table", "csv", "json"], default="table"), TIMEOUT, MEMORY, JSON)  # fmt: skip
def cmd_audit_report(ns: argparse.Namespace) -> None:
    """Run a canned audit report over the audit file (run `audit sync` first).

    Reports: failure_codes, recoveries_per_epoch, time_in_status, corrections,
    dead_letters, orphaned_while_live (must print "(none)"). Each is one SQL file,
    projections/audit/report_NAME.sql, computed as of an explicit instant.

    Example: epochledger audit report failure_codes --period week --as-of 2026-09-10T00:00:00Z
    """
    from projections.audit import report

    as_of = None
    if ns.as_of is not None:
        try:
            from ledger.events import Instant

            as_of = msgspec.json.decode(msgspec.json.encode(ns.as_of), type=Instant)
        except (msgspec.ValidationError, UnicodeEncodeError) as e:
            from ledger.errors import InvalidInput

            raise InvalidInput(f"not an RFC 3339 instant: {e}", where="--as-of") from None
    result = report(_duckdb(ns), ns.name, as_of=as_of, period=ns.period, **_given(ns, "timeout", "memory_limit"))
    _print_result(result, "json" if ns.json else ns.format)


@command("audit query", arg("sql", help="one SELECT (or WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)"), DUCKDB,
         arg("--format", choices=["table", "csv", "json"], default="table"), TIMEOUT, MEMORY, JSON)  # fmt: skip
def cmd_audit_query(ns: argparse.Namespace) -> None:
    """Run one read-only SQL statement (SELECT, DESCRIBE, ...) on the audit file.

    Writes are refused (exit 3): the statement type is checked, and the file is opened
    read-only with file access disabled and settings locked (docs/audit.md). Bounded:
    interrupted after --timeout seconds, at most --memory-limit of memory, nothing
    spilled to disk (exit 3 when a bound stops it).

    Example: epochledger audit query "SELECT status, count(*) FROM runs GROUP BY ALL" --format csv
    """
    from projections.audit import query

    _print_result(query(_duckdb(ns), ns.sql, **_given(ns, "timeout", "memory_limit")), "json" if ns.json else ns.format)


@command("audit export-parquet", arg("dir", help="a new or empty directory"), DUCKDB, JSON)
def cmd_audit_export_parquet(ns: argparse.Namespace) -> None:
    """Write the audit file's events as Parquet files partitioned by event date.

    For histories larger than one machine's memory: DuckDB, Spark and pandas read
    DIR/events/event_date=YYYY-MM-DD/*.parquet (docs/audit.md).

    Example: epochledger audit export-parquet ./audit-parquet
    """
    from projections.audit import export_parquet

    result = export_parquet(_duckdb(ns), ns.dir)
    if ns.json:
        out_json(result)
    else:
        out(f"wrote {result['events']} events in {result['files']} Parquet files under {result['directory']}")


def _open_existing(ns: argparse.Namespace) -> Ledger:
    """Open a ledger that must already exist, writing nothing to it: an audit command
    never creates a file, schema or table, and only reads."""
    from ledger.store import open_store

    return Ledger(open_store(ns.store, create=False))


# -------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS,
                        help="store URL: sqlite:///file.db, a path, or postgresql://user@host:port/db "
                             "(default: $EPOCHLEDGER_STORE, then ./epochledger.db)")  # fmt: skip
    parser = argparse.ArgumentParser(
        prog="epochledger",
        description="An event-sourced ledger of scheduler runs.",
        epilog="Exit codes: 0 ok, 1 ledger error, 2 usage, 3 invalid input, 4 run not found, "
        "5 illegal transition, 6 write conflict, 7 store error (also not committed, permission denied), "
        "8 damaged log (undecodable event, stream gap), "
        "9 stale epoch (report fenced; kept as run.fenced), 10 a view differs from its replay (verify), "
        "11 commit outcome unknown (check before retrying).",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, Any] = {}
    for name, handler, args in _COMMANDS:
        doc = textwrap.dedent(handler.__doc__ or "")
        where = sub
        if " " in name:  # a grouped command, e.g. "audit sync"
            group, name = name.split(" ", 1)
            if group not in groups:
                gp = sub.add_parser(group, help=GROUPS.get(group), description=GROUPS.get(group), parents=[common])
                groups[group] = gp.add_subparsers(dest=group + "_command", metavar="ACTION", required=True)
            where = groups[group]
        p = where.add_parser(name, help=doc.strip().splitlines()[0] if doc else None, description=doc,
                             formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])  # fmt: skip
        for flags, kw in args:
            p.add_argument(*flags, **kw)
        p.set_defaults(handler=handler)
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    ns = build_parser().parse_args(list(argv) if argv is not None else None)
    ns.store = getattr(ns, "store", None)
    try:
        return ns.handler(ns) or 0
    except LedgerError as e:
        err(f"epochledger: {type(e).__name__}: {e}")
        return e.exit_code
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
