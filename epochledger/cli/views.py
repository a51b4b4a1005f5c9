"""Commands about the read side: tick-health, rebuild, verify, replay, parked, follow."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from epochledger.cli.common import (
    JSON,
    QUIET,
    Later,
    Progress,
    arg,
    command,
    err,
    instant,
    open_ns,
    out,
    out_json,
    progress,
    table,
)

if TYPE_CHECKING:
    import threading


@command("tick-health", JSON)
def cmd_tick_health(ns: argparse.Namespace) -> None:
    """Fleet tick health: open failure streaks (age in ledger time, last error) and
    dead-letters by step and by error class (docs/tick.md).

    Example: epochledger tick-health --json
    """
    with open_ns(ns) as ledger:
        summary = ledger.tick_health_summary()
    if ns.json:
        out_json(summary, order="sorted")  # the bytes of the dict it was
        return
    now = summary.now
    out(f"ledger time: {msgspec.to_builtins(now) if now is not None else '(empty log)'}")
    out(f"open streaks: {len(summary.open_streaks)}")
    table(
        msgspec.to_builtins(summary.open_streaks), ["run", "since", "age_s", "failures", "step", "error_class", "error"]
    )
    out(f"dead-letters: {summary.dead_letters}")
    for key, counts in (
        ("by_step", summary.dead_letters_by_step),
        ("by_error_class", summary.dead_letters_by_error_class),
    ):
        for name, n in counts.items():
            out(f"  {key} {name}: {n}")


def _view_names() -> list[str]:
    from epochledger.reports import VIEW_NAMES

    return list(VIEW_NAMES)


@command("rebuild", arg("view", nargs="?", choices=Later(_view_names), help="one view (default: all)"), JSON, QUIET)
def cmd_rebuild(ns: argparse.Namespace) -> None:
    """Rebuild views from position zero beside the live ones, then swap them in.

    Readers see the old view until the swap. A rebuild that is killed resumes where it
    stopped. Parked events are retried. All views are rebuilt in one pass over the log
    (each event read once); prints events, seconds and events/s per view (for all
    views, the seconds of the shared pass).

    Example: epochledger rebuild runs
    """
    show_progress = progress(ns)
    with open_ns(ns) as ledger:
        results = ledger.rebuild(ns.view, progress=show_progress)
    if show_progress is not None:
        sys.stderr.write("\n")
    if ns.json:
        out_json(results, order="sorted")  # the bytes of the dicts they were
        return
    for r in results:
        out(
            f"rebuilt {r.view}: {r.events} events in {r.seconds:.2f} s ({r.events_per_second:,} events/s), "
            f"{r.parked} parked, at position {r.position}"
        )


@command(
    "verify",
    arg(
        "--digest",
        action="append",
        default=[],
        metavar="FILE",
        help="a digest from `epochledger digest` to check the log against; give it twice, "
        "older first, to check that the newer extends the older",
    ),
    JSON,
)
def cmd_verify(ns: argparse.Namespace) -> None:
    """Check the log against its hash chain and every live view against a replay of
    the log from zero.

    The chain (rule S1): names the first event altered, removed, inserted or
    reordered (exit 12). With --digest FILE it also catches a log truncated or
    rewritten after that digest was taken; `--digest OLD --digest NEW` also checks
    that NEW extends OLD (exit 12). The views (rule R2): compared row by row up to
    each view's own position; names the first difference (exit 10). A view that was
    never built is reported as such (nothing to compare). Both are checked; exit 12
    wins over 10.

    Example: epochledger verify --digest digests/2026-09-09.json
    """
    from epochledger.digests import read_digest  # the digest file's format: parsing, no ledger

    digests = [read_digest(path) for path in ns.digest]
    with open_ns(ns) as ledger:
        result = ledger.verify(digests)
    if ns.json:
        out_json(result)
    else:
        c = result.chain
        if c.failure is not None:
            out(f"chain: BROKEN at position {c.failure.position} ({c.failure.kind}): {c.failure.message}")
        else:
            out(f"chain: ok ({c.links} events chained, head at position {c.position}, hash {c.hash})")
        for d in c.digests:
            out(f"digest of {d.at}: ok (position {d.position})")
        for r in result.views:
            verdict = "ok" if r.difference is None else "DIFFERS: " + r.difference.message
            if not r.built:
                verdict = f"not built yet, nothing to compare (epochledger rebuild {r.view})"
            out(f"{r.view}: {verdict} (position {r.position}, {r.rows} rows, {r.parked} parked)")
    error = result.error()
    if error is not None:
        raise error


@command("digest", arg("-o", "--output", default="-", help="file to write (default: standard output)"))
def cmd_digest(ns: argparse.Namespace) -> None:
    """Write the hash chain's head as a digest: {"position", "hash", "at"}.

    Keep digests where the ledger's writers cannot reach them (another host, a
    write-once bucket, a ticket): `verify --digest FILE` then catches a log truncated
    or rewritten after it, even by someone who recomputed the chain. The whole log is
    checked against its chain first; a broken chain is refused (exit 12), no digest
    written. -o FILE is written atomically; the ledger's own files are refused (exit 3).

    Example: epochledger digest -o digests/$(date -u +%FT%H%M).json
    """
    from epochledger.digests import encode_digest  # the digest file's format: rendering, no ledger

    with open_ns(ns) as ledger:
        if ns.output == "-":
            sys.stdout.buffer.write(encode_digest(ledger.take_digest()))
            sys.stdout.flush()
        else:
            d = ledger.write_digest(ns.output)
            err(f"digest of position {d.position} written to {ns.output}")


@command(
    "chain",
    arg(
        "--upgrade", action="store_true", help="seal every event past the chain's end (a ledger made before the chain)"
    ),
    JSON,
)
def cmd_chain(ns: argparse.Namespace) -> None:
    """Show the hash chain's state: events linked, the head, anything not linked.

    --upgrade chains a ledger made before rule S1: it creates the chain table if it is
    missing (on PostgreSQL that is the owner's job, as `init`) and links every event
    past the chain's end, in one transaction under the writers' lock, after checking
    the chain before them (a broken chain is refused, exit 12, nothing sealed). It
    says how many events it sealed. Run every writer at this version first: an older
    writer's appends are not linked.

    Example: epochledger chain --upgrade
    """
    from epochledger.reports import chain_error

    with open_ns(ns) as ledger:
        if ns.upgrade:
            sealed = ledger.upgrade_chain()
            if ns.json:
                out_json(sealed)
            else:
                out(
                    ("created the chain table; " if sealed.created else "")
                    + (
                        f"sealed {sealed.sealed} events (positions {sealed.first} to {sealed.position})"
                        if sealed.sealed
                        else "sealed 0 events: every event was already chained"
                    )
                    + f"; head at position {sealed.position}, hash {sealed.hash}"
                )
            return
        report = ledger.chain()
    if ns.json:
        out_json(report)
    else:
        out(f"chain: {report.links} events linked, head at position {report.position}, hash {report.hash}")
        if report.failure is not None:
            out(f"BROKEN at position {report.failure.position} ({report.failure.kind}): {report.failure.message}")
    if (broken := chain_error(report)) is not None:
        raise broken


@command(
    "replay",
    arg("--at", help="an instant with a time zone, e.g. 2026-09-09T14:29:19Z"),
    arg("--position", type=int, help="a notification position"),
    arg(
        "--by",
        choices=["log", "event-time"],
        default="log",
        help="how --at cuts the history: log (the default: a prefix of the log) or event-time "
        "(each stream up to its first event stamped after the instant)",
    ),
    JSON,
)
def cmd_replay(ns: argparse.Namespace) -> None:
    """The fleet's state as of a log position or an instant, and its state hash.

    The same prefix of the log always gives byte-identical state and the same hash.
    --at follows log order: it stops before the first event stamped after the
    instant, so a clock that stepped back cannot reorder history, but an event
    recorded after a later-stamped one (a history imported late) is left out with
    everything after it. --by event-time is for such histories: every stream's events
    up to its own first event stamped after the instant, whenever they were recorded.
    --json prints {"state": ..., "state_hash": ...}: the whole state (every view),
    canonically encoded, and the SHA-256 of exactly those bytes (the hash the text prints).

    Example: epochledger replay --at 2026-09-09T14:29:19Z
             epochledger replay --at 2026-09-09T14:29:19Z --by event-time   (after a late import)
    """
    at = instant(ns.at, "--at")
    with open_ns(ns) as ledger:
        replayed = ledger.replay(position=ns.position, at=at, by=ns.by)
    state = replayed.state
    if ns.json:
        # Keys in sorted order, the state's bytes verbatim: the hash covers exactly them.
        sys.stdout.buffer.write(
            b'{"state":' + replayed.canonical + b',"state_hash":"' + replayed.state_hash.encode() + b'"}\n'
        )
        sys.stdout.flush()
        return
    out(
        f"position {state.position}"
        + (f" (at {state.at.isoformat()})" if state.at else "")
        + f", {state.events} events, state hash {replayed.state_hash}"
    )
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
    after bounded retries (rule T4). `rebuild` retries them.

    Example: epochledger parked --json
    """
    with open_ns(ns) as ledger:
        found = ledger.parked(ns.view)
    if ns.json:
        out_json(found, order="sorted")  # the bytes of the dicts they were
        return
    table(msgspec.to_builtins(found), ["view", "position", "stream", "tag", "attempts", "parked_at", "error"])


def _lock_free_stop() -> threading.Event:
    """follow's stop, set and waited for without the Event's lock. A Ctrl-C
    (KeyboardInterrupt) that lands just after `threading.Event.wait` took its lock, before
    the block that releases it, leaves the lock held (a limit of CPython's signal
    handling), and the `stop.set()` that follows waited forever: `follow` hung after
    Ctrl-C, about once in twenty runs of a test that interrupts just as it waits. The
    command line's follow runs in its main thread alone (PostgreSQL's LISTEN too), so a
    flag and short sleeps serve; a sleep is interrupted cleanly."""
    import threading
    import time

    class Stop(threading.Event):
        def __init__(self) -> None:
            super().__init__()
            self.flag = False

        def is_set(self) -> bool:
            return self.flag

        def set(self) -> None:
            self.flag = True

        def wait(self, timeout: float | None = None) -> bool:
            end = None if timeout is None else time.monotonic() + timeout
            while not self.flag:
                left = 0.05 if end is None else min(0.05, end - time.monotonic())
                if left <= 0:
                    break
                time.sleep(left)
            return self.flag

    return Stop()


@command(
    "follow",
    arg("--poll", type=float, default=0.2, help="seconds between polls on SQLite (from 0.01 to 3600, default 0.2)"),
    QUIET,
)
def cmd_follow(ns: argparse.Namespace) -> None:
    """Keep every view caught up with the log until interrupted (Ctrl-C, exit 130): polling
    on SQLite, the library's LISTEN/NOTIFY subscription on PostgreSQL.

    Each batch applied is a line on standard output. On a terminal, standard error
    shows the catch-up's progress and then where the views are, waiting (--quiet: not).

    Example: epochledger follow
    """
    stop = _lock_free_stop()
    shown = Progress(ns)

    def report(stats: list[Any]) -> None:
        shown.clear()
        out(", ".join(f"{s.view} +{s.events} -> {s.position}" for s in stats if s.events))
        shown.show(
            f"following: views at position {max(s.position for s in stats)}, waiting for events (Ctrl-C to stop)",
            now=True,
        )

    with open_ns(ns) as ledger:
        shown.show(
            f"following {ledger.url}, the log at position {ledger.head()}: views caught "
            "up as events arrive (Ctrl-C to stop)",
            now=True,
        )
        try:
            ledger.follow(stop=stop, poll=ns.poll, on_batch=report, progress=shown.views if shown.on else None)
        except KeyboardInterrupt:
            stop.set()  # the PostgreSQL listener's thread ends with it
            raise  # main says it: one line, exit 130
