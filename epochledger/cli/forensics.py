"""Commands for an incident responder: whatif (rule R4) and timeline (rule V1).

docs/forensics.md walks through an incident with both.
"""

from __future__ import annotations

import argparse

from epochledger.cli.common import JSON, arg, command, instant, open_ns, out, out_json


@command(
    "whatif",
    arg(
        "--policy",
        required=True,
        metavar="NAME[:ARG]",
        help="the alternative orphan policy: flat-age:D, floor:D, clamp, heartbeat:D, epoch (the recorded "
        "rule), or one installed under the entry point group epochledger.policies; D is 90s, 30m, 1h30m "
        "or seconds",
    ),
    arg("--at", help="replay up to this instant (with a time zone), as `replay --at` cuts the log"),
    JSON,
)
def cmd_whatif(ns: argparse.Namespace) -> None:
    """Replay the recorded history under another orphan policy and list every verdict
    that differs from the recorded sweeps (rule R4).

    At each decision point the record holds (every boot's sweep, and any later sweep)
    the alternative judges the orphans view exactly as the sweep saw it. Listed:
    runs it would have killed while their owner was live (owner, age, last
    checkpoint, what happened next), orphans it would have missed (how long they
    would have stayed running) or found late, and orphans it would have found before
    any recorded sweep. An unknown policy or a bad argument exits 3.

    Example: epochledger whatif --policy flat-age:30m --at 2026-09-09T15:00:00Z
    """
    from epochledger.reports import check_policy

    at = instant(ns.at, "--at")
    policy = check_policy(ns.policy)  # before opening the store: a typo is refused without reading it
    with open_ns(ns) as ledger:
        result = ledger.whatif(policy, at=at, name=ns.policy)
    if ns.json:
        out_json(result)
        return
    upto = f" up to position {result.position}" + (f" ({result.at.isoformat()})" if result.at else "")
    out(
        f"policy {result.policy}: {result.sweeps} sweeps replayed{upto}, "
        f"{len(result.differences)} verdicts differ from the recorded rule's"
    )
    for d in result.differences:
        out(f"  {d.kind:<11} {d.message}" + (f"; the record: {d.then}" if d.then else ""))


@command(
    "timeline",
    arg("--from", dest="start", metavar="T", help="the window's start (default: the history's first instant)"),
    arg("--to", dest="end", metavar="T", help="the window's end (default: the history's last instant)"),
    arg("--at", metavar="T", help="draw the cursor at this instant (the one under investigation)"),
    arg(
        "--run",
        action="extend",
        nargs="+",
        metavar="R",
        help="only these runs (--run a b, or --run a --run b) and the lanes they are in",
    ),
    arg(
        "--policy",
        metavar="NAME[:ARG]",
        help="flag each verdict this orphan policy gives differently from the recorded sweeps on its run "
        "(the what-if of `whatif --policy`, rule R4)",
    ),
    arg("--upto", metavar="T", help="with --policy: replay the what-if up to this instant, as `whatif --at` does"),
    arg("-o", "--output", required=True, metavar="FILE.html", help="the page to write (atomically)"),
)
def cmd_timeline(ns: argparse.Namespace) -> None:
    """Write the incident's picture: one self-contained HTML page (rule V1).

    A lane per process slot with its epochs (boot, clean stop, supersession), the
    slot's runs as bars coloured by status (failure codes beside them), and markers for
    sweeps, recoveries, fenced late reports and corrections; a cursor at --at; a
    legend; hover shows each element's details. Inline SVG and CSS: nothing is fetched.
    The page is a pure function of the log: the same history gives the same bytes.
    With --policy, each verdict the what-if gives differently is a flag of its kind on
    its run, named beside the run and in the legend and the cursor's panel, as the
    console's incident page draws it with policy=; an unknown policy or a bad argument
    exits 3 before the log is read, as does --upto without --policy.

    Example: epochledger timeline --at 2026-09-09T14:20:00Z -o incident.html
             epochledger timeline --policy flat-age:30m --at 2026-09-09T14:20:00Z -o whatif.html
    """
    from epochledger.ledger.errors import InvalidInput
    from epochledger.reports import check_policy

    start, end, at = instant(ns.start, "--from"), instant(ns.end, "--to"), instant(ns.at, "--at")
    upto = instant(ns.upto, "--upto")
    if upto is not None and ns.policy is None:
        raise InvalidInput("cuts the what-if's replay: it needs --policy", where="--upto")
    policy = None if ns.policy is None else check_policy(ns.policy)  # refused before the store is opened
    with open_ns(ns) as ledger:
        written = ledger.timeline(
            ns.output, start=start, end=end, cursor=at, runs=ns.run, policy=policy, upto=upto, name=ns.policy
        )
    out(f"wrote {written.path} ({written.size:,} bytes)")
