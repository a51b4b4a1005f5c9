"""Commands about runs: init, import, import-dagster, export, show, runs, history, correct, demo."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from epochledger.cli.common import (
    JSON,
    NO_CATCH_UP,
    QUIET,
    Progress,
    arg,
    command,
    err,
    file_size,
    open_ns,
    out,
    out_json,
    run_record,
    runs_table,
    say_lag,
    table,
)
from epochledger.ledger import lifecycle
from epochledger.ledger.codes import show_code
from epochledger.ledger.events import Status

if TYPE_CHECKING:  # imported where used: the registry and `--help` load neither (rule W2)
    from epochledger.reports import FollowRound, Orphaned


@command(
    "init",
    arg(
        "--default-slot",
        metavar="NAME",
        help="the process slot whose boots judge running runs "
        "recorded with neither an epoch nor a process (rule O9); recorded in the ledger",
    ),
)
def cmd_init(ns: argparse.Namespace) -> None:
    """Create the ledger's tables, or upgrade them (idempotent), and print where the
    ledger is. On PostgreSQL this is the owner's job: writers and readers open an
    existing store without DDL (docs/operations.md, PostgreSQL roles). A ledger made
    before the hash chain gets it here: every event is sealed, and init says how many.

    --default-slot NAME records (as a `ledger.default_slot` event, so replays know it)
    the slot whose boots judge, by the O3 time fallback, the running runs recorded with
    neither an epoch nor a process; without one they are listed by `runs --orphaned`
    and every sweep report as runs no slot can judge (rule O9). Naming the slot it
    already has appends nothing.

    Example: epochledger --store sqlite:///runs.db init
             epochledger --store sqlite:///runs.db init --default-slot api-1
    """
    from epochledger.app import open_ledger

    with open_ledger(ns.store, init=True) as ledger:
        sealed = ledger.sealed_at_open()
        if sealed is not None and sealed.sealed:  # a ledger made before the hash chain (rule S1)
            out(f"created the hash chain: sealed {sealed.sealed} events, head at position {sealed.position}")
        if ns.default_slot is not None:
            ledger.set_default_slot(ns.default_slot, actor="operator")
        settings = ledger.settings()
        if settings is not None and settings.default_slot is not None:
            out(f"default slot for runs with neither epoch nor process: {settings.default_slot} (rule O9)")
        out(f"ledger ready at {ledger.url} ({ledger.head()} events)")


@command(
    "import",
    arg("file", help="NDJSON file, or - for standard input"),
    arg(
        "--on-error",
        choices=["stop", "skip"],
        default="stop",
        help="stop: one bad line rejects the whole file (the default); skip: import every acceptable "
        "line and write the rejected ones to --rejects (exit 11 if any)",
    ),
    arg(
        "--rejects",
        metavar="FILE",
        help="with --on-error skip: where the rejected lines go, as NDJSON "
        "(line, reason, event, raw); written atomically, replaced on every import",
    ),
    arg(
        "--clock-steps",
        choices=["refuse", "keep"],
        default="refuse",
        help="refuse: a run event stamped earlier than its run's previous event is refused (the default); "
        "keep: import it as recorded (an export of a ledger whose clocks stepped back or disagreed)",
    ),
    JSON,
    QUIET,
)
def cmd_import(ns: argparse.Namespace) -> int:
    """Import an NDJSON history: one event per line, {"type": TAG, "at": RFC3339, ...}.

    Every line goes through the same rules as the API, stamped with its own "at", and
    the file lands in one transaction. A line already recorded (same stream, type, time
    and fields, anywhere in the stream) is a duplicate: counted, not appended. A line
    is judged at its place in the file: one not recorded that comes before a line of
    its run already recorded is judged there, never appended after it. So importing the
    same file twice appends nothing the second time, and rejects the same lines (a
    report kept as evidence is listed again, appending nothing). A run event whose "at"
    is earlier than its run's previous event is refused (a negative duration), unless
    --clock-steps keep: an export of a ledger whose writers' clocks stepped back or
    disagreed records exactly that, and comes back as written.

    Strict (the default): any bad line rejects the whole file (exit 3, the line number
    and the reason), and nothing is appended. --on-error skip --rejects FILE: every
    acceptable line lands, every rejected one goes to FILE with its line number and
    reason, a refused report that is a real observation (a late success after a
    cancel) is kept as run.fenced evidence, and the command exits 11 if any line was
    rejected. The output counts landed, duplicate and rejected lines. On a terminal, a
    progress line on standard error counts the lines read (--quiet: none).

    Example: epochledger import history.ndjson
             epochledger import dagster.ndjson --on-error skip --rejects rejected.ndjson
             epochledger import backup.ndjson --clock-steps keep
    """
    from epochledger.ndjson import read_lines  # the NDJSON line reader: parsing, no ledger

    if (usage := _rejects_usage(ns)) is not None:
        return usage
    protected = [ns.file] if ns.file != "-" else []
    shown = Progress(ns)  # on a terminal: lines read, then committing
    with open_ns(ns) as ledger:
        if ns.file == "-":
            result = ledger.import_ndjson(
                shown.lines(read_lines(sys.stdin.buffer), None, "import"),
                on_error=ns.on_error,
                rejects=ns.rejects,
                clock_steps=ns.clock_steps,
            )
        else:
            try:
                f = open(ns.file, "rb")
            except (OSError, ValueError) as e:  # ValueError: a NUL in the name
                from epochledger.ledger.errors import InvalidInput

                raise InvalidInput(f"cannot read: {getattr(e, 'strerror', None) or e}", where=ns.file) from None
            with f:
                result = ledger.import_ndjson(
                    shown.lines(read_lines(f), file_size(f), "import"),
                    on_error=ns.on_error,
                    rejects=ns.rejects,
                    protected=protected,
                    clock_steps=ns.clock_steps,
                )
    shown.clear()
    rejected = len(result.rejected)
    if ns.json:
        out_json(
            {
                "file": ns.file,
                "lines": result.lines,
                "appended": result.appended,
                "landed": result.landed,
                "duplicates": result.duplicates,
                "held": result.held,
                "rejected": rejected,
                "evidence": result.evidence,
                "rejects": ns.rejects,
            }
        )
    else:
        parts = [f"{result.landed} landed", f"{result.duplicates} duplicates (already recorded)"]
        if result.held:
            parts.append(f"{result.held} already in effect")
        if ns.on_error == "skip":
            kept = f", {result.evidence} of them kept as run.fenced evidence" if result.evidence else ""
            parts.append(f"{rejected} rejected{kept}")
        what = "nothing was appended" if result.appended == 0 else f"imported {result.appended} events"
        out(
            f"{what} from {ns.file}: {', '.join(parts)}"
            + (f"; rejected lines written to {ns.rejects}" if rejected else "")
        )
    return 11 if rejected else 0


def _rejects_usage(ns: argparse.Namespace) -> int | None:
    """--on-error and --rejects go together (import, import-dagster): 2 and why, else None."""
    if ns.rejects is not None and ns.on_error != "skip":
        err("epochledger: --rejects needs --on-error skip (a strict import rejects the whole file)")
        return 2
    if ns.on_error == "skip" and ns.rejects is None:
        err("epochledger: --on-error skip needs --rejects FILE (every rejected line goes there)")
        return 2
    return None


@command(
    "import-dagster",
    arg(
        "--instance",
        required=True,
        metavar="DAGSTER_HOME",
        help="the Dagster instance's home directory (the one with dagster.yaml or history/runs.db)",
    ),
    arg(
        "--local-workers",
        action="store_true",
        help="the run workers ran on this host: record this host, its boot id and live pids' start "
        "times with each worker, so `epochledger probe` can judge them; a worker whose pid is "
        "already gone when read gets its exit",
    ),
    arg(
        "--dagster-tags",
        action="store_true",
        help="also keep Dagster's own tags (dagster/...: max_runtime, partition, ...) as labels; its "
        "hidden ones (.dagster/...) never are",
    ),
    arg(
        "--on-error",
        choices=["stop", "skip"],
        default="stop",
        help="stop: a Dagster run the ledger cannot record (a NaN time, an id that is not text) rejects "
        "the whole import (the default); skip: import every other run and write the rejected ones "
        "to --rejects (exit 11 if any)",
    ),
    arg(
        "--rejects",
        metavar="FILE",
        help="with --on-error skip: where the rejected runs go, as NDJSON "
        "(line: the run's storage id in Dagster, reason, raw: the record as read); written atomically, "
        "replaced on every import",
    ),
    arg(
        "--follow",
        action="store_true",
        help="keep importing until interrupted (Ctrl-C: exit 130; SIGTERM: exit 0 after the round): a round "
        "every --interval seconds of what Dagster changed since the last, and with --local-workers the "
        "probe after each (a worker that died without a word is an orphan at the next round); a line per "
        "round that appended something (--json: one JSON object per line)",
    ),
    arg(
        "--interval",
        type=float,
        default=1.0,
        metavar="S",
        help="with --follow: seconds from the start of one round to the start of the next (from 0.05 to "
        "3600, default 1)",
    ),
    JSON,
)
def cmd_import_dagster(ns: argparse.Namespace) -> int:
    """Import a Dagster instance's runs: new runs, and what happened to known runs since the last import.

    Needs the extra: pip install 'epochledger[dagster]'. Each Dagster run becomes run
    dagster:<run_id> (the user's tags as labels, Dagster's own dagster/... ones only
    with --dagster-tags; the re-executed run as parent), each run worker
    an epoch of slot dagster:<run_id>; a worker Dagster saw die gets process.exited.
    Incremental and idempotent: the ledger keeps a cursor per run (run.imported), so
    importing again appends only what is new, and nothing if nothing is. A transition
    the ledger refuses is kept as evidence and listed. Mapping: docs/import-dagster.md.

    Strict (the default): a Dagster run holding a value the ledger cannot record (a NaN
    or infinite time, a run id that is not text) rejects the whole import (exit 3,
    naming the run and the field), and nothing is appended. --on-error skip --rejects
    FILE: every other run is imported, each rejected run goes to FILE with its reason,
    and the command exits 11 if any run was rejected.

    --follow keeps the ledger current from a live instance until interrupted: the
    first round imports every run, each later one only the run records Dagster updated
    since (one query of its runs table), and with --local-workers each round ends with
    `epochledger probe`'s judgement of this host's live workers, so a SIGKILLed worker
    is an orphan, and its run recovered, within about one --interval (docs/import-dagster.md,
    "Following"). A store error or Dagster's own failed read ends only its round (a
    line on standard error); the next round tries again. Strict only: a Dagster run the
    ledger cannot record stops the follow (exit 3).

    Example: epochledger import-dagster --instance ~/dagster_home --local-workers
             epochledger import-dagster --instance ~/dagster_home --on-error skip --rejects rejected.ndjson
             epochledger import-dagster --instance ~/dagster_home --local-workers --follow --interval 2
    """
    if (usage := _rejects_usage(ns)) is not None:
        return usage
    if ns.follow:
        return _follow_dagster(ns)
    with open_ns(ns) as ledger:
        report = ledger.import_dagster(
            ns.instance,
            local_workers=ns.local_workers,
            on_error=ns.on_error,
            rejects=ns.rejects,
            dagster_tags=ns.dagster_tags,
        )
    rejected = len(report.rejected)
    if ns.json:
        out_json(report)
        return 11 if rejected else 0
    out(
        f"read {report.read} of {report.runs} Dagster runs ({report.events} Dagster events) from {report.instance}; "
        f"appended {report.appended} events"
        + (f"; {rejected} runs rejected, written to {ns.rejects}" if rejected else "")
    )
    for r in report.refused:
        out(f"refused {r.run} Dagster event {r.storage_id} ({r.kind}), kept as {r.kept_as}: {r.error}")
    for label in report.dropped_labels:
        out(f"tag not kept as a label: {label}")
    for j in report.rejected:
        out(f"rejected (run storage id {j.line}): {j.reason}")
    return 11 if rejected else 0


def _follow_dagster(ns: argparse.Namespace) -> int:
    """`import-dagster --follow`: rounds until SIGINT (KeyboardInterrupt: main exits 130)
    or SIGTERM (the round in progress ends, then exit 0)."""
    import signal
    import threading

    if ns.on_error != "stop":
        err(
            "epochledger: --follow is strict only (--on-error skip would replace its rejects file every "
            "round); a Dagster run the ledger cannot record stops it"
        )
        return 2
    stop = threading.Event()

    def on_round(r: FollowRound) -> None:
        if r.error is not None:
            err(f"epochledger: round {r.round}: {r.error} (the next round tries again)")
        if r.quiet and r.round > 1:
            return
        if ns.json:
            sys.stdout.buffer.write(msgspec.json.encode(r) + b"\n")
            sys.stdout.flush()
            return
        i = r.imported
        line = (
            f"round {r.round} ({r.seconds:.2f} s): read {i.read} of {i.runs} Dagster runs listed "
            f"({i.events} Dagster events); appended {i.appended} events"
        )
        exited = (r.probe.exited if r.probe else 0) + (r.swept.exited if r.swept else 0)
        last = r.swept or r.probe
        sweep = last.sweep if last is not None else None
        if exited:
            line += f"; probe: {exited} workers exited"
        if sweep is not None and sweep.recovered:
            line += f"; swept: {len(sweep.recovered)} runs recovered"
        out(line)
        for f in i.refused:
            out(f"refused {f.run} Dagster event {f.storage_id} ({f.kind}), kept as {f.kept_as}: {f.error}")
        sys.stdout.flush()

    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with open_ns(ns) as ledger:
            ledger.follow_dagster(
                ns.instance,
                stop=stop,
                interval=ns.interval,
                local_workers=ns.local_workers,
                dagster_tags=ns.dagster_tags,
                on_round=on_round,
            )
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


@command(
    "export",
    arg("--after", type=int, default=0, help="only events after this position"),
    arg("-o", "--output", default="-", help="file to write (default: standard output)"),
)
def cmd_export(ns: argparse.Namespace) -> None:
    """Export the log as NDJSON, in log order; `import` of it into an empty ledger
    reproduces it byte for byte.

    -o FILE is written atomically (a temporary file beside it, renamed over it when
    complete): a failed or interrupted export leaves FILE as it was, and the temporary
    file of one that was killed is removed by the next write of FILE. A FILE that is the
    ledger itself (or its -wal/-shm/-journal) is refused (exit 3), nothing written.

    Example: epochledger export -o history.ndjson
    """
    with open_ns(ns) as ledger:
        if ns.output == "-":
            ledger.export_ndjson(sys.stdout.buffer, ns.after)
            sys.stdout.flush()
        else:
            n = ledger.export_ndjson_file(ns.output, ns.after)
            err(f"exported {n} events to {ns.output}")


@command("show", arg("run"), JSON, NO_CATCH_UP)
def cmd_show(ns: argparse.Namespace) -> None:
    """Show one run's current state, its failure code and every lifecycle predicate.

    Reads the runs view, caught up first (see --no-catch-up).

    Example: epochledger show nightly-0042 --json
    """
    with open_ns(ns) as ledger:
        view = ledger.run_view(ns.run, catch_up_first=not ns.no_catch_up)
    rec = run_record(view.state)
    rec["tick_health"] = msgspec.to_builtins(view.tick_health)  # docs/tick.md
    say_lag(view.lag)
    if ns.json:
        out_json(rec)
        return
    preds = rec.pop("predicates")
    rec.pop("code", None)
    health = rec.pop("tick_health")
    rec.pop("tick_streak", None)
    end = rec.pop("fenced_end", None)
    labels = rec.pop("labels", None)
    prior = rec.pop("cancelled_from", None)
    for k, v in rec.items():
        if v is not None and v != "" and not (k in ("fenced", "attempt") and v == 0):
            out(f"{k:>12}: {v}")
    if labels:  # rule I2
        out(f"{'labels':>12}: " + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())))
    if end is not None:
        out(
            f"{'fenced end':>12}: stale epoch {end['epoch']} reported {end['refused']} ({end['reported']}) at "
            f"{end['at']}, kept as evidence: automation may not resume this run; an operator decides (rule F2)"
        )
    if prior is not None:  # what the cancel overrode (rule L2)
        was = ": ".join(
            filter(
                None,
                [
                    prior["status"] + (f" {show_code(prior['code'])}" if lifecycle.is_failure(prior["status"]) else ""),
                    prior.get("error"),
                    prior.get("reason"),
                ],
            )
        )
        out(
            f"{'cancelled':>12}: from {was}"
            + (f"; caused by {describe_cause(prior['cause'])}" if prior.get("cause") else "")
        )
    if view.children:  # the runs that re-execute this one (rule I2)
        out(f"{'children':>12}: " + ", ".join(view.children))
    out(f"{'predicates':>12}: " + ", ".join(k for k, v in preds.items() if v))
    _show_tick_health(health)


def label_filter(text: str) -> tuple[str, str]:
    """`KEY=VALUE` -> (key, value), split at the first `=` (a value may hold `=`):
    the facade's label_pair, as argparse wants its refusal."""
    from epochledger.ledger.errors import InvalidInput
    from epochledger.reports import label_pair

    try:
        return label_pair(text)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(e.message) from None


