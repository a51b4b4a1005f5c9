"""Commands about runs: init, import, export, show, runs, history, correct, demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from epochledger import tick
from epochledger.app import open_ledger
from epochledger.cli.common import (
    JSON,
    NO_CATCH_UP,
    arg,
    command,
    err,
    open_ns,
    out,
    out_json,
    run_record,
    say_lag,
    table,
)
from ledger import lifecycle
from ledger.codes import show_code
from ledger.events import Status
from ledger.run import RunState
from projections import tick_health as tick_health_view


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

    with open_ns(ns) as ledger:
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

    with open_ns(ns) as ledger:
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

    with open_ns(ns) as ledger:
        state, lag = read_run(ledger.store, ns.run, catch_up_first=not ns.no_catch_up)
        rec = run_record(state)
        rec["tick_health"] = tick.run_tick_health(ledger, ns.run, catch_up_first=not ns.no_catch_up)  # docs/tick.md
    say_lag(lag)
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
    arg("--orphaned", action="store_true", help="only running runs whose owner is gone (rules O2/O3), with the verdict"),
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
        return runs_orphaned(ns, keep)
    from projections.engine import read_runs

    with open_ns(ns) as ledger:
        found, lag = read_runs(ledger.store, keep, catch_up_first=not ns.no_catch_up, statuses=ns.status or ())
        rows = [run_record(s) for s in found]
        if ns.streaking:
            rows = _streaking(rows, tick.tick_health(ledger, catch_up_first=not ns.no_catch_up))
    say_lag(lag)
    if ns.json:
        out_json(rows)
        return
    if ns.streaking:
        cols = ["since", "age_s", "failures", "step", "error_class", "error"]
        table([{"run": r["run"], "status": r["status"], **{c: r["streak"][c] for c in cols}} for r in rows], ["run", "status", *cols])
        return
    table(rows, ["run", "status", "code_shown", "workflow", "process", "updated_at", "actor"])


@command("history", arg("run"), JSON)
def cmd_history(ns: argparse.Namespace) -> None:
    """Every event of one run, in order, with who made each transition and why.

    Example: epochledger history nightly-0042
    """
    from ledger.store import Poison

    with open_ns(ns) as ledger:
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
    with open_ns(ns) as ledger:
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


def _streaking(rows: list[dict[str, Any]], view: Any) -> list[dict[str, Any]]:
    """Keep the runs with an open streak, oldest streak first, with its age in ledger time."""
    by_run = {row["run"]: row for row in rows}
    return [{**by_run[st["run"]], "streak": st} for st in tick_health_view.open_streaks(view) if st["run"] in by_run]


def _show_tick_health(health: dict[str, Any]) -> None:
    s = health["streak"]
    if s is not None:
        out(f"{'tick streak':>12}: open since {s['since']} ({s['failures']} failed ticks, age {s['age_s']:.0f}s "
            f"in ledger time); last: step {s['step']} {s['error_class']}: {s['error']}")  # fmt: skip
    for d in health["dead_letters"]:
        cleanup = f"; cleanup failed: {d['cleanup_error']}" if d.get("cleanup_error") else ""
        out(f"{'dead-letter':>12}: {d['at']} tick {d['tick']} step {d['step']} {d['error_class']}: {d['error']} "
            f"({d['failures']} failures since {d['failing_since']}, bound {d['deadline_s']:.0f}s){cleanup}")  # fmt: skip


def runs_orphaned(ns: argparse.Namespace, keep: Callable[[RunState], bool]) -> None:
    with open_ns(ns) as ledger:
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