@command(
    "runs",
    arg("--status", choices=[s.value for s in Status], action="append", help="only runs in this status (repeatable)"),
    arg(
        "--where",
        choices=list(lifecycle.PREDICATES),
        action="append",
        help="only runs for which this predicate holds (repeatable)",
    ),
    arg("--code", action="append", help="only runs with this failure code (UNKNOWN for the empty code)"),
    arg(
        "--streaking",
        action="store_true",
        help="only runs with an open tick failure streak, with its age (docs/tick.md)",
    ),
    arg(
        "--orphaned", action="store_true", help="only running runs whose owner is gone (rules O2/O3), with the verdict"
    ),
    arg(
        "--label",
        metavar="KEY=VALUE",
        action="append",
        type=label_filter,
        help="only runs with this label (repeatable: every one must match; rule I2)",
    ),
    arg("--process", action="append", metavar="SLOT", help="only runs of this process slot (repeatable)"),
    arg("--parent", action="append", metavar="RUN", help="only runs that re-execute this run (repeatable; rule I2)"),
    arg(
        "--limit",
        type=int,
        metavar="N",
        help="one page of at most N runs, in the store's key order; the next page's cursor goes to standard error",
    ),
    arg("--after", metavar="CURSOR", help="with --limit: the page after this cursor (the `next` a page printed)"),
    JSON,
    NO_CATCH_UP,
)
def cmd_runs(ns: argparse.Namespace) -> None:
    """List runs, optionally filtered by status, predicate, failure code and labels.

    Reads the runs view, caught up first (see --no-catch-up).

    --orphaned lists the running runs the ledger's events say are orphans, each with
    its rule and evidence; it only reads (recovering them is the sweep's job;
    docs/operations.md). A running run no slot can judge (started with neither an
    epoch nor a process, and no default slot: `init --default-slot`) is listed too,
    with rule O9-no-slot and `orphan` null (rule O9).

    --limit N lists one page of at most N runs (the order is the store's, by run id);
    when more follow, standard error says `next page: --after CURSOR`, and the same
    command with that --after lists the next page. Runs recorded meanwhile appear on a
    later page or not at all (they sort before the cursor), never twice.

    Example: epochledger runs --where can_auto_resume --code TIMEOUT
             epochledger runs --streaking   (runs whose tick keeps failing; docs/tick.md)
             epochledger runs --orphaned --json
             epochledger runs --label team=data --label env=prod   (both labels; rule I2)
             epochledger runs --status running --limit 500   (then --after CURSOR for the next 500)
    """
    from epochledger.reports import gc_paused

    filters = {"statuses": ns.status or (), "codes": ns.code or (), "labels": ns.label or ()}
    paged = ns.limit is not None or ns.after is not None
    if (ns.orphaned or ns.streaking) and (paged or ns.parent) or (ns.orphaned and ns.process):
        from epochledger.ledger.errors import InvalidInput

        raise InvalidInput(
            "--limit, --after and --parent page a listing: --orphaned and --streaking take none of them, "
            "and --orphaned no --process",
            where="runs",
        )
    with open_ns(ns) as ledger:
        if ns.orphaned:
            return _orphaned(ns, ledger.orphaned(predicates=ns.where or (), **filters))
        if ns.streaking:
            found = ledger.streaking(
                predicates=ns.where or (), processes=ns.process or (), catch_up_first=not ns.no_catch_up, **filters
            )
            streaking, lag = found.runs, found.lag
        else:
            # Each output decodes from the runs view only what it shows: the table RunRow's
            # few fields, --json every field but the last event, in one encode
            # (docs/benchmarks.md, "Fleet size").
            listing = ledger.list_runs(
                predicates=ns.where or (),
                processes=ns.process or (),
                parents=ns.parent or (),
                catch_up_first=not ns.no_catch_up,
                shape="listed" if ns.json else "row",
                after=ns.after,
                limit=ns.limit,
                **filters,
            )
            lag = listing.lag
            if listing.next is not None:
                err(f"epochledger: next page: --after {listing.next}")
    say_lag(lag)
    with gc_paused():  # a listing of 100k runs: ~1.5x faster without the GC
        if ns.streaking:
            rows = [{**run_record(r.state), "streak": msgspec.to_builtins(r.streak)} for r in streaking]
            if ns.json:
                out_json(rows)
                return
            cols = ["since", "age_s", "failures", "step", "error_class", "error"]
            table(
                [{"run": r["run"], "status": r["status"], **{c: r["streak"][c] for c in cols}} for r in rows],
                ["run", "status", *cols],
            )
        elif ns.json:
            out_json(
                listing.runs, order="sorted"
            )  # the bytes of [run_record(s) ...] (tests/projections/test_listing.py)
        else:
            runs_table(listing.runs)


@command("history", arg("run"), JSON)
def cmd_history(ns: argparse.Namespace) -> None:
    """Every event of one run, in order, with who made each transition and why.

    Example: epochledger history nightly-0042
    """
    with open_ns(ns) as ledger:
        history = ledger.history_of(ns.run)
    rows: list[dict[str, Any]] = []
    for h in history:
        if h.poison is not None:  # shown in its place, never a reason to hide the rest (rule T4)
            rows.append(
                {"position": h.position, "version": h.version, "type": h.poison.tag, "undecodable": h.poison.error}
            )
        else:
            rows.append(
                {
                    "position": h.position,
                    "version": h.version,
                    "from_status": h.from_status,
                    **msgspec.to_builtins(h.event),
                }
            )
    if ns.json:
        out_json(rows)
        return
    for d, h in zip(rows, history, strict=True):
        tag, d["type"] = d["type"], h.label  # CORRECTION, FENCED and UNDECODABLE stand out (Ledger.history_of)
        if h.poison is not None:
            d["reason"] = d.pop("undecodable")
            continue
        if lifecycle.is_failure(Status(d["status"])):
            d["code"] = show_code(d.get("code", ""))
        if tag == "run.fenced":  # a late report of a stale epoch: by that epoch (rules F1, F2)
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
    arg(
        "--to",
        required=True,
        choices=[s.value for s in Status if lifecycle.is_correction_target(s)],
        help="the corrected status",
    ),
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
        out(
            f"{ns.run}: corrected to {state.status}"
            + (f" ({show_code(state.code)})" if lifecycle.is_failure(state.status) else "")
        )


@command("demo", arg("--force", action="store_true", help="replace an existing demo file"))
def cmd_demo(ns: argparse.Namespace) -> None:
    """Record a small, believable scheduler day into a fresh SQLite file and print it.

    Writes ./epochledger-demo.db unless --store names another SQLite file, and ends
    with the exact commands that explore it (they name its store).

    Example: epochledger demo && epochledger --store epochledger-demo.db runs
    """
    from epochledger.cli.common import program
    from epochledger.demo import run_demo

    run_demo(ns.store, force=ns.force, out=out, program=program())


def _show_tick_health(health: dict[str, Any]) -> None:
    s = health["streak"]
    if s is not None:
        out(
            f"{'tick streak':>12}: open since {s['since']} ({s['failures']} failed ticks, age {s['age_s']:.0f}s "
            f"in ledger time); last: step {s['step']} {s['error_class']}: {s['error']}"
        )
    for d in health["dead_letters"]:
        cleanup = f"; cleanup failed: {d['cleanup_error']}" if d.get("cleanup_error") else ""
        out(
            f"{'dead-letter':>12}: {d['at']} tick {d['tick']} step {d['step']} {d['error_class']}: {d['error']} "
            f"({d['failures']} failures since {d['failing_since']}, bound {d['deadline_s']:.0f}s){cleanup}"
        )


def _orphaned(ns: argparse.Namespace, found: list[Orphaned]) -> None:
    # an unjudged run (rule O9) is listed with `orphan` null, never passed over
    rows = [
        {
            **run_record(o.state),
            "orphan": msgspec.to_builtins(o.verdict) if o.verdict is not None else None,
            "rule": o.rule,
            "why": o.why,
        }
        for o in found
    ]
    if ns.json:
        out_json(rows)
        return
    table(rows, ["run", "status", "process", "epoch", "started_at", "rule", "why"])
